// matmul.w8a8 and matmul.w8a8_dyn: int8 weights times int8 activations, int32 accumulation.
//
//   matmul.w8a8:     q i8 [..., K], x_scale f32 [...], w i8 [N, K], w_scale f32 [N] -> y f32 [..., N]
//   matmul.w8a8_dyn: x f32 [..., K],                   w i8 [N, K], w_scale f32 [N] -> y f32 [..., N]
//
//   acc[m][n] = sum_k q[m][k] * w[n][k]            (exact int32; q = -128 reads as -127)
//   y[m][n]   = float(acc[m][n]) * (x_scale[m] * w_scale[n])   (f32, in that order)
//
// matmul.w8a8_dyn quantises each x row exactly as quantize.i8 does (every core quantises the
// rows itself, so there is no launch and no extra sync), hence
// w8a8_dyn(x) == w8a8(quantize.i8(x)) bit for bit. Cores split N like matmul.f32.
//
// The sum is exact, so its order is free: every ISA level gives the same bits, each with the
// int8 dot product it has (the loops are the shared driver's, matmul_driver.h):
//   amx:                 TDPBSSD on AMX tiles (matmul_w8a8_amx.cc) from kW8AmxMinRows rows of q
//                        on, the VNNI tiles below;
//   avx512_vnni, _bf16:  VPDPBUSD on (w + 128) as u8 (w with its sign bit flipped) times q,
//                        minus 128 * sum(q), summed once per row of q per call;
//   avx512:              VPMADDUBSW on |w| as u8 times q with w's sign (masked negation),
//                        VPMADDWD by 1 into int32;
//   avx2:                the same with VPSIGNB;
//   scalar:              plain int32 sums.
// Clamping q to [-127, 127] (once per call, when the rows are packed for the driver) is what
// makes VPMADDUBSW exact: a pair of products is at most 2 * 128 * 127 = 32512, inside int16.
// quantize.i8 never produces -128.
#include <algorithm>

#include "kernels/cpu_isa.h"
#include "kernels/gemv_kernels.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/matmul_driver.h"
#include "kernels/matmul_w8a8_amx.h"
#include "kernels/simd.h"

#define SK_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

namespace sk::kernels {
namespace {

constexpr const char* kName = "matmul.w8a8";
constexpr const char* kDynName = "matmul.w8a8_dyn";

// Exact sums kept in int32 lanes (1, 8 or 16 per dot product) that the finish step adds up: a
// lane holds at most K / 8 products of magnitude <= 255 * 128, inside int32 for K <= kW8MaxK,
// and the total is exact whatever the order.
using W8Tiles = gemm::Tiles<int8_t, int8_t, int32_t>;
using W8TileFn = gemm::TileFn<int8_t, int8_t, int32_t>;
// K step of a block of more than one tile of rows: 16 rows of q are then 32 KiB, about L1. Longer
// steps amortise the tiles' start and end (measured: 2048 beat 256-1024 by 10-30% at M = 16).
// The AVX-512 4 x 4 tiles take steps of 16384 (16 rows of q: 256 KiB, in L2): each weight row is
// then one long stream, read once per block (measured on Zen 4 at M = 16: 10% faster than 2048).
constexpr int64_t kW8KStep = 2048;
constexpr int64_t kW8KStepL2 = 16384;
// The longest rows the VNNI GEMV tile reads one at a time (bytes, = K). Measured on Zen 4, 1
// core, GB/s (sk_bench_kernels, alternated rounds): 1 KiB rows 13.4-15.4 side by side against
// 16.8-17.6 one at a time; 2 KiB rows 15.5-18.8 against 16.9-17.7, 8 KiB rows 23.5-30.9 against
// 19.0-22.3. Small Llama W8A8 decode (K = 1024 but for down_proj): 1 thread 106 -> 128
// tokens/s, 2 threads 167 -> 200 (medians of alternated rounds). The sums are exact: same bits.
constexpr int64_t kW8GemvRowAtATimeMaxK = 1024;
// The fewest rows of q that take the AMX tiles at the amx level (the sums are exact, so either
// path gives the same bits). One core, N = K = 4096, µs, VNNI against AMX
// (sk_bench_matmul_cpu_time w8a8): M = 4 590 / 674, M = 8 875 / 708, M = 16 1562 / 780.
constexpr int64_t kW8AmxMinRows = 6;
static_assert(gemm::kPanelBytes >= kW8MaxK + 64,
              "a row of the largest K must fit the panel: quantize.i8 needs all of it");

// Remainder of K after the vector loop of a tile (exact, so it may be added in any order).
inline int32_t tail_dot(const int8_t* x, const int8_t* w, int64_t begin, int64_t end) {
  int32_t s = 0;
  for (int64_t k = begin; k < end; ++k) s += static_cast<int32_t>(x[k]) * static_cast<int32_t>(w[k]);
  return s;
}

template <int MR, int NR>
void tile_scalar(const int8_t* x, int64_t sx, const int8_t* w, int64_t sw, int32_t* st, int64_t ld, int64_t kn) {
  int32_t acc[MR][NR] = {};
  for (int64_t k = 0; k < kn; ++k) {
    for (int m = 0; m < MR; ++m) {
      const int32_t xv = x[m * sx + k];
      for (int j = 0; j < NR; ++j) acc[m][j] += xv * static_cast<int32_t>(w[j * sw + k]);
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int j = 0; j < NR; ++j) st[m * ld + j] += acc[m][j];
  }
}

W8TileFn tile_scalar_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return tile_scalar<MR, NR>; };
  if (mr == 2) return gemm::tile_of<W8TileFn, 2>(nr, std::make_integer_sequence<int, 2>(), make);
  return gemm::tile_of<W8TileFn, 1>(nr, std::make_integer_sequence<int, 4>(), make);
}

