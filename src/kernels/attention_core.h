// Attention over a paged cache: the building blocks shared by paged_attention*.* and
// mla_attention*.* (decode: one query token per sequence; prefill: many tokens per sequence,
// each over its own causal context; keys and values gathered row by row).
//
// attend() runs an online softmax over one sequence's context in chunks of kChunk tokens, for
// up to kMaxHeads query heads in groups that share cache rows (the query heads of one KV head;
// the MLA heads, which all read the one latent "head", form a single group; at prefill each
// query token's heads are a group of their own, with the token's context length):
//
//   for each chunk:  s[h][j] = scale * dot(q[h], k_j)            (ops.scores)
//                    m' = max(m, max_j s[h][j]); c = exp(m - m')  (ops.softmax)
//                    p[h][j] = exp(s[h][j] - m'); l = l * c + sum_j p[h][j]
//                    acc[h] = acc[h] * c + sum_j p[h][j] * v_j    (ops.pv, j ascending)
//   out[h] = acc[h] * (1 / l)                                     (ops.scale)
//
// Memory order: one pass handles every group of a core's heads of the sequence chunk by chunk,
// so the K (then V) rows of neighbouring KV heads, which share a token's slot, are read together
// instead of in one sweep over the whole context per KV head (a slot-sized stride that defeats
// the TLB and the hardware prefetchers). The next chunk's rows are prefetched.
//
// Determinism: every value of head h depends only on head h's query, the context rows and the
// ISA level. Dot products use lane partial sums (lane i takes elements i mod W in increasing
// order, one FMA each, then simd::hsum_lanes' fixed tree); the chunk boundaries are fixed
// multiples of kChunk; the weighted sum adds one token at a time. Register tiles only decide
// which dot products or output columns advance together, so the heads and groups processed
// together, the core split and the cache's block size change no bit.
#ifndef SUPERKERNEL_KERNELS_ATTENTION_CORE_H_
#define SUPERKERNEL_KERNELS_ATTENTION_CORE_H_

#include <superkernel/kernel_abi.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "kernels/kernel_util.h"

namespace sk::kernels::attn {

inline constexpr int kChunk = 64;     // tokens per online-softmax step (a multiple of 16)
inline constexpr int kMaxHeads = 32;  // query heads that share one pass over the cache rows

// Cache element types: f32, or bf16 held as its raw 16 bits.
using Bf16 = uint16_t;

template <class KT>
struct Ops {
  // s[h * kChunk + j] = scale * (q1[h] . rows[j][0, n1) + q2[h] . rows[j][off2, off2 + n2)) for
  // h < nh, j < nt. q2 is unused when n2 == 0.
  void (*scores)(const float* const* q1, const float* const* q2, int nh, int64_t n1, int64_t n2, int64_t off2,
                 const KT* const* rows, int nt, float scale, float* s);
  // Online-softmax step for nh heads over nt scores each: turns s[h * kChunk + j] into p in
  // place, updates m and l, and sets corr[h] = exp(m_old - m_new).
  void (*softmax)(float* s, int nh, int nt, float* m, float* l, float* corr);
  // acc[h][0, dv) = (first ? 0 : acc[h] * corr[h]) + sum_{j < nt} p[h * kChunk + j] * rows[j][0, dv).
  void (*pv)(const float* p, int nh, int nt, const KT* const* rows, int64_t dv, float* const* acc, const float* corr,
             bool first);
  // y[0, n) *= f
  void (*scale)(float* y, int64_t n, float f);
};

// The operations of the ISA level in effect (cpu_isa.h).
const Ops<float>& ops_f32();
const Ops<Bf16>& ops_bf16();

// One pass over a context: `nh` heads (<= kMaxHeads) with query segments q1[h] (n1 elements)
// and q2[h] (n2 elements, matched against key offset off2), values of dv elements, outputs
// out[h] (dv floats each, written only here). Heads [group_begin[g], group_begin[g + 1]) read
// the key and value rows that start `row_off[g]` elements into a token's slot.
struct Heads {
  int nh = 0;
  int ngroups = 0;
  int group_begin[kMaxHeads + 1] = {};
  int64_t row_off[kMaxHeads] = {};
  const float* q1[kMaxHeads] = {};
  const float* q2[kMaxHeads] = {};
  float* out[kMaxHeads] = {};
  int64_t ctx[kMaxHeads] = {};  // tokens of context of each group
  int64_t n1 = 0;
  int64_t n2 = 0;
  int64_t off2 = 0;
  int64_t dv = 0;
  float scale = 1.0f;
  bool v_shares_k = false;  // values are the first dv elements of the key rows (MLA)

