// Conformance cases of the attention family: layer_norm, rope, the KV-cache appends (updating
// graph variables in place), paged decode attention, MLA attention and batched_matmul, at
// decode-like shapes plus edges (one token, context length 1, contexts that are not a multiple
// of the block size, head dims that end in vector tails, skipped slots).
#include <cmath>

#include "conformance.h"
#include "superkernel/attrs_attention.h"

namespace sk::conformance {
namespace {

std::vector<TensorSpec> f32_out(Shape s) { return {TensorSpec(DType::kF32, std::move(s))}; }

DType cache_dtype(bool bf16) { return bf16 ? DType::kBF16 : DType::kF32; }
const char* suffix(bool bf16) { return bf16 ? "bf16" : "f32"; }

Input i32(Shape s, std::vector<double> v) { return Values(DType::kI32, std::move(s), std::move(v)); }

struct Seqs {
  std::vector<double> context_lens;
  std::vector<double> block_tables;  // [B, max_blocks], row-major
  int64_t max_blocks;
};

Case paged(const std::string& name, bool bf16, int64_t hq, int64_t hkv, int64_t dh, int64_t blocks, int64_t bs,
           const Seqs& s) {
  const auto b = static_cast<int64_t>(s.context_lens.size());
  const sk_paged_attention_attrs a{1.0f / std::sqrt(static_cast<float>(dh))};
  const DType c = cache_dtype(bf16);
  return {name + "_" + suffix(bf16),
          std::string("paged_attention.") + suffix(bf16),
          {F32({b, hq, dh}, -2, 2), Of(c, {blocks, bs, hkv, dh}, -1, 1), Of(c, {blocks, bs, hkv, dh}, -1, 1),
           i32({b, s.max_blocks}, s.block_tables), i32({b}, s.context_lens)},
          f32_out({b, hq, dh}),
          attrs_of(a),
          {}};
}

Case mla(const std::string& name, bool bf16, int64_t h, int32_t r, int32_t p, int64_t blocks, int64_t bs,
         const Seqs& s) {
  const auto b = static_cast<int64_t>(s.context_lens.size());
  const sk_mla_attention_attrs a{r, p, 1.0f / std::sqrt(static_cast<float>(r + p))};
  return {name + "_" + suffix(bf16),
          std::string("mla_attention.") + suffix(bf16),
          {F32({b, h, r}, -2, 2), F32({b, h, p}, -2, 2), Of(cache_dtype(bf16), {blocks, bs, r + p}, -1, 1),
           i32({b, s.max_blocks}, s.block_tables), i32({b}, s.context_lens)},
          f32_out({b, h, r}),
          attrs_of(a),
          {}};
}

// Prefill over T tokens: the sequence and position of each, and block_tables [B, max_blocks].
struct Prompt {
  std::vector<double> seq_ids;
  std::vector<double> positions;
  std::vector<double> block_tables;
  int64_t batch;
  int64_t max_blocks;
};

// Sequence 0 continues a context of 3 tokens with 20 new ones; sequence 1 is a new prompt of 9
// tokens, listed in between.
Prompt two_prompts() {
  Prompt p{{}, {}, {4, 0, 6, -1, 2, 5, -1, -1}, 2, 4};
  for (int i = 0; i < 29; ++i) {
    const bool second = i >= 10 && i < 19;
    p.seq_ids.push_back(second ? 1 : 0);
    p.positions.push_back(second ? i - 10 : (i < 10 ? 3 + i : 3 + i - 9));
  }
  return p;
}

Case paged_prefill(const std::string& name, bool bf16, int64_t hq, int64_t hkv, int64_t dh, int64_t blocks, int64_t bs,
                   const Prompt& pr) {
  const auto t = static_cast<int64_t>(pr.seq_ids.size());
  const sk_paged_attention_attrs a{1.0f / std::sqrt(static_cast<float>(dh))};
  const DType c = cache_dtype(bf16);
  return {name + "_" + suffix(bf16),
          std::string("paged_attention_prefill.") + suffix(bf16),
          {F32({t, hq, dh}, -2, 2), Of(c, {blocks, bs, hkv, dh}, -1, 1), Of(c, {blocks, bs, hkv, dh}, -1, 1),
           i32({pr.batch, pr.max_blocks}, pr.block_tables), i32({t}, pr.seq_ids), i32({t}, pr.positions)},
          f32_out({t, hq, dh}),
          attrs_of(a),
          {}};
}

Case mla_prefill(const std::string& name, bool bf16, int64_t h, int32_t r, int32_t p, int64_t blocks, int64_t bs,
                 const Prompt& pr) {
  const auto t = static_cast<int64_t>(pr.seq_ids.size());
  const sk_mla_attention_attrs a{r, p, 1.0f / std::sqrt(static_cast<float>(r + p))};
  return {name + "_" + suffix(bf16),
          std::string("mla_attention_prefill.") + suffix(bf16),
          {F32({t, h, r}, -2, 2), F32({t, h, p}, -2, 2), Of(cache_dtype(bf16), {blocks, bs, r + p}, -1, 1),
           i32({pr.batch, pr.max_blocks}, pr.block_tables), i32({t}, pr.seq_ids), i32({t}, pr.positions)},
          f32_out({t, h, r}),
          attrs_of(a),
          {}};
}

Case kv_append(const std::string& name, bool bf16, std::vector<double> slots, int64_t hkv, int64_t dh, int64_t blocks,
               int64_t bs) {
  const auto t = static_cast<int64_t>(slots.size());
  const DType c = cache_dtype(bf16);
  const Shape cache{blocks, bs, hkv, dh};
  return {name + "_" + suffix(bf16),
          std::string("kv_append.") + suffix(bf16),
          {F32({t, hkv, dh}, -50, 50), F32({t, hkv, dh}), i32({t}, std::move(slots)), Of(c, cache, -1, 1),
           Of(c, cache, -1, 1)},
          {TensorSpec(c, cache), TensorSpec(c, cache)},
          {},
          {{0, 3}, {1, 4}}};
}

Case mla_append(const std::string& name, bool bf16, std::vector<double> slots, int64_t r, int64_t p, int64_t blocks,
                int64_t bs) {
  const auto t = static_cast<int64_t>(slots.size());
  const DType c = cache_dtype(bf16);
  const Shape cache{blocks, bs, r + p};
  return {name + "_" + suffix(bf16),
          std::string("mla_cache_append.") + suffix(bf16),
          {F32({t, r}, -4, 4), F32({t, p}), i32({t}, std::move(slots)), Of(c, cache, -1, 1)},
          {TensorSpec(c, cache)},
          {},
          {{0, 3}}};
}

}  // namespace

SK_CONFORMANCE_CASES(attention_cases) {
  std::vector<Case> cases;
  const sk_layer_norm_attrs eps{1e-5f};
  for (Shape s : {Shape{1, 4096}, Shape{5, 13}, Shape{3, 64}, Shape{1, 1}}) {
    cases.push_back({"layer_norm_" + std::to_string(s[0]) + "x" + std::to_string(s[1]),
                     "layer_norm.f32",
                     {F32(s, -3, 5), W32({s[1]}, 0.5, 1.5), W32({s[1]})},
                     f32_out(s),
                     attrs_of(eps),
                     {}});
  }
  const auto rope = [&](const std::string& name, Shape x, int32_t dh, int32_t rd, int32_t neox) {
    std::vector<double> pos;
    for (int64_t i = 0; i < x[0]; ++i) pos.push_back(static_cast<double>((i * 37 + 5) % 64));
    cases.push_back({name,
                     "rope.f32",
                     {F32(x, -2, 2), i32({x[0]}, pos), W32({64, rd})},
                     f32_out(x),
                     attrs_of(sk_rope_attrs{dh, rd, neox}),
                     {}});
  };
  rope("rope_neox_3x8x64", {3, 8, 64}, 64, 64, 1);
  rope("rope_interleaved_partial_2x4x40_r24", {2, 4, 40}, 40, 24, 0);
  rope("rope_neox_flat_1x512_r64", {1, 4 * 128}, 128, 64, 1);
  rope("rope_interleaved_one_head_1x1x18", {1, 1, 18}, 18, 18, 0);

  for (bool bf16 : {false, true}) {
    cases.push_back(kv_append("kv_append_decode", bf16, {13}, 2, 16, 4, 8));
    cases.push_back(kv_append("kv_append_skipped_dh12", bf16, {5, -1, 30, 0}, 2, 12, 4, 8));
    cases.push_back(mla_append("mla_cache_append_decode", bf16, {6}, 64, 16, 2, 8));
    cases.push_back(mla_append("mla_cache_append_skipped", bf16, {-1, 3, 9, 14}, 24, 8, 2, 8));
    // MHA with context length 1.
    cases.push_back(paged("paged_attention_mha_ctx1", bf16, 4, 4, 32, 3, 4, {{1}, {2, 0}, 2}));
    // B = 3, GQA (4 query heads per KV head), contexts 1 / 17 / 50 over blocks of 8, Dh = 20.
    cases.push_back(
        paged("paged_attention_gqa_b3", bf16, 8, 2, 20, 16, 8,
              {{1, 17, 50}, {15, -1, -1, -1, -1, -1, -1, 3, 9, 12, -1, -1, -1, -1, 0, 1, 2, 4, 5, 6, 7}, 7}));
    // Decode head size, 8 query heads per KV head, a context over several softmax chunks.
    cases.push_back(
        paged("paged_attention_gqa8_dh128", bf16, 16, 2, 128, 12, 16, {{150}, {11, 0, 10, 1, 9, 2, 8, 3, 7, 4}, 10}));
    cases.push_back(mla("mla_attention_b2", bf16, 4, 64, 16, 8, 8, {{9, 33}, {7, 2, -1, -1, -1, 0, 1, 3, 4, 5}, 5}));
    cases.push_back(mla("mla_attention_decode_512", bf16, 3, 512, 64, 6, 16, {{70}, {5, 1, 4, 0, 2}, 5}));
    // Prefill: two prompts (one continuing an earlier context) over blocks of 8, GQA with Dh = 20
    // and Dh = 128, and MLA at LongCat's latent size.
    cases.push_back(paged_prefill("paged_prefill_gqa_dh20", bf16, 8, 2, 20, 8, 8, two_prompts()));
    cases.push_back(paged_prefill("paged_prefill_gqa8_dh128", bf16, 16, 2, 128, 8, 8, two_prompts()));
    cases.push_back(mla_prefill("mla_prefill_512", bf16, 3, 512, 64, 8, 8, two_prompts()));
  }
  cases.push_back({"batched_matmul_decode",
                   "batched_matmul.f32",
                   {F32({4, 1, 64}), W32({4, 48, 64})},
                   f32_out({4, 1, 48}),
                   {},
                   {}});
  cases.push_back({"batched_matmul_3x5x37",
                   "batched_matmul.f32",
                   {F32({3, 5, 37}), W32({3, 11, 37})},
                   f32_out({3, 5, 11}),
                   {},
                   {}});
  return cases;
}

}  // namespace sk::conformance
