#include "kernels/moe_common.h"

namespace sk::kernels::moe {

bool check_2d(const sk_tensor_arg& t, const char* kernel, const char* what, int32_t dtype, Layout layout,
              ErrorSink err) {
  if (!check_tensor(t, kernel, what, dtype, 2, err)) return false;
  char s[96];
  if (t.rank != 2)
    return invalid(err, "%s: %s shape %s has rank %d, expected 2", kernel, what, format_shape(t, s, sizeof s), t.rank);
  if (layout == Layout::kAny) return true;
  if (t.shape[1] > 1 && t.stride[1] != 1) {
    return invalid(err, "%s: the last dimension of %s must have stride 1", kernel, what);
  }
  if (layout == Layout::kOutput && t.shape[0] > 1 && t.shape[1] > 0 &&
      (t.stride[0] < 0 ? -t.stride[0] : t.stride[0]) < t.shape[1]) {
    return invalid(err, "%s: %s is a view whose rows overlap in memory", kernel, what);
  }
  return true;
}

}  // namespace sk::kernels::moe