constexpr W8Tiles kScalar = {1, 4, 2, 2, kW8KStep, 2, 2, tile_scalar_for};

#if SK_KERNELS_X86
// ---- AVX2: VPSIGNB + VPMADDUBSW + VPMADDWD, 32 k per step ----
template <int MR, int NR>
SK_TARGET_AVX2 void tile_avx2(const int8_t* x, int64_t sx, const int8_t* w, int64_t sw, int32_t* st, int64_t ld,
                              int64_t kn) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(st + (m * ld + j) * 8));
  }
  int64_t k = 0;
  if constexpr (MR == 1) {
    // GEMV: the tile's rows one after another, each one stream of 32-byte loads, two to a 64-byte
    // line, with an L2 prefetch kGemvAheadBytes ahead of each line, instead of the rows side by
    // side with no prefetch but the next tile's. Measured at the avx2 level on Zen 4
    // (SK_ISA=avx2, 1 core, sk_bench_kernels, alternated rounds), GB/s: 1 KiB rows 8.5-8.8 ->
    // 18.2-21.7, 2 KiB rows 10.7-13.5 -> 20.9-21.9, 8 KiB rows 17.9-20.5 -> 17.3-23.2. Llama
    // W8A8 decode, tokens/s medians: small model 1 thread 68 -> 121, 2 threads 119 -> 220;
    // medium 1 thread 14.6 -> 25.4. The sums are exact: same bits.
    // The rest of K (under 64) goes through the steps below with all rows.
    k = gemm::gemv_rows_one_at_a_time<NR, 64>(
        w, sw, kn, acc[0], [&](__m256i& a, const int8_t* wk, int64_t kk) SK_TARGET_AVX2 {
          const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk));
          const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wk + 32));
          const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + kk));
          const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + kk + 32));
          const __m256i p0 = _mm256_maddubs_epi16(_mm256_abs_epi8(w0), _mm256_sign_epi8(x0, w0));
          const __m256i p1 = _mm256_maddubs_epi16(_mm256_abs_epi8(w1), _mm256_sign_epi8(x1, w1));
          a = _mm256_add_epi32(a, _mm256_madd_epi16(p0, ones));
          a = _mm256_add_epi32(a, _mm256_madd_epi16(p1, ones));
        });
  }
  for (; k + 32 <= kn; k += 32) {
    __m256i wv[NR];
    __m256i aw[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      gemm::prefetch_later_rows<MR, NR>(w + j * sw + k, sw, kn);
      gemm::prefetch_next_tile_short_rows<MR, NR>(w + j * sw + k, sw, k);
      wv[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + j * sw + k));
      aw[j] = _mm256_abs_epi8(wv[j]);  // -128 -> 0x80, read as u8 128
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + m * sx + k));
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) {
        const __m256i p = _mm256_maddubs_epi16(aw[j], _mm256_sign_epi8(xv, wv[j]));
        acc[m][j] = _mm256_add_epi32(acc[m][j], _mm256_madd_epi16(p, ones));
      }
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int j = 0; j < NR; ++j) {
      int32_t* lanes = st + (m * ld + j) * 8;
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[m][j]);
      lanes[0] += tail_dot(x + m * sx, w + j * sw, k, kn);
    }
  }
}

