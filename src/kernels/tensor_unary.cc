// tensor.unary (one of the SK_UNARY_* functions of x, element-wise) and tensor.cast (x converted
// to out's dtype). Any dtype and strides in, a dense (or any non-overlapping) output; the output
// may be the very view of x (in place).
//
// Float functions compute in f32 (bf16 / f16 / integer / bool inputs widened first) and round to
// out's dtype once; kNeg, kRelu and kAbs of integers are exact (i64, wrapping to out's width),
// kLogicalNot gives bool. At the avx2 level the f32 functions run 8 lanes at a time with masked
// tails (no scalar tail), so an element's bits depend only on its value and the ISA level; the
// scalar level uses the C library's float functions. sin and cos use the C library at every
// level.
#include <cmath>

#include "kernels/cpu_isa.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/simd.h"
#include "kernels/tensor_common.h"
#include "superkernel/attrs_tensor.h"

namespace sk::kernels {
namespace {

using namespace tensor;

constexpr const char* kUnary = "tensor.unary";
constexpr const char* kCast = "tensor.cast";
constexpr const char* kRoles[] = {"x"};

// ---- Scalar level ----

float gelu_tanh_scalar(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  const float inner = k * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(inner));
}

float unary_scalar(int32_t op, float x) {
  switch (op) {
    case SK_UNARY_NEG:
      return -x;
    case SK_UNARY_EXP:
      return std::exp(x);
    case SK_UNARY_LOG:
      return std::log(x);
    case SK_UNARY_SQRT:
      return std::sqrt(x);
    case SK_UNARY_RSQRT:
      return 1.0f / std::sqrt(x);
    case SK_UNARY_SIN:
      return std::sin(x);
    case SK_UNARY_COS:
      return std::cos(x);
    case SK_UNARY_TANH:
      return std::tanh(x);
    case SK_UNARY_SIGMOID:
      return 1.0f / (1.0f + std::exp(-x));
    case SK_UNARY_SILU:
      return x / (1.0f + std::exp(-x));
    case SK_UNARY_GELU:
      return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
    case SK_UNARY_GELU_TANH:
      return gelu_tanh_scalar(x);
    case SK_UNARY_RELU:
      return 0.0f > x ? 0.0f : x;  // NaN stays NaN, as MAXPS(0, x) does on the vector levels
    case SK_UNARY_ABS:
      return std::fabs(x);
    case SK_UNARY_RECIPROCAL:
      return 1.0f / x;
    case SK_UNARY_LOGICAL_NOT:
      return x == 0.0f ? 1.0f : 0.0f;
    default:
      return x;
  }
}

using F32Fn = void (*)(int32_t op, const float* x, float* y, int64_t n);

void unary_f32_scalar(int32_t op, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = unary_scalar(op, x[i]);
}

#if SK_KERNELS_X86

// ---- avx2 level ----

// log(x): x = 2^e * m with m in [sqrt(1/2), sqrt(2)), log(m) = f - f^2/2 + f^3 P(f) for
// f = m - 1 (a degree-8 polynomial, Cephes' logf coefficients), plus e * ln 2 in two parts.
// Subnormals are scaled by 2^23 first; 0 gives -inf, negatives NaN, +inf +inf, NaN NaN.
SK_TARGET_AVX2 __m256 log8(__m256 x) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 is_sub =
      _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ), _mm256_cmp_ps(x, zero, _CMP_GT_OQ));
  const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(8388608.0f)), is_sub);
  const __m256 e_adj = _mm256_and_ps(is_sub, _mm256_set1_ps(23.0f));
  const __m256i bits = _mm256_castps_si256(xs);
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126)));
  __m256 m = _mm256_castsi256_ps(
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000)));
  // m in [0.5, 1): below sqrt(1/2) use 2m - 1 and e - 1, else m - 1.
  const __m256 small = _mm256_cmp_ps(m, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
  const __m256 one = _mm256_set1_ps(1.0f);
  e = _mm256_sub_ps(_mm256_sub_ps(e, _mm256_and_ps(small, one)), e_adj);
  m = _mm256_add_ps(m, _mm256_and_ps(small, m));
  const __m256 f = _mm256_sub_ps(m, one);
  const __m256 z = _mm256_mul_ps(f, f);
  __m256 p = _mm256_set1_ps(7.0376836292e-2f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.1514610310e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.1676998740e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.2420140846e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.4249322787e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.6668057665e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.0000714765e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-2.4999993993e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(3.3333331174e-1f));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, z), f);
  y = _mm256_fmadd_ps(e, _mm256_set1_ps(simd::kLn2Lo), y);
  y = _mm256_fnmadd_ps(z, _mm256_set1_ps(0.5f), y);
  __m256 r = _mm256_add_ps(f, y);
  r = _mm256_fmadd_ps(e, _mm256_set1_ps(simd::kLn2Hi), r);
  // Special values: x == 0 -> -inf, x < 0 or NaN -> NaN, x == +inf -> +inf.
  const __m256 inf = _mm256_set1_ps(INFINITY);
  r = _mm256_blendv_ps(r, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(x, zero, _CMP_EQ_OQ));
  r = _mm256_blendv_ps(r, inf, _mm256_cmp_ps(x, inf, _CMP_EQ_OQ));
  r = _mm256_blendv_ps(r, _mm256_set1_ps(NAN), _mm256_cmp_ps(x, zero, _CMP_NGE_UQ));
  return r;
}

