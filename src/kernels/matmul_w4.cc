// matmul.w4a8_dyn and matmul.w4: group-wise 4-bit weights (docs/kernels_matmul.md, "4-bit
// weights", has the packed layout and how AWQ, GPTQ and Q4_0 map onto it).
//
//   inputs: x f32 [..., K], w i8 [N, K/2] (two 4-bit values per byte: k = 2j in bits 0-3 of
//           byte j, k = 2j + 1 in bits 4-7), w_scale f32 or f16 [K/G, N], optional w_zero i8
//           [K/G, N] (8 when absent, the symmetric form);  output: y f32 [..., N].
//   G = K / w_scale.shape[0], a power of two >= 32; the weight of (n, k) in group g = k / G is
//   s[g][n] * (q[n][k] - z[g][n]).
//
// matmul.w4a8_dyn quantises each row of x like quantize.i8 (q, scale xs) and then, per group,
//   d[g] = sum_{k in g} q[k] * w4[n][k] - z[g][n] * sum_{k in g} q[k]      (exact int32)
//   acc  = fma(float(d[g]), s[g][n], acc)   for g = 0, 1, ... in order     (f32, from acc = 0)
//   y    = acc * xs
// Every step is exact or one correctly rounded f32 operation in a fixed order, so every ISA level
// gives the same bits. The SIMD paths get d for 8 (AVX2) or 16 (AVX-512) weight rows at once:
// the integer dot products run along K in vector lanes (VPMADDUBSW + VPMADDWD, or VPDPBUSD), the
// lanes of one group are added exactly (a transposing reduction), and the f32 steps then run with
// one weight row per lane, so the order of the f32 sum over groups is the definition's.
//
// matmul.w4 keeps x in f32: it is matmul.f32 on the dequantised weights fl(s * (q - z)), bit for
// bit at each level (8 or 16 lanes along K, the fixed lane tree), the dequantisation done in
// registers after each load.
//
// Cores split N in chunks of kNSplitAlign rows; within a core, tiles of 8 (AVX2) or 16 (AVX-512)
// weight rows take every row of x over all of K before the next tile, so the tile's weights are
// read from memory once and from L1 for the further rows of x.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/gemv_kernels.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/matmul_driver.h"
#include "kernels/matmul_half.h"
#include "kernels/simd.h"

namespace sk::kernels {
namespace {

constexpr const char* kW4a8Name = "matmul.w4a8_dyn";
constexpr const char* kW4Name = "matmul.w4";
enum { kOpX = 0, kOpW = 1, kOpScale = 2, kOpZero = 3 };

// The tiled layout's blocks: 16 weight rows per tile, 128 k (64 bytes of each row) per step.
constexpr int64_t kTileRows = 16;
constexpr int64_t kTileStepK = 128;
constexpr int64_t kTileRowBytes = kTileStepK / 2;
constexpr int64_t kTileStepBytes = kTileRows * kTileRowBytes;
static_assert(kNSplitAlign % kTileRows == 0, "a core's rows must start at a tile");
// A tiled core slice is one stream; the tiles prefetch it this far ahead of what they read, into
// L2. Measured on Zen 4 (a 155M-parameter Llama's decode, w4a8, G = 32, 1 thread, tokens/s in
// alternated rounds): none 110-187, 4 KiB 190-199, 8 KiB 172-231, 16 KiB 199-247, 32 KiB 203-217,
// 64 KiB 212-228, 16 KiB into L1 159-176; on 2 threads none 178-244, 8 KiB 318-362, 16 KiB
// 353-450, 32 KiB 286-402. Prefetching the scales' stream as well measured within the noise.
constexpr int64_t kTiledPrefetchBytes = 16384;

// One core's view of the weights, in either layout (docs/kernels_matmul.md, "Packed layout"):
//   rows: row n of w at w + n * sw; s[g][n] at scale + g * ss + n; z[g][n] at zero + g * sz + n.
//   tiled: tile t = n / 16 at w + t * tile_bytes, its step s (k in [128s, 128s + 128)) at + s * 1024,
//          row n % 16 at + (n % 16) * 64; s[g][n] at scale + t * ss + g * 16 + n % 16 (zero alike).
// The tiles of the SIMD paths hold 8 or 16 rows of one 16-row block, so row n + j of a tile is at
// row_base(n) + j * row_stride(), and the bytes of the step at byte b at + step_offset(b).
struct W4Weights {
  const uint8_t* w = nullptr;
  int64_t sw = 0;  // rows: the row stride; tiled: the tile stride (tile_bytes)
  bool tiled = false;
  const void* scale = nullptr;
  bool scale_f16 = false;
  int64_t ss = 0;  // rows: the group stride; tiled: the tile stride of the scales
  const int8_t* zero = nullptr;
  int64_t sz = 0;
  int64_t group = 0;   // G
  int64_t groups = 0;  // K / G

