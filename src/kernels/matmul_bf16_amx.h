// matmul.bf16 at the amx level: the product on AMX tiles (TDPBF16PS).
//
//   // y[m * sy + n] = sum over k of bf16(x[m * sx + k]) * w[n * sw + k], m < M, n < N
//   gemm_bf16_amx(x, sx, w, sw, y, sy, M, N, K);
//
// Defined on x86 builds only, and only called where selected_isa_level() is kIsaAmx (cpu_isa.h:
// the OS granted this process the tile state). See matmul_bf16_amx.cc for the numerics.
#ifndef SUPERKERNEL_KERNELS_MATMUL_BF16_AMX_H_
#define SUPERKERNEL_KERNELS_MATMUL_BF16_AMX_H_

#include <cstdint>

namespace sk::kernels {

void gemm_bf16_amx(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t m,
                   int64_t n, int64_t k);

}  // namespace sk::kernels

#endif  // SUPERKERNEL_KERNELS_MATMUL_BF16_AMX_H_
