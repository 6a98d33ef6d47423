// Random graph generator for property tests: a DAG of built-in ops over random static shapes,
// with views, optional random fusion scopes and host ops. Deterministic for a given seed.
#ifndef SUPERKERNEL_TESTS_COMMON_RANDOM_GRAPH_H_
#define SUPERKERNEL_TESTS_COMMON_RANDOM_GRAPH_H_

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/moe_block.h"
#include "superkernel/graph.h"
#include "superkernel/ops.h"

namespace sk::testing {

struct RandomGraphOptions {
  int min_ops = 4;
  int max_ops = 30;
  bool scopes = false;    // wrap random runs of ops in random fusion scopes
  bool host_ops = false;  // insert host ops (never fusible)
  // Streams: ops spread over this many streams (1: all on the default stream), with random
  // events between them and, with core_limits, a random LimitCoreNum per stream (0 to 2).
  int streams = 1;
  bool core_limits = false;
  // Now and then a prefetch of a random byte range of a weight or earlier tensor, after the
  // latest op's output, on whatever stream is current.
  bool prefetches = false;
  // Now and then a MoE block (tests/common/moe_block.h: router, dispatch, two grouped matmuls,
  // which are tiling-sink kernels, and combine) over a pool tensor, with random expert counts and
  // a bias that often leaves experts empty or draws every token to one.
  bool moe = false;
};

struct RandomGraph {
  std::unique_ptr<Graph> graph;
  std::vector<std::pair<std::string, std::vector<float>>> inputs;  // name -> data
};

inline RandomGraph make_random_graph(uint32_t seed, const RandomGraphOptions& opt = {}) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomGraph out;
  out.graph = std::make_unique<Graph>("random_" + std::to_string(seed));
  Graph& g = *out.graph;

  const int64_t rows = pick(1, 5);
  const int64_t dims[] = {8, 13, 32, 48, 64};
  const int64_t d = dims[pick(0, 4)];
  // A pool of [rows, d] f32 tensors that ops read from and add to.
  std::vector<Tensor> pool;
  for (int i = 0; i < pick(1, 3); ++i) {
    std::string name = "in" + std::to_string(i);
    pool.push_back(g.input(name, DType::kF32, {rows, d}));
    std::vector<float> data(static_cast<size_t>(rows * d));
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (float& x : data) x = dist(rng);
    out.inputs.emplace_back(name, std::move(data));
  }
  auto weight = [&](Shape shape, float scale) {
    std::vector<float> data(static_cast<size_t>(shape_numel(shape)));
    std::uniform_real_distribution<float> dist(-scale, scale);
    for (float& x : data) x = dist(rng);
    return g.constant_f32("w" + std::to_string(g.num_tensors()), shape, data);
  };
  auto any = [&] { return pool[pick(0, static_cast<int>(pool.size()) - 1)]; };

