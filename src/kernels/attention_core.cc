// The per-ISA operations of attention_core.h. The AVX2 and AVX-512 paths are the same code at
// two vector widths (W = 8 or 16 lanes); keep them in step.
//
// Register tiles: scores run tiles of 4 tokens x 2 heads on AVX2, 4 x 4 on AVX-512 (8 or 16
// accumulators; each cache row vector is loaded, and converted from bf16, once per tile of heads)
// over all tokens of a call; pv a tile of 2 vectors x up to 6 heads on AVX2, up to 8 on AVX-512
// (12 or 16 accumulators kept across the tokens, one load per cache row vector). Each accumulator
// of pv takes one FMA per token, a chain of dependent FMAs: 12 chains keep the FMA units busy
// through their latency where 8 barely would.
#include "kernels/attention_core.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu_isa.h"
#include "kernels/masked_io.h"
#include "kernels/simd.h"
#include "util/half.h"

#define SK_ATTN_INLINE __attribute__((always_inline)) inline

namespace sk::kernels::attn {
namespace {

constexpr int kTileTokens = 4;
constexpr int kTileHeads = 2;
// AVX-512 has 32 vector registers: 4 x 4 accumulators, 4 key rows and a query fit, and each key
// row vector (converted from bf16 once) serves twice as many heads.
constexpr int kTileHeads512 = 4;
constexpr int kPvHeads = 6;
// AVX-512 pv: 2 vectors x 8 heads, 16 accumulators, so the 8 query heads of a KV head (or of an
// MLA core's share) read and widen each value row once.
constexpr int kPvHeads512 = 8;

// ---- Scalar ----

inline float load1(const float* p) { return *p; }
inline float load1(const Bf16* p) { return bf16_to_f32(*p); }

// The fallback accumulates dot products in double: it is the slow path anyway, and the most
// accurate level.
template <class KT>
void scores_scalar(const float* const* q1, const float* const* q2, int nh, int64_t n1, int64_t n2, int64_t off2,
                   const KT* const* rows, int nt, float scale, float* s) {
  for (int h = 0; h < nh; ++h) {
    for (int j = 0; j < nt; ++j) {
      double acc = 0.0;
      for (int64_t i = 0; i < n1; ++i) acc += static_cast<double>(q1[h][i]) * load1(rows[j] + i);
      for (int64_t i = 0; i < n2; ++i) acc += static_cast<double>(q2[h][i]) * load1(rows[j] + off2 + i);
      s[h * kChunk + j] = static_cast<float>(acc) * scale;
    }
  }
}

void softmax_scalar(float* s, int nh, int nt, float* m, float* l, float* corr) {
  for (int h = 0; h < nh; ++h) {
    float* sh = s + h * kChunk;
    float mc = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < nt; ++j) mc = std::max(mc, sh[j]);
    const float m_new = std::max(m[h], mc);
    corr[h] = m_new == m[h] ? 1.0f : std::exp(m[h] - m_new);
    double sum = 0.0;
    for (int j = 0; j < nt; ++j) {
      sh[j] = std::exp(sh[j] - m_new);
      sum += sh[j];
    }
    l[h] = l[h] * corr[h] + static_cast<float>(sum);
    m[h] = m_new;
  }
}

template <class KT>
void pv_scalar(const float* p, int nh, int nt, const KT* const* rows, int64_t dv, float* const* acc, const float* corr,
               bool first) {
  for (int h = 0; h < nh; ++h) {
    float* a = acc[h];
    for (int64_t d = 0; d < dv; ++d) a[d] = first ? 0.0f : a[d] * corr[h];
    for (int j = 0; j < nt; ++j) {
      const float pj = p[h * kChunk + j];
      const KT* v = rows[j];
      for (int64_t d = 0; d < dv; ++d) a[d] += pj * load1(v + d);
    }
  }
}

void scale_scalar(float* y, int64_t n, float f) {
  for (int64_t i = 0; i < n; ++i) y[i] *= f;
}

#if SK_KERNELS_X86
// ---- AVX2 (W = 8) ----

SK_TARGET_AVX2 SK_ATTN_INLINE __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
SK_TARGET_AVX2 SK_ATTN_INLINE __m256 load8(const Bf16* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
// The first n (< 8) elements; the other lanes are 0 and nothing past p + n is touched.
SK_TARGET_AVX2 SK_ATTN_INLINE __m256 load8_tail(const float* p, int64_t n) {
  return simd::maskload_ps(p, simd::mask8(n));
}
SK_TARGET_AVX2 SK_ATTN_INLINE __m256 load8_tail(const Bf16* p, int64_t n) {
  Bf16 buf[8] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(Bf16));
  return load8(buf);
}

// The sums of a 4-token x 2-head tile of 8-lane accumulators, times scale, into s[h * kChunk + t]:
// simd::hsum8's tree (t[i] + t[i + 4], then t[i] + t[i + 2], then t[0] + t[1]) run on all eight
// at once with shuffles, so every sum has hsum8's bits at a third of the instructions.
SK_TARGET_AVX2 SK_ATTN_INLINE void store_sums_4x2(const __m256 (&acc)[4][2], float scale, float* s) {
  __m256 y[4];  // y[t] = [acc[t][0] folded to 4 lanes | acc[t][1] folded to 4 lanes]
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) {
    y[t] = _mm256_add_ps(_mm256_permute2f128_ps(acc[t][0], acc[t][1], 0x20),
                         _mm256_permute2f128_ps(acc[t][0], acc[t][1], 0x31));
  }
  // w0 = [t0 h0, t1 h0 | t0 h1, t1 h1] folded to 2 lanes each; w1 the same for t2, t3.
  const __m256 w0 = _mm256_add_ps(_mm256_shuffle_ps(y[0], y[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm256_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 w1 = _mm256_add_ps(_mm256_shuffle_ps(y[2], y[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm256_shuffle_ps(y[2], y[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // [t0..t3 of head 0 | t0..t3 of head 1]
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m256 sv = _mm256_mul_ps(r, _mm256_set1_ps(scale));
  _mm_storeu_ps(s, _mm256_castps256_ps128(sv));
  _mm_storeu_ps(s + kChunk, _mm256_extractf128_ps(sv, 1));
}

// acc[t][h] += lanes of q[h][0, n) * rows[t][off, off + n).
template <class KT, int NT, int NH>
SK_TARGET_AVX2 SK_ATTN_INLINE void dot_segment_avx2(const float* const* q, const KT* const* rows, int64_t off,
                                                    int64_t n, __m256 (&acc)[NT][NH]) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 k[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) k[t] = load8(rows[t] + off + i);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m256 qv = _mm256_loadu_ps(q[h] + i);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) acc[t][h] = _mm256_fmadd_ps(qv, k[t], acc[t][h]);
    }
  }
  if (i < n) {
    const __m256i mask = simd::mask8(n - i);
    __m256 k[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) k[t] = load8_tail(rows[t] + off + i, n - i);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m256 qv = simd::maskload_ps(q[h] + i, mask);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) acc[t][h] = _mm256_fmadd_ps(qv, k[t], acc[t][h]);
    }
  }
}

template <class KT, int NT, int NH>
SK_TARGET_AVX2 SK_ATTN_INLINE void score_tile_avx2(const float* const* q1, const float* const* q2, int64_t n1,
                                                   int64_t n2, int64_t off2, const KT* const* rows, float scale,
                                                   float* s) {
  __m256 acc[NT][NH];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) acc[t][h] = _mm256_setzero_ps();
  }
  dot_segment_avx2<KT, NT, NH>(q1, rows, 0, n1, acc);
  if (n2 > 0) dot_segment_avx2<KT, NT, NH>(q2, rows, off2, n2, acc);
  if constexpr (NT == 4 && NH == 2) {
    store_sums_4x2(acc, scale, s);
  } else {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 8
      for (int h = 0; h < NH; ++h) s[h * kChunk + t] = simd::hsum8(acc[t][h]) * scale;
    }
  }
}

