// References of the attention family: layer_norm, rope, the KV-cache appends, paged decode
// attention, MLA attention and batched_matmul. Double precision, element by element through
// the operands' strides, sharing nothing with the kernels.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/reference/ref_util.h"
#include "kernels/reference/reference.h"
#include "superkernel/attrs_attention.h"
#include "util/half.h"

namespace sk::ref {
namespace {

// Element at a multi-index, widened to double (f32, bf16 or i32).
double load(const sk_tensor_arg& t, const int64_t* idx) {
  const int64_t off = offset_of(t, idx);
  switch (t.dtype) {
    case SK_DTYPE_F32:
      return static_cast<const float*>(t.data)[off];
    case SK_DTYPE_BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(t.data)[off]);
    case SK_DTYPE_I32:
      return static_cast<const int32_t*>(t.data)[off];
    default:
      return 0.0;
  }
}

// Stores v rounded to the tensor's dtype (f32 or bf16, to nearest even).
void store(const sk_tensor_arg& t, const int64_t* idx, double v) {
  const int64_t off = offset_of(t, idx);
  if (t.dtype == SK_DTYPE_BF16) {
    static_cast<uint16_t*>(t.data)[off] = f32_to_bf16(static_cast<float>(v));
  } else {
    static_cast<float*>(t.data)[off] = static_cast<float>(v);
  }
}

double at(const sk_tensor_arg& t, int64_t i0) {
  const int64_t idx[1] = {i0};
  return load(t, idx);
}
double at(const sk_tensor_arg& t, int64_t i0, int64_t i1) {
  const int64_t idx[2] = {i0, i1};
  return load(t, idx);
}
double at(const sk_tensor_arg& t, int64_t i0, int64_t i1, int64_t i2) {
  const int64_t idx[3] = {i0, i1, i2};
  return load(t, idx);
}
double at(const sk_tensor_arg& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const int64_t idx[4] = {i0, i1, i2, i3};
  return load(t, idx);
}

bool dims_are(const sk_tensor_arg& t, std::initializer_list<int64_t> dims) {
  if (t.rank != static_cast<int>(dims.size())) return false;
  int d = 0;
  for (int64_t v : dims) {
    if (t.shape[d++] != v) return false;
  }
  return true;
}

// The block tables' and context lengths' values for a cache of num_blocks blocks.
bool tables_valid(const sk_tensor_arg& bt, const sk_tensor_arg& cl, int64_t batch, int64_t num_blocks,
                  int64_t block_size) {
  if (bt.dtype != SK_DTYPE_I32 || cl.dtype != SK_DTYPE_I32 || bt.rank != 2 || bt.shape[0] != batch ||
      !dims_are(cl, {batch})) {
    return false;
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t ctx = static_cast<int64_t>(at(cl, b));
    if (ctx < 0 || ctx > bt.shape[1] * block_size) return false;
    for (int64_t i = 0; i * block_size < ctx; ++i) {
      const int64_t id = static_cast<int64_t>(at(bt, b, i));
      if (id < 0 || id >= num_blocks) return false;
    }
  }
  return true;
}

// The query rows of an attention kernel: at decode row b is sequence b over context_lens[b]
// tokens; at prefill (seq_ids and positions) row t is sequence seq_ids[t] over positions[t] + 1.
struct Rows {
  const sk_tensor_arg* seq_ids = nullptr;  // null at decode
  const sk_tensor_arg* lens = nullptr;     // context_lens or positions
  int64_t seq(int64_t i) const { return seq_ids == nullptr ? i : static_cast<int64_t>(at(*seq_ids, i)); }
  int64_t context(int64_t i) const { return static_cast<int64_t>(at(*lens, i)) + (seq_ids == nullptr ? 0 : 1); }
};

// The tables of `rows` query rows from operand 3 on; false when a value is out of range.
bool rows_valid(const sk_kernel_args* args, bool prefill, int64_t rows, int64_t num_blocks, int64_t block_size,
                Rows* r) {
  const sk_tensor_arg& bt = args->inputs[3];
  if (!prefill) {
    r->lens = &args->inputs[4];
    return tables_valid(bt, args->inputs[4], rows, num_blocks, block_size);
  }
  r->seq_ids = &args->inputs[4];
  r->lens = &args->inputs[5];
  if (bt.dtype != SK_DTYPE_I32 || bt.rank != 2 || r->seq_ids->dtype != SK_DTYPE_I32 || r->lens->dtype != SK_DTYPE_I32 ||
      !dims_are(*r->seq_ids, {rows}) || !dims_are(*r->lens, {rows})) {
    return false;
  }
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t b = r->seq(t);
    const int64_t ctx = r->context(t);
    if (b < 0 || b >= bt.shape[0] || ctx < 1 || ctx > bt.shape[1] * block_size) return false;
    for (int64_t i = 0; i * block_size < ctx; ++i) {
      const int64_t id = static_cast<int64_t>(at(bt, b, i));
      if (id < 0 || id >= num_blocks) return false;
    }
  }
  return true;
}

