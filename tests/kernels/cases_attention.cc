// Direct-test cases of the attention family (layer_norm, rope, KV-cache appends, paged decode
// attention, MLA attention, batched_matmul): one token, context length 1, contexts that are not
// a multiple of the block size or of the softmax chunk, an empty context, head dims that are not
// a multiple of any vector width, MHA and GQA with 8 query heads per KV head, more heads than
// one pass takes, partial rotary dims in both RoPE styles, skipped and repeated slots, in-place
// and separate cache outputs, strided views. Error paths (bad positions, slots, block tables,
// context lengths, shapes) are tested at the end of the file.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "kernel_cases.h"
#include "kernels/reference/reference.h"
#include "manual_args.h"
#include "superkernel/attrs_attention.h"

namespace sk::kernel_test {
namespace {

TensorDesc bf16(std::vector<int64_t> shape) {
  TensorDesc d = tensor(SK_DTYPE_BF16, std::move(shape));
  d.fill = Fill::kUniform;
  return d;
}

TensorDesc i32(std::vector<int64_t> shape, std::vector<double> values) {
  return tensor(SK_DTYPE_I32, std::move(shape)).with_values(std::move(values));
}

TensorDesc cache(int32_t dtype, std::vector<int64_t> shape) {
  return dtype == SK_DTYPE_BF16 ? bf16(std::move(shape)) : f32(std::move(shape));
}

Case make(std::string name, std::string kernel, std::vector<TensorDesc> in, std::vector<TensorDesc> out,
          std::vector<unsigned char> attrs = {}) {
  return Case{std::move(name), std::move(kernel), std::move(in), std::move(out), std::move(attrs), -1};
}

// ---- layer_norm ----

Case ln(std::string name, TensorDesc x, TensorDesc out, float eps = 1e-5f) {
  const int64_t d = x.shape.back();
  return make(std::move(name), "layer_norm.f32", {std::move(x), f32({d}).range(0.5, 1.5), f32({d})}, {std::move(out)},
              attrs_bytes(sk_layer_norm_attrs{eps}));
}

// ---- rope ----

// x [T, H, Dh] (or [T, H * Dh] when `flat`), positions below max_pos = 50.
Case rope(std::string name, int64_t t, int64_t h, int32_t dh, int32_t rd, int32_t neox, bool flat = false) {
  std::vector<double> pos;
  for (int64_t i = 0; i < t; ++i) pos.push_back(static_cast<double>((i * 17 + 3) % 50));
  const std::vector<int64_t> shape = flat ? std::vector<int64_t>{t, h * dh} : std::vector<int64_t>{t, h, dh};
  return make(std::move(name), "rope.f32", {f32(shape).range(-2, 2), i32({t}, pos), f32({50, rd})}, {f32(shape)},
              attrs_bytes(sk_rope_attrs{dh, rd, neox}));
}

// ---- KV-cache appends ----

std::string suffix(int32_t dtype) { return dtype == SK_DTYPE_BF16 ? "bf16" : "f32"; }

// k_new, v_new [T, hkv, dh] into caches [blocks, bs, hkv, dh]; in place unless `separate`.
Case kv_append(std::string name, int32_t dtype, std::vector<double> slots, int64_t hkv, int64_t dh, int64_t blocks,
               int64_t bs, bool separate = false) {
  const auto t = static_cast<int64_t>(slots.size());
  Case c = make(std::move(name) + "_" + suffix(dtype), "kv_append." + suffix(dtype),
                {f32({t, hkv, dh}).range(-100, 100), f32({t, hkv, dh}).range(-3, 3), i32({t}, std::move(slots)),
                 cache(dtype, {blocks, bs, hkv, dh}), cache(dtype, {blocks, bs, hkv, dh})},
                {cache(dtype, {blocks, bs, hkv, dh}), cache(dtype, {blocks, bs, hkv, dh})});
  if (separate) return c;
  return in_place_output(in_place_output(std::move(c), 0, 3), 1, 4);
}

Case mla_append(std::string name, int32_t dtype, std::vector<double> slots, int64_t r, int64_t p, int64_t blocks,
                int64_t bs, bool separate = false) {
  const auto t = static_cast<int64_t>(slots.size());
  Case c = make(std::move(name) + "_" + suffix(dtype), "mla_cache_append." + suffix(dtype),
                {f32({t, r}).range(-5, 5), f32({t, p}), i32({t}, std::move(slots)), cache(dtype, {blocks, bs, r + p})},
                {cache(dtype, {blocks, bs, r + p})});
  if (separate) return c;
  return in_place(std::move(c), 3);
}

// ---- paged attention ----

struct Seqs {
  std::vector<double> context_lens;
  std::vector<double> block_tables;  // [B, max_blocks], row-major
  int64_t max_blocks;
};

Case paged(std::string name, int32_t dtype, int64_t hq, int64_t hkv, int64_t dh, int64_t blocks, int64_t bs,
           const Seqs& s) {
  const auto b = static_cast<int64_t>(s.context_lens.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  return make(std::move(name) + "_" + suffix(dtype), "paged_attention." + suffix(dtype),
              {f32({b, hq, dh}).range(-2, 2), cache(dtype, {blocks, bs, hkv, dh}), cache(dtype, {blocks, bs, hkv, dh}),
               i32({b, s.max_blocks}, s.block_tables), i32({b}, s.context_lens)},
              {f32({b, hq, dh})}, attrs_bytes(sk_paged_attention_attrs{scale}));
}

// ---- MLA ----

Case mla(std::string name, int32_t dtype, int64_t h, int32_t r, int32_t p, int64_t blocks, int64_t bs, const Seqs& s) {
  const auto b = static_cast<int64_t>(s.context_lens.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(r + p));
  return make(std::move(name) + "_" + suffix(dtype), "mla_attention." + suffix(dtype),
              {f32({b, h, r}).range(-2, 2), f32({b, h, p}).range(-2, 2), cache(dtype, {blocks, bs, r + p}),
               i32({b, s.max_blocks}, s.block_tables), i32({b}, s.context_lens)},
              {f32({b, h, r})}, attrs_bytes(sk_mla_attention_attrs{r, p, scale}));
}

// ---- prefill ----

// T prompt tokens: the sequence and position of each, over block_tables [B, max_blocks].
struct Prompt {
  std::vector<double> seq_ids;
  std::vector<double> positions;
  std::vector<double> block_tables;  // [B, max_blocks], row-major
  int64_t batch;
  int64_t max_blocks;
};

// Positions first .. first + n - 1 of sequence `seq`, appended to p.
void tokens(Prompt& p, int64_t seq, int64_t first, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    p.seq_ids.push_back(static_cast<double>(seq));
    p.positions.push_back(static_cast<double>(first + i));
  }
}

Case paged_prefill(std::string name, int32_t dtype, int64_t hq, int64_t hkv, int64_t dh, int64_t blocks, int64_t bs,
                   const Prompt& pr) {
  const auto t = static_cast<int64_t>(pr.seq_ids.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  return make(std::move(name) + "_" + suffix(dtype), "paged_attention_prefill." + suffix(dtype),
              {f32({t, hq, dh}).range(-2, 2), cache(dtype, {blocks, bs, hkv, dh}), cache(dtype, {blocks, bs, hkv, dh}),
               i32({pr.batch, pr.max_blocks}, pr.block_tables), i32({t}, pr.seq_ids), i32({t}, pr.positions)},
              {f32({t, hq, dh})}, attrs_bytes(sk_paged_attention_attrs{scale}));
}

Case mla_prefill(std::string name, int32_t dtype, int64_t h, int32_t r, int32_t p, int64_t blocks, int64_t bs,
                 const Prompt& pr) {
  const auto t = static_cast<int64_t>(pr.seq_ids.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(r + p));
  return make(std::move(name) + "_" + suffix(dtype), "mla_attention_prefill." + suffix(dtype),
              {f32({t, h, r}).range(-2, 2), f32({t, h, p}).range(-2, 2), cache(dtype, {blocks, bs, r + p}),
               i32({pr.batch, pr.max_blocks}, pr.block_tables), i32({t}, pr.seq_ids), i32({t}, pr.positions)},
              {f32({t, h, r})}, attrs_bytes(sk_mla_attention_attrs{r, p, scale}));
}

// Prompts shared by the paged and MLA prefill cases.
Prompt one_prompt(int64_t n, std::vector<double> block_tables, int64_t max_blocks) {
  Prompt p{{}, {}, std::move(block_tables), 1, max_blocks};
  tokens(p, 0, 0, n);
  return p;
}

// Two sequences: sequence 1 continues a context of 5 tokens (chunked prefill) and its tokens come
// first; sequence 0 is a new prompt of 7 tokens; sequence 2 has no tokens.
Prompt mixed_prompt() {
  Prompt p{{}, {}, {2, 5, -1, 4, 0, 3, -1, -1, -1}, 3, 3};
  tokens(p, 1, 5, 6);
  tokens(p, 0, 0, 7);
  return p;
}

// Tokens out of order, a repeated position, positions at a block edge.
Prompt shuffled_prompt() { return {{0, 0, 0, 0, 0, 0}, {7, 0, 3, 3, 8, 4}, {1, 3, 0}, 1, 3}; }

Case bmm(std::string name, TensorDesc x, TensorDesc w, TensorDesc y) {
  return make(std::move(name), "batched_matmul.f32", {std::move(x), std::move(w)}, {std::move(y)});
}

}  // namespace

SK_KERNEL_CASES(attention_cases) {
  std::vector<Case> cs;
  // layer_norm
  cs.push_back(ln("layer_norm_one_row", f32({1, 64}), f32({1, 64})));
  cs.push_back(ln("layer_norm_5x37", f32({5, 37}), f32({5, 37})));
  cs.push_back(ln("layer_norm_3x4x16", f32({3, 4, 16}), f32({3, 4, 16})));
  cs.push_back(ln("layer_norm_d1", f32({7, 1}), f32({7, 1})));
  cs.push_back(ln("layer_norm_long_rows", f32({3, 1031}).range(-4, 4), f32({3, 1031})));
  // A mean far from zero: one-pass E[x^2] - E[x]^2 would lose the variance here.
  cs.push_back(ln("layer_norm_offset_mean", f32({4, 300}).range(50, 51), f32({4, 300})));
  cs.push_back(ln("layer_norm_padded_rows", f32({9, 130}).padded(1, 6), f32({9, 130}).padded(1, 3).reversed(0)));
  cs.push_back(in_place(ln("layer_norm_in_place", f32({6, 40}), f32({6, 40})), 0));

  // rope: both styles, full and partial rotary dims, dims and halves that end in vector tails.
  cs.push_back(rope("rope_neox_3x4x64", 3, 4, 64, 64, 1));
  cs.push_back(rope("rope_interleaved_3x4x64", 3, 4, 64, 64, 0));
  cs.push_back(rope("rope_neox_partial_2x3x64_r32", 2, 3, 64, 32, 1));
  cs.push_back(rope("rope_interleaved_partial_2x3x40_r24", 2, 3, 40, 24, 0));
  cs.push_back(rope("rope_neox_odd_half_5x2x18", 5, 2, 18, 18, 1));
  cs.push_back(rope("rope_interleaved_odd_half_5x2x20_r14", 5, 2, 20, 14, 0));
  cs.push_back(rope("rope_neox_flat_5x4x32", 5, 4, 32, 32, 1, true));
  cs.push_back(rope("rope_interleaved_flat_partial_3x2x48_r16", 3, 2, 48, 16, 0, true));
  cs.push_back(rope("rope_one_token_128_r64", 1, 1, 128, 64, 1));
  cs.push_back(in_place(rope("rope_in_place_neox", 4, 3, 32, 16, 1), 0));
  cs.push_back(in_place(rope("rope_in_place_interleaved", 4, 3, 34, 34, 0), 0));
  {
    Case c = rope("rope_strided", 4, 3, 16, 16, 1);
    c.inputs[0].transposed({1, 0, 2}).padded(2, 4);
    c.inputs[1].stepped(0, 2);
    c.outputs[0].padded(1, 1).reversed(0);
    cs.push_back(std::move(c));
  }

  // KV-cache appends: one token, skipped tokens (-1), a repeated slot (the later token wins),
  // head dims with vector tails, separate (non in-place) outputs, strided new values.
  for (int32_t dt : {SK_DTYPE_F32, SK_DTYPE_BF16}) {
    cs.push_back(kv_append("kv_append_one_token", dt, {5}, 2, 8, 4, 4));
    cs.push_back(kv_append("kv_append_skipped", dt, {3, -1, 10, 0, 15}, 2, 16, 4, 4));
    cs.push_back(kv_append("kv_append_repeated_slot", dt, {2, 7, 2}, 1, 12, 3, 4));
    cs.push_back(kv_append("kv_append_dh_tail", dt, {9, 1, 30, 22, 6, 13}, 3, 13, 4, 8));
    cs.push_back(kv_append("kv_append_separate", dt, {4, -1, 0}, 2, 8, 2, 4, true));
    {
      Case c = kv_append("kv_append_strided_new", dt, {1, 6, 3}, 2, 8, 2, 4);
      c.inputs[0].transposed({1, 0, 2});
      c.inputs[1].padded(2, 3);
      cs.push_back(std::move(c));
    }
    cs.push_back(mla_append("mla_cache_append_skipped", dt, {4, -1, 9}, 32, 8, 3, 4));
    cs.push_back(mla_append("mla_cache_append_tails", dt, {0, 11, 5, 6}, 20, 7, 2, 8));
    cs.push_back(mla_append("mla_cache_append_separate", dt, {2, 3}, 16, 16, 2, 2, true));
  }

  {
    // Rounding to bf16: ties to even both ways, values that round up into the next binade or to
    // infinity, subnormals, signed zero, infinities and NaN (which must stay a NaN).
    const double inf = std::numeric_limits<double>::infinity();
    Case c = kv_append("kv_append_rounding", SK_DTYPE_BF16, {3, 0}, 1, 12, 1, 4);
    c.inputs[0].with_values({1.00390625, 1.01171875, -1.00390625, 1.99951171875, 3.3961775e38, 3.4e38, 1e-40, -1e-45,
                             -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN()});
    cs.push_back(std::move(c));
  }

  // Paged attention (f32 and bf16 caches).
  for (int32_t dt : {SK_DTYPE_F32, SK_DTYPE_BF16}) {
    // MHA, one sequence, context 10 over blocks of 4 (not a multiple), scattered blocks.
    cs.push_back(paged("paged_attention_mha_ctx10", dt, 4, 4, 16, 6, 4, {{10}, {4, 0, 2}, 3}));
    // Context length 1.
    cs.push_back(paged("paged_attention_ctx1", dt, 2, 1, 32, 3, 4, {{1}, {2, 0}, 2}));
    // GQA with 8 query heads per KV head; unused table entries may hold anything (-1).
    cs.push_back(paged("paged_attention_gqa8", dt, 16, 2, 32, 10, 8, {{1, 29}, {3, -1, -1, -1, 9, 1, 5, 0}, 4}));
    // B = 3 with different lengths, one of them empty and one longer than a softmax chunk;
    // Dh = 20 ends in a vector tail everywhere.
    cs.push_back(paged("paged_attention_b3_dh20", dt, 6, 2, 20, 12, 16,
                       {{5, 0, 70}, {7, -1, -1, -1, -1, 0, 0, 0, 0, 0, 11, 3, 8, 1, 5}, 5}));
    // A long context (several chunks) at a decode head size, all 8 query heads on one KV head.
    cs.push_back(paged("paged_attention_ctx200_dh128", dt, 8, 1, 128, 16, 16,
                       {{200}, {15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 16}));
    // More query heads per KV head than one pass takes (attn::kMaxHeads).
    cs.push_back(paged("paged_attention_group20", dt, 40, 2, 8, 4, 4, {{9, 16}, {1, 2, 3, -1, 0, 3, 2, 1}, 4}));
    // 12 query heads on one KV head (an 8-head value tile and a 4-head one), Dh = 96 (three
    // 32-column value blocks and three 32-element key steps).
    cs.push_back(paged("paged_attention_group12_dh96", dt, 12, 1, 96, 8, 8, {{45}, {6, 2, 7, 0, 4, 1}, 6}));
  }
  {
    Case c = paged("paged_attention_strided_q_out", SK_DTYPE_F32, 4, 2, 24, 6, 4, {{7, 11}, {0, 1, 5, 2, 3, 4}, 3});
    c.inputs[0].transposed({1, 0, 2}).padded(2, 8);
    c.inputs[3].padded(1, 2);
    c.outputs[0].padded(2, 5).reversed(1);
    cs.push_back(std::move(c));
  }

  // MLA attention.
  for (int32_t dt : {SK_DTYPE_F32, SK_DTYPE_BF16}) {
    cs.push_back(mla("mla_attention_h3_ctx13", dt, 3, 32, 8, 5, 4, {{13}, {4, 1, 3, 0}, 4}));
    cs.push_back(
        mla("mla_attention_h16_b2", dt, 16, 64, 16, 12, 16, {{70, 3}, {0, 1, 2, 3, 4, 5, 11, 8, 9, 10, 6, 7}, 6}));
    cs.push_back(mla("mla_attention_tails_ctx1", dt, 5, 40, 12, 3, 4, {{1, 0}, {2, -1, -1, -1}, 2}));
    cs.push_back(mla("mla_attention_no_rope", dt, 2, 24, 0, 4, 4, {{6}, {3, 1}, 2}));
    cs.push_back(mla("mla_attention_h40", dt, 40, 16, 8, 4, 4, {{15}, {0, 1, 2, 3}, 4}));
    cs.push_back(mla("mla_attention_decode_512", dt, 4, 512, 64, 6, 16, {{90}, {5, 3, 1, 0, 2, 4}, 6}));
    // 9 heads (a full 8-head value tile and one more), R = 48 (one 32-element step of the bf16
    // key widening, then a 16-element one), P = 8 (a tail), over two softmax chunks.
    cs.push_back(mla("mla_attention_h9_r48", dt, 9, 48, 8, 16, 8,
                     {{100, 13},
                      {3, 0, 7, 1, 11, 2, 9, 4, 5, 6, 8, 10, 12, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
                      13}));
  }
  {
    Case c = mla("mla_attention_strided", SK_DTYPE_F32, 3, 16, 8, 4, 4, {{7, 10}, {1, 0, 3, 2, 0, 0}, 3});
    c.inputs[0].transposed({1, 0, 2});
    c.inputs[1].padded(2, 3);
    c.outputs[0].padded(1, 2);
    cs.push_back(std::move(c));
  }

  // Prefill (both cache dtypes): one prompt from position 0, two sequences of which one continues
  // an earlier context, tokens out of order, a prompt longer than a softmax chunk with head dims
  // in vector tails (several passes per KV head), and a group larger than one pass takes.
  for (int32_t dt : {SK_DTYPE_F32, SK_DTYPE_BF16}) {
    cs.push_back(paged_prefill("paged_prefill_mha_t10", dt, 4, 4, 16, 6, 4, one_prompt(10, {4, 0, 2}, 3)));
    cs.push_back(paged_prefill("paged_prefill_gqa4_mixed", dt, 8, 2, 32, 6, 4, mixed_prompt()));
    cs.push_back(paged_prefill("paged_prefill_shuffled", dt, 6, 3, 24, 4, 4, shuffled_prompt()));
    cs.push_back(paged_prefill("paged_prefill_t75_dh20", dt, 6, 2, 20, 8, 16, one_prompt(75, {7, 1, 6, 2, 5}, 5)));
    cs.push_back(paged_prefill("paged_prefill_t40_dh128_gqa8", dt, 16, 2, 128, 4, 16, one_prompt(40, {3, 0, 2}, 3)));
    cs.push_back(paged_prefill("paged_prefill_group20", dt, 40, 2, 8, 6, 4, mixed_prompt()));
    cs.push_back(mla_prefill("mla_prefill_h3_t13", dt, 3, 32, 8, 5, 4, one_prompt(13, {4, 1, 3, 0}, 4)));
    cs.push_back(mla_prefill("mla_prefill_h16_mixed", dt, 16, 64, 16, 6, 4, mixed_prompt()));
    cs.push_back(mla_prefill("mla_prefill_no_rope_shuffled", dt, 2, 24, 0, 4, 4, shuffled_prompt()));
    cs.push_back(mla_prefill("mla_prefill_h40_t6", dt, 40, 16, 8, 4, 4, one_prompt(6, {2, 3}, 2)));
    cs.push_back(mla_prefill("mla_prefill_512_t70", dt, 4, 512, 64, 6, 16, one_prompt(70, {5, 3, 1, 0, 2}, 5)));
  }
  {
    Case c = paged_prefill("paged_prefill_strided", SK_DTYPE_F32, 4, 2, 24, 6, 4, mixed_prompt());
    c.inputs[0].transposed({1, 0, 2}).padded(2, 8);
    c.inputs[3].padded(1, 2);
    c.inputs[4].stepped(0, 2);
    c.outputs[0].padded(2, 5).reversed(1);
    cs.push_back(std::move(c));
  }
  {
    Case c = mla_prefill("mla_prefill_strided", SK_DTYPE_F32, 3, 16, 8, 6, 4, mixed_prompt());
    c.inputs[0].transposed({1, 0, 2});
    c.inputs[1].padded(2, 3);
    c.inputs[5].reversed(0);
    c.outputs[0].padded(1, 2);
    cs.push_back(std::move(c));
  }

  // batched_matmul: decode (M = 1) projections, ragged sizes, strided views, K = 0.
  cs.push_back(bmm("batched_matmul_decode", f32({4, 1, 64}), f32({4, 48, 64}), f32({4, 1, 48})));
  cs.push_back(bmm("batched_matmul_3x5x37", f32({3, 5, 37}), f32({3, 11, 37}), f32({3, 5, 11})));
  cs.push_back(bmm("batched_matmul_wuk", f32({16, 1, 128}), f32({16, 96, 128}), f32({16, 1, 96})));
  cs.push_back(bmm("batched_matmul_one_head", f32({1, 3, 9}), f32({1, 2, 9}), f32({1, 3, 2})));
  cs.push_back(bmm("batched_matmul_strided", f32({3, 2, 20}).transposed({1, 0, 2}), f32({3, 13, 20}).padded(2, 4),
                   f32({3, 2, 13}).padded(2, 3).reversed(0)));
  cs.push_back(bmm("batched_matmul_k0", f32({2, 3, 0}), f32({2, 4, 0}), f32({2, 3, 4})));
  return cs;
}

// ---------------------------------------------------------------------------------------------
// Error paths

namespace {

// Runs every core of a `cores`-core call, which must succeed.
void run_on_cores(const sk_kernel_desc* k, const sk_kernel_args& args, int cores) {
  for (int core = 0; core < cores; ++core) {
    char msg[256] = {};
    sk_core_ctx ctx{};
    ctx.core_id = core;
    ctx.num_cores = cores;
    ctx.error_message = msg;
    ctx.error_capacity = sizeof msg;
    ASSERT_EQ(k->run(&args, &ctx), SK_OK) << msg;
  }
}

// Every core of a 1- and a 3-core call fails with a message naming the kernel and containing
// each of `details`, leaves the outputs untouched, and the access callback refuses the shapes
// when `access_fails` (data errors are only found by run).
void expect_invalid(const char* kernel, ManualArgs& ops, std::vector<std::string> details, bool access_fails) {
  SCOPED_TRACE(kernel);
  const sk_kernel_desc* k = builtin_kernel(kernel);
  ASSERT_NE(k, nullptr);
  const sk_kernel_args& args = ops.args();
  std::vector<std::vector<unsigned char>> before;
  for (int32_t o = 0; o < args.num_outputs; ++o) {
    const auto* p = static_cast<const unsigned char*>(args.outputs[o].data);
    before.emplace_back(p, p + sk_tensor_numel(&args.outputs[o]) * sk_dtype_size(args.outputs[o].dtype));
  }
  for (int n : {1, 3}) {
    for (int core = 0; core < n; ++core) {
      char msg[512] = {};
      sk_core_ctx ctx{};
      ctx.core_id = core;
      ctx.num_cores = n;
      ctx.error_message = msg;
      ctx.error_capacity = sizeof msg;
      EXPECT_EQ(k->run(&args, &ctx), SK_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::strstr(msg, kernel), nullptr) << msg;
      for (const std::string& d : details) EXPECT_NE(std::strstr(msg, d.c_str()), nullptr) << msg;
    }
  }
  for (int32_t o = 0; o < args.num_outputs; ++o) {
    const auto* p = static_cast<const unsigned char*>(args.outputs[o].data);
    const std::vector<unsigned char>& was = before[static_cast<size_t>(o)];
    if (was.empty()) continue;  // an empty output may have no storage at all
    EXPECT_EQ(0, std::memcmp(p, was.data(), was.size())) << "output " << o << " written despite the error";
  }
  sk_access_range ranges[8];
  if (access_fails) {
    EXPECT_LT(k->access(&args, 0, 1, ranges, 8), 0);
  } else {
    EXPECT_GE(k->access(&args, 0, 1, ranges, 8), 0);
  }
}

TEST(AttentionKernelErrors, RopeRejectsBadPositionsAndAttributes) {
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {3, 2, 8}).in(SK_DTYPE_I32, {3}).in(SK_DTYPE_F32, {10, 8}).out(SK_DTYPE_F32, {3, 2, 8});
    o.attrs(sk_rope_attrs{8, 8, 1});
    o.in_data<int32_t>(1)[2] = 10;
    expect_invalid("rope.f32", o, {"positions[2] = 10", "10 positions"}, false);
    o.in_data<int32_t>(1)[2] = -1;
    expect_invalid("rope.f32", o, {"positions[2] = -1"}, false);
  }
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {3, 2, 8}).in(SK_DTYPE_I32, {3}).in(SK_DTYPE_F32, {10, 8}).out(SK_DTYPE_F32, {3, 2, 8});
    o.attrs(sk_rope_attrs{8, 7, 1});
    expect_invalid("rope.f32", o, {"rotary_dim 7"}, true);
  }
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {3, 20}).in(SK_DTYPE_I32, {3}).in(SK_DTYPE_F32, {10, 8}).out(SK_DTYPE_F32, {3, 20});
    o.attrs(sk_rope_attrs{8, 8, 0});
    expect_invalid("rope.f32", o, {"head_dim = 8"}, true);
  }
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {3, 2, 8}).in(SK_DTYPE_I32, {3}).in(SK_DTYPE_F32, {10, 6}).out(SK_DTYPE_F32, {3, 2, 8});
    o.attrs(sk_rope_attrs{8, 8, 1});
    expect_invalid("rope.f32", o, {"cos_sin_cache shape [10, 6]"}, true);
  }
}

