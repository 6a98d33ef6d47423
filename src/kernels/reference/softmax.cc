#include <cmath>
#include <limits>
#include <vector>

#include "kernels/reference/ref_util.h"
#include "kernels/reference/reference.h"

namespace sk::ref {

int32_t softmax_f32(const sk_kernel_args* args) {
  if (!has_operands(args, 1, 1) || !all_f32(args)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.rank < 1 || !same_shape(x, y)) return SK_ERR_INVALID_ARGUMENT;
  const int last = x.rank - 1;
  const int64_t d = x.shape[last];
  if (d == 0) return SK_OK;
  std::vector<double> e(static_cast<size_t>(d));
  for_each_index(last, x.shape, [&](const int64_t* row) {
    int64_t idx[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) idx[i] = row[i];
    double mx = -std::numeric_limits<double>::infinity();
    for (idx[last] = 0; idx[last] < d; ++idx[last]) mx = std::fmax(mx, f32_at(x, idx));
    double sum = 0.0;
    for (idx[last] = 0; idx[last] < d; ++idx[last]) {
      e[static_cast<size_t>(idx[last])] = std::exp(static_cast<double>(f32_at(x, idx)) - mx);
      sum += e[static_cast<size_t>(idx[last])];
    }
    for (idx[last] = 0; idx[last] < d; ++idx[last]) {
      f32_at(y, idx) = static_cast<float>(e[static_cast<size_t>(idx[last])] / sum);
    }
  });
  return SK_OK;
}

}  // namespace sk::ref
