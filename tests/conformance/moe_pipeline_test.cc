// End-to-end conformance of a LongCat-Flash-style MoE layer built from kernels:
//
//   logits = matmul(x, w_router)                       [T, E + Z]
//   ids, weights = moe_router(logits, bias)            top-k, ids >= E are identity experts
//   x_sorted, counts, row_map = moe_dispatch(x, ids)
//   y = grouped_matmul(silu_mul(grouped_matmul(x_sorted, w_gate), grouped_matmul(x_sorted, w_up)), w_down)
//   out = moe_combine(y, row_map, weights, x)
//
// in eager, graph and superkernel mode (one fusion scope) on 1-3 cores: every run bit-identical,
// and the first within tolerance of a plain double-precision evaluation of the whole layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "common/test_runtime.h"
#include "superkernel/attrs_moe.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

struct Layer {
  int64_t t = 0;
  int64_t d = 48;  // hidden
  int64_t f = 24;  // expert intermediate
  int32_t e = 8;   // routed experts
  int32_t z = 4;   // zero-computation experts
  int32_t k = 3;
  float scale = 1.5f;
  std::vector<float> x, w_router, bias, w_gate, w_up, w_down;

  int64_t n() const { return e + z; }
};

Layer make_layer(int64_t tokens) {
  Layer l;
  l.t = tokens;
  l.x = testing::random_floats(static_cast<size_t>(l.t * l.d), 1);
  l.w_router = testing::random_floats(static_cast<size_t>(l.n() * l.d), 2, -0.5f, 0.5f);
  l.bias = testing::random_floats(static_cast<size_t>(l.n()), 3, -0.05f, 0.05f);
  l.w_gate = testing::random_floats(static_cast<size_t>(l.e * l.f * l.d), 4, -0.3f, 0.3f);
  l.w_up = testing::random_floats(static_cast<size_t>(l.e * l.f * l.d), 5, -0.3f, 0.3f);
  l.w_down = testing::random_floats(static_cast<size_t>(l.e * l.d * l.f), 6, -0.3f, 0.3f);
  return l;
}

Graph build(const Layer& l) {
  Graph g("moe_layer");
  Tensor x = g.input("x", DType::kF32, {l.t, l.d});
  Tensor w_router = g.constant_f32("w_router", {l.n(), l.d}, l.w_router);
  Tensor bias = g.constant_f32("bias", {l.n()}, l.bias);
  Tensor w_gate = g.constant_f32("w_gate", {l.e, l.f, l.d}, l.w_gate);
  Tensor w_up = g.constant_f32("w_up", {l.e, l.f, l.d}, l.w_up);
  Tensor w_down = g.constant_f32("w_down", {l.e, l.d, l.f}, l.w_down);
  const int64_t rows = l.t * l.k;
  {
    SuperKernelScope scope(g, "moe");
    Tensor logits = matmul(g, x, w_router, "router_logits");
    const sk_moe_router_attrs ra{l.k, l.e, SK_MOE_SCORING_SOFTMAX, 0, l.scale};
    std::vector<uint8_t> rb(sizeof ra);
    std::memcpy(rb.data(), &ra, sizeof ra);
    auto routed = call_kernel(g, "moe_router.f32", {logits, bias},
                              {{DType::kI32, {l.t, l.k}}, {DType::kF32, {l.t, l.k}}}, rb, "router");
    const sk_moe_dispatch_attrs da{l.e, l.z};
    std::vector<uint8_t> db(sizeof da);
    std::memcpy(db.data(), &da, sizeof da);
    auto disp =
        call_kernel(g, "moe_dispatch.f32", {x, routed[0]},
                    {{DType::kF32, {rows, l.d}}, {DType::kI32, {l.e}}, {DType::kI32, {l.t, l.k}}}, db, "dispatch");
    Tensor gate = call_kernel(g, "grouped_matmul.f32", {disp[0], disp[1], w_gate}, {{DType::kF32, {rows, l.f}}}, {},
                              "experts_gate")[0];
    Tensor up = call_kernel(g, "grouped_matmul.f32", {disp[0], disp[1], w_up}, {{DType::kF32, {rows, l.f}}}, {},
                            "experts_up")[0];
    Tensor h = silu_mul(g, gate, up, "experts_act");
    Tensor y =
        call_kernel(g, "grouped_matmul.f32", {h, disp[1], w_down}, {{DType::kF32, {rows, l.d}}}, {}, "experts_down")[0];
    Tensor out =
        call_kernel(g, "moe_combine.f32", {y, disp[2], routed[1], x}, {{DType::kF32, {l.t, l.d}}}, {}, "combine")[0];
    g.output(out, "out");
    g.output(routed[0], "ids");
    g.output(disp[1], "counts");
  }
  return g;
}

struct Expected {
  std::vector<int32_t> ids;
  std::vector<double> out;
};