// Slot of token j of sequence b.
int64_t slot_of(const sk_tensor_arg& bt, int64_t b, int64_t j, int64_t block_size) {
  return static_cast<int64_t>(at(bt, b, j / block_size)) * block_size + j % block_size;
}

// out[d] = sum_j softmax_j(scores) * value(j, d) for d < dv; zeros for an empty context.
template <class Score, class Value>
void softmax_weighted_sum(int64_t ctx, int64_t dv, Score&& score, Value&& value, const sk_tensor_arg& out, int64_t b,
                          int64_t h) {
  std::vector<double> s(static_cast<size_t>(ctx));
  double mx = -INFINITY;
  for (int64_t j = 0; j < ctx; ++j) {
    s[static_cast<size_t>(j)] = score(j);
    mx = std::max(mx, s[static_cast<size_t>(j)]);
  }
  double sum = 0.0;
  for (double& v : s) {
    v = std::exp(v - mx);
    sum += v;
  }
  for (int64_t d = 0; d < dv; ++d) {
    double acc = 0.0;
    for (int64_t j = 0; j < ctx; ++j) acc += s[static_cast<size_t>(j)] * value(j, d);
    const int64_t idx[3] = {b, h, d};
    store(out, idx, ctx == 0 ? 0.0 : acc / sum);
  }
}

// Shared by kv_append and mla_cache_append: sources[i] rows of `widths[i]` elements go to cache
// `dst[i]` at column `cols[i]` of each slot's (flattened) row.
struct AppendSource {
  const sk_tensor_arg* src;
  int cache;
  int64_t col;
};

