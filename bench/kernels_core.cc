// sk_bench_kernels cases of the v0 kernels.
#include "kernel_bench.h"
#include "superkernel/attrs_core.h"

namespace sk::bench {

SK_KERNEL_BENCH(core_cases) {
  std::vector<KernelBenchCase> cases;
  for (int64_t n : {4096, 8192}) {
    // Weights beyond the last-level cache (64 MiB / 256 MiB), so this measures streaming.
    const double bytes = 4.0 * n * n + 8.0 * n;
    cases.push_back({"gemv_f32_" + std::to_string(n),
                     "matmul.f32",
                     {Act({1, n}), Weight(DType::kF32, {n, n})},
                     {TensorSpec(DType::kF32, {1, n})},
                     {},
                     bytes,
                     2.0 * n * n,
                     {1, n, n, "f32"},
                     {}});
  }
  for (int64_t n : {256, 512}) {
    // The dispatch benchmark's matvec: weights stay in L2, so this measures the kernel's own
    // per-call cost and compute rate rather than memory bandwidth.
    cases.push_back({"gemv_f32_" + std::to_string(n) + "_cached",
                     "matmul.f32",
                     {Act({1, n}), Weight(DType::kF32, {n, n})},
                     {TensorSpec(DType::kF32, {1, n})},
                     {},
                     4.0 * n * n + 8.0 * n,
                     2.0 * n * n,
                     {1, n, n, "f32"},
                     {}});
  }
  for (int64_t m : {4, 16, 32, 64}) {
    const int64_t n = 4096, k = 4096;
    cases.push_back({"gemm_f32_m" + std::to_string(m) + "_4096",
                     "matmul.f32",
                     {Act({m, k}), Weight(DType::kF32, {n, k})},
                     {TensorSpec(DType::kF32, {m, n})},
                     {},
                     4.0 * n * k + 4.0 * m * (n + k),
                     2.0 * m * n * k,
                     {m, n, k, "f32"},
                     {}});
  }
  const sk_rms_norm_attrs eps{1e-6f};
  cases.push_back({"rms_norm_f32_16x4096",
                   "rms_norm.f32",
                   {Act({16, 4096}), Weight(DType::kF32, {4096})},
                   {TensorSpec(DType::kF32, {16, 4096})},
                   bench_attrs(eps),
                   4.0 * (2 * 16 * 4096 + 4096),
                   4.0 * 16 * 4096,
                   {},
                   {}});
  cases.push_back({"softmax_f32_16x32768",
                   "softmax.f32",
                   {Act({16, 32768}, -8, 8)},
                   {TensorSpec(DType::kF32, {16, 32768})},
                   {},
                   4.0 * 2 * 16 * 32768,
                   0,
                   {},
                   {}});
  cases.push_back({"silu_mul_f32_16x11008",
                   "silu_mul.f32",
                   {Act({16, 11008}), Act({16, 11008})},
                   {TensorSpec(DType::kF32, {16, 11008})},
                   {},
                   4.0 * 3 * 16 * 11008,
                   0,
                   {},
                   {}});
  return cases;
}

}  // namespace sk::bench