  const uint8_t* row_base(int64_t n) const {
    return tiled ? w + (n / kTileRows) * sw + (n % kTileRows) * kTileRowBytes : w + n * sw;
  }
  int64_t row_stride() const { return tiled ? kTileRowBytes : sw; }
  static int64_t step_offset(bool tiled, int64_t byte) {
    return tiled ? (byte / kTileRowBytes) * kTileStepBytes + byte % kTileRowBytes : byte;
  }
  int64_t step_offset(int64_t byte) const { return step_offset(tiled, byte); }
  // Index of s[g][n] (and z[g][n]) in its tensor; consecutive n of one 16-row block are adjacent.
  int64_t group_index(int64_t g, int64_t n, int64_t stride) const {
    return tiled ? (n / kTileRows) * stride + g * kTileRows + n % kTileRows : g * stride + n;
  }
  float s(int64_t g, int64_t n) const {
    const int64_t i = group_index(g, n, ss);
    return scale_f16 ? gemm::F16Format::to_f32(static_cast<const uint16_t*>(scale)[i])
                     : static_cast<const float*>(scale)[i];
  }
  const void* scale_at(int64_t g, int64_t n) const {
    const int64_t i = group_index(g, n, ss);
    return scale_f16 ? static_cast<const void*>(static_cast<const uint16_t*>(scale) + i)
                     : static_cast<const void*>(static_cast<const float*>(scale) + i);
  }
  const int8_t* zero_at(int64_t g, int64_t n) const { return zero + group_index(g, n, sz); }
  int32_t z(int64_t g, int64_t n) const { return zero != nullptr ? *zero_at(g, n) : 8; }
  int32_t q(int64_t n, int64_t k) const { return (row_base(n)[step_offset(k / 2)] >> (4 * (k & 1))) & 0xF; }
};

// ---------------------------------------------------------------------------------------------
// matmul.w4a8_dyn

// The packed rows of x: quantised like quantize.i8, each chunk of C elements stored as its C / 2
// even-k elements followed by its C / 2 odd-k elements (C = 2 * the vector bytes), the order in
// which a vector of weight bytes yields its low and high nibbles; C = 0 keeps k order (scalar).
// Zero-padded to a multiple of C; xsum[g] = sum of the row's q over group g.
struct W4a8Panel {
  int8_t* q = nullptr;
  int64_t ld = 0;
  int32_t* xsum = nullptr;
  int64_t lds = 0;
  float* xs = nullptr;
};

void pack_w4a8_row(const float* x, int64_t k, int64_t group, int64_t chunk, int8_t* q, int64_t ld, int32_t* xsum,
                   float* xs) {
  *xs = quantize_row(x, k, q);
  std::fill(q + k, q + ld, int8_t{0});
  for (int64_t g = 0; g * group < k; ++g) {
    int32_t s = 0;
    for (int64_t i = g * group; i < (g + 1) * group; ++i) s += q[i];
    xsum[g] = s;
  }
  if (chunk == 0) return;
  int8_t tmp[128];
  for (int64_t c = 0; c < ld; c += chunk) {
    std::copy(q + c, q + c + chunk, tmp);
    for (int64_t i = 0; i < chunk / 2; ++i) {
      q[c + i] = tmp[2 * i];
      q[c + chunk / 2 + i] = tmp[2 * i + 1];
    }
  }
}

// y[j] for the weight rows n + j, j < nrows <= the tile's rows, of one packed row of x.
using W4a8TileFn = void (*)(const int8_t* xq, const int32_t* xsum, float xs, const W4Weights& w, int64_t n,
                            int64_t nrows, int64_t k, float* y);

// Rows i and i + 1 of the panel (stride ldx; xsum stride lds) over weight rows [n, n + 8) of a
// 16-row block, into y and y + sy.
using W4a8PairFn = void (*)(const int8_t* xq, int64_t ldx, const int32_t* xsum, int64_t lds, const float* xs,
                            const W4Weights& w, int64_t n, int64_t k, float* y, int64_t sy);

void w4a8_tile_scalar(const int8_t* xq, const int32_t* xsum, float xs, const W4Weights& w, int64_t n, int64_t nrows,
                      int64_t k, float* y) {
  for (int64_t j = 0; j < nrows; ++j) {
    float acc = 0.0f;
    for (int64_t g = 0; g < w.groups; ++g) {
      int32_t dot = 0;
      for (int64_t i = g * w.group; i < (g + 1) * w.group; ++i) dot += xq[i] * w.q(n + j, i);
      const int32_t d = dot - w.z(g, n + j) * xsum[g];
      acc = std::fma(static_cast<float>(d), w.s(g, n + j), acc);
    }
    y[j] = acc * xs;
  }
  (void)k;
}

#if SK_KERNELS_X86
// ---- AVX2: 8 weight rows per tile, 64 k (32 weight bytes) per step ----

// The quarter sums of four rows' products: p0..p3 hold int16 sums of 4 products each (VPMADDUBSW
// of the low and high nibbles, added), 8 per 128-bit lane; the result's 128-bit lane h holds
// [the sum of lane h of p0, of p1, of p2, of p3] as int32. Two levels of adds stay in int16 (16
// products of |q * x| <= 15 * 127 are at most 30480) before VPMADDWD widens the last pair; the
// sums are exact, so their order is immaterial. Works per 128-bit lane, as the 512-bit form.
SK_TARGET_AVX2 inline __m256i quad_sums16(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i u01 = _mm256_add_epi16(_mm256_unpacklo_epi32(p0, p1), _mm256_unpackhi_epi32(p0, p1));
  const __m256i u23 = _mm256_add_epi16(_mm256_unpacklo_epi32(p2, p3), _mm256_unpackhi_epi32(p2, p3));
  const __m256i v = _mm256_add_epi16(_mm256_unpacklo_epi64(u01, u23), _mm256_unpackhi_epi64(u01, u23));
  return _mm256_madd_epi16(v, _mm256_set1_epi16(1));
}

// The products of one step (64 k, or the 32 of a last half step) of rows r[0..3]: int16 sums of 4
// products (k pairs of the low and of the high nibbles), 16 per row.
template <bool kHalf>
SK_TARGET_AVX2 inline __m256i nibble_dots(const uint8_t* p, __m256i xe, __m256i xo) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i wv = kHalf ? _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
                           : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i lo = _mm256_and_si256(wv, low4);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), low4);
  return _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
}

// t0 / t1 += the quarter sums of rows 0-3 / 4-7 over the step at kc.
// The rows' bytes of the step are at rows[j] + b.
template <bool kHalf>
SK_TARGET_AVX2 inline void w4a8_step_avx2(const int8_t* xq, const uint8_t* const* rows, int64_t kc, int64_t b,
                                          __m256i* t0, __m256i* t1) {
  const __m256i xe = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + kc));
  const __m256i xo = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + kc + 32));
  *t0 = _mm256_add_epi32(*t0,
                         quad_sums16(nibble_dots<kHalf>(rows[0] + b, xe, xo), nibble_dots<kHalf>(rows[1] + b, xe, xo),
                                     nibble_dots<kHalf>(rows[2] + b, xe, xo), nibble_dots<kHalf>(rows[3] + b, xe, xo)));
  *t1 = _mm256_add_epi32(*t1,
                         quad_sums16(nibble_dots<kHalf>(rows[4] + b, xe, xo), nibble_dots<kHalf>(rows[5] + b, xe, xo),
                                     nibble_dots<kHalf>(rows[6] + b, xe, xo), nibble_dots<kHalf>(rows[7] + b, xe, xo)));
}

// The zero points and scales of group g for the tile's rows (a short tile reads only its rows).
template <bool kF16>
SK_TARGET_AVX2_F16C inline __m256 scales8(const W4Weights& w, int64_t g, int64_t n, int64_t nrows) {
  if (nrows == 8) {
    if constexpr (kF16) {
      return _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w.scale_at(g, n)))));
    } else {
      return _mm256_loadu_ps(static_cast<const float*>(w.scale_at(g, n)));
    }
  }
  alignas(32) float s[8] = {};
  for (int64_t j = 0; j < nrows; ++j) s[j] = w.s(g, n + j);
  return _mm256_load_ps(s);
}

SK_TARGET_AVX2 inline __m256i zeros8(const W4Weights& w, int64_t g, int64_t n, int64_t nrows) {
  if (nrows == 8) return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.zero_at(g, n))));
  alignas(32) int32_t z[8] = {};
  for (int64_t j = 0; j < nrows; ++j) z[j] = w.z(g, n + j);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(z));
}

// acc += float(d - z * xsum) * s for group g (the definition's f32 step, 8 rows at once).
template <bool kZeros, bool kF16>
SK_TARGET_AVX2_F16C inline __m256 finish_group8(__m256i d, int32_t xsum, const W4Weights& w, int64_t g, int64_t n,
                                                int64_t nrows, __m256 acc) {
  if constexpr (kZeros) {
    d = _mm256_sub_epi32(d, _mm256_mullo_epi32(zeros8(w, g, n, nrows), _mm256_set1_epi32(xsum)));
  } else {
    d = _mm256_sub_epi32(d, _mm256_set1_epi32(8 * xsum));
  }
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), scales8<kF16>(w, g, n, nrows), acc);
}

