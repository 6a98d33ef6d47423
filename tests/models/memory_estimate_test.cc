// models::estimate_memory, computed from a config without building anything, gives exactly the
// bytes of the constants and cache variables the builders then create, for every architecture,
// weight dtype and cache dtype. (A builder that adds or drops a constant must update
// src/models/memory_estimate.cc: this test names the graph and the difference.)
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "superkernel/models.h"
#include "superkernel/weights.h"

namespace sk {
namespace {

struct GraphBytes {
  int64_t constants = 0;
  int64_t variables = 0;
};

GraphBytes bytes_of(const Graph& g) {
  GraphBytes b;
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& t = g.tensor(static_cast<int32_t>(i));
    if (t.kind == TensorKind::kConstant) b.constants += t.storage_bytes;
    if (t.kind == TensorKind::kVariable) b.variables += t.storage_bytes;
  }
  return b;
}

models::LongCatFlashConfig longcat() {
  models::LongCatFlashConfig c;
  c.vocab_size = 96;
  c.hidden_size = 64;
  c.num_layers = 3;
  c.num_attention_heads = 4;
  c.q_lora_rank = 24;
  c.kv_lora_rank = 16;
  c.qk_nope_head_dim = 8;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 12;
  c.ffn_hidden_size = 40;
  c.expert_ffn_hidden_size = 24;
  c.n_routed_experts = 6;
  c.zero_expert_num = 2;
  c.moe_topk = 2;
  return c;
}

models::LlamaConfig llama() {
  models::LlamaConfig c;
  c.vocab_size = 80;
  c.hidden_size = 48;
  c.intermediate_size = 72;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  return c;
}

models::DeepseekConfig deepseek(models::DeepseekConfig::Family family) {
  models::DeepseekConfig c;
  if (family == models::DeepseekConfig::Family::kV2) {
    if (!c.set("model_type", "deepseek_v2")) ADD_FAILURE() << "model_type deepseek_v2";
  }
  c.vocab_size = 96;
  c.hidden_size = 64;
  c.intermediate_size = 40;
  c.moe_intermediate_size = 24;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.kv_lora_rank = 16;
  c.q_lora_rank = 24;
  c.qk_nope_head_dim = 8;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 12;
  c.n_routed_experts = 8;
  c.n_shared_experts = 2;
  c.num_experts_per_tok = 2;
  c.n_group = 4;
  c.topk_group = 2;
  c.first_k_dense_replace = 1;
  return c;
}

models::BuildOptions options(models::WeightDType w, DType cache) {
  models::BuildOptions o;
  o.weight_dtype = w;
  o.kv_cache_dtype = cache;
  o.batch = 3;
  o.prefill_tokens = 8;
  o.block_size = 4;
  o.max_context = 22;  // not a multiple of the block size
  return o;
}

const models::WeightDType kWeightDTypes[] = {models::WeightDType::kF32, models::WeightDType::kBF16,
                                             models::WeightDType::kW8A8};

TEST(MemoryEstimate, LongCatFlashDecodeGraph) {
  for (models::WeightDType w : kWeightDTypes)
    for (DType cache : {DType::kF32, DType::kBF16})
      for (bool variant : {true, false}) {
        SCOPED_TRACE(std::string(models::weight_dtype_name(w)) + " cache " + dtype_name(cache) +
                     (variant ? " kv scale, bias, tied" : ""));
        models::LongCatFlashConfig c = longcat();
        c.mla_scale_kv_lora = variant;
        c.attention_bias = variant;
        c.tie_word_embeddings = variant;
        const models::BuildOptions o = options(w, cache);
        auto weights = random_weights(7);
        auto g = models::build_longcat_flash(c, o, models::Phase::kDecode, *weights);
        ASSERT_TRUE(g.has_value()) << g.status().to_string();
        const models::MemoryEstimate m = models::estimate_memory(c, o);
        EXPECT_EQ(m.weight_bytes, bytes_of(*g).constants);
        EXPECT_EQ(m.cache_bytes, bytes_of(*g).variables);
      }
}

// A rank of the tensor- and expert-parallel model holds its heads, hidden units and experts only
// (and, when the batch does not divide between the expert-parallel ranks, its token slice's row
// ids). Built without MPI: the graph builders only record the communicator's handle.
TEST(MemoryEstimate, ParallelLongCatFlashRank) {
  for (models::WeightDType w : kWeightDTypes)
    for (int32_t batch : {3, 4})
      for (int32_t rank : {0, 1})
        for (auto [tp, ep] : {std::pair{2, 2}, std::pair{1, 2}, std::pair{2, 1}}) {
          SCOPED_TRACE(std::string(models::weight_dtype_name(w)) + " batch " + std::to_string(batch) + " rank " +
                       std::to_string(rank) + " tp " + std::to_string(tp) + " ep " + std::to_string(ep));
          models::BuildOptions o = options(w, DType::kF32);
          o.batch = batch;
          o.parallel = {tp, ep, comm::Group{1, rank, 2}};
          auto weights = random_weights(7);
          auto g = models::build_longcat_flash(longcat(), o, models::Phase::kDecode, *weights);
          ASSERT_TRUE(g.has_value()) << g.status().to_string();
          const models::MemoryEstimate m = models::estimate_memory(longcat(), o);
          EXPECT_EQ(m.weight_bytes, bytes_of(*g).constants);
          EXPECT_EQ(m.cache_bytes, bytes_of(*g).variables);
        }
}

TEST(MemoryEstimate, LongCatFlashAfdGraph) {
  for (models::WeightDType w : kWeightDTypes) {
    SCOPED_TRACE(models::weight_dtype_name(w));
    const models::BuildOptions o = options(w, DType::kF32);
    auto weights = random_weights(7);
    auto g = models::build_longcat_flash_afd(longcat(), o, *weights);
    ASSERT_TRUE(g.has_value()) << g.status().to_string();
    const models::MemoryEstimate m = models::estimate_memory_afd(longcat(), o);
    EXPECT_EQ(m.weight_bytes, bytes_of(*g).constants);
    EXPECT_EQ(m.cache_bytes, 0);
  }
}

TEST(MemoryEstimate, LlamaDecodeGraph) {
  for (models::WeightDType w : kWeightDTypes)
    for (bool tied : {false, true})
      for (int64_t head_dim : {0, 16}) {
        SCOPED_TRACE(std::string(models::weight_dtype_name(w)) + (tied ? " tied" : "") + " head_dim " +
                     std::to_string(head_dim));
        models::LlamaConfig c = llama();
        c.tie_word_embeddings = tied;
        c.head_dim = head_dim;
        // Biases, and the key/value heads left at their default (the query heads'), on some cases.
        c.attention_bias = c.mlp_bias = head_dim > 0;
        if (tied) c.num_key_value_heads = 0;
        const models::BuildOptions o = options(w, DType::kBF16);
        auto weights = random_weights(7);
        auto g = models::build_llama(c, o, models::Phase::kDecode, *weights);
        ASSERT_TRUE(g.has_value()) << g.status().to_string();
        const models::MemoryEstimate m = models::estimate_memory(c, o);
        EXPECT_EQ(m.weight_bytes, bytes_of(*g).constants);
        EXPECT_EQ(m.cache_bytes, bytes_of(*g).variables);
      }
}

TEST(MemoryEstimate, DeepseekDecodeGraph) {
  using Family = models::DeepseekConfig::Family;
  for (models::WeightDType w : kWeightDTypes)
    for (Family family : {Family::kV2, Family::kV3})
      for (bool variant : {false, true}) {
        SCOPED_TRACE(std::string(models::weight_dtype_name(w)) + (family == Family::kV2 ? " v2" : " v3") +
                     (variant ? " q_proj, biases, tied" : ""));
        models::DeepseekConfig c = deepseek(family);
        // q_proj instead of the q LoRA, every bias, a tied head.
        if (variant) {
          c.q_lora_rank = 0;
          c.attention_bias = c.mlp_bias = c.tie_word_embeddings = true;
        }
        const models::BuildOptions o = options(w, variant ? DType::kBF16 : DType::kF32);
        auto weights = random_weights(7);
        auto g = models::build_deepseek(c, o, models::Phase::kDecode, *weights);
        ASSERT_TRUE(g.has_value()) << g.status().to_string();
        const models::MemoryEstimate m = models::estimate_memory(c, o);
        EXPECT_EQ(m.weight_bytes, bytes_of(*g).constants);
        EXPECT_EQ(m.cache_bytes, bytes_of(*g).variables);
      }
}

// The published DeepSeek-V3: about 671 billion parameters (the MTP layer not counted).
TEST(MemoryEstimate, PublishedDeepseekV3IsCountedNotBuilt) {
  const models::MemoryEstimate m = models::estimate_memory(models::DeepseekConfig{}, models::BuildOptions{});
  EXPECT_GT(m.weight_bytes, int64_t{640} * 1000 * 1000 * 1000 * 4);
  EXPECT_LT(m.weight_bytes, int64_t{700} * 1000 * 1000 * 1000 * 4);
}

// The published LongCat-Flash: about 560 billion parameters, counted without a byte allocated.
TEST(MemoryEstimate, PublishedLongCatFlashIsCountedNotBuilt) {
  const models::MemoryEstimate m = models::estimate_memory(models::LongCatFlashConfig{}, models::BuildOptions{});
  EXPECT_GT(m.weight_bytes, int64_t{500} * 1000 * 1000 * 1000 * 4);
  EXPECT_LT(m.weight_bytes, int64_t{600} * 1000 * 1000 * 1000 * 4);
}

// Absurd sizes saturate instead of overflowing into a small or negative count.
TEST(MemoryEstimate, SaturatesInsteadOfOverflowing) {
  models::LongCatFlashConfig c;
  c.hidden_size = int64_t{1} << 40;
  c.vocab_size = int64_t{1} << 40;
  const models::MemoryEstimate m = models::estimate_memory(c, models::BuildOptions{});
  EXPECT_EQ(m.weight_bytes, INT64_MAX);
}

}  // namespace
}  // namespace sk
