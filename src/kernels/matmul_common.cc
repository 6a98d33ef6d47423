// Argument checks and access ranges shared by the kernels that multiply rows of x[..., K] by
// w[N, K] transposed and split N between cores (matmul.f32, matmul.bf16, matmul.w8a8, matmul.w8a8_dyn).
#include <algorithm>

#include "kernels/gemv_kernels.h"

namespace sk::kernels {

bool plan_linear_rows(const sk_tensor_arg& x, const sk_tensor_arg& w, const sk_tensor_arg& out, const char* kernel,
                      const char* x_what, Walk* rows, ErrorSink err, const sk_tensor_arg* row_scale) {
  char s1[96];
  char s2[96];
  const int64_t k = x.shape[x.rank - 1];
  if (w.rank != 2 || w.shape[1] != k) {
    return invalid(err, "%s: w shape %s is not [N, %lld] for %s shape %s", kernel, format_shape(w, s1, sizeof s1),
                   static_cast<long long>(k), x_what, format_shape(x, s2, sizeof s2));
  }
  const int64_t n = w.shape[0];
  bool out_ok = out.rank == x.rank && out.shape[out.rank - 1] == n;
  for (int d = 0; out_ok && d < x.rank - 1; ++d) out_ok = out.shape[d] == x.shape[d];
  if (!out_ok) {
    return invalid(err, "%s: out shape %s does not match %s shape %s with N = %lld", kernel,
                   format_shape(out, s1, sizeof s1), x_what, format_shape(x, s2, sizeof s2), static_cast<long long>(n));
  }
  if (!last_dim_contiguous(x) || !last_dim_contiguous(w) || !last_dim_contiguous(out)) {
    return invalid(err, "%s: the last dimension of %s, w and out must have stride 1", kernel, x_what);
  }
  // Each core reads all of x while writing its own columns of out: they must not share bytes.
  if (x.data == out.data && sk_tensor_numel(&out) > 0) {
    return invalid(err, "%s: out must not alias %s", kernel, x_what);
  }
  const int lead = x.rank - 1;
  if (row_scale != nullptr) {
    bool scale_ok = row_scale->rank == lead;
    for (int d = 0; scale_ok && d < lead; ++d) scale_ok = row_scale->shape[d] == x.shape[d];
    if (!scale_ok) {
      return invalid(err, "%s: x_scale shape %s is not the leading shape of %s %s", kernel,
                     format_shape(*row_scale, s1, sizeof s1), x_what, format_shape(x, s2, sizeof s2));
    }
  }
  int64_t strides[3][SK_MAX_RANK] = {};
  for (int d = 0; d < lead; ++d) {
    strides[0][d] = x.stride[d];
    strides[1][d] = out.stride[d];
    if (row_scale != nullptr) strides[2][d] = row_scale->stride[d];
  }
  if (!make_walk(lead, x.shape, row_scale != nullptr ? 3 : 2, strides, 1, n, rows)) {
    return invalid(err, "%s: out is a view whose rows overlap in memory", kernel);
  }
  return true;
}

bool check_w8_k(int64_t k, const char* kernel, const char* what, ErrorSink err) {
  if (k > kW8MaxK) {
    return invalid(err,
                   "%s: K = %lld (the last dimension of %s) exceeds %lld, beyond which the int32 sums could "
                   "overflow",
                   kernel, static_cast<long long>(k), what, static_cast<long long>(kW8MaxK));
  }
  return true;
}

void add_linear_access(RangeList& list, const Walk& rows, int64_t k, int64_t x_size, int32_t x_op, int64_t w_stride,
                       int64_t w_size, int32_t w_op, int32_t out_op, sk_range n_range) {
  if (n_range.begin >= n_range.end || rows.numel == 0) return;
  if (k > 0) {
    list.add_walk(rows, 0, x_op, SK_ACCESS_READ, 0, rows.numel, k, x_size);
    const int64_t first = n_range.begin * w_stride;
    const int64_t last = (n_range.end - 1) * w_stride;
    list.add(w_op, SK_ACCESS_READ, std::min(first, last) * w_size, (std::max(first, last) + k) * w_size);
  }
  constexpr int64_t kF = sizeof(float);
  const int64_t sy = rows.inner_stride(1);
  for_each_run(rows, 0, rows.numel, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t row = off[1] + i * sy;
      list.add(out_op, SK_ACCESS_WRITE, (row + n_range.begin) * kF, (row + n_range.end) * kF);
    }
  });
}

void prefetch_weight_rows(const void* w, int64_t row_stride, int64_t rows, int64_t bytes) {
  const auto* base = static_cast<const char*>(w);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(base + i * row_stride + b, 0, 3);
  }
}

void prefetch_weight_slice(const void* w, int64_t row_stride, int64_t rows, int64_t row_bytes,
                           const sk_core_ctx* core) {
  constexpr int64_t kL1Rows = 8, kL1BytesPerRow = 2048;
  if (rows <= 0 || row_bytes <= 0) return;
  prefetch_weight_rows(w, row_stride, std::min(kL1Rows, rows), std::min(kL1BytesPerRow, row_bytes));
  if (!(core->flags & SK_CORE_AHEAD)) return;
  const auto* base = static_cast<const char*>(w);
  int64_t budget = kAheadPrefetchBytes;
  for (int64_t i = 0; i < rows && budget > 0; ++i) {
    const int64_t first = i < kL1Rows ? std::min(kL1BytesPerRow, row_bytes) : 0;
    for (int64_t b = first; b < row_bytes && budget > 0; b += 64, budget -= 64)
      __builtin_prefetch(base + i * row_stride + b, 0, 2);
  }
}

void zero_linear_rows(const Walk& rows, float* out, sk_range n_range) {
  const int64_t sy = rows.inner_stride(1);
  for_each_run(rows, 0, rows.numel, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      float* row = out + off[1] + i * sy;
      std::fill(row + n_range.begin, row + n_range.end, 0.0f);
    }
  });
}

}  // namespace sk::kernels
