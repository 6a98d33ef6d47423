// Tiles of the GEMM driver (matmul_driver.h) for 16-bit float weights over f32 activations:
// matmul.bf16 below avx512_bf16 and matmul.f16 at every level. A weight format supplies the exact
// widening of its 16-bit words to f32; the tiles are then matmul.f32's tiles, line by line, with
// each weight vector widened after its load, so every y element is the f32 dot product of
// matmul.f32 over the widened weights (bf16 -> f32 and f16 -> f32 are exact):
//
//   gemm::run(gemm::F32ActivationRows<uint16_t, HalfTiles>{half_tiles<F16Format>(), x, sx},
//             w, sw, y, sy, M, N, K);
//
// The AVX2 tiles carry the F16C target as well (VCVTPH2PS): the avx2 level requires F16C
// (cpu_isa.h), which every AVX2 CPU has.
#ifndef SUPERKERNEL_KERNELS_MATMUL_HALF_H_
#define SUPERKERNEL_KERNELS_MATMUL_HALF_H_

#include <cstdint>
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/masked_io.h"
#include "kernels/matmul_driver.h"
#include "kernels/simd.h"
#include "util/half.h"

namespace sk::kernels::gemm {

using HalfTiles = Tiles<float, uint16_t, float>;
using HalfTileFn = TileFn<float, uint16_t, float>;

// bf16: the upper 16 bits of an f32.
struct Bf16Format {
  static float to_f32(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  // The AVX2 GEMV tile reads its rows side by side (row at a time measured no faster for bf16).
  static constexpr bool kAvx2GemvRowAtATime = false;
#if SK_KERNELS_X86
  SK_TARGET_AVX2 static __m256 widen8(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  SK_TARGET_AVX512 static __m512 widen16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
#endif
};

// IEEE binary16: every finite value (subnormals included) and the infinities are exact in f32,
// so widening is exact; VCVTPH2PS computes the same values.
struct F16Format {
  static float to_f32(uint16_t h) { return f16_to_f32(h); }
  // The AVX2 GEMV tile reads its rows one at a time (half_tile_avx2).
  static constexpr bool kAvx2GemvRowAtATime = true;
#if SK_KERNELS_X86
  SK_TARGET_AVX2_F16C static __m256 widen8(__m128i h) { return _mm256_cvtph_ps(h); }
  SK_TARGET_AVX512_F16C static __m512 widen16(__m256i h) { return _mm512_cvtph_ps(h); }
#endif
};

template <class F, int MR, int NR>
void half_tile_scalar(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* st, int64_t ld, int64_t kn) {
  constexpr int kLanes = 8;
  float acc[MR][NR][kLanes];
  for (int m = 0; m < MR; ++m) {
    for (int j = 0; j < NR; ++j) {
      for (int l = 0; l < kLanes; ++l) acc[m][j][l] = st[(m * ld + j) * kLanes + l];
    }
  }
  for (int64_t k = 0; k < kn; k += kLanes) {
    const int len = kn - k < kLanes ? static_cast<int>(kn - k) : kLanes;
    for (int j = 0; j < NR; ++j) {
      float wv[kLanes];
      for (int l = 0; l < len; ++l) wv[l] = F::to_f32(w[j * sw + k + l]);
      for (int m = 0; m < MR; ++m) {
        for (int l = 0; l < len; ++l) acc[m][j][l] += x[m * sx + k + l] * wv[l];
      }
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int j = 0; j < NR; ++j) {
      for (int l = 0; l < kLanes; ++l) st[(m * ld + j) * kLanes + l] = acc[m][j][l];
    }
  }
}

template <class F>
HalfTileFn half_tile_scalar_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return half_tile_scalar<F, MR, NR>; };
  if (mr == 2) return tile_of<HalfTileFn, 2>(nr, std::make_integer_sequence<int, 2>(), make);
  return tile_of<HalfTileFn, 1>(nr, std::make_integer_sequence<int, 4>(), make);
}

#if SK_KERNELS_X86

// The last n < 8 weights of a row: AVX2 has no 16-bit masked load, so go through a zeroed copy
// (read once per dot product).
template <class F>
SK_TARGET_AVX2_F16C inline __m256 widen8_tail(const uint16_t* p, int64_t n) {
  alignas(16) uint16_t tmp[8] = {};
  for (int64_t i = 0; i < n; ++i) tmp[i] = p[i];
  return F::widen8(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
}

template <class F, int MR, int NR>
SK_TARGET_AVX2_F16C void half_tile_avx2(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* st,
                                        int64_t ld, int64_t kn) {
  __m256 acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm256_load_ps(st + (m * ld + j) * 8);
  }
  int64_t k = 0;
  if constexpr (MR == 1 && F::kAvx2GemvRowAtATime) {
    // GEMV: as the AVX-512 tile below, the rows one after another, each one stream of 32-byte
    // loads with an L2 prefetch kGemvAheadBytes ahead of each 64-byte line, instead of the rows
    // side by side with a 16-byte load per VCVTPH2PS. Measured at the avx2 level on Zen 4
    // (SK_ISA=avx2), f16 Llama decode, small model, alternated rounds, tokens/s medians: 1 thread
    // 50.3 -> 57.1 and 49.6 -> 53.7, 2 threads 79.8 -> 106.9; bf16 no faster (47.5 -> 46.2), so
    // bf16 keeps the side-by-side tile. Same per-row FMA order, same bits.
    k = gemv_rows_one_at_a_time<NR, 32>(
        w, sw, kn, acc[0], [&](__m256& a, const uint16_t* wk, int64_t kk) SK_TARGET_AVX2_F16C {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk));
          const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + 16));
          a = _mm256_fmadd_ps(_mm256_loadu_ps(x + kk), F::widen8(_mm256_castsi256_si128(v)), a);
          a = _mm256_fmadd_ps(_mm256_loadu_ps(x + kk + 8), F::widen8(_mm256_extracti128_si256(v, 1)), a);
          a = _mm256_fmadd_ps(_mm256_loadu_ps(x + kk + 16), F::widen8(_mm256_castsi256_si128(u)), a);
          a = _mm256_fmadd_ps(_mm256_loadu_ps(x + kk + 24), F::widen8(_mm256_extracti128_si256(u, 1)), a);
        });
  }
  for (; k + 8 <= kn; k += 8) {
    __m256 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      prefetch_later_rows<MR, NR>(w + j * sw + k, sw, kn);
      prefetch_next_tile_short_rows<MR, NR>(w + j * sw + k, sw, k);
      wv[j] = F::widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + j * sw + k)));
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256 xv = _mm256_loadu_ps(x + m * sx + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm256_fmadd_ps(xv, wv[j], acc[m][j]);
    }
  }
  if (k < kn) {
    const __m256i mask = simd::mask8(kn - k);
    __m256 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = widen8_tail<F>(w + j * sw + k, kn - k);
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256 xv = simd::maskload_ps(x + m * sx + k, mask);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm256_fmadd_ps(xv, wv[j], acc[m][j]);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) _mm256_store_ps(st + (m * ld + j) * 8, acc[m][j]);
  }
}