W8TileFn tile_avx2_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return tile_avx2<MR, NR>; };
  if (mr == 4) return gemm::tile_of<W8TileFn, 4>(nr, std::make_integer_sequence<int, 2>(), make);
  return gemm::tile_of<W8TileFn, 1>(nr, std::make_integer_sequence<int, 8>(), make);
}

// 4 x 2 tiles: 8 sums, w and |w| of 2 rows and x fill the 16 YMM registers (the constant of
// VPMADDWD comes from memory); each x vector serves 2 weight rows (measured on Zen 3 at M = 16-64:
// 4-6% faster than 4 x 1 tiles).
constexpr W8Tiles kAvx2 = {8, 8, 4, 2, kW8KStep, 4, 1, tile_avx2_for};

// ---- AVX-512 (BW): tile_avx2 with 64 k per step, the sign moved by a masked negation ----
template <int MR, int NR>
SK_TARGET_AVX512 void tile_avx512(const int8_t* x, int64_t sx, const int8_t* w, int64_t sw, int32_t* st, int64_t ld,
                                  int64_t kn) {
  const __m512i ones = _mm512_set1_epi16(1);
  const __m512i zero = _mm512_setzero_si512();
  gemm::prefetch_next_tile_start<MR, NR>(w, sw);
  __m512i acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_load_si512(st + (m * ld + j) * 16);
  }
  for (int64_t k = 0; k < kn; k += 64) {
    gemm::prefetch_block_ahead<MR, NR, 64>(w, sw, k);
    // Zeroed bytes past K: |w| = 0 there, so those products vanish whatever x holds.
    const __mmask64 mask = kn - k >= 64 ? ~__mmask64{0} : (__mmask64{1} << (kn - k)) - 1u;
    __m512i aw[NR];
    __mmask64 neg[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      gemm::prefetch_later_rows<MR, NR>(w + j * sw + k, sw, kn);
      const __m512i wv = simd::masked_load_epi8(mask, w + j * sw + k);
      aw[j] = _mm512_abs_epi8(wv);
      neg[j] = _mm512_movepi8_mask(wv);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i xv = simd::masked_load_epi8(mask, x + m * sx + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) {
        const __m512i p = _mm512_maddubs_epi16(aw[j], _mm512_mask_sub_epi8(xv, neg[j], zero, xv));
        acc[m][j] = _mm512_add_epi32(acc[m][j], _mm512_madd_epi16(p, ones));
      }
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int j = 0; j < NR; ++j) _mm512_store_si512(st + (m * ld + j) * 16, acc[m][j]);
  }
}

W8TileFn tile_avx512_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return tile_avx512<MR, NR>; };
  if (mr == 4) return gemm::tile_of<W8TileFn, 4>(nr, std::make_integer_sequence<int, 4>(), make);
  return gemm::tile_of<W8TileFn, 1>(nr, std::make_integer_sequence<int, 8>(), make);
}

constexpr W8Tiles kAvx512 = {16, 8, 4, 4, kW8KStepL2, 4, 4, tile_avx512_for};

