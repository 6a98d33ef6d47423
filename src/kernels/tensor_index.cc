// Indexing kernels: tensor.index_select, tensor.gather (new outputs), tensor.index_copy and
// tensor.index_put (in place into dst, the op's output being the very view of its input 0).
// Elements are copied bit for bit (any dtype); index_put with accumulate adds in f32 (floats,
// rounded to dst's dtype) or exactly (integers).
//
// Index values are data, so what a core reads of x / src along the indexed dim (and writes of
// dst along it) is declared whole: the access callbacks are exact in every other dim. Every core
// with work checks every index before it writes anything, so an out-of-range index fails the
// call with nothing written.
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/tensor_common.h"
#include "superkernel/attrs_tensor.h"

namespace sk::kernels {
namespace {

using namespace tensor;

constexpr const char* kIndexSelect = "tensor.index_select";
constexpr const char* kGather = "tensor.gather";
constexpr const char* kIndexCopy = "tensor.index_copy";
constexpr const char* kIndexPut = "tensor.index_put";

int64_t index_at(const sk_tensor_arg& index, int64_t offset) {
  if (index.dtype == SK_DTYPE_I32) {
    int32_t v;
    std::memcpy(&v, static_cast<const char*>(index.data) + offset * 4, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, static_cast<const char*>(index.data) + offset * 8, 8);
  return v;
}

// Checks every element of `index` (any shape and strides) against [0, size); the message names the
// first bad one by its multi-index.
bool check_indices(const char* kernel, const char* what, const sk_tensor_arg& index, int64_t size, int dim,
                   ErrorSink err) {
  const int64_t n = sk_tensor_numel(&index);
  int64_t idx[SK_MAX_RANK] = {};
  for (int64_t flat = 0; flat < n; ++flat) {
    unflatten(flat, index.rank, index.shape, idx);
    int64_t off = 0;
    for (int d = 0; d < index.rank; ++d) off += idx[d] * index.stride[d];
    const int64_t v = index_at(index, off);
    if (v < 0 || v >= size) {
      sk_tensor_arg at{};  // the position, printed like a shape
      at.rank = index.rank;
      for (int d = 0; d < index.rank; ++d) at.shape[d] = idx[d];
      char pos[96];
      format_shape(at, pos, sizeof pos);
      return invalid(err, "%s: %s%s = %lld is out of range for dim %d of size %lld", kernel, what, pos,
                     static_cast<long long>(v), dim, static_cast<long long>(size));
    }
  }
  return true;
}

// Copies the block of `rank` dims (shape) from src to dst, element strides per side.
void copy_block(const char* src, const int64_t* ss, char* dst, const int64_t* ds, int rank, const int64_t* shape,
                int64_t elem) {
  bool dense = true;
  int64_t expect = 1;
  int64_t total = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] != 1 && (ss[d] != expect || ds[d] != expect)) dense = false;
    expect *= shape[d];
    total *= shape[d];
  }
  if (total == 0) return;
  if (dense) {
    std::memcpy(dst, src, static_cast<size_t>(total * elem));
    return;
  }
  int64_t idx[SK_MAX_RANK] = {};
  for (int64_t flat = 0; flat < total; ++flat) {
    unflatten(flat, rank, shape, idx);
    int64_t so = 0;
    int64_t dof = 0;
    for (int d = 0; d < rank; ++d) {
      so += idx[d] * ss[d];
      dof += idx[d] * ds[d];
    }
    std::memcpy(dst + dof * elem, src + so * elem, static_cast<size_t>(elem));
  }
}

// The view as [outer, dim, inner]: flat outer / inner indices to element offsets.
int64_t outer_offset(const sk_tensor_arg& t, int dim, int64_t o) {
  int64_t idx[SK_MAX_RANK] = {};
  unflatten(o, dim, t.shape, idx);
  int64_t off = 0;
  for (int d = 0; d < dim; ++d) off += idx[d] * t.stride[d];
  return off;
}

// Box of `t` with the outer dims at flat index o and every other index whole.
void add_slab(RangeList& list, int32_t operand, int32_t mode, const sk_tensor_arg& t, int dim, int64_t o) {
  int64_t lo[SK_MAX_RANK] = {};
  int64_t hi[SK_MAX_RANK] = {};
  unflatten(o, dim, t.shape, lo);
  for (int d = 0; d < t.rank; ++d) hi[d] = d < dim ? lo[d] : t.shape[d] - 1;
  add_box(list, operand, mode, t, lo, hi);
}

