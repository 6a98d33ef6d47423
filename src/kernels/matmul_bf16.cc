// matmul.bf16: y[..., N] = x[..., K] · wᵀ with f32 x and bf16 w [N, K] (the PyTorch Linear
// layout), f32 accumulation. Cores split N in chunks of kNSplitAlign rows of w, as matmul.f32
// does: decode is weight-bandwidth bound, and bf16 halves the bytes per weight. The loops are the
// shared GEMM driver's (matmul_driver.h); this file has the bf16-weight tiles and packings.
//
// Numerics, per ISA level (identical bits for identical inputs at one level):
//   scalar, avx2, avx512, avx512_vnni: bf16 -> f32 is exact (a shift), so every y element is
//     the f32 dot product of matmul.f32 over the widened weights: `lanes` (8 / 8 / 16) partial
//     sums, lane l taking k = l (mod lanes) in increasing k (FMA except in scalar), then the
//     fixed tree of simd::hsum_lanes.
//   avx512_bf16: x is rounded to bf16 (nearest even, denormals to zero) once per call and
//     VDPBF16PS accumulates pairs: lane l of 16 takes k = 2l + 1, then 2l (mod 32), each an FMA
//     with denormal inputs read as zero and denormal results flushed, in increasing k, then
//     hsum_lanes (the GEMV on short rows runs those FMAs itself, with the same bits). Rounding x
//     to bf16 costs up to 2^-8 relative per product, an error that grows as sqrt(K): the
//     reference tolerance of this level (reference.h) is wider than matmul.f32's.
//   amx: x rounded as at avx512_bf16, then one chain of TDPBF16PS per element over K in steps of
//     32 (matmul_bf16_amx.cc), with avx512_bf16's reference tolerance.
// Tiles and K blocks only change which dot products advance together, never the operations
// inside one, so results do not depend on M, N, the core split or alignment.
#include <algorithm>
#include <cstring>

#include "kernels/cpu_isa.h"
#include "kernels/gemv_kernels.h"
#include "kernels/half_weight_linear.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/masked_io.h"
#include "kernels/matmul_bf16_amx.h"
#include "kernels/matmul_driver.h"
#include "kernels/matmul_half.h"
#include "kernels/simd.h"

#define SK_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))