template <class KT>
using ScoreHeads = void (*)(const float* const*, const float* const*, int64_t, int64_t, int64_t, const KT* const*, int,
                            float, float*);

// All nt tokens of NH heads: tiles of kTileTokens tokens, then single tokens.
template <class KT, int NH>
SK_TARGET_AVX2 void score_heads_avx2(const float* const* q1, const float* const* q2, int64_t n1, int64_t n2,
                                     int64_t off2, const KT* const* rows, int nt, float scale, float* s) {
  int j = 0;
  for (; j + kTileTokens <= nt; j += kTileTokens) {
    score_tile_avx2<KT, kTileTokens, NH>(q1, q2, n1, n2, off2, rows + j, scale, s + j);
  }
  for (; j < nt; ++j) score_tile_avx2<KT, 1, NH>(q1, q2, n1, n2, off2, rows + j, scale, s + j);
}

template <class KT>
void scores_avx2(const float* const* q1, const float* const* q2, int nh, int64_t n1, int64_t n2, int64_t off2,
                 const KT* const* rows, int nt, float scale, float* s) {
  static constexpr ScoreHeads<KT> kHeads[kTileHeads] = {score_heads_avx2<KT, 1>, score_heads_avx2<KT, 2>};
  for (int h = 0; h < nh; h += kTileHeads) {
    kHeads[std::min(kTileHeads, nh - h) - 1](q1 + h, q2 + h, n1, n2, off2, rows, nt, scale, s + h * kChunk);
  }
}

