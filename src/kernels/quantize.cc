// quantize.i8: dynamic per-token symmetric quantisation of activations for matmul.w8a8.
//   x f32 [..., K] -> q i8 [..., K], scale f32 [...]  (one scale per row)
//   scale = max_k |x[k]| / 127                   (f32 division; NaN elements are ignored)
//   q[k]  = round_half_even(clamp(x[k] / scale, -127, 127)), and 0 where x[k] / scale is NaN
// so a row of zeros gets scale 0 and q = 0 (0 / 0 is NaN), and a row holding an infinity gets
// scale inf and q = 0 everywhere. Every step is a correctly rounded f32 operation or exact, so
// the result is the same at every ISA level, on any number of cores.
//
// Cores split rows in chunks of kRowAlign, so cores do not share cache lines of `scale`.
#include <algorithm>
#include <cmath>

#include "kernels/cpu_isa.h"
#include "kernels/gemv_kernels.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/simd.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "quantize.i8";
enum { kOpX = 0, kOpQ = 1, kOpScale = 2 };
constexpr int64_t kRowAlign = 16;

inline int8_t quantize_one(float x, float scale) {
  float v = x / scale;
  if (!(v == v)) v = 0.0f;
  v = std::min(std::max(v, -127.0f), 127.0f);
  return static_cast<int8_t>(static_cast<int>(std::nearbyint(v)));
}

inline float amax_tail(const float* x, int64_t begin, int64_t end, float m) {
  for (int64_t i = begin; i < end; ++i) {
    const float a = std::fabs(x[i]);
    if (a > m) m = a;  // false for NaN: NaN is ignored
  }
  return m;
}

float quantize_row_scalar(const float* x, int64_t k, int8_t* q) {
  const float scale = amax_tail(x, 0, k, 0.0f) / 127.0f;
  for (int64_t i = 0; i < k; ++i) q[i] = quantize_one(x[i], scale);
  return scale;
}

#if SK_KERNELS_X86
SK_TARGET_AVX2 float quantize_row_avx2(const float* x, int64_t k, int8_t* q) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  int64_t i = 0;
  // MAXPS returns its second operand when either is NaN: with the running maximum second, NaN
  // elements leave it unchanged, as in the scalar loop.
  for (; i + 8 <= k; i += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), m);
  const float scale = amax_tail(x, i, k, simd::hmax8(m)) / 127.0f;
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 lo = _mm256_set1_ps(-127.0f);
  const __m256 hi = _mm256_set1_ps(127.0f);
  for (i = 0; i + 8 <= k; i += 8) {
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), s);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256i n = _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // Saturating packs keep the values (already in [-127, 127]); lanes come out as
    // [n0..3 x4 | n4..7 x4], so take dword 0 of each 128-bit half.
    const __m256i w16 = _mm256_packs_epi32(n, n);
    const __m256i b8 = _mm256_packs_epi16(w16, w16);
    const __m128i both = _mm_unpacklo_epi32(_mm256_castsi256_si128(b8), _mm256_extracti128_si256(b8, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), both);
  }
  for (; i < k; ++i) q[i] = quantize_one(x[i], scale);
  return scale;
}

SK_TARGET_AVX512 float quantize_row_avx512(const float* x, int64_t k, int8_t* q) {
  __m512 m = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m);
  const float scale = amax_tail(x, i, k, simd::hmax16(m)) / 127.0f;
  const __m512 s = _mm512_set1_ps(scale);
  const __m512 lo = _mm512_set1_ps(-127.0f);
  const __m512 hi = _mm512_set1_ps(127.0f);
  for (i = 0; i + 16 <= k; i += 16) {
    __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), s);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    const __m512i n = _mm512_cvtps_epi32(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(n));
  }
  for (; i < k; ++i) q[i] = quantize_one(x[i], scale);
  return scale;
}
#endif