// Whether the slabs of `t` over its first `dim` dims occupy disjoint, increasing byte ranges in
// flat order (true for a dense tensor), so that splitting slabs between cores splits memory.
bool slabs_ordered(const sk_tensor_arg& t, int dim) {
  int64_t extent = 1;  // elements one slab spans
  for (int d = dim; d < t.rank; ++d) {
    if (t.stride[d] < 0) return false;
    extent += (t.shape[d] - 1) * t.stride[d];
  }
  for (int d = dim - 1; d >= 0; --d) {
    if (t.shape[d] == 1) continue;
    if (t.stride[d] < extent) return false;
    extent += (t.shape[d] - 1) * t.stride[d];
  }
  return true;
}

// ---- tensor.index_select ----

struct SelectPlan {
  int dim = 0;
  int64_t outer = 1;
  int64_t len = 0;  // index length
  int64_t inner_rank = 0;
};

bool plan_select(const sk_kernel_args* args, SelectPlan* p, ErrorSink err) {
  sk_index_attrs a{};
  if (!check_arity(args, kIndexSelect, 2, 1, err) || !read_attrs(args, kIndexSelect, "sk_index_attrs", &a, err)) {
    return false;
  }
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& index = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!is_known(x.dtype)) return invalid(err, "%s: x has unknown dtype %d", kIndexSelect, x.dtype);
  if (!check_tensor(x, kIndexSelect, "x", x.dtype, 1, err) ||
      !check_tensor(out, kIndexSelect, "out", x.dtype, 1, err)) {
    return false;
  }
  if (!is_index(index.dtype) || index.rank > 1) {
    return invalid(err, "%s: index must be a 1-D i32 or i64 tensor (got %s of rank %d)", kIndexSelect,
                   dtype_str(index.dtype), index.rank);
  }
  if (!check_tensor(index, kIndexSelect, "index", index.dtype, 0, err)) return false;
  if (a.dim < 0 || a.dim >= x.rank)
    return invalid(err, "%s: dim %d is outside x's rank %d", kIndexSelect, a.dim, x.rank);
  bool fits = out.rank == x.rank;
  for (int d = 0; fits && d < x.rank; ++d) fits = out.shape[d] == (d == a.dim ? sk_tensor_numel(&index) : x.shape[d]);
  if (!fits) {
    char s1[96];
    char s2[96];
    return invalid(err, "%s: out shape %s is not x shape %s with dim %d of the index's length", kIndexSelect,
                   format_shape(out, s1, sizeof s1), format_shape(x, s2, sizeof s2), a.dim);
  }
  p->dim = a.dim;
  p->outer = 1;
  for (int d = 0; d < a.dim; ++d) p->outer *= x.shape[d];
  p->len = sk_tensor_numel(&index);
  p->inner_rank = x.rank - a.dim - 1;
  return true;
}

// ---- tensor.gather ----

struct GatherPlan {
  Walk walk;  // over out: operand 0 = index, 1 = out, 2 = x without its `dim` stride
  int dim = 0;
  int64_t x_dim_stride = 0;
  int64_t x_dim_size = 0;
};