// The layer in double precision, one (token, slot) at a time, with a full sort for routing.
Expected evaluate(const Layer& l) {
  Expected r;
  r.out.assign(static_cast<size_t>(l.t * l.d), 0.0);
  std::vector<double> score(static_cast<size_t>(l.n()));
  for (int64_t t = 0; t < l.t; ++t) {
    const float* xt = &l.x[static_cast<size_t>(t * l.d)];
    double mx = -INFINITY;
    for (int64_t j = 0; j < l.n(); ++j) {
      double acc = 0.0;
      for (int64_t c = 0; c < l.d; ++c)
        acc += static_cast<double>(xt[c]) * l.w_router[static_cast<size_t>(j * l.d + c)];
      score[static_cast<size_t>(j)] = acc;
      mx = std::max(mx, acc);
    }
    double sum = 0.0;
    for (double& s : score) sum += (s = std::exp(s - mx));
    for (double& s : score) s /= sum;
    std::vector<int64_t> order(static_cast<size_t>(l.n()));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return score[static_cast<size_t>(a)] + l.bias[static_cast<size_t>(a)] >
             score[static_cast<size_t>(b)] + l.bias[static_cast<size_t>(b)];
    });
    for (int32_t s = 0; s < l.k; ++s) {
      const int64_t id = order[static_cast<size_t>(s)];
      r.ids.push_back(static_cast<int32_t>(id));
      const double w = score[static_cast<size_t>(id)] * l.scale;
      std::vector<double> y(xt, xt + l.d);
      if (id < l.e) {
        std::vector<double> h(static_cast<size_t>(l.f));
        for (int64_t i = 0; i < l.f; ++i) {
          double g = 0.0;
          double u = 0.0;
          for (int64_t c = 0; c < l.d; ++c) {
            g += static_cast<double>(xt[c]) * l.w_gate[static_cast<size_t>((id * l.f + i) * l.d + c)];
            u += static_cast<double>(xt[c]) * l.w_up[static_cast<size_t>((id * l.f + i) * l.d + c)];
          }
          h[static_cast<size_t>(i)] = g / (1.0 + std::exp(-g)) * u;
        }
        for (int64_t c = 0; c < l.d; ++c) {
          double acc = 0.0;
          for (int64_t i = 0; i < l.f; ++i)
            acc += h[static_cast<size_t>(i)] * l.w_down[static_cast<size_t>((id * l.d + c) * l.f + i)];
          y[static_cast<size_t>(c)] = acc;
        }
      }
      for (int64_t c = 0; c < l.d; ++c) r.out[static_cast<size_t>(t * l.d + c)] += w * y[static_cast<size_t>(c)];
    }
  }
  return r;
}

class MoePipeline : public ::testing::TestWithParam<int64_t> {};

TEST_P(MoePipeline, EveryModeAndCoreCountIsBitIdenticalAndMatchesTheLayer) {
  const Layer layer = make_layer(GetParam());
  const Graph graph = build(layer);
  ASSERT_TRUE(graph.verify().is_ok()) << graph.verify().to_string();

  testing::RunResult first;
  std::string first_where;
  for (int cores : {1, 2, 3}) {
    auto rt = testing::make_runtime(cores);
    for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
      const std::string where = std::string(execution_mode_name(mode)) + " on " + std::to_string(cores) + " cores";
      auto exe = rt->compile(graph, CompileOptions::for_mode(mode));
      ASSERT_TRUE(exe.has_value()) << where << ": " << exe.status().to_string();
      ASSERT_TRUE((*exe)->set_input("x", layer.x).is_ok());
      // Twice: the second run must not see anything the first left behind.
      for (int run = 0; run < 2; ++run) {
        const Status s = (*exe)->run();
        ASSERT_TRUE(s.is_ok()) << where << ": " << s.to_string();
        testing::RunResult got = testing::collect_outputs(**exe);
        if (first.names.empty()) {
          first = std::move(got);
          first_where = where;
          continue;
        }
        std::string why;
        ASSERT_TRUE(testing::bitwise_equal(got, first, &why))
            << where << " (run " << run << ") vs " << first_where << ": " << why;
      }
    }
  }

  const Expected want = evaluate(layer);
  const auto index_of = [&](const std::string& name) {
    return static_cast<size_t>(std::find(first.names.begin(), first.names.end(), name) - first.names.begin());
  };
  const std::vector<uint8_t>& ids_bytes = first.bytes[index_of("ids")];
  std::vector<int32_t> ids(ids_bytes.size() / 4);
  std::memcpy(ids.data(), ids_bytes.data(), ids_bytes.size());
  ASSERT_EQ(ids, want.ids) << "routing differs from the double-precision layer";
  if (layer.t >= 7) {
    // The data must exercise both kinds of expert for this test to mean anything.
    EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return id >= layer.e; }));
    EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return id < layer.e; }));
  }

  const std::vector<uint8_t>& counts_bytes = first.bytes[index_of("counts")];
  std::vector<int32_t> counts(counts_bytes.size() / 4);
  std::memcpy(counts.data(), counts_bytes.data(), counts_bytes.size());
  for (int32_t e = 0; e < layer.e; ++e) {
    EXPECT_EQ(counts[static_cast<size_t>(e)], std::count(want.ids.begin(), want.ids.end(), e)) << "expert " << e;
  }

  const std::vector<uint8_t>& out_bytes = first.bytes[index_of("out")];
  std::vector<float> out(out_bytes.size() / 4);
  std::memcpy(out.data(), out_bytes.data(), out_bytes.size());
  ASSERT_EQ(out.size(), want.out.size());
  int reported = 0;
  for (size_t i = 0; i < out.size() && reported < 5; ++i) {
    // f32 dot products of length <= 48 and a k-term combine, on values of order 1.
    if (std::fabs(out[i] - want.out[i]) > 1e-4 + 1e-4 * std::fabs(want.out[i])) {
      ADD_FAILURE() << "out[" << i / layer.d << ", " << i % layer.d << "] = " << out[i] << ", layer gives "
                    << want.out[i];
      ++reported;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokens, MoePipeline, ::testing::Values(1, 2, 7, 16),
                         [](const ::testing::TestParamInfo<int64_t>& p) { return "T" + std::to_string(p.param); });

}  // namespace
}  // namespace sk