// GPC groups per 64-k step (2 for G = 32, else 1: a group then spans G / 64 steps).
template <int GPC, bool kZeros, bool kF16>
SK_TARGET_AVX2_F16C void w4a8_tile_avx2(const int8_t* xq, const int32_t* xsum, float xs, const W4Weights& w, int64_t n,
                                        int64_t nrows, int64_t k, float* y) {
  constexpr int64_t kStep = 64;
  const uint8_t* rows[8];
  for (int64_t j = 0; j < 8; ++j) rows[j] = w.row_base(n + std::min(j, nrows - 1));
  const int64_t span = GPC > 1 ? kStep : w.group;
  __m256 acc = _mm256_setzero_ps();
  // g = k0 / G: GPC groups per span (one when a group spans whole steps)
  for (int64_t k0 = 0, g = 0; k0 < k; k0 += span, g += GPC) {
    __m256i t0 = _mm256_setzero_si256();
    __m256i t1 = _mm256_setzero_si256();
    if (k - k0 >= kStep) {
      for (int64_t kc = k0; kc < k0 + span; kc += kStep) {
        // Rows of at most gemm::kShortRowBytes (K <= 4096 here) bring in the next tile's lines.
        // Tiled: the tile's 8 rows of a 128-k step are 512 bytes of the stream; the step's
        // first half prefetches them ahead (the same distance as the AVX-512 tiles; not timed on
        // an AVX2 machine).
        if (!w.tiled) {
          for (int j = 0; j < 8; ++j) gemm::prefetch_next_tile_short_rows<1, 8>(rows[j] + kc / 2, w.sw, kc / 2);
        } else if (kc % kTileStepK == 0) {
          gemm::prefetch_l2(rows[0] + w.step_offset(kc / 2) + kTiledPrefetchBytes, 8 * kTileRowBytes);
        }
        w4a8_step_avx2<false>(xq, rows, kc, w.step_offset(kc / 2), &t0, &t1);
      }
    } else {
      // K = 32 (mod 64), G = 32: the upper half is zero
      w4a8_step_avx2<true>(xq, rows, k0, w.step_offset(k0 / 2), &t0, &t1);
    }
    const __m256i q0 = _mm256_permute2x128_si256(t0, t1, 0x20);  // k0 + [0, 32) of the 8 rows
    const __m256i q1 = _mm256_permute2x128_si256(t0, t1, 0x31);  // k0 + [32, 64)
    if constexpr (GPC == 2) {
      acc = finish_group8<kZeros, kF16>(q0, xsum[g], w, g, n, nrows, acc);
      if (g + 1 < w.groups) acc = finish_group8<kZeros, kF16>(q1, xsum[g + 1], w, g + 1, n, nrows, acc);
    } else {
      acc = finish_group8<kZeros, kF16>(_mm256_add_epi32(q0, q1), xsum[g], w, g, n, nrows, acc);
    }
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, _mm256_mul_ps(acc, _mm256_set1_ps(xs)));
  for (int64_t j = 0; j < nrows; ++j) y[j] = out[j];
}

template <int GPC>
W4a8TileFn w4a8_avx2_for(bool zeros, bool f16) {
  if (zeros) return f16 ? w4a8_tile_avx2<GPC, true, true> : w4a8_tile_avx2<GPC, true, false>;
  return f16 ? w4a8_tile_avx2<GPC, false, true> : w4a8_tile_avx2<GPC, false, false>;
}

// ---- AVX-512: 16 weight rows per tile, 128 k (64 weight bytes) per step ----

SK_TARGET_AVX512 inline __m512i quad_sums512(__m512i r0, __m512i r1, __m512i r2, __m512i r3) {
  const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(r0, r1), _mm512_unpackhi_epi32(r0, r1));
  const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(r2, r3), _mm512_unpackhi_epi32(r2, r3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
}

template <bool kF16>
SK_TARGET_AVX512_F16C inline __m512 scales16(const W4Weights& w, int64_t g, int64_t n, int64_t nrows) {
  const __mmask16 m = simd::mask16(nrows);
  if constexpr (kF16) {
    return _mm512_cvtph_ps(simd::masked_load_epi16x16(m, static_cast<const uint16_t*>(w.scale_at(g, n))));
  } else {
    return simd::masked_load_ps(m, static_cast<const float*>(w.scale_at(g, n)));
  }
}

template <bool kZeros, bool kF16>
SK_TARGET_AVX512_F16C inline __m512 finish_group16(__m512i d, int32_t xsum, const W4Weights& w, int64_t g, int64_t n,
                                                   int64_t nrows, __m512 acc) {
  if constexpr (kZeros) {
    const __m512i z = _mm512_cvtepi8_epi32(simd::masked_load_epi8x16(simd::mask16(nrows), w.zero_at(g, n)));
    d = _mm512_sub_epi32(d, _mm512_mullo_epi32(z, _mm512_set1_epi32(xsum)));
  } else {
    d = _mm512_sub_epi32(d, _mm512_set1_epi32(8 * xsum));
  }
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), scales16<kF16>(w, g, n, nrows), acc);
}

// The int32 dot products of one 128-k step: VPDPBUSD (kVnni) or VPMADDUBSW + VPMADDWD. VPDPBUSD
// is written as an instruction rather than an intrinsic so that one tile body, compiled for
// AVX-512 BW, serves both levels without giving the compiler the VNNI target (which would let
// it use VNNI anywhere in the avx512 tiles); it only runs when the level is avx512_vnni or up.
template <bool kVnni>
SK_TARGET_AVX512 inline __m512i dot_step(__m512i raw, __m512i lo, __m512i hi, __m512i xe, __m512i xo) {
  if constexpr (kVnni) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(raw) : "v"(lo), "v"(xe));
    __asm__("vpdpbusd %2, %1, %0" : "+v"(raw) : "v"(hi), "v"(xo));
    return raw;
  } else {
    const __m512i p16 = _mm512_add_epi16(_mm512_maddubs_epi16(lo, xe), _mm512_maddubs_epi16(hi, xo));
    return _mm512_add_epi32(raw, _mm512_madd_epi16(p16, _mm512_set1_epi16(1)));
  }
}

// The 16 weight rows of a tile. A full tile addresses row j as quad[j / 4] + (j % 4) * sw: four
// pointers and the strides sw and 3 * sw, which x86 addressing takes as they are. A partial tile
// repeats its last row and keeps a table of 16 pointers.
template <bool kFull>
struct Rows16;

