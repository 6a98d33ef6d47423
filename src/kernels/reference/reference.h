// Reference implementations of the built-in kernels, for tests and benchmarks.
//
// Plain single-threaded scalar C++ that favours obviousness over speed: element-by-element
// loops over multi-indices (any strides), double-precision arithmetic and accumulation. A
// reference takes the same `sk_kernel_args` as the kernel and returns SK_OK or
// SK_ERR_INVALID_ARGUMENT, without a core context.
//
//   const sk::ref::Reference* r = sk::ref::find_reference("rms_norm.f32");
//   r->run(&args);  // fills args.outputs like the kernel would
//
// Tolerances. A kernel output `got` matches the reference output `want` when
//   |got - want| <= abs_tol + rel_tol * |want|   (NaN matches NaN; infinities must be equal)
//
//   kernel         abs_tol  rel_tol  why
//   add.f32        0        0        one f32 operation; the double result rounded to f32 is
//   mul.f32        0        0        the correctly rounded f32 result, as the kernels compute
//   silu_mul.f32   1e-6     1e-5     vector exp() approximations are within ~2 ulp
//   rms_norm.f32   1e-6     1e-5     f32 sum of squares in 8-32 partial sums
//   softmax.f32    1e-7     1e-5     exp() approximation and an f32 row sum; exp of values
//                                    below -87.3 is flushed to 0 (abs_tol covers it)
//   matmul.f32     1e-4     1e-4     f32 dot products in 8-16 partial sums; holds for data in
//                                    [-1, 1] with K <= 4096 (typical errors are ~100x smaller)
//   embedding.f32  0        0        copies
//   copy           0        0        copies (any dtype, compared bytewise)
//   prefetch       -        -        no outputs: checks the operands and the byte range only
//   ---- matmul family ----
//   matmul.bf16    8e-2     1e-4     bf16 weights are exact in f32; at avx512_bf16 x is rounded
//   grouped_matmul.bf16              to bf16 (up to 2^-8 relative per product), an error that
//                                    grows as sqrt(K): 2.5e-3 * sqrt(K) (about 5 sigma) for data
//                                    in [-1, 1], so 8e-2 holds for the test shapes (K <= 1024);
//                                    LongCat's K = 1536 / 6144 need 0.1 / 0.2, observed 0.06 / 0.11
//                                    (docs/kernels_matmul.md). Below avx512_bf16 the paths are
//                                    matmul.f32 on the widened weights, bit for bit, and the direct
//                                    tests hold them to matmul.f32's tolerance.
//   matmul.f16     1e-4     1e-4     f16 weights are exact in f32: matmul.f32 on the widened
//                                    weights at every level, bit for bit (direct tests)
//   grouped_matmul.f32  1e-4 1e-4    as matmul.f32
//   grouped_matmul.f16  1e-4 1e-4    as matmul.f16
//   quantize.i8    0        0        every step is exact or one correctly rounded f32 operation
//   matmul.w8a8    0        0        exact int32 sums, then the documented f32 expression
//   matmul.w8a8_dyn, grouped_matmul.w8a8_dyn  0  0   quantize.i8, then as matmul.w8a8
//   matmul.w4a8_dyn 0       0        quantize.i8, exact int32 group sums, then one f32 fused
//                                    multiply-add per group in group order and one product
//   matmul.w4      1e-4     1e-4     matmul.f32 on the dequantised weights fl(s * (q - z))
//   ---- attention family ----
//   layer_norm.f32        1e-5  1e-5  f32 mean and variance in 8-64 partial sums (two passes)
//   rope.f32              1e-6  1e-5  two products and a sum per element (FMA on wide levels)
//   kv_append.f32         0     0     copies
//   kv_append.bf16        0     0     f32 -> bf16 round to nearest even, bit-exact on every level
//   mla_cache_append.f32  0     0     copies
//   mla_cache_append.bf16 0     0     as kv_append.bf16
//   paged_attention.f32   1e-5  1e-4  f32 dot products, exp() approximation, and an f32 weighted
//   paged_attention.bf16  1e-5  1e-4  sum that adds one token at a time; holds for values in
//   mla_attention.f32     1e-5  1e-4  [-1, 1] and contexts up to a few thousand tokens (typical
//   mla_attention.bf16    1e-5  1e-4  errors are ~1e-6); bf16 caches are compared on the same
//                                     bf16 values, so the cache rounding is not an error
//   paged_attention_prefill.*, mla_attention_prefill.*  1e-5  1e-4  as the decode kernels (each
//                                     token is the decode computation over positions[t] + 1)
//   batched_matmul.f32    1e-4  1e-4  as matmul.f32
//   ---- MoE and sampling family ----
//   moe_router.f32      1e-6  2e-5  weights: the scores use the vector exp() and an f32 sum
//                                   (as softmax.f32), then one f32 division and one multiply.
//                                   topk_ids are compared exactly: the ranking is exact given the
//                                   f32 scores, and test data avoid near-ties below f32 rounding
//   moe_dispatch.f32    0     0     copies and integer bookkeeping
//   moe_combine.f32     1e-5  1e-5  k f32 multiply-adds per element (fused on AVX2/AVX-512);
//   moe_combine_shared.f32          holds for |w|, |y|, |x| <= ~2 and k <= 16
//   argmax.f32          0     0     exact comparisons
//   sample.f32          0     0     the token is specified to the bit: double arithmetic without
//                                   FMA in a fixed order (docs/kernels_moe.md), which the
//                                   reference repeats with a full sort instead of partial selection
//   ---- general tensor family (tensor.*, docs/kernels_tensor.md) ----
//   tensor.unary        1e-6  1e-5  f32 functions: IEEE sqrt and division, and exp / log / tanh
//                                   within a few ulp; erf (gelu) within 1.5e-7 absolute at avx2
//   tensor.binary       1e-37 1e-6  IEEE f32 operations (exact after rounding) except pow:
//   tensor.binary_scalar            powf and the special exponents' products, within 2 ulp;
//                                   integer results exactly
//   tensor.where        0     0     selections
//   tensor.cast         0     0     conversions are specified to the bit
//   tensor.reduce       1e-5  1e-5  f32 sums in 8 partial sums (data in [-1, 1], a few thousand
//                                   elements); max / min / arg* and integers exactly
//   tensor.cumsum       1e-5  1e-5  a running f32 sum (lines of a few hundred elements)
//   tensor.index_select, tensor.gather, tensor.index_copy  0  0  copies
//   tensor.index_put    0     0     copies, or one f32 add per element rounded like the reference's
//   tensor.topk         0     0     a unique order: copies of the chosen elements and their indices
//   tensor.batched_mm   1e-4  1e-4  as matmul.f32 (eight partial sums; data in [-1, 1], K <= 4096)
//   tensor.sdpa         1e-5  1e-4  as paged_attention.f32: f32 dot products, exp() approximation,
//                                   f32 weighted sums (values in [-1, 1], a few thousand keys)
//   bf16 / f16 outputs of a kernel with a non-zero tolerance may also differ by one unit in the
//   last place of that dtype: the kernel rounds its f32 result, the reference its own.
#ifndef SUPERKERNEL_KERNELS_REFERENCE_REFERENCE_H_
#define SUPERKERNEL_KERNELS_REFERENCE_REFERENCE_H_