template <class F>
HalfTileFn half_tile_avx2_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return half_tile_avx2<F, MR, NR>; };
  if (mr == 4) return tile_of<HalfTileFn, 4>(nr, std::make_integer_sequence<int, 3>(), make);
  if (mr == 2) return tile_of<HalfTileFn, 2>(nr, std::make_integer_sequence<int, 4>(), make);
  return tile_of<HalfTileFn, 1>(nr, std::make_integer_sequence<int, 8>(), make);
}

// AVX-512: the AVX2 tile with 16 lanes, line by line.
template <class F, int MR, int NR>
SK_TARGET_AVX512_F16C void half_tile_avx512(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* st,
                                            int64_t ld, int64_t kn) {
  prefetch_next_tile_start<MR, NR>(w, sw);
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_load_ps(st + (m * ld + j) * 16);
  }
  int64_t k = 0;
  if constexpr (MR == 1) {
    // GEMV: the tile's rows one after another, each one stream of 64-byte loads (widened in two
    // halves) with a prefetch into L2 kGemvAheadBytes ahead of each line, as far along the
    // weights as the other GEMV tiles' block prefetch. Measured on Zen 4, a Llama decode step on
    // 1 thread, alternated rounds (tokens/s, medians): the eight rows side by side with 32-byte
    // loads 80.6 (small model), 13.1 (medium); side by side with 64-byte loads 84-87, 14.2; one
    // row at a time 97, 15.2 (two at a time 89, four 87; the prefetch 16 KiB ahead 83, 64 KiB 93,
    // none 63); 2 threads within the noise. Each row's FMAs are in the same order as before, so
    // the same bits; the rest of K (under 32) goes through the steps below with all rows.
    k = gemv_rows_one_at_a_time<NR, 32>(
        w, sw, kn, acc[0], [&](__m512& a, const uint16_t* wk, int64_t kk) SK_TARGET_AVX512_F16C {
          const __m512i v = _mm512_loadu_si512(wk);
          a = _mm512_fmadd_ps(_mm512_loadu_ps(x + kk), F::widen16(_mm512_castsi512_si256(v)), a);
          a = _mm512_fmadd_ps(_mm512_loadu_ps(x + kk + 16), F::widen16(_mm512_extracti64x4_epi64(v, 1)), a);
        });
  }
  for (; k + 16 <= kn; k += 16) {
    prefetch_block_ahead<MR, NR, 16>(w, sw, k);
    __m512 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      prefetch_later_rows<MR, NR>(w + j * sw + k, sw, kn);
      wv[j] = F::widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j * sw + k)));
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512 xv = _mm512_loadu_ps(x + m * sx + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_fmadd_ps(xv, wv[j], acc[m][j]);
    }
  }
  if (k < kn) {
    const __mmask16 mask = simd::mask16(kn - k);
    __m512 wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) wv[j] = F::widen16(simd::masked_load_epi16x16(mask, w + j * sw + k));
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512 xv = simd::masked_load_ps(mask, x + m * sx + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_fmadd_ps(xv, wv[j], acc[m][j]);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) _mm512_store_ps(st + (m * ld + j) * 16, acc[m][j]);
  }
}

