// sk_bench_kernels cases of the matmul family. `bytes` counts what a kernel must move at least:
// every weight byte once (only the active experts' for the grouped matmuls), activations in,
// outputs out, scales. matmul.f32 at the same shapes is in kernels_core.cc.
//
// Reading the table: GEMV rows (weights far beyond the LLC) are bandwidth figures to hold
// against stream_triad; W8A8 moves half the bytes of bf16 on the same shape, so its us/call
// should approach half of bf16's, and the 4-bit rows a quarter (oneDNN has no 4-bit matmul: hold
// them against the int8 rows and the triad).
#include "kernel_bench.h"

namespace sk::bench {
namespace {

BenchInput Int8(Shape s, bool weight) { return {DType::kI8, std::move(s), -127, 127, weight, {}}; }
BenchInput Scales(Shape s, bool weight) { return {DType::kF32, std::move(s), 0.001, 0.02, weight, {}}; }
BenchInput F16Scales(Shape s) { return {DType::kF16, std::move(s), 0.001, 0.02, true, {}}; }
BenchInput Zeros(Shape s) { return {DType::kI8, std::move(s), 0, 15, true, {}}; }

}  // namespace

SK_KERNEL_BENCH(matmul_family_cases) {
  std::vector<KernelBenchCase> cases;
  // GEMV with weights beyond the 32 MiB LLC: bf16 / f16 8192 x 8192 = 128 MiB, int8 = 64 MiB, 4-bit
  // = 32 MiB plus 2 MiB of f16 scales (group 32) or 0.5 MiB (group 128).
  {
    const int64_t n = 8192, k = 8192;
    cases.push_back({"gemv_f16_8192",
                     "matmul.f16",
                     {Act({1, k}), Weight(DType::kF16, {n, k})},
                     {TensorSpec(DType::kF32, {1, n})},
                     {},
                     2.0 * n * k + 4.0 * (k + n),
                     2.0 * n * k,
                     {1, n, k, "f16"},
                     {}});
    for (int64_t g : {32, 128}) {
      const std::string gs = "_g" + std::to_string(g);
      const double w4_bytes = 0.5 * n * k + 2.0 * n * (k / g);  // nibbles + f16 scales
      cases.push_back({"gemv_w4a8_dyn_8192" + gs,
                       "matmul.w4a8_dyn",
                       {Act({1, k}), Int8({n, k / 2}, true), F16Scales({k / g, n})},
                       {TensorSpec(DType::kF32, {1, n})},
                       {},
                       w4_bytes + 4.0 * (k + n),
                       2.0 * n * k,
                       {},
                       {}});
      cases.push_back({"gemv_w4a8_dyn_8192" + gs + "_zeros",
                       "matmul.w4a8_dyn",
                       {Act({1, k}), Int8({n, k / 2}, true), F16Scales({k / g, n}), Zeros({k / g, n})},
                       {TensorSpec(DType::kF32, {1, n})},
                       {},
                       w4_bytes + 1.0 * n * (k / g) + 4.0 * (k + n),
                       2.0 * n * k,
                       {},
                       {}});
      // The same weights in the tiled layout (docs/kernels_matmul.md): one stream per core.
      cases.push_back({"gemv_w4a8_dyn_8192" + gs + "_tiled",
                       "matmul.w4a8_dyn",
                       {Act({1, k}), Int8({n / 16, k / 128, 16, 64}, true), F16Scales({n / 16, k / g, 16})},
                       {TensorSpec(DType::kF32, {1, n})},
                       {},
                       w4_bytes + 4.0 * (k + n),
                       2.0 * n * k,
                       {},
                       {}});
      cases.push_back({"gemv_w4_8192" + gs,
                       "matmul.w4",
                       {Act({1, k}), Int8({n, k / 2}, true), F16Scales({k / g, n})},
                       {TensorSpec(DType::kF32, {1, n})},
                       {},
                       w4_bytes + 4.0 * (k + n),
                       2.0 * n * k,
                       {},
                       {}});
    }
    // Short rows (K = 1024, 512 bytes of 4-bit values), beyond the LLC as well (32 MiB + 4 MiB
    // of scales): the shape of a small model's decode, where the row layout's many short streams
    // read slower than the tiled layout's one.
    {
      const int64_t ns = 65536, ks = 1024, g = 32;
      const double bytes = 0.5 * ns * ks + 2.0 * ns * (ks / g) + 4.0 * (ks + ns);
      cases.push_back({"gemv_w4a8_dyn_65536x1024_g32",
                       "matmul.w4a8_dyn",
                       {Act({1, ks}), Int8({ns, ks / 2}, true), F16Scales({ks / g, ns})},
                       {TensorSpec(DType::kF32, {1, ns})},
                       {},
                       bytes,
                       2.0 * ns * ks,
                       {},
                       {}});
      cases.push_back({"gemv_w4a8_dyn_65536x1024_g32_tiled",
                       "matmul.w4a8_dyn",
                       {Act({1, ks}), Int8({ns / 16, ks / 128, 16, 64}, true), F16Scales({ns / 16, ks / g, 16})},
                       {TensorSpec(DType::kF32, {1, ns})},
                       {},
                       bytes,
                       2.0 * ns * ks,
                       {},
                       {}});
    }
    // 16-bit weights on short rows (K = 1024, 2 KiB a row; 128 MiB in all): a small model's
    // decode, where a tile's rows are short streams.
    for (const char* dt : {"bf16", "f16"}) {
      const int64_t ns = 65536, ks = 1024;
      const DType type = std::string(dt) == "bf16" ? DType::kBF16 : DType::kF16;
      cases.push_back({std::string("gemv_") + dt + "_65536x1024",
                       std::string("matmul.") + dt,
                       {Act({1, ks}), Weight(type, {ns, ks})},
                       {TensorSpec(DType::kF32, {1, ns})},
                       {},
                       2.0 * ns * ks + 4.0 * (ks + ns),
                       2.0 * ns * ks,
                       {1, ns, ks, dt},
                       {}});
    }
    // int8 weights on short rows (128 MiB): K = 1024 (1 KiB a row) is a small model's W8A8
    // decode, K = 2048 a medium one's.
    for (const int64_t ks : {int64_t{1024}, int64_t{2048}}) {
      const int64_t ns = 131072 * 1024 / ks;
      cases.push_back({"gemv_w8a8_dyn_" + std::to_string(ns) + "x" + std::to_string(ks),
                       "matmul.w8a8_dyn",
                       {Act({1, ks}), Int8({ns, ks}, true), Scales({ns}, true)},
                       {TensorSpec(DType::kF32, {1, ns})},
                       {},
                       1.0 * ns * ks + 4.0 * ks + 8.0 * ns,
                       2.0 * ns * ks,
                       {1, ns, ks, "s8"},
                       {}});
    }
    cases.push_back({"gemv_bf16_8192",
                     "matmul.bf16",
                     {Act({1, k}), Weight(DType::kBF16, {n, k})},
                     {TensorSpec(DType::kF32, {1, n})},
                     {},
                     2.0 * n * k + 4.0 * (k + n),
                     2.0 * n * k,
                     {1, n, k, "bf16"},
                     {}});
    cases.push_back({"gemv_w8a8_8192",
                     "matmul.w8a8",
                     {Int8({1, k}, false), Scales({1}, false), Int8({n, k}, true), Scales({n}, true)},
                     {TensorSpec(DType::kF32, {1, n})},
                     {},
                     1.0 * n * k + k + 4.0 + 8.0 * n,
                     2.0 * n * k,
                     {1, n, k, "s8"},
                     {}});
    cases.push_back({"gemv_w8a8_dyn_8192",
                     "matmul.w8a8_dyn",
                     {Act({1, k}), Int8({n, k}, true), Scales({n}, true)},
                     {TensorSpec(DType::kF32, {1, n})},
                     {},
                     1.0 * n * k + 4.0 * k + 8.0 * n,
                     2.0 * n * k,
                     {1, n, k, "s8"},
                     {}});
  }
  // Decode-shaped GEMM on 4096 x 4096 (bf16 32 MiB, int8 16 MiB, 4-bit 8 MiB: around and below the
  // LLC): batched decode and prefill chunks.
  for (int64_t m : {1, 4, 16, 32, 64}) {
    const int64_t n = 4096, k = 4096;
    const std::string suffix = "_m" + std::to_string(m) + "_4096";
    cases.push_back({"gemm_f16" + suffix,
                     "matmul.f16",
                     {Act({m, k}), Weight(DType::kF16, {n, k})},
                     {TensorSpec(DType::kF32, {m, n})},
                     {},
                     2.0 * n * k + 4.0 * m * (n + k),
                     2.0 * m * n * k,
                     {m, n, k, "f16"},
                     {}});
    cases.push_back({"gemm_w4a8_dyn" + suffix + "_g128",
                     "matmul.w4a8_dyn",
                     {Act({m, k}), Int8({n, k / 2}, true), F16Scales({k / 128, n})},
                     {TensorSpec(DType::kF32, {m, n})},
                     {},
                     0.5 * n * k + 2.0 * n * (k / 128) + 4.0 * m * (n + k),
                     2.0 * m * n * k,
                     {},
                     {}});
    cases.push_back({"gemm_bf16" + suffix,
                     "matmul.bf16",
                     {Act({m, k}), Weight(DType::kBF16, {n, k})},
                     {TensorSpec(DType::kF32, {m, n})},
                     {},
                     2.0 * n * k + 4.0 * m * (n + k),
                     2.0 * m * n * k,
                     {m, n, k, "bf16"},
                     {}});
    cases.push_back({"gemm_w8a8" + suffix,
                     "matmul.w8a8",
                     {Int8({m, k}, false), Scales({m}, false), Int8({n, k}, true), Scales({n}, true)},
                     {TensorSpec(DType::kF32, {m, n})},
                     {},
                     1.0 * n * k + m * (k + 4.0 + 4.0 * n) + 4.0 * n,
                     2.0 * m * n * k,
                     {m, n, k, "s8"},
                     {}});
    cases.push_back({"gemm_w8a8_dyn" + suffix,
                     "matmul.w8a8_dyn",
                     {Act({m, k}), Int8({n, k}, true), Scales({n}, true)},
                     {TensorSpec(DType::kF32, {m, n})},
                     {},
                     1.0 * n * k + 4.0 * m * (n + k) + 4.0 * n,
                     2.0 * m * n * k,
                     {m, n, k, "s8"},
                     {}});
  }
  {
    const int64_t m = 16, k = 4096;
    cases.push_back({"quantize_i8_16x4096",
                     "quantize.i8",
                     {Act({m, k}, -4, 4)},
                     {TensorSpec(DType::kI8, {m, k}), TensorSpec(DType::kF32, {m})},
                     {},
                     5.0 * m * k + 4.0 * m,
                     0,
                     {},
                     {}});
  }
  // MoE decode: 8 experts of 4096 -> 1408, 16 tokens routed top-2 (32 rows), evenly and skewed.
  {
    const int64_t e = 8, k = 4096, n = 1408, r = 32;
    struct Routing {
      const char* name;
      std::vector<double> counts;
    };
    for (const Routing& rt :
         {Routing{"even", {4, 4, 4, 4, 4, 4, 4, 4}}, Routing{"skewed", {20, 8, 4, 0, 0, 0, 0, 0}}}) {
      int64_t active = 0;
      for (double c : rt.counts) active += c > 0 ? 1 : 0;
      const BenchInput counts{DType::kI32, {e}, 0, 0, false, rt.counts};
      const double act = 4.0 * r * (k + n) + 4.0 * e;
      const std::string suffix = std::string("_e8_4096x1408_") + rt.name;
      cases.push_back({"grouped_f32" + suffix,
                       "grouped_matmul.f32",
                       {Act({r, k}), counts, Weight(DType::kF32, {e, n, k})},
                       {TensorSpec(DType::kF32, {r, n})},
                       {},
                       4.0 * active * n * k + act,
                       2.0 * r * n * k,
                       {},
                       {}});
      cases.push_back({"grouped_bf16" + suffix,
                       "grouped_matmul.bf16",
                       {Act({r, k}), counts, Weight(DType::kBF16, {e, n, k})},
                       {TensorSpec(DType::kF32, {r, n})},
                       {},
                       2.0 * active * n * k + act,
                       2.0 * r * n * k,
                       {},
                       {}});
      cases.push_back({"grouped_w8a8_dyn" + suffix,
                       "grouped_matmul.w8a8_dyn",
                       {Act({r, k}), counts, Int8({e, n, k}, true), Scales({e, n}, true)},
                       {TensorSpec(DType::kF32, {r, n})},
                       {},
                       1.0 * active * n * k + 4.0 * active * n + act,
                       2.0 * r * n * k,
                       {},
                       {}});
    }
  }
  return cases;
}

}  // namespace sk::bench