// ---- AVX-512 VNNI: VPDPBUSD on (w + 128) as u8 times q, 64 k per step ----
// The lanes hold sum (w + 128) * q = sum w * q + 128 * sum q: the finish step subtracts
// 128 * sum q, one integer per row of q computed when the rows are packed. Flipping the sign
// bit of w costs one XOR per weight vector, shared by the MR rows of the tile, where biasing q
// instead would need a second VPDPBUSD per weight vector for 128 * sum w.
template <int MR, int NR>
SK_TARGET_AVX512_VNNI void tile_avx512_vnni(const int8_t* x, int64_t sx, const int8_t* w, int64_t sw, int32_t* st,
                                            int64_t ld, int64_t kn) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  gemm::prefetch_next_tile_start<MR, NR>(w, sw);
  __m512i acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_load_si512(st + (m * ld + j) * 16);
  }
  int64_t k = 0;
  if (MR == 1 && kn <= kW8GemvRowAtATimeMaxK) {
    // GEMV on short rows: the tile's rows one after another, each one stream of 64-byte loads
    // with an L2 prefetch kGemvAheadBytes ahead of each line (the f16 tile's form), instead of
    // the rows side by side, which on rows of 1 KiB are many short streams.
    // The rest of K (under 64) goes through the masked step below with all rows.
    k = gemm::gemv_rows_one_at_a_time<NR, 64>(
        w, sw, kn, acc[0], [&](__m512i& a, const int8_t* wk, int64_t kk) SK_TARGET_AVX512_VNNI {
          a = _mm512_dpbusd_epi32(a, _mm512_xor_si512(_mm512_loadu_si512(wk), bias), _mm512_loadu_si512(x + kk));
        });
  }
  for (; k + 64 <= kn; k += 64) {
    gemm::prefetch_block_ahead<MR, NR, 64>(w, sw, k);
    __m512i wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      gemm::prefetch_later_rows<MR, NR>(w + j * sw + k, sw, kn);
      wv[j] = _mm512_xor_si512(_mm512_loadu_si512(w + j * sw + k), bias);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i xv = _mm512_loadu_si512(x + m * sx + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_dpbusd_epi32(acc[m][j], wv[j], xv);
    }
  }
  if (k < kn) {
    // Biased weights past K are zeroed, so those lanes add nothing whatever x holds there.
    const __mmask64 mask = (__mmask64{1} << (kn - k)) - 1u;
    __m512i wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      wv[j] = _mm512_maskz_mov_epi8(mask, _mm512_xor_si512(simd::masked_load_epi8(mask, w + j * sw + k), bias));
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i xv = simd::masked_load_epi8(mask, x + m * sx + k);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_dpbusd_epi32(acc[m][j], wv[j], xv);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) _mm512_store_si512(st + (m * ld + j) * 16, acc[m][j]);
  }
}

W8TileFn tile_avx512_vnni_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return tile_avx512_vnni<MR, NR>; };
  if (mr == 4) return gemm::tile_of<W8TileFn, 4>(nr, std::make_integer_sequence<int, 4>(), make);
  if (mr == 2) return gemm::tile_of<W8TileFn, 2>(nr, std::make_integer_sequence<int, 8>(), make);
  return gemm::tile_of<W8TileFn, 1>(nr, std::make_integer_sequence<int, 8>(), make);
}

// 4 x 4 tiles: 16 sums + 4 w vectors + x and the bias of the 32 ZMM registers.
constexpr W8Tiles kAvx512Vnni = {16, 8, 4, 4, kW8KStepL2, 2, 8, tile_avx512_vnni_for};
#endif

// The tiles of the selected level: VPDPBUSD from avx512_vnni up. The sums are exact, so every
// level gives the same bits; AVX-VNNI (VEX VPDPBUSD on ymm) is not a level: neither the CPUs this
// package is tested on nor the emulator of tools/isa_emulation have it, so an AVX2 CPU with it
// runs the avx2 tiles.
struct W8Path {
  const W8Tiles& tiles;
  int32_t w_offset;  // the tiles sum (w + w_offset) * q: finish subtracts w_offset * sum q
};

W8Path select_path() {
#if SK_KERNELS_X86
  switch (selected_isa_level()) {
    case kIsaAmx:  // below kW8AmxMinRows rows (gemm_rows takes the AMX tiles from there)
    case kIsaAvx512Bf16:
    case kIsaAvx512Vnni:
      return {kAvx512Vnni, 128};
    case kIsaAvx512:
      return {kAvx512, 0};
    case kIsaAvx2:
      return {kAvx2, 0};
    default:
      break;
  }
#endif
  return {kScalar, 0};
}

