// Kernel ABI arguments for tests that call kernels directly (without a runtime).
#ifndef SUPERKERNEL_TESTS_COMMON_ABI_ARGS_H_
#define SUPERKERNEL_TESTS_COMMON_ABI_ARGS_H_

#include <superkernel/kernel_abi.h>

#include <cstdint>

namespace sk::testing {

// A dense rank-1 operand of `n` elements of `dtype` at `data`.
inline sk_tensor_arg dense_arg(void* data, int32_t dtype, int64_t n) {
  sk_tensor_arg t{};
  t.data = data;
  t.dtype = dtype;
  t.rank = 1;
  t.shape[0] = n;
  t.stride[0] = 1;
  return t;
}

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_COMMON_ABI_ARGS_H_
