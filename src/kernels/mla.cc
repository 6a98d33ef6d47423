// mla_attention.{f32,bf16}: multi-head latent attention at decode, absorbed form (DeepSeek-V2/V3,
// LongCat-Flash). The suffix is the latent cache dtype.
//
//   q_latent [B, H, R] f32 (the no-PE query already multiplied by the absorbed W_UK),
//   q_pe [B, H, P] f32, latent_cache [num_blocks, block_size, R + P] (per token c_kv then k_pe,
//   one "head" shared by all query heads), block_tables i32 [B, max_blocks], context_lens i32 [B]
//   -> out [B, H, R] f32
//   out[b, h] = sum_j softmax_j(scale * (q_latent[b, h] . c_kv_j + q_pe[b, h] . k_pe_j)) c_kv_j
//
// (R = kv_lora_rank, P = rope_dim, both also given as attributes to catch a mismatched cache.)
// The per-head latent result still needs W_UV (batched_matmul.f32) to become the attention
// output. A context of 0 tokens gives zeros.
//
// Partition: the (sequence, head) rows are split across cores; a core handles up to
// attn::kMaxHeads heads of one sequence per pass over its latent rows. Each output row is
// computed by one core from its own query, the context and the ISA level only
// (attention_core.h), so every split and block size gives the same bits.
//
// mla_attention_prefill.{f32,bf16}: q_latent [T, H, R], q_pe [T, H, P], latent_cache,
// block_tables, seq_ids i32 [T], positions i32 [T] -> out [T, H, R]; token t is the decode kernel
// with context_lens = positions[t] + 1 over sequence seq_ids[t], bit for bit.
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
enum {
  kOpQLatent = 0,
  kOpQPe = 1,
  kOpCache = 2,
  kOpBlockTables = 3,
  kOpContextLens = 4,
  kOpSeqIds = 4,
  kOpPositions = 5
};

struct Variant {
  const char* name;
  int32_t cache_dtype;
  bool prefill;
  int32_t num_inputs() const { return prefill ? 6 : 5; }
};

struct Plan {
  int64_t batch = 0;  // query rows: B sequences at decode, T tokens at prefill
  int64_t heads = 0;
  int64_t rank = 0;  // R
  int64_t rope = 0;  // P
  int64_t block_size = 0;
  float scale = 1.0f;
  int64_t ql_stride[2] = {};
  int64_t qp_stride[2] = {};
  int64_t out_stride[2] = {};
  const float* q_latent = nullptr;
  const float* q_pe = nullptr;
  const void* cache = nullptr;
  float* out = nullptr;
  attn::SeqTables seq;
};

