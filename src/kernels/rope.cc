// rope.f32: rotary position embedding of x [T, H, Dh] (or [T, H * Dh]) at positions[T], with
// the vLLM cos/sin cache layout: row p of cos_sin_cache [max_pos, rotary_dim] holds
// cos(p * f_i) for i < rotary_dim / 2 followed by sin(p * f_i).
//
//   neox_style = 1 (rotate halves):  i < rd/2 pairs x[i] with x[i + rd/2]
//   neox_style = 0 (interleaved):    i < rd/2 pairs x[2i] with x[2i + 1]
//   (a, b) -> (a * cos_i - b * sin_i, b * cos_i + a * sin_i); dims [rd, Dh) are copied.
//
// Rows (t, h) are split across cores; every element depends only on its own pair, so the split
// cannot change any value. x and out may be the same buffer: each step loads both members of
// its pairs before it stores them. Every core checks every position before writing, so a bad
// position fails the call on every core with the same message and leaves out untouched.
#include <algorithm>
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/simd.h"
#include "superkernel/attrs_attention.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "rope.f32";
enum { kOpX = 0, kOpPos = 1, kOpCache = 2, kOpOut = 3 };
// Walk operands: one (t, h) row per index.
enum { kWalkX = 0, kWalkOut = 1, kWalkPos = 2 };

// Rotates the first 2 * half elements of one row; `cs` points at cos, `cs + half` at sin.
using RotateFn = void (*)(const float* x, float* y, const float* cs, int64_t half);

void neox_scalar(const float* x, float* y, const float* cs, int64_t half) {
  const float* sn = cs + half;
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i];
    const float b = x[i + half];
    y[i] = a * cs[i] - b * sn[i];
    y[i + half] = b * cs[i] + a * sn[i];
  }
}

void interleaved_scalar(const float* x, float* y, const float* cs, int64_t half) {
  const float* sn = cs + half;
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[2 * i];
    const float b = x[2 * i + 1];
    y[2 * i] = a * cs[i] - b * sn[i];
    y[2 * i + 1] = b * cs[i] + a * sn[i];
  }
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 void neox_avx2(const float* x, float* y, const float* cs, int64_t half) {
  const float* sn = cs + half;
  int64_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 c = _mm256_loadu_ps(cs + i);
    const __m256 s = _mm256_loadu_ps(sn + i);
    const __m256 a = _mm256_loadu_ps(x + i);
    const __m256 b = _mm256_loadu_ps(x + half + i);
    _mm256_storeu_ps(y + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
    _mm256_storeu_ps(y + half + i, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)));
  }
  if (i < half) {
    const __m256i m = simd::mask8(half - i);
    const __m256 c = simd::maskload_ps(cs + i, m);
    const __m256 s = simd::maskload_ps(sn + i, m);
    const __m256 a = simd::maskload_ps(x + i, m);
    const __m256 b = simd::maskload_ps(x + half + i, m);
    simd::maskstore_ps(y + i, m, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
    simd::maskstore_ps(y + half + i, m, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)));
  }
}

// Four pairs per step: cos/sin are duplicated into both lanes of their pair, and FMADDSUB
// subtracts in the even (first) lanes and adds in the odd ones.
SK_TARGET_AVX2 void interleaved_avx2(const float* x, float* y, const float* cs, int64_t half) {
  const float* sn = cs + half;
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  int64_t i = 0;
  for (; i + 4 <= half; i += 4) {
    const __m256 c = _mm256_permutevar8x32_ps(_mm256_zextps128_ps256(_mm_loadu_ps(cs + i)), dup);
    const __m256 s = _mm256_permutevar8x32_ps(_mm256_zextps128_ps256(_mm_loadu_ps(sn + i)), dup);
    const __m256 v = _mm256_loadu_ps(x + 2 * i);
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);
    _mm256_storeu_ps(y + 2 * i, _mm256_fmaddsub_ps(v, c, _mm256_mul_ps(swapped, s)));
  }
  if (i < half) {
    const __m128i m4 = _mm256_castsi256_si128(simd::mask8(half - i));
    const __m256i m = simd::mask8(2 * (half - i));
    const __m256 c = _mm256_permutevar8x32_ps(_mm256_zextps128_ps256(simd::maskload_ps(cs + i, m4)), dup);
    const __m256 s = _mm256_permutevar8x32_ps(_mm256_zextps128_ps256(simd::maskload_ps(sn + i, m4)), dup);
    const __m256 v = simd::maskload_ps(x + 2 * i, m);
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);
    simd::maskstore_ps(y + 2 * i, m, _mm256_fmaddsub_ps(v, c, _mm256_mul_ps(swapped, s)));
  }
}