TEST(AttentionKernelErrors, LayerNormShapesAndAttributes) {
  ManualArgs o;
  o.in(SK_DTYPE_F32, {3, 5}).in(SK_DTYPE_F32, {5}).in(SK_DTYPE_F32, {4}).out(SK_DTYPE_F32, {3, 5});
  o.attrs(sk_layer_norm_attrs{1e-5f});
  expect_invalid("layer_norm.f32", o, {"beta shape [4]"}, true);
  ManualArgs n;
  n.in(SK_DTYPE_F32, {3, 5}).in(SK_DTYPE_F32, {5}).in(SK_DTYPE_F32, {5}).out(SK_DTYPE_F32, {3, 5});
  n.attrs(sk_layer_norm_attrs{-1.0f});
  expect_invalid("layer_norm.f32", n, {"eps"}, true);
}

TEST(AttentionKernelErrors, KvAppendRejectsSlotsOutsideTheCache) {
  for (const char* kernel : {"kv_append.f32", "kv_append.bf16"}) {
    const int32_t dt = std::strstr(kernel, "bf16") != nullptr ? SK_DTYPE_BF16 : SK_DTYPE_F32;
    ManualArgs o;
    o.in(SK_DTYPE_F32, {3, 2, 4}).in(SK_DTYPE_F32, {3, 2, 4}).in(SK_DTYPE_I32, {3});
    o.in(dt, {2, 4, 2, 4}).in(dt, {2, 4, 2, 4}).out(dt, {2, 4, 2, 4}).out(dt, {2, 4, 2, 4});
    o.in_data<int32_t>(2)[0] = 1;
    o.in_data<int32_t>(2)[1] = 8;
    o.in_data<int32_t>(2)[2] = -1;
    // A separate output would receive a copy of the cache: nothing may be written at all.
    expect_invalid(kernel, o, {"slot_mapping[1] = 8", "8 slots"}, false);
  }
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {3, 2, 4}).in(SK_DTYPE_F32, {3, 2, 4}).in(SK_DTYPE_I32, {3});
    o.in(SK_DTYPE_F32, {2, 4, 2, 4}).in(SK_DTYPE_F32, {2, 4, 2, 4});
    o.out(SK_DTYPE_F32, {2, 4, 2, 4}).out(SK_DTYPE_F32, {2, 4, 2, 4});
    o.input(1).shape[2] = 1;
    expect_invalid("kv_append.f32", o, {"v_new shape"}, true);
  }
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {2, 8}).in(SK_DTYPE_F32, {2, 4}).in(SK_DTYPE_I32, {2});
    o.in(SK_DTYPE_F32, {2, 4, 13}).out(SK_DTYPE_F32, {2, 4, 13});
    expect_invalid("mla_cache_append.f32", o, {"do not split the latent_cache row"}, true);
  }
}