int32_t append(const sk_kernel_args* args, int num_caches, const AppendSource* sources, int num_sources,
               int32_t cache_dtype) {
  const sk_tensor_arg& slots = args->inputs[2];
  if (slots.dtype != SK_DTYPE_I32 || slots.rank != 1) return SK_ERR_INVALID_ARGUMENT;
  const int64_t t = slots.shape[0];
  const sk_tensor_arg* in[2] = {&args->inputs[3], num_caches > 1 ? &args->inputs[4] : nullptr};
  const sk_tensor_arg* out[2] = {&args->outputs[0], num_caches > 1 ? &args->outputs[1] : nullptr};
  for (int c = 0; c < num_caches; ++c) {
    if (in[c]->dtype != cache_dtype || out[c]->dtype != cache_dtype || !same_shape(*in[c], *out[c]) ||
        in[c]->rank < 3) {
      return SK_ERR_INVALID_ARGUMENT;
    }
  }
  const int64_t num_slots = in[0]->shape[0] * in[0]->shape[1];
  for (int s = 0; s < num_sources; ++s) {
    const sk_tensor_arg& src = *sources[s].src;
    int64_t inner = 1;
    int64_t cache_inner = 1;
    for (int d = 1; d < src.rank; ++d) inner *= src.shape[d];
    for (int d = 2; d < in[sources[s].cache]->rank; ++d) cache_inner *= in[sources[s].cache]->shape[d];
    if (src.dtype != SK_DTYPE_F32 || src.rank < 2 || src.shape[0] != t || sources[s].col + inner > cache_inner) {
      return SK_ERR_INVALID_ARGUMENT;
    }
  }
  for (int64_t i = 0; i < t; ++i) {
    if (at(slots, i) >= static_cast<double>(num_slots)) return SK_ERR_INVALID_ARGUMENT;
  }
  // A separate output starts as a copy of the cache.
  for (int c = 0; c < num_caches; ++c) {
    if (in[c]->data == out[c]->data) continue;
    for_each_index(in[c]->rank, in[c]->shape, [&](const int64_t* idx) { store(*out[c], idx, load(*in[c], idx)); });
  }
  for (int64_t i = 0; i < t; ++i) {
    const auto slot = static_cast<int64_t>(at(slots, i));
    if (slot < 0) continue;
    for (int s = 0; s < num_sources; ++s) {
      const sk_tensor_arg& src = *sources[s].src;
      const sk_tensor_arg& dst = *out[sources[s].cache];
      // Source [T, ...inner] and cache [blocks, block_size, ...inner'] are walked through the
      // flattened inner elements, which are contiguous in both (kv: [Hkv, Dh]; mla: a row part).
      int64_t inner = 1;
      for (int d = 1; d < src.rank; ++d) inner *= src.shape[d];
      for (int64_t e = 0; e < inner; ++e) {
        int64_t si[SK_MAX_RANK] = {i};
        int64_t rest = e;
        for (int d = src.rank - 1; d >= 1; --d) {
          si[d] = rest % src.shape[d];
          rest /= src.shape[d];
        }
        int64_t di[SK_MAX_RANK] = {slot / dst.shape[1], slot % dst.shape[1]};
        rest = sources[s].col + e;
        for (int d = dst.rank - 1; d >= 2; --d) {
          di[d] = rest % dst.shape[d];
          rest /= dst.shape[d];
        }
        store(dst, di, load(src, si));
      }
    }
  }
  return SK_OK;
}

template <int32_t kCacheDtype, bool kPrefill>
int32_t paged_attention(const sk_kernel_args* args) {
  if (!has_operands(args, kPrefill ? 6 : 5, 1) || args->attrs == nullptr ||
      args->attrs_size < sizeof(sk_paged_attention_attrs)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const double scale = static_cast<const sk_paged_attention_attrs*>(args->attrs)->scale;
  const sk_tensor_arg& q = args->inputs[0];
  const sk_tensor_arg& k = args->inputs[1];
  const sk_tensor_arg& v = args->inputs[2];
  const sk_tensor_arg& out = args->outputs[0];
  if (q.dtype != SK_DTYPE_F32 || out.dtype != SK_DTYPE_F32 || k.dtype != kCacheDtype || v.dtype != kCacheDtype ||
      q.rank != 3 || k.rank != 4 || !same_shape(k, v) || !same_shape(q, out)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t batch = q.shape[0];
  const int64_t hq = q.shape[1];
  const int64_t dh = q.shape[2];
  const int64_t hkv = k.shape[2];
  const int64_t block_size = k.shape[1];
  if (k.shape[3] != dh || hkv == 0 || hq % hkv != 0) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& bt = args->inputs[3];
  Rows rows;
  if (!rows_valid(args, kPrefill, batch, k.shape[0], block_size, &rows)) return SK_ERR_INVALID_ARGUMENT;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kvh = h / (hq / hkv);
      const auto slot = [&](int64_t j) { return slot_of(bt, rows.seq(b), j, block_size); };
      softmax_weighted_sum(
          rows.context(b), dh,
          [&](int64_t j) {
            const int64_t s = slot(j);
            double dot = 0.0;
            for (int64_t d = 0; d < dh; ++d) dot += at(q, b, h, d) * at(k, s / block_size, s % block_size, kvh, d);
            return scale * dot;
          },
          [&](int64_t j, int64_t d) {
            const int64_t s = slot(j);
            return at(v, s / block_size, s % block_size, kvh, d);
          },
          out, b, h);
    }
  }
  return SK_OK;
}

