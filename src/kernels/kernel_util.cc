#include "kernels/kernel_util.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <utility>

namespace sk::kernels {

const char* dtype_str(int32_t dtype) {
  switch (dtype) {
    case SK_DTYPE_F32:
      return "f32";
    case SK_DTYPE_BF16:
      return "bf16";
    case SK_DTYPE_F16:
      return "f16";
    case SK_DTYPE_I8:
      return "i8";
    case SK_DTYPE_I32:
      return "i32";
    case SK_DTYPE_I64:
      return "i64";
    case SK_DTYPE_BOOL:
      return "bool";
    default:
      return "unknown";
  }
}

namespace {

// Exact offset bounds of a contiguous range of row-major indices, by splitting the range into
// a partial head block, whole middle blocks and a partial tail block at each dimension.
struct BoundsState {
  const int64_t* shape;
  const int64_t* stride;
  int rank;
  int64_t inner[SK_MAX_RANK];        // indices per step of dimension d
  int64_t full_lo[SK_MAX_RANK + 1];  // offset bounds of a whole block of dims d..rank-1
  int64_t full_hi[SK_MAX_RANK + 1];
  int64_t lo;
  int64_t hi;

  void include(int64_t a, int64_t b) {
    lo = std::min(lo, a);
    hi = std::max(hi, b);
  }
};

void bounds_rec(BoundsState& s, int d, int64_t begin, int64_t end, int64_t base) {
  const int64_t inner = s.inner[d];
  const int64_t step = s.stride[d];
  const int64_t i0 = begin / inner;
  const int64_t i1 = (end - 1) / inner;
  if (i0 == i1) {
    if (d == s.rank - 1) {
      s.include(base + i0 * step, base + i0 * step);
    } else {
      bounds_rec(s, d + 1, begin - i0 * inner, end - i0 * inner, base + i0 * step);
    }
    return;
  }
  int64_t first_full = i0;
  int64_t last_full = i1;
  if (begin != i0 * inner) {
    bounds_rec(s, d + 1, begin - i0 * inner, inner, base + i0 * step);
    first_full = i0 + 1;
  }
  if (end != (i1 + 1) * inner) {
    bounds_rec(s, d + 1, 0, end - i1 * inner, base + i1 * step);
    last_full = i1 - 1;
  }
  if (first_full <= last_full) {
    const int64_t a = first_full * step;
    const int64_t b = last_full * step;
    s.include(base + std::min(a, b) + s.full_lo[d + 1], base + std::max(a, b) + s.full_hi[d + 1]);
  }
}

}  // namespace

bool invalid(ErrorSink err, const char* fmt, ...) {
  if (err.buf != nullptr && err.capacity > 0) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err.buf, err.capacity, fmt, ap);
    va_end(ap);
  }
  return false;
}

bool view_byte_bounds(const sk_tensor_arg& t, int64_t* lo, int64_t* hi) {
  if (sk_tensor_numel(&t) == 0) return false;
  int64_t a = 0;
  int64_t b = 0;
  for (int d = 0; d < t.rank; ++d) {
    const int64_t span = (t.shape[d] - 1) * t.stride[d];
    a += std::min<int64_t>(0, span);
    b += std::max<int64_t>(0, span);
  }
  const int64_t elem = sk_dtype_size(t.dtype);
  *lo = a * elem;
  *hi = (b + 1) * elem;
  return true;
}

bool views_overlap(const sk_tensor_arg& a, const sk_tensor_arg& b) {
  int64_t alo = 0;
  int64_t ahi = 0;
  int64_t blo = 0;
  int64_t bhi = 0;
  if (!view_byte_bounds(a, &alo, &ahi) || !view_byte_bounds(b, &blo, &bhi)) return false;
  const auto pa = reinterpret_cast<uintptr_t>(a.data);
  const auto pb = reinterpret_cast<uintptr_t>(b.data);
  return pa + static_cast<uintptr_t>(alo) < pb + static_cast<uintptr_t>(bhi) &&
         pb + static_cast<uintptr_t>(blo) < pa + static_cast<uintptr_t>(ahi);
}

void add_view(RangeList& list, int32_t operand, int32_t mode, const sk_tensor_arg& t) {
  int64_t lo = 0;
  int64_t hi = 0;
  if (view_byte_bounds(t, &lo, &hi)) list.add(operand, mode, lo, hi);
}

