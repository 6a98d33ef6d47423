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
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "kernels/matmul_driver.h"
#include "kernels/matmul_half.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "matmul.f16";
enum { kOpX = 0, kOpW = 1, kOpOut = 2 };

using F16Rows = gemm::F32ActivationRows<uint16_t, gemm::HalfTiles>;

struct Plan {
  Walk rows;  // operands: 0 = x, 1 = out
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  int64_t w_stride = 0;
  const float* x = nullptr;
  const uint16_t* w = nullptr;
  float* out = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 2, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 1, err) || !check_tensor(w, kName, "w", SK_DTYPE_F16, 2, err) ||
      !check_tensor(out, kName, "out", SK_DTYPE_F32, 1, err) ||
      !plan_linear_rows(x, w, out, kName, "x", &p->rows, err)) {
    return false;
  }
  p->m = p->rows.numel;
  p->k = x.shape[x.rank - 1];
  p->n = w.shape[0];
  p->w_stride = w.stride[0];
  p->x = static_cast<const float*>(x.data);
  p->w = static_cast<const uint16_t*>(w.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

}  // namespace

void gemm_f16(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t m, int64_t n,
              int64_t k) {
  gemm::run(F16Rows{gemm::half_tiles<gemm::F16Format>(), x, sx}, w, sw, y, sy, m, n, k);
}

int32_t matmul_f16_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end) return SK_OK;
  if (p.k == 0) {
    // Empty dot products; x and w may then have no storage at all.
    zero_linear_rows(p.rows, p.out, r);
    return SK_OK;
  }
  const int64_t sx = p.rows.inner_stride(0);
  const int64_t sy = p.rows.inner_stride(1);
  for_each_run(p.rows, 0, p.m, [&](const int64_t* off, int64_t len) {
    gemm_f16(p.x + off[0], sx, p.w + r.begin * p.w_stride, p.w_stride, p.out + off[1] + r.begin, sy, len,
             r.end - r.begin, p.k);
  });
  return SK_OK;
}

// Warms the first lines of the weight rows this core streams first; touches weights only.
int32_t matmul_f16_prologue(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
  if (r.begin >= r.end || p.k == 0) return SK_OK;
  prefetch_weight_slice(p.w + r.begin * p.w_stride, p.w_stride * 2, r.end - r.begin, p.k * 2, core);
  return SK_OK;
}

int32_t matmul_f16_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                          int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) return -SK_ERR_INVALID_ARGUMENT;
  RangeList list(ranges, capacity);
  add_linear_access(list, p.rows, p.k, sizeof(float), kOpX, p.w_stride, 2, kOpW, kOpOut,
                    sk_split_range(p.n, core_id, num_cores, kNSplitAlign));
  return list.finish();
}

}  // namespace sk::kernels