SK_TARGET_AVX2 void softmax_avx2(float* s, int nh, int nt, float* m, float* l, float* corr) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int h = 0; h < nh; ++h) {
    float* sh = s + h * kChunk;
    __m256 vmax = neg_inf;
    int j = 0;
    for (; j + 8 <= nt; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(sh + j));
    if (j < nt) {
      const __m256i mask = simd::mask8(nt - j);
      vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, simd::maskload_ps(sh + j, mask), _mm256_castsi256_ps(mask)));
    }
    const float m_new = std::max(m[h], simd::hmax8(vmax));
    corr[h] = m_new == m[h] ? 1.0f : _mm256_cvtss_f32(simd::exp8(_mm256_set1_ps(m[h] - m_new)));
    const __m256 mv = _mm256_set1_ps(m_new);
    __m256 sum = _mm256_setzero_ps();
    for (j = 0; j + 8 <= nt; j += 8) {
      const __m256 p = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(sh + j), mv));
      _mm256_storeu_ps(sh + j, p);
      sum = _mm256_add_ps(sum, p);
    }
    if (j < nt) {
      const __m256i mask = simd::mask8(nt - j);
      const __m256 x = _mm256_sub_ps(simd::maskload_ps(sh + j, mask), mv);
      const __m256 p = _mm256_and_ps(simd::exp8(x), _mm256_castsi256_ps(mask));
      simd::maskstore_ps(sh + j, mask, p);
      sum = _mm256_add_ps(sum, p);
    }
    l[h] = l[h] * corr[h] + simd::hsum8(sum);
    m[h] = m_new;
  }
}

// Columns [d0, d0 + 16) of NH heads.
template <class KT, int NH>
SK_TARGET_AVX2 void pv_block_avx2(const float* p, int nt, const KT* const* rows, int64_t d0, float* const* acc,
                                  const float* corr, bool first) {
  __m256 a[NH][2];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    if (first) {
      a[h][0] = a[h][1] = _mm256_setzero_ps();
    } else {
      const __m256 c = _mm256_set1_ps(corr[h]);
      a[h][0] = _mm256_mul_ps(_mm256_loadu_ps(acc[h] + d0), c);
      a[h][1] = _mm256_mul_ps(_mm256_loadu_ps(acc[h] + d0 + 8), c);
    }
  }
  for (int j = 0; j < nt; ++j) {
    const __m256 v0 = load8(rows[j] + d0);
    const __m256 v1 = load8(rows[j] + d0 + 8);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m256 pj = _mm256_broadcast_ss(p + h * kChunk + j);
      a[h][0] = _mm256_fmadd_ps(pj, v0, a[h][0]);
      a[h][1] = _mm256_fmadd_ps(pj, v1, a[h][1]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    _mm256_storeu_ps(acc[h] + d0, a[h][0]);
    _mm256_storeu_ps(acc[h] + d0 + 8, a[h][1]);
  }
}

// Columns [d0, d0 + w), w <= 8, of NH heads.
template <class KT, int NH>
SK_TARGET_AVX2 void pv_part_avx2(const float* p, int nt, const KT* const* rows, int64_t d0, int64_t w,
                                 float* const* acc, const float* corr, bool first) {
  const __m256i mask = simd::mask8(w);
  __m256 a[NH];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    a[h] = first ? _mm256_setzero_ps() : _mm256_mul_ps(simd::maskload_ps(acc[h] + d0, mask), _mm256_set1_ps(corr[h]));
  }
  for (int j = 0; j < nt; ++j) {
    const __m256 v = w == 8 ? load8(rows[j] + d0) : load8_tail(rows[j] + d0, w);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) a[h] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + h * kChunk + j), v, a[h]);
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) simd::maskstore_ps(acc[h] + d0, mask, a[h]);
}

template <class KT>
using PvBlock = void (*)(const float*, int, const KT* const*, int64_t, float* const*, const float*, bool);
template <class KT>
using PvPart = void (*)(const float*, int, const KT* const*, int64_t, int64_t, float* const*, const float*, bool);

