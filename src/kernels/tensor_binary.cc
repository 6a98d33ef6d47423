// tensor.binary (op(a, b), both broadcast to out), tensor.binary_scalar (op(a, scalar) or
// op(scalar, a)) and tensor.where (cond ? a : b, all three broadcast). Any dtypes and strides in
// (torch's type promotion, docs/kernels_tensor.md), any non-overlapping output; the output may be
// the very view of an input (in place).
//
// The compute domain follows the promoted dtype: f32 for floats (and true division), exact i64
// for integers and bool (sums and products wrap to out's width, as torch's do). At the avx2 level
// the f32 ops run 8 lanes at a time with masked tails, so an element's bits depend only on its
// operands' values; pow uses the C library's powf at every level, except the scalar exponents
// torch special-cases (2, 3, 0.5, -0.5, -1, -2: products, sqrt and reciprocals).
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

constexpr const char* kBinary = "tensor.binary";
constexpr const char* kBinaryScalar = "tensor.binary_scalar";
constexpr const char* kWhere = "tensor.where";
constexpr const char* kBinaryRoles[] = {"a", "b"};
constexpr const char* kScalarRoles[] = {"a"};
constexpr const char* kWhereRoles[] = {"cond", "a", "b"};

// Internal codes of pow by a special scalar exponent (beyond SK_BINARY_OP_COUNT).
enum : int32_t {
  kPowSquare = 100,
  kPowCube,
  kPowSqrt,
  kPowRsqrt,
  kPowRecip,
  kPowRecipSquare,
};

bool is_comparison(int32_t op) { return op >= SK_BINARY_EQ && op <= SK_BINARY_GE; }
bool is_logical(int32_t op) { return op == SK_BINARY_LOGICAL_AND || op == SK_BINARY_LOGICAL_OR; }
bool is_arithmetic(int32_t op) { return op >= SK_BINARY_ADD && op <= SK_BINARY_MINIMUM; }

// ---- f32 domain ----

float binary_scalar_f32(int32_t op, float a, float b) {
  switch (op) {
    case SK_BINARY_ADD:
      return a + b;
    case SK_BINARY_SUB:
      return a - b;
    case SK_BINARY_MUL:
      return a * b;
    case SK_BINARY_DIV:
      return a / b;
    case SK_BINARY_POW:
      return std::pow(a, b);
    case SK_BINARY_MAXIMUM:  // MAXPS(a, b), with NaN from either side propagated
      return a != a || b != b ? a + b : (a > b ? a : b);
    case SK_BINARY_MINIMUM:
      return a != a || b != b ? a + b : (a < b ? a : b);
    case SK_BINARY_EQ:
      return a == b ? 1.0f : 0.0f;
    case SK_BINARY_NE:
      return a != b ? 1.0f : 0.0f;
    case SK_BINARY_LT:
      return a < b ? 1.0f : 0.0f;
    case SK_BINARY_LE:
      return a <= b ? 1.0f : 0.0f;
    case SK_BINARY_GT:
      return a > b ? 1.0f : 0.0f;
    case SK_BINARY_GE:
      return a >= b ? 1.0f : 0.0f;
    case SK_BINARY_LOGICAL_AND:
      return a != 0.0f && b != 0.0f ? 1.0f : 0.0f;
    case SK_BINARY_LOGICAL_OR:
      return a != 0.0f || b != 0.0f ? 1.0f : 0.0f;
    case kPowSquare:
      return a * a;
    case kPowCube:
      return a * a * a;
    case kPowSqrt:
      return std::sqrt(a);
    case kPowRsqrt:
      return 1.0f / std::sqrt(a);
    case kPowRecip:
      return 1.0f / a;
    case kPowRecipSquare:
      return 1.0f / (a * a);
    default:
      return a;
  }
}

using BinaryFn = void (*)(int32_t op, const float* a, const float* b, float* y, int64_t n);