bool plan(const sk_kernel_args* args, const Variant& var, Plan* p, ErrorSink err) {
  const char* name = var.name;
  const int32_t cache_dtype = var.cache_dtype;
  if (!check_arity(args, name, var.num_inputs(), 1, err)) return false;
  const sk_tensor_arg& ql = args->inputs[kOpQLatent];
  const sk_tensor_arg& qp = args->inputs[kOpQPe];
  const sk_tensor_arg& cache = args->inputs[kOpCache];
  const sk_tensor_arg& out = args->outputs[0];
  if (!check_tensor(ql, name, "q_latent", SK_DTYPE_F32, 3, err) ||
      !check_tensor(qp, name, "q_pe", SK_DTYPE_F32, 3, err) ||
      !check_tensor(cache, name, "latent_cache", cache_dtype, 3, err) ||
      !check_tensor(out, name, "out", SK_DTYPE_F32, 3, err)) {
    return false;
  }
  if (args->attrs == nullptr || args->attrs_size < sizeof(sk_mla_attention_attrs)) {
    return invalid(err, "%s: needs sk_mla_attention_attrs (%zu bytes), got %u bytes", name,
                   sizeof(sk_mla_attention_attrs), args->attrs == nullptr ? 0u : args->attrs_size);
  }
  const sk_mla_attention_attrs a = *static_cast<const sk_mla_attention_attrs*>(args->attrs);
  if (!std::isfinite(a.scale)) return invalid(err, "%s: scale %g is not finite", name, static_cast<double>(a.scale));
  if (a.kv_lora_rank <= 0 || a.rope_dim < 0) {
    return invalid(err, "%s: kv_lora_rank %d must be positive and rope_dim %d non-negative", name, a.kv_lora_rank,
                   a.rope_dim);
  }
  const int64_t r = a.kv_lora_rank;
  const int64_t pe = a.rope_dim;
  char s1[96];
  char s2[96];
  if (ql.rank != 3 || ql.shape[2] != r) {
    return invalid(err, "%s: q_latent shape %s is not [B, H, kv_lora_rank = %lld]", name,
                   format_shape(ql, s1, sizeof s1), static_cast<long long>(r));
  }
  if (qp.rank != 3 || qp.shape[0] != ql.shape[0] || qp.shape[1] != ql.shape[1] || qp.shape[2] != pe) {
    return invalid(err, "%s: q_pe shape %s is not [B, H, rope_dim = %lld] for q_latent shape %s", name,
                   format_shape(qp, s1, sizeof s1), static_cast<long long>(pe), format_shape(ql, s2, sizeof s2));
  }
  if (cache.rank != 3 || cache.shape[2] != r + pe) {
    return invalid(err, "%s: latent_cache shape %s is not [num_blocks, block_size, kv_lora_rank + rope_dim = %lld]",
                   name, format_shape(cache, s1, sizeof s1), static_cast<long long>(r + pe));
  }
  if (!same_shape(ql, out)) {
    return invalid(err, "%s: out shape %s differs from q_latent shape %s", name, format_shape(out, s1, sizeof s1),
                   format_shape(ql, s2, sizeof s2));
  }
  if (!sk_tensor_is_contiguous(&cache)) return invalid(err, "%s: latent_cache must be dense row-major", name);
  if (!last_dim_contiguous(ql) || !last_dim_contiguous(qp) || !last_dim_contiguous(out)) {
    return invalid(err, "%s: the last dimension of q_latent, q_pe and out must have stride 1", name);
  }
  // out accumulates while the queries are still being read.
  if (views_overlap(ql, out) || views_overlap(qp, out)) {
    return invalid(err, "%s: out must not overlap q_latent or q_pe", name);
  }
  const bool tables =
      var.prefill
          ? attn::plan_token_tables(args->inputs[kOpBlockTables], args->inputs[kOpSeqIds], args->inputs[kOpPositions],
                                    ql.shape[0], cache.shape[0], cache.shape[1], name, "latent_cache", &p->seq, err)
          : attn::plan_seq_tables(args->inputs[kOpBlockTables], args->inputs[kOpContextLens], ql.shape[0],
                                  cache.shape[0], cache.shape[1], name, "latent_cache", &p->seq, err);
  if (!tables) return false;
  p->batch = ql.shape[0];
  p->heads = ql.shape[1];
  p->rank = r;
  p->rope = pe;
  p->block_size = cache.shape[1];
  p->scale = a.scale;
  for (int d = 0; d < 2; ++d) {
    p->ql_stride[d] = ql.stride[d];
    p->qp_stride[d] = qp.stride[d];
    p->out_stride[d] = out.stride[d];
  }
  p->q_latent = static_cast<const float*>(ql.data);
  p->q_pe = static_cast<const float*>(qp.data);
  p->cache = cache.data;
  p->out = static_cast<float*>(out.data);
  return true;
}

// Decode: (sequence, head) rows split evenly. Prefill: (token, head) rows, two pieces per core
// (attn::prefill_split with one KV head, the latent row, whose group is all H heads).
attn::PrefillSplit core_rows(const Plan& p, bool prefill, int32_t core_id, int32_t num_cores) {
  if (prefill) return attn::prefill_split(p.batch, 1, p.heads, core_id, num_cores);
  return {{sk_split_range(p.batch * p.heads, core_id, num_cores, 1), sk_range{0, 0}}};
}

// The per-pass constants of every pass.
attn::Heads proto_heads(const Plan& p) {
  attn::Heads hd;
  hd.n1 = p.rank;
  hd.n2 = p.rope;
  hd.off2 = p.rank;
  hd.dv = p.rank;
  hd.scale = p.scale;
  hd.v_shares_k = true;
  return hd;
}

void set_head(const Plan& p, attn::Heads& hd, int idx, int64_t b, int64_t h) {
  hd.q1[idx] = p.q_latent + b * p.ql_stride[0] + h * p.ql_stride[1];
  // q_pe may have no storage when rope_dim is 0.
  hd.q2[idx] = p.rope > 0 ? p.q_pe + b * p.qp_stride[0] + h * p.qp_stride[1] : nullptr;
  hd.out[idx] = p.out + b * p.out_stride[0] + h * p.out_stride[1];
}