// A cache with no KV heads holds nothing: the new values must be [T, 0, Dh] (a no-op, as in the
// reference); the rank-2 form [T, Dh] of mla_cache_append is not accepted in their place. The
// caches have no storage, so a write into them would crash.
TEST(AttentionKernelErrors, KvAppendWithNoHeadsNeverWrites) {
  for (const char* kernel : {"kv_append.f32", "kv_append.bf16"}) {
    const int32_t dt = std::strstr(kernel, "bf16") != nullptr ? SK_DTYPE_BF16 : SK_DTYPE_F32;
    const auto make_ops = [&](ManualArgs& o, std::vector<int64_t> new_shape, bool separate) {
      o.in(SK_DTYPE_F32, new_shape).in(SK_DTYPE_F32, new_shape).in(SK_DTYPE_I32, {3});
      o.in(dt, {2, 4, 0, 4}).in(dt, {2, 4, 0, 4}).out(dt, {2, 4, 0, 4}).out(dt, {2, 4, 0, 4});
      o.in_data<int32_t>(2)[0] = 1;
      o.in_data<int32_t>(2)[1] = -1;
      o.in_data<int32_t>(2)[2] = 7;
      for (size_t c : {3, 4}) o.input(c).data = nullptr;
      for (size_t c : {0, 1}) o.output(c).data = separate ? nullptr : o.input(c + 3).data;
    };
    {
      SCOPED_TRACE("rank-2 new values");
      ManualArgs o;
      make_ops(o, {3, 4}, false);
      expect_invalid(kernel, o, {"k_new shape [3, 4]", "Hkv = 0"}, true);
    }
    for (bool separate : {false, true}) {
      SCOPED_TRACE(separate ? "separate outputs" : "in place");
      ManualArgs o;
      make_ops(o, {3, 0, 4}, separate);
      const sk_kernel_desc* k = builtin_kernel(kernel);
      ASSERT_NE(k, nullptr);
      for (int n : {1, 3}) {
        for (int core = 0; core < n; ++core) {
          char msg[512] = {};
          sk_core_ctx ctx{};
          ctx.core_id = core;
          ctx.num_cores = n;
          ctx.error_message = msg;
          ctx.error_capacity = sizeof msg;
          EXPECT_EQ(k->run(&o.args(), &ctx), SK_OK) << msg;
        }
      }
      // Only slot_mapping is read: the caches and the new values have no bytes.
      sk_access_range ranges[8];
      ASSERT_EQ(k->access(&o.args(), 0, 1, ranges, 8), 1);
      EXPECT_EQ(ranges[0].operand, 2);
      const sk::ref::Reference* ref = sk::ref::find_reference(kernel);
      ASSERT_NE(ref, nullptr);
      EXPECT_EQ(ref->run(&o.args()), SK_OK);
    }
  }
}

