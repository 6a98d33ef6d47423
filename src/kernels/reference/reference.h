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
//   ---- matmul family ----
//   ---- attention family ----
//   ---- MoE and sampling family ----
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

// ---- matmul family ----
// ---- attention family ----
// ---- MoE and sampling family ----

}  // namespace sk::ref

#endif  // SUPERKERNEL_KERNELS_REFERENCE_REFERENCE_H_
