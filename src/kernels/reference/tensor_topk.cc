// Reference of tensor.topk: every line fully sorted (std::stable_sort of the positions by value,
// NaN above every number), the first k kept.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/reference/reference.h"
#include "kernels/reference/tensor_ref_util.h"
#include "superkernel/attrs_tensor.h"

namespace sk::ref {

int32_t tensor_topk(const sk_kernel_args* args) {
  sk_topk_attrs a{};
  if (!has_operands(args, 1, 2) || !ref_attrs(args, &a)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& values = args->outputs[0];
  const sk_tensor_arg& indices = args->outputs[1];
  if (a.dim < 0 || a.dim >= x.rank || a.k < 0 || a.k > x.shape[a.dim] || indices.dtype != SK_DTYPE_I64 ||
      values.dtype != x.dtype)
    return SK_ERR_INVALID_ARGUMENT;
  // Lines: x's index space with `dim` fixed at 0.
  int64_t line_shape[SK_MAX_RANK] = {};
  for (int d = 0; d < x.rank; ++d) line_shape[d] = d == a.dim ? 1 : x.shape[d];
  const int64_t n = x.shape[a.dim];
  const bool float_x = ref_is_float(x.dtype);
  for_each_index(x.rank, line_shape, [&](const int64_t* base) {
    int64_t idx[SK_MAX_RANK] = {};
    for (int d = 0; d < x.rank; ++d) idx[d] = base[d];
    std::vector<double> fv(static_cast<size_t>(n));
    std::vector<int64_t> iv(static_cast<size_t>(n));
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      idx[a.dim] = i;
      if (float_x) {
        fv[static_cast<size_t>(i)] = read_f64(x.dtype, ref_ptr(x, idx));
      } else {
        iv[static_cast<size_t>(i)] = read_i64(x.dtype, ref_ptr(x, idx));
      }
      order[static_cast<size_t>(i)] = i;
    }
    // "Larger" with NaN above everything; stable_sort keeps equal values in index order.
    const auto larger = [&](int64_t p, int64_t q) {
      if (!float_x) return iv[static_cast<size_t>(p)] > iv[static_cast<size_t>(q)];
      const double u = fv[static_cast<size_t>(p)];
      const double v = fv[static_cast<size_t>(q)];
      if (std::isnan(u) || std::isnan(v)) return std::isnan(u) && !std::isnan(v);
      return u > v;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t p, int64_t q) { return a.largest ? larger(p, q) : larger(q, p); });
    for (int64_t j = 0; j < a.k; ++j) {
      int64_t src[SK_MAX_RANK] = {};
      for (int d = 0; d < x.rank; ++d) src[d] = base[d];
      src[a.dim] = order[static_cast<size_t>(j)];
      int64_t dst[SK_MAX_RANK] = {};
      for (int d = 0; d < x.rank; ++d) dst[d] = base[d];
      dst[a.dim] = j;
      std::memcpy(ref_ptr_mut(values, dst), ref_ptr(x, src), static_cast<size_t>(sk_dtype_size(x.dtype)));
      write_from_i64(SK_DTYPE_I64, ref_ptr_mut(indices, dst), src[a.dim]);
    }
  });
  return SK_OK;
}

}  // namespace sk::ref