TEST(AttentionKernelErrors, PagedAttentionRejectsBadTablesAndShapes) {
  const sk_paged_attention_attrs attrs{0.25f};
  const auto make_ops = [&](ManualArgs& o, int64_t hq, int64_t hkv) {
    o.in(SK_DTYPE_F32, {2, hq, 16}).in(SK_DTYPE_F32, {4, 8, hkv, 16}).in(SK_DTYPE_F32, {4, 8, hkv, 16});
    o.in(SK_DTYPE_I32, {2, 3}).in(SK_DTYPE_I32, {2}).out(SK_DTYPE_F32, {2, hq, 16});
    o.attrs(attrs);
  };
  {
    ManualArgs o;
    make_ops(o, 4, 2);
    int32_t* bt = o.in_data<int32_t>(3);
    int32_t* cl = o.in_data<int32_t>(4);
    cl[0] = 3;
    cl[1] = 17;  // uses blocks 0..2 of sequence 1
    bt[3] = 1;
    bt[4] = 2;
    bt[5] = 4;  // the third block of sequence 1 is outside the cache of 4 blocks
    expect_invalid("paged_attention.f32", o, {"block_tables[1, 2] = 4", "sequence 1, block 2", "4 blocks"}, false);
    bt[5] = 3;
    cl[1] = 25;  // 3 blocks of 8 hold at most 24 tokens
    expect_invalid("paged_attention.f32", o, {"context_lens[1] = 25", "sequence 1"}, false);
    cl[1] = -2;
    expect_invalid("paged_attention.f32", o, {"context_lens[1] = -2"}, false);
  }
  {
    ManualArgs o;
    make_ops(o, 6, 4);
    expect_invalid("paged_attention.f32", o, {"Hq = 6", "Hkv = 4"}, true);
  }
  {
    ManualArgs o;
    make_ops(o, 4, 2);
    o.output(0).data = o.input(0).data;
    expect_invalid("paged_attention.f32", o, {"overlap"}, true);
  }
  {
    // A cache with block_size 0 (no elements, no storage) is rejected, not divided by.
    ManualArgs o;
    o.in(SK_DTYPE_F32, {2, 4, 16}).in(SK_DTYPE_F32, {4, 0, 2, 16}).in(SK_DTYPE_F32, {4, 0, 2, 16});
    o.in(SK_DTYPE_I32, {2, 3}).in(SK_DTYPE_I32, {2}).out(SK_DTYPE_F32, {2, 4, 16});
    o.attrs(attrs);
    o.input(1).data = nullptr;
    o.input(2).data = nullptr;
    expect_invalid("paged_attention.f32", o, {"k_cache block_size is 0"}, true);
    o.in_data<int32_t>(4)[1] = 5;  // a context the cache could not hold either
    expect_invalid("paged_attention.f32", o, {"k_cache block_size is 0"}, true);
  }
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {2, 4, 16}).in(SK_DTYPE_BF16, {4, 8, 2, 16}).in(SK_DTYPE_BF16, {4, 8, 2, 16});
    o.in(SK_DTYPE_I32, {2, 3}).in(SK_DTYPE_I32, {2}).out(SK_DTYPE_F32, {2, 4, 16});
    o.attrs(attrs);
    expect_invalid("paged_attention.f32", o, {"k_cache has dtype bf16"}, true);
  }
}