  // Appends a group of n heads reading rows at `off` over a context of `context` tokens; q1/q2/out
  // of the new heads are set by the caller at indices [nh - n, nh).
  void add_group(int n, int64_t off, int64_t context) {
    group_begin[ngroups] = nh;
    row_off[ngroups] = off;
    ctx[ngroups] = context;
    ++ngroups;
    nh += n;
    group_begin[ngroups] = nh;
  }
};

// Asks for the cache lines of [p, p + bytes) of each row ahead of their use: the rows are
// scattered over blocks (and, for paged K/V, a whole slot apart), which hardware prefetchers do
// not follow across pages.
template <class KT>
void prefetch_rows(const KT* const* rows, int n, int64_t begin, int64_t bytes) {
  for (int j = 0; j < n; ++j) {
    const char* p = reinterpret_cast<const char*>(rows[j] + begin);
    for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 3);
  }
}

// slots(j0, nt, k_slots, v_slots) fills the pointers to the slots of tokens [j0, j0 + nt) in the
// key and value caches (one sequence for the whole pass). Each group attends to the first
// hd.ctx[g] tokens; a context of 0 tokens gives zeros.
//
// With several groups, a chunk is worked through in sub-blocks of kSubBlock tokens with every
// group inside, so that a token's slot is read front to back (and the groups of several query
// tokens over one KV head reuse each row from L1); the next sub-block's slots are
// prefetched. (A rescale by corr = 1 between the sub-blocks of one chunk is exact, so the split
// changes no value.) A group whose context ends inside a chunk simply stops there: its chunks,
// their boundaries and every per-head operation are those of a pass of its own, so a group's
// bits do not depend on the other groups of the pass.
template <class KT, class Slots>
void attend(const Ops<KT>& ops, const Heads& hd, Slots&& slots) {
  if (hd.nh == 0) return;
  int64_t ctx = 0;
  for (int g = 0; g < hd.ngroups; ++g) {
    ctx = std::max(ctx, hd.ctx[g]);
    if (hd.ctx[g] > 0) continue;
    for (int h = hd.group_begin[g]; h < hd.group_begin[g + 1]; ++h) std::fill(hd.out[h], hd.out[h] + hd.dv, 0.0f);
  }
  if (ctx == 0) return;
  constexpr int kSubBlock = 16;
  float m[kMaxHeads];
  float l[kMaxHeads];
  float corr[kMaxHeads];
  float ones[kMaxHeads];
  alignas(64) float s[kMaxHeads * kChunk];
  // Slot pointers of the current and the next chunk, and one group's row pointers.
  const KT* k_slots[2][kChunk];
  const KT* v_slots[2][kChunk];
  const KT* rows[kChunk];
  for (int h = 0; h < hd.nh; ++h) {
    m[h] = -std::numeric_limits<float>::infinity();
    l[h] = 0.0f;
    ones[h] = 1.0f;
  }
  // The groups' rows lie in one span of each slot.
  const int64_t k_len = std::max(hd.n1, hd.off2 + hd.n2);
  int64_t span_begin = hd.row_off[0];
  int64_t span_end = hd.row_off[0];
  for (int g = 1; g < hd.ngroups; ++g) {
    span_begin = std::min(span_begin, hd.row_off[g]);
    span_end = std::max(span_end, hd.row_off[g]);
  }
  const int64_t k_bytes = (span_end - span_begin + k_len) * static_cast<int64_t>(sizeof(KT));
  const int64_t v_bytes = hd.v_shares_k ? 0 : (span_end - span_begin + hd.dv) * static_cast<int64_t>(sizeof(KT));
  const int sub = hd.ngroups > 1 ? kSubBlock : kChunk;
  const auto group_rows = [&](const KT* const* base, int g, int n) {
    for (int j = 0; j < n; ++j) rows[j] = base[j] + hd.row_off[g];
  };
  // Tokens [j0 + j, j0 + j + n) of group g that lie in its context.
  const auto in_context = [&](int g, int64_t j0, int j, int n) {
    return static_cast<int>(std::clamp<int64_t>(hd.ctx[g] - j0 - j, 0, n));
  };
  slots(0, static_cast<int>(std::min<int64_t>(kChunk, ctx)), k_slots[0], v_slots[0]);
  for (int64_t j0 = 0, c = 0; j0 < ctx; j0 += kChunk, c ^= 1) {
    const int nt = static_cast<int>(std::min<int64_t>(kChunk, ctx - j0));
    const int next = static_cast<int>(std::min<int64_t>(kChunk, std::max<int64_t>(0, ctx - j0 - kChunk)));
    if (next > 0) slots(j0 + kChunk, next, k_slots[c ^ 1], v_slots[c ^ 1]);
    // Prefetches the sub-block after [j, j + sub) of this chunk (or the next chunk's first).
    const auto prefetch_after = [&](const KT* const(*base)[kChunk], int j, int64_t bytes) {
      if (j + sub < nt) {
        prefetch_rows(base[c] + j + sub, std::min(sub, nt - j - sub), span_begin, bytes);
      } else if (next > 0) {
        prefetch_rows(base[c ^ 1], std::min(sub, next), span_begin, bytes);
      }
    };
    for (int j = 0; j < nt; j += sub) {
      const int n = std::min(sub, nt - j);
      prefetch_after(k_slots, j, k_bytes);
      for (int g = 0; g < hd.ngroups; ++g) {
        const int ng = in_context(g, j0, j, n);
        if (ng == 0) continue;
        const int h0 = hd.group_begin[g];
        group_rows(k_slots[c] + j, g, ng);
        ops.scores(hd.q1 + h0, hd.q2 + h0, hd.group_begin[g + 1] - h0, hd.n1, hd.n2, hd.off2, rows, ng, hd.scale,
                   s + h0 * kChunk + j);
      }
    }
    for (int g = 0; g < hd.ngroups; ++g) {
      const int ng = in_context(g, j0, 0, nt);
      if (ng == 0) continue;
      const int h0 = hd.group_begin[g];
      ops.softmax(s + h0 * kChunk, hd.group_begin[g + 1] - h0, ng, m + h0, l + h0, corr + h0);
    }
    for (int j = 0; j < nt; j += sub) {
      const int n = std::min(sub, nt - j);
      prefetch_after(v_slots, j, v_bytes);
      for (int g = 0; g < hd.ngroups; ++g) {
        const int ng = in_context(g, j0, j, n);
        if (ng == 0) continue;
        const int h0 = hd.group_begin[g];
        group_rows(v_slots[c] + j, g, ng);
        ops.pv(s + h0 * kChunk + j, hd.group_begin[g + 1] - h0, ng, rows, hd.dv, hd.out + h0,
               (j == 0 ? corr : ones) + h0, j0 == 0 && j == 0);
      }
    }
  }
  for (int g = 0; g < hd.ngroups; ++g) {
    if (hd.ctx[g] == 0) continue;
    for (int h = hd.group_begin[g]; h < hd.group_begin[g + 1]; ++h) ops.scale(hd.out[h], hd.dv, 1.0f / l[h]);
  }
}