namespace sk::kernels {
namespace {

// Tiles over f32 activations (scalar, AVX2, AVX-512 without BF16: matmul_half.h, shared with
// matmul.f16) and over bf16 activations (VDPBF16PS); the x panel holds f32 copies or bf16
// conversions respectively.
using Bf16xTiles = gemm::Tiles<uint16_t, uint16_t, float>;
using Bf16xTileFn = gemm::TileFn<uint16_t, uint16_t, float>;

#if SK_KERNELS_X86
// ---- AVX-512 BF16: x converted to bf16 once per panel, VDPBF16PS on 32 k per step ----

// _mm512_cvtne2ps_pbh(a, b) puts b in the low 16 words and a in the high 16.
SK_TARGET_AVX512_BF16 void pack_bf16_avx512(const float* x, int64_t sx, int64_t mb, int64_t kn, uint16_t* panel,
                                            int64_t ld) {
  for (int64_t m = 0; m < mb; ++m) {
    const float* row = x + m * sx;
    for (int64_t k = 0; k < ld; k += 32) {
      const int64_t lo_n = std::clamp<int64_t>(kn - k, 0, 16);
      const int64_t hi_n = std::clamp<int64_t>(kn - k - 16, 0, 16);
      // Masked-off lanes are neither read nor faulted on, so the row end needs no care.
      const __m512 lo = simd::masked_load_ps(simd::mask16(lo_n), row + std::min(k, kn));
      const __m512 hi = simd::masked_load_ps(simd::mask16(hi_n), row + std::min(k + 16, kn));
      const __m512bh both = _mm512_cvtne2ps_pbh(hi, lo);
      std::memcpy(panel + m * ld + k, &both, sizeof both);
    }
  }
}

// The longest rows (in elements, 2 KiB) that the GEMV tile reads in the FMA form below.
constexpr int64_t kBf16GemvFmaMaxK = 1024;
// MXCSR bits: DAZ (denormal inputs read as zero, bit 6) and FTZ (denormal results flushed, bit 15).
constexpr unsigned kMxcsrDazFtz = 0x8040u;

template <int MR, int NR>
SK_TARGET_AVX512_BF16 void tile_avx512_bf16(const uint16_t* x, int64_t sx, const uint16_t* w, int64_t sw, float* st,
                                            int64_t ld, int64_t kn) {
  // x is zero-padded to a multiple of 32 (gemm::panel_stride).
  gemm::prefetch_next_tile_start<MR, NR>(w, sw);
  __m512 acc[MR][NR];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_load_ps(st + (m * ld + j) * 16);
  }
  int64_t k = 0;
  if (MR == 1 && kn <= kBf16GemvFmaMaxK) {
    // GEMV on short rows: the rows one after another, each one stream of 64-byte lines with an L2
    // prefetch kGemvAheadBytes ahead, and VDPBF16PS spelled out as what it computes per lane:
    //   acc += x[2l + 1] * w[2l + 1] (FMA), then acc += x[2l] * w[2l] (FMA),
    // denormal inputs read as zero and denormal results flushed (MXCSR DAZ and FTZ for the loop),
    // round to nearest even. The odd element of a pair is the high half of its 32-bit word (AND
    // with 0xFFFF0000 widens it), the even one the low half (a shift by 16). Same bits as the
    // VDPBF16PS tiles (MatmulFamily tests: M = 1 rows against the blocks of M > 1, and edge values),
    // and faster on short rows: measured on Zen 4 (1 core, GB/s, 2 KiB rows) 18.0-20.2 with the
    // side-by-side VDPBF16PS tile against 21.5-23.4; one row at a time with VDPBF16PS itself
    // 16.0-18.8. Small Llama bf16 decode, 1 thread: 78-80 -> 87 tokens/s (medians of alternated
    // rounds). Rows of 4 KiB unchanged (medium model), 16 KiB slower (23.9-29.5 -> 16.6-26.0).
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | kMxcsrDazFtz);
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    k = gemm::gemv_rows_one_at_a_time<NR, 32>(w, sw, kn, acc[0],
                                              [&](__m512& a, const uint16_t* wk, int64_t kk) SK_TARGET_AVX512_BF16 {
                                                const __m512i wr = _mm512_loadu_si512(wk);
                                                const __m512i xr = _mm512_loadu_si512(x + kk);
                                                a = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(xr, high)),
                                                                    _mm512_castsi512_ps(_mm512_and_si512(wr, high)), a);
                                                a = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(xr, 16)),
                                                                    _mm512_castsi512_ps(_mm512_slli_epi32(wr, 16)), a);
                                              });
    _mm_setcsr(csr);  // the rest of K (under 32) goes through the masked VDPBF16PS step below
  }
  for (; k + 32 <= kn; k += 32) {
    gemm::prefetch_block_ahead<MR, NR, 32>(w, sw, k);
    __m512bh wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      gemm::prefetch_later_rows<MR, NR>(w + j * sw + k, sw, kn);
      const __m512i raw = _mm512_loadu_si512(w + j * sw + k);
      std::memcpy(&wv[j], &raw, sizeof raw);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i xraw = _mm512_loadu_si512(x + m * sx + k);
      __m512bh xv;
      std::memcpy(&xv, &xraw, sizeof xraw);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_dpbf16_ps(acc[m][j], xv, wv[j]);
    }
  }
  if (k < kn) {
    // Zeroed weights past K: the padded x there is zero too, so those pairs add +0 products.
    const auto mask = static_cast<__mmask32>((uint64_t{1} << (kn - k)) - 1u);
    __m512bh wv[NR];
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const __m512i raw = simd::masked_load_epi16(mask, w + j * sw + k);
      std::memcpy(&wv[j], &raw, sizeof raw);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i xraw = _mm512_loadu_si512(x + m * sx + k);
      __m512bh xv;
      std::memcpy(&xv, &xraw, sizeof xraw);
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_dpbf16_ps(acc[m][j], xv, wv[j]);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) _mm512_store_ps(st + (m * ld + j) * 16, acc[m][j]);
  }
}