template <class KT>
void pv_avx2(const float* p, int nh, int nt, const KT* const* rows, int64_t dv, float* const* acc, const float* corr,
             bool first) {
  static constexpr PvBlock<KT> kBlocks[kPvHeads] = {pv_block_avx2<KT, 1>, pv_block_avx2<KT, 2>, pv_block_avx2<KT, 3>,
                                                    pv_block_avx2<KT, 4>, pv_block_avx2<KT, 5>, pv_block_avx2<KT, 6>};
  static constexpr PvPart<KT> kParts[kPvHeads] = {pv_part_avx2<KT, 1>, pv_part_avx2<KT, 2>, pv_part_avx2<KT, 3>,
                                                  pv_part_avx2<KT, 4>, pv_part_avx2<KT, 5>, pv_part_avx2<KT, 6>};
  int64_t d = 0;
  for (; d + 16 <= dv; d += 16) {
    for (int h = 0; h < nh; h += kPvHeads) {
      kBlocks[std::min(kPvHeads, nh - h) - 1](p + h * kChunk, nt, rows, d, acc + h, corr + h, first);
    }
  }
  for (; d < dv; d += 8) {
    const int64_t w = std::min<int64_t>(8, dv - d);
    for (int h = 0; h < nh; h += kPvHeads) {
      kParts[std::min(kPvHeads, nh - h) - 1](p + h * kChunk, nt, rows, d, w, acc + h, corr + h, first);
    }
  }
}

SK_TARGET_AVX2 void scale_avx2(float* y, int64_t n, float f) {
  const __m256 fv = _mm256_set1_ps(f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), fv));
  if (i < n) {
    const __m256i mask = simd::mask8(n - i);
    simd::maskstore_ps(y + i, mask, _mm256_mul_ps(simd::maskload_ps(y + i, mask), fv));
  }
}

// ---- AVX-512 (W = 16) ----

SK_TARGET_AVX512 SK_ATTN_INLINE __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
SK_TARGET_AVX512 SK_ATTN_INLINE __m512 load16(const Bf16* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
// The first n (< 16) elements; the other lanes are 0 and masked lanes never fault.
SK_TARGET_AVX512 SK_ATTN_INLINE __m512 load16_tail(const float* p, int64_t n) {
  return simd::masked_load_ps(simd::mask16(n), p);
}
SK_TARGET_AVX512 SK_ATTN_INLINE __m512 load16_tail(const Bf16* p, int64_t n) {
  const __m512i w = _mm512_cvtepu16_epi32(simd::masked_load_epi16x16(simd::mask16(n), p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// 32 bf16 values as two f32 vectors in element order: one load, then one word permute per
// vector that places value i in the upper half of lane i and zeroes the lower half (where
// load16 takes a zero-extension and a shift per 16 values).
SK_TARGET_AVX512 SK_ATTN_INLINE void load32_bf16(const Bf16* p, __m512& lo, __m512& hi) {
  const __m512i x = _mm512_loadu_si512(p);
  const __m512i lo_idx = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4, 0,
                                          3, 0, 2, 0, 1, 0, 0, 0);
  const __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
  constexpr __mmask32 kUpper = 0xAAAAAAAAu;
  lo = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(kUpper, lo_idx, x));
  hi = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(kUpper, hi_idx, x));
}

template <class KT, int NT, int NH>
SK_TARGET_AVX512 SK_ATTN_INLINE void dot_segment_avx512(const float* const* q, const KT* const* rows, int64_t off,
                                                        int64_t n, __m512 (&acc)[NT][NH]) {
  int64_t i = 0;
  if constexpr (std::is_same_v<KT, Bf16>) {
    // Two vectors of elements per step, in the same order as the 16-element steps below.
    for (; i + 32 <= n; i += 32) {
      __m512 k[NT][2];
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) load32_bf16(rows[t] + off + i, k[t][0], k[t][1]);
#pragma GCC unroll 8
      for (int h = 0; h < NH; ++h) {
        const __m512 q0 = _mm512_loadu_ps(q[h] + i);
        const __m512 q1 = _mm512_loadu_ps(q[h] + i + 16);
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) acc[t][h] = _mm512_fmadd_ps(q1, k[t][1], _mm512_fmadd_ps(q0, k[t][0], acc[t][h]));
      }
    }
  }
  for (; i + 16 <= n; i += 16) {
    __m512 k[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) k[t] = load16(rows[t] + off + i);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m512 qv = _mm512_loadu_ps(q[h] + i);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) acc[t][h] = _mm512_fmadd_ps(qv, k[t], acc[t][h]);
    }
  }
  if (i < n) {
    const __mmask16 mask = simd::mask16(n - i);
    __m512 k[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) k[t] = load16_tail(rows[t] + off + i, n - i);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m512 qv = simd::masked_load_ps(mask, q[h] + i);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) acc[t][h] = _mm512_fmadd_ps(qv, k[t], acc[t][h]);
    }
  }
}

