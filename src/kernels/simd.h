// SIMD building blocks shared by the built-in kernels.
//
// Every function here carries its own `target` attribute so that the package as a whole is
// compiled for the baseline ISA and the wide paths are only entered after the runtime check in
// cpu_isa.h. A caller must have the same (or a wider) target to inline them.
//
// Determinism: reductions (`hsum8`, `hsum16`) use one fixed tree, and `hsum_lanes` reproduces
// exactly that tree in plain C++, so a kernel may finish a reduction either in registers or
// from spilled lanes and get the same bits.
#ifndef SUPERKERNEL_KERNELS_SIMD_H_
#define SUPERKERNEL_KERNELS_SIMD_H_

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#define SK_KERNELS_X86 1
// GCC 12 reports the deliberately undefined vectors inside its own AVX-512 intrinsics
// (_mm512_undefined_ps, GCC bug 105593) as uninitialized wherever they are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#else
#define SK_KERNELS_X86 0
#endif

#define SK_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define SK_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
// The avx2 level with F16C (VCVTPH2PS), which the level requires (cpu_isa.h).
#define SK_TARGET_AVX2_F16C __attribute__((target("avx2,fma,f16c")))
#define SK_TARGET_AVX512_F16C __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace sk::kernels::simd {

// Sum of `lanes` (8 or 16) partial sums in the order hsum8 / hsum16 use: fold the upper half
// onto the lower half until one value is left.
inline float hsum_lanes(const float* v, int lanes) {
  float t[16];
  for (int i = 0; i < lanes; ++i) t[i] = v[i];
  for (int half = lanes / 2; half >= 1; half /= 2) {
    for (int i = 0; i < half; ++i) t[i] = t[i] + t[i + half];
  }
  return t[0];
}

#if SK_KERNELS_X86

// exp() range limits. Below kExpLo the result is under FLT_MIN and is flushed to +0 (so that
// exp(-inf) is exactly 0, which softmax of masked logits relies on); above kExpHi it is +inf.
inline constexpr float kExpLo = -87.33654f;
inline constexpr float kExpHi = 88.8f;
// Cody-Waite split of ln(2): n * kLn2Hi is exact for |n| <= 2^9.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kLog2e = 1.44269504088896341f;

// ---- AVX2 (8 lanes) ----

// Lanes [0, n) set, n in [0, 8].
SK_TARGET_AVX2 inline __m256i mask8(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

SK_TARGET_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

SK_TARGET_AVX2 inline float hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// exp(x) to about 1 ulp: Cody-Waite reduction to |r| <= ln2/2, degree-7 Taylor polynomial,
// then scaling by 2^n in two steps so that n = 128 (results near FLT_MAX) stays representable.
SK_TARGET_AVX2 inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(kExpLo);
  // MAXPS/MINPS return their second operand when either is NaN: putting x second keeps NaN.
  const __m256 xc = _mm256_min_ps(_mm256_set1_ps(kExpHi), _mm256_max_ps(lo, x));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i e1 = _mm256_srai_epi32(ni, 1);
  const __m256i e2 = _mm256_sub_epi32(ni, e1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e2, bias), 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), y);
}

// ---- AVX-512 (16 lanes) ----

// Lanes [0, n) set, n in [0, 16].
SK_TARGET_AVX512 inline __mmask16 mask16(int64_t n) {
  return static_cast<__mmask16>((1u << static_cast<unsigned>(n)) - 1u);
}

SK_TARGET_AVX512 inline float hsum16(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return hsum8(_mm256_add_ps(lo, hi));
}

SK_TARGET_AVX512 inline float hmax16(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return hmax8(_mm256_max_ps(lo, hi));
}

// hsum16 of 16 vectors at once: element j of the result is the hsum_lanes(v + 16 * j, 16) tree
// for j < 16, from v[0, 256). Each level adds the same pairs of partial sums as hsum16 (upper
// half onto lower half), the 16 dot products side by side, so the bits are hsum16's at a
// sixteenth of the shuffles. kInt32 reads and adds int32 lanes instead (the result holds int32
// bits; exact sums have no order to keep, and the caller checks that they cannot wrap).
template <bool kInt32>
SK_TARGET_AVX512 inline __m512 add16(__m512 x, __m512 y) {
  if constexpr (kInt32) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(x), _mm512_castps_si512(y)));
  } else {
    return _mm512_add_ps(x, y);
  }
}

template <bool kInt32 = false>
SK_TARGET_AVX512 inline __m512 hsum16x16(const void* v) {
  constexpr auto add = add16<kInt32>;
  const auto* f = static_cast<const float*>(v);
  __m512 a[16];
  for (int j = 0; j < 16; ++j) a[j] = _mm512_loadu_ps(f + 16 * j);
  // Level 1 (i + 8): b[p] = [the 8 partial sums of v(2p) | those of v(2p + 1)].
  __m512 b[8];
  for (int p = 0; p < 8; ++p) {
    b[p] = add(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
               _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Level 2 (i + 4): 128-bit block t of c[q] holds the 4 partial sums of v(4q + t).
  __m512 c[4];
  for (int q = 0; q < 4; ++q) {
    c[q] = add(_mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
               _mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Level 3 (i + 2): block t of d[r] holds 2 partial sums of v(8r + t), then 2 of v(8r + 4 + t).
  __m512 d[2];
  for (int r = 0; r < 2; ++r) {
    d[r] = add(_mm512_shuffle_ps(c[2 * r], c[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
               _mm512_shuffle_ps(c[2 * r], c[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Level 4 (i + 1): element 4t + u is the sum of v(4u + t); put them in order.
  const __m512 e = add(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), e);
}

// Same reduction and polynomial as exp8; VSCALEFPS applies 2^n with correct overflow to +inf.
SK_TARGET_AVX512 inline __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(kExpLo);
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(kExpHi), _mm512_max_ps(lo, x));
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 y = _mm512_scalef_ps(p, n);
  // Zero the lanes below kExpLo (NaN compares false and stays NaN).
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y);
}

#endif  // SK_KERNELS_X86

}  // namespace sk::kernels::simd

#endif  // SUPERKERNEL_KERNELS_SIMD_H_