void binary_f32_scalar(int32_t op, const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = binary_scalar_f32(op, a[i], b[i]);
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 __m256 binary8(int32_t op, __m256 a, __m256 b) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 zero = _mm256_setzero_ps();
  switch (op) {
    case SK_BINARY_ADD:
      return _mm256_add_ps(a, b);
    case SK_BINARY_SUB:
      return _mm256_sub_ps(a, b);
    case SK_BINARY_MUL:
      return _mm256_mul_ps(a, b);
    case SK_BINARY_DIV:
      return _mm256_div_ps(a, b);
    case SK_BINARY_MAXIMUM:
      return _mm256_blendv_ps(_mm256_max_ps(a, b), _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    case SK_BINARY_MINIMUM:
      return _mm256_blendv_ps(_mm256_min_ps(a, b), _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    case SK_BINARY_EQ:
      return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ), one);
    case SK_BINARY_NE:
      return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_NEQ_UQ), one);
    case SK_BINARY_LT:
      return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), one);
    case SK_BINARY_LE:
      return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_LE_OQ), one);
    case SK_BINARY_GT:
      return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), one);
    case SK_BINARY_GE:
      return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_GE_OQ), one);
    case SK_BINARY_LOGICAL_AND:
      return _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(a, zero, _CMP_NEQ_UQ), _mm256_cmp_ps(b, zero, _CMP_NEQ_UQ)),
                           one);
    case SK_BINARY_LOGICAL_OR:
      return _mm256_and_ps(_mm256_or_ps(_mm256_cmp_ps(a, zero, _CMP_NEQ_UQ), _mm256_cmp_ps(b, zero, _CMP_NEQ_UQ)), one);
    case kPowSquare:
      return _mm256_mul_ps(a, a);
    case kPowCube:
      return _mm256_mul_ps(_mm256_mul_ps(a, a), a);
    case kPowSqrt:
      return _mm256_sqrt_ps(a);
    case kPowRsqrt:
      return _mm256_div_ps(one, _mm256_sqrt_ps(a));
    case kPowRecip:
      return _mm256_div_ps(one, a);
    case kPowRecipSquare:
      return _mm256_div_ps(one, _mm256_mul_ps(a, a));
    default:
      return a;
  }
}

template <int32_t kOp>
SK_TARGET_AVX2 void map2_avx2(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, binary8(kOp, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) {
    const __m256i m = simd::mask8(n - i);
    simd::maskstore_ps(y + i, m, binary8(kOp, simd::maskload_ps(a + i, m), simd::maskload_ps(b + i, m)));
  }
}

using Map2Fn = void (*)(const float*, const float*, float*, int64_t);

void binary_f32_avx2(int32_t op, const float* a, const float* b, float* y, int64_t n) {
  // The op is a template argument so each map inlines its own operation.
  static const Map2Fn kOps[SK_BINARY_OP_COUNT] = {
      map2_avx2<0>,  map2_avx2<1>,  map2_avx2<2>,  map2_avx2<3>,  nullptr,
      map2_avx2<5>,  map2_avx2<6>,  map2_avx2<7>,  map2_avx2<8>,  map2_avx2<9>,
      map2_avx2<10>, map2_avx2<11>, map2_avx2<12>, map2_avx2<13>, map2_avx2<14>,
  };
  static const Map2Fn kPows[] = {map2_avx2<kPowSquare>, map2_avx2<kPowCube>,  map2_avx2<kPowSqrt>,
                                 map2_avx2<kPowRsqrt>,  map2_avx2<kPowRecip>, map2_avx2<kPowRecipSquare>};
  if (op >= kPowSquare && op <= kPowRecipSquare) {
    kPows[op - kPowSquare](a, b, y, n);
  } else if (op >= 0 && op < SK_BINARY_OP_COUNT && kOps[op] != nullptr) {
    kOps[op](a, b, y, n);
  } else {
    binary_f32_scalar(op, a, b, y, n);  // powf, as on the scalar level
  }
}

SK_TARGET_AVX2 void where_f32_avx2(const float* c, const float* a, const float* b, float* y, int64_t n) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 take_a = _mm256_cmp_ps(_mm256_loadu_ps(c + i), zero, _CMP_NEQ_UQ);
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(_mm256_loadu_ps(b + i), _mm256_loadu_ps(a + i), take_a));
  }
  for (; i < n; ++i) y[i] = c[i] != 0.0f ? a[i] : b[i];  // a selection: no arithmetic to round
}
#endif

BinaryFn select_binary() {
#if SK_KERNELS_X86
  if (current_isa_level() >= kIsaAvx2) return binary_f32_avx2;
#endif
  return binary_f32_scalar;
}

