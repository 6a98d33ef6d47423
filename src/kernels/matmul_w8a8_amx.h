// matmul.w8a8 and matmul.w8a8_dyn at the amx level: the exact int32 sums on AMX tiles (TDPBSSD).
//
//   // as gemm_w8a8 (gemv_kernels.h): the same bits, whatever the level
//   gemm_w8a8_amx(rows, w, sw, w_scale, sws, y, sy, M, N, K);
//
// Defined on x86 builds only, and only called where selected_isa_level() is kIsaAmx (cpu_isa.h).
#ifndef SUPERKERNEL_KERNELS_MATMUL_W8A8_AMX_H_
#define SUPERKERNEL_KERNELS_MATMUL_W8A8_AMX_H_

#include <cstdint>

#include "kernels/gemv_kernels.h"

namespace sk::kernels {

void gemm_w8a8_amx(const W8Rows& rows, const int8_t* w, int64_t sw, const float* w_scale, int64_t sws, float* y,
                   int64_t sy, int64_t m, int64_t n, int64_t k);

}  // namespace sk::kernels

#endif  // SUPERKERNEL_KERNELS_MATMUL_W8A8_AMX_H_
