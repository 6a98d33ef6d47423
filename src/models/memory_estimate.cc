// The bytes a model's graphs will hold, from its config and build options alone: the constants
// each builder creates (longcat_flash.cc, llama.cc) and the cache variables, counted without
// building anything. Products saturate at INT64_MAX, so an absurd config reads as "too large"
// instead of overflowing.
#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "superkernel/models.h"

namespace sk::models {
namespace {

int64_t times(std::initializer_list<int64_t> factors) {
  int64_t out = 1;
  for (int64_t f : factors) {
    if (f <= 0) return 0;
    if (__builtin_mul_overflow(out, f, &out)) return INT64_MAX;
  }
  return out;
}

// Adds up bytes, saturating.
struct Bytes {
  int64_t total = 0;
  void add(int64_t bytes) {
    if (__builtin_add_overflow(total, bytes, &total)) total = INT64_MAX;
  }
};

// Bytes of a Linear weight [rows, cols] (or stacked experts [experts, rows, cols]) stored as the
// build's weight dtype: f32, bf16, f16, int8 with an f32 scale per output row, or 4-bit values with
// an f16 scale and an int8 zero point per group of int4_group inputs.
int64_t linear_bytes(const BuildOptions& o, int64_t experts, int64_t rows, int64_t cols) {
  const int64_t elements = times({experts, rows, cols});
  switch (o.weight_dtype) {
    case WeightDType::kF32:
      return times({elements, 4});
    case WeightDType::kBF16:
    case WeightDType::kF16:
      return times({elements, 2});
    case WeightDType::kW4A8:
    case WeightDType::kW4: {
      Bytes b;
      b.add(elements / 2);
      b.add(times({elements / std::max<int64_t>(o.int4_group, 1), o.int4_symmetric ? 2 : 3}));
      return b.total;
    }
    case WeightDType::kW8A8: {
      Bytes b;
      b.add(elements);
      b.add(times({experts, rows, 4}));
      return b.total;
    }
  }
  return 0;
}

int64_t f32_bytes(std::initializer_list<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n = times({n, d});
  return times({n, 4});
}

int64_t blocks(const BuildOptions& o) {
  return o.block_size > 0 ? times({o.cache_sequences > 0 ? o.cache_sequences : o.batch,
                                   (o.max_context + o.block_size - 1) / o.block_size})
                          : 0;
}

int64_t cache_dtype_bytes(const BuildOptions& o) { return o.kv_cache_dtype == DType::kBF16 ? 2 : 4; }

// A SwiGLU MLP of `f` hidden units on `hidden` (`experts` of them stacked): gate, up [f, hidden]
// and down [hidden, f], with their f32 biases when `biased`.
int64_t swiglu_bytes(const BuildOptions& o, int64_t hidden, int64_t experts, int64_t f, bool biased) {
  Bytes b;
  b.add(times({2, linear_bytes(o, experts, f, hidden)}));
  b.add(linear_bytes(o, experts, hidden, f));
  if (biased) b.add(f32_bytes({2 * f + hidden}));
  return b.total;
}

// The decoder layers' bytes plus what every model adds around them: the embedding table, the final
// norm, the LM head (a tied head in f32 is the embedding table itself; in another dtype, a
// converted copy of it) and the rope cos/sin table of `rotary` dims (the decode graph's rows).
int64_t with_embedding_and_head(const BuildOptions& o, int64_t layers, int64_t vocab, int64_t hidden, bool tied,
                                int64_t rotary) {
  Bytes b;
  b.add(f32_bytes({vocab, hidden}));  // embed_tokens
  b.add(layers);
  b.add(f32_bytes({hidden}));  // model.norm
  if (!tied || o.weight_dtype != WeightDType::kF32) b.add(linear_bytes(o, 1, vocab, hidden));
  b.add(f32_bytes({o.max_context, rotary}));
  return b.total;
}

// Tensor- and expert-parallel ranks of a parallel build (1 and 1 otherwise).
int64_t tp_of(const BuildOptions& o) { return o.parallel.tp > 1 ? o.parallel.tp : 1; }
int64_t ep_of(const BuildOptions& o) { return o.parallel.ep > 1 ? o.parallel.ep : 1; }

// A LongCat-Flash layer's MoE: router, its bias, and the routed experts' gate/up and down (with
// expert parallelism, this rank's experts only).
int64_t longcat_moe_bytes(const LongCatFlashConfig& c, const BuildOptions& o) {
  const int64_t D = c.hidden_size, E = c.n_routed_experts, Z = c.zero_expert_num, F = c.expert_ffn_hidden_size;
  const int64_t local = E / ep_of(o);
  Bytes b;
  b.add(f32_bytes({E + Z, D}));
  b.add(f32_bytes({E + Z}));
  b.add(linear_bytes(o, local, 2 * F, D));
  b.add(linear_bytes(o, local, D, F));
  // The decode graph's token slice of this rank, when the batch does not divide (i32 row ids).
  const int64_t ep = ep_of(o);
  if (ep > 1 && o.batch % ep != 0) b.add(times({(o.batch + ep - 1) / ep, 4}));
  return b.total;
}

}  // namespace

MemoryEstimate estimate_memory(const LongCatFlashConfig& c, const BuildOptions& o) {
  // With tensor parallelism a rank holds its heads and hidden units only (longcat_parallel.h).
  const int64_t D = c.hidden_size, H = c.num_attention_heads / tp_of(o), R = c.kv_lora_rank, Q = c.q_lora_rank;
  const int64_t nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim, v = c.v_head_dim,
                F = c.ffn_hidden_size / tp_of(o);
  Bytes mla;                                                     // one MLA sublayer
  mla.add(linear_bytes(o, 1, Q, D));                             // q_a_proj
  mla.add(f32_bytes({Q}));                                       // q_a_layernorm
  mla.add(linear_bytes(o, 1, H * (nope + rope), Q));             // q_b_proj
  mla.add(linear_bytes(o, 1, R + rope, D));                      // kv_a_proj_with_mqa
  mla.add(f32_bytes({R}));                                       // kv_a_layernorm
  if (c.mla_scale_kv_lora) mla.add(f32_bytes({R}));              // kv_lora_scale
  mla.add(f32_bytes({H * (nope + v), R}));                       // kv_b_proj (W_UV is a view of it)
  mla.add(f32_bytes({H, R, nope}));                              // its absorbed W_UK
  mla.add(linear_bytes(o, 1, D, H * v));                         // o_proj
  if (c.attention_bias) mla.add(f32_bytes({Q + R + rope + D}));  // q_a_proj, kv_a_proj_with_mqa, o_proj biases
  Bytes layer;
  layer.add(times({2, mla.total}));
  layer.add(times({2, swiglu_bytes(o, D, 1, F, false)}));  // mlps.0/1 (w8a8: a scale per output row)
  layer.add(f32_bytes({4, D}));                            // input_layernorm.0/1, post_attention_layernorm.0/1
  layer.add(longcat_moe_bytes(c, o));

  MemoryEstimate m;
  m.weight_bytes =
      with_embedding_and_head(o, times({c.num_layers, layer.total}), c.vocab_size, D, c.tie_word_embeddings, rope);
  // Two latent caches per layer, [blocks, block_size, kv_lora_rank + rope].
  m.cache_bytes = times({c.num_layers, 2, blocks(o), o.block_size, R + rope, cache_dtype_bytes(o)});
  return m;
}

MemoryEstimate estimate_memory_afd(const LongCatFlashConfig& c, const BuildOptions& o) {
  MemoryEstimate m;
  m.weight_bytes = times({c.num_layers, longcat_moe_bytes(c, o)});
  return m;
}

MemoryEstimate estimate_memory(const LlamaConfig& c, const BuildOptions& o) {
  const int64_t D = c.hidden_size, Hq = c.num_attention_heads, Hkv = c.resolved_kv_heads();
  const int64_t Dh = c.resolved_head_dim(), F = c.intermediate_size;
  Bytes attention;
  attention.add(linear_bytes(o, 1, Hq * Dh, D));               // q_proj
  attention.add(times({2, linear_bytes(o, 1, Hkv * Dh, D)}));  // k_proj, v_proj
  attention.add(linear_bytes(o, 1, D, Hq * Dh));               // o_proj
  attention.add(f32_bytes({2, D}));                            // input_layernorm, post_attention_layernorm
  if (c.attention_bias || c.qkv_bias) attention.add(f32_bytes({Hq * Dh + 2 * Hkv * Dh}));  // q, k, v biases
  if (c.attention_bias) attention.add(f32_bytes({D}));                                     // o bias
  if (c.qk_norm) attention.add(f32_bytes({2, Dh}));                                        // q_norm, k_norm
  const int64_t dense = swiglu_bytes(o, D, 1, F, c.mlp_bias);
  Bytes sparse;
  sparse.add(swiglu_bytes(o, D, c.num_local_experts, c.expert_intermediate_size(), false));
  sparse.add(f32_bytes({c.num_local_experts, D}));  // the router
  if (c.shared_expert_intermediate_size > 0) {      // Qwen2-MoE's shared expert and its gate
    sparse.add(swiglu_bytes(o, D, 1, c.shared_expert_intermediate_size, false));
    sparse.add(f32_bytes({D}));
  }
  Bytes layers;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers.add(attention.total);
    layers.add(c.is_sparse_layer(i) ? sparse.total : dense);
  }

