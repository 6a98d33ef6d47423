// sk_bench_kernels cases of the general tensor kernels (tensor.*), each beside the specialised
// kernel that does the same work where one exists, so one run gives the ratio:
//   tensor_add_16x4096 vs add_f32_16x4096, tensor_silu vs silu_mul (one more operand),
//   tensor_sum_rows (reduce) vs rms_norm, tensor_argmax vs argmax.f32 (128k vocabulary),
//   tensor_mm_rows_4096 (b row-major, x @ W) vs gemv_f32_4096 (matmul.f32, x @ W.t()),
//   tensor_sdpa_decode vs paged_attn_f32 (Llama-8B shape, 2048 keys).
#include "kernel_bench.h"
#include "superkernel/attrs_core.h"
#include "superkernel/attrs_tensor.h"

namespace sk::bench {

SK_KERNEL_BENCH(tensor_cases) {
  std::vector<KernelBenchCase> cases;
  const int64_t rows = 16, d = 4096;
  const double rw = 4.0 * rows * d;
  cases.push_back({"tensor_add_16x4096",
                   "tensor.binary",
                   {Act({rows, d}), Act({rows, d})},
                   {TensorSpec(DType::kF32, {rows, d})},
                   bench_attrs(sk_binary_attrs{SK_BINARY_ADD}),
                   3 * rw,
                   1.0 * rows * d,
                   {},
                   {}});
  cases.push_back({"add_f32_16x4096",
                   "add.f32",
                   {Act({rows, d}), Act({rows, d})},
                   {TensorSpec(DType::kF32, {rows, d})},
                   {},
                   3 * rw,
                   1.0 * rows * d,
                   {},
                   {}});
  cases.push_back({"tensor_silu_16x4096",
                   "tensor.unary",
                   {Act({rows, d}, -6, 6)},
                   {TensorSpec(DType::kF32, {rows, d})},
                   bench_attrs(sk_unary_attrs{SK_UNARY_SILU}),
                   2 * rw,
                   4.0 * rows * d,
                   {},
                   {}});
  cases.push_back({"silu_mul_f32_16x4096",
                   "silu_mul.f32",
                   {Act({rows, d}, -6, 6), Act({rows, d})},
                   {TensorSpec(DType::kF32, {rows, d})},
                   {},
                   3 * rw,
                   5.0 * rows * d,
                   {},
                   {}});
  cases.push_back({"tensor_sum_rows_16x4096",
                   "tensor.reduce",
                   {Act({rows, d})},
                   {TensorSpec(DType::kF32, {rows})},
                   bench_attrs(sk_reduce_attrs{SK_REDUCE_SUM, 0x2, 0}),
                   rw,
                   1.0 * rows * d,
                   {},
                   {}});
  cases.push_back({"tensor_sum_cols_4096x16",
                   "tensor.reduce",
                   {Act({d, rows})},
                   {TensorSpec(DType::kF32, {rows})},
                   bench_attrs(sk_reduce_attrs{SK_REDUCE_SUM, 0x1, 0}),
                   rw,
                   1.0 * rows * d,
                   {},
                   {}});
  const int64_t vocab = 131072;
  cases.push_back({"tensor_argmax_b1_v131072",
                   "tensor.reduce",
                   {Act({1, vocab}, -12, 4)},
                   {TensorSpec(DType::kI64, {1})},
                   bench_attrs(sk_reduce_attrs{SK_REDUCE_ARGMAX, 0x2, 0}),
                   4.0 * vocab,
                   0,
                   {},
                   {}});
  cases.push_back({"tensor_mm_rows_4096",
                   "tensor.batched_mm",
                   {Act({1, d}), Weight(DType::kF32, {d, d})},
                   {TensorSpec(DType::kF32, {1, d})},
                   {},
                   4.0 * d * d + 8.0 * d,
                   2.0 * d * d,
                   {},
                   {}});
  cases.push_back({"tensor_mm_m16_1024",
                   "tensor.batched_mm",
                   {Act({16, 1024}), Weight(DType::kF32, {1024, 1024})},
                   {TensorSpec(DType::kF32, {16, 1024})},
                   {},
                   4.0 * 1024 * 1024 + 8.0 * 16 * 1024,
                   2.0 * 16 * 1024 * 1024,
                   {},
                   {}});
  // Decode attention, Llama-8B heads: 32 query heads on 8 kv heads of 128, 2048 cached keys.
  const int64_t h = 32, hkv = 8, dh = 128, ctx = 2048;
  cases.push_back({"tensor_sdpa_decode_hq32_hkv8_ctx2048",
                   "tensor.sdpa",
                   {Act({1, h, 1, dh}), Act({1, hkv, ctx, dh}), Act({1, hkv, ctx, dh})},
                   {TensorSpec(DType::kF32, {1, h, 1, dh})},
                   bench_attrs(sk_sdpa_attrs{0.08838834764f, 0}),
                   2.0 * 4 * hkv * ctx * dh + 8.0 * h * dh,
                   4.0 * h * ctx * dh,
                   {},
                   {}});
  cases.push_back({"tensor_topk_b1_v131072_k50",
                   "tensor.topk",
                   {Act({1, vocab}, -12, 4)},
                   {TensorSpec(DType::kF32, {1, 50}), TensorSpec(DType::kI64, {1, 50})},
                   bench_attrs(sk_topk_attrs{50, 1, 1}),
                   4.0 * vocab,
                   0,
                   {},
                   {}});
  return cases;
}

}  // namespace sk::bench