bool plan_gather(const sk_kernel_args* args, GatherPlan* p, ErrorSink err) {
  sk_index_attrs a{};
  if (!check_arity(args, kGather, 2, 1, err) || !read_attrs(args, kGather, "sk_index_attrs", &a, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& index = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!is_known(x.dtype)) return invalid(err, "%s: x has unknown dtype %d", kGather, x.dtype);
  if (!is_index(index.dtype)) return invalid(err, "%s: index must be i32 or i64", kGather);
  if (!check_tensor(x, kGather, "x", x.dtype, 1, err) || !check_tensor(index, kGather, "index", index.dtype, 1, err) ||
      !check_tensor(out, kGather, "out", x.dtype, 1, err)) {
    return false;
  }
  if (a.dim < 0 || a.dim >= x.rank) return invalid(err, "%s: dim %d is outside x's rank %d", kGather, a.dim, x.rank);
  char s1[96];
  char s2[96];
  bool fits = index.rank == x.rank && same_shape(index, out);
  for (int d = 0; fits && d < x.rank; ++d) fits = d == a.dim || index.shape[d] <= x.shape[d];
  if (!fits) {
    return invalid(err, "%s: index shape %s must have x's rank, fit in x %s outside dim %d, and be out's shape",
                   kGather, format_shape(index, s1, sizeof s1), format_shape(x, s2, sizeof s2), a.dim);
  }
  int64_t strides[3][SK_MAX_RANK] = {};
  for (int d = 0; d < x.rank; ++d) {
    strides[0][d] = index.stride[d];
    strides[1][d] = out.stride[d];
    strides[2][d] = d == a.dim ? 0 : x.stride[d];
  }
  if (!make_walk(out.rank, out.shape, 3, strides, 1, 1, &p->walk)) {
    return invalid(err, "%s: out is a view whose elements overlap in memory", kGather);
  }
  p->dim = a.dim;
  p->x_dim_stride = x.stride[a.dim];
  p->x_dim_size = x.shape[a.dim];
  return true;
}

// ---- tensor.index_copy ----

struct CopyPlan {
  int dim = 0;
  int64_t outer = 1;
  int64_t len = 0;
  bool split = true;  // slabs of dst are disjoint and ordered: several cores may share them
};

bool plan_index_copy(const sk_kernel_args* args, CopyPlan* p, ErrorSink err) {
  sk_index_attrs a{};
  if (!check_arity(args, kIndexCopy, 3, 1, err) || !read_attrs(args, kIndexCopy, "sk_index_attrs", &a, err)) {
    return false;
  }
  const sk_tensor_arg& dst = args->inputs[0];
  const sk_tensor_arg& index = args->inputs[1];
  const sk_tensor_arg& src = args->inputs[2];
  const sk_tensor_arg& out = args->outputs[0];
  if (!is_known(dst.dtype)) return invalid(err, "%s: dst has unknown dtype %d", kIndexCopy, dst.dtype);
  if (!check_tensor(dst, kIndexCopy, "dst", dst.dtype, 1, err) ||
      !check_tensor(src, kIndexCopy, "src", dst.dtype, 1, err) ||
      !check_tensor(out, kIndexCopy, "out", dst.dtype, 1, err)) {
    return false;
  }
  if (!is_index(index.dtype) || index.rank > 1) {
    return invalid(err, "%s: index must be a 1-D i32 or i64 tensor (got %s of rank %d)", kIndexCopy,
                   dtype_str(index.dtype), index.rank);
  }
  if (!check_tensor(index, kIndexCopy, "index", index.dtype, 0, err)) return false;
  if (out.data != dst.data || !same_shape(out, dst) ||
      std::memcmp(out.stride, dst.stride, sizeof(int64_t) * static_cast<size_t>(dst.rank)) != 0) {
    return invalid(err, "%s: out must be the very view of dst (the op updates dst in place)", kIndexCopy);
  }
  if (a.dim < 0 || a.dim >= dst.rank)
    return invalid(err, "%s: dim %d is outside dst's rank %d", kIndexCopy, a.dim, dst.rank);
  bool fits = src.rank == dst.rank;
  for (int d = 0; fits && d < dst.rank; ++d)
    fits = src.shape[d] == (d == a.dim ? sk_tensor_numel(&index) : dst.shape[d]);
  if (!fits) {
    char s1[96];
    char s2[96];
    return invalid(err, "%s: src shape %s is not dst shape %s with dim %d of the index's length", kIndexCopy,
                   format_shape(src, s1, sizeof s1), format_shape(dst, s2, sizeof s2), a.dim);
  }
  p->dim = a.dim;
  p->outer = 1;
  for (int d = 0; d < a.dim; ++d) p->outer *= dst.shape[d];
  p->len = sk_tensor_numel(&index);
  p->split = slabs_ordered(dst, a.dim);
  return true;
}

sk_range copy_split(const CopyPlan& p, int32_t core, int32_t cores) {
  if (!p.split) return core == 0 ? sk_range{0, p.outer} : sk_range{p.outer, p.outer};
  return sk_split_range(p.outer, core, cores, 1);
}

// ---- tensor.index_put ----

struct PutPlan {
  int n_idx = 0;
  int64_t rows = 0;  // N
  bool accumulate = false;
};

bool plan_index_put(const sk_kernel_args* args, PutPlan* p, ErrorSink err) {
  sk_index_put_attrs a{};
  if (args == nullptr || args->num_inputs < 3 || args->num_inputs > 2 + SK_MAX_RANK || args->num_outputs != 1 ||
      args->inputs == nullptr || args->outputs == nullptr) {
    return invalid(err, "%s: expected dst, values and 1 to %d index tensors, and one output", kIndexPut, SK_MAX_RANK);
  }
  if (!read_attrs(args, kIndexPut, "sk_index_put_attrs", &a, err)) return false;
  const sk_tensor_arg& dst = args->inputs[0];
  const sk_tensor_arg& values = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  const int n_idx = args->num_inputs - 2;
  if (!is_known(dst.dtype)) return invalid(err, "%s: dst has unknown dtype %d", kIndexPut, dst.dtype);
  if (!check_tensor(dst, kIndexPut, "dst", dst.dtype, 1, err) ||
      !check_tensor(values, kIndexPut, "values", dst.dtype, 1, err) ||
      !check_tensor(out, kIndexPut, "out", dst.dtype, 1, err)) {
    return false;
  }
  if (out.data != dst.data || !same_shape(out, dst) ||
      std::memcmp(out.stride, dst.stride, sizeof(int64_t) * static_cast<size_t>(dst.rank)) != 0) {
    return invalid(err, "%s: out must be the very view of dst (the op updates dst in place)", kIndexPut);
  }
  if (n_idx > dst.rank) return invalid(err, "%s: %d index tensors for a rank-%d dst", kIndexPut, n_idx, dst.rank);
  const int64_t rows = values.shape[0];
  for (int i = 0; i < n_idx; ++i) {
    const sk_tensor_arg& idx = args->inputs[2 + i];
    if (!is_index(idx.dtype) || idx.rank != 1 || idx.shape[0] != rows) {
      return invalid(err, "%s: index %d must be 1-D i32 or i64 of values' length %lld", kIndexPut, i,
                     static_cast<long long>(rows));
    }
    if (!check_tensor(idx, kIndexPut, "index", idx.dtype, 1, err)) return false;
  }
  bool fits = values.rank == 1 + dst.rank - n_idx;
  for (int d = 1; fits && d < values.rank; ++d) fits = values.shape[d] == dst.shape[n_idx + d - 1];
  if (!fits) {
    char s1[96];
    char s2[96];
    return invalid(err, "%s: values shape %s is not [N] followed by dst shape %s after its %d indexed dims", kIndexPut,
                   format_shape(values, s1, sizeof s1), format_shape(dst, s2, sizeof s2), n_idx);
  }
  p->n_idx = n_idx;
  p->rows = rows;
  p->accumulate = a.accumulate != 0;
  return true;
}

}  // namespace