  MemoryEstimate m;
  m.weight_bytes = with_embedding_and_head(o, layers.total, c.vocab_size, D, c.tie_word_embeddings, Dh);
  // A key and a value cache per layer, [blocks, block_size, kv heads, head_dim].
  m.cache_bytes = times({c.num_hidden_layers, 2, blocks(o), o.block_size, Hkv, Dh, cache_dtype_bytes(o)});
  return m;
}

MemoryEstimate estimate_memory(const DeepseekConfig& c, const BuildOptions& o) {
  const int64_t D = c.hidden_size, H = c.num_attention_heads, R = c.kv_lora_rank, Q = c.q_lora_rank;
  const int64_t nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim, v = c.v_head_dim;
  const int64_t E = c.n_routed_experts, F = c.moe_intermediate_size;
  Bytes mla;  // deepseek.cc's attention()
  if (Q == 0) {
    mla.add(linear_bytes(o, 1, H * (nope + rope), D));  // q_proj
  } else {
    mla.add(linear_bytes(o, 1, Q, D));                  // q_a_proj
    mla.add(f32_bytes({Q}));                            // q_a_layernorm
    mla.add(linear_bytes(o, 1, H * (nope + rope), Q));  // q_b_proj
    if (c.attention_bias) mla.add(f32_bytes({Q}));      // q_a_proj's bias
  }
  mla.add(linear_bytes(o, 1, R + rope, D));                  // kv_a_proj_with_mqa
  mla.add(f32_bytes({R}));                                   // kv_a_layernorm
  mla.add(f32_bytes({H * (nope + v), R}));                   // kv_b_proj (W_UV is a view of it)
  mla.add(f32_bytes({H, R, nope}));                          // its absorbed W_UK
  mla.add(linear_bytes(o, 1, D, H * v));                     // o_proj
  if (c.attention_bias) mla.add(f32_bytes({R + rope + D}));  // kv_a_proj_with_mqa, o_proj biases
  mla.add(f32_bytes({2, D}));                                // input_layernorm, post_attention_layernorm
  const bool bias = c.family == DeepseekConfig::Family::kV2 && c.mlp_bias;
  Bytes sparse;
  sparse.add(f32_bytes({E, D}));  // the router
  sparse.add(f32_bytes({E}));     // e_score_correction_bias (V2: a zero bias)
  sparse.add(swiglu_bytes(o, D, E, F, false));
  sparse.add(swiglu_bytes(o, D, 1, c.n_shared_experts * F, bias));
  const int64_t dense = swiglu_bytes(o, D, 1, c.intermediate_size, bias);
  Bytes layers;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers.add(mla.total);
    layers.add(c.is_moe_layer(i) ? sparse.total : dense);
  }

  MemoryEstimate m;
  m.weight_bytes = with_embedding_and_head(o, layers.total, c.vocab_size, D, c.tie_word_embeddings, rope);
  // One latent cache per layer, [blocks, block_size, kv_lora_rank + rope].
  m.cache_bytes = times({c.num_hidden_layers, blocks(o), o.block_size, R + rope, cache_dtype_bytes(o)});
  return m;
}

}  // namespace sk::models