struct Plan {
  Walk rows;  // operands: 0 = x, 1 = q (reference), 2 = scale; one row per index
  int64_t k = 0;
  const float* x = nullptr;
  int8_t* q = nullptr;
  float* scale = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 1, 2, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& q = args->outputs[0];
  const sk_tensor_arg& scale = args->outputs[1];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 1, err) || !check_tensor(q, kName, "q", SK_DTYPE_I8, 1, err) ||
      !check_tensor(scale, kName, "scale", SK_DTYPE_F32, 0, err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  if (!same_shape(x, q)) {
    return invalid(err, "%s: q shape %s differs from x shape %s", kName, format_shape(q, s1, sizeof s1),
                   format_shape(x, s2, sizeof s2));
  }
  const int lead = x.rank - 1;
  bool scale_ok = scale.rank == lead;
  for (int d = 0; scale_ok && d < lead; ++d) scale_ok = scale.shape[d] == x.shape[d];
  if (!scale_ok) {
    return invalid(err, "%s: scale shape %s is not the leading shape of x %s", kName,
                   format_shape(scale, s1, sizeof s1), format_shape(x, s2, sizeof s2));
  }
  if (!last_dim_contiguous(x) || !last_dim_contiguous(q)) {
    return invalid(err, "%s: the last dimension of x and q must have stride 1", kName);
  }
  // A q row is a quarter of an x row's bytes: in place, row r would overwrite x rows another core
  // still reads.
  if (views_overlap(x, q) || views_overlap(x, scale)) {
    return invalid(err, "%s: %s overlaps x", kName, views_overlap(x, q) ? "q" : "scale");
  }
  int64_t strides[3][SK_MAX_RANK] = {};
  for (int d = 0; d < lead; ++d) {
    strides[0][d] = x.stride[d];
    strides[1][d] = q.stride[d];
    strides[2][d] = scale.stride[d];
  }
  const int64_t k = x.shape[lead];
  if (!make_walk(lead, x.shape, 3, strides, 1, k, &p->rows)) {
    return invalid(err, "%s: q is a view whose rows overlap in memory", kName);
  }
  // Scales of different rows must not share an element either, or two cores could write it.
  Walk scale_walk;
  if (!make_walk(lead, x.shape, 3, strides, 2, 1, &scale_walk)) {
    return invalid(err, "%s: scale is a view whose elements overlap in memory", kName);
  }
  p->k = k;
  p->x = static_cast<const float*>(x.data);
  p->q = static_cast<int8_t*>(q.data);
  p->scale = static_cast<float*>(scale.data);
  return true;
}

}  // namespace

float quantize_row(const float* x, int64_t k, int8_t* q) {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return quantize_row_avx512(x, k, q);
    case kIsaAvx2:
      return quantize_row_avx2(x, k, q);
    default:
      break;
  }
#endif
  return quantize_row_scalar(x, k, q);
}

int32_t quantize_i8_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.rows.numel, core->core_id, core->num_cores, kRowAlign);
  const int64_t sx = p.rows.inner_stride(0);
  const int64_t sq = p.rows.inner_stride(1);
  const int64_t ss = p.rows.inner_stride(2);
  for_each_run(p.rows, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      // With K = 0 x and q may have no storage: quantize_row then touches neither.
      const float* xr = p.k > 0 ? p.x + off[0] + i * sx : nullptr;
      int8_t* qr = p.k > 0 ? p.q + off[1] + i * sq : nullptr;
      p.scale[off[2] + i * ss] = quantize_row(xr, p.k, qr);
    }
  });
  return SK_OK;
}

int32_t quantize_i8_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                           int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) return -SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.rows.numel, core_id, num_cores, kRowAlign);
  RangeList list(ranges, capacity);
  list.add_walk(p.rows, 0, kOpX, SK_ACCESS_READ, r.begin, r.end, p.k, sizeof(float));
  list.add_walk(p.rows, 1, kOpQ, SK_ACCESS_WRITE, r.begin, r.end, p.k, 1);
  // One range per row: the scale view need not follow q's memory order.
  const int64_t ss = p.rows.inner_stride(2);
  for_each_run(p.rows, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t e = off[2] + i * ss;
      list.add(kOpScale, SK_ACCESS_WRITE, e * 4, (e + 1) * 4);
    }
  });
  return list.finish();
}

}  // namespace sk::kernels
