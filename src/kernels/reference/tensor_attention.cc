// References of tensor.batched_mm and tensor.sdpa: double-precision sums over multi-indices, the
// softmax with the row maximum subtracted, fully masked rows giving zeros.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/reference/reference.h"
#include "kernels/reference/tensor_ref_util.h"
#include "superkernel/attrs_tensor.h"

namespace sk::ref {

int32_t tensor_batched_mm(const sk_kernel_args* args) {
  if (!has_operands(args, 2, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& a = args->inputs[0];
  const sk_tensor_arg& b = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (a.rank < 2 || b.rank < 2 || out.rank < 2 || a.dtype != b.dtype || out.dtype != a.dtype || !ref_is_float(a.dtype))
    return SK_ERR_INVALID_ARGUMENT;
  const int64_t k = a.shape[a.rank - 1];
  if (b.shape[b.rank - 2] != k) return SK_ERR_INVALID_ARGUMENT;
  bool bad = false;
  for_each_index(out.rank, out.shape, [&](const int64_t* idx) {
    // a's and b's indices: batch dims right-aligned (size 1 broadcasts), then the matrix dims.
    int64_t ai[SK_MAX_RANK] = {};
    int64_t bi[SK_MAX_RANK] = {};
    const int batch = out.rank - 2;
    for (int d = 0; d < a.rank - 2; ++d) {
      const int od = batch - (a.rank - 2) + d;
      if (od < 0) return void(bad = true);
      ai[d] = a.shape[d] == 1 ? 0 : idx[od];
    }
    for (int d = 0; d < b.rank - 2; ++d) {
      const int od = batch - (b.rank - 2) + d;
      if (od < 0) return void(bad = true);
      bi[d] = b.shape[d] == 1 ? 0 : idx[od];
    }
    ai[a.rank - 2] = idx[out.rank - 2];
    bi[b.rank - 1] = idx[out.rank - 1];
    double sum = 0.0;
    for (int64_t i = 0; i < k; ++i) {
      ai[a.rank - 1] = i;
      bi[b.rank - 2] = i;
      sum += read_f64(a.dtype, ref_ptr(a, ai)) * read_f64(b.dtype, ref_ptr(b, bi));
    }
    write_from_f64(out.dtype, ref_ptr_mut(out, idx), sum);
  });
  return bad ? SK_ERR_INVALID_ARGUMENT : SK_OK;
}

int32_t tensor_sdpa(const sk_kernel_args* args) {
  sk_sdpa_attrs at{};
  if (args == nullptr || (args->num_inputs != 3 && args->num_inputs != 4) || args->num_outputs != 1 ||
      !ref_attrs(args, &at))
    return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& q = args->inputs[0];
  const sk_tensor_arg& k = args->inputs[1];
  const sk_tensor_arg& v = args->inputs[2];
  const sk_tensor_arg& out = args->outputs[0];
  const bool has_mask = args->num_inputs == 4;
  if (q.rank != 4 || k.rank != 4 || v.rank != 4 || out.rank != 4 || k.shape[1] == 0 || q.shape[1] % k.shape[1] != 0)
    return SK_ERR_INVALID_ARGUMENT;
  const int64_t lk = k.shape[2];
  const int64_t d = q.shape[3];
  const int64_t group = q.shape[1] / k.shape[1];
  const int64_t rows_shape[3] = {q.shape[0], q.shape[1], q.shape[2]};
  for_each_index(3, rows_shape, [&](const int64_t* r) {
    const int64_t b = r[0];
    const int64_t h = r[1];
    const int64_t i = r[2];
    std::vector<double> s(static_cast<size_t>(lk));
    std::vector<bool> allowed(static_cast<size_t>(lk), true);
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < lk; ++j) {
      double dot = 0.0;
      for (int64_t c = 0; c < d; ++c) {
        const int64_t qi[4] = {b, h, i, c};
        const int64_t ki[4] = {b, h / group, j, c};
        dot += read_f64(q.dtype, ref_ptr(q, qi)) * read_f64(k.dtype, ref_ptr(k, ki));
      }
      double sj = dot * at.scale;
      if (at.is_causal && j > i) allowed[static_cast<size_t>(j)] = false;
      if (has_mask) {
        const sk_tensor_arg& mask = args->inputs[3];
        const int64_t mi[4] = {b, h, i, j};
        const double mv = read_f64(mask.dtype, ref_ptr(mask, mi));
        // A false bool entry and a -inf float entry both exclude the key, whatever its score.
        if (mask.dtype == SK_DTYPE_BOOL ? mv == 0.0 : mv == -std::numeric_limits<double>::infinity()) {
          allowed[static_cast<size_t>(j)] = false;
        } else if (mask.dtype != SK_DTYPE_BOOL) {
          sj += mv;
        }
      }
      if (!allowed[static_cast<size_t>(j)]) sj = -std::numeric_limits<double>::infinity();
      s[static_cast<size_t>(j)] = sj;
      m = std::max(m, sj);
    }
    const int64_t dv = v.shape[3];
    for (int64_t c = 0; c < dv; ++c) {
      double num = 0.0;
      double den = 0.0;
      if (m > -std::numeric_limits<double>::infinity()) {
        for (int64_t j = 0; j < lk; ++j) {
          const double p = std::exp(s[static_cast<size_t>(j)] - m);
          const int64_t vi[4] = {b, h / group, j, c};
          den += p;
          if (p != 0.0) num += p * read_f64(v.dtype, ref_ptr(v, vi));
        }
      }
      const int64_t oi[4] = {b, h, i, c};
      write_from_f64(out.dtype, ref_ptr_mut(out, oi), den > 0.0 ? num / den : 0.0);
    }
  });
  return SK_OK;
}

}  // namespace sk::ref
