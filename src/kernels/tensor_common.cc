#include "kernels/tensor_common.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu_isa.h"
#include "kernels/simd.h"
#include "util/half.h"

namespace sk::kernels::tensor {
namespace {

#if SK_KERNELS_X86
// Contiguous f16 <-> f32 with F16C, eight values at a time, giving the scalar functions' bits
// (util/half.h): both round to nearest even; a NaN becomes the scalar path's quiet NaN of its sign.
SK_TARGET_AVX2_F16C void load_f16_f16c(const uint16_t* p, int64_t n, float* out) {
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    v = _mm256_blendv_ps(v, _mm256_or_ps(_mm256_and_ps(v, sign), qnan), nan);
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) out[i] = f16_to_f32(p[i]);
}

SK_TARGET_AVX2_F16C void store_f16_f16c(const float* v, int64_t n, uint16_t* p) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(v + i);
    __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const int nan = _mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    if (nan != 0) {  // rare: the lanes of NaNs as f32_to_f16 writes them
      alignas(16) uint16_t lanes[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(lanes), h);
      for (int j = 0; j < 8; ++j)
        if (nan & (1 << j)) lanes[j] = f32_to_f16(v[i + j]);
      h = _mm_load_si128(reinterpret_cast<const __m128i*>(lanes));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i), h);
  }
  for (; i < n; ++i) p[i] = f32_to_f16(v[i]);
}
#endif

bool f16c_available() {
#if SK_KERNELS_X86
  static const bool yes = current_isa_level() >= kIsaAvx2;
  return yes;
#else
  return false;
#endif
}

int category(int32_t d) { return is_float(d) ? 2 : is_int(d) ? 1 : 0; }