  const int n_ops = pick(opt.min_ops, opt.max_ops);
  std::optional<SuperKernelScope> scope;
  int scope_left = 0;
  std::vector<Stream> streams = {g.current_stream()};
  std::vector<int32_t> stream_limit = {0};
  std::vector<Event> recorded;
  for (int s = 1; s < opt.streams; ++s) {
    streams.push_back(g.create_stream("stream" + std::to_string(s)));
    stream_limit.push_back(0);
  }
  if (opt.core_limits)
    for (int32_t& limit : stream_limit) limit = pick(0, 2);
  for (int i = 0; i < n_ops; ++i) {
    if (opt.streams > 1) {
      // Switch streams now and then; record and wait for events in between.
      if (pick(0, 3) == 0) {
        const int s = pick(0, opt.streams - 1);
        g.set_stream(streams[s]);
        g.set_core_limit(stream_limit[s], stream_limit[s]);
      }
      if (!recorded.empty() && pick(0, 3) == 0) g.wait(recorded[pick(0, static_cast<int>(recorded.size()) - 1)]);
    }
    if (opt.scopes && scope_left == 0) {
      scope.reset();
      int r = pick(0, 9);
      if (r < 6) {
        scope.emplace(g, "scope" + std::to_string(pick(0, 2)));
      } else if (r < 7) {
        scope.emplace(g, "");  // explicit "do not fuse"
      }
      scope_left = pick(1, 8);
    }
    if (scope_left > 0) --scope_left;
    Tensor t;
    switch (pick(0, 10)) {
      case 0:
        t = add(g, any(), any());
        break;
      case 1:
        t = mul(g, any(), any());
        break;
      case 2:
        t = add(g, any(), weight({d}, 1.0f));
        break;  // broadcast
      case 3:
        t = silu_mul(g, any(), any());
        break;
      case 4:
        t = rms_norm(g, any(), weight({d}, 1.0f), 1e-5f);
        break;
      case 5:
        t = softmax(g, any());
        break;
      case 6:
        t = matmul(g, any(), weight({d, d}, 0.2f));
        break;
      case 7: {  // transpose view materialised by copy, then back
        Tensor tr = g.transpose(any(), {1, 0});
        Tensor c = copy(g, tr);
        t = copy(g, g.transpose(c, {1, 0}));
        break;
      }
      case 8: {  // slice view of rows, padded back by adding to a full tensor's slice
        Tensor src = any();
        int64_t r0 = pick(0, static_cast<int>(rows) - 1);
        Tensor s = g.slice(src, 0, r0, r0 + 1);
        Tensor c = copy(g, s);
        t = add(g, any(), g.reshape(c, {d}));
        break;
      }
      case 9: {
        if (opt.host_ops) {
          // A host op inside a fusion scope is a graph break (an error), so leave the scope.
          scope.reset();
          scope_left = 0;
          Tensor src = any();
          t = g.host_op("host" + std::to_string(i),
                        [](HostOpContext& ctx) {
                          const float* x = static_cast<const float*>(ctx.inputs[0].data);
                          float* y = static_cast<float*>(ctx.outputs[0].data);
                          size_t n = ctx.outputs[0].bytes() / sizeof(float);
                          for (size_t k = 0; k < n; ++k) y[k] = 0.5f * x[k];
                          return Status::ok();
                        },
                        {src}, {{DType::kF32, {rows, d}, ""}})[0];
        } else {
          t = mul(g, any(), any());
        }
        break;
      }
      default:
        t = add(g, any(), any());
        break;
    }
    if (opt.moe && pick(0, 3) == 0) {
      MoeBlockShape shape;
      shape.experts = pick(1, 5);
      shape.zero_experts = pick(0, 2);
      shape.top_k = pick(1, std::min(3, shape.experts + shape.zero_experts));
      shape.ffn = 4 << pick(0, 2);
      const float biases[] = {-30.0f, 0.0f, 0.0f, 8.0f};
      std::vector<float> bias(static_cast<size_t>(shape.experts + shape.zero_experts));
      for (float& b : bias) b = biases[pick(0, 3)];
      const MoeBlockWeights w = moe_block_weights(g, shape, d, rng, bias);
      t = moe_block(g, t, shape, w, "moe" + std::to_string(i) + ".").out;
    }
    pool.push_back(t);
    if (opt.prefetches && pick(0, 2) == 0) {
      const Tensor target = pick(0, 1) == 0 ? weight({d, d}, 1.0f) : any();
      const int64_t bytes = static_cast<int64_t>(g.tensor(target).storage_bytes);
      const int64_t offset = pick(0, static_cast<int>(bytes));
      prefetch(g, target, t, pick(0, static_cast<int>(bytes - offset)), offset);
    }
    if (opt.streams > 1 && pick(0, 3) == 0) {
      recorded.push_back(g.create_event("e" + std::to_string(recorded.size())));
      g.record(recorded.back());
    }
  }
  scope.reset();
  g.set_stream(streams[0]);
  g.set_core_limit(0, 0);
  // Outputs: the last tensor and a couple of random ones.
  g.output(pool.back(), "out_last");
  for (int i = 0; i < 2; ++i) {
    Tensor t = pool[pick(0, static_cast<int>(pool.size()) - 1)];
    if (!g.tensor(t).is_output && g.tensor(t).kind != TensorKind::kInput) g.output(t, "out" + std::to_string(i));
  }
  return out;
}

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_COMMON_RANDOM_GRAPH_H_
