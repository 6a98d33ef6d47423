// References of tensor.reduce and tensor.cumsum: every output element by a loop over its reduced
// multi-indices in row-major order, floats accumulated in double, integers exactly.
#include <cmath>

#include "kernels/reference/reference.h"
#include "kernels/reference/tensor_ref_util.h"
#include "superkernel/attrs_tensor.h"

namespace sk::ref {

int32_t tensor_reduce(const sk_kernel_args* args) {
  sk_reduce_attrs a{};
  if (!has_operands(args, 1, 1) || !ref_attrs(args, &a) || a.op < 0 || a.op >= SK_REDUCE_OP_COUNT)
    return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  if ((a.dims_mask >> x.rank) != 0) return SK_ERR_INVALID_ARGUMENT;
  // Shapes of the kept and the reduced index spaces.
  int64_t kept_shape[SK_MAX_RANK] = {};
  int64_t red_shape[SK_MAX_RANK] = {};
  int kept = 0;
  int red = 0;
  int64_t count = 1;
  for (int d = 0; d < x.rank; ++d) {
    if (a.dims_mask & (1u << d)) {
      red_shape[red++] = x.shape[d];
      count *= x.shape[d];
    } else {
      kept_shape[kept++] = x.shape[d];
    }
  }
  const int want_rank = a.keepdim ? x.rank : kept;
  if (out.rank != want_rank) return SK_ERR_INVALID_ARGUMENT;
  const bool float_x = ref_is_float(x.dtype);
  const bool arg = a.op == SK_REDUCE_ARGMAX || a.op == SK_REDUCE_ARGMIN;
  if ((a.op == SK_REDUCE_MEAN && !float_x) || (a.op > SK_REDUCE_MEAN && count == 0)) return SK_ERR_INVALID_ARGUMENT;
  for_each_index(kept, kept_shape, [&](const int64_t* kidx) {
    int64_t out_idx[SK_MAX_RANK] = {};
    int64_t xidx[SK_MAX_RANK] = {};
    for (int d = 0, k = 0, o = 0; d < x.rank; ++d) {
      if (a.dims_mask & (1u << d)) {
        if (a.keepdim) out_idx[o++] = 0;
      } else {
        xidx[d] = kidx[k];
        out_idx[o++] = kidx[k++];
      }
    }
    double sum = 0.0;
    uint64_t isum = 0;
    double best = 0.0;
    int64_t ibest = 0;
    int64_t best_pos = -1;
    int64_t pos = 0;
    for_each_index(red, red_shape, [&](const int64_t* ridx) {
      for (int d = 0, r = 0; d < x.rank; ++d) {
        if (a.dims_mask & (1u << d)) xidx[d] = ridx[r++];
      }
      const unsigned char* p = ref_ptr(x, xidx);
      if (float_x) {
        const double v = read_f64(x.dtype, p);
        sum += v;
        const bool max_like = a.op == SK_REDUCE_MAX || a.op == SK_REDUCE_ARGMAX;
        bool take = best_pos < 0;
        if (!take && std::isnan(v)) take = !std::isnan(best);
        if (!take && !std::isnan(v) && !std::isnan(best)) take = max_like ? v > best : v < best;
        if (take) {
          best = v;
          best_pos = pos;
        }
      } else {
        const int64_t v = read_i64(x.dtype, p);
        isum += static_cast<uint64_t>(v);
        const bool max_like = a.op == SK_REDUCE_MAX || a.op == SK_REDUCE_ARGMAX;
        if (best_pos < 0 || (max_like ? v > ibest : v < ibest)) {
          ibest = v;
          best_pos = pos;
        }
      }
      ++pos;
    });
    unsigned char* dst = ref_ptr_mut(out, out_idx);
    if (arg) {
      write_from_i64(out.dtype, dst, best_pos);
    } else if (!float_x) {
      write_from_i64(out.dtype, dst, a.op == SK_REDUCE_SUM ? static_cast<int64_t>(isum) : ibest);
    } else if (a.op == SK_REDUCE_SUM) {
      write_from_f64(out.dtype, dst, sum);
    } else if (a.op == SK_REDUCE_MEAN) {
      write_from_f64(out.dtype, dst, sum / static_cast<double>(count));
    } else {
      write_from_f64(out.dtype, dst, best);
    }
  });
  return SK_OK;
}

int32_t tensor_cumsum(const sk_kernel_args* args) {
  sk_cumsum_attrs a{};
  if (!has_operands(args, 1, 1) || !ref_attrs(args, &a)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& out = args->outputs[0];
  if (!same_shape(x, out) || a.dim < 0 || a.dim >= x.rank) return SK_ERR_INVALID_ARGUMENT;
  const bool float_x = ref_is_float(x.dtype);
  for_each_index(out.rank, out.shape, [&](const int64_t* idx) {
    int64_t j[SK_MAX_RANK] = {};
    for (int d = 0; d < x.rank; ++d) j[d] = idx[d];
    double sum = 0.0;
    uint64_t isum = 0;
    for (int64_t i = 0; i <= idx[a.dim]; ++i) {
      j[a.dim] = i;
      if (float_x) {
        sum += read_f64(x.dtype, ref_ptr(x, j));
      } else {
        isum += static_cast<uint64_t>(read_i64(x.dtype, ref_ptr(x, j)));
      }
    }
    if (float_x) {
      write_from_f64(out.dtype, ref_ptr_mut(out, idx), sum);
    } else {
      write_from_i64(out.dtype, ref_ptr_mut(out, idx), static_cast<int64_t>(isum));
    }
  });
  return SK_OK;
}

}  // namespace sk::ref