template <class T>
T read_as(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void write_as(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// f32 -> integer as x86-64's truncating conversions do: NaN and values outside the type give its
// minimum (the "integer indefinite" value), which is what torch produces on that platform.
int32_t f32_to_i32(float v) {
  if (!(v >= -2147483648.0f && v < 2147483648.0f)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(v);
}
int64_t f32_to_i64(float v) {
  if (!(v >= -9223372036854775808.0f && v < 9223372036854775808.0f)) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

}  // namespace

bool promote(int32_t a, int64_t a_numel, int32_t b, int64_t b_numel, int32_t* out) {
  if (a == b) {
    *out = a;
    return true;
  }
  const bool a_one = a_numel == 1;
  const bool b_one = b_numel == 1;
  if (!a_one && !b_one) return false;
  // The "dimensioned" side: the one that is not a scalar; of two scalars, the higher category
  // (a on a tie).
  int32_t dim_side;
  int32_t scalar_side;
  if (a_one && b_one) {
    const bool b_higher = category(b) > category(a);
    dim_side = b_higher ? b : a;
    scalar_side = b_higher ? a : b;
  } else {
    dim_side = a_one ? b : a;
    scalar_side = a_one ? a : b;
  }
  *out = category(scalar_side) > category(dim_side) ? scalar_side : dim_side;
  return true;
}

void load_f32(int32_t dtype, const void* p, int64_t stride, int64_t n, float* out) {
  const char* c = static_cast<const char*>(p);
  const int64_t step = stride * sk_dtype_size(dtype);
  switch (dtype) {
    case SK_DTYPE_F32:
      for (int64_t i = 0; i < n; ++i) out[i] = read_as<float>(c + i * step);
      break;
    case SK_DTYPE_BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(read_as<uint16_t>(c + i * step));
      break;
    case SK_DTYPE_F16:
#if SK_KERNELS_X86
      if (stride == 1 && f16c_available()) {
        load_f16_f16c(reinterpret_cast<const uint16_t*>(c), n, out);
        break;
      }
#endif
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(read_as<uint16_t>(c + i * step));
      break;
    case SK_DTYPE_I8:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(read_as<int8_t>(c + i * step));
      break;
    case SK_DTYPE_I32:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(read_as<int32_t>(c + i * step));
      break;
    case SK_DTYPE_I64:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(read_as<int64_t>(c + i * step));
      break;
    case SK_DTYPE_BOOL:
      for (int64_t i = 0; i < n; ++i) out[i] = read_as<uint8_t>(c + i * step) != 0 ? 1.0f : 0.0f;
      break;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
      break;
  }
}

void load_i64(int32_t dtype, const void* p, int64_t stride, int64_t n, int64_t* out) {
  const char* c = static_cast<const char*>(p);
  const int64_t step = stride * sk_dtype_size(dtype);
  switch (dtype) {
    case SK_DTYPE_I8:
      for (int64_t i = 0; i < n; ++i) out[i] = read_as<int8_t>(c + i * step);
      break;
    case SK_DTYPE_I32:
      for (int64_t i = 0; i < n; ++i) out[i] = read_as<int32_t>(c + i * step);
      break;
    case SK_DTYPE_I64:
      for (int64_t i = 0; i < n; ++i) out[i] = read_as<int64_t>(c + i * step);
      break;
    case SK_DTYPE_BOOL:
      for (int64_t i = 0; i < n; ++i) out[i] = read_as<uint8_t>(c + i * step) != 0 ? 1 : 0;
      break;
    default: {
      // Floats in the integer domain only happen through a mistaken plan; truncate like a cast.
      float tmp[kEwBlock];
      for (int64_t i0 = 0; i0 < n; i0 += kEwBlock) {
        const int64_t m = std::min(kEwBlock, n - i0);
        load_f32(dtype, c + i0 * step, stride, m, tmp);
        for (int64_t i = 0; i < m; ++i) out[i0 + i] = f32_to_i64(tmp[i]);
      }
      break;
    }
  }
}

void store_f32(int32_t dtype, const float* v, int64_t n, void* p, int64_t stride) {
  char* c = static_cast<char*>(p);
  const int64_t step = stride * sk_dtype_size(dtype);
  switch (dtype) {
    case SK_DTYPE_F32:
      for (int64_t i = 0; i < n; ++i) write_as<float>(c + i * step, v[i]);
      break;
    case SK_DTYPE_BF16:
      for (int64_t i = 0; i < n; ++i) write_as<uint16_t>(c + i * step, f32_to_bf16(v[i]));
      break;
    case SK_DTYPE_F16:
#if SK_KERNELS_X86
      if (stride == 1 && f16c_available()) {
        store_f16_f16c(v, n, reinterpret_cast<uint16_t*>(c));
        break;
      }
#endif
      for (int64_t i = 0; i < n; ++i) write_as<uint16_t>(c + i * step, f32_to_f16(v[i]));
      break;
    case SK_DTYPE_I8:
      for (int64_t i = 0; i < n; ++i)
        write_as<int8_t>(c + i * step, static_cast<int8_t>(static_cast<uint32_t>(f32_to_i32(v[i])) & 0xffu));
      break;
    case SK_DTYPE_I32:
      for (int64_t i = 0; i < n; ++i) write_as<int32_t>(c + i * step, f32_to_i32(v[i]));
      break;
    case SK_DTYPE_I64:
      for (int64_t i = 0; i < n; ++i) write_as<int64_t>(c + i * step, f32_to_i64(v[i]));
      break;
    case SK_DTYPE_BOOL:
      for (int64_t i = 0; i < n; ++i) write_as<uint8_t>(c + i * step, v[i] != 0.0f ? 1 : 0);
      break;
    default:
      break;
  }
}

void store_i64(int32_t dtype, const int64_t* v, int64_t n, void* p, int64_t stride) {
  char* c = static_cast<char*>(p);
  const int64_t step = stride * sk_dtype_size(dtype);
  switch (dtype) {
    case SK_DTYPE_I8:
      for (int64_t i = 0; i < n; ++i) write_as<int8_t>(c + i * step, static_cast<int8_t>(v[i]));
      break;
    case SK_DTYPE_I32:
      for (int64_t i = 0; i < n; ++i) write_as<int32_t>(c + i * step, static_cast<int32_t>(v[i]));
      break;
    case SK_DTYPE_I64:
      for (int64_t i = 0; i < n; ++i) write_as<int64_t>(c + i * step, v[i]);
      break;
    case SK_DTYPE_BOOL:
      for (int64_t i = 0; i < n; ++i) write_as<uint8_t>(c + i * step, v[i] != 0 ? 1 : 0);
      break;
    default: {
      float tmp[kEwBlock];
      for (int64_t i0 = 0; i0 < n; i0 += kEwBlock) {
        const int64_t m = std::min(kEwBlock, n - i0);
        for (int64_t i = 0; i < m; ++i) tmp[i] = static_cast<float>(v[i0 + i]);
        store_f32(dtype, tmp, m, c + i0 * step, stride);
      }
      break;
    }
  }
}

bool plan_ew(const sk_kernel_args* args, const char* kernel, int n_in, const char* const* roles, EwPlan* p,
             ErrorSink err) {
  if (!check_arity(args, kernel, n_in, 1, err)) return false;
  const sk_tensor_arg& out = args->outputs[0];
  if (!is_known(out.dtype)) return invalid(err, "%s: out has unknown dtype %d", kernel, out.dtype);
  if (!check_tensor(out, kernel, "out", out.dtype, 0, err)) return false;
  int64_t strides[kMaxWalkOperands][SK_MAX_RANK] = {};
  char s1[96];
  char s2[96];
  for (int j = 0; j < n_in; ++j) {
    const sk_tensor_arg& t = args->inputs[j];
    if (!is_known(t.dtype)) return invalid(err, "%s: %s has unknown dtype %d", kernel, roles[j], t.dtype);
    if (!check_tensor(t, kernel, roles[j], t.dtype, 0, err)) return false;
    const int lead = out.rank - t.rank;
    bool fits = lead >= 0;
    for (int d = 0; fits && d < t.rank; ++d) fits = t.shape[d] == out.shape[lead + d] || t.shape[d] == 1;
    if (!fits) {
      return invalid(err, "%s: %s shape %s does not broadcast to out shape %s", kernel, roles[j],
                     format_shape(t, s1, sizeof s1), format_shape(out, s2, sizeof s2));
    }
    for (int d = 0; d < t.rank; ++d) strides[j][lead + d] = t.shape[d] == 1 ? 0 : t.stride[d];
    p->in_dtype[j] = t.dtype;
    p->in_numel[j] = sk_tensor_numel(&t);
  }
  for (int d = 0; d < out.rank; ++d) strides[n_in][d] = out.stride[d];
  if (!make_walk(out.rank, out.shape, n_in + 1, strides, n_in, 1, &p->walk)) {
    return invalid(err, "%s: out is a view whose elements overlap in memory", kernel);
  }
  p->n_in = n_in;
  p->out_dtype = out.dtype;
  return true;
}

int32_t ew_access(const EwPlan& p, const sk_kernel_args* args, int32_t core, int32_t cores, sk_access_range* ranges,
                  int32_t capacity) {
  const sk_range r = ew_split(p, core, cores);
  RangeList list(ranges, capacity);
  for (int j = 0; j < p.n_in; ++j) {
    list.add_walk(p.walk, j, j, SK_ACCESS_READ, r.begin, r.end, 1, sk_dtype_size(args->inputs[j].dtype));
  }
  list.add_walk(p.walk, p.n_in, p.n_in, SK_ACCESS_WRITE, r.begin, r.end, 1, sk_dtype_size(p.out_dtype));
  return list.finish();
}

void add_box(RangeList& list, int32_t operand, int32_t mode, const sk_tensor_arg& t, const int64_t* lo,
             const int64_t* hi) {
  int64_t a = 0;
  int64_t b = 0;
  for (int d = 0; d < t.rank; ++d) {
    if (hi[d] < lo[d]) return;
    const int64_t x = lo[d] * t.stride[d];
    const int64_t y = hi[d] * t.stride[d];
    a += std::min(x, y);
    b += std::max(x, y);
  }
  const int64_t elem = sk_dtype_size(t.dtype);
  list.add(operand, mode, a * elem, (b + 1) * elem);
}

}  // namespace sk::kernels::tensor
