#include <cmath>

#include "kernels/reference/ref_util.h"
#include "kernels/reference/reference.h"

namespace sk::ref {
namespace {

// b broadcasts numpy-style when `broadcast` (right-aligned, each dimension equal or 1),
// otherwise it must have a's shape.
template <class Op>
int32_t binary(const sk_kernel_args* args, bool broadcast, Op op) {
  if (!has_operands(args, 2, 1) || !all_f32(args)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& a = args->inputs[0];
  const sk_tensor_arg& b = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!same_shape(a, out)) return SK_ERR_INVALID_ARGUMENT;
  const int lead = a.rank - b.rank;
  if (lead < 0 || (!broadcast && lead != 0)) return SK_ERR_INVALID_ARGUMENT;
  for (int d = 0; d < b.rank; ++d) {
    const bool ok = b.shape[d] == a.shape[lead + d] || (broadcast && b.shape[d] == 1);
    if (!ok) return SK_ERR_INVALID_ARGUMENT;
  }
  for_each_index(a.rank, a.shape, [&](const int64_t* idx) {
    int64_t bidx[SK_MAX_RANK] = {};
    for (int d = 0; d < b.rank; ++d) bidx[d] = b.shape[d] == 1 ? 0 : idx[lead + d];
    const double va = f32_at(a, idx);
    const double vb = f32_at(b, bidx);
    f32_at(out, idx) = static_cast<float>(op(va, vb));
  });
  return SK_OK;
}

}  // namespace

int32_t add_f32(const sk_kernel_args* args) {
  return binary(args, true, [](double a, double b) { return a + b; });
}

int32_t mul_f32(const sk_kernel_args* args) {
  return binary(args, true, [](double a, double b) { return a * b; });
}

int32_t silu_mul_f32(const sk_kernel_args* args) {
  return binary(args, false, [](double g, double u) { return g / (1.0 + std::exp(-g)) * u; });
}

}  // namespace sk::ref
