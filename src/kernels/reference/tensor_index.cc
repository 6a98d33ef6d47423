// References of tensor.index_select, tensor.gather, tensor.index_copy and tensor.index_put: one
// element at a time by multi-index, after checking every index (SK_ERR_INVALID_ARGUMENT when one
// is out of range, with nothing written).
#include <cstring>

#include "kernels/reference/reference.h"
#include "kernels/reference/tensor_ref_util.h"
#include "superkernel/attrs_tensor.h"

namespace sk::ref {
namespace {

bool is_index_dtype(int32_t d) { return d == SK_DTYPE_I32 || d == SK_DTYPE_I64; }

int64_t index_value(const sk_tensor_arg& t, const int64_t* idx) { return read_i64(t.dtype, ref_ptr(t, idx)); }

bool all_in_range(const sk_tensor_arg& index, int64_t size) {
  bool ok = true;
  for_each_index(index.rank, index.shape, [&](const int64_t* idx) {
    const int64_t v = index_value(index, idx);
    ok = ok && v >= 0 && v < size;
  });
  return ok;
}

void copy_element(const sk_tensor_arg& from, const int64_t* fi, const sk_tensor_arg& to, const int64_t* ti) {
  std::memcpy(ref_ptr_mut(to, ti), ref_ptr(from, fi), static_cast<size_t>(sk_dtype_size(to.dtype)));
}

}  // namespace

int32_t tensor_index_select(const sk_kernel_args* args) {
  sk_index_attrs a{};
  if (!has_operands(args, 2, 1) || !ref_attrs(args, &a)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& index = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (a.dim < 0 || a.dim >= x.rank || !is_index_dtype(index.dtype) || index.rank > 1 || out.rank != x.rank ||
      !all_in_range(index, x.shape[a.dim]))
    return SK_ERR_INVALID_ARGUMENT;
  for_each_index(out.rank, out.shape, [&](const int64_t* idx) {
    int64_t xi[SK_MAX_RANK] = {};
    for (int d = 0; d < x.rank; ++d) xi[d] = idx[d];
    const int64_t pos[1] = {idx[a.dim]};
    xi[a.dim] = index_value(index, pos);
    copy_element(x, xi, out, idx);
  });
  return SK_OK;
}

int32_t tensor_gather(const sk_kernel_args* args) {
  sk_index_attrs a{};
  if (!has_operands(args, 2, 1) || !ref_attrs(args, &a)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& index = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (a.dim < 0 || a.dim >= x.rank || !is_index_dtype(index.dtype) || index.rank != x.rank || !same_shape(index, out) ||
      !all_in_range(index, x.shape[a.dim]))
    return SK_ERR_INVALID_ARGUMENT;
  for_each_index(out.rank, out.shape, [&](const int64_t* idx) {
    int64_t xi[SK_MAX_RANK] = {};
    for (int d = 0; d < x.rank; ++d) xi[d] = idx[d];
    xi[a.dim] = index_value(index, idx);
    copy_element(x, xi, out, idx);
  });
  return SK_OK;
}

int32_t tensor_index_copy(const sk_kernel_args* args) {
  sk_index_attrs a{};
  if (!has_operands(args, 3, 1) || !ref_attrs(args, &a)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& index = args->inputs[1];
  const sk_tensor_arg& src = args->inputs[2];
  const sk_tensor_arg& dst = args->outputs[0];
  if (a.dim < 0 || a.dim >= dst.rank || !is_index_dtype(index.dtype) || index.rank > 1 || src.rank != dst.rank ||
      !all_in_range(index, dst.shape[a.dim]))
    return SK_ERR_INVALID_ARGUMENT;
  // In src order, so that a repeated index keeps the last slice.
  for_each_index(src.rank, src.shape, [&](const int64_t* idx) {
    int64_t di[SK_MAX_RANK] = {};
    for (int d = 0; d < dst.rank; ++d) di[d] = idx[d];
    const int64_t pos[1] = {idx[a.dim]};
    di[a.dim] = index_value(index, pos);
    copy_element(src, idx, dst, di);
  });
  return SK_OK;
}

int32_t tensor_index_put(const sk_kernel_args* args) {
  sk_index_put_attrs a{};
  if (args == nullptr || args->num_inputs < 3 || args->num_outputs != 1 || !ref_attrs(args, &a))
    return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& values = args->inputs[1];
  const sk_tensor_arg& dst = args->outputs[0];
  const int n = args->num_inputs - 2;
  if (n > dst.rank || values.rank != 1 + dst.rank - n) return SK_ERR_INVALID_ARGUMENT;
  for (int k = 0; k < n; ++k) {
    const sk_tensor_arg& idx = args->inputs[2 + k];
    if (!is_index_dtype(idx.dtype) || idx.rank != 1 || idx.shape[0] != values.shape[0] ||
        !all_in_range(idx, dst.shape[k]))
      return SK_ERR_INVALID_ARGUMENT;
  }
  for_each_index(values.rank, values.shape, [&](const int64_t* vi) {
    int64_t di[SK_MAX_RANK] = {};
    const int64_t row[1] = {vi[0]};
    for (int k = 0; k < n; ++k) di[k] = index_value(args->inputs[2 + k], row);
    for (int d = 1; d < values.rank; ++d) di[n + d - 1] = vi[d];
    unsigned char* p = ref_ptr_mut(dst, di);
    if (!a.accumulate) {
      copy_element(values, vi, dst, di);
    } else if (ref_is_float(dst.dtype)) {
      write_from_f64(dst.dtype, p, read_f64(dst.dtype, p) + read_f64(values.dtype, ref_ptr(values, vi)));
    } else {
      const uint64_t s = static_cast<uint64_t>(read_i64(dst.dtype, p)) +
                         static_cast<uint64_t>(read_i64(values.dtype, ref_ptr(values, vi)));
      write_from_i64(dst.dtype, p, static_cast<int64_t>(s));
    }
  });
  return SK_OK;
}

}  // namespace sk::ref