SK_TARGET_AVX512 void neox_avx512(const float* x, float* y, const float* cs, int64_t half) {
  const float* sn = cs + half;
  int64_t i = 0;
  for (; i + 16 <= half; i += 16) {
    const __m512 c = _mm512_loadu_ps(cs + i);
    const __m512 s = _mm512_loadu_ps(sn + i);
    const __m512 a = _mm512_loadu_ps(x + i);
    const __m512 b = _mm512_loadu_ps(x + half + i);
    _mm512_storeu_ps(y + i, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
    _mm512_storeu_ps(y + half + i, _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, s)));
  }
  if (i < half) {
    const __mmask16 m = simd::mask16(half - i);
    const __m512 c = simd::masked_load_ps(m, cs + i);
    const __m512 s = simd::masked_load_ps(m, sn + i);
    const __m512 a = simd::masked_load_ps(m, x + i);
    const __m512 b = simd::masked_load_ps(m, x + half + i);
    simd::masked_store_ps(y + i, m, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
    simd::masked_store_ps(y + half + i, m, _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, s)));
  }
}

// Eight pairs per step, as interleaved_avx2.
SK_TARGET_AVX512 void interleaved_avx512(const float* x, float* y, const float* cs, int64_t half) {
  const float* sn = cs + half;
  const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  int64_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m512 c = _mm512_permutexvar_ps(dup, _mm512_zextps256_ps512(_mm256_loadu_ps(cs + i)));
    const __m512 s = _mm512_permutexvar_ps(dup, _mm512_zextps256_ps512(_mm256_loadu_ps(sn + i)));
    const __m512 v = _mm512_loadu_ps(x + 2 * i);
    const __m512 swapped = _mm512_permute_ps(v, 0xB1);
    _mm512_storeu_ps(y + 2 * i, _mm512_fmaddsub_ps(v, c, _mm512_mul_ps(swapped, s)));
  }
  if (i < half) {
    const auto m8 = static_cast<__mmask8>(simd::mask16(half - i));
    const __mmask16 m = simd::mask16(2 * (half - i));
    const __m512 c = _mm512_permutexvar_ps(dup, _mm512_zextps256_ps512(simd::masked_load_ps8(m8, cs + i)));
    const __m512 s = _mm512_permutexvar_ps(dup, _mm512_zextps256_ps512(simd::masked_load_ps8(m8, sn + i)));
    const __m512 v = simd::masked_load_ps(m, x + 2 * i);
    const __m512 swapped = _mm512_permute_ps(v, 0xB1);
    simd::masked_store_ps(y + 2 * i, m, _mm512_fmaddsub_ps(v, c, _mm512_mul_ps(swapped, s)));
  }
}
#endif

RotateFn select_rotate(bool neox) {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return neox ? neox_avx512 : interleaved_avx512;
    case kIsaAvx2:
      return neox ? neox_avx2 : interleaved_avx2;
    default:
      break;
  }
#endif
  return neox ? neox_scalar : interleaved_scalar;
}