template <>
struct Rows16<true> {
  const uint8_t* quad[4];
  int64_t sw;
  bool tiled;
  Rows16(const W4Weights& w, int64_t n, int64_t /*nrows*/) : sw(w.row_stride()), tiled(w.tiled) {
    for (int b = 0; b < 4; ++b) quad[b] = w.row_base(n + 4 * b);
  }
  // Row j's bytes from `byte` on. The four bases are made opaque to the compiler once per step:
  // otherwise it keeps each of the 16 row addresses (and 16 prefetch addresses) as an induction
  // variable of its own, more than there are registers, and spills them to vector registers.
  struct Step {
    const uint8_t* base[4];
    int64_t sw;
    const uint8_t* at(int j) const { return base[j >> 2] + (j & 3) * sw; }
  };
  Step step(int64_t byte) const {
    const int64_t o = W4Weights::step_offset(tiled, byte);
    Step s{{quad[0] + o, quad[1] + o, quad[2] + o, quad[3] + o}, sw};
    for (auto& b : s.base) __asm__("" : "+r"(b));
    return s;
  }
};

template <>
struct Rows16<false> {
  const uint8_t* row[16];
  bool tiled;
  Rows16(const W4Weights& w, int64_t n, int64_t nrows) : tiled(w.tiled) {
    for (int64_t j = 0; j < 16; ++j) row[j] = w.row_base(n + std::min(j, nrows - 1));
  }
  struct Step {
    const uint8_t* const* row;
    int64_t offset;
    const uint8_t* at(int j) const { return row[j] + offset; }
  };
  Step step(int64_t byte) const { return {row, W4Weights::step_offset(tiled, byte)}; }
};

template <int GPC, bool kZeros, bool kF16, bool kVnni, bool kFull>
SK_TARGET_AVX512_F16C inline void w4a8_tile_avx512_body(const int8_t* xq, const int32_t* xsum, float xs,
                                                        const W4Weights& w, int64_t n, int64_t nrows, int64_t k,
                                                        float* y) {
  constexpr int64_t kStep = 128;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const Rows16<kFull> rows(w, n, nrows);
  const uint8_t* tile = w.row_base(n);
  const int64_t span = GPC > 1 ? kStep : std::max<int64_t>(w.group, kStep);
  __m512 acc = _mm512_setzero_ps();
  // g = k0 / G: GPC groups per span (one when a group spans whole steps)
  for (int64_t k0 = 0, g = 0; k0 < k; k0 += span, g += GPC) {
    __m512i raw[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) raw[j] = _mm512_setzero_si512();
    for (int64_t kc = k0; kc < k0 + span && kc < k; kc += kStep) {
      const __m512i xe = _mm512_load_si512(xq + kc);
      const __m512i xo = _mm512_load_si512(xq + kc + 64);
      const int64_t bytes = std::min<int64_t>(64, (k - kc) / 2);
      const __mmask64 mask = bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1u;
      // The weights ahead, into L2 in address order: the block of a later tile (row layout), or
      // the stream kTiledPrefetchBytes ahead (tiled: a "tile" of 16 rows of 64 bytes is one step).
      if (w.tiled) {
        gemm::prefetch_block_ahead<1, 16, 64, kTiledPrefetchBytes>(tile, kTileRowBytes, kc / 2);
      } else {
        gemm::prefetch_block_ahead<1, 16, 64>(tile, w.sw, kc / 2);
      }
      const auto step = rows.step(kc / 2);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const uint8_t* p = step.at(j);
        const __m512i wv = simd::masked_load_epi8(mask, p);
        const __m512i lo = _mm512_and_si512(wv, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), low4);
        raw[j] = dot_step<kVnni>(raw[j], lo, hi, xe, xo);
      }
    }
    // 128-bit lane h of tq[b] holds the sums of k0 + [32h, 32h + 32) of rows 4b..4b+3; transposed
    // into quad[h] (16 rows, one k range of 32 each).
    __m512i tq[4];
