#include "kernels/reference/ref_util.h"
#include "kernels/reference/reference.h"

namespace sk::ref {

// out[t..., :] = table[ids[t...], :]; any id outside [0, V) is an error (nothing is written).
int32_t embedding_f32(const sk_kernel_args* args) {
  if (!has_operands(args, 2, 1)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& ids = args->inputs[0];
  const sk_tensor_arg& table = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (ids.dtype != SK_DTYPE_I32 || table.dtype != SK_DTYPE_F32 || out.dtype != SK_DTYPE_F32) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  if (table.rank != 2 || out.rank != ids.rank + 1) return SK_ERR_INVALID_ARGUMENT;
  const int64_t v = table.shape[0];
  const int64_t d = table.shape[1];
  if (out.shape[ids.rank] != d) return SK_ERR_INVALID_ARGUMENT;
  for (int i = 0; i < ids.rank; ++i) {
    if (out.shape[i] != ids.shape[i]) return SK_ERR_INVALID_ARGUMENT;
  }
  const auto id_at = [&](const int64_t* idx) { return static_cast<const int32_t*>(ids.data)[offset_of(ids, idx)]; };
  bool ok = true;
  for_each_index(ids.rank, ids.shape, [&](const int64_t* idx) {
    const int32_t id = id_at(idx);
    ok = ok && id >= 0 && id < v;
  });
  if (!ok) return SK_ERR_INVALID_ARGUMENT;
  for_each_index(ids.rank, ids.shape, [&](const int64_t* idx) {
    int64_t oi[SK_MAX_RANK] = {};
    for (int i = 0; i < ids.rank; ++i) oi[i] = idx[i];
    int64_t ti[2] = {id_at(idx), 0};
    for (ti[1] = 0; ti[1] < d; ++ti[1]) {
      oi[ids.rank] = ti[1];
      f32_at(out, oi) = f32_at(table, ti);
    }
  });
  return SK_OK;
}

}  // namespace sk::ref