void where_f32(const float* c, const float* a, const float* b, float* y, int64_t n) {
#if SK_KERNELS_X86
  if (current_isa_level() >= kIsaAvx2) {
    where_f32_avx2(c, a, b, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = c[i] != 0.0f ? a[i] : b[i];
}

// ---- i64 domain ----

// base^exp with wrapping multiplication (exp >= 0).
int64_t ipow(int64_t base, int64_t exp) {
  uint64_t result = 1;
  auto b = static_cast<uint64_t>(base);
  auto e = static_cast<uint64_t>(exp);
  while (e != 0) {
    if (e & 1u) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<int64_t>(result);
}

int64_t binary_i64(int32_t op, int64_t a, int64_t b) {
  const auto ua = static_cast<uint64_t>(a);
  const auto ub = static_cast<uint64_t>(b);
  switch (op) {
    case SK_BINARY_ADD:
      return static_cast<int64_t>(ua + ub);
    case SK_BINARY_SUB:
      return static_cast<int64_t>(ua - ub);
    case SK_BINARY_MUL:
      return static_cast<int64_t>(ua * ub);
    case SK_BINARY_POW:
      return ipow(a, b);
    case SK_BINARY_MAXIMUM:
      return a > b ? a : b;
    case SK_BINARY_MINIMUM:
      return a < b ? a : b;
    case SK_BINARY_EQ:
      return a == b;
    case SK_BINARY_NE:
      return a != b;
    case SK_BINARY_LT:
      return a < b;
    case SK_BINARY_LE:
      return a <= b;
    case SK_BINARY_GT:
      return a > b;
    case SK_BINARY_GE:
      return a >= b;
    case SK_BINARY_LOGICAL_AND:
      return a != 0 && b != 0;
    case SK_BINARY_LOGICAL_OR:
      return a != 0 || b != 0;
    default:
      return a;
  }
}

// Output dtype of an op computing in `promoted`; false (with a message) for undefined combinations.
bool expected_out(const char* kernel, int32_t op, int32_t promoted, int32_t* want, ErrorSink err) {
  if (op < 0 || op >= SK_BINARY_OP_COUNT) return invalid(err, "%s: unknown op %d", kernel, op);
  if (is_arithmetic(op) && promoted == SK_DTYPE_BOOL) {
    return invalid(err, "%s: arithmetic op %d is not defined for bool operands", kernel, op);
  }
  *want = is_comparison(op) || is_logical(op)          ? SK_DTYPE_BOOL
          : op == SK_BINARY_DIV && !is_float(promoted) ? SK_DTYPE_F32
                                                       : promoted;
  return true;
}

bool check_out(const char* kernel, const EwPlan& ew, int32_t want, ErrorSink err) {
  if (ew.out_dtype != want) {
    return invalid(err, "%s: out has dtype %s, expected %s", kernel, dtype_str(ew.out_dtype), dtype_str(want));
  }
  return true;
}

// ---- tensor.binary ----

struct BinaryPlan {
  EwPlan ew;
  int32_t op = 0;
  bool float_domain = true;
};

bool plan_binary(const sk_kernel_args* args, BinaryPlan* p, ErrorSink err) {
  sk_binary_attrs attrs{};
  if (!check_arity(args, kBinary, 2, 1, err) || !read_attrs(args, kBinary, "sk_binary_attrs", &attrs, err) ||
      !plan_ew(args, kBinary, 2, kBinaryRoles, &p->ew, err)) {
    return false;
  }
  int32_t promoted = 0;
  if (!promote(p->ew.in_dtype[0], p->ew.in_numel[0], p->ew.in_dtype[1], p->ew.in_numel[1], &promoted)) {
    return invalid(err, "%s: a (%s) and b (%s) have different dtypes and neither has one element", kBinary,
                   dtype_str(p->ew.in_dtype[0]), dtype_str(p->ew.in_dtype[1]));
  }
  int32_t want = 0;
  if (!expected_out(kBinary, attrs.op, promoted, &want, err) || !check_out(kBinary, p->ew, want, err)) return false;
  p->op = attrs.op;
  p->float_domain = is_float(promoted) || attrs.op == SK_BINARY_DIV;
  return true;
}

// ---- tensor.binary_scalar ----

struct ScalarPlan {
  EwPlan ew;
  int32_t op = 0;  // SK_BINARY_* or an internal pow code
  bool scalar_first = false;
  bool float_domain = true;
  float scalar_f32 = 0.0f;
  int64_t scalar_i64 = 0;
};

bool integral(double v) { return std::isfinite(v) && std::nearbyint(v) == v && std::fabs(v) < 0x1p63; }

bool plan_scalar(const sk_kernel_args* args, ScalarPlan* p, ErrorSink err) {
  sk_binary_scalar_attrs attrs{};
  if (!check_arity(args, kBinaryScalar, 1, 1, err) ||
      !read_attrs(args, kBinaryScalar, "sk_binary_scalar_attrs", &attrs, err) ||
      !plan_ew(args, kBinaryScalar, 1, kScalarRoles, &p->ew, err)) {
    return false;
  }
  const int32_t a = p->ew.in_dtype[0];
  int32_t want = 0;
  if (!expected_out(kBinaryScalar, attrs.op, a, &want, err) || !check_out(kBinaryScalar, p->ew, want, err)) {
    return false;
  }
  const bool whole = integral(attrs.scalar);
  p->float_domain = is_float(a) || attrs.op == SK_BINARY_DIV || !whole;
  if (!p->float_domain && attrs.op == SK_BINARY_POW && !attrs.scalar_first && attrs.scalar < 0) {
    return invalid(err, "%s: integer a to the negative power %g is not defined", kBinaryScalar, attrs.scalar);
  }
  if (p->float_domain && !is_float(a) && is_arithmetic(attrs.op) && attrs.op != SK_BINARY_DIV) {
    return invalid(err, "%s: scalar %g is not an integer but a is %s", kBinaryScalar, attrs.scalar, dtype_str(a));
  }
  p->op = attrs.op;
  p->scalar_first = attrs.scalar_first != 0;
  p->scalar_f32 = static_cast<float>(attrs.scalar);
  p->scalar_i64 = whole ? static_cast<int64_t>(attrs.scalar) : 0;
  if (p->float_domain && attrs.op == SK_BINARY_POW && !p->scalar_first) {
    const double s = attrs.scalar;
    p->op = s == 2.0    ? static_cast<int32_t>(kPowSquare)
            : s == 3.0  ? kPowCube
            : s == 0.5  ? kPowSqrt
            : s == -0.5 ? kPowRsqrt
            : s == -1.0 ? kPowRecip
            : s == -2.0 ? kPowRecipSquare
                        : static_cast<int32_t>(SK_BINARY_POW);
  }
  return true;
}

// ---- tensor.where ----

struct WherePlan {
  EwPlan ew;
  bool float_domain = true;
};

bool plan_where(const sk_kernel_args* args, WherePlan* p, ErrorSink err) {
  if (!plan_ew(args, kWhere, 3, kWhereRoles, &p->ew, err)) return false;
  if (p->ew.in_dtype[0] != SK_DTYPE_BOOL) {
    return invalid(err, "%s: cond has dtype %s, expected bool", kWhere, dtype_str(p->ew.in_dtype[0]));
  }
  int32_t promoted = 0;
  if (!promote(p->ew.in_dtype[1], p->ew.in_numel[1], p->ew.in_dtype[2], p->ew.in_numel[2], &promoted)) {
    return invalid(err, "%s: a (%s) and b (%s) have different dtypes and neither has one element", kWhere,
                   dtype_str(p->ew.in_dtype[1]), dtype_str(p->ew.in_dtype[2]));
  }
  if (!check_out(kWhere, p->ew, promoted, err)) return false;
  p->float_domain = is_float(promoted);
  return true;
}

template <class Plan>
int32_t access_of(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                  int32_t capacity, bool (*plan)(const sk_kernel_args*, Plan*, ErrorSink)) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) return -SK_ERR_INVALID_ARGUMENT;
  return ew_access(p.ew, args, core_id, num_cores, ranges, capacity);
}

template <class Plan>
int32_t tiling_with(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size,
                    bool (*plan)(const sk_kernel_args*, Plan*, ErrorSink)) {
  Plan p;
  if (!plan(args, &p, ErrorSink{nullptr, 0, /*shapes_only=*/true})) return SK_ERR_INVALID_ARGUMENT;
  return tiling_of(p, tiling, capacity, size);
}

}  // namespace