// ---- Entry points ----

int32_t tensor_index_select_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  SelectPlan p;
  if (!check_core(core, kIndexSelect, err) || !plan_select(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& index = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  const sk_range r = sk_split_range(p.outer * p.len, core->core_id, core->num_cores, 1);
  if (r.begin >= r.end) return SK_OK;  // a core without rows reads nothing (its access says so)
  if (!check_indices(kIndexSelect, "index", index, x.shape[p.dim], p.dim, err)) return SK_ERR_INVALID_ARGUMENT;
  const int64_t elem = sk_dtype_size(x.dtype);
  const int inner = static_cast<int>(p.inner_rank);
  const int64_t istride = index.rank == 1 ? index.stride[0] : 0;
  for (int64_t row = r.begin; row < r.end; ++row) {
    const int64_t o = row / p.len;
    const int64_t l = row % p.len;
    const int64_t v = index_at(index, l * istride);
    const int64_t xo = outer_offset(x, p.dim, o) + v * x.stride[p.dim];
    const int64_t oo = outer_offset(out, p.dim, o) + l * out.stride[p.dim];
    copy_block(elem_ptr(x, xo), x.stride + p.dim + 1, elem_ptr_mut(out, oo), out.stride + p.dim + 1, inner,
               x.shape + p.dim + 1, elem);
  }
  return SK_OK;
}

int32_t tensor_index_select_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                   sk_access_range* ranges, int32_t capacity) {
  SelectPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_select(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.outer * p.len, core_id, num_cores, 1);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end) return list.finish();
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  for (int64_t o = r.begin / p.len; o <= (r.end - 1) / p.len; ++o) add_slab(list, 0, SK_ACCESS_READ, x, p.dim, o);
  add_view(list, 1, SK_ACCESS_READ, args->inputs[1]);
  for (int64_t row = r.begin; row < r.end; ++row) {
    int64_t lo[SK_MAX_RANK] = {};
    int64_t hi[SK_MAX_RANK] = {};
    unflatten(row / p.len, p.dim, out.shape, lo);
    lo[p.dim] = row % p.len;
    for (int d = 0; d < out.rank; ++d) hi[d] = d <= p.dim ? lo[d] : out.shape[d] - 1;
    add_box(list, 2, SK_ACCESS_WRITE, out, lo, hi);
  }
  return list.finish();
}

