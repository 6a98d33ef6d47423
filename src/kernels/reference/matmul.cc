#include "kernels/reference/ref_util.h"
#include "kernels/reference/reference.h"

namespace sk::ref {

// y[..., n] = sum_k x[..., k] * w[n, k]
int32_t matmul_f32(const sk_kernel_args* args) {
  if (!has_operands(args, 2, 1) || !all_f32(args)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.rank < 1 || w.rank != 2 || y.rank != x.rank) return SK_ERR_INVALID_ARGUMENT;
  const int last = x.rank - 1;
  const int64_t k = x.shape[last];
  const int64_t n = w.shape[0];
  if (w.shape[1] != k || y.shape[last] != n) return SK_ERR_INVALID_ARGUMENT;
  for (int i = 0; i < last; ++i) {
    if (y.shape[i] != x.shape[i]) return SK_ERR_INVALID_ARGUMENT;
  }
  for_each_index(last, x.shape, [&](const int64_t* row) {
    int64_t xi[SK_MAX_RANK] = {};
    int64_t yi[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) xi[i] = yi[i] = row[i];
    for (yi[last] = 0; yi[last] < n; ++yi[last]) {
      double acc = 0.0;
      int64_t wi[2] = {yi[last], 0};
      for (xi[last] = 0; xi[last] < k; ++xi[last]) {
        wi[1] = xi[last];
        acc += static_cast<double>(f32_at(x, xi)) * f32_at(w, wi);
      }
      f32_at(y, yi) = static_cast<float>(acc);
    }
  });
  return SK_OK;
}

}  // namespace sk::ref
