// The dot product of the tensor kernels that multiply (tensor.batched_mm, tensor.sdpa): eight
// partial sums, partial sum l adding a[k] * b[k] for k = l (mod 8) in increasing k, combined by
// simd::hsum_lanes' fixed tree. At the avx2 level each step is one FMA, at the scalar level a
// multiply and an add. Three loop shapes compute the same bits from different layouts:
//
//   row_scalar / row_dot_avx2  columns contiguous in k (dot products, the partial sums are lanes)
//   row_axpy_avx2              b rows contiguous in n (one accumulator vector per partial sum)
#ifndef SUPERKERNEL_KERNELS_TENSOR_DOT_H_
#define SUPERKERNEL_KERNELS_TENSOR_DOT_H_

#include <algorithm>
#include <cstdint>

#include "kernels/masked_io.h"
#include "kernels/simd.h"

namespace sk::kernels::tensor {

inline constexpr int kDotLanes = 8;

// ---- Scalar level ----

inline float dot_scalar(const float* a, const float* b, int64_t sb, int64_t k) {
  float lanes[kDotLanes] = {};
  for (int64_t i = 0; i < k; ++i) lanes[i % kDotLanes] = lanes[i % kDotLanes] + a[i] * b[i * sb];
  return simd::hsum_lanes(lanes, kDotLanes);
}

// y[n] for n < n_cols: column n of b starts at b + n * sbn, its elements sbk apart.
inline void row_scalar(const float* a, const float* b, int64_t sbk, int64_t sbn, float* y, int64_t n_cols, int64_t k) {
  for (int64_t n = 0; n < n_cols; ++n) y[n] = dot_scalar(a, b + n * sbn, sbk, k);
}

#if SK_KERNELS_X86
// ---- avx2 level ----

// The fixed tree over eight partial-sum vectors, lane by lane (hsum_lanes' order).
SK_TARGET_AVX2 inline __m256 tree8(const __m256* acc) {
  const __m256 v0 = _mm256_add_ps(acc[0], acc[4]);
  const __m256 v1 = _mm256_add_ps(acc[1], acc[5]);
  const __m256 v2 = _mm256_add_ps(acc[2], acc[6]);
  const __m256 v3 = _mm256_add_ps(acc[3], acc[7]);
  return _mm256_add_ps(_mm256_add_ps(v0, v2), _mm256_add_ps(v1, v3));
}

// b rows contiguous: y[n0 .. n0+8) with accumulator l taking k = l (mod 8).
SK_TARGET_AVX2 inline void row_axpy_avx2(const float* a, const float* b, int64_t sbk, float* y, int64_t n_cols,
                                         int64_t k) {
  for (int64_t n0 = 0; n0 < n_cols; n0 += kDotLanes) {
    const int64_t w = std::min<int64_t>(kDotLanes, n_cols - n0);
    __m256 acc[kDotLanes];
    for (__m256& v : acc) v = _mm256_setzero_ps();
    const float* bp = b + n0;
    int64_t i = 0;
    if (w == kDotLanes) {
      for (; i + kDotLanes <= k; i += kDotLanes) {
#pragma GCC unroll 8
        for (int l = 0; l < kDotLanes; ++l) {
          acc[l] = _mm256_fmadd_ps(_mm256_set1_ps(a[i + l]), _mm256_loadu_ps(bp + (i + l) * sbk), acc[l]);
        }
      }
      for (; i < k; ++i) {
        acc[i % kDotLanes] = _mm256_fmadd_ps(_mm256_set1_ps(a[i]), _mm256_loadu_ps(bp + i * sbk), acc[i % kDotLanes]);
      }
      _mm256_storeu_ps(y + n0, tree8(acc));
    } else {
      const __m256i mask = simd::mask8(w);
      for (; i < k; ++i) {
        acc[i % kDotLanes] =
            _mm256_fmadd_ps(_mm256_set1_ps(a[i]), simd::maskload_ps(bp + i * sbk, mask), acc[i % kDotLanes]);
      }
      simd::maskstore_ps(y + n0, mask, tree8(acc));
    }
  }
}

// b columns contiguous: kCols dot products side by side, the partial sums being the vector lanes
// (the ragged end adds masked zeros).
template <int kCols>
SK_TARGET_AVX2 inline void dots_avx2(const float* a, const float* b, int64_t sbn, float* y, int64_t k) {
  __m256 acc[kCols];
  for (__m256& v : acc) v = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + kDotLanes <= k; i += kDotLanes) {
    const __m256 av = _mm256_loadu_ps(a + i);
#pragma GCC unroll 4
    for (int j = 0; j < kCols; ++j) acc[j] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + j * sbn + i), acc[j]);
  }
  if (i < k) {
    const __m256i mask = simd::mask8(k - i);
    const __m256 av = simd::maskload_ps(a + i, mask);
#pragma GCC unroll 4
    for (int j = 0; j < kCols; ++j) acc[j] = _mm256_fmadd_ps(av, simd::maskload_ps(b + j * sbn + i, mask), acc[j]);
  }
  for (int j = 0; j < kCols; ++j) y[j] = simd::hsum8(acc[j]);
}

SK_TARGET_AVX2 inline void row_dot_avx2(const float* a, const float* b, int64_t sbn, float* y, int64_t n_cols,
                                        int64_t k) {
  int64_t n = 0;
  for (; n + 4 <= n_cols; n += 4) dots_avx2<4>(a, b + n * sbn, sbn, y + n, k);
  for (; n < n_cols; ++n) dots_avx2<1>(a, b + n * sbn, sbn, y + n, k);
}
#endif

}  // namespace sk::kernels::tensor

#endif  // SUPERKERNEL_KERNELS_TENSOR_DOT_H_