// tanh(x): odd polynomial for |x| < 0.625 (Cephes' tanhf), else 1 - 2 / (exp(2|x|) + 1) with
// x's sign; |x| >= 9 gives +-1 exactly, NaN stays NaN.
SK_TARGET_AVX2 __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = simd::exp8(_mm256_add_ps(ax, ax));
  __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  big = _mm256_blendv_ps(big, one, _mm256_cmp_ps(ax, _mm256_set1_ps(9.0f), _CMP_GE_OQ));
  big = _mm256_or_ps(big, _mm256_and_ps(sign, x));
  // NaN compares false: it takes the polynomial branch, which keeps it NaN.
  return _mm256_blendv_ps(small, big, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_GE_OQ));
}

// erf(x) = 1 - t (a1 + t (a2 + ... + t a5)) exp(-x^2), t = 1 / (1 + p |x|), with x's sign
// (Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7).
SK_TARGET_AVX2 __m256 erf8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), ax, one));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  const __m256 e = simd::exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(ax, ax)));
  const __m256 y = _mm256_fnmadd_ps(_mm256_mul_ps(p, t), e, one);
  return _mm256_or_ps(y, _mm256_and_ps(sign, x));
}

SK_TARGET_AVX2 __m256 unary8(int32_t op, __m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 half = _mm256_set1_ps(0.5f);
  switch (op) {
    case SK_UNARY_NEG:
      return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
    case SK_UNARY_EXP:
      return simd::exp8(x);
    case SK_UNARY_LOG:
      return log8(x);
    case SK_UNARY_SQRT:
      return _mm256_sqrt_ps(x);
    case SK_UNARY_RSQRT:
      return _mm256_div_ps(one, _mm256_sqrt_ps(x));
    case SK_UNARY_TANH:
      return tanh8(x);
    case SK_UNARY_SIGMOID:
      return _mm256_div_ps(one, _mm256_add_ps(one, simd::exp8(_mm256_sub_ps(zero, x))));
    case SK_UNARY_SILU:
      return _mm256_div_ps(x, _mm256_add_ps(one, simd::exp8(_mm256_sub_ps(zero, x))));
    case SK_UNARY_GELU: {
      const __m256 e = erf8(_mm256_mul_ps(x, _mm256_set1_ps(0.7071067811865476f)));
      return _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, e));
    }
    case SK_UNARY_GELU_TANH: {
      const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
      const __m256 inner =
          _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
      return _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, tanh8(inner)));
    }
    case SK_UNARY_RELU:
      return _mm256_max_ps(zero, x);
    case SK_UNARY_ABS:
      return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    case SK_UNARY_RECIPROCAL:
      return _mm256_div_ps(one, x);
    case SK_UNARY_LOGICAL_NOT:
      return _mm256_and_ps(_mm256_cmp_ps(x, zero, _CMP_EQ_OQ), one);
    default:
      return x;
  }
}

template <int32_t kOp>
SK_TARGET_AVX2 void map_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, unary8(kOp, _mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = simd::mask8(n - i);
    simd::maskstore_ps(y + i, m, unary8(kOp, simd::maskload_ps(x + i, m)));
  }
}

using MapFn = void (*)(const float*, float*, int64_t);

void unary_f32_avx2(int32_t op, const float* x, float* y, int64_t n) {
  if (op == SK_UNARY_SIN || op == SK_UNARY_COS) {
    unary_f32_scalar(op, x, y, n);
    return;
  }
  // The op is a template argument so each map inlines its own function.
  static const MapFn kTable[SK_UNARY_OP_COUNT] = {
      map_avx2<0>, map_avx2<1>, map_avx2<2>,  map_avx2<3>,  map_avx2<4>,  map_avx2<5>,  map_avx2<6>,  map_avx2<7>,
      map_avx2<8>, map_avx2<9>, map_avx2<10>, map_avx2<11>, map_avx2<12>, map_avx2<13>, map_avx2<14>, map_avx2<15>,
  };
  kTable[op](x, y, n);
}
#endif

F32Fn select_f32() {
#if SK_KERNELS_X86
  if (current_isa_level() >= kIsaAvx2) return unary_f32_avx2;
#endif
  return unary_f32_scalar;
}

