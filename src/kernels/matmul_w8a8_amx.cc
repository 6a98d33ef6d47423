// matmul.w8a8 and matmul.w8a8_dyn on AMX tiles (level amx): the AMX driver (matmul_amx.h) with
// TDPBSSD, int8 weights by int8 activations into int32.
//
// The sums are exact (|sum| <= K * 128 * 127 inside int32 for K <= kW8MaxK, and every partial sum
// too), so their order is free and the finish is matmul_w8a8.cc's expression,
//   y[m][n] = float(sum) * (row_scale[m] * w_scale[n]),
// with the rows of q clamped to [-127, 127] (matmul.w8a8) or of x quantised like quantize.i8
// (matmul.w8a8_dyn): every level gives the same bits.
#include "kernels/matmul_w8a8_amx.h"

#include <vector>

#include "kernels/matmul_amx.h"

#if SK_KERNELS_X86

namespace sk::kernels {
namespace {

struct Int8Format {
  using W = int8_t;
  static constexpr bool kInt8 = true;
  const W8Rows& rows;
  const float* w_scale;
  int64_t sws;
  float* row_scale;  // amx::kGroupBlocks * amx::kTile entries: the packed group's row scales

  // Group g of a row: q[4g .. 4g + 3], the lowest k in the low byte, as TDPBSSD reads a group.
  SK_TARGET_AMX void pack(int64_t m0, int64_t count, int64_t k, uint32_t* xp, int64_t xp_block) const {
    thread_local std::vector<int8_t> q;
    const int64_t k_pad = (k + amx::kRowBytes - 1) / amx::kRowBytes * amx::kRowBytes;
    q.assign(static_cast<size_t>(k_pad), 0);
    for (int64_t r = 0; r < count; ++r) {
      row_scale[r] = w8_row_q(rows, m0 + r, 0, k, q.data());
      uint32_t* dst = amx::packed_row(xp, xp_block, r);
      for (int64_t k0 = 0; k0 < k; k0 += amx::kRowBytes) {
        amx::scatter_groups(dst + (k0 / 4) * amx::kTile, _mm512_loadu_si512(q.data() + k0));
      }
    }
  }

  SK_TARGET_AMX void finish(const uint32_t* c, int64_t row_in_group, int64_t /*m*/, int64_t n0, int64_t count,
                            float* y_row) const {
    const float rs = row_scale[row_in_group];
    for (int64_t i = 0; i < count; ++i) {
      const auto sum = static_cast<int32_t>(c[i * amx::kTile]);
      y_row[i] = static_cast<float>(sum) * (rs * w_scale[(n0 + i) * sws]);
    }
  }
};

}  // namespace

SK_TARGET_AMX void gemm_w8a8_amx(const W8Rows& rows, const int8_t* w, int64_t sw, const float* w_scale, int64_t sws,
                                 float* y, int64_t sy, int64_t m, int64_t n, int64_t k) {
  float row_scale[amx::kGroupBlocks * amx::kTile];
  amx::gemm(Int8Format{rows, w_scale, sws, row_scale}, w, sw, y, sy, m, n, k);
}

}  // namespace sk::kernels

#endif  // SK_KERNELS_X86: the callers take this path only there
