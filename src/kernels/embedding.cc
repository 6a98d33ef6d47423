// embedding.f32: out[t..., :] = table[ids[t...], :] with ids i32 of any shape, table [V, D].
//
// Prefill (T >= cores) splits tokens; decode (few tokens) splits the D columns instead, so
// every core still has work. Every core validates all ids before writing anything, so a bad
// id fails the call on every core with the same message and leaves out untouched.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kernels/kernel_util.h"
#include "kernels/kernels.h"

namespace sk::kernels {
namespace {

constexpr const char* kName = "embedding.f32";
enum { kOpIds = 0, kOpTable = 1, kOpOut = 2 };
// Walk operands: 0 = ids (one id per index), 1 = out (one row of D per index).
enum { kWalkIds = 0, kWalkOut = 1 };

struct Plan {
  Walk tokens;
  int64_t t = 0;
  int64_t v = 0;
  int64_t d = 0;
  int64_t table_stride = 0;
  const sk_tensor_arg* ids = nullptr;
  const float* table = nullptr;
  float* out = nullptr;
};

bool plan(const sk_kernel_args* args, Plan* p, ErrorSink err) {
  if (!check_arity(args, kName, 2, 1, err)) return false;
  const sk_tensor_arg& ids = args->inputs[0];
  const sk_tensor_arg& table = args->inputs[1];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(ids, kName, "ids", SK_DTYPE_I32, 0, err) ||
      !check_tensor(table, kName, "table", SK_DTYPE_F32, 2, err) ||
      !check_tensor(out, kName, "out", SK_DTYPE_F32, 1, err)) {
    return false;
  }
  char s1[96];
  char s2[96];
  if (table.rank != 2) {
    return invalid(err, "%s: table shape %s is not [V, D]", kName, format_shape(table, s1, sizeof s1));
  }
  const int64_t d = table.shape[1];
  bool out_ok = out.rank == ids.rank + 1 && out.shape[ids.rank] == d;
  for (int i = 0; out_ok && i < ids.rank; ++i) out_ok = out.shape[i] == ids.shape[i];
  if (!out_ok) {
    return invalid(err, "%s: out shape %s is not ids shape %s followed by D = %lld", kName,
                   format_shape(out, s1, sizeof s1), format_shape(ids, s2, sizeof s2), static_cast<long long>(d));
  }
  if (!last_dim_contiguous(table) || !last_dim_contiguous(out)) {
    return invalid(err, "%s: the last dimension of table and out must have stride 1", kName);
  }
  int64_t strides[2][SK_MAX_RANK] = {};
  for (int i = 0; i < ids.rank; ++i) {
    strides[kWalkIds][i] = ids.stride[i];
    strides[kWalkOut][i] = out.stride[i];
  }
  if (!make_walk(ids.rank, ids.shape, 2, strides, kWalkOut, d, &p->tokens)) {
    return invalid(err, "%s: out is a view whose rows overlap in memory", kName);
  }
  p->t = p->tokens.numel;
  p->v = table.shape[0];
  p->d = d;
  p->table_stride = table.stride[0];
  p->ids = &ids;
  p->table = static_cast<const float*>(table.data);
  p->out = static_cast<float*>(out.data);
  return true;
}

// Checks ids in logical (row-major) order so the first bad one reported is the same on every
// core and in every run.
bool check_ids(const Plan& p, ErrorSink err) {
  const sk_tensor_arg& ids = *p.ids;
  const int32_t* data = static_cast<const int32_t*>(ids.data);
  int64_t idx[SK_MAX_RANK] = {};
  for (int64_t flat = 0; flat < p.t; ++flat) {
    int64_t off = 0;
    for (int i = 0; i < ids.rank; ++i) off += idx[i] * ids.stride[i];
    const int32_t id = data[off];
    if (id < 0 || id >= p.v) {
      char pos[128];
      int used = 0;
      for (int i = 0; i < ids.rank; ++i) {
        used += std::snprintf(pos + used, sizeof pos - static_cast<size_t>(used), "%s%lld", i == 0 ? "" : ", ",
                              static_cast<long long>(idx[i]));
      }
      return invalid(err, "%s: ids[%s] (position %lld) = %d is out of range for a table of %lld rows", kName, pos,
                     static_cast<long long>(flat), id, static_cast<long long>(p.v));
    }
    for (int i = ids.rank - 1; i >= 0; --i) {
      if (++idx[i] < ids.shape[i]) break;
      idx[i] = 0;
    }
  }
  return true;
}

// Decode-sized calls split columns: a token count below the core count would leave cores idle.
bool split_columns(const Plan& p, int32_t num_cores) { return p.t < num_cores; }

const int32_t* ids_data(const Plan& p) { return static_cast<const int32_t*>(p.ids->data); }

}  // namespace