int32_t tensor_gather_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  GatherPlan p;
  if (!check_core(core, kGather, err) || !plan_gather(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& index = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  const sk_range r = sk_split_range(p.walk.numel, core->core_id, core->num_cores, kElementAlign);
  if (r.begin >= r.end) return SK_OK;  // a core without elements reads nothing (its access says so)
  if (!check_indices(kGather, "index", index, p.x_dim_size, p.dim, err)) return SK_ERR_INVALID_ARGUMENT;
  const int64_t elem = sk_dtype_size(x.dtype);
  const int64_t si = p.walk.inner_stride(0);
  const int64_t so = p.walk.inner_stride(1);
  const int64_t sx = p.walk.inner_stride(2);
  for_each_run(p.walk, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t v = index_at(index, off[0] + i * si);
      std::memcpy(elem_ptr_mut(out, off[1] + i * so), elem_ptr(x, off[2] + i * sx + v * p.x_dim_stride),
                  static_cast<size_t>(elem));
    }
  });
  return SK_OK;
}

int32_t tensor_gather_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                             int32_t capacity) {
  GatherPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_gather(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.walk.numel, core_id, num_cores, kElementAlign);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end) return list.finish();
  const sk_tensor_arg& x = args->inputs[0];
  int64_t lo = 0;
  int64_t hi = 0;
  walk_bounds(p.walk, 2, r.begin, r.end, &lo, &hi);
  const int64_t span = (p.x_dim_size - 1) * p.x_dim_stride;
  const int64_t elem = sk_dtype_size(x.dtype);
  list.add(0, SK_ACCESS_READ, (lo + std::min<int64_t>(0, span)) * elem, (hi + std::max<int64_t>(0, span) + 1) * elem);
  add_view(list, 1, SK_ACCESS_READ, args->inputs[1]);  // every core checks every index
  list.add_walk(p.walk, 1, 2, SK_ACCESS_WRITE, r.begin, r.end, 1, elem);
  return list.finish();
}

