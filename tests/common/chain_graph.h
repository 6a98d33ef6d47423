// A decode-like chain for runtime tests: matvec, rms_norm and element-wise ops, several
// sub-kernels per core, fused as one scope when `scoped` (input "x" [1, 96], output "y").
#ifndef SUPERKERNEL_TESTS_COMMON_CHAIN_GRAPH_H_
#define SUPERKERNEL_TESTS_COMMON_CHAIN_GRAPH_H_

#include <memory>
#include <optional>

#include "common/test_runtime.h"
#include "superkernel/ops.h"

namespace sk::testing {

inline constexpr int64_t kChainWidth = 96;

inline std::unique_ptr<Graph> decode_chain(bool scoped) {
  auto g = std::make_unique<Graph>("chain");
  const int64_t n = kChainWidth;
  Tensor x = g->input("x", DType::kF32, {1, n});
  Tensor w = g->constant_f32("w", {n, n}, random_floats(n * n, 1, -0.1f, 0.1f));
  Tensor gamma = g->constant_f32("gamma", {n}, random_floats(n, 2, 0.9f, 1.1f));
  Tensor bias = g->constant_f32("bias", {1, n}, random_floats(n, 3));
  std::optional<SuperKernelScope> scope;
  if (scoped) scope.emplace(*g, "chain");
  Tensor t = x;
  for (int i = 0; i < 6; ++i) t = add(*g, mul(*g, rms_norm(*g, matmul(*g, t, w), gamma, 1e-6f), t), bias);
  scope.reset();
  g->output(t, "y");
  return g;
}

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_COMMON_CHAIN_GRAPH_H_