int32_t workspace_too_small(ErrorSink err, const char* kernel, const sk_kernel_args* args, uint64_t needed) {
  invalid(err, "%s: per-core workspace of %llu bytes is smaller than the %llu it needs", kernel,
          static_cast<unsigned long long>(args->workspace == nullptr ? 0 : args->workspace_size),
          static_cast<unsigned long long>(needed));
  return SK_ERR_INTERNAL;
}

const char* format_shape(const sk_tensor_arg& t, char* buf, int capacity) {
  if (capacity <= 0) return buf;
  int used = std::snprintf(buf, static_cast<size_t>(capacity), "[");
  const int rank = std::clamp(t.rank, 0, SK_MAX_RANK);
  for (int d = 0; d < rank && used < capacity; ++d) {
    used += std::snprintf(buf + used, static_cast<size_t>(capacity - used), "%s%lld", d == 0 ? "" : ", ",
                          static_cast<long long>(t.shape[d]));
  }
  if (used < capacity) std::snprintf(buf + used, static_cast<size_t>(capacity - used), "]");
  return buf;
}

bool check_arity(const sk_kernel_args* args, const char* kernel, int32_t inputs, int32_t outputs, ErrorSink err) {
  if (args == nullptr) return invalid(err, "%s: null arguments", kernel);
  if (args->num_inputs != inputs || args->num_outputs != outputs) {
    return invalid(err, "%s: expected %d input(s) and %d output(s), got %d and %d", kernel, inputs, outputs,
                   args->num_inputs, args->num_outputs);
  }
  if ((inputs > 0 && args->inputs == nullptr) || (outputs > 0 && args->outputs == nullptr)) {
    return invalid(err, "%s: null operand array", kernel);
  }
  return true;
}

bool check_core(const sk_core_ctx* core, const char* kernel, ErrorSink err) {
  if (core == nullptr) return false;
  if (core->num_cores < 1 || core->core_id < 0 || core->core_id >= core->num_cores) {
    return invalid(err, "%s: core %d of %d is not a valid core", kernel, core->core_id, core->num_cores);
  }
  return true;
}

bool check_tensor(const sk_tensor_arg& t, const char* kernel, const char* what, int32_t dtype, int32_t min_rank,
                  ErrorSink err) {
  if (t.rank < min_rank || t.rank > SK_MAX_RANK) {
    return invalid(err, "%s: %s has rank %d, expected %d to %d", kernel, what, t.rank, min_rank, SK_MAX_RANK);
  }
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] < 0) {
      return invalid(err, "%s: %s has negative dimension %lld", kernel, what, static_cast<long long>(t.shape[d]));
    }
  }
  if (t.dtype != dtype) {
    return invalid(err, "%s: %s has dtype %s, expected %s", kernel, what, dtype_str(t.dtype), dtype_str(dtype));
  }
  if (t.data == nullptr && sk_tensor_numel(&t) > 0 && !err.shapes_only) {
    return invalid(err, "%s: %s has no data", kernel, what);
  }
  return true;
}

bool same_shape(const sk_tensor_arg& a, const sk_tensor_arg& b) {
  if (a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d) {
    if (a.shape[d] != b.shape[d]) return false;
  }
  return true;
}

bool last_dim_contiguous(const sk_tensor_arg& t) {
  return t.rank == 0 || t.shape[t.rank - 1] <= 1 || t.stride[t.rank - 1] == 1;
}

