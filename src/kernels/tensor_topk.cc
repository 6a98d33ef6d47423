// tensor.topk: the k largest (or smallest) elements of every line of x along `dim`, best first,
// as values (x's dtype, the elements' own bits) and i64 indices. The order is total: better value
// first, NaN counting as larger than every number, equal values by lower index; so the result is
// unique and every core count and layout gives the same bytes.
//
// The slabs of the dims before `dim` are split between cores (a line along the last dim is one
// slab). A line's values and positions go to the core's workspace slice and std::partial_sort
// orders the first k with that comparison.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/tensor_common.h"
#include "superkernel/attrs_tensor.h"

namespace sk::kernels {
namespace {

using namespace tensor;

constexpr const char* kTopk = "tensor.topk";

struct TopkPlan {
  int dim = 0;
  int64_t k = 0;
  bool largest = true;
  int64_t outer = 1;  // slabs
  int64_t n = 0;      // line length
  int64_t inner = 1;  // lines per slab
};

bool plan_topk(const sk_kernel_args* args, TopkPlan* p, ErrorSink err) {
  sk_topk_attrs a{};
  if (!check_arity(args, kTopk, 1, 2, err) || !read_attrs(args, kTopk, "sk_topk_attrs", &a, err)) return false;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& values = args->outputs[0];
  const sk_tensor_arg& indices = args->outputs[1];
  if (!is_float(x.dtype) && !is_int(x.dtype)) {
    return invalid(err, "%s: x has dtype %s, expected a float or integer dtype", kTopk, dtype_str(x.dtype));
  }
  if (!check_tensor(x, kTopk, "x", x.dtype, 1, err) || !check_tensor(values, kTopk, "values", x.dtype, 1, err) ||
      !check_tensor(indices, kTopk, "indices", SK_DTYPE_I64, 1, err)) {
    return false;
  }
  if (a.dim < 0 || a.dim >= x.rank) return invalid(err, "%s: dim %d is outside x's rank %d", kTopk, a.dim, x.rank);
  if (a.k < 0 || a.k > x.shape[a.dim]) {
    return invalid(err, "%s: k = %lld is outside [0, %lld]", kTopk, static_cast<long long>(a.k),
                   static_cast<long long>(x.shape[a.dim]));
  }
  bool fits = same_shape(values, indices) && values.rank == x.rank;
  for (int d = 0; fits && d < x.rank; ++d) fits = values.shape[d] == (d == a.dim ? a.k : x.shape[d]);
  if (!fits) {
    char s1[96];
    char s2[96];
    return invalid(err, "%s: values %s and indices must be x's shape %s with k along dim %d", kTopk,
                   format_shape(values, s1, sizeof s1), format_shape(x, s2, sizeof s2), a.dim);
  }
  p->dim = a.dim;
  p->k = a.k;
  p->largest = a.largest != 0;
  p->outer = 1;
  p->inner = 1;
  for (int d = 0; d < x.rank; ++d) {
    if (d < a.dim) p->outer *= x.shape[d];
    if (d > a.dim) p->inner *= x.shape[d];
  }
  p->n = x.shape[a.dim];
  return true;
}

// Per-core scratch: a line's values (as f32 or i64) and their positions.
struct Scratch {
  void* values;
  int64_t* order;
};

Scratch carve(const TopkPlan& p, void* base, uint64_t* bytes) {
  ScratchCarver c(base);
  Scratch s{c.take<int64_t>(p.n), c.take<int64_t>(p.n)};
  if (bytes != nullptr) *bytes = c.bytes();
  return s;
}

// a ranks before b.
template <class T>
bool ranks_before(T va, int64_t ia, T vb, int64_t ib, bool largest) {
  const bool na = va != va;  // NaN (never for integers)
  const bool nb = vb != vb;
  if (na != nb) return largest ? na : nb;
  if (!na && va != vb) return largest ? va > vb : va < vb;
  return ia < ib;
}

template <class T>
void select_line(const TopkPlan& p, const sk_tensor_arg& x, int64_t x0, const sk_tensor_arg& values, int64_t v0,
                 const sk_tensor_arg& indices, int64_t i0, const Scratch& s) {
  T* vals = static_cast<T*>(s.values);
  const int64_t sx = x.stride[p.dim];
  if constexpr (sizeof(T) == 4) {
    load_f32(x.dtype, elem_ptr(x, x0), sx, p.n, reinterpret_cast<float*>(vals));
  } else {
    load_i64(x.dtype, elem_ptr(x, x0), sx, p.n, reinterpret_cast<int64_t*>(vals));
  }
  for (int64_t i = 0; i < p.n; ++i) s.order[i] = i;
  const bool largest = p.largest;
  std::partial_sort(s.order, s.order + p.k, s.order + p.n,
                    [&](int64_t a, int64_t b) { return ranks_before<T>(vals[a], a, vals[b], b, largest); });
  const int64_t elem = sk_dtype_size(x.dtype);
  for (int64_t j = 0; j < p.k; ++j) {
    const int64_t src = s.order[j];
    std::memcpy(elem_ptr_mut(values, v0 + j * values.stride[p.dim]), elem_ptr(x, x0 + src * sx),
                static_cast<size_t>(elem));
    std::memcpy(elem_ptr_mut(indices, i0 + j * indices.stride[p.dim]), &src, sizeof src);
  }
}

int64_t line_offset(const sk_tensor_arg& t, int dim, int64_t o, int64_t j) {
  int64_t idx[SK_MAX_RANK] = {};
  unflatten(o, dim, t.shape, idx);
  unflatten(j, t.rank - dim - 1, t.shape + dim + 1, idx + dim + 1);
  int64_t off = 0;
  for (int d = 0; d < t.rank; ++d) off += idx[d] * t.stride[d];
  return off;
}

}  // namespace

uint64_t tensor_topk_workspace(const sk_kernel_args* args) {
  TopkPlan p;
  if (!plan_topk(args, &p, ErrorSink{nullptr, 0, /*shapes_only=*/true})) return 0;
  uint64_t bytes = 0;
  carve(p, nullptr, &bytes);
  return bytes;
}

int32_t tensor_topk_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  TopkPlan p;
  if (!check_core(core, kTopk, err) || !plan_topk(args, &p, err)) return SK_ERR_INVALID_ARGUMENT;
  uint64_t need = 0;
  carve(p, nullptr, &need);
  if (args->workspace == nullptr || args->workspace_size < need) return workspace_too_small(err, kTopk, args, need);
  const Scratch s = carve(p, core_slice(args, core), nullptr);
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& values = args->outputs[0];
  const sk_tensor_arg& indices = args->outputs[1];
  const sk_range r = sk_split_range(p.outer, core->core_id, core->num_cores, 1);
  if (p.k == 0) return SK_OK;
  for (int64_t o = r.begin; o < r.end; ++o) {
    for (int64_t j = 0; j < p.inner; ++j) {
      const int64_t x0 = line_offset(x, p.dim, o, j);
      const int64_t v0 = line_offset(values, p.dim, o, j);
      const int64_t i0 = line_offset(indices, p.dim, o, j);
      if (is_float(x.dtype)) {
        select_line<float>(p, x, x0, values, v0, indices, i0, s);
      } else {
        select_line<int64_t>(p, x, x0, values, v0, indices, i0, s);
      }
    }
  }
  return SK_OK;
}

int32_t tensor_topk_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                           int32_t capacity) {
  TopkPlan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan_topk(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  const sk_range r = sk_split_range(p.outer, core_id, num_cores, 1);
  RangeList list(ranges, capacity);
  if (p.k == 0 || p.inner == 0) return list.finish();
  const sk_tensor_arg* operands[3] = {&args->inputs[0], &args->outputs[0], &args->outputs[1]};
  const int32_t modes[3] = {SK_ACCESS_READ, SK_ACCESS_WRITE, SK_ACCESS_WRITE};
  for (int op = 0; op < 3; ++op) {
    const sk_tensor_arg& t = *operands[op];
    for (int64_t o = r.begin; o < r.end; ++o) {
      int64_t lo[SK_MAX_RANK] = {};
      int64_t hi[SK_MAX_RANK] = {};
      unflatten(o, p.dim, t.shape, lo);
      for (int d = 0; d < t.rank; ++d) hi[d] = d < p.dim ? lo[d] : t.shape[d] - 1;
      add_box(list, op, modes[op], t, lo, hi);
    }
  }
  return list.finish();
}

}  // namespace sk::kernels