TEST(AttentionKernelErrors, MlaRejectsMismatchedAttributesAndTables) {
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {1, 2, 16}).in(SK_DTYPE_F32, {1, 2, 4}).in(SK_DTYPE_F32, {3, 4, 20});
    o.in(SK_DTYPE_I32, {1, 2}).in(SK_DTYPE_I32, {1}).out(SK_DTYPE_F32, {1, 2, 16});
    o.attrs(sk_mla_attention_attrs{16, 8, 0.1f});
    expect_invalid("mla_attention.f32", o, {"q_pe shape [1, 2, 4]", "rope_dim = 8"}, true);
  }
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {1, 2, 16}).in(SK_DTYPE_F32, {1, 2, 4}).in(SK_DTYPE_F32, {3, 4, 20});
    o.in(SK_DTYPE_I32, {1, 2}).in(SK_DTYPE_I32, {1}).out(SK_DTYPE_F32, {1, 2, 16});
    o.attrs(sk_mla_attention_attrs{16, 4, 0.1f});
    o.in_data<int32_t>(3)[0] = 3;
    o.in_data<int32_t>(4)[0] = 2;
    expect_invalid("mla_attention.f32", o, {"block_tables[0, 0] = 3", "3 blocks"}, false);
  }
}

TEST(AttentionKernelErrors, MlaRejectsBlockSizeZero) {
  ManualArgs o;
  o.in(SK_DTYPE_F32, {2, 2, 16}).in(SK_DTYPE_F32, {2, 2, 4}).in(SK_DTYPE_F32, {3, 0, 20});
  o.in(SK_DTYPE_I32, {2, 2}).in(SK_DTYPE_I32, {2}).out(SK_DTYPE_F32, {2, 2, 16});
  o.attrs(sk_mla_attention_attrs{16, 4, 0.1f});
  o.input(2).data = nullptr;
  expect_invalid("mla_attention.f32", o, {"latent_cache block_size is 0"}, true);
  o.in_data<int32_t>(4)[0] = 3;
  expect_invalid("mla_attention.f32", o, {"latent_cache block_size is 0"}, true);
}