template <int32_t kCacheDtype, bool kPrefill>
int32_t mla_attention(const sk_kernel_args* args) {
  if (!has_operands(args, kPrefill ? 6 : 5, 1) || args->attrs == nullptr ||
      args->attrs_size < sizeof(sk_mla_attention_attrs)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const sk_mla_attention_attrs a = *static_cast<const sk_mla_attention_attrs*>(args->attrs);
  const sk_tensor_arg& ql = args->inputs[0];
  const sk_tensor_arg& qp = args->inputs[1];
  const sk_tensor_arg& cache = args->inputs[2];
  const sk_tensor_arg& out = args->outputs[0];
  const int64_t r = a.kv_lora_rank;
  const int64_t pe = a.rope_dim;
  if (ql.dtype != SK_DTYPE_F32 || qp.dtype != SK_DTYPE_F32 || out.dtype != SK_DTYPE_F32 || cache.dtype != kCacheDtype ||
      ql.rank != 3 || r <= 0 || pe < 0 || !dims_are(ql, {ql.shape[0], ql.shape[1], r}) ||
      !dims_are(qp, {ql.shape[0], ql.shape[1], pe}) || cache.rank != 3 || cache.shape[2] != r + pe ||
      !same_shape(ql, out)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t batch = ql.shape[0];
  const int64_t block_size = cache.shape[1];
  const sk_tensor_arg& bt = args->inputs[3];
  Rows rows;
  if (!rows_valid(args, kPrefill, batch, cache.shape[0], block_size, &rows)) return SK_ERR_INVALID_ARGUMENT;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < ql.shape[1]; ++h) {
      const auto slot = [&](int64_t j) { return slot_of(bt, rows.seq(b), j, block_size); };
      softmax_weighted_sum(
          rows.context(b), r,
          [&](int64_t j) {
            const int64_t s = slot(j);
            double dot = 0.0;
            for (int64_t d = 0; d < r; ++d) dot += at(ql, b, h, d) * at(cache, s / block_size, s % block_size, d);
            for (int64_t d = 0; d < pe; ++d) {
              dot += at(qp, b, h, d) * at(cache, s / block_size, s % block_size, r + d);
            }
            return static_cast<double>(a.scale) * dot;
          },
          [&](int64_t j, int64_t d) {
            const int64_t s = slot(j);
            return at(cache, s / block_size, s % block_size, d);
          },
          out, b, h);
    }
  }
  return SK_OK;
}

}  // namespace

// y = (x - mean) / sqrt(var + eps) * gamma + beta over the last dimension.
int32_t layer_norm_f32(const sk_kernel_args* args) {
  if (!has_operands(args, 3, 1) || !all_f32(args)) return SK_ERR_INVALID_ARGUMENT;
  if (args->attrs == nullptr || args->attrs_size < sizeof(sk_layer_norm_attrs)) return SK_ERR_INVALID_ARGUMENT;
  const double eps = static_cast<const sk_layer_norm_attrs*>(args->attrs)->eps;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& g = args->inputs[1];
  const sk_tensor_arg& be = args->inputs[2];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.rank < 1 || !same_shape(x, y)) return SK_ERR_INVALID_ARGUMENT;
  const int last = x.rank - 1;
  const int64_t d = x.shape[last];
  if (!dims_are(g, {d}) || !dims_are(be, {d})) return SK_ERR_INVALID_ARGUMENT;
  if (d == 0) return SK_OK;
  for_each_index(last, x.shape, [&](const int64_t* row) {
    int64_t idx[SK_MAX_RANK] = {};
    for (int i = 0; i < last; ++i) idx[i] = row[i];
    double sum = 0.0;
    for (idx[last] = 0; idx[last] < d; ++idx[last]) sum += load(x, idx);
    const double mean = sum / static_cast<double>(d);
    double ss = 0.0;
    for (idx[last] = 0; idx[last] < d; ++idx[last]) ss += (load(x, idx) - mean) * (load(x, idx) - mean);
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    // Read the whole row before writing: y may be x.
    std::vector<double> vals(static_cast<size_t>(d));
    for (idx[last] = 0; idx[last] < d; ++idx[last]) {
      vals[static_cast<size_t>(idx[last])] = (load(x, idx) - mean) * inv * at(g, idx[last]) + at(be, idx[last]);
    }
    for (idx[last] = 0; idx[last] < d; ++idx[last]) store(y, idx, vals[static_cast<size_t>(idx[last])]);
  });
  return SK_OK;
}

