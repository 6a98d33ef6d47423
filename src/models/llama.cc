// A dense Llama-style decoder: grouped-query attention over a paged KV cache with rotary
// embeddings (rotate-halves), SwiGLU MLP, RMS norms. Function names follow the published modules.
#include <cmath>
#include <string>
#include <vector>

#include "models/model_util.h"
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
    const std::string scope = layer_scope(layer, "part2_main");
    SuperKernelScope s(g, scope, scope_options(m.opts, scope));
    Tensor h = rms_norm(g, x, m.w.norm(p + "post_attention_layernorm.weight", m.cfg.hidden_size), m.eps(),
                        p + "post_attention_layernorm");
    x = add(g, x, mlp(m, h, layer), p + "residual.1");
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
  Graph g(phase == Phase::kDecode ? "llama_decode" : "llama_prefill");
  ModelWeights w(g, weights, options, &config.quantization);
  Llama m{config, options, g, w, make_step_inputs(g, options, phase), Tensor{}};
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
