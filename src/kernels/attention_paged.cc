// paged_attention.{f32,bf16}: decode attention (one query token per sequence) with grouped-query
// heads over a paged KV cache (the suffix is the cache dtype), and
// paged_attention_prefill.{f32,bf16}: causal attention of T tokens of one or more sequences.
//
//   q [B, Hq, Dh] f32, k_cache, v_cache [num_blocks, block_size, Hkv, Dh], block_tables i32
//   [B, max_blocks], context_lens i32 [B]  ->  out [B, Hq, Dh] f32
//   out[b, h] = softmax_j(scale * q[b, h] . k_j) . v_j over the context_lens[b] tokens of
//   sequence b; token j sits in block block_tables[b, j / block_size] at offset j % block_size,
//   KV head h / (Hq / Hkv). A context of 0 tokens gives zeros.
//
// Partition: the (sequence, query head) rows are split across cores in whole groups of the
// Hq / Hkv heads that share a KV head, so each core streams the K/V rows of its (sequence, KV
// head) pairs once for all of their query heads. With fewer pairs than cores the groups are
// split too (two cores then read the same K/V rows). Each output row is computed by one core
// from its own query, the context and the ISA level only (attention_core.h), so every split and
// block size gives the same bits.
//
// Prefill: q [T, Hq, Dh], ..., block_tables, seq_ids i32 [T], positions i32 [T] -> out [T, Hq, Dh];
// token t is decode attention with context_lens = positions[t] + 1 over sequence seq_ids[t],
// bit for bit (attn::attend_prefill: the tokens of one KV head share a pass over its rows).
#include <cmath>

#include "kernels/attention_core.h"
#include "kernels/cpu_isa.h"
#include "kernels/kernel_util.h"
#include "kernels/kernels.h"
#include "superkernel/attrs_attention.h"