int32_t embedding_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, kName, err) || !plan(args, &p, err) || !check_ids(p, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  if (p.d == 0) return SK_OK;
  const int32_t* ids = ids_data(p);
  const int64_t s_ids = p.tokens.inner_stride(kWalkIds);
  const int64_t s_out = p.tokens.inner_stride(kWalkOut);
  if (split_columns(p, core->num_cores)) {
    const sk_range c = sk_split_range(p.d, core->core_id, core->num_cores, kElementAlign);
    if (c.begin >= c.end) return SK_OK;
    const size_t bytes = static_cast<size_t>(c.end - c.begin) * sizeof(float);
    for_each_run(p.tokens, 0, p.t, [&](const int64_t* off, int64_t len) {
      for (int64_t i = 0; i < len; ++i) {
        const int64_t id = ids[off[kWalkIds] + i * s_ids];
        std::memcpy(p.out + off[kWalkOut] + i * s_out + c.begin, p.table + id * p.table_stride + c.begin, bytes);
      }
    });
    return SK_OK;
  }
  const sk_range r = sk_split_range(p.t, core->core_id, core->num_cores, 1);
  const size_t bytes = static_cast<size_t>(p.d) * sizeof(float);
  for_each_run(p.tokens, r.begin, r.end, [&](const int64_t* off, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      const int64_t id = ids[off[kWalkIds] + i * s_ids];
      std::memcpy(p.out + off[kWalkOut] + i * s_out, p.table + id * p.table_stride, bytes);
    }
  });
  return SK_OK;
}

int32_t embedding_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges,
                             int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  constexpr int64_t kF = sizeof(float);
  RangeList list(ranges, capacity);
  if (p.t == 0) return list.finish();
  // Every core validates every id.
  list.add_walk(p.tokens, kWalkIds, kOpIds, SK_ACCESS_READ, 0, p.t, 1, sizeof(int32_t));
  if (p.d == 0 || p.v == 0) return list.finish();
  // The rows read depend on the ids, so the table range covers every row (this core's
  // columns of it when columns are split).
  const int64_t last_row = (p.v - 1) * p.table_stride;
  const int64_t row_lo = std::min<int64_t>(0, last_row);
  const int64_t row_hi = std::max<int64_t>(0, last_row);
  if (split_columns(p, num_cores)) {
    const sk_range c = sk_split_range(p.d, core_id, num_cores, kElementAlign);
    if (c.begin >= c.end) return list.finish();
    list.add(kOpTable, SK_ACCESS_READ, (row_lo + c.begin) * kF, (row_hi + c.end) * kF);
    const int64_t s_out = p.tokens.inner_stride(kWalkOut);
    for_each_run(p.tokens, 0, p.t, [&](const int64_t* off, int64_t len) {
      for (int64_t i = 0; i < len; ++i) {
        const int64_t row = off[kWalkOut] + i * s_out;
        list.add(kOpOut, SK_ACCESS_WRITE, (row + c.begin) * kF, (row + c.end) * kF);
      }
    });
    return list.finish();
  }
  const sk_range r = sk_split_range(p.t, core_id, num_cores, 1);
  if (r.begin >= r.end) return list.finish();
  list.add(kOpTable, SK_ACCESS_READ, row_lo * kF, (row_hi + p.d) * kF);
  list.add_walk(p.tokens, kWalkOut, kOpOut, SK_ACCESS_WRITE, r.begin, r.end, p.d, kF);
  return list.finish();
}

}  // namespace sk::kernels