int64_t unary_i64(int32_t op, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  switch (op) {
    case SK_UNARY_NEG:
      return static_cast<int64_t>(0u - u);
    case SK_UNARY_ABS:
      return v < 0 ? static_cast<int64_t>(0u - u) : v;
    case SK_UNARY_RELU:
      return v < 0 ? 0 : v;
    case SK_UNARY_LOGICAL_NOT:
      return v == 0 ? 1 : 0;
    default:
      return v;
  }
}

bool keeps_integers(int32_t op) { return op == SK_UNARY_NEG || op == SK_UNARY_RELU || op == SK_UNARY_ABS; }

struct UnaryPlan {
  EwPlan ew;
  int32_t op = 0;
  bool float_domain = true;
};

bool plan_unary(const sk_kernel_args* args, UnaryPlan* p, ErrorSink err) {
  sk_unary_attrs attrs{};
  if (!check_arity(args, kUnary, 1, 1, err) || !read_attrs(args, kUnary, "sk_unary_attrs", &attrs, err) ||
      !plan_ew(args, kUnary, 1, kRoles, &p->ew, err)) {
    return false;
  }
  if (attrs.op < 0 || attrs.op >= SK_UNARY_OP_COUNT) return invalid(err, "%s: unknown op %d", kUnary, attrs.op);
  const int32_t in = p->ew.in_dtype[0];
  int32_t want = in;
  if (attrs.op == SK_UNARY_LOGICAL_NOT) {
    want = SK_DTYPE_BOOL;
  } else if (keeps_integers(attrs.op) && in == SK_DTYPE_BOOL) {
    return invalid(err, "%s: op %d is not defined for a bool x", kUnary, attrs.op);
  } else if (!keeps_integers(attrs.op) && !is_float(in)) {
    want = SK_DTYPE_F32;
  }
  if (p->ew.out_dtype != want) {
    return invalid(err, "%s: out has dtype %s, expected %s for op %d of a %s x", kUnary, dtype_str(p->ew.out_dtype),
                   dtype_str(want), attrs.op, dtype_str(in));
  }
  p->op = attrs.op;
  p->float_domain = is_float(in) || !keeps_integers(attrs.op);
  if (attrs.op == SK_UNARY_LOGICAL_NOT) p->float_domain = is_float(in);
  return true;
}

struct CastPlan {
  EwPlan ew;
};

bool plan_cast(const sk_kernel_args* args, CastPlan* p, ErrorSink err) {
  return plan_ew(args, kCast, 1, kRoles, &p->ew, err);
}

}  // namespace

int32_t tensor_unary_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  UnaryPlan p;
  if (!check_core(core, kUnary, err)) return SK_ERR_INVALID_ARGUMENT;
  if (!plan_from_tiling(args, &p) && !plan_unary(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = ew_split(p.ew, core->core_id, core->num_cores);
  const int32_t op = p.op;
  if (p.float_domain) {
    const F32Fn fn = select_f32();
    ew_run_f32(p.ew, args, r, [&](const float* const* in, float* out, int64_t n) { fn(op, in[0], out, n); });
  } else {
    ew_run_i64(p.ew, args, r, [&](const int64_t* const* in, int64_t* out, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out[i] = unary_i64(op, in[0][i]);
    });
  }
  return SK_OK;
}

int32_t tensor_unary_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size) {
  UnaryPlan p;
  if (!plan_unary(args, &p, ErrorSink{nullptr, 0, /*shapes_only=*/true})) return SK_ERR_INVALID_ARGUMENT;
  return tiling_of(p, tiling, capacity, size);
}

int32_t tensor_unary_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                            int32_t capacity) {
  UnaryPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_unary(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  return ew_access(p.ew, args, core_id, num_cores, ranges, capacity);
}

int32_t tensor_cast_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  CastPlan p;
  if (!check_core(core, kCast, err)) return SK_ERR_INVALID_ARGUMENT;
  if (!plan_from_tiling(args, &p) && !plan_cast(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = ew_split(p.ew, core->core_id, core->num_cores);
  const auto identity_f32 = [](const float* const* in, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = in[0][i];
  };
  if (is_float(p.ew.in_dtype[0])) {
    ew_run_f32(p.ew, args, r, identity_f32);
  } else {
    ew_run_i64(p.ew, args, r, [](const int64_t* const* in, int64_t* out, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out[i] = in[0][i];
    });
  }
  return SK_OK;
}

int32_t tensor_cast_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size) {
  CastPlan p;
  if (!plan_cast(args, &p, ErrorSink{nullptr, 0, /*shapes_only=*/true})) return SK_ERR_INVALID_ARGUMENT;
  return tiling_of(p, tiling, capacity, size);
}

int32_t tensor_cast_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                           int32_t capacity) {
  CastPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_cast(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  return ew_access(p.ew, args, core_id, num_cores, ranges, capacity);
}

}  // namespace sk::kernels
