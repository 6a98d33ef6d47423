// matmul.f16: y[..., N] = x[..., K] · wᵀ with f32 x and IEEE half-precision w [N, K] (the
// PyTorch Linear layout of an F16 checkpoint), f32 accumulation. Cores split N in chunks of
// kNSplitAlign rows of w, like matmul.f32 and matmul.bf16; the loops are the shared GEMM driver's
// (matmul_driver.h) and the tiles matmul_half.h's, which widen each weight vector after its load:
//   scalar: a bit-exact software conversion;  avx2: VCVTPH2PS (F16C);  avx512: VCVTPH2PS zmm.
// f16 -> f32 is exact, so every y element is matmul.f32's dot product over the widened weights,
// bit for bit at each level (the direct tests check it).
//
// AVX-512 FP16 arithmetic is not used: its products and sums are rounded to half precision (11
// significant bits), too coarse for dot products over thousands of K, and its conversion to f32
// computes what VCVTPH2PS does. So every AVX-512 level runs the avx512 tiles, and a CPU with
// AVX512_FP16 gives the bits of any other AVX-512 CPU.
#include <algorithm>

#include "kernels/cpu_isa.h"
#include "kernels/gemv_kernels.h"
#include "kernels/half_weight_linear.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/matmul_driver.h"
#include "kernels/matmul_half.h"

namespace sk::kernels {
namespace {

using F16Rows = gemm::F32ActivationRows<uint16_t, gemm::HalfTiles>;

}  // namespace

void gemm_f16(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
              int64_t k) {
  gemm::run(F16Rows{gemm::half_tiles<gemm::F16Format>(), x, sx}, w, sw, y, sy, m, n, k);
}

namespace {
constexpr HalfWeightLinear kF16{"matmul.f16", SK_DTYPE_F16, gemm_f16};
}  // namespace

int32_t matmul_f16_run(const sk_kernel_args* args, const sk_core_ctx* core) { return kF16.run(args, core); }

int32_t matmul_f16_prologue(const sk_kernel_args* args, const sk_core_ctx* core) { return kF16.prologue(args, core); }

int32_t matmul_f16_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                          int32_t capacity) {
  return kF16.access(args, core_id, num_cores, ranges, capacity);
}

}  // namespace sk::kernels