// ---- Sequence tables shared by the paged kernels ----

// block_tables i32 [B, max_blocks] (any strides) and either, at decode, context_lens i32 [B]
// (row b of the queries is sequence b) or, at prefill, seq_ids i32 [T] and positions i32 [T]
// (row t of the queries is token t of sequence seq_ids[t], which attends to positions
// 0 .. positions[t] of it).
struct SeqTables {
  const int32_t* block_tables = nullptr;
  int64_t bt_stride[2] = {};
  int64_t max_blocks = 0;
  const int32_t* context_lens = nullptr;
  int64_t cl_stride = 0;
  int64_t batch = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  const int32_t* seq_ids = nullptr;  // null at decode
  int64_t si_stride = 0;
  const int32_t* positions = nullptr;
  int64_t pos_stride = 0;
  int64_t tokens = 0;

  int64_t context(int64_t b) const { return context_lens[b * cl_stride]; }
  int64_t block(int64_t b, int64_t i) const { return block_tables[b * bt_stride[0] + i * bt_stride[1]]; }
  // Prefill: the sequence of token t and the tokens it attends to.
  int64_t token_seq(int64_t t) const { return seq_ids[t * si_stride]; }
  int64_t token_context(int64_t t) const { return static_cast<int64_t>(positions[t * pos_stride]) + 1; }
};