TEST(AttentionKernelErrors, PrefillRejectsBadTokens) {
  for (const char* kernel : {"paged_attention_prefill.f32", "mla_attention_prefill.bf16"}) {
    const bool paged = std::strstr(kernel, "paged") != nullptr;
    const int32_t dt = paged ? SK_DTYPE_F32 : SK_DTYPE_BF16;
    ManualArgs o;
    if (paged) {
      o.in(SK_DTYPE_F32, {3, 4, 16}).in(dt, {4, 8, 2, 16}).in(dt, {4, 8, 2, 16});
    } else {
      o.in(SK_DTYPE_F32, {3, 4, 16}).in(SK_DTYPE_F32, {3, 4, 4}).in(dt, {4, 8, 20});
    }
    o.in(SK_DTYPE_I32, {2, 3}).in(SK_DTYPE_I32, {3}).in(SK_DTYPE_I32, {3}).out(SK_DTYPE_F32, {3, 4, 16});
    if (paged) {
      o.attrs(sk_paged_attention_attrs{0.25f});
    } else {
      o.attrs(sk_mla_attention_attrs{16, 4, 0.25f});
    }
    int32_t* bt = o.in_data<int32_t>(3);
    int32_t* seq = o.in_data<int32_t>(4);
    int32_t* pos = o.in_data<int32_t>(5);
    const int32_t table[6] = {0, 1, 2, 3, 3, 3};
    std::copy(table, table + 6, bt);
    seq[0] = 0;
    seq[1] = 1;
    seq[2] = 2;  // only 2 sequences
    pos[0] = 3;
    pos[1] = 9;
    pos[2] = 0;
    expect_invalid(kernel, o, {"seq_ids[2] = 2", "2 sequences"}, false);
    seq[2] = 1;
    pos[2] = 24;  // 3 blocks of 8 hold positions 0..23
    expect_invalid(kernel, o, {"positions[2] = 24", "sequence 1", "= 23"}, false);
    pos[2] = -1;
    expect_invalid(kernel, o, {"positions[2] = -1"}, false);
    pos[2] = 16;
    bt[5] = 4;  // the third block of sequence 1 is outside the cache of 4 blocks
    expect_invalid(kernel, o, {"block_tables[1, 2] = 4", "sequence 1, block 2, token 2", "4 blocks"}, false);
  }
  {
    ManualArgs o;
    o.in(SK_DTYPE_F32, {3, 4, 16}).in(SK_DTYPE_F32, {4, 8, 2, 16}).in(SK_DTYPE_F32, {4, 8, 2, 16});
    o.in(SK_DTYPE_I32, {2, 3}).in(SK_DTYPE_I32, {2}).in(SK_DTYPE_I32, {3}).out(SK_DTYPE_F32, {3, 4, 16});
    o.attrs(sk_paged_attention_attrs{0.25f});
    expect_invalid("paged_attention_prefill.f32", o, {"seq_ids shape [2]", "T = 3"}, true);
  }
  {
    // The decode operand list (context_lens, no positions) is refused by count.
    ManualArgs o;
    o.in(SK_DTYPE_F32, {3, 4, 16}).in(SK_DTYPE_F32, {4, 8, 2, 16}).in(SK_DTYPE_F32, {4, 8, 2, 16});
    o.in(SK_DTYPE_I32, {2, 3}).in(SK_DTYPE_I32, {3}).out(SK_DTYPE_F32, {3, 4, 16});
    o.attrs(sk_paged_attention_attrs{0.25f});
    expect_invalid("paged_attention_prefill.f32", o, {"input"}, true);
  }
}