struct Plan {
  Walk rows;  // operands: kWalkX, kWalkOut (reference), kWalkPos
  int64_t t = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;
  bool neox = true;
  int64_t max_pos = 0;
  int64_t cache_stride = 0;
  const sk_tensor_arg* pos = nullptr;
  const float* x = nullptr;
  const float* cache = nullptr;
  float* out = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 3, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[kOpX];
  const sk_tensor_arg& pos = args->inputs[kOpPos];
  const sk_tensor_arg& cache = args->inputs[kOpCache];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 2, err) ||
      !check_tensor(pos, kName, "positions", SK_DTYPE_I32, 1, err) ||
      !check_tensor(cache, kName, "cos_sin_cache", SK_DTYPE_F32, 2, err) ||
      !check_tensor(out, kName, "out", SK_DTYPE_F32, 2, err)) {
    return false;
  }
  if (args->attrs == nullptr || args->attrs_size < sizeof(sk_rope_attrs)) {
    return invalid(err, "%s: needs sk_rope_attrs (%zu bytes), got %u bytes", kName, sizeof(sk_rope_attrs),
                   args->attrs == nullptr ? 0u : args->attrs_size);
  }
  const sk_rope_attrs a = *static_cast<const sk_rope_attrs*>(args->attrs);
  if (a.head_dim <= 0) return invalid(err, "%s: head_dim %d is not positive", kName, a.head_dim);
  if (a.rotary_dim <= 0 || a.rotary_dim > a.head_dim || a.rotary_dim % 2 != 0) {
    return invalid(err, "%s: rotary_dim %d must be even and in (0, head_dim = %d]", kName, a.rotary_dim, a.head_dim);
  }
  if (a.neox_style != 0 && a.neox_style != 1) {
    return invalid(err, "%s: neox_style %d is neither 0 nor 1", kName, a.neox_style);
  }
  char s1[96];
  char s2[96];
  if (x.rank > 3)
    return invalid(err, "%s: x shape %s is not [T, H, Dh] or [T, H * Dh]", kName, format_shape(x, s1, sizeof s1));
  const int64_t t = x.shape[0];
  const int64_t dh = a.head_dim;
  if ((x.rank == 3 && x.shape[2] != dh) || (x.rank == 2 && x.shape[1] % dh != 0)) {
    return invalid(err, "%s: x shape %s does not have heads of head_dim = %lld", kName, format_shape(x, s1, sizeof s1),
                   static_cast<long long>(dh));
  }
  if (!same_shape(x, out)) {
    return invalid(err, "%s: out shape %s differs from x shape %s", kName, format_shape(out, s1, sizeof s1),
                   format_shape(x, s2, sizeof s2));
  }
  if (pos.rank != 1 || pos.shape[0] != t) {
    return invalid(err, "%s: positions shape %s is not [%lld]", kName, format_shape(pos, s1, sizeof s1),
                   static_cast<long long>(t));
  }
  if (cache.rank != 2 || cache.shape[1] != a.rotary_dim) {
    return invalid(err, "%s: cos_sin_cache shape %s is not [max_pos, rotary_dim = %d]", kName,
                   format_shape(cache, s1, sizeof s1), a.rotary_dim);
  }
  if (!last_dim_contiguous(x) || !last_dim_contiguous(out) || !last_dim_contiguous(cache)) {
    return invalid(err, "%s: the last dimension of x, out and cos_sin_cache must have stride 1", kName);
  }
  // A rank-2 [T, H * Dh] operand is the [T, H, Dh] view with head stride Dh.
  const int64_t h = x.rank == 3 ? x.shape[1] : x.shape[1] / dh;
  const int64_t shape[2] = {t, h};
  int64_t strides[3][SK_MAX_RANK] = {};
  strides[kWalkX][0] = x.stride[0];
  strides[kWalkX][1] = x.rank == 3 ? x.stride[1] : dh;
  strides[kWalkOut][0] = out.stride[0];
  strides[kWalkOut][1] = out.rank == 3 ? out.stride[1] : dh;
  strides[kWalkPos][0] = pos.stride[0];
  if (!make_walk(2, shape, 3, strides, kWalkOut, dh, &p->rows)) {
    return invalid(err, "%s: out is a view whose rows overlap in memory", kName);
  }
  p->t = t;
  p->head_dim = dh;
  p->rotary_dim = a.rotary_dim;
  p->neox = a.neox_style == 1;
  p->max_pos = cache.shape[0];
  p->cache_stride = cache.stride[0];
  p->pos = &pos;
  p->x = static_cast<const float*>(x.data);
  p->cache = static_cast<const float*>(cache.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

// In token order, so the first bad position reported is the same on every core.
bool check_positions(const Plan& p, ErrorSink err) {
  const int32_t* pos = static_cast<const int32_t*>(p.pos->data);
  for (int64_t t = 0; t < p.t; ++t) {
    const int32_t v = pos[t * p.pos->stride[0]];
    if (v < 0 || v >= p.max_pos) {
      return invalid(err, "%s: positions[%lld] = %d is out of range for a cos/sin cache of %lld positions", kName,
                     static_cast<long long>(t), v, static_cast<long long>(p.max_pos));
    }
  }
  return true;
}

}  // namespace

int32_t rope_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err) || !check_positions(p, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const RotateFn rotate = select_rotate(p.neox);
  const int32_t* pos = static_cast<const int32_t*>(p.pos->data);
  const int64_t half = p.rotary_dim / 2;
  const size_t pass_bytes = static_cast<size_t>(p.head_dim - p.rotary_dim) * sizeof(float);
  const sk_range r = sk_split_range(p.rows.numel, core->core_id, core->num_cores, 1);
  const int64_t sx = p.rows.inner_stride(kWalkX);
  const int64_t sy = p.rows.inner_stride(kWalkOut);
  const int64_t sp = p.rows.inner_stride(kWalkPos);
  for_each_run(p.rows, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      const float* x = p.x + off[kWalkX] + i * sx;
      float* y = p.out + off[kWalkOut] + i * sy;
      rotate(x, y, p.cache + pos[off[kWalkPos] + i * sp] * p.cache_stride, half);
      if (pass_bytes > 0 && x != y) std::memcpy(y + p.rotary_dim, x + p.rotary_dim, pass_bytes);
    }
  });
  return SK_OK;
}

int32_t rope_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                        int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  constexpr int64_t kF = sizeof(float);
  RangeList list(ranges, capacity);
  if (p.t == 0) return list.finish();
  // Every core checks every position.
  const int64_t last_pos = (p.t - 1) * p.pos->stride[0];
  constexpr int64_t kI = sizeof(int32_t);
  list.add(kOpPos, SK_ACCESS_READ, std::min<int64_t>(0, last_pos) * kI, (std::max<int64_t>(0, last_pos) + 1) * kI);
  const sk_range r = sk_split_range(p.rows.numel, core_id, num_cores, 1);
  if (r.begin >= r.end) return list.finish();
  list.add_walk(p.rows, kWalkX, kOpX, SK_ACCESS_READ, r.begin, r.end, p.head_dim, kF);
  // The cache rows read depend on the positions: every row.
  if (p.max_pos > 0) {
    const int64_t last_row = (p.max_pos - 1) * p.cache_stride;
    list.add(kOpCache, SK_ACCESS_READ, std::min<int64_t>(0, last_row) * kF,
             (std::max<int64_t>(0, last_row) + p.rotary_dim) * kF);
  }
  list.add_walk(p.rows, kWalkOut, kOpOut, SK_ACCESS_WRITE, r.begin, r.end, p.head_dim, kF);
  return list.finish();
}

}  // namespace sk::kernels
