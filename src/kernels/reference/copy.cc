#include <cstring>

#include "kernels/reference/ref_util.h"
#include "kernels/reference/reference.h"

namespace sk::ref {

int32_t copy(const sk_kernel_args* args) {
  if (!has_operands(args, 1, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& in = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  const int64_t size = sk_dtype_size(in.dtype);
  if (size == 0 || out.dtype != in.dtype || !same_shape(in, out)) return SK_ERR_INVALID_ARGUMENT;
  for_each_index(in.rank, in.shape, [&](const int64_t* idx) {
    std::memcpy(static_cast<char*>(out.data) + offset_of(out, idx) * size,
                static_cast<const char*>(in.data) + offset_of(in, idx) * size, static_cast<size_t>(size));
  });
  return SK_OK;
}

}  // namespace sk::ref
