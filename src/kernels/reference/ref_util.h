// Multi-index helpers of the reference implementations: deliberately naive, so that they
// share no code (and no bugs) with the kernels' strided walks.
#ifndef SUPERKERNEL_KERNELS_REFERENCE_REF_UTIL_H_
#define SUPERKERNEL_KERNELS_REFERENCE_REF_UTIL_H_

#include <superkernel/kernel_abi.h>

#include <cstdint>

namespace sk::ref {

// Calls fn(idx) for every multi-index of `shape` in row-major order (once for rank 0).
template <class Fn>
void for_each_index(int rank, const int64_t* shape, Fn&& fn) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= shape[d];
  int64_t idx[SK_MAX_RANK] = {};
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    fn(static_cast<const int64_t*>(idx));
  }
}

inline int64_t offset_of(const sk_tensor_arg& t, const int64_t* idx) {
  int64_t off = 0;
  for (int d = 0; d < t.rank; ++d) off += idx[d] * t.stride[d];
  return off;
}

inline float& f32_at(const sk_tensor_arg& t, const int64_t* idx) {
  return static_cast<float*>(t.data)[offset_of(t, idx)];
}

inline bool same_shape(const sk_tensor_arg& a, const sk_tensor_arg& b) {
  if (a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
  }
  return true;
}

inline bool has_operands(const sk_kernel_args* args, int32_t inputs, int32_t outputs) {
  return args != nullptr && args->num_inputs == inputs && args->num_outputs == outputs && args->inputs != nullptr &&
         args->outputs != nullptr;
}

inline bool all_f32(const sk_kernel_args* args) {
  for (int32_t i = 0; i < args->num_inputs; ++i) {
    if (args->inputs[i].dtype != SK_DTYPE_F32) return false;
  }
  for (int32_t i = 0; i < args->num_outputs; ++i) {
    if (args->outputs[i].dtype != SK_DTYPE_F32) return false;
  }
  return true;
}

}  // namespace sk::ref

#endif  // SUPERKERNEL_KERNELS_REFERENCE_REF_UTIL_H_