#include <superkernel/kernel_abi.h>

#include <cstdint>
#include <span>
#include <string_view>

namespace sk::ref {

struct Reference {
  const char* kernel;  // the kernel name it mirrors, e.g. "add.f32"
  int32_t (*run)(const sk_kernel_args* args);
  double abs_tol;
  double rel_tol;
};

// nullptr when no reference mirrors `kernel_name`.
const Reference* find_reference(std::string_view kernel_name);
std::span<const Reference> all_references();

// One function per kernel (elementwise.cc, norm.cc, softmax.cc, matmul.cc, embedding.cc,
// copy.cc).
int32_t add_f32(const sk_kernel_args* args);
int32_t mul_f32(const sk_kernel_args* args);
int32_t silu_mul_f32(const sk_kernel_args* args);
int32_t rms_norm_f32(const sk_kernel_args* args);
int32_t softmax_f32(const sk_kernel_args* args);
int32_t matmul_f32(const sk_kernel_args* args);
int32_t embedding_f32(const sk_kernel_args* args);
int32_t copy(const sk_kernel_args* args);
// prefetch.cc
int32_t prefetch(const sk_kernel_args* args);

// ---- matmul family ----
// matmul_family.cc
int32_t matmul_bf16(const sk_kernel_args* args);
int32_t matmul_f16(const sk_kernel_args* args);
int32_t quantize_i8(const sk_kernel_args* args);
int32_t matmul_w8a8(const sk_kernel_args* args);
int32_t matmul_w8a8_dyn(const sk_kernel_args* args);
int32_t matmul_w4(const sk_kernel_args* args);
int32_t matmul_w4a8_dyn(const sk_kernel_args* args);
int32_t grouped_matmul_f32(const sk_kernel_args* args);
int32_t grouped_matmul_bf16(const sk_kernel_args* args);
int32_t grouped_matmul_f16(const sk_kernel_args* args);
int32_t grouped_matmul_w8a8_dyn(const sk_kernel_args* args);
// ---- attention family ---- (attention.cc)
int32_t layer_norm_f32(const sk_kernel_args* args);
int32_t rope_f32(const sk_kernel_args* args);
int32_t kv_append_f32(const sk_kernel_args* args);
int32_t kv_append_bf16(const sk_kernel_args* args);
int32_t mla_cache_append_f32(const sk_kernel_args* args);
int32_t mla_cache_append_bf16(const sk_kernel_args* args);
int32_t paged_attention_f32(const sk_kernel_args* args);
int32_t paged_attention_bf16(const sk_kernel_args* args);
int32_t paged_attention_prefill_f32(const sk_kernel_args* args);
int32_t paged_attention_prefill_bf16(const sk_kernel_args* args);
int32_t mla_attention_f32(const sk_kernel_args* args);
int32_t mla_attention_bf16(const sk_kernel_args* args);
int32_t mla_attention_prefill_f32(const sk_kernel_args* args);
int32_t mla_attention_prefill_bf16(const sk_kernel_args* args);
int32_t batched_matmul_f32(const sk_kernel_args* args);
// ---- MoE and sampling family ----
// moe.cc, sampling.cc
int32_t moe_router_f32(const sk_kernel_args* args);
int32_t moe_dispatch_f32(const sk_kernel_args* args);
int32_t moe_combine_f32(const sk_kernel_args* args);
int32_t moe_combine_shared_f32(const sk_kernel_args* args);
int32_t argmax_f32(const sk_kernel_args* args);
int32_t sample_f32(const sk_kernel_args* args);
// ---- general tensor family ----
// tensor_elementwise.cc
int32_t tensor_unary(const sk_kernel_args* args);
int32_t tensor_cast(const sk_kernel_args* args);
int32_t tensor_binary(const sk_kernel_args* args);
int32_t tensor_binary_scalar(const sk_kernel_args* args);
int32_t tensor_where(const sk_kernel_args* args);
// tensor_reduce.cc
int32_t tensor_reduce(const sk_kernel_args* args);
int32_t tensor_cumsum(const sk_kernel_args* args);
// tensor_index.cc
int32_t tensor_index_select(const sk_kernel_args* args);
int32_t tensor_gather(const sk_kernel_args* args);
int32_t tensor_index_copy(const sk_kernel_args* args);
int32_t tensor_index_put(const sk_kernel_args* args);
// tensor_topk.cc
int32_t tensor_topk(const sk_kernel_args* args);
// tensor_attention.cc
int32_t tensor_batched_mm(const sk_kernel_args* args);
int32_t tensor_sdpa(const sk_kernel_args* args);
// The building blocks of sample.f32's specification, for known-answer and statistical tests:
// Philox4x32-10 in place on the counter, and the specified integer weight of logit l when the
// largest candidate logit is lmax, with a = log2(e) / temperature rounded to float (2^30 for l ==
// lmax, 0 for NaN and below 2^-31 of it).
void philox4x32_10(uint32_t ctr[4], const uint32_t key[2]);
uint32_t sample_weight(float l, float lmax, float a);

}  // namespace sk::ref

#endif  // SUPERKERNEL_KERNELS_REFERENCE_REFERENCE_H_