// A prompt of no tokens is a no-op: nothing to validate, read or write.
TEST(AttentionKernelErrors, PrefillWithNoTokens) {
  for (const char* kernel : {"paged_attention_prefill.bf16", "mla_attention_prefill.f32"}) {
    SCOPED_TRACE(kernel);
    const bool paged = std::strstr(kernel, "paged") != nullptr;
    ManualArgs o;
    if (paged) {
      o.in(SK_DTYPE_F32, {0, 4, 16}).in(SK_DTYPE_BF16, {4, 8, 2, 16}).in(SK_DTYPE_BF16, {4, 8, 2, 16});
      o.attrs(sk_paged_attention_attrs{0.25f});
    } else {
      o.in(SK_DTYPE_F32, {0, 4, 16}).in(SK_DTYPE_F32, {0, 4, 4}).in(SK_DTYPE_F32, {4, 8, 20});
      o.attrs(sk_mla_attention_attrs{16, 4, 0.25f});
    }
    o.in(SK_DTYPE_I32, {2, 3}).in(SK_DTYPE_I32, {0}).in(SK_DTYPE_I32, {0}).out(SK_DTYPE_F32, {0, 4, 16});
    const sk_kernel_desc* k = builtin_kernel(kernel);
    ASSERT_NE(k, nullptr);
    for (int n : {1, 3}) run_on_cores(k, o.args(), n);
    sk_access_range ranges[8];
    for (int core = 0; core < 3; ++core) EXPECT_GE(k->access(&o.args(), core, 3, ranges, 8), 0);
  }
}