template <class KT, int NT, int NH>
SK_TARGET_AVX512 SK_ATTN_INLINE void score_tile_avx512(const float* const* q1, const float* const* q2, int64_t n1,
                                                       int64_t n2, int64_t off2, const KT* const* rows, float scale,
                                                       float* s) {
  __m512 acc[NT][NH];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) acc[t][h] = _mm512_setzero_ps();
  }
  dot_segment_avx512<KT, NT, NH>(q1, rows, 0, n1, acc);
  if (n2 > 0) dot_segment_avx512<KT, NT, NH>(q2, rows, off2, n2, acc);
  if constexpr (NT == 4) {
    // Head pairs: hsum16 folds the upper 8 lanes onto the lower 8, then runs hsum8's tree.
#pragma GCC unroll 4
    for (int h = 0; h + 1 < NH; h += 2) {
      __m256 half[4][2];
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
#pragma GCC unroll 2
        for (int i = 0; i < 2; ++i) {
          half[t][i] = _mm256_add_ps(_mm512_castps512_ps256(acc[t][h + i]),
                                     _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[t][h + i]), 1)));
        }
      }
      store_sums_4x2(half, scale, s + h * kChunk);
    }
    if constexpr (NH % 2 == 1) {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) s[(NH - 1) * kChunk + t] = simd::hsum16(acc[t][NH - 1]) * scale;
    }
  } else {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 8
      for (int h = 0; h < NH; ++h) s[h * kChunk + t] = simd::hsum16(acc[t][h]) * scale;
    }
  }
}

// All nt tokens of NH heads: tiles of kTileTokens tokens, then single tokens.
template <class KT, int NH>
SK_TARGET_AVX512 void score_heads_avx512(const float* const* q1, const float* const* q2, int64_t n1, int64_t n2,
                                         int64_t off2, const KT* const* rows, int nt, float scale, float* s) {
  int j = 0;
  for (; j + kTileTokens <= nt; j += kTileTokens) {
    score_tile_avx512<KT, kTileTokens, NH>(q1, q2, n1, n2, off2, rows + j, scale, s + j);
  }
  for (; j < nt; ++j) score_tile_avx512<KT, 1, NH>(q1, q2, n1, n2, off2, rows + j, scale, s + j);
}

template <class KT>
void scores_avx512(const float* const* q1, const float* const* q2, int nh, int64_t n1, int64_t n2, int64_t off2,
                   const KT* const* rows, int nt, float scale, float* s) {
  static constexpr ScoreHeads<KT> kHeads[kTileHeads512] = {score_heads_avx512<KT, 1>, score_heads_avx512<KT, 2>,
                                                           score_heads_avx512<KT, 3>, score_heads_avx512<KT, 4>};
  for (int h = 0; h < nh; h += kTileHeads512) {
    kHeads[std::min(kTileHeads512, nh - h) - 1](q1 + h, q2 + h, n1, n2, off2, rows, nt, scale, s + h * kChunk);
  }
}

SK_TARGET_AVX512 void softmax_avx512(float* s, int nh, int nt, float* m, float* l, float* corr) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int h = 0; h < nh; ++h) {
    float* sh = s + h * kChunk;
    __m512 vmax = neg_inf;
    int j = 0;
    for (; j + 16 <= nt; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(sh + j));
    if (j < nt) vmax = _mm512_max_ps(vmax, simd::masked_load_ps(neg_inf, simd::mask16(nt - j), sh + j));
    const float m_new = std::max(m[h], simd::hmax16(vmax));
    corr[h] = m_new == m[h] ? 1.0f : _mm512_cvtss_f32(simd::exp16(_mm512_set1_ps(m[h] - m_new)));
    const __m512 mv = _mm512_set1_ps(m_new);
    __m512 sum = _mm512_setzero_ps();
    for (j = 0; j + 16 <= nt; j += 16) {
      const __m512 p = simd::exp16(_mm512_sub_ps(_mm512_loadu_ps(sh + j), mv));
      _mm512_storeu_ps(sh + j, p);
      sum = _mm512_add_ps(sum, p);
    }
    if (j < nt) {
      const __mmask16 mask = simd::mask16(nt - j);
      const __m512 x = _mm512_sub_ps(simd::masked_load_ps(mask, sh + j), mv);
      const __m512 p = _mm512_maskz_mov_ps(mask, simd::exp16(x));
      simd::masked_store_ps(sh + j, mask, p);
      sum = _mm512_add_ps(sum, p);
    }
    l[h] = l[h] * corr[h] + simd::hsum16(sum);
    m[h] = m_new;
  }
}