int32_t tensor_binary_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  BinaryPlan p;
  if (!check_core(core, kBinary, err)) return SK_ERR_INVALID_ARGUMENT;
  if (!plan_from_tiling(args, &p) && !plan_binary(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = ew_split(p.ew, core->core_id, core->num_cores);
  const int32_t op = p.op;
  if (p.float_domain) {
    const BinaryFn fn = select_binary();
    ew_run_f32(p.ew, args, r, [&](const float* const* in, float* out, int64_t n) { fn(op, in[0], in[1], out, n); });
    return SK_OK;
  }
  bool negative_exponent = false;
  ew_run_i64(p.ew, args, r, [&](const int64_t* const* in, int64_t* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      negative_exponent |= op == SK_BINARY_POW && in[1][i] < 0;
      out[i] = binary_i64(op, in[0][i], in[1][i]);
    }
  });
  if (negative_exponent) {
    invalid(err, "%s: integers to negative integer powers are not defined (an element of b is negative)", kBinary);
    return SK_ERR_INVALID_ARGUMENT;
  }
  return SK_OK;
}

int32_t tensor_binary_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size) {
  return tiling_with<BinaryPlan>(args, tiling, capacity, size, plan_binary);
}

int32_t tensor_binary_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                             int32_t capacity) {
  return access_of<BinaryPlan>(args, core_id, num_cores, ranges, capacity, plan_binary);
}