#pragma GCC unroll 4
    for (int b = 0; b < 4; ++b) tq[b] = quad_sums512(raw[4 * b], raw[4 * b + 1], raw[4 * b + 2], raw[4 * b + 3]);
    const __m512i p0 = _mm512_shuffle_i32x4(tq[0], tq[1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i p1 = _mm512_shuffle_i32x4(tq[0], tq[1], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i p2 = _mm512_shuffle_i32x4(tq[2], tq[3], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i p3 = _mm512_shuffle_i32x4(tq[2], tq[3], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i quad[4] = {
        _mm512_shuffle_i32x4(p0, p2, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i32x4(p0, p2, _MM_SHUFFLE(3, 1, 3, 1)),
        _mm512_shuffle_i32x4(p1, p3, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_i32x4(p1, p3, _MM_SHUFFLE(3, 1, 3, 1))};
    if constexpr (GPC == 4) {
      for (int h = 0; h < 4 && g + h < w.groups; ++h)
        acc = finish_group16<kZeros, kF16>(quad[h], xsum[g + h], w, g + h, n, nrows, acc);
    } else if constexpr (GPC == 2) {
      for (int h = 0; h < 2 && g + h < w.groups; ++h) {
        acc = finish_group16<kZeros, kF16>(_mm512_add_epi32(quad[2 * h], quad[2 * h + 1]), xsum[g + h], w, g + h, n,
                                           nrows, acc);
      }
    } else {
      const __m512i all = _mm512_add_epi32(_mm512_add_epi32(quad[0], quad[1]), _mm512_add_epi32(quad[2], quad[3]));
      acc = finish_group16<kZeros, kF16>(all, xsum[g], w, g, n, nrows, acc);
    }
  }
  simd::masked_store_ps(y, simd::mask16(nrows), _mm512_mul_ps(acc, _mm512_set1_ps(xs)));
}

// Full tiles address their rows from four bases (Rows16<true>).
template <int GPC, bool kZeros, bool kF16, bool kVnni>
SK_TARGET_AVX512_F16C inline void w4a8_tile_avx512_dispatch(const int8_t* xq, const int32_t* xsum, float xs,
                                                            const W4Weights& w, int64_t n, int64_t nrows, int64_t k,
                                                            float* y) {
  if (nrows < 16) {
    w4a8_tile_avx512_body<GPC, kZeros, kF16, kVnni, false>(xq, xsum, xs, w, n, nrows, k, y);
  } else {
    w4a8_tile_avx512_body<GPC, kZeros, kF16, kVnni, true>(xq, xsum, xs, w, n, nrows, k, y);
  }
}

template <int GPC, bool kZeros, bool kF16>
SK_TARGET_AVX512_F16C void w4a8_tile_avx512(const int8_t* xq, const int32_t* xsum, float xs, const W4Weights& w,
                                            int64_t n, int64_t nrows, int64_t k, float* y) {
  w4a8_tile_avx512_dispatch<GPC, kZeros, kF16, false>(xq, xsum, xs, w, n, nrows, k, y);
}

template <int GPC, bool kZeros, bool kF16>
SK_TARGET_AVX512_F16C void w4a8_tile_avx512_vnni(const int8_t* xq, const int32_t* xsum, float xs, const W4Weights& w,
                                                 int64_t n, int64_t nrows, int64_t k, float* y) {
  w4a8_tile_avx512_dispatch<GPC, kZeros, kF16, true>(xq, xsum, xs, w, n, nrows, k, y);
}

// Two rows of x over 8 weight rows of a 16-row block (blocks of several rows of x: prefill,
// batched decode): each vector of weight bytes is loaded and split into its 4-bit values once
// for both rows. The same integer sums and the same f32 steps per (row, group) as the 16-row
// tile, 8 lanes wide (finish_group8), so the bits do not depend on which tile ran.

template <int GPC, bool kZeros, bool kF16, bool kVnni>
SK_TARGET_AVX512_F16C void w4a8_pair_avx512(const int8_t* xq, int64_t ldx, const int32_t* xsum, int64_t lds,
                                            const float* xs, const W4Weights& w, int64_t n, int64_t k, float* y,
                                            int64_t sy) {
  constexpr int64_t kStep = 128;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const uint8_t* base = w.row_base(n);
  const int64_t rs = w.row_stride();
  const int64_t span = GPC > 1 ? kStep : std::max<int64_t>(w.group, kStep);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t k0 = 0, g = 0; k0 < k; k0 += span, g += GPC) {
    __m512i raw[2][8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) raw[0][j] = raw[1][j] = _mm512_setzero_si512();
    for (int64_t kc = k0; kc < k0 + span && kc < k; kc += kStep) {
      const __m512i xe0 = _mm512_load_si512(xq + kc);
      const __m512i xo0 = _mm512_load_si512(xq + kc + 64);
      const __m512i xe1 = _mm512_load_si512(xq + ldx + kc);
      const __m512i xo1 = _mm512_load_si512(xq + ldx + kc + 64);
      const int64_t bytes = std::min<int64_t>(64, (k - kc) / 2);
      const __mmask64 mask = bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1u;
      const uint8_t* step = base + w.step_offset(kc / 2);
      __asm__("" : "+r"(step));
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m512i wv = simd::masked_load_epi8(mask, step + j * rs);
        const __m512i lo = _mm512_and_si512(wv, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), low4);
        raw[0][j] = dot_step<kVnni>(raw[0][j], lo, hi, xe0, xo0);
        raw[1][j] = dot_step<kVnni>(raw[1][j], lo, hi, xe1, xo1);
      }
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {
      // 128-bit lane h of t0 / t1: the sums of k0 + [32h, 32h + 32) of rows 0-3 / 4-7.
      const __m512i t0 = quad_sums512(raw[i][0], raw[i][1], raw[i][2], raw[i][3]);
      const __m512i t1 = quad_sums512(raw[i][4], raw[i][5], raw[i][6], raw[i][7]);
      // [t0.0, t1.0, t0.1, t1.1] and [t0.2, t1.2, t0.3, t1.3]: 256-bit half h of lo01 / hi23
      // holds the 8 rows of the k range h / h + 2.
      const __m512i a = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(1, 0, 1, 0));
      const __m512i b = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(3, 2, 3, 2));
      const __m512i lo01 = _mm512_shuffle_i32x4(a, a, _MM_SHUFFLE(3, 1, 2, 0));
      const __m512i hi23 = _mm512_shuffle_i32x4(b, b, _MM_SHUFFLE(3, 1, 2, 0));
      const __m256i quad[4] = {_mm512_castsi512_si256(lo01), _mm512_extracti64x4_epi64(lo01, 1),
                               _mm512_castsi512_si256(hi23), _mm512_extracti64x4_epi64(hi23, 1)};
      const int32_t* xsi = xsum + i * lds;
      if constexpr (GPC == 4) {
        for (int h = 0; h < 4 && g + h < w.groups; ++h)
          acc[i] = finish_group8<kZeros, kF16>(quad[h], xsi[g + h], w, g + h, n, 8, acc[i]);
      } else if constexpr (GPC == 2) {
        for (int h = 0; h < 2 && g + h < w.groups; ++h) {
          acc[i] = finish_group8<kZeros, kF16>(_mm256_add_epi32(quad[2 * h], quad[2 * h + 1]), xsi[g + h], w, g + h, n,
                                               8, acc[i]);
        }
      } else {
        const __m256i all = _mm256_add_epi32(_mm256_add_epi32(quad[0], quad[1]), _mm256_add_epi32(quad[2], quad[3]));
        acc[i] = finish_group8<kZeros, kF16>(all, xsi[g], w, g, n, 8, acc[i]);
      }
    }
  }
  _mm256_storeu_ps(y, _mm256_mul_ps(acc[0], _mm256_set1_ps(xs[0])));
  _mm256_storeu_ps(y + sy, _mm256_mul_ps(acc[1], _mm256_set1_ps(xs[1])));
}

template <int GPC, bool kVnni>
W4a8PairFn w4a8_pair_for(bool zeros, bool f16) {
  if (zeros) return f16 ? w4a8_pair_avx512<GPC, true, true, kVnni> : w4a8_pair_avx512<GPC, true, false, kVnni>;
  return f16 ? w4a8_pair_avx512<GPC, false, true, kVnni> : w4a8_pair_avx512<GPC, false, false, kVnni>;
}

struct W4a8Avx512Fns {
  W4a8TileFn tile;
  W4a8PairFn pair;
};

template <int GPC, bool kVnni>
W4a8TileFn w4a8_avx512_for(bool zeros, bool f16) {
  if constexpr (kVnni) {
    if (zeros) return f16 ? w4a8_tile_avx512_vnni<GPC, true, true> : w4a8_tile_avx512_vnni<GPC, true, false>;
    return f16 ? w4a8_tile_avx512_vnni<GPC, false, true> : w4a8_tile_avx512_vnni<GPC, false, false>;
  } else {
    if (zeros) return f16 ? w4a8_tile_avx512<GPC, true, true> : w4a8_tile_avx512<GPC, true, false>;
    return f16 ? w4a8_tile_avx512<GPC, false, true> : w4a8_tile_avx512<GPC, false, false>;
  }
}

template <int GPC, bool kVnni>
W4a8Avx512Fns w4a8_avx512_fns(bool zeros, bool f16) {
  return {w4a8_avx512_for<GPC, kVnni>(zeros, f16), w4a8_pair_for<GPC, kVnni>(zeros, f16)};
}

// GPC = 4 for G = 32, 2 for G = 64, else 1.
template <bool kVnni>
W4a8Avx512Fns w4a8_avx512_fns(int64_t group, bool zeros, bool f16) {
  if (group == 32) return w4a8_avx512_fns<4, kVnni>(zeros, f16);
  if (group == 64) return w4a8_avx512_fns<2, kVnni>(zeros, f16);
  return w4a8_avx512_fns<1, kVnni>(zeros, f16);
}
#endif  // SK_KERNELS_X86

struct W4a8Path {
  W4a8TileFn tile;
  int64_t rows;               // weight rows per tile
  int64_t chunk;              // the panel's chunk (0: k order)
  W4a8PairFn pair = nullptr;  // two rows of x over half a full tile (AVX-512), or none
};

W4a8Path select_w4a8(const W4Weights& w) {
  const bool zeros = w.zero != nullptr;
#if SK_KERNELS_X86
  const int level = selected_isa_level();
  if (level >= kIsaAvx512) {
    const W4a8Avx512Fns f = level >= kIsaAvx512Vnni ? w4a8_avx512_fns<true>(w.group, zeros, w.scale_f16)
                                                    : w4a8_avx512_fns<false>(w.group, zeros, w.scale_f16);
    return {f.tile, 16, 128, f.pair};
  }
  if (level == kIsaAvx2) {
    return {w.group == 32 ? w4a8_avx2_for<2>(zeros, w.scale_f16) : w4a8_avx2_for<1>(zeros, w.scale_f16), 8, 64};
  }
#endif
  return {w4a8_tile_scalar, 8, 0};
}

// Packed rows of x live on the stack like the GEMM driver's panel: blocks of up to kMBlock rows,
// fewer when K is long.
constexpr int64_t kW4PanelBytes = gemm::kPanelBytes;

void gemm_w4a8(const float* x, int64_t sx, const W4Weights& w, float* y, int64_t sy, int64_t m, int64_t n, int64_t k) {
  const W4a8Path path = select_w4a8(w);
  // Whole AVX-512 chunks per row, plus a step of 128 when the row would be a multiple of 4 KiB
  // (the rows of a block would share L1 sets).
  int64_t ld = (k + 127) / 128 * 128;
  if (ld % 4096 == 0) ld += 128;
  const int64_t rows = std::clamp<int64_t>(kW4PanelBytes / ld, 1, gemm::kMBlock);
  alignas(64) int8_t panel[kW4PanelBytes];
  int32_t xsum[kW4PanelBytes / 32];  // rows * K / G <= rows * ld / 32
  float xs[gemm::kMBlock];
  for (int64_t m0 = 0; m0 < m; m0 += rows) {
    const int64_t mb = std::min(rows, m - m0);
    for (int64_t i = 0; i < mb; ++i) {
      pack_w4a8_row(x + (m0 + i) * sx, k, w.group, path.chunk, panel + i * ld, ld, xsum + i * w.groups, xs + i);
    }
    // Each tile of weight rows takes every row of the block while its weights are in L1: full
    // tiles two rows of x at a time where the path has a pair tile.
    for (int64_t n0 = 0; n0 < n; n0 += path.rows) {
      const int64_t nr = std::min(path.rows, n - n0);
      int64_t i = 0;
      if (path.pair != nullptr && nr == path.rows && mb >= 2) {
        for (int64_t half = 0; half < path.rows; half += 8) {
          for (i = 0; i + 2 <= mb; i += 2) {
            path.pair(panel + i * ld, ld, xsum + i * w.groups, w.groups, xs + i, w, n0 + half, k,
                      y + (m0 + i) * sy + n0 + half, sy);
          }
        }
      }
      for (; i < mb; ++i) {
        path.tile(panel + i * ld, xsum + i * w.groups, xs[i], w, n0, nr, k, y + (m0 + i) * sy + n0);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// matmul.w4: matmul.f32 on the dequantised weights

using W4TileFn = void (*)(const float* x, const W4Weights& w, int64_t n, int64_t nrows, int64_t k, float* y);

// matmul.f32's scalar numerics: 8 lanes, lane l takes k = l (mod 8), products and sums rounded
// apart, then the lane tree.
void w4_tile_scalar(const float* x, const W4Weights& w, int64_t n, int64_t nrows, int64_t k, float* y) {
  for (int64_t j = 0; j < nrows; ++j) {
    float acc[8] = {};
    for (int64_t i = 0; i < k; ++i) {
      const int64_t g = i / w.group;
      const float wv = w.s(g, n + j) * static_cast<float>(w.q(n + j, i) - w.z(g, n + j));
      const float prod = x[i] * wv;
      acc[i % 8] = acc[i % 8] + prod;
    }
    y[j] = simd::hsum_lanes(acc, 8);
  }
}

#if SK_KERNELS_X86
// 4 rows per tile: 4 sums, 4 scales and 4 zero points stay in registers across a group.
template <bool kZeros>
SK_TARGET_AVX2_F16C void w4_tile_avx2(const float* x, const W4Weights& w, int64_t n, int64_t nrows,
                                      int64_t /*k: groups * group*/, float* y) {
  constexpr int kRows = 4;
  const uint8_t* rows[kRows];
  for (int64_t j = 0; j < kRows; ++j) rows[j] = w.row_base(n + std::min<int64_t>(j, nrows - 1));
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i low4 = _mm256_set1_epi32(0xF);
  __m256 acc[kRows];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int64_t g = 0; g < w.groups; ++g) {
    __m256 s[kRows];
    __m256i z[kRows];
    for (int j = 0; j < kRows; ++j) {
      const int64_t r = n + std::min<int64_t>(j, nrows - 1);
      s[j] = _mm256_set1_ps(w.s(g, r));
      z[j] = _mm256_set1_epi32(kZeros ? *w.zero_at(g, r) : 8);
    }
    for (int64_t i = g * w.group; i < (g + 1) * w.group; i += 8) {
      const __m256 xv = _mm256_loadu_ps(x + i);
#pragma GCC unroll 4
      for (int j = 0; j < kRows; ++j) {
        uint32_t packed;
        std::memcpy(&packed, rows[j] + w.step_offset(i / 2), 4);
        // 8 nibbles in k order, minus the zero point, exactly; then the one rounding of s * (q - z).
        const __m256i q =
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(packed)), shifts), low4);
        const __m256 wv = _mm256_mul_ps(s[j], _mm256_cvtepi32_ps(_mm256_sub_epi32(q, z[j])));
        acc[j] = _mm256_fmadd_ps(xv, wv, acc[j]);
      }
    }
  }
  for (int64_t j = 0; j < nrows; ++j) y[j] = simd::hsum8(acc[j]);
}

template <bool kZeros>
SK_TARGET_AVX512_F16C void w4_tile_avx512(const float* x, const W4Weights& w, int64_t n, int64_t nrows,
                                          int64_t /*k: groups * group*/, float* y) {
  constexpr int kRows = 8;
  const uint8_t* rows[kRows];
  for (int64_t j = 0; j < kRows; ++j) rows[j] = w.row_base(n + std::min<int64_t>(j, nrows - 1));
  const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  const __m512i low4 = _mm512_set1_epi32(0xF);
  __m512 acc[kRows];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int64_t g = 0; g < w.groups; ++g) {
    __m512 s[kRows];
    __m512i z[kRows];
    for (int j = 0; j < kRows; ++j) {
      const int64_t r = n + std::min<int64_t>(j, nrows - 1);
      s[j] = _mm512_set1_ps(w.s(g, r));
      z[j] = _mm512_set1_epi32(kZeros ? *w.zero_at(g, r) : 8);
    }
    for (int64_t i = g * w.group; i < (g + 1) * w.group; i += 16) {
      const __m512 xv = _mm512_loadu_ps(x + i);
#pragma GCC unroll 8
      for (int j = 0; j < kRows; ++j) {
        // 16 nibbles: the low 32 bits of the 8 bytes feed lanes 0-7, the high 32 bits lanes 8-15.
        const __m512i both =
            _mm512_castsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows[j] + w.step_offset(i / 2))));
        const __m512i q = _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(pick, both), shifts), low4);
        const __m512 wv = _mm512_mul_ps(s[j], _mm512_cvtepi32_ps(_mm512_sub_epi32(q, z[j])));
        acc[j] = _mm512_fmadd_ps(xv, wv, acc[j]);
      }
    }
  }
  for (int64_t j = 0; j < nrows; ++j) y[j] = simd::hsum16(acc[j]);
}
#endif  // SK_KERNELS_X86