TEST(AttentionKernelErrors, BatchedMatmulShapes) {
  ManualArgs o;
  o.in(SK_DTYPE_F32, {2, 3, 8}).in(SK_DTYPE_F32, {3, 4, 8}).out(SK_DTYPE_F32, {2, 3, 4});
  expect_invalid("batched_matmul.f32", o, {"[Hb, M, K]"}, true);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Prefill and decode agree bit for bit: token t of a prefill call (3 cores) equals the decode
// kernel (1 core) over context_lens = positions[t] + 1 of sequence seq_ids[t].

namespace {

// Deterministic values in [-1, 1] (f32, or bf16 words of such values).
void fill_random(sk_tensor_arg& t, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 12345u;
  const int64_t n = sk_tensor_numel(&t);
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const float v = static_cast<float>(x >> 8) / 8388608.0f - 1.0f;
    if (t.dtype == SK_DTYPE_BF16) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      static_cast<uint16_t*>(t.data)[i] = static_cast<uint16_t>(bits >> 16);
    } else {
      static_cast<float*>(t.data)[i] = v;
    }
  }
}

// The query operands [T, H, *], the cache operands and the output [T, H, Dv] of one kernel pair.
struct PrefillSetup {
  std::string family;  // "paged_attention" or "mla_attention"
  int32_t dtype;
  std::vector<std::vector<int64_t>> queries;
  std::vector<std::vector<int64_t>> caches;
  std::vector<int64_t> out;
  sk_paged_attention_attrs paged;
  sk_mla_attention_attrs mla;
};

void set_attrs(const PrefillSetup& su, ManualArgs& m) {
  if (su.family == "paged_attention") {
    m.attrs(su.paged);
  } else {
    m.attrs(su.mla);
  }
}

void expect_prefill_matches_decode(const PrefillSetup& su) {
  const std::string sfx = su.dtype == SK_DTYPE_BF16 ? ".bf16" : ".f32";
  SCOPED_TRACE(su.family + sfx);
  const sk_kernel_desc* prefill = builtin_kernel((su.family + "_prefill" + sfx).c_str());
  const sk_kernel_desc* decode = builtin_kernel((su.family + sfx).c_str());
  ASSERT_NE(prefill, nullptr);
  ASSERT_NE(decode, nullptr);
  // Two sequences over blocks of 16: sequence 0 (blocks 3, 0, 5, 1, 4) takes 70 new tokens after
  // 2 earlier ones, sequence 1 (block 2) 9 tokens from position 0; every 9th token is sequence 1's.
  const int32_t tables[2][5] = {{3, 0, 5, 1, 4}, {2, -1, -1, -1, -1}};
  std::vector<int32_t> seq_ids;
  std::vector<int32_t> positions;
  int32_t next[2] = {2, 0};
  for (int32_t i = 0; i < 79; ++i) {
    const int32_t b = i % 9 == 4 ? 1 : 0;
    seq_ids.push_back(b);
    positions.push_back(next[b]++);
  }
  const auto t = static_cast<int64_t>(seq_ids.size());
  ManualArgs pre;
  size_t op = 0;
  for (const auto& q : su.queries) {
    fill_random(pre.in(SK_DTYPE_F32, q).input(op), static_cast<uint32_t>(op));
    ++op;
  }
  for (const auto& c : su.caches) {
    fill_random(pre.in(su.dtype, c).input(op), static_cast<uint32_t>(op));
    ++op;
  }
  std::memcpy(pre.in_ptr<int32_t>(SK_DTYPE_I32, {2, 5}), tables, sizeof tables);
  std::copy(seq_ids.begin(), seq_ids.end(), pre.in_ptr<int32_t>(SK_DTYPE_I32, {t}));
  std::copy(positions.begin(), positions.end(), pre.in_ptr<int32_t>(SK_DTYPE_I32, {t}));
  const float* out = pre.out_ptr<float>(SK_DTYPE_F32, su.out);
  set_attrs(su, pre);
  run_on_cores(prefill, pre.args(), 3);
  const int64_t row = su.out[1] * su.out[2];
  for (int64_t i = 0; i < t; ++i) {
    ManualArgs dec;
    for (size_t q = 0; q < su.queries.size(); ++q) {
      std::vector<int64_t> shape = su.queries[q];
      shape[0] = 1;
      const int64_t n = shape[1] * shape[2];
      std::memcpy(dec.in_ptr<float>(SK_DTYPE_F32, shape), static_cast<const float*>(pre.input(q).data) + i * n,
                  static_cast<size_t>(n) * sizeof(float));
    }
    for (size_t c = 0; c < su.caches.size(); ++c) {
      const size_t o = su.queries.size() + c;
      dec.in(su.dtype, su.caches[c]).input(o).data = pre.input(o).data;
    }
    const auto b = static_cast<size_t>(seq_ids[static_cast<size_t>(i)]);
    std::memcpy(dec.in_ptr<int32_t>(SK_DTYPE_I32, {1, 5}), tables[b], sizeof tables[0]);
    dec.in_ptr<int32_t>(SK_DTYPE_I32, {1})[0] = positions[static_cast<size_t>(i)] + 1;
    std::vector<int64_t> out_shape = su.out;
    out_shape[0] = 1;
    const float* want = dec.out_ptr<float>(SK_DTYPE_F32, out_shape);
    set_attrs(su, dec);
    run_on_cores(decode, dec.args(), 1);
    EXPECT_EQ(0, std::memcmp(want, out + i * row, static_cast<size_t>(row) * sizeof(float))) << "token " << i;
  }
}

}  // namespace

TEST(AttentionPrefill, MatchesDecodeBitForBit) {
  for (int32_t dt : {SK_DTYPE_F32, SK_DTYPE_BF16}) {
    expect_prefill_matches_decode(
        {"paged_attention", dt, {{79, 12, 40}}, {{6, 16, 3, 40}, {6, 16, 3, 40}}, {79, 12, 40}, {0.15f}, {}});
    expect_prefill_matches_decode(
        {"mla_attention", dt, {{79, 5, 48}, {79, 5, 16}}, {{6, 16, 64}}, {79, 5, 48}, {}, {48, 16, 0.125f}});
  }
}

}  // namespace sk::kernel_test
