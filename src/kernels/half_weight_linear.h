// The entry points shared by the linear kernels whose weights are 16-bit floats (matmul.bf16,
// matmul.f16): y[..., N] = x[..., K] · wᵀ with f32 x and out, w [N, K] of one 16-bit dtype. They
// differ only in the weight dtype and the GEMM that widens it; checking the operands, the split of
// N between cores, the prologue and the access ranges are the same, and live here once.
//
//   constexpr HalfWeightLinear kF16{"matmul.f16", SK_DTYPE_F16, gemm_f16};
//   int32_t matmul_f16_run(const sk_kernel_args* a, const sk_core_ctx* c) { return kF16.run(a, c); }
#ifndef SUPERKERNEL_KERNELS_HALF_WEIGHT_LINEAR_H_
#define SUPERKERNEL_KERNELS_HALF_WEIGHT_LINEAR_H_

#include <cstdint>

#include "kernels/gemv_kernels.h"
#include "kernels/kernel_util.h"

namespace sk::kernels {

struct HalfWeightLinear {
  using Gemm = void (*)(const float* x, int64_t sx, const uint16_t* w, int64_t sw, float* y, int64_t sy, int64_t m,
                        int64_t n, int64_t k);
  const char* name;
  int32_t w_dtype;  // SK_DTYPE_BF16 or SK_DTYPE_F16
  Gemm gemm;

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
  enum { kOpX = 0, kOpW = 1, kOpOut = 2 };

  bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) const {
    if (!check_arity(args, name, 2, 1, err)) return false;
    const sk_tensor_arg& x = args->inputs[0];
    const sk_tensor_arg& w = args->inputs[1];
    const sk_tensor_arg& out = args->outputs[0];
    if (!check_tensor(x, name, "x", SK_DTYPE_F32, 1, err) || !check_tensor(w, name, "w", w_dtype, 2, err) ||
        !check_tensor(out, name, "out", SK_DTYPE_F32, 1, err) ||
        !plan_linear_rows(x, w, out, name, "x", &p->rows, err)) {
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

  int32_t run(const sk_kernel_args* args, const sk_core_ctx* core) const {
    const ErrorSink err = sink_of(core);
    Plan p;
    if (!check_core(core, name, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
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
      gemm(p.x + off[0], sx, p.w + r.begin * p.w_stride, p.w_stride, p.out + off[1] + r.begin, sy, len, r.end - r.begin,
           p.k);
    });
    return SK_OK;
  }

  // Warms the first lines of the weight rows this core streams first; touches weights only.
  int32_t prologue(const sk_kernel_args* args, const sk_core_ctx* core) const {
    const ErrorSink err = sink_of(core);
    Plan p;
    if (!check_core(core, name, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
    const sk_range r = sk_split_range(p.n, core->core_id, core->num_cores, kNSplitAlign);
    if (r.begin >= r.end || p.k == 0) return SK_OK;
    prefetch_weight_slice(p.w + r.begin * p.w_stride, p.w_stride * 2, r.end - r.begin, p.k * 2, core);
    return SK_OK;
  }

  int32_t access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                 int32_t capacity) const {
    Plan p;
    if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) return -SK_ERR_INVALID_ARGUMENT;
    RangeList list(ranges, capacity);
    add_linear_access(list, p.rows, p.k, sizeof(float), kOpX, p.w_stride, 2, kOpW, kOpOut,
                      sk_split_range(p.n, core_id, num_cores, kNSplitAlign));
    return list.finish();
  }
};

}  // namespace sk::kernels

#endif  // SUPERKERNEL_KERNELS_HALF_WEIGHT_LINEAR_H_