struct W4Path {
  W4TileFn tile;
  int64_t rows;
};

W4Path select_w4(const W4Weights& w) {
  const bool zeros = w.zero != nullptr;
#if SK_KERNELS_X86
  switch (current_isa_level()) {
    case kIsaAvx512:
      return {zeros ? w4_tile_avx512<true> : w4_tile_avx512<false>, 8};
    case kIsaAvx2:
      return {zeros ? w4_tile_avx2<true> : w4_tile_avx2<false>, 4};
    default:
      break;
  }
#endif
  return {w4_tile_scalar, 8};
}

void gemm_w4(const float* x, int64_t sx, const W4Weights& w, float* y, int64_t sy, int64_t m, int64_t n, int64_t k) {
  const W4Path path = select_w4(w);
  for (int64_t n0 = 0; n0 < n; n0 += path.rows) {
    const int64_t nr = std::min(path.rows, n - n0);
    for (int64_t i = 0; i < m; ++i) path.tile(x + i * sx, w, n0, nr, k, y + i * sy + n0);
  }
}

// ---------------------------------------------------------------------------------------------
// Plans

struct Plan {
  Walk rows;  // operands: 0 = x, 1 = out
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  const float* x = nullptr;
  float* out = nullptr;
  W4Weights w;  // the whole tensor's view (row 0)
  const sk_tensor_arg* w_arg = nullptr;
  const sk_tensor_arg* scale_arg = nullptr;
  const sk_tensor_arg* zero_arg = nullptr;
};

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

