#include <cmath>

#include "kernels/reference/ref_util.h"
#include "kernels/reference/reference.h"
#include "superkernel/attrs_core.h"

namespace sk::ref {

int32_t rms_norm_f32(const sk_kernel_args* args) {
  if (!has_operands(args, 2, 1) || !all_f32(args)) return SK_ERR_INVALID_ARGUMENT;
  if (args->attrs == nullptr || args->attrs_size < sizeof(sk_rms_norm_attrs)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const double eps = static_cast<const sk_rms_norm_attrs*>(args->attrs)->eps;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.rank < 1 || !same_shape(x, y)) return SK_ERR_INVALID_ARGUMENT;
  const int last = x.rank - 1;
  const int64_t d = x.shape[last];
  if (w.rank != 1 || w.shape[0] != d) return SK_ERR_INVALID_ARGUMENT;
  if (d == 0) return SK_OK;
  for_each_index(last, x.shape, [&](const int64_t* row) {
    int64_t idx[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) idx[i] = row[i];
    double ss = 0.0;
    for (idx[last] = 0; idx[last] < d; ++idx[last]) {
      const double v = f32_at(x, idx);
      ss += v * v;
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (idx[last] = 0; idx[last] < d; ++idx[last]) {
      const double v = f32_at(x, idx);
      const double wv = f32_at(w, &idx[last]);
      f32_at(y, idx) = static_cast<float>(v * inv * wv);
    }
  });
  return SK_OK;
}

}  // namespace sk::ref