namespace sk::kernels {
namespace {

// Operands; the prefill kernels take seq_ids and positions where decode takes context_lens, so
// their output is operand 6.
enum { kOpQ = 0, kOpK = 1, kOpV = 2, kOpBlockTables = 3, kOpContextLens = 4, kOpSeqIds = 4, kOpPositions = 5 };

struct Variant {
  const char* name;
  int32_t cache_dtype;
  bool prefill;
  int32_t num_inputs() const { return prefill ? 6 : 5; }
};

struct Plan {
  const char* name = nullptr;
  int64_t batch = 0;  // query rows: B sequences at decode, T tokens at prefill
  int64_t hq = 0;
  int64_t hkv = 0;
  int64_t group = 0;  // Hq / Hkv
  int64_t dh = 0;
  int64_t block_size = 0;
  float scale = 1.0f;
  int64_t q_stride[2] = {};
  int64_t out_stride[2] = {};
  const float* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  float* out = nullptr;
  attn::SeqTables seq;
};

bool plan(const sk_kernel_args* args, const Variant& var, Plan* p, ErrorSink err) {
  const char* name = var.name;
  const int32_t cache_dtype = var.cache_dtype;
  if (!check_arity(args, name, var.num_inputs(), 1, err)) return false;
  const sk_tensor_arg& q = args->inputs[kOpQ];
  const sk_tensor_arg& k = args->inputs[kOpK];
  const sk_tensor_arg& v = args->inputs[kOpV];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(q, name, "q", SK_DTYPE_F32, 3, err) || !check_tensor(k, name, "k_cache", cache_dtype, 4, err) ||
      !check_tensor(v, name, "v_cache", cache_dtype, 4, err) || !check_tensor(out, name, "out", SK_DTYPE_F32, 3, err)) {
    return false;
  }
  if (args->attrs == nullptr || args->attrs_size < sizeof(sk_paged_attention_attrs)) {
    return invalid(err, "%s: needs sk_paged_attention_attrs (%zu bytes), got %u bytes", name,
                   sizeof(sk_paged_attention_attrs), args->attrs == nullptr ? 0u : args->attrs_size);
  }
  const float scale = static_cast<const sk_paged_attention_attrs*>(args->attrs)->scale;
  if (!std::isfinite(scale)) return invalid(err, "%s: scale %g is not finite", name, static_cast<double>(scale));
  char s1[96];
  char s2[96];
  if (q.rank != 3 || k.rank != 4) {
    return invalid(err, "%s: q %s / k_cache %s are not [B, Hq, Dh] / [num_blocks, block_size, Hkv, Dh]", name,
                   format_shape(q, s1, sizeof s1), format_shape(k, s2, sizeof s2));
  }
  if (!same_shape(k, v)) {
    return invalid(err, "%s: v_cache shape %s differs from k_cache shape %s", name, format_shape(v, s1, sizeof s1),
                   format_shape(k, s2, sizeof s2));
  }
  const int64_t hq = q.shape[1];
  const int64_t hkv = k.shape[2];
  const int64_t dh = q.shape[2];
  if (k.shape[3] != dh) {
    return invalid(err, "%s: k_cache shape %s does not have Dh = %lld of q shape %s", name,
                   format_shape(k, s1, sizeof s1), static_cast<long long>(dh), format_shape(q, s2, sizeof s2));
  }
  if (hkv == 0 || hq % hkv != 0) {
    return invalid(err, "%s: Hq = %lld query heads are not a multiple of Hkv = %lld KV heads", name,
                   static_cast<long long>(hq), static_cast<long long>(hkv));
  }
  if (!same_shape(q, out)) {
    return invalid(err, "%s: out shape %s differs from q shape %s", name, format_shape(out, s1, sizeof s1),
                   format_shape(q, s2, sizeof s2));
  }
  if (!sk_tensor_is_contiguous(&k) || !sk_tensor_is_contiguous(&v)) {
    return invalid(err, "%s: k_cache and v_cache must be dense row-major", name);
  }
  if (!last_dim_contiguous(q) || !last_dim_contiguous(out)) {
    return invalid(err, "%s: the last dimension of q and out must have stride 1", name);
  }
  // out accumulates while q is still being read.
  if (views_overlap(q, out)) return invalid(err, "%s: out must not overlap q", name);
  const bool tables =
      var.prefill
          ? attn::plan_token_tables(args->inputs[kOpBlockTables], args->inputs[kOpSeqIds], args->inputs[kOpPositions],
                                    q.shape[0], k.shape[0], k.shape[1], name, "k_cache", &p->seq, err)
          : attn::plan_seq_tables(args->inputs[kOpBlockTables], args->inputs[kOpContextLens], q.shape[0], k.shape[0],
                                  k.shape[1], name, "k_cache", &p->seq, err);
  if (!tables) return false;
  p->name = name;
  p->batch = q.shape[0];
  p->hq = hq;
  p->hkv = hkv;
  p->group = hq / hkv;
  p->dh = dh;
  p->block_size = k.shape[1];
  p->scale = scale;
  p->q_stride[0] = q.stride[0];
  p->q_stride[1] = q.stride[1];
  p->out_stride[0] = out.stride[0];
  p->out_stride[1] = out.stride[1];
  p->q = static_cast<const float*>(q.data);
  p->k = k.data;
  p->v = v.data;
  p->out = static_cast<float*>(out.data);
  return true;
}

// Decode: (sequence, query head) rows of one core, whole KV groups while there are enough to go
// round. Prefill: rows ordered (KV head, token, query head of the group), two pieces per core
// (attn::prefill_split).
attn::PrefillSplit core_rows(const Plan& p, bool prefill, int32_t core_id, int32_t num_cores) {
  if (prefill) return attn::prefill_split(p.batch, p.hkv, p.group, core_id, num_cores);
  const int64_t align = p.batch * p.hkv >= num_cores ? p.group : 1;
  return {{sk_split_range(p.batch * p.hq, core_id, num_cores, align), sk_range{0, 0}}};
}

// The (token or sequence, query head) of row i of the split above.
attn::PrefillRow row_of(const Plan& p, bool prefill, int64_t i) {
  if (prefill) return attn::prefill_row(i, p.batch, p.group);
  return {i / p.hq, i % p.hq};
}

// One pass per sequence and up to attn::kMaxHeads of its query heads, in groups of the heads
// that share a KV head.
template <class KT>
void attend_rows(const Plan& p, const attn::Ops<KT>& ops, sk_range r) {
  const KT* k = static_cast<const KT*>(p.k);
  const KT* v = static_cast<const KT*>(p.v);
  const int64_t slot_elems = p.hkv * p.dh;
  const int64_t bs = p.block_size;
  for (int64_t i = r.begin; i < r.end;) {
    const int64_t b = i / p.hq;
    const int64_t seq_end = std::min(r.end, (b + 1) * p.hq);
    attn::Heads hd;
    hd.n1 = p.dh;
    hd.dv = p.dh;
    hd.scale = p.scale;
    while (i < seq_end && hd.nh < attn::kMaxHeads) {
      const int64_t h = i % p.hq;
      const int64_t kvh = h / p.group;
      const int64_t n = std::min({seq_end, b * p.hq + (kvh + 1) * p.group, i + (attn::kMaxHeads - hd.nh)}) - i;
      hd.add_group(static_cast<int>(n), kvh * p.dh, p.seq.context(b));
      for (int64_t j = 0; j < n; ++j) {
        const int idx = hd.nh - static_cast<int>(n) + static_cast<int>(j);
        hd.q1[idx] = p.q + b * p.q_stride[0] + (h + j) * p.q_stride[1];
        hd.out[idx] = p.out + b * p.out_stride[0] + (h + j) * p.out_stride[1];
      }
      i += n;
    }
    attn::attend<KT>(ops, hd, [&](int64_t j0, int nt, const KT** k_slots, const KT** v_slots) {
      for (int j = 0; j < nt; ++j) {
        const int64_t pos = j0 + j;
        const int64_t off = (p.seq.block(b, pos / bs) * bs + pos % bs) * slot_elems;
        k_slots[j] = k + off;
        v_slots[j] = v + off;
      }
    });
  }
}

// Prefill: the passes of attn::attend_prefill over one piece of rows.
template <class KT>
void attend_prefill_rows(const Plan& p, const attn::Ops<KT>& ops, sk_range r) {
  const KT* k = static_cast<const KT*>(p.k);
  const KT* v = static_cast<const KT*>(p.v);
  const int64_t slot_elems = p.hkv * p.dh;
  attn::Heads proto;
  proto.n1 = p.dh;
  proto.dv = p.dh;
  proto.scale = p.scale;
  attn::attend_prefill<KT>(
      ops, proto, p.seq, p.group, p.dh, r,
      [&](attn::Heads& hd, int idx, int64_t t, int64_t h) {
        hd.q1[idx] = p.q + t * p.q_stride[0] + h * p.q_stride[1];
        hd.out[idx] = p.out + t * p.out_stride[0] + h * p.out_stride[1];
      },
      [&](int64_t slot) { return std::make_pair(k + slot * slot_elems, v + slot * slot_elems); });
}

template <class KT>
void attend_split(const Plan& p, bool prefill, const attn::Ops<KT>& ops, const attn::PrefillSplit& split) {
  if (!prefill) return attend_rows<KT>(p, ops, split.piece[0]);
  for (const sk_range& r : split.piece) attend_prefill_rows<KT>(p, ops, r);
}

int32_t run(const Variant& var, const sk_kernel_args* args, const sk_core_ctx* core) {
  const ErrorSink err = sink_of(core);
  Plan p;
  if (!check_core(core, var.name, err) || !plan(args, var, &p, err) || !attn::check_seq_tables(p.seq, var.name, err)) {
    return SK_ERR_INVALID_ARGUMENT;
  }
  const attn::PrefillSplit split = core_rows(p, var.prefill, core->core_id, core->num_cores);
  if (var.cache_dtype == SK_DTYPE_F32) {
    attend_split(p, var.prefill, attn::ops_f32(), split);
  } else {
    attend_split(p, var.prefill, attn::ops_bf16(), split);
  }
  return SK_OK;
}

int32_t access(const Variant& var, const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
               sk_access_range* ranges, int32_t capacity) {
  Plan p;
  if (num_cores < 1 || core_id < 0 || core_id >= num_cores || !plan(args, var, &p, {})) {
    return -SK_ERR_INVALID_ARGUMENT;
  }
  RangeList list(ranges, capacity);
  // Every core checks every sequence's (or token's) tables.
  for (int32_t op = kOpBlockTables; op < var.num_inputs(); ++op) add_view(list, op, SK_ACCESS_READ, args->inputs[op]);
  const attn::PrefillSplit split = core_rows(p, var.prefill, core_id, num_cores);
  if (p.dh == 0) return list.finish();
  constexpr int64_t kF = sizeof(float);
  for (const sk_range& r : split.piece) {
    for (int64_t i = r.begin; i < r.end; ++i) {
      const attn::PrefillRow row = row_of(p, var.prefill, i);
      const int64_t q_row = row.token * p.q_stride[0] + row.head * p.q_stride[1];
      list.add(kOpQ, SK_ACCESS_READ, q_row * kF, (q_row + p.dh) * kF);
    }
  }
  if (split.piece[0].begin < split.piece[0].end || split.piece[1].begin < split.piece[1].end) {
    // The cache rows read depend on the block tables: all of them.
    add_view(list, kOpK, SK_ACCESS_READ, args->inputs[kOpK]);
    add_view(list, kOpV, SK_ACCESS_READ, args->inputs[kOpV]);
  }
  for (const sk_range& r : split.piece) {
    for (int64_t i = r.begin; i < r.end; ++i) {
      const attn::PrefillRow row = row_of(p, var.prefill, i);
      const int64_t o_row = row.token * p.out_stride[0] + row.head * p.out_stride[1];
      list.add(var.num_inputs(), SK_ACCESS_WRITE, o_row * kF, (o_row + p.dh) * kF);
    }
  }
  return list.finish();
}

constexpr Variant kF32{"paged_attention.f32", SK_DTYPE_F32, false};
constexpr Variant kBf16{"paged_attention.bf16", SK_DTYPE_BF16, false};
constexpr Variant kPrefillF32{"paged_attention_prefill.f32", SK_DTYPE_F32, true};
constexpr Variant kPrefillBf16{"paged_attention_prefill.bf16", SK_DTYPE_BF16, true};

}  // namespace

int32_t paged_attention_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) { return run(kF32, args, core); }
int32_t paged_attention_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                   sk_access_range* ranges, int32_t capacity) {
  return access(kF32, args, core_id, num_cores, ranges, capacity);
}
int32_t paged_attention_bf16_run(const sk_kernel_args* args, const sk_core_ctx* core) { return run(kBf16, args, core); }
int32_t paged_attention_bf16_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                    sk_access_range* ranges, int32_t capacity) {
  return access(kBf16, args, core_id, num_cores, ranges, capacity);
}
int32_t paged_attention_prefill_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  return run(kPrefillF32, args, core);
}
int32_t paged_attention_prefill_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                           sk_access_range* ranges, int32_t capacity) {
  return access(kPrefillF32, args, core_id, num_cores, ranges, capacity);
}
int32_t paged_attention_prefill_bf16_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  return run(kPrefillBf16, args, core);
}
int32_t paged_attention_prefill_bf16_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                            sk_access_range* ranges, int32_t capacity) {
  return access(kPrefillBf16, args, core_id, num_cores, ranges, capacity);
}

}  // namespace sk::kernels