#if SK_KERNELS_X86
// y[j] = float(sum of the 16 int32 lanes of dot product j, minus `offset`) * (rs * w_scale[j * sws])
// for j < 16, the lanes at st[0, 256): the finish below, 16 dot products at once. The int32 adds
// are exact in any order: a partial sum of lanes is at most sum |(w + 128) * q| <= K * 255 * 127,
// inside int32 for K <= kW8MaxK, and the offset sum is the exact total.
SK_TARGET_AVX512 void finish_16x16_avx512(const int32_t* st, int32_t offset, float rs, const float* w_scale,
                                          int64_t sws, float* y) {
  const __m512i sums = _mm512_sub_epi32(_mm512_castps_si512(simd::hsum16x16<true>(st)), _mm512_set1_epi32(offset));
  __m512 ws;
  if (sws == 1) {
    ws = _mm512_loadu_ps(w_scale);
  } else {
    alignas(64) float tmp[16];
    for (int j = 0; j < 16; ++j) tmp[j] = w_scale[j * sws];
    ws = _mm512_load_ps(tmp);
  }
  _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(_mm512_set1_ps(rs), ws)));
}
#endif

// Rows of q copied clamped to [-127, 127] (matmul.w8a8), or of x quantised like quantize.i8
// (matmul.w8a8_dyn), zero-padded; finished as float(sum) * (row scale * w_scale), where sum
// is the tiles' lanes minus w_offset * (the row's sum of q).
struct Int8Rows {
  using A = int8_t;
  using W = int8_t;
  using S = int32_t;
  const W8Tiles& tiles;
  int32_t w_offset;
  const W8Rows& rows;
  const float* w_scale;
  int64_t sws;
  int32_t* row_sums;  // gemm::kMBlock entries: sum q of the packed block's rows
  void pack(int64_t m0, int64_t mb, int64_t k0, int64_t kn, int8_t* panel, int64_t ld, float* rs) const {
    // k0 is always 0: every accepted K fits the panel whole (static_assert above).
    for (int64_t m = 0; m < mb; ++m) {
      int8_t* dst = panel + m * ld;
      rs[m] = w8_row_q(rows, m0 + m, k0, kn, dst);
      std::fill(dst + kn, dst + ld, int8_t{0});
      if (w_offset != 0) {
        int32_t sum = 0;  // |sum| <= 127 * kW8MaxK
        for (int64_t k = 0; k < kn; ++k) sum += dst[k];
        row_sums[m] = sum;
      }
    }
  }
  void finish(const int32_t* st, int64_t ld, const float* rs, int64_t n0, int64_t mb, int64_t nb, float* y,
              int64_t sy) const {
    for (int64_t m = 0; m < mb; ++m) {
      int64_t j = 0;
#if SK_KERNELS_X86
      if (tiles.lanes == 16) {  // only AVX-512 tiles keep 16 lanes
        for (; j + 16 <= nb; j += 16) {
          finish_16x16_avx512(st + (m * ld + j) * 16, w_offset * row_sums[m], rs[m], w_scale + (n0 + j) * sws, sws,
                              y + m * sy + j);
        }
      }
#endif
      for (; j < nb; ++j) {
        const int32_t* lanes = st + (m * ld + j) * tiles.lanes;
        int64_t sum = -int64_t{w_offset} * row_sums[m];
        for (int l = 0; l < tiles.lanes; ++l) sum += lanes[l];
        y[m * sy + j] = static_cast<float>(static_cast<int32_t>(sum)) * (rs[m] * w_scale[(n0 + j) * sws]);
      }
    }
  }
};

}  // namespace

float w8_row_q(const W8Rows& rows, int64_t m, int64_t k0, int64_t kn, int8_t* q) {
  if (rows.x != nullptr) return quantize_row(rows.x + m * rows.stride + k0, kn, q);
  const int8_t* src = rows.q + m * rows.stride + k0;
  for (int64_t k = 0; k < kn; ++k) q[k] = src[k] < -127 ? static_cast<int8_t>(-127) : src[k];
  return rows.scale[m * rows.scale_stride];
}

