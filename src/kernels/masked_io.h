// Masked vector loads and stores for the kernels' tails, checked once per access under
// AddressSanitizer.
//
// AddressSanitizer instruments a masked load or store lane by lane: a branch and a shadow check
// for each of the 64 lanes of a byte mask. Unrolled over 16 weight rows and instantiated for every
// weight format, that made matmul_w4.cc alone take a minute and a half to compile in the ASan
// tree (57 of its 86 seconds were these checks). Under ASan these helpers instead check the bytes
// of the set lanes with one region query and run the masked instruction uninstrumented, so a lane
// outside its buffer is still reported, as an ordinary access to its first bad byte. Without ASan
// they are the intrinsics themselves.
//
// The region checked runs from the lowest to the highest set lane, which is exact for the prefix
// masks the kernels use (simd::mask8 / mask16, or (1 << n) - 1).
//
//   const __mmask64 tail = (__mmask64{1} << bytes) - 1u;
//   const __m512i w = simd::masked_load_epi8(tail, row + k);   // bytes [k, k + bytes) of row
#ifndef SUPERKERNEL_KERNELS_MASKED_IO_H_
#define SUPERKERNEL_KERNELS_MASKED_IO_H_

#include <cstdint>

#include "kernels/simd.h"

#if defined(__SANITIZE_ADDRESS__)
#define SK_KERNELS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SK_KERNELS_ASAN 1
#endif
#endif
#ifndef SK_KERNELS_ASAN
#define SK_KERNELS_ASAN 0
#endif

#if SK_KERNELS_ASAN
#include <sanitizer/asan_interface.h>
// Not inlined into the (instrumented) caller, which is the point: the intrinsic inside runs
// without lane-by-lane checks.
#define SK_MASKED_IO __attribute__((no_sanitize("address"), noinline))
#else
#define SK_MASKED_IO
#endif

#if SK_KERNELS_X86
namespace sk::kernels::simd {
namespace masked_io_detail {

#if SK_KERNELS_ASAN
// Reports an access to the lanes of `bits` (lane_bytes each) at p that leaves addressable memory:
// an instrumented one-byte access to the first bad byte, which ASan reports (and, as the tests
// run it, aborts on) before it happens.
[[gnu::noinline]] inline void check(const void* p, uint64_t bits, int lane_bytes, bool write) {
  if (bits == 0) return;
  const int lo = __builtin_ctzll(bits);
  const int hi = 63 - __builtin_clzll(bits);
  const char* first = static_cast<const char*>(p) + static_cast<int64_t>(lo) * lane_bytes;
  void* bad = __asan_region_is_poisoned(const_cast<char*>(first), static_cast<size_t>(hi - lo + 1) * lane_bytes);
  if (bad == nullptr) return;
  if (write) {
    *static_cast<volatile char*>(bad) = 0;
  } else {
    (void)*static_cast<const volatile char*>(bad);
  }
}
#else
inline void check(const void*, uint64_t, int, bool) {}
#endif

}  // namespace masked_io_detail

// ---- AVX2: lanes whose mask element has its sign bit set ----

SK_TARGET_AVX2 SK_MASKED_IO inline __m256 maskload_ps(const float* p, __m256i mask) {
  masked_io_detail::check(p, static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(mask))), 4, false);
  return _mm256_maskload_ps(p, mask);
}

SK_TARGET_AVX2 SK_MASKED_IO inline __m128 maskload_ps(const float* p, __m128i mask) {
  masked_io_detail::check(p, static_cast<uint32_t>(_mm_movemask_ps(_mm_castsi128_ps(mask))), 4, false);
  return _mm_maskload_ps(p, mask);
}

SK_TARGET_AVX2 SK_MASKED_IO inline __m256d maskload_pd(const double* p, __m256i mask) {
  masked_io_detail::check(p, static_cast<uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(mask))), 8, false);
  return _mm256_maskload_pd(p, mask);
}

SK_TARGET_AVX2 SK_MASKED_IO inline void maskstore_ps(float* p, __m256i mask, __m256 v) {
  masked_io_detail::check(p, static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(mask))), 4, true);
  _mm256_maskstore_ps(p, mask, v);
}

// ---- AVX-512: lanes whose mask bit is set; the others load as zero (maskz) ----

SK_TARGET_AVX512 SK_MASKED_IO inline __m512i masked_load_epi8(__mmask64 m, const void* p) {
  masked_io_detail::check(p, m, 1, false);
  return _mm512_maskz_loadu_epi8(m, p);
}

SK_TARGET_AVX512 SK_MASKED_IO inline __m128i masked_load_epi8x16(__mmask16 m, const void* p) {
  masked_io_detail::check(p, m, 1, false);
  return _mm_maskz_loadu_epi8(m, p);
}

SK_TARGET_AVX512 SK_MASKED_IO inline __m512i masked_load_epi16(__mmask32 m, const void* p) {
  masked_io_detail::check(p, m, 2, false);
  return _mm512_maskz_loadu_epi16(m, p);
}

SK_TARGET_AVX512 SK_MASKED_IO inline __m256i masked_load_epi16x16(__mmask16 m, const void* p) {
  masked_io_detail::check(p, m, 2, false);
  return _mm256_maskz_loadu_epi16(m, p);
}

SK_TARGET_AVX512 SK_MASKED_IO inline __m512 masked_load_ps(__mmask16 m, const float* p) {
  masked_io_detail::check(p, m, 4, false);
  return _mm512_maskz_loadu_ps(m, p);
}

SK_TARGET_AVX512 SK_MASKED_IO inline __m256 masked_load_ps8(__mmask8 m, const float* p) {
  masked_io_detail::check(p, m, 4, false);
  return _mm256_maskz_loadu_ps(m, p);
}

SK_TARGET_AVX512 SK_MASKED_IO inline __m512d masked_load_pd(__mmask8 m, const double* p) {
  masked_io_detail::check(p, m, 8, false);
  return _mm512_maskz_loadu_pd(m, p);
}

// Lanes not in m keep src's value.
SK_TARGET_AVX512 SK_MASKED_IO inline __m512 masked_load_ps(__m512 src, __mmask16 m, const float* p) {
  masked_io_detail::check(p, m, 4, false);
  return _mm512_mask_loadu_ps(src, m, p);
}

SK_TARGET_AVX512 SK_MASKED_IO inline void masked_store_ps(float* p, __mmask16 m, __m512 v) {
  masked_io_detail::check(p, m, 4, true);
  _mm512_mask_storeu_ps(p, m, v);
}

SK_TARGET_AVX512 SK_MASKED_IO inline void masked_store_epi32(void* p, __mmask16 m, __m512i v) {
  masked_io_detail::check(p, m, 4, true);
  _mm512_mask_storeu_epi32(p, m, v);
}

}  // namespace sk::kernels::simd
#endif  // SK_KERNELS_X86

#endif  // SUPERKERNEL_KERNELS_MASKED_IO_H_
