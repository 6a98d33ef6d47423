// Random graph generator for property tests: a DAG of ops of every built-in kernel family
// (tests/common/random_ops.h) over random static shapes, with views, optional random fusion
// scopes (with random scope options), host ops, streams, events and core limits. Deterministic
// for a given seed.
#ifndef SUPERKERNEL_TESTS_COMMON_RANDOM_GRAPH_H_
#define SUPERKERNEL_TESTS_COMMON_RANDOM_GRAPH_H_

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/random_ops.h"
#include "superkernel/graph.h"
#include "superkernel/ops.h"

namespace sk::testing {

// How many seeds a random-graph property test runs: `release` scaled by SK_PROPERTY_SCALE (a
// percentage, 100 when unset; the sanitizer test presets set 33, where every graph costs 5 to 20
// times more), at least `min` so the tests' coverage guards keep holding.
inline uint32_t property_seeds(uint32_t release, uint32_t min = 1) {
  const char* env = std::getenv("SK_PROPERTY_SCALE");
  const long percent = env != nullptr && std::atol(env) > 0 ? std::atol(env) : 100;
  return std::max<uint32_t>(min, static_cast<uint32_t>(static_cast<long>(release) * percent / 100));
}

struct RandomGraphOptions {
  // Family instances (each one to a dozen ops) and host ops per graph.
  int min_ops = 4;
  int max_ops = 16;
  bool scopes = false;         // wrap random runs of ops in random fusion scopes
  bool scope_options = false;  // give each scope random (valid) scope options
  bool host_ops = false;       // insert host ops (never fusible)
  // Streams: ops spread over this many streams (1: all on the default stream), with random
  // events between them and, with core_limits, a random LimitCoreNum per stream (0 to 2).
  int streams = 1;
  bool core_limits = false;
  // Now and then an extra prefetch (random byte range of a weight or earlier tensor) or MoE
  // layer (whose grouped matmuls are tiling-sink kernels) after an op, besides those drawn as
  // families.
  bool prefetches = false;
  bool moe = false;
  // The families ops are drawn from; empty: every family.
  std::vector<Family> families;
};

struct RandomGraph {
  std::unique_ptr<Graph> graph;
  std::vector<InputBytes> inputs;                                 // name -> bytes, every graph input
  std::vector<int> families = std::vector<int>(kNumFamilies, 0);  // instances built per family
  std::map<std::string, std::string> scope_options;               // scope name -> its option string
};

// Random valid scope options: up to three distinct keys. With several streams every scope
// needs stream fusion (a scope on two streams without it is a compile error), so
// `multi_stream` adds stream-fusion=1.
inline std::string random_scope_options(const Pick& pick, bool multi_stream) {
  static const char* const kFragments[][3] = {
      {"early-start=0", "early-start=1", "early-start=2"},
      {"sync-choice=p2p", "sync-choice=cost", "sync-choice=cost"},
      {"recompute=0", "recompute=1", "recompute=1"},
      {"tiling-sink=0", "tiling-sink=1", "tiling-sink=0"},
      {"preload-code=none", "preload-code=per-func", "preload-code=max"},
      {"func-align=0", "func-align=64", "func-align=256"},
      {"split-mode=1", "split-mode=2", "split-mode=3"},
      {"debug-sync-all=0", "debug-sync-all=1", "profiling=1"},
      {"debug-aiv-num=1", "debug-aic-num=1:debug-aiv-num=1", "debug-aic-num=1:debug-aiv-num=2"},
  };
  constexpr int kKeys = static_cast<int>(sizeof kFragments / sizeof kFragments[0]);
  std::vector<bool> used(kKeys, false);
  std::string out = multi_stream ? "stream-fusion=1" : "";
  for (int n = pick(0, 3); n > 0; --n) {
    const int key = pick(0, kKeys - 1);
    if (used[static_cast<size_t>(key)]) continue;
    used[static_cast<size_t>(key)] = true;
    if (!out.empty()) out += ":";
    out += kFragments[key][pick(0, 2)];
  }
  return out;
}

inline RandomGraph make_random_graph(uint32_t seed, const RandomGraphOptions& opt = {}) {
  std::mt19937 rng(seed);
  Pick pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomGraph out;
  out.graph = std::make_unique<Graph>("random_" + std::to_string(seed));
  Graph& g = *out.graph;

  // Now and then more than 16 rows, the split granularity of some kernels (quantize.i8, the
  // matmul driver's row blocks).
  const int64_t rows = pick(0, 5) == 0 ? pick(16, 20) : pick(1, 5);
  const int64_t dims[] = {8, 13, 32, 48, 64};
  const int64_t d = dims[pick(0, 4)];
  // A pool of [rows, d] f32 tensors that ops read from and add to.
  std::vector<Tensor> pool;
  for (int i = 0, n = pick(1, 3); i < n; ++i) {
    std::string name = "in" + std::to_string(i);
    pool.push_back(g.input(name, DType::kF32, {rows, d}));
    std::vector<float> data(static_cast<size_t>(rows * d));
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (float& x : data) x = dist(rng);
    InputBytes in{name, std::vector<uint8_t>(data.size() * sizeof(float))};
    std::memcpy(in.bytes.data(), data.data(), in.bytes.size());
    out.inputs.push_back(std::move(in));
  }
  RandomOps ops(g, pick, seed * 2654435761u + 1, rows, d, &out.inputs);
  std::vector<Family> families = opt.families;
  if (families.empty())
    for (int f = 0; f < kNumFamilies; ++f) families.push_back(static_cast<Family>(f));

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
        // One option string per scope name: the blocks of one name are one fusion range.
        const std::string name = "scope" + std::to_string(pick(0, 2));
        if (!out.scope_options.count(name))
          out.scope_options[name] = opt.scope_options ? random_scope_options(pick, opt.streams > 1) : "";
        scope.emplace(g, name, out.scope_options[name]);
      } else if (r < 7) {
        scope.emplace(g, "");  // explicit "do not fuse"
      }
      scope_left = pick(1, 8);
    }
    if (scope_left > 0) --scope_left;
    Tensor t;
    if (opt.host_ops && pick(0, 9) == 0) {
      // A host op inside a fusion scope is a graph break (an error), so leave the scope.
      scope.reset();
      scope_left = 0;
      Tensor src = pool[pick(0, static_cast<int>(pool.size()) - 1)];
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
      t = ops.build(families[static_cast<size_t>(pick(0, static_cast<int>(families.size()) - 1))], pool);
    }
    pool.push_back(t);
    if (opt.moe && pick(0, 3) == 0) pool.push_back(ops.build(Family::kMoe, pool));
    if (opt.prefetches && pick(0, 2) == 0) ops.build(Family::kPrefetch, pool);
    if (opt.streams > 1 && pick(0, 3) == 0) {
      recorded.push_back(g.create_event("e" + std::to_string(recorded.size())));
      g.record(recorded.back());
    }
  }
  scope.reset();
  g.set_stream(streams[0]);
  g.set_core_limit(0, 0);
  // Outputs: the last tensor, a couple of random ones, and now and then caches, router ids,
  // expert counts and the in-place state.
  auto output = [&](Tensor t, const std::string& name) {
    if (!g.tensor(t).is_output && g.tensor(t).kind != TensorKind::kInput) g.output(t, name);
  };
  output(pool.back(), "out_last");
  for (int i = 0; i < 2; ++i) output(pool[pick(0, static_cast<int>(pool.size()) - 1)], "out" + std::to_string(i));
  int side = 0;
  for (Tensor t : ops.side_outputs())
    if (pick(0, 1) == 0) output(t, "side" + std::to_string(side++));
  out.families = ops.built();
  return out;
}

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_COMMON_RANDOM_GRAPH_H_
