#include <cstring>

#include "kernels/reference/reference.h"
#include "superkernel/attrs_core.h"

namespace sk::ref {

// A prefetch computes nothing: the reference only checks what the kernel checks.
int32_t prefetch(const sk_kernel_args* args) {
  if (args == nullptr || args->num_inputs != 2 || args->num_outputs != 0 || args->inputs == nullptr)
    return SK_ERR_INVALID_ARGUMENT;
  if (args->attrs == nullptr || args->attrs_size != sizeof(sk_prefetch_attrs)) return SK_ERR_INVALID_ARGUMENT;
  sk_prefetch_attrs a{};
  std::memcpy(&a, args->attrs, sizeof a);
  const sk_tensor_arg& t = args->inputs[0];
  int64_t last = 0;  // element offset of the last element from the data pointer
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] == 0) return a.bytes == 0 && a.offset == 0 ? SK_OK : SK_ERR_INVALID_ARGUMENT;
    if (t.stride[d] < 0) return SK_ERR_INVALID_ARGUMENT;
    last += (t.shape[d] - 1) * t.stride[d];
  }
  const int64_t span = (last + 1) * sk_dtype_size(t.dtype);
  return a.bytes >= 0 && a.offset >= 0 && a.offset + a.bytes <= span ? SK_OK : SK_ERR_INVALID_ARGUMENT;
}

}  // namespace sk::ref