template <class F>
HalfTileFn half_tile_avx512_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return half_tile_avx512<F, MR, NR>; };
  if (mr == 4) return tile_of<HalfTileFn, 4>(nr, std::make_integer_sequence<int, 4>(), make);
  return tile_of<HalfTileFn, 1>(nr, std::make_integer_sequence<int, 8>(), make);
}
#endif  // SK_KERNELS_X86

// The f32-activation tiles of format F at the selected register width (AVX2: 4 x 3 tiles, 2 x 4 for
// 2-3 rows, 1 x 8 for GEMV, K steps of 256 that keep the packed slice in L1; AVX-512: 4 x 4 tiles over K steps of
// 4096, a 256 KiB slice of 16 rows in L2).
template <class F>
const HalfTiles& half_tiles() {
#if SK_KERNELS_X86
  static constexpr HalfTiles kAvx512 = {16, 8, 4, 4, 4096, 4, 4, half_tile_avx512_for<F>};
  static constexpr HalfTiles kAvx2 = {8, 8, 4, 3, 256, 2, 4, half_tile_avx2_for<F>};
  switch (current_isa_level()) {
    case kIsaAvx512:
      return kAvx512;
    case kIsaAvx2:
      return kAvx2;
    default:
      break;
  }
#endif
  static constexpr HalfTiles kScalar = {8, 4, 2, 2, 256, 2, 2, half_tile_scalar_for<F>};
  return kScalar;
}

}  // namespace sk::kernels::gemm

#endif  // SUPERKERNEL_KERNELS_MATMUL_HALF_H_