namespace {

void gemm_rows(const W8Rows& rows, const int8_t* w, int64_t sw, const float* ws, int64_t sws, float* y, int64_t sy,
               int64_t M, int64_t N, int64_t K) {
  if (K <= 0) {  // empty sums, and no row to quantise
    for (int64_t m = 0; m < M; ++m) std::fill(y + m * sy, y + m * sy + N, 0.0f);
    return;
  }
#if SK_KERNELS_X86
  if (selected_isa_level() == kIsaAmx && M >= kW8AmxMinRows) {
    gemm_w8a8_amx(rows, w, sw, ws, sws, y, sy, M, N, K);
    return;
  }
#endif
  const W8Path path = select_path();
  int32_t row_sums[gemm::kMBlock] = {};
  gemm::run(Int8Rows{path.tiles, path.w_offset, rows, ws, sws, row_sums}, w, sw, y, sy, M, N, K);
}

// ---- Kernels ----

struct Plan {
  Walk rows;  // operands: 0 = q or x, 1 = out, 2 = x_scale (matmul.w8a8 only)
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  int64_t w_stride = 0;
  int64_t ws_stride = 0;
  const void* x = nullptr;
  const float* x_scale = nullptr;
  const int8_t* w = nullptr;
  const float* w_scale = nullptr;
  float* out = nullptr;
};

bool check_weights(const sk_tensor_arg& w, const sk_tensor_arg& ws, const char* kernel, ErrorSink err) {
  if (!check_tensor(w, kernel, "w", SK_DTYPE_I8, 2, err) ||
      !check_tensor(ws, kernel, "w_scale", SK_DTYPE_F32, 1, err)) {
    return false;
  }
  if (ws.rank != 1 || ws.shape[0] != w.shape[0]) {
    char s1[96];
    char s2[96];
    return invalid(err, "%s: w_scale shape %s is not [N] for w shape %s", kernel, format_shape(ws, s1, sizeof s1),
                   format_shape(w, s2, sizeof s2));
  }
  return true;
}

// inputs: q, x_scale, w, w_scale
bool plan_static(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 4, 1, err)) return false;
  const sk_tensor_arg& q = args->inputs[0];
  const sk_tensor_arg& xs = args->inputs[1];
  const sk_tensor_arg& w = args->inputs[2];
  const sk_tensor_arg& ws = args->inputs[3];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(q, kName, "q", SK_DTYPE_I8, 1, err) || !check_tensor(xs, kName, "x_scale", SK_DTYPE_F32, 0, err) ||
      !check_weights(w, ws, kName, err) || !check_tensor(out, kName, "out", SK_DTYPE_F32, 1, err) ||
      !plan_linear_rows(q, w, out, kName, "q", &p->rows, err, &xs) ||
      !check_w8_k(q.shape[q.rank - 1], kName, "q", err)) {
    return false;
  }
  p->m = p->rows.numel;
  p->k = q.shape[q.rank - 1];
  p->n = w.shape[0];
  p->w_stride = w.stride[0];
  p->ws_stride = ws.stride[0];
  p->x = q.data;
  p->x_scale = static_cast<const float*>(xs.data);
  p->w = static_cast<const int8_t*>(w.data);
  p->w_scale = static_cast<const float*>(ws.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

// inputs: x, w, w_scale
bool plan_dynamic(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kDynName, 3, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& ws = args->inputs[2];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(x, kDynName, "x", SK_DTYPE_F32, 1, err) || !check_weights(w, ws, kDynName, err) ||
      !check_tensor(out, kDynName, "out", SK_DTYPE_F32, 1, err) ||
      !plan_linear_rows(x, w, out, kDynName, "x", &p->rows, err) ||
      !check_w8_k(x.shape[x.rank - 1], kDynName, "x", err)) {
    return false;
  }
  p->m = p->rows.numel;
  p->k = x.shape[x.rank - 1];
  p->n = w.shape[0];
  p->w_stride = w.stride[0];
  p->ws_stride = ws.stride[0];
  p->x = x.data;
  p->w = static_cast<const int8_t*>(w.data);
  p->w_scale = static_cast<const float*>(ws.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

int32_t run(const Plan& p, bool dynamic, const sk_core_ctx* core) {
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end) return SK_OK;
  if (p.k == 0) {
    // Empty sums; q, x and w may then have no storage at all.
    zero_linear_rows(p.rows, p.out, r);
    return SK_OK;
  }
  const int64_t sx = p.rows.inner_stride(0);
  const int64_t sy = p.rows.inner_stride(1);
  const int8_t* w = p.w + r.begin * p.w_stride;
  const float* ws = p.w_scale + r.begin * p.ws_stride;
  const int64_t nn = r.end - r.begin;
  for_each_run(p.rows, 0, p.m, [&](const int64_t* off, int64_t len) {
    W8Rows rows;
    rows.stride = sx;
    if (dynamic) {
      rows.x = static_cast<const float*>(p.x) + off[0];
    } else {
      rows.q = static_cast<const int8_t*>(p.x) + off[0];
      rows.scale = p.x_scale + off[2];
      rows.scale_stride = p.rows.inner_stride(2);
    }
    gemm_rows(rows, w, p.w_stride, ws, p.ws_stride, p.out + off[1] + r.begin, sy, len, nn, p.k);
  });
  return SK_OK;
}

int32_t prologue(const Plan& p, const sk_core_ctx* core) {
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end || p.k == 0) return SK_OK;
  prefetch_weight_slice(p.w + r.begin * p.w_stride, p.w_stride, r.end - r.begin, p.k, core);
  return SK_OK;
}