// Columns [d0, d0 + 32) of NH heads. A bf16 row's 32 values load as 16 pairs, and each pair
// widens with one operation per half (x << 16 for the even column, x & 0xFFFF0000 for the odd
// one) instead of a zero-extension and a shift per 16 values: the accumulators then hold the
// even and the odd columns, de-interleaved from acc on entry and re-interleaved on exit. Every
// column still takes the same operations in the same order, so the bits do not change.
template <class KT, int NH>
SK_TARGET_AVX512 void pv_block_avx512(const float* p, int nt, const KT* const* rows, int64_t d0, float* const* acc,
                                      const float* corr, bool first) {
  constexpr bool kPairs = std::is_same_v<KT, Bf16>;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  __m512 a[NH][2];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    if (first) {
      a[h][0] = a[h][1] = _mm512_setzero_ps();
    } else {
      const __m512 c = _mm512_set1_ps(corr[h]);
      __m512 lo = _mm512_loadu_ps(acc[h] + d0);
      __m512 hi = _mm512_loadu_ps(acc[h] + d0 + 16);
      if constexpr (kPairs) {
        const __m512 e = _mm512_permutex2var_ps(lo, even, hi);
        hi = _mm512_permutex2var_ps(lo, odd, hi);
        lo = e;
      }
      a[h][0] = _mm512_mul_ps(lo, c);
      a[h][1] = _mm512_mul_ps(hi, c);
    }
  }
  for (int j = 0; j < nt; ++j) {
    __m512 v0;
    __m512 v1;
    if constexpr (kPairs) {
      const __m512i x = _mm512_loadu_si512(rows[j] + d0);
      v0 = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
      v1 = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
    } else {
      v0 = load16(rows[j] + d0);
      v1 = load16(rows[j] + d0 + 16);
    }
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m512 pj = _mm512_set1_ps(p[h * kChunk + j]);
      a[h][0] = _mm512_fmadd_ps(pj, v0, a[h][0]);
      a[h][1] = _mm512_fmadd_ps(pj, v1, a[h][1]);
    }
  }
  const __m512i lo_cols = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_cols = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    if constexpr (kPairs) {
      _mm512_storeu_ps(acc[h] + d0, _mm512_permutex2var_ps(a[h][0], lo_cols, a[h][1]));
      _mm512_storeu_ps(acc[h] + d0 + 16, _mm512_permutex2var_ps(a[h][0], hi_cols, a[h][1]));
    } else {
      _mm512_storeu_ps(acc[h] + d0, a[h][0]);
      _mm512_storeu_ps(acc[h] + d0 + 16, a[h][1]);
    }
  }
}

// Columns [d0, d0 + w), w <= 16, of NH heads.
template <class KT, int NH>
SK_TARGET_AVX512 void pv_part_avx512(const float* p, int nt, const KT* const* rows, int64_t d0, int64_t w,
                                     float* const* acc, const float* corr, bool first) {
  const __mmask16 mask = simd::mask16(w);
  __m512 a[NH];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    a[h] =
        first ? _mm512_setzero_ps() : _mm512_mul_ps(simd::masked_load_ps(mask, acc[h] + d0), _mm512_set1_ps(corr[h]));
  }
  for (int j = 0; j < nt; ++j) {
    const __m512 v = w == 16 ? load16(rows[j] + d0) : load16_tail(rows[j] + d0, w);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) a[h] = _mm512_fmadd_ps(_mm512_set1_ps(p[h * kChunk + j]), v, a[h]);
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) simd::masked_store_ps(acc[h] + d0, mask, a[h]);
}

template <class KT>
void pv_avx512(const float* p, int nh, int nt, const KT* const* rows, int64_t dv, float* const* acc, const float* corr,
               bool first) {
  static constexpr PvBlock<KT> kBlocks[kPvHeads512] = {
      pv_block_avx512<KT, 1>, pv_block_avx512<KT, 2>, pv_block_avx512<KT, 3>, pv_block_avx512<KT, 4>,
      pv_block_avx512<KT, 5>, pv_block_avx512<KT, 6>, pv_block_avx512<KT, 7>, pv_block_avx512<KT, 8>};
  static constexpr PvPart<KT> kParts[kPvHeads] = {pv_part_avx512<KT, 1>, pv_part_avx512<KT, 2>, pv_part_avx512<KT, 3>,
                                                  pv_part_avx512<KT, 4>, pv_part_avx512<KT, 5>, pv_part_avx512<KT, 6>};
  int64_t d = 0;
  for (; d + 32 <= dv; d += 32) {
    for (int h = 0; h < nh; h += kPvHeads512) {
      kBlocks[std::min(kPvHeads512, nh - h) - 1](p + h * kChunk, nt, rows, d, acc + h, corr + h, first);
    }
  }
  for (; d < dv; d += 16) {
    const int64_t w = std::min<int64_t>(16, dv - d);
    for (int h = 0; h < nh; h += kPvHeads) {
      kParts[std::min(kPvHeads, nh - h) - 1](p + h * kChunk, nt, rows, d, w, acc + h, corr + h, first);
    }
  }
}