bool plan(const sk_kernel_args* args, bool int8, Plan* p, ErrorSink err) {
  const char* name = int8 ? kW4a8Name : kW4Name;
  if (args == nullptr || (args->num_inputs != 3 && args->num_inputs != 4)) {
    return invalid(err, "%s: takes 3 or 4 inputs (x, w, w_scale[, w_zero]), got %d", name,
                   args != nullptr ? args->num_inputs : -1);
  }
  if (!check_arity(args, name, args->num_inputs, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& s = args->inputs[2];
  const sk_tensor_arg& out = args->outputs[0];
  const bool zeros = args->num_inputs == 4;
  if (!check_tensor(x, name, "x", SK_DTYPE_F32, 1, err) || !check_tensor(w, name, "w", SK_DTYPE_I8, 2, err) ||
      !check_tensor(out, name, "out", SK_DTYPE_F32, 1, err)) {
    return false;
  }
  if (s.dtype != SK_DTYPE_F32 && !check_tensor(s, name, "w_scale", SK_DTYPE_F16, 2, err)) return false;
  if (s.dtype == SK_DTYPE_F32 && !check_tensor(s, name, "w_scale", SK_DTYPE_F32, 2, err)) return false;
  if (zeros && !check_tensor(args->inputs[3], name, "w_zero", SK_DTYPE_I8, 2, err)) return false;
  char s1[96];
  char s2[96];
  const int64_t k = x.shape[x.rank - 1];
  const bool tiled = w.rank == 4;
  const int64_t steps = (k + kTileStepK - 1) / kTileStepK;
  if (tiled) {
    // [N / 16, ceil(K / 128), 16, 64], dense: tile t's step s holds 64 bytes of each of its rows.
    if (w.shape[1] != steps || w.shape[2] != kTileRows || w.shape[3] != kTileRowBytes || !sk_tensor_is_contiguous(&w)) {
      return invalid(
          err, "%s: tiled w shape %s is not a dense [N / 16, %lld, 16, 64] (ceil(K / 128) steps) for x shape %s", name,
          format_shape(w, s1, sizeof s1), static_cast<long long>(steps), format_shape(x, s2, sizeof s2));
    }
  } else if (w.rank != 2 || w.shape[1] * 2 != k) {
    return invalid(err, "%s: w shape %s is not [N, %lld] (two 4-bit weights per byte) for x shape %s", name,
                   format_shape(w, s1, sizeof s1), static_cast<long long>(k / 2), format_shape(x, s2, sizeof s2));
  }
  const int64_t n = tiled ? w.shape[0] * kTileRows : w.shape[0];
  // Rows: [K / G, N]; tiled: [N / 16, K / G, 16], dense. The group count is the same dimension.
  const int gd = tiled ? 1 : 0;
  const bool scale_dims =
      tiled ? s.rank == 3 && s.shape[0] == w.shape[0] && s.shape[2] == kTileRows : s.rank == 2 && s.shape[1] == n;
  if (!scale_dims || (k > 0 && (s.shape[gd] == 0 || k % s.shape[gd] != 0)) || (k == 0 && s.shape[gd] != 0) ||
      (tiled && !sk_tensor_is_contiguous(&s))) {
    return invalid(err, "%s: w_scale shape %s is not %s for K = %lld, N = %lld", name, format_shape(s, s1, sizeof s1),
                   tiled ? "a dense [N / 16, K / G, 16] (tiled w)" : "[K / G, N]", static_cast<long long>(k),
                   static_cast<long long>(n));
  }
  const int64_t group = k > 0 ? k / s.shape[gd] : 32;
  if (!is_pow2(group) || group < 32) {
    return invalid(err, "%s: group size G = K / (the w_scale groups %lld) = %lld must be a power of two >= 32", name,
                   static_cast<long long>(s.shape[gd]), static_cast<long long>(group));
  }
  if (zeros && !same_shape(args->inputs[3], s)) {
    return invalid(err, "%s: w_zero shape %s differs from w_scale shape %s", name,
                   format_shape(args->inputs[3], s1, sizeof s1), format_shape(s, s2, sizeof s2));
  }
  if (!last_dim_contiguous(s) || (zeros && !last_dim_contiguous(args->inputs[3])) ||
      (tiled && zeros && !sk_tensor_is_contiguous(&args->inputs[3]))) {
    return invalid(err, "%s: the last dimension of w_scale and w_zero must have stride 1%s", name,
                   tiled ? " (and both be dense with tiled w)" : "");
  }
  if (int8 && !check_w8_k(k, name, "x", err)) return false;
  // The row walk of x and out: w checked as [N, K] with its real strides (tiled: as a dense one).
  sk_tensor_arg w_as_k = w;
  w_as_k.rank = 2;
  w_as_k.shape[0] = n;
  w_as_k.shape[1] = k;
  if (tiled) {
    w_as_k.stride[0] = k;
    w_as_k.stride[1] = 1;
  }
  if (!plan_linear_rows(x, w_as_k, out, name, "x", &p->rows, err)) return false;
  p->m = p->rows.numel;
  p->k = k;
  p->n = n;
  p->x = static_cast<const float*>(x.data);
  p->out = static_cast<float*>(out.data);
  p->w.w = static_cast<const uint8_t*>(w.data);
  p->w.tiled = tiled;
  p->w.sw = tiled ? steps * kTileStepBytes : w.stride[0];
  p->w.scale = s.data;
  p->w.scale_f16 = s.dtype == SK_DTYPE_F16;
  p->w.ss = tiled ? s.shape[1] * kTileRows : s.stride[0];
  p->w.zero = zeros ? static_cast<const int8_t*>(args->inputs[3].data) : nullptr;
  p->w.sz = zeros ? (tiled ? p->w.ss : args->inputs[3].stride[0]) : 0;
  p->w.group = group;
  p->w.groups = k / group;
  p->w_arg = &w;
  p->scale_arg = &s;
  p->zero_arg = zeros ? &args->inputs[3] : nullptr;
  return true;
}

// This core's columns [r.begin, r.end) of the weights, scales and zero points.
W4Weights core_view(const W4Weights& w, sk_range r) {
  W4Weights v = w;  // r.begin starts a tile (kNSplitAlign)
  v.w = w.row_base(r.begin);
  v.scale = w.scale_at(0, r.begin);
  if (w.zero != nullptr) v.zero = w.zero_at(0, r.begin);
  return v;
}

int32_t run(const sk_kernel_args* args, const sk_core_ctx* core, bool int8) {
  const char* name = int8 ? kW4a8Name : kW4Name;
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, name, err) || !plan(args, int8, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end) return SK_OK;
  if (p.k == 0) {
    zero_linear_rows(p.rows, p.out, r);
    return SK_OK;
  }
  const W4Weights w = core_view(p.w, r);
  const int64_t sx = p.rows.inner_stride(0);
  const int64_t sy = p.rows.inner_stride(1);
  for_each_run(p.rows, 0, p.m, [&](const int64_t* off, int64_t len) {
    if (int8) {
      gemm_w4a8(p.x + off[0], sx, w, p.out + off[1] + r.begin, sy, len, r.end - r.begin, p.k);
    } else {
      gemm_w4(p.x + off[0], sx, w, p.out + off[1] + r.begin, sy, len, r.end - r.begin, p.k);
    }
  });
  return SK_OK;
}

int32_t prologue(const sk_kernel_args* args, const sk_core_ctx* core, bool int8) {
  const char* name = int8 ? kW4a8Name : kW4Name;
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, name, err) || !plan(args, int8, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end || p.k == 0) return SK_OK;
  if (p.w.tiled) {  // the core's tiles are one block
    const int64_t tiles = (r.end - r.begin + kTileRows - 1) / kTileRows;
    prefetch_weight_slice(p.w.row_base(r.begin), 0, 1, tiles * p.w.sw, core);
  } else {
    prefetch_weight_slice(p.w.w + r.begin * p.w.sw, p.w.sw, r.end - r.begin, p.k / 2, core);
  }
  return SK_OK;
}