Bf16xTileFn tile_avx512_bf16_for(int mr, int nr) {
  constexpr auto make = []<int MR, int NR>() { return tile_avx512_bf16<MR, NR>; };
  if (mr == 4) return gemm::tile_of<Bf16xTileFn, 4>(nr, std::make_integer_sequence<int, 4>(), make);
  if (mr == 2) return gemm::tile_of<Bf16xTileFn, 2>(nr, std::make_integer_sequence<int, 8>(), make);
  return gemm::tile_of<Bf16xTileFn, 1>(nr, std::make_integer_sequence<int, 8>(), make);
}

// K steps of 8192 for the 4 x 4 tiles: 16 rows of bf16 x are 256 KiB, in L2, and each weight row
// is one long stream (measured on Zen 4 at M = 16: 17% faster than steps of 1024).
constexpr Bf16xTiles kAvx512Bf16 = {16, 8, 4, 4, 8192, 2, 8, tile_avx512_bf16_for};
#endif

using F32xRows = gemm::F32ActivationRows<uint16_t, gemm::HalfTiles>;

#if SK_KERNELS_X86
// x rows rounded to bf16 into the panel (once per call for every K the panel holds).
struct Bf16xRows {
  using A = uint16_t;
  using W = uint16_t;
  using S = float;
  const Bf16xTiles& tiles;
  const float* x;
  int64_t sx;
  void pack(int64_t m0, int64_t mb, int64_t k0, int64_t kn, uint16_t* panel, int64_t ld, float* /*row_scale*/) const {
    pack_bf16_avx512(x + m0 * sx + k0, sx, mb, kn, panel, ld);
  }
  void finish(const float* st, int64_t ld, const float* /*row_scale*/, int64_t /*n0*/, int64_t mb, int64_t nb, float* y,
              int64_t sy) const {
    gemm::finish_f32_lanes(st, ld, tiles.lanes, mb, nb, y, sy);
  }
};
#endif

// The tiles of the selected level: VDPBF16PS only at avx512_bf16, so that every AVX-512 machine
// gives the same bits at avx512 and avx512_vnni.
void gemm_rows(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
               int64_t k) {
#if SK_KERNELS_X86
  if (selected_isa_level() == kIsaAmx) {
    gemm_bf16_amx(x, sx, w, sw, y, sy, m, n, k);
    return;
  }
  if (selected_isa_level() == kIsaAvx512Bf16) {
    gemm::run(Bf16xRows{kAvx512Bf16, x, sx}, w, sw, y, sy, m, n, k);
    return;
  }
#endif
  gemm::run(F32xRows{gemm::half_tiles<gemm::Bf16Format>(), x, sx}, w, sw, y, sy, m, n, k);
}

}  // namespace

void gemm_bf16(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
               int64_t k) {
  gemm_rows(x, sx, w, sw, y, sy, m, n, k);
}

namespace {
constexpr HalfWeightLinear kBf16{"matmul.bf16", SK_DTYPE_BF16, gemm_bf16};
}  // namespace

int32_t matmul_bf16_run(const sk_kernel_args* args, const sk_core_ctx* core) { return kBf16.run(args, core); }

int32_t matmul_bf16_prologue(const sk_kernel_args* args, const sk_core_ctx* core) { return kBf16.prologue(args, core); }

int32_t matmul_bf16_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                           int32_t capacity) {
  return kBf16.access(args, core_id, num_cores, ranges, capacity);
}

}  // namespace sk::kernels
