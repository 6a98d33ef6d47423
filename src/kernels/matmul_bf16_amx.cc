// matmul.bf16 on AMX tiles (level amx): the AMX driver (matmul_amx.h) with TDPBF16PS.
//
// Numerics: x is rounded to bf16 as at avx512_bf16 (VCVTNE2PS2BF16, nearest even), then every y
// element is one chain of TDPBF16PS steps over K, 32 k (16 pairs) a step in increasing k, from a
// zero accumulator, K padded with zeros to a multiple of 32 (zero products). What one step
// computes (its order and rounding inside the instruction, denormals flushed) is the hardware's
// and the same for every element of every tile, so results do not depend on M, N, the core split
// or which tiles advance together: a prompt's rows give the bits of the same rows decoded alone.
// They differ from avx512_bf16's (one accumulator per element instead of 16 lanes and a tree).
#include "kernels/matmul_bf16_amx.h"

#include "kernels/masked_io.h"
#include "kernels/matmul_amx.h"

#if SK_KERNELS_X86

namespace sk::kernels {
namespace {

struct Bf16Format {
  using W = uint16_t;
  static constexpr bool kInt8 = false;
  const float* x;
  int64_t sx;

  // Pair p = (k0 + 2p, k0 + 2p + 1) of a step: the even element in the low half, as TDPBF16PS
  // reads a pair.
  SK_TARGET_AMX void pack(int64_t m0, int64_t rows, int64_t k, uint32_t* xp, int64_t xp_block) const {
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x + (m0 + r) * sx;
      uint32_t* dst = amx::packed_row(xp, xp_block, r);
      for (int64_t k0 = 0; k0 < k; k0 += 32) {
        const int64_t lo_n = std::clamp<int64_t>(k - k0, 0, 16);
        const int64_t hi_n = std::clamp<int64_t>(k - k0 - 16, 0, 16);
        const __m512 lo = simd::masked_load_ps(simd::mask16(lo_n), row + k0);
        const __m512 hi = simd::masked_load_ps(simd::mask16(hi_n), row + std::min(k0 + 16, k));
        amx::scatter_groups(dst + (k0 / 2) * amx::kTile, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
      }
    }
  }

  SK_TARGET_AMX void finish(const uint32_t* c, int64_t /*row_in_group*/, int64_t /*m*/, int64_t /*n0*/, int64_t count,
                            float* y_row) const {
    for (int64_t i = 0; i < count; ++i) std::memcpy(&y_row[i], &c[i * amx::kTile], sizeof(float));
  }
};

}  // namespace

SK_TARGET_AMX void gemm_bf16_amx(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy,
                                 int64_t m, int64_t n, int64_t k) {
  amx::gemm(Bf16Format{x, sx}, w, sw, y, sy, m, n, k);
}

}  // namespace sk::kernels

#endif  // SK_KERNELS_X86: the callers take this path only there
