// batched_matmul.f32: y[h] = x[h] · w[h]ᵀ per batch entry (head) h, with
//   x [Hb, M, K], w [Hb, N, K] (each w[h] in the PyTorch Linear layout)  ->  y [Hb, M, N].
// The MLA absorbed projections are per-head matmuls of this shape: q_nope [H, T, Dnope] with
// W_UK [H, R, Dnope] gives q_latent [H, T, R], and the latent output [H, T, R] with
// W_UV [H, Dv, R] gives the per-head values [H, T, Dv].
//
// Cores split the (h, n) rows of w in chunks of 8 rows, so each core streams its own slice of
// the weights (decode is weight-bandwidth bound) and writes columns of y no other core writes.
//
// Each head is one call of matmul.f32's driver (gemm_f32, gemv_kernels.h), so every y[h][m][n]
// is the dot product matmul.f32 computes for that x row and w row: it depends on (x row, w row,
// K, ISA) only, not on M, N, Hb, the core split or alignment.
#include <algorithm>

#include "kernels/gemv_kernels.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "batched_matmul.f32";
enum { kOpX = 0, kOpW = 1, kOpOut = 2 };

constexpr int64_t kRowAlign = 8;  // split granularity of the (h, n) rows of w

struct Plan {
  int64_t hb = 0;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t xs[2] = {};
  int64_t ws[2] = {};
  int64_t ys[2] = {};
  const float* x = nullptr;
  const float* w = nullptr;
  float* y = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 2, 1, err)) return false;
  const sk_tensor_arg& x = args->inputs[kOpX];
  const sk_tensor_arg& w = args->inputs[kOpW];
  const sk_tensor_arg& y = args->outputs[0];
  if (!check_tensor(x, kName, "x", SK_DTYPE_F32, 3, err) || !check_tensor(w, kName, "w", SK_DTYPE_F32, 3, err) ||
      !check_tensor(y, kName, "out", SK_DTYPE_F32, 3, err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  char s3[96];
  if (x.rank != 3 || w.rank != 3 || y.rank != 3 || w.shape[0] != x.shape[0] || w.shape[2] != x.shape[2] ||
      y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1] || y.shape[2] != w.shape[1]) {
    return invalid(err, "%s: shapes x %s, w %s, out %s are not [Hb, M, K], [Hb, N, K], [Hb, M, N]", kName,
                   format_shape(x, s1, sizeof s1), format_shape(w, s2, sizeof s2), format_shape(y, s3, sizeof s3));
  }
  if (!last_dim_contiguous(x) || !last_dim_contiguous(w) || !last_dim_contiguous(y)) {
    return invalid(err, "%s: the last dimension of x, w and out must have stride 1", kName);
  }
  // Every core reads all of its heads' x rows while others write their columns of out.
  if (views_overlap(x, y) || views_overlap(w, y)) {
    return invalid(err, "%s: out must not overlap x or w", kName);
  }
  p->hb = x.shape[0];
  p->m = x.shape[1];
  p->k = x.shape[2];
  p->n = w.shape[1];
  for (int d = 0; d < 2; ++d) {
    p->xs[d] = x.stride[d];
    p->ws[d] = w.stride[d];
    p->ys[d] = y.stride[d];
  }
  p->x = static_cast<const float*>(x.data);
  p->w = static_cast<const float*>(w.data);
  p->y = static_cast<float*>(y.data);
  return true;
}

// Calls fn(h, n_begin, n_end) for the (h, n) rows of w in [begin, end), one call per head.
template <class Fn>
void for_each_head(const Plan& p, sk_range r, Fn&& fn) {
  for (int64_t i = r.begin; i < r.end;) {
    const int64_t h = i / p.n;
    const int64_t n0 = i % p.n;
    const int64_t n1 = std::min(p.n, n0 + (r.end - i));
    fn(h, n0, n1);
    i += n1 - n0;
  }
}

}  // namespace

int32_t batched_matmul_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  if (p.m == 0) return SK_OK;
  const sk_range r = sk_split_range(p.hb * p.n, core->core_id, core->num_cores, kRowAlign);
  for_each_head(p, r, [&](int64_t h, int64_t n0, int64_t n1) {
    float* y = p.y + h * p.ys[0] + n0;
    if (p.k == 0) {
      // Empty dot products; x and w may then have no storage at all, so do not touch them.
      for (int64_t i = 0; i < p.m; ++i) std::fill(y + i * p.ys[1], y + i * p.ys[1] + (n1 - n0), 0.0f);
      return;
    }
    gemm_f32(p.x + h * p.xs[0], p.xs[1], p.w + h * p.ws[0] + n0 * p.ws[1], p.ws[1], y, p.ys[1], p.m, n1 - n0, p.k);
  });
  return SK_OK;
}

int32_t batched_matmul_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                  sk_access_range* ranges, int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  RangeList list(ranges, capacity);
  if (p.m == 0) return list.finish();
  const sk_range r = sk_split_range(p.hb * p.n, core_id, num_cores, kRowAlign);
  constexpr int64_t kF = sizeof(float);
  // Inputs first, then outputs, as one ordered list per operand kind (adjacent ranges merge).
  if (p.k > 0) {
    for_each_head(p, r, [&](int64_t h, int64_t, int64_t) {
      for (int64_t i = 0; i < p.m; ++i) {
        const int64_t row = h * p.xs[0] + i * p.xs[1];
        list.add(kOpX, SK_ACCESS_READ, row * kF, (row + p.k) * kF);
      }
    });
    for_each_head(p, r, [&](int64_t h, int64_t n0, int64_t n1) {
      const int64_t first = h * p.ws[0] + n0 * p.ws[1];
      const int64_t last = h * p.ws[0] + (n1 - 1) * p.ws[1];
      list.add(kOpW, SK_ACCESS_READ, std::min(first, last) * kF, (std::max(first, last) + p.k) * kF);
    });
  }
  for_each_head(p, r, [&](int64_t h, int64_t n0, int64_t n1) {
    for (int64_t i = 0; i < p.m; ++i) {
      const int64_t row = h * p.ys[0] + i * p.ys[1];
      list.add(kOpOut, SK_ACCESS_WRITE, (row + n0) * kF, (row + n1) * kF);
    }
  });
  return list.finish();
}

}  // namespace sk::kernels