// Rotary embedding; see rope.cc for the conventions.
int32_t rope_f32(const sk_kernel_args* args) {
  if (!has_operands(args, 3, 1) || args->attrs == nullptr || args->attrs_size < sizeof(sk_rope_attrs)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const sk_rope_attrs a = *static_cast<const sk_rope_attrs*>(args->attrs);
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& pos = args->inputs[1];
  const sk_tensor_arg& cache = args->inputs[2];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.dtype != SK_DTYPE_F32 || y.dtype != SK_DTYPE_F32 || cache.dtype != SK_DTYPE_F32 || pos.dtype != SK_DTYPE_I32 ||
      (x.rank != 2 && x.rank != 3) || !same_shape(x, y)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t dh = a.head_dim;
  const int64_t rd = a.rotary_dim;
  if (dh <= 0 || rd <= 0 || rd > dh || rd % 2 != 0 || (a.neox_style != 0 && a.neox_style != 1)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const int64_t t = x.shape[0];
  if ((x.rank == 3 && x.shape[2] != dh) || (x.rank == 2 && x.shape[1] % dh != 0)) return SK_ERR_INVALID_ARGUMENT;
  const int64_t heads = x.rank == 3 ? x.shape[1] : x.shape[1] / dh;
  if (!dims_are(pos, {t}) || cache.rank != 2 || cache.shape[1] != rd) return SK_ERR_INVALID_ARGUMENT;
  for (int64_t i = 0; i < t; ++i) {
    if (at(pos, i) < 0 || at(pos, i) >= static_cast<double>(cache.shape[0])) return SK_ERR_INVALID_ARGUMENT;
  }
  // Element e of head h of token i, in x's own rank.
  const auto index = [&](int64_t i, int64_t h, int64_t e, int64_t* idx) {
    idx[0] = i;
    if (x.rank == 3) {
      idx[1] = h;
      idx[2] = e;
    } else {
      idx[1] = h * dh + e;
    }
  };
  std::vector<double> row(static_cast<size_t>(dh));
  for (int64_t i = 0; i < t; ++i) {
    const auto p = static_cast<int64_t>(at(pos, i));
    for (int64_t h = 0; h < heads; ++h) {
      int64_t idx[3];
      for (int64_t e = 0; e < dh; ++e) {
        index(i, h, e, idx);
        row[static_cast<size_t>(e)] = load(x, idx);
      }
      for (int64_t e = 0; e < dh; ++e) {
        double v = row[static_cast<size_t>(e)];
        if (e < rd) {
          const int64_t half = rd / 2;
          const bool first = a.neox_style == 1 ? e < half : e % 2 == 0;
          const int64_t f = a.neox_style == 1 ? e % half : e / 2;  // frequency index
          const int64_t partner = a.neox_style == 1 ? (first ? e + half : e - half) : (first ? e + 1 : e - 1);
          const double c = at(cache, p, f);
          const double s = at(cache, p, half + f);
          const double other = row[static_cast<size_t>(partner)];
          v = first ? v * c - other * s : v * c + other * s;
        }
        index(i, h, e, idx);
        store(y, idx, v);
      }
    }
  }
  return SK_OK;
}

int32_t kv_append_f32(const sk_kernel_args* args) {
  if (!has_operands(args, 5, 2)) return SK_ERR_INVALID_ARGUMENT;
  const AppendSource sources[2] = {{&args->inputs[0], 0, 0}, {&args->inputs[1], 1, 0}};
  return append(args, 2, sources, 2, SK_DTYPE_F32);
}

int32_t kv_append_bf16(const sk_kernel_args* args) {
  if (!has_operands(args, 5, 2)) return SK_ERR_INVALID_ARGUMENT;
  const AppendSource sources[2] = {{&args->inputs[0], 0, 0}, {&args->inputs[1], 1, 0}};
  return append(args, 2, sources, 2, SK_DTYPE_BF16);
}

int32_t mla_cache_append_f32(const sk_kernel_args* args) {
  if (!has_operands(args, 4, 1) || args->inputs[0].rank != 2) return SK_ERR_INVALID_ARGUMENT;
  const AppendSource sources[2] = {{&args->inputs[0], 0, 0}, {&args->inputs[1], 0, args->inputs[0].shape[1]}};
  return append(args, 1, sources, 2, SK_DTYPE_F32);
}

int32_t mla_cache_append_bf16(const sk_kernel_args* args) {
  if (!has_operands(args, 4, 1) || args->inputs[0].rank != 2) return SK_ERR_INVALID_ARGUMENT;
  const AppendSource sources[2] = {{&args->inputs[0], 0, 0}, {&args->inputs[1], 0, args->inputs[0].shape[1]}};
  return append(args, 1, sources, 2, SK_DTYPE_BF16);
}

int32_t paged_attention_f32(const sk_kernel_args* args) { return paged_attention<SK_DTYPE_F32, false>(args); }
int32_t paged_attention_bf16(const sk_kernel_args* args) { return paged_attention<SK_DTYPE_BF16, false>(args); }
int32_t paged_attention_prefill_f32(const sk_kernel_args* args) { return paged_attention<SK_DTYPE_F32, true>(args); }
int32_t paged_attention_prefill_bf16(const sk_kernel_args* args) { return paged_attention<SK_DTYPE_BF16, true>(args); }
int32_t mla_attention_f32(const sk_kernel_args* args) { return mla_attention<SK_DTYPE_F32, false>(args); }
int32_t mla_attention_bf16(const sk_kernel_args* args) { return mla_attention<SK_DTYPE_BF16, false>(args); }
int32_t mla_attention_prefill_f32(const sk_kernel_args* args) { return mla_attention<SK_DTYPE_F32, true>(args); }
int32_t mla_attention_prefill_bf16(const sk_kernel_args* args) { return mla_attention<SK_DTYPE_BF16, true>(args); }

// y[h, m, n] = sum_k x[h, m, k] * w[h, n, k]
int32_t batched_matmul_f32(const sk_kernel_args* args) {
  if (!has_operands(args, 2, 1) || !all_f32(args)) return SK_ERR_INVALID_ARGUMENT;
  const sk_tensor_arg& x = args->inputs[0];
  const sk_tensor_arg& w = args->inputs[1];
  const sk_tensor_arg& y = args->outputs[0];
  if (x.rank != 3 || w.rank != 3) return SK_ERR_INVALID_ARGUMENT;
  const int64_t hb = x.shape[0];
  const int64_t m = x.shape[1];
  const int64_t k = x.shape[2];
  const int64_t n = w.shape[1];
  if (!dims_are(w, {hb, n, k}) || !dims_are(y, {hb, m, n})) return SK_ERR_INVALID_ARGUMENT;
  for (int64_t h = 0; h < hb; ++h) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t e = 0; e < k; ++e) acc += at(x, h, i, e) * at(w, h, j, e);
        const int64_t idx[3] = {h, i, j};
        store(y, idx, acc);
      }
    }
  }
  return SK_OK;
}

}  // namespace sk::ref