// One pass per sequence and up to attn::kMaxHeads of its heads, all in one group.
template <class KT>
void attend_rows(const Plan& p, const attn::Ops<KT>& ops, sk_range r) {
  const KT* cache = static_cast<const KT*>(p.cache);
  const int64_t row = p.rank + p.rope;
  const int64_t bs = p.block_size;
  for (int64_t i = r.begin; i < r.end;) {
    const int64_t b = i / p.heads;
    const int64_t h = i % p.heads;
    const int64_t n = std::min({r.end, (b + 1) * p.heads, i + attn::kMaxHeads}) - i;
    attn::Heads hd = proto_heads(p);
    hd.add_group(static_cast<int>(n), 0, p.seq.context(b));
    for (int64_t j = 0; j < n; ++j) set_head(p, hd, static_cast<int>(j), b, h + j);
    attn::attend<KT>(ops, hd, [&](int64_t j0, int nt, const KT** k_slots, const KT** v_slots) {
      for (int j = 0; j < nt; ++j) {
        const int64_t pos = j0 + j;
        const KT* latent = cache + (p.seq.block(b, pos / bs) * bs + pos % bs) * row;
        k_slots[j] = latent;
        v_slots[j] = latent;
      }
    });
    i += n;
  }
}

template <class KT>
void attend_split(const Plan& p, bool prefill, const attn::Ops<KT>& ops, const attn::PrefillSplit& split) {
  if (!prefill) return attend_rows<KT>(p, ops, split.piece[0]);
  const KT* cache = static_cast<const KT*>(p.cache);
  const int64_t row = p.rank + p.rope;
  for (const sk_range& r : split.piece) {
    attn::attend_prefill<KT>(
        ops, proto_heads(p), p.seq, p.heads, 0, r,
        [&](attn::Heads& hd, int idx, int64_t t, int64_t h) { set_head(p, hd, idx, t, h); },
        [&](int64_t slot) { return std::make_pair(cache + slot * row, cache + slot * row); });
  }
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
  // Both splits order the rows (sequence or token, head), so row i is (i / H, i % H).
  const auto rows = [&](int32_t op, int32_t mode, const int64_t* stride, int64_t len) {
    for (const sk_range& r : split.piece) {
      for (int64_t i = r.begin; i < r.end; ++i) {
        const int64_t off = (i / p.heads) * stride[0] + (i % p.heads) * stride[1];
        list.add(op, mode, off * static_cast<int64_t>(sizeof(float)),
                 (off + len) * static_cast<int64_t>(sizeof(float)));
      }
    }
  };
  rows(kOpQLatent, SK_ACCESS_READ, p.ql_stride, p.rank);
  if (p.rope > 0) rows(kOpQPe, SK_ACCESS_READ, p.qp_stride, p.rope);
  if (split.piece[0].begin < split.piece[0].end || split.piece[1].begin < split.piece[1].end) {
    // The latent rows read depend on the block tables: all of them.
    add_view(list, kOpCache, SK_ACCESS_READ, args->inputs[kOpCache]);
  }
  rows(var.num_inputs(), SK_ACCESS_WRITE, p.out_stride, p.rank);
  return list.finish();
}

constexpr Variant kF32{"mla_attention.f32", SK_DTYPE_F32, false};
constexpr Variant kBf16{"mla_attention.bf16", SK_DTYPE_BF16, false};
constexpr Variant kPrefillF32{"mla_attention_prefill.f32", SK_DTYPE_F32, true};
constexpr Variant kPrefillBf16{"mla_attention_prefill.bf16", SK_DTYPE_BF16, true};

}  // namespace

int32_t mla_attention_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) { return run(kF32, args, core); }
int32_t mla_attention_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                 sk_access_range* ranges, int32_t capacity) {
  return access(kF32, args, core_id, num_cores, ranges, capacity);
}
int32_t mla_attention_bf16_run(const sk_kernel_args* args, const sk_core_ctx* core) { return run(kBf16, args, core); }
int32_t mla_attention_bf16_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                  sk_access_range* ranges, int32_t capacity) {
  return access(kBf16, args, core_id, num_cores, ranges, capacity);
}
int32_t mla_attention_prefill_f32_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  return run(kPrefillF32, args, core);
}
int32_t mla_attention_prefill_f32_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                         sk_access_range* ranges, int32_t capacity) {
  return access(kPrefillF32, args, core_id, num_cores, ranges, capacity);
}
int32_t mla_attention_prefill_bf16_run(const sk_kernel_args* args, const sk_core_ctx* core) {
  return run(kPrefillBf16, args, core);
}
int32_t mla_attention_prefill_bf16_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores,
                                          sk_access_range* ranges, int32_t capacity) {
  return access(kPrefillBf16, args, core_id, num_cores, ranges, capacity);
}

}  // namespace sk::kernels