SK_TARGET_AVX512 void scale_avx512(float* y, int64_t n, float f) {
  const __m512 fv = _mm512_set1_ps(f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), fv));
  if (i < n) {
    const __mmask16 mask = simd::mask16(n - i);
    simd::masked_store_ps(y + i, mask, _mm512_mul_ps(simd::masked_load_ps(mask, y + i), fv));
  }
}
#endif  // SK_KERNELS_X86

template <class KT>
constexpr Ops<KT> kScalarOps = {scores_scalar<KT>, softmax_scalar, pv_scalar<KT>, scale_scalar};
#if SK_KERNELS_X86
template <class KT>
constexpr Ops<KT> kAvx2Ops = {scores_avx2<KT>, softmax_avx2, pv_avx2<KT>, scale_avx2};
template <class KT>
constexpr Ops<KT> kAvx512Ops = {scores_avx512<KT>, softmax_avx512, pv_avx512<KT>, scale_avx512};
#endif

template <class KT>
const Ops<KT>& select_ops() {
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return kAvx512Ops<KT>;
    case kIsaAvx2:
      return kAvx2Ops<KT>;
    default:
      break;
  }
#endif
  return kScalarOps<KT>;
}

}  // namespace

const Ops<float>& ops_f32() { return select_ops<float>(); }
const Ops<Bf16>& ops_bf16() { return select_ops<Bf16>(); }

bool plan_seq_tables(const sk_tensor_arg& block_tables, const sk_tensor_arg& context_lens, int64_t batch,
                     int64_t num_blocks, int64_t block_size, const char* kernel, const char* cache, SeqTables* st,
                     ErrorSink err) {
  // A block of no tokens holds no context, and the block count of a context divides by it.
  if (block_size < 1) {
    return invalid(err, "%s: %s block_size is %lld, must be >= 1", kernel, cache, static_cast<long long>(block_size));
  }
  if (!check_tensor(block_tables, kernel, "block_tables", SK_DTYPE_I32, 2, err) ||
      !check_tensor(context_lens, kernel, "context_lens", SK_DTYPE_I32, 1, err)) {
    return false;
  }
  char s1[96];
  if (block_tables.rank != 2 || block_tables.shape[0] != batch) {
    return invalid(err, "%s: block_tables shape %s is not [B = %lld, max_blocks]", kernel,
                   format_shape(block_tables, s1, sizeof s1), static_cast<long long>(batch));
  }
  if (context_lens.rank != 1 || context_lens.shape[0] != batch) {
    return invalid(err, "%s: context_lens shape %s is not [B = %lld]", kernel,
                   format_shape(context_lens, s1, sizeof s1), static_cast<long long>(batch));
  }
  st->block_tables = static_cast<const int32_t*>(block_tables.data);
  st->bt_stride[0] = block_tables.stride[0];
  st->bt_stride[1] = block_tables.stride[1];
  st->max_blocks = block_tables.shape[1];
  st->context_lens = static_cast<const int32_t*>(context_lens.data);
  st->cl_stride = context_lens.stride[0];
  st->batch = batch;
  st->num_blocks = num_blocks;
  st->block_size = block_size;
  return true;
}

bool plan_token_tables(const sk_tensor_arg& block_tables, const sk_tensor_arg& seq_ids, const sk_tensor_arg& positions,
                       int64_t tokens, int64_t num_blocks, int64_t block_size, const char* kernel, const char* cache,
                       SeqTables* st, ErrorSink err) {
  if (block_size < 1) {
    return invalid(err, "%s: %s block_size is %lld, must be >= 1", kernel, cache, static_cast<long long>(block_size));
  }
  if (!check_tensor(block_tables, kernel, "block_tables", SK_DTYPE_I32, 2, err) ||
      !check_tensor(seq_ids, kernel, "seq_ids", SK_DTYPE_I32, 1, err) ||
      !check_tensor(positions, kernel, "positions", SK_DTYPE_I32, 1, err)) {
    return false;
  }
  char s1[96];
  if (block_tables.rank != 2) {
    return invalid(err, "%s: block_tables shape %s is not [B, max_blocks]", kernel,
                   format_shape(block_tables, s1, sizeof s1));
  }
  for (const auto& [t, what] : {std::pair<const sk_tensor_arg*, const char*>{&seq_ids, "seq_ids"},
                                std::pair<const sk_tensor_arg*, const char*>{&positions, "positions"}}) {
    if (t->rank != 1 || t->shape[0] != tokens) {
      return invalid(err, "%s: %s shape %s is not [T = %lld]", kernel, what, format_shape(*t, s1, sizeof s1),
                     static_cast<long long>(tokens));
    }
  }
  st->block_tables = static_cast<const int32_t*>(block_tables.data);
  st->bt_stride[0] = block_tables.stride[0];
  st->bt_stride[1] = block_tables.stride[1];
  st->max_blocks = block_tables.shape[1];
  st->batch = block_tables.shape[0];
  st->num_blocks = num_blocks;
  st->block_size = block_size;
  st->seq_ids = static_cast<const int32_t*>(seq_ids.data);
  st->si_stride = seq_ids.stride[0];
  st->positions = static_cast<const int32_t*>(positions.data);
  st->pos_stride = positions.stride[0];
  st->tokens = tokens;
  return true;
}

