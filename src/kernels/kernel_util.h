// Helpers shared by the built-in kernels: argument checks with messages, strided iteration in
// the output's memory order, and access-range construction.
//
// Every kernel follows the same shape:
//
//   bool plan_x(const sk_kernel_args* args, XPlan* plan, ErrorSink err);  // cheap checks
//   int32_t x_run(args, core)     { plan; split; compute }
//   int32_t x_access(args, ...)   { plan; split the same way; describe the ranges }
//
// so `run` and `access` cannot disagree about which core owns which element.
#ifndef SUPERKERNEL_KERNELS_KERNEL_UTIL_H_
#define SUPERKERNEL_KERNELS_KERNEL_UTIL_H_

#include <superkernel/kernel_abi.h>

#include <cstdint>

namespace sk::kernels {

// Element split granularity of element-wise kernels: 16 elements of 4 bytes is one cache line,
// which keeps cores off each other's lines when the output is aligned.
inline constexpr int64_t kElementAlign = 16;

// Where a failed check writes its message; `buf` may be null (access callbacks have no ctx).
// `shapes_only`: the caller is a tiling or workspace-size callback, which runs before operands
// have addresses, so check_tensor does not require data.
struct ErrorSink {
  char* buf = nullptr;
  uint32_t capacity = 0;
  bool shapes_only = false;
};

inline ErrorSink sink_of(const sk_core_ctx* core) {
  return core != nullptr ? ErrorSink{core->error_message, core->error_capacity} : ErrorSink{};
}

// Writes the message (truncated, NUL-terminated) and returns false, so checks read
// `if (bad) return invalid(err, "...")`.
bool invalid(ErrorSink err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Typed arrays carved one after another, each on its own cache line, out of a per-core workspace
// slice (SK_WORKSPACE_PER_CORE). The same carver sizes the slice: run `workspace_size` with a
// null base and the same take() calls, then read bytes().
//
//   ScratchCarver c(nullptr);  c.take<float>(n);  c.take<uint64_t>(k);  return c.bytes();  // size
//   ScratchCarver c(core_slice(args, core));
//   float* scores = c.take<float>(n);  uint64_t* best = c.take<uint64_t>(k);              // run
class ScratchCarver {
 public:
  explicit ScratchCarver(void* base) : base_(static_cast<char*>(base)) {}
  template <class T>
  T* take(int64_t n) {
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += (static_cast<uint64_t>(n) * sizeof(T) + 63) / 64 * 64;
    return p;
  }
  uint64_t bytes() const { return used_; }

 private:
  char* base_;
  uint64_t used_ = 0;
};

// Byte offsets [lo, hi) relative to t.data spanned by a view; false when it is empty.
bool view_byte_bounds(const sk_tensor_arg& t, int64_t* lo, int64_t* hi);
// Whether the byte ranges spanned by two views intersect.
bool views_overlap(const sk_tensor_arg& a, const sk_tensor_arg& b);

// Reports a workspace smaller than a kernel needs (a runtime or harness bug): SK_ERR_INTERNAL.
int32_t workspace_too_small(ErrorSink err, const char* kernel, const sk_kernel_args* args, uint64_t needed);

// This core's slice of a per-core workspace.
inline void* core_slice(const sk_kernel_args* args, const sk_core_ctx* core) {
  return static_cast<char*>(args->workspace) + static_cast<uint64_t>(core->core_id) * args->workspace_size;
}

// "[2, 3, 4]" into buf (always NUL-terminated).
const char* format_shape(const sk_tensor_arg& t, char* buf, int capacity);

// The short name of an SK_DTYPE_* value for messages ("f32", "bf16", ...; "unknown" otherwise).
const char* dtype_str(int32_t dtype);

// Operand count, non-null operand arrays and a sane core context.
bool check_arity(const sk_kernel_args* args, const char* kernel, int32_t inputs, int32_t outputs, ErrorSink err);
bool check_core(const sk_core_ctx* core, const char* kernel, ErrorSink err);
// Rank in [min_rank, SK_MAX_RANK], non-negative dims, dtype, and data present when non-empty.
bool check_tensor(const sk_tensor_arg& t, const char* kernel, const char* what, int32_t dtype, int32_t min_rank,
                  ErrorSink err);
bool same_shape(const sk_tensor_arg& a, const sk_tensor_arg& b);
// Stride of the last dimension is 1 (or the dimension has at most one element).
bool last_dim_contiguous(const sk_tensor_arg& t);

// ---- Strided walks ----
//
// A Walk iterates an index space shared by up to kMaxWalkOperands operands, each with its own
// element strides. It is normalised for one "reference" operand (the output): dimensions are
// reordered by descending reference stride, negative reference strides are flipped, and
// dimensions that are contiguous for every operand are merged. Consequently a contiguous range
// of walk indices maps to increasing reference addresses, so splitting walk indices between
// cores gives each core a memory range of the output that does not interleave with the others,
// and its covering byte range is disjoint from the other cores' ranges.
//
// Each walk index may own an "item" of several contiguous reference elements (a row of D for
// row-wise kernels); element-wise kernels use items of one element.

inline constexpr int kMaxWalkOperands = 4;

struct Walk {
  int rank = 0;  // >= 1 after make_walk
  int num_operands = 0;
  int64_t numel = 0;  // number of walk indices
  int64_t shape[SK_MAX_RANK] = {};
  int64_t stride[kMaxWalkOperands][SK_MAX_RANK] = {};
  int64_t base[kMaxWalkOperands] = {};  // element offset of walk index 0 from the data pointer

  int64_t inner_stride(int op) const { return stride[op][rank - 1]; }
};

// `strides[op][d]` is operand op's element stride along logical dimension d (0 broadcasts).
// Returns false when the reference operand's items overlap each other in memory (a view that
// writes one address from several indices, which no kernel can split deterministically).
bool make_walk(int rank, const int64_t* shape, int num_operands, const int64_t (*strides)[SK_MAX_RANK], int ref,
               int64_t ref_item, Walk* walk);

// Calls fn(offsets, length) for each innermost run of walk indices in [begin, end), where
// offsets[op] is the element offset of operand op at the run's first index and consecutive
// indices of the run are inner_stride(op) elements apart.
template <class Fn>
void for_each_run(const Walk& w, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const int r = w.rank;
  int64_t idx[SK_MAX_RANK];
  int64_t off[kMaxWalkOperands];
  int64_t rest = begin;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rest % w.shape[d];
    rest /= w.shape[d];
  }
  for (int op = 0; op < w.num_operands; ++op) {
    off[op] = w.base[op];
    for (int d = 0; d < r; ++d) off[op] += idx[d] * w.stride[op][d];
  }
  int64_t i = begin;
  while (true) {
    const int64_t len = end - i < w.shape[r - 1] - idx[r - 1] ? end - i : w.shape[r - 1] - idx[r - 1];
    fn(static_cast<const int64_t*>(off), len);
    i += len;
    if (i >= end) return;
    // The run stopped at the end of the innermost dimension: carry into the outer ones.
    for (int op = 0; op < w.num_operands; ++op) off[op] += len * w.stride[op][r - 1];
    idx[r - 1] += len;
    for (int d = r - 1; d > 0 && idx[d] == w.shape[d]; --d) {
      for (int op = 0; op < w.num_operands; ++op) {
        off[op] += w.stride[op][d - 1] - w.shape[d] * w.stride[op][d];
      }
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

// Smallest and largest element offset of operand `op` over walk indices [begin, end)
// (non-empty). Exact for the index range; items beyond the first element are not included.
void walk_bounds(const Walk& w, int op, int64_t begin, int64_t end, int64_t* lo, int64_t* hi);

// Walk for row-wise kernels x[..., D] -> y[..., D]: the walk runs over the leading dimensions,
// one row of D contiguous elements per index, with x as operand 0 and y as operand 1 (the
// reference). Checks that the shapes match and both last dimensions are contiguous.
bool make_row_walk(const sk_tensor_arg& x, const sk_tensor_arg& y, const char* kernel, Walk* walk, ErrorSink err);

// ---- Access ranges ----

// Collects ranges for an access callback: merges a range into the previous one when they are
// adjacent (same operand and mode), stores while there is room, and always counts, so that
// the returned count does not depend on the capacity offered.
class RangeList {
 public:
  RangeList(sk_access_range* ranges, int32_t capacity) : ranges_(ranges), capacity_(capacity) {}
  void add(int32_t operand, int32_t mode, int64_t begin, int64_t end);
  // Byte range of operand `op` over walk indices [begin, end) whose items are `item`
  // contiguous elements of `elem_size` bytes.
  void add_walk(const Walk& w, int op, int32_t operand, int32_t mode, int64_t begin, int64_t end, int64_t item,
                int64_t elem_size);
  int32_t finish();

 private:
  void flush();
  sk_access_range* ranges_;
  int32_t capacity_;
  int32_t count_ = 0;
  bool pending_valid_ = false;
  sk_access_range pending_{};
};

// The byte range spanned by a whole view (nothing when it is empty).
void add_view(RangeList& list, int32_t operand, int32_t mode, const sk_tensor_arg& t);

// Asks for `bytes` from `p` to be brought into the cache (a hint: uses no value, never faults).
inline void prefetch_bytes(const void* p, int64_t bytes) {
  const auto* base = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(base + b, 0, 3);
}

}  // namespace sk::kernels

#endif  // SUPERKERNEL_KERNELS_KERNEL_UTIL_H_