int32_t tensor_index_copy_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  CopyPlan p;
  if (!check_core(core, kIndexCopy, err) || !plan_index_copy(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& dst = args->outputs[0];
  const sk_tensor_arg& index = args->inputs[1];
  const sk_tensor_arg& src = args->inputs[2];
  const sk_range r = copy_split(p, core->core_id, core->num_cores);
  if (r.begin >= r.end || p.len == 0) return SK_OK;  // a core without slabs reads nothing
  if (!check_indices(kIndexCopy, "index", index, dst.shape[p.dim], p.dim, err)) return SK_ERR_INVALID_ARGUMENT;
  const int64_t elem = sk_dtype_size(dst.dtype);
  const int inner = dst.rank - p.dim - 1;
  const int64_t istride = index.rank == 1 ? index.stride[0] : 0;
  for (int64_t o = r.begin; o < r.end; ++o) {
    const int64_t d0 = outer_offset(dst, p.dim, o);
    const int64_t s0 = outer_offset(src, p.dim, o);
    // In index order, so a repeated index keeps the last src slice.
    for (int64_t l = 0; l < p.len; ++l) {
      const int64_t v = index_at(index, l * istride);
      copy_block(elem_ptr(src, s0 + l * src.stride[p.dim]), src.stride + p.dim + 1,
                 elem_ptr_mut(dst, d0 + v * dst.stride[p.dim]), dst.stride + p.dim + 1, inner, dst.shape + p.dim + 1,
                 elem);
    }
  }
  return SK_OK;
}

int32_t tensor_index_copy_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                 sk_access_range* ranges, int32_t capacity) {
  CopyPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_index_copy(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = copy_split(p, core_id, num_cores);
  RangeList list(ranges, capacity);
  if (r.begin >= r.end || p.len == 0) return list.finish();
  // dst's slabs are read as well as written: the rows no index names keep their values, so the
  // result depends on them (as an in-place update, the input is the output's very view).
  for (int64_t o = r.begin; o < r.end; ++o) add_slab(list, 0, SK_ACCESS_READ, args->inputs[0], p.dim, o);
  add_view(list, 1, SK_ACCESS_READ, args->inputs[1]);
  for (int64_t o = r.begin; o < r.end; ++o) add_slab(list, 2, SK_ACCESS_READ, args->inputs[2], p.dim, o);
  for (int64_t o = r.begin; o < r.end; ++o) add_slab(list, 3, SK_ACCESS_WRITE, args->outputs[0], p.dim, o);
  return list.finish();
}

int32_t tensor_index_put_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  PutPlan p;
  if (!check_core(core, kIndexPut, err) || !plan_index_put(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& dst = args->outputs[0];
  const sk_tensor_arg& values = args->inputs[1];
  if (core->core_id != 0) return SK_OK;  // one core: the rows it writes are data
  for (int i = 0; i < p.n_idx; ++i) {
    if (!check_indices(kIndexPut, "indices", args->inputs[2 + i], dst.shape[i], i, err)) return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t elem = sk_dtype_size(dst.dtype);
  const int rest = dst.rank - p.n_idx;
  const int64_t* rest_shape = dst.shape + p.n_idx;
  int64_t rest_count = 1;
  for (int d = 0; d < rest; ++d) rest_count *= rest_shape[d];
  const bool float_dst = is_float(dst.dtype);
  for (int64_t i = 0; i < p.rows; ++i) {
    int64_t d0 = 0;
    for (int k = 0; k < p.n_idx; ++k) {
      const sk_tensor_arg& idx = args->inputs[2 + k];
      d0 += index_at(idx, i * idx.stride[0]) * dst.stride[k];
    }
    const int64_t v0 = i * values.stride[0];
    if (!p.accumulate) {
      copy_block(elem_ptr(values, v0), values.stride + 1, elem_ptr_mut(dst, d0), dst.stride + p.n_idx, rest, rest_shape,
                 elem);
      continue;
    }
    int64_t idx[SK_MAX_RANK] = {};
    for (int64_t flat = 0; flat < rest_count; ++flat) {
      unflatten(flat, rest, rest_shape, idx);
      int64_t dof = d0;
      int64_t vof = v0;
      for (int d = 0; d < rest; ++d) {
        dof += idx[d] * dst.stride[p.n_idx + d];
        vof += idx[d] * values.stride[1 + d];
      }
      if (float_dst) {
        float a = 0.0f;
        float b = 0.0f;
        load_f32(dst.dtype, elem_ptr(dst, dof), 1, 1, &a);
        load_f32(values.dtype, elem_ptr(values, vof), 1, 1, &b);
        const float s = a + b;
        store_f32(dst.dtype, &s, 1, elem_ptr_mut(dst, dof), 1);
      } else {
        int64_t a = 0;
        int64_t b = 0;
        load_i64(dst.dtype, elem_ptr(dst, dof), 1, 1, &a);
        load_i64(values.dtype, elem_ptr(values, vof), 1, 1, &b);
        const auto s = static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
        store_i64(dst.dtype, &s, 1, elem_ptr_mut(dst, dof), 1);
      }
    }
  }
  return SK_OK;
}

int32_t tensor_index_put_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                                int32_t capacity) {
  PutPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_index_put(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  RangeList list(ranges, capacity);
  const int32_t n_in = args->num_inputs;
  if (core_id == 0 && p.rows > 0) {
    // dst whole: the rows no index names keep their values (accumulate also adds to them).
    add_view(list, 0, SK_ACCESS_READ, args->inputs[0]);
    add_view(list, 1, SK_ACCESS_READ, args->inputs[1]);
    for (int i = 0; i < p.n_idx; ++i) add_view(list, 2 + i, SK_ACCESS_READ, args->inputs[2 + i]);
    add_view(list, n_in, SK_ACCESS_WRITE, args->outputs[0]);
  }
  return list.finish();
}

}  // namespace sk::kernels