namespace {

// The block ids of the first ctx tokens of sequence b; `token` >= 0 names the prefill token.
bool check_blocks(const SeqTables& st, int64_t b, int64_t ctx, int64_t token, const char* kernel, ErrorSink err) {
  const int64_t used = (ctx + st.block_size - 1) / st.block_size;
  for (int64_t i = 0; i < used; ++i) {
    const int64_t id = st.block(b, i);
    if (id < 0 || id >= st.num_blocks) {
      char tok[48] = "";
      if (token >= 0) std::snprintf(tok, sizeof tok, ", token %lld", static_cast<long long>(token));
      return invalid(err,
                     "%s: block_tables[%lld, %lld] = %lld (sequence %lld, block %lld%s) is out of range for a cache "
                     "of %lld blocks",
                     kernel, static_cast<long long>(b), static_cast<long long>(i), static_cast<long long>(id),
                     static_cast<long long>(b), static_cast<long long>(i), tok, static_cast<long long>(st.num_blocks));
    }
  }
  return true;
}

bool check_token_tables(const SeqTables& st, const char* kernel, ErrorSink err) {
  const int64_t capacity = st.max_blocks * st.block_size;
  for (int64_t t = 0; t < st.tokens; ++t) {
    const int64_t b = st.token_seq(t);
    if (b < 0 || b >= st.batch) {
      return invalid(err, "%s: seq_ids[%lld] = %lld is out of range for block_tables of %lld sequences", kernel,
                     static_cast<long long>(t), static_cast<long long>(b), static_cast<long long>(st.batch));
    }
    const int64_t pos = st.token_context(t) - 1;
    if (pos < 0 || pos >= capacity) {
      return invalid(err,
                     "%s: positions[%lld] = %lld is out of range: sequence %lld can hold positions 0 to max_blocks "
                     "(%lld) * block_size (%lld) - 1 = %lld",
                     kernel, static_cast<long long>(t), static_cast<long long>(pos), static_cast<long long>(b),
                     static_cast<long long>(st.max_blocks), static_cast<long long>(st.block_size),
                     static_cast<long long>(capacity - 1));
    }
    if (!check_blocks(st, b, pos + 1, t, kernel, err)) return false;
  }
  return true;
}

}  // namespace

bool check_seq_tables(const SeqTables& st, const char* kernel, ErrorSink err) {
  if (st.seq_ids != nullptr) return check_token_tables(st, kernel, err);
  const int64_t capacity = st.max_blocks * st.block_size;
  for (int64_t b = 0; b < st.batch; ++b) {
    const int64_t ctx = st.context(b);
    if (ctx < 0 || ctx > capacity) {
      return invalid(err,
                     "%s: context_lens[%lld] = %lld is out of range: sequence %lld can hold 0 to max_blocks (%lld) * "
                     "block_size (%lld) = %lld tokens",
                     kernel, static_cast<long long>(b), static_cast<long long>(ctx), static_cast<long long>(b),
                     static_cast<long long>(st.max_blocks), static_cast<long long>(st.block_size),
                     static_cast<long long>(capacity));
    }
    if (!check_blocks(st, b, ctx, -1, kernel, err)) return false;
  }
  return true;
}

PrefillSplit prefill_split(int64_t tokens, int64_t kv_heads, int64_t group, int32_t core_id, int32_t num_cores) {
  const int32_t pieces = 2 * num_cores;
  const int64_t align = tokens * kv_heads >= pieces ? group : 1;
  const int64_t rows = tokens * kv_heads * group;
  return {{sk_split_range(rows, core_id, pieces, align), sk_split_range(rows, pieces - 1 - core_id, pieces, align)}};
}

}  // namespace sk::kernels::attn