int32_t tensor_binary_scalar_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  ScalarPlan p;
  if (!check_core(core, kBinaryScalar, err)) return SK_ERR_INVALID_ARGUMENT;
  if (!plan_from_tiling(args, &p) && !plan_scalar(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = ew_split(p.ew, core->core_id, core->num_cores);
  const int32_t op = p.op;
  if (p.float_domain) {
    const BinaryFn fn = select_binary();
    float s[kEwBlock];
    for (float& v : s) v = p.scalar_f32;
    ew_run_f32(p.ew, args, r, [&](const float* const* in, float* out, int64_t n) {
      if (p.scalar_first) {
        fn(op, s, in[0], out, n);
      } else {
        fn(op, in[0], s, out, n);
      }
    });
    return SK_OK;
  }
  bool negative_exponent = false;
  const int64_t s = p.scalar_i64;
  ew_run_i64(p.ew, args, r, [&](const int64_t* const* in, int64_t* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (p.scalar_first) {
        negative_exponent |= op == SK_BINARY_POW && in[0][i] < 0;
        out[i] = binary_i64(op, s, in[0][i]);
      } else {
        out[i] = binary_i64(op, in[0][i], s);
      }
    }
  });
  if (negative_exponent) {
    invalid(err, "%s: integers to negative integer powers are not defined (an element of a is negative)",
            kBinaryScalar);
    return SK_ERR_INVALID_ARGUMENT;
  }
  return SK_OK;
}

int32_t tensor_binary_scalar_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size) {
  return tiling_with<ScalarPlan>(args, tiling, capacity, size, plan_scalar);
}

int32_t tensor_binary_scalar_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                    sk_access_range* ranges, int32_t capacity) {
  return access_of<ScalarPlan>(args, core_id, num_cores, ranges, capacity, plan_scalar);
}

int32_t tensor_where_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  WherePlan p;
  if (!check_core(core, kWhere, err)) return SK_ERR_INVALID_ARGUMENT;
  if (!plan_from_tiling(args, &p) && !plan_where(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = ew_split(p.ew, core->core_id, core->num_cores);
  if (p.float_domain) {
    ew_run_f32(p.ew, args, r,
               [](const float* const* in, float* out, int64_t n) { where_f32(in[0], in[1], in[2], out, n); });
  } else {
    ew_run_i64(p.ew, args, r, [](const int64_t* const* in, int64_t* out, int64_t n) {
      for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] != 0 ? in[1][i] : in[2][i];
    });
  }
  return SK_OK;
}

int32_t tensor_where_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size) {
  return tiling_with<WherePlan>(args, tiling, capacity, size, plan_where);
}

int32_t tensor_where_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                            int32_t capacity) {
  return access_of<WherePlan>(args, core_id, num_cores, ranges, capacity, plan_where);
}

}  // namespace sk::kernels
