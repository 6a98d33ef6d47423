// A Llama-style decoder: grouped-query attention over a paged KV cache with rotary embeddings
// (rotate-halves), RMS norms, and a SwiGLU MLP (Llama) or a sparse mixture of SwiGLU experts
// (Mixtral: LlamaConfig::family). Function names follow the published modules.
#include <cmath>
#include <string>
#include <vector>

#include "models/model_util.h"
#include "superkernel/attrs_moe.h"
#include "superkernel/models.h"
#include "superkernel/nn.h"
#include "superkernel/ops.h"

namespace sk::models {
namespace {

struct Llama {
  const LlamaConfig& cfg;
  const BuildOptions& opts;
  Graph& g;
  ModelWeights& w;
  WeightSource& source;
  StepTensors in;
  Tensor cos_sin;  // [max_context, head_dim]
  float eps() const { return static_cast<float>(cfg.rms_norm_eps); }
};

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

Tensor attention(Llama& m, Tensor x, int64_t layer) {
  const LlamaConfig& c = m.cfg;
  Graph& g = m.g;
  const std::string p = layer_prefix(layer) + "self_attn.";
  const int64_t T = m.in.tokens, D = c.hidden_size, Hq = c.num_attention_heads, Hkv = c.resolved_kv_heads();
  const int64_t Dh = c.resolved_head_dim();
  const sk_rope_attrs halves{static_cast<int32_t>(Dh), static_cast<int32_t>(Dh), 1};
  auto proj = [&](const char* name, const Shape& shape) { return m.w.linear(p + name, shape, c.attention_bias); };

  Tensor q = linear(g, x, proj("q_proj", {Hq * Dh, D}), p + "q_proj");
  Tensor k = linear(g, x, proj("k_proj", {Hkv * Dh, D}), p + "k_proj");
  Tensor v = linear(g, x, proj("v_proj", {Hkv * Dh, D}), p + "v_proj");
  q = nn::rope(g, g.reshape(q, {T, Hq, Dh}), m.in.positions, m.cos_sin, halves, p + "q_rope");
  k = nn::rope(g, g.reshape(k, {T, Hkv, Dh}), m.in.positions, m.cos_sin, halves, p + "k_rope");

  const Shape cache_shape{cache_blocks(m.opts), m.opts.block_size, Hkv, Dh};
  Tensor k_cache = g.variable("k_cache." + std::to_string(layer), m.opts.kv_cache_dtype, cache_shape);
  Tensor v_cache = g.variable("v_cache." + std::to_string(layer), m.opts.kv_cache_dtype, cache_shape);
  nn::kv_append(g, k, g.reshape(v, {T, Hkv, Dh}), m.in.slot_mapping, k_cache, v_cache, p + "cache_append");

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  Tensor o =
      m.in.phase == Phase::kDecode
          ? nn::paged_attention(g, q, k_cache, v_cache, m.in.block_tables, m.in.context_lens, scale, p + "attention")
          : nn::paged_attention_prefill(g, q, k_cache, v_cache, m.in.block_tables, m.in.seq_ids, m.in.positions, scale,
                                        p + "attention");
  return linear(g, g.reshape(o, {T, Hq * Dh}), proj("o_proj", {D, Hq * Dh}), p + "o_proj");
}

Tensor mlp(Llama& m, Tensor x, int64_t layer) {
  const std::string p = layer_prefix(layer) + "mlp.";
  const int64_t D = m.cfg.hidden_size, F = m.cfg.intermediate_size;
  auto proj = [&](const char* name, const Shape& shape) { return m.w.linear(p + name, shape, m.cfg.mlp_bias); };
  Tensor gate = linear(m.g, x, proj("gate_proj", {F, D}), p + "gate_proj");
  Tensor up = linear(m.g, x, proj("up_proj", {F, D}), p + "up_proj");
  return linear(m.g, silu_mul(m.g, gate, up, p + "act"), proj("down_proj", {D, F}), p + "down_proj");
}

// The name a checkpoint stores a weight under: transformers' current name, or the published
// Mixtral checkpoints' (block_sparse_moe.*), whichever the source holds.
std::string stored_name(const Llama& m, const std::string& current, const std::string& published) {
  return m.source.stored(published) ? published : current;
}

// MixtralSparseMoeBlock: router logits x gate^T [T, E] (f32, as transformers computes them),
// softmax over the experts, the top num_experts_per_tok weights renormalised (moe_router), then
// each expert's SwiGLU over the rows routed to it (grouped matmuls over experts [E, 2F, D] /
// [E, D, F], packed or stacked from the published per-expert w1 / w3 / w2) and the weighted sum.
Tensor sparse_moe(Llama& m, Tensor x, int64_t layer) {
  const LlamaConfig& c = m.cfg;
  Graph& g = m.g;
  const std::string p = layer_prefix(layer) + "mlp.";
  const std::string published = layer_prefix(layer) + "block_sparse_moe.";
  const int64_t D = c.hidden_size, E = c.num_local_experts, F = c.intermediate_size;
  auto expert = [&](int64_t e, const char* w) {
    return published + "experts." + std::to_string(e) + "." + w + ".weight";
  };
  Tensor router = m.w.f32(stored_name(m, p + "gate.weight", published + "gate.weight"), {E, D}, WeightInit::kLinear);
  nn::Linear gate_up = m.w.experts(p + "experts.gate_up_proj", {E, 2 * F, D}, [&](int64_t e) {
    return std::vector<std::string>{expert(e, "w1"), expert(e, "w3")};
  });
  nn::Linear down = m.w.experts(p + "experts.down_proj", {E, D, F},
                                [&](int64_t e) { return std::vector<std::string>{expert(e, "w2")}; });
  if (!m.w.status()) return Tensor{};
  Tensor logits = matmul(g, x, router, p + "gate");
  const sk_moe_router_attrs attrs{static_cast<int32_t>(c.num_experts_per_tok), static_cast<int32_t>(E),
                                  SK_MOE_SCORING_SOFTMAX, /*normalize=*/1, 1.0f};
  nn::RouterOutput route = nn::moe_router(g, logits, filled_f32(g, p + "gate.no_bias", E, 0.0f), attrs, p + "gate");
  nn::DispatchOutput sorted = nn::moe_dispatch(g, x, route.topk_ids, {static_cast<int32_t>(E), 0}, p + "dispatch");
  Tensor h = nn::grouped_matmul(g, sorted.x_sorted, sorted.counts, gate_up, p + "experts.gate_up_proj");
  h = silu_mul(g, g.slice(h, 1, 0, F), g.slice(h, 1, F, 2 * F), p + "experts.act");
  Tensor y = nn::grouped_matmul(g, h, sorted.counts, down, p + "experts.down_proj");
  return nn::moe_combine(g, y, sorted.row_map, route.topk_weights, x, p + "combine");
}

Tensor decoder_layer(Llama& m, Tensor x, int64_t layer) {
  Graph& g = m.g;
  const std::string p = layer_prefix(layer);
  {
    const std::string scope = layer_scope(layer, "part1");
    SuperKernelScope s(g, scope, scope_options(m.opts, scope));
    Tensor h =
        rms_norm(g, x, m.w.norm(p + "input_layernorm.weight", m.cfg.hidden_size), m.eps(), p + "input_layernorm");
    x = add(g, x, attention(m, h, layer), p + "residual.0");
  }
  {
    const std::string scope = layer_scope(layer, m.cfg.is_moe() ? "part2_moe" : "part2_main");
    SuperKernelScope s(g, scope, scope_options(m.opts, scope));
    Tensor h = rms_norm(g, x, m.w.norm(p + "post_attention_layernorm.weight", m.cfg.hidden_size), m.eps(),
                        p + "post_attention_layernorm");
    Tensor out = m.cfg.is_moe() ? sparse_moe(m, h, layer) : mlp(m, h, layer);
    if (!m.w.status()) return x;
    x = add(g, x, out, p + "residual.1");
  }
  return x;
}

}  // namespace

std::vector<std::string> cache_names(const LlamaConfig& config) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    names.push_back("k_cache." + std::to_string(i));
    names.push_back("v_cache." + std::to_string(i));
  }
  return names;
}