// The byte range of columns [r.begin, r.end) of every row of a [K / G, N] tensor: one range from
// the first row's first column to the last row's last (conservative for reads).
void add_group_columns(RangeList& list, int32_t operand, const sk_tensor_arg& t, sk_range r) {
  if (t.shape[0] == 0) return;
  const int64_t elem = sk_dtype_size(t.dtype);
  const int64_t last_row = (t.shape[0] - 1) * t.stride[0];  // element offset of the last group's row
  const int64_t lo = std::min<int64_t>(0, last_row) + r.begin;
  const int64_t hi = std::max<int64_t>(0, last_row) + r.end;
  list.add(operand, SK_ACCESS_READ, lo * elem, hi * elem);
}

int32_t access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
               int32_t capacity, bool int8) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, int8, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.n, core_id, num_cores, kNSplitAlign);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end || p.m == 0) return list.finish();
  const int32_t out_op = args->num_inputs;
  if (p.k > 0) {
    list.add_walk(p.rows, 0, kOpX, SK_ACCESS_READ, 0, p.rows.numel, p.k, sizeof(float));
    if (p.w.tiled) {  // dense tiles [t0, t1) of w, w_scale and w_zero
      const int64_t t0 = r.begin / kTileRows;
      const int64_t t1 = (r.end + kTileRows - 1) / kTileRows;
      list.add(kOpW, SK_ACCESS_READ, t0 * p.w.sw, t1 * p.w.sw);
      const int64_t se = sk_dtype_size(p.scale_arg->dtype);
      list.add(kOpScale, SK_ACCESS_READ, t0 * p.w.ss * se, t1 * p.w.ss * se);
      if (p.zero_arg != nullptr) list.add(kOpZero, SK_ACCESS_READ, t0 * p.w.sz, t1 * p.w.sz);
    } else {
      const int64_t first = r.begin * p.w.sw;
      const int64_t last = (r.end - 1) * p.w.sw;
      list.add(kOpW, SK_ACCESS_READ, std::min(first, last), std::max(first, last) + p.k / 2);
      add_group_columns(list, kOpScale, *p.scale_arg, r);
      if (p.zero_arg != nullptr) add_group_columns(list, kOpZero, *p.zero_arg, r);
    }
  }
  const int64_t sy = p.rows.inner_stride(1);
  for_each_run(p.rows, 0, p.rows.numel, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t row = off[1] + i * sy;
      list.add(out_op, SK_ACCESS_WRITE, (row + r.begin) * 4, (row + r.end) * 4);
    }
  });
  return list.finish();
}

}  // namespace

int32_t matmul_w4a8_dyn_run(const sk_kernel_args* args, const sk_core_ctx* core) { return run(args, core, true); }
int32_t matmul_w4a8_dyn_prologue(const sk_kernel_args* args, const sk_core_ctx* core) {
  return prologue(args, core, true);
}
int32_t matmul_w4a8_dyn_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                               int32_t capacity) {
  return access(args, core_id, num_cores, ranges, capacity, true);
}

int32_t matmul_w4_run(const sk_kernel_args* args, const sk_core_ctx* core) { return run(args, core, false); }
int32_t matmul_w4_prologue(const sk_kernel_args* args, const sk_core_ctx* core) { return prologue(args, core, false); }
int32_t matmul_w4_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                         int32_t capacity) {
  return access(args, core_id, num_cores, ranges, capacity, false);
}

}  // namespace sk::kernels