bool make_walk(int rank, const int64_t* shape, int num_operands, const int64_t (*strides)[SK_MAX_RANK], int ref,
               int64_t ref_item, Walk* walk) {
  Walk& w = *walk;
  w = Walk{};
  w.num_operands = num_operands;
  w.numel = 1;
  for (int d = 0; d < rank; ++d) w.numel *= shape[d];
  if (w.numel == 0) {
    w.rank = 1;
    return true;
  }
  // Unit dimensions never move an index, so they carry no ordering information.
  int r = 0;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 1) continue;
    w.shape[r] = shape[d];
    for (int op = 0; op < num_operands; ++op) w.stride[op][r] = strides[op][d];
    ++r;
  }
  for (int d = 0; d < r; ++d) {
    if (w.stride[ref][d] >= 0) continue;
    for (int op = 0; op < num_operands; ++op) {
      w.base[op] += (w.shape[d] - 1) * w.stride[op][d];
      w.stride[op][d] = -w.stride[op][d];
    }
  }
  // Stable, so equal strides keep their logical order and the walk is a function of the shape.
  for (int i = 1; i < r; ++i) {
    for (int j = i; j > 0 && w.stride[ref][j - 1] < w.stride[ref][j]; --j) {
      std::swap(w.shape[j - 1], w.shape[j]);
      for (int op = 0; op < num_operands; ++op) std::swap(w.stride[op][j - 1], w.stride[op][j]);
    }
  }
  int64_t extent = ref_item;
  for (int d = r - 1; d >= 0; --d) {
    if (w.stride[ref][d] < extent) return false;
    extent += (w.shape[d] - 1) * w.stride[ref][d];
  }
  int merged = 0;
  for (int d = 0; d < r; ++d) {
    bool fuse = merged > 0;
    for (int op = 0; fuse && op < num_operands; ++op) {
      fuse = w.stride[op][merged - 1] == w.stride[op][d] * w.shape[d];
    }
    if (fuse) {
      w.shape[merged - 1] *= w.shape[d];
      for (int op = 0; op < num_operands; ++op) w.stride[op][merged - 1] = w.stride[op][d];
    } else {
      w.shape[merged] = w.shape[d];
      for (int op = 0; op < num_operands; ++op) w.stride[op][merged] = w.stride[op][d];
      ++merged;
    }
  }
  if (merged == 0) {
    w.shape[0] = 1;
    for (int op = 0; op < num_operands; ++op) w.stride[op][0] = 0;
    merged = 1;
  }
  for (int d = merged; d < SK_MAX_RANK; ++d) {
    w.shape[d] = 0;
    for (int op = 0; op < num_operands; ++op) w.stride[op][d] = 0;
  }
  w.rank = merged;
  return true;
}

bool make_row_walk(const sk_tensor_arg& x, const sk_tensor_arg& y, const char* kernel, Walk* walk, ErrorSink err) {
  char s1[96];
  char s2[96];
  if (!same_shape(x, y)) {
    return invalid(err, "%s: out shape %s differs from x shape %s", kernel, format_shape(y, s1, sizeof s1),
                   format_shape(x, s2, sizeof s2));
  }
  if (!last_dim_contiguous(x) || !last_dim_contiguous(y)) {
    return invalid(err, "%s: the last dimension of x and out must have stride 1", kernel);
  }
  const int lead = x.rank - 1;
  int64_t strides[2][SK_MAX_RANK] = {};
  for (int d = 0; d < lead; ++d) {
    strides[0][d] = x.stride[d];
    strides[1][d] = y.stride[d];
  }
  if (!make_walk(lead, x.shape, 2, strides, 1, x.shape[lead], walk)) {
    return invalid(err, "%s: out is a view whose rows overlap in memory", kernel);
  }
  return true;
}

void walk_bounds(const Walk& w, int op, int64_t begin, int64_t end, int64_t* lo, int64_t* hi) {
  BoundsState s;
  s.shape = w.shape;
  s.stride = w.stride[op];
  s.rank = w.rank;
  s.full_lo[w.rank] = 0;
  s.full_hi[w.rank] = 0;
  int64_t inner = 1;
  for (int d = w.rank - 1; d >= 0; --d) {
    s.inner[d] = inner;
    inner *= w.shape[d];
    const int64_t span = (w.shape[d] - 1) * s.stride[d];
    s.full_lo[d] = s.full_lo[d + 1] + std::min<int64_t>(0, span);
    s.full_hi[d] = s.full_hi[d + 1] + std::max<int64_t>(0, span);
  }
  s.lo = INT64_MAX;
  s.hi = INT64_MIN;
  bounds_rec(s, 0, begin, end, 0);
  *lo = w.base[op] + s.lo;
  *hi = w.base[op] + s.hi;
}

void RangeList::add(int32_t operand, int32_t mode, int64_t begin, int64_t end) {
  if (end <= begin) return;
  if (pending_valid_ && pending_.operand == operand && pending_.mode == mode && pending_.end == begin) {
    pending_.end = end;
    return;
  }
  flush();
  pending_ = sk_access_range{operand, mode, begin, end};
  pending_valid_ = true;
}

void RangeList::add_walk(const Walk& w, int op, int32_t operand, int32_t mode, int64_t begin, int64_t end, int64_t item,
                         int64_t elem_size) {
  if (begin >= end || item <= 0) return;
  int64_t lo = 0;
  int64_t hi = 0;
  walk_bounds(w, op, begin, end, &lo, &hi);
  add(operand, mode, lo * elem_size, (hi + item) * elem_size);
}

void RangeList::flush() {
  if (!pending_valid_) return;
  if (count_ < capacity_ && ranges_ != nullptr) ranges_[count_] = pending_;
  ++count_;
  pending_valid_ = false;
}

int32_t RangeList::finish() {
  flush();
  return count_;
}

}  // namespace sk::kernels