// Shapes and dtypes of the two tables for a batch of B sequences over a cache of num_blocks
// blocks of block_size tokens, read from the operand named `cache`; block_size must be >= 1.
bool plan_seq_tables(const sk_tensor_arg& block_tables, const sk_tensor_arg& context_lens, int64_t batch,
                     int64_t num_blocks, int64_t block_size, const char* kernel, const char* cache, SeqTables* st,
                     ErrorSink err);
// The same for prefill: block_tables [B, max_blocks] (any B), seq_ids and positions [T].
bool plan_token_tables(const sk_tensor_arg& block_tables, const sk_tensor_arg& seq_ids, const sk_tensor_arg& positions,
                       int64_t tokens, int64_t num_blocks, int64_t block_size, const char* kernel, const char* cache,
                       SeqTables* st, ErrorSink err);
// Their values, in sequence (decode) or token (prefill) order, so every core reports the same
// first error: 0 <= context length <= max_blocks * block_size (at prefill: 0 <= seq_ids[t] < B and
// 0 <= positions[t] < max_blocks * block_size), and every block id a context uses is in
// [0, num_blocks).
bool check_seq_tables(const SeqTables& st, const char* kernel, ErrorSink err);

// ---- Prefill ----
//
// The rows of a prefill kernel are ordered (KV head, token, query head of the KV head's group of
// `group` heads): consecutive rows of one core are the tokens of one KV head, which share a pass
// over its cache rows (up to kMaxHeads heads; one group per token, each with its own context).
// MLA is the case of one KV head (the latent row) with all heads in its group.
//
// Causal contexts grow with the token, so a contiguous split of the tokens would give the last
// core most of the work: the rows are cut into 2n pieces and core c takes pieces c and
// 2n - 1 - c (whole groups while there are enough to go round).
struct PrefillSplit {
  sk_range piece[2];
};
PrefillSplit prefill_split(int64_t tokens, int64_t kv_heads, int64_t group, int32_t core_id, int32_t num_cores);

// Row index -> (token, query head).
struct PrefillRow {
  int64_t token;
  int64_t head;
};
inline PrefillRow prefill_row(int64_t i, int64_t tokens, int64_t group) {
  const int64_t unit = i / group;  // kv_head * tokens + token
  return {unit % tokens, (unit / tokens) * group + i % group};
}

// Runs the passes over rows [r.begin, r.end). `proto` holds the per-pass constants (n1, n2, off2,
// dv, scale, v_shares_k); set_head(hd, idx, t, h) sets hd.q1/q2/out[idx] for token t, query head h;
// the heads of KV head kvh read their rows `kvh * kv_row_off` elements into a slot; slot(n) is
// the first element of slot n in the key cache and in the value cache (a pair).
template <class KT, class SetHead, class SlotOf>
void attend_prefill(const Ops<KT>& ops, const Heads& proto, const SeqTables& st, int64_t group, int64_t kv_row_off,
                    sk_range r, SetHead&& set_head, SlotOf&& slot) {
  const int64_t tokens = st.tokens;
  for (int64_t i = r.begin; i < r.end;) {
    Heads hd = proto;
    const int64_t kvh = i / (tokens * group);
    const int64_t b = st.token_seq((i / group) % tokens);
    const int64_t kvh_end = std::min(r.end, (kvh + 1) * tokens * group);
    while (i < kvh_end && hd.nh < kMaxHeads) {
      const PrefillRow row = prefill_row(i, tokens, group);
      if (st.token_seq(row.token) != b) break;
      const int64_t unit_end = (i / group + 1) * group;
      const int64_t n = std::min({kvh_end, unit_end, i + (kMaxHeads - hd.nh)}) - i;
      hd.add_group(static_cast<int>(n), kvh * kv_row_off, st.token_context(row.token));
      for (int64_t j = 0; j < n; ++j)
        set_head(hd, hd.nh - static_cast<int>(n) + static_cast<int>(j), row.token, row.head + j);
      i += n;
    }
    const int64_t bs = st.block_size;
    attend<KT>(ops, hd, [&](int64_t j0, int nt, const KT** k_slots, const KT** v_slots) {
      for (int j = 0; j < nt; ++j) {
        const int64_t pos = j0 + j;
        const auto kv = slot(st.block(b, pos / bs) * bs + pos % bs);
        k_slots[j] = kv.first;
        v_slots[j] = kv.second;
      }
    });
  }
}

}  // namespace sk::kernels::attn

#endif  // SUPERKERNEL_KERNELS_ATTENTION_CORE_H_