Expected<Graph> build_llama(const LlamaConfig& config, const BuildOptions& options, Phase phase,
                            WeightSource& weights) {
  SK_RETURN_IF_ERROR(config.validate());
  SK_RETURN_IF_ERROR(options.validate());
  if (options.prefetch)
    return Status::unimplemented(
        "build option 'prefetch': only the LongCat-Flash AFD variant prefetches weights; build with prefetch off");
  if (options.parallel.tp > 1 || options.parallel.ep > 1)
    return Status::unimplemented("build option 'parallel': only LongCat-Flash runs across processes");
  if (config.quantization.present() && !is_int4(options.weight_dtype))
    return Status::invalid_argument(
        std::string("build option 'weight_dtype' ") + weight_dtype_name(options.weight_dtype) +
        ": the checkpoint holds packed 4-bit weights (config.json quantization_config): build with w4a8 or w4");
  const std::string family = config.is_moe() ? "mixtral" : "llama";
  Graph g(family + (phase == Phase::kDecode ? "_decode" : "_prefill"));
  ModelWeights w(g, weights, options, &config.quantization);
  Llama m{config, options, g, w, weights, make_step_inputs(g, options, phase), Tensor{}};
  auto rope = config.rope_scaling();
  if (!rope) return rope.status();
  auto cos_sin = rope_table(g, *rope, config.resolved_head_dim(), options, phase);
  if (!cos_sin) return cos_sin.status();
  m.cos_sin = *cos_sin;
  const Shape table{config.vocab_size, config.hidden_size};
  Tensor x;
  {
    SuperKernelScope s(g, "scope_embed", scope_options(options, "scope_embed"));
    x = embedding(g, m.in.input_ids, w.f32("model.embed_tokens.weight", table, WeightInit::kEmbedding),
                  "model.embed_tokens");
  }
  for (int64_t i = 0; i < config.num_hidden_layers && w.status(); ++i) x = decoder_layer(m, x, i);
  if (!w.status()) return finish(std::move(g), w);
  {
    SuperKernelScope s(g, "scope_lm_head", scope_options(options, "scope_lm_head"));
    x = rms_norm(g, lm_head_rows(g, m.in, x), w.norm("model.norm.weight", config.hidden_size), m.eps(), "model.norm");
    const std::string head = config.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    g.output(nn::linear(g, x, w.linear(head, table), "lm_head"), kLogits);
  }
  return finish(std::move(g), w);
}

}  // namespace sk::models