constexpr int32_t kStaticQ = 0, kStaticXScale = 1, kStaticW = 2, kStaticWScale = 3, kStaticOut = 4;
constexpr int32_t kDynX = 0, kDynW = 1, kDynWScale = 2, kDynOut = 3;

int32_t access(const Plan& p, bool dynamic, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
               int32_t capacity) {
  const sk_range r = sk_split_range(p.n, core_id, num_cores, kNSplitAlign);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end || p.m == 0) return list.finish();
  if (dynamic) {
    add_linear_access(list, p.rows, p.k, sizeof(float), kDynX, p.w_stride, 1, kDynW, kDynOut, r);
  } else {
    add_linear_access(list, p.rows, p.k, 1, kStaticQ, p.w_stride, 1, kStaticW, kStaticOut, r);
    list.add_walk(p.rows, 2, kStaticXScale, SK_ACCESS_READ, 0, p.m, 1, sizeof(float));
  }
  const int64_t first = r.begin * p.ws_stride;
  const int64_t last = (r.end - 1) * p.ws_stride;
  list.add(dynamic ? kDynWScale : kStaticWScale, SK_ACCESS_READ, std::min(first, last) * 4,
           (std::max(first, last) + 1) * 4);
  return list.finish();
}

}  // namespace

void gemm_w8a8(const W8Rows& rows, const int8_t* w, int64_t sw, const float* w_scale, int64_t sws, float* y, int64_t sy,
               int64_t m, int64_t n, int64_t k) {
  gemm_rows(rows, w, sw, w_scale, sws, y, sy, m, n, k);
}

int32_t matmul_w8a8_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  Plan p;
  if (!check_core(core, kName, sink_of(core)) || !plan_static(args, &p, sink_of(core))) return SK_ERR_INVALID_ARGUMENT;
  return run(p, false, core);
}

int32_t matmul_w8a8_prologue(const sk_kernel_args* args, const sk_core_ctx* core) {
  Plan p;
  if (!check_core(core, kName, sink_of(core)) || !plan_static(args, &p, sink_of(core))) return SK_ERR_INVALID_ARGUMENT;
  return prologue(p, core);
}

int32_t matmul_w8a8_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                           int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_static(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  return access(p, false, core_id, num_cores, ranges, capacity);
}

int32_t matmul_w8a8_dyn_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  Plan p;
  if (!check_core(core, kDynName, sink_of(core)) || !plan_dynamic(args, &p, sink_of(core))) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  return run(p, true, core);
}

int32_t matmul_w8a8_dyn_prologue(const sk_kernel_args* args, const sk_core_ctx* core) {
  Plan p;
  if (!check_core(core, kDynName, sink_of(core)) || !plan_dynamic(args, &p, sink_of(core))) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  return prologue(p, core);
}

int32_t matmul_w8a8_dyn_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                               int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_dynamic(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  return access(p, true, core_id, num_cores, ranges, capacity);
}

}  // namespace sk::kernels
