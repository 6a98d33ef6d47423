// Small helpers of the MoE and sampling kernels: 2-D operand views, their access ranges,
// attribute decoding and per-thread scratch.
#ifndef SUPERKERNEL_KERNELS_MOE_COMMON_H_
#define SUPERKERNEL_KERNELS_MOE_COMMON_H_

#include <superkernel/kernel_abi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/kernel_util.h"

namespace sk::kernels::moe {

// A rank-2 operand [rows, cols] with element strides (any sign).
template <class T>
struct View2 {
  T* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t s0 = 0;
  int64_t s1 = 0;

  T* row(int64_t r) const { return data + r * s0; }
  T& at(int64_t r, int64_t c) const { return data[r * s0 + c * s1]; }
};

template <class T>
View2<T> view2(const sk_tensor_arg& t) {
  View2<T> v;
  v.data = static_cast<T*>(t.data);
  v.rows = t.shape[0];
  v.cols = t.shape[1];
  v.s0 = t.stride[0];
  v.s1 = t.stride[1];
  return v;
}

// Byte range of the elements [r0, r1) x [c0, c1) of a 2-D view: one range per row when a row is
// contiguous, one per element otherwise (RangeList merges neighbours). Exact, so the writes of
// cores that own different rows or columns never overlap, whatever the strides.
inline void add_block(RangeList& list, int32_t operand, int32_t mode, const sk_tensor_arg& t, int64_t r0, int64_t r1,
                      int64_t c0, int64_t c1) {
  if (r0 >= r1 || c0 >= c1) return;
  const int64_t es = sk_dtype_size(t.dtype);
  const int64_t s0 = t.stride[0];
  const int64_t s1 = t.stride[1];
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t first = r * s0 + c0 * s1;
    if (s1 == 1 || c1 - c0 == 1) {
      list.add(operand, mode, first * es, (first + (c1 - c0 - 1) * s1 + 1) * es);
    } else {
      for (int64_t c = c0; c < c1; ++c) list.add(operand, mode, (r * s0 + c * s1) * es, (r * s0 + c * s1 + 1) * es);
    }
  }
}

// One range from the lowest to the highest element of the operand (conservative, for data-
// dependent reads). Nothing for an empty operand.
inline void add_whole(RangeList& list, int32_t operand, int32_t mode, const sk_tensor_arg& t) {
  int64_t lo = 0;
  int64_t hi = 0;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] == 0) return;
    const int64_t span = (t.shape[d] - 1) * t.stride[d];
    (span < 0 ? lo : hi) += span;
  }
  const int64_t es = sk_dtype_size(t.dtype);
  list.add(operand, mode, lo * es, (hi + 1) * es);
}

// Columns [c0, c1) of every row of a 2-D operand as one conservative range.
inline void add_columns(RangeList& list, int32_t operand, int32_t mode, const sk_tensor_arg& t, int64_t c0,
                        int64_t c1) {
  if (t.shape[0] == 0 || c0 >= c1) return;
  const int64_t es = sk_dtype_size(t.dtype);
  const int64_t last = (t.shape[0] - 1) * t.stride[0];
  const int64_t lo = std::min<int64_t>(0, last) + c0 * t.stride[1];
  const int64_t hi = std::max<int64_t>(0, last) + (c1 - 1) * t.stride[1];
  list.add(operand, mode, std::min(lo, hi) * es, (std::max(lo, hi) + 1) * es);
}

// Attribute blob of exactly sizeof(T) bytes (the blob has no alignment guarantee).
template <class T>
bool read_attrs(const sk_kernel_args* args, T* out) {
  if (args->attrs == nullptr || args->attrs_size != sizeof(T)) return false;
  std::memcpy(out, args->attrs, sizeof(T));
  return true;
}

// What a rank-2 operand must satisfy beyond its dtype.
enum class Layout {
  kAny,        // any strides (read element by element)
  kRowsDense,  // stride 1 along columns (rows are read with vector loads)
  kOutput,     // stride 1 along columns and rows that do not overlap (split between cores)
};
bool check_2d(const sk_tensor_arg& t, const char* kernel, const char* what, int32_t dtype, Layout layout,
              ErrorSink err);

}  // namespace sk::kernels::moe

#endif  // SUPERKERNEL_KERNELS_MOE_COMMON_H_
