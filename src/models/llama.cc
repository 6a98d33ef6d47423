// A Llama-style decoder: grouped-query attention over a paged KV cache with rotary embeddings
// (rotate-halves), RMS norms, and a SwiGLU MLP or a sparse mixture of SwiGLU experts. The
// families of LlamaConfig (Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen2-MoE, Qwen3-MoE) differ
// in the biases, the q/k norms, the MoE block's shared expert and which layers are sparse.
// Function names follow the published modules.
#include <cmath>
#include <string>
#include <vector>

#include "models/model_util.h"
#include "superkernel/attrs_moe.h"
#include "superkernel/models.h"
#include "superkernel/nn.h"
#include "superkernel/ops.h"
#include "superkernel/tensor_ops.h"

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

Tensor attention(Llama& m, Tensor x, int64_t layer) {
  const LlamaConfig& c = m.cfg;
  Graph& g = m.g;
  const std::string p = layer_prefix(layer) + "self_attn.";
  const int64_t T = m.in.tokens, D = c.hidden_size, Hq = c.num_attention_heads, Hkv = c.resolved_kv_heads();
  const int64_t Dh = c.resolved_head_dim();
  const sk_rope_attrs halves{static_cast<int32_t>(Dh), static_cast<int32_t>(Dh), 1};
  const bool qkv_bias = c.attention_bias || c.qkv_bias;  // Qwen2's attention: q, k, v biases only
  auto proj = [&](const char* name, const Shape& shape, bool bias) { return m.w.linear(p + name, shape, bias); };

  Tensor q = linear(g, x, proj("q_proj", {Hq * Dh, D}, qkv_bias), p + "q_proj");
  Tensor k = linear(g, x, proj("k_proj", {Hkv * Dh, D}, qkv_bias), p + "k_proj");
  Tensor v = linear(g, x, proj("v_proj", {Hkv * Dh, D}, qkv_bias), p + "v_proj");
  q = g.reshape(q, {T, Hq, Dh});
  k = g.reshape(k, {T, Hkv, Dh});
  if (c.qk_norm) {  // Qwen3Attention: RMSNorm over each head's head_dim, before RoPE
    q = rms_norm(g, q, m.w.norm(p + "q_norm.weight", Dh), m.eps(), p + "q_norm");
    k = rms_norm(g, k, m.w.norm(p + "k_norm.weight", Dh), m.eps(), p + "k_norm");
  }
  q = nn::rope(g, q, m.in.positions, m.cos_sin, halves, p + "q_rope");
  k = nn::rope(g, k, m.in.positions, m.cos_sin, halves, p + "k_rope");

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
  return linear(g, g.reshape(o, {T, Hq * Dh}), proj("o_proj", {D, Hq * Dh}, c.attention_bias), p + "o_proj");
}

// LlamaMLP (and Qwen2-MoE's shared expert): down(silu(gate(x)) * up(x)), F hidden units, under
// the module prefix `p`.
Tensor mlp(Llama& m, Tensor x, const std::string& p, int64_t F) {
  const int64_t D = m.cfg.hidden_size;
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

// MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock / Qwen3MoeSparseMoeBlock: router logits x gate^T
// [T, E] (f32, as transformers computes them), softmax over the experts, the top
// num_experts_per_tok weights (renormalised when norm_topk_prob: moe_router), then each expert's
// SwiGLU over the rows routed to it (grouped matmuls over experts [E, 2F, D] / [E, D, F], packed
// as transformers saves them or stacked from the published per-expert tensors: Mixtral's
// block_sparse_moe.experts.{e}.w1 / w3 / w2, Qwen's mlp.experts.{e}.gate_proj / up_proj /
// down_proj) and the weighted sum. Qwen2-MoE adds a shared expert, every row through it, scaled
// by sigmoid(x shared_expert_gate^T).
Tensor sparse_moe(Llama& m, Tensor x, int64_t layer) {
  const LlamaConfig& c = m.cfg;
  Graph& g = m.g;
  const std::string p = layer_prefix(layer) + "mlp.";
  const bool mixtral = c.family == LlamaConfig::Family::kMixtral;
  const std::string published = mixtral ? layer_prefix(layer) + "block_sparse_moe." : p;
  const int64_t D = c.hidden_size, E = c.num_local_experts, F = c.expert_intermediate_size();
  auto expert = [&](int64_t e, const char* mixtral_name, const char* qwen_name) {
    return published + "experts." + std::to_string(e) + "." + (mixtral ? mixtral_name : qwen_name) + ".weight";
  };
  Tensor router = m.w.f32(stored_name(m, p + "gate.weight", published + "gate.weight"), {E, D}, WeightInit::kLinear);
  nn::Linear gate_up = m.w.experts(p + "experts.gate_up_proj", {E, 2 * F, D}, [&](int64_t e) {
    return std::vector<std::string>{expert(e, "w1", "gate_proj"), expert(e, "w3", "up_proj")};
  });
  nn::Linear down = m.w.experts(p + "experts.down_proj", {E, D, F},
                                [&](int64_t e) { return std::vector<std::string>{expert(e, "w2", "down_proj")}; });
  Tensor shared_gate;
  if (c.shared_expert_intermediate_size > 0)
    shared_gate = m.w.f32(p + "shared_expert_gate.weight", {1, D}, WeightInit::kLinear);
  if (!m.w.status()) return Tensor{};
  Tensor logits = matmul(g, x, router, p + "gate");
  const sk_moe_router_attrs attrs{static_cast<int32_t>(c.num_experts_per_tok), static_cast<int32_t>(E),
                                  SK_MOE_SCORING_SOFTMAX, c.norm_topk_prob ? 1 : 0, 1.0f};
  nn::RouterOutput route = nn::moe_router(g, logits, filled_f32(g, p + "gate.no_bias", E, 0.0f), attrs, p + "gate");
  nn::DispatchOutput sorted = nn::moe_dispatch(g, x, route.topk_ids, {static_cast<int32_t>(E), 0}, p + "dispatch");
  Tensor h = nn::grouped_matmul(g, sorted.x_sorted, sorted.counts, gate_up, p + "experts.gate_up_proj");
  h = silu_mul(g, g.slice(h, 1, 0, F), g.slice(h, 1, F, 2 * F), p + "experts.act");
  Tensor y = nn::grouped_matmul(g, h, sorted.counts, down, p + "experts.down_proj");
  Tensor routed = nn::moe_combine(g, y, sorted.row_map, route.topk_weights, x, p + "combine");
  if (!shared_gate.valid()) return routed;
  Tensor shared = mlp(m, x, p + "shared_expert.", c.shared_expert_intermediate_size);
  Tensor scale = unary(g, matmul(g, x, shared_gate, p + "shared_expert_gate"), UnaryOp::kSigmoid,
                       p + "shared_expert_gate.sigmoid");
  return add(g, routed, binary(g, shared, scale, BinaryOp::kMul, p + "shared_expert.scaled"), p + "shared_expert.add");
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
    const bool sparse = m.cfg.is_sparse_layer(layer);
    const std::string scope = layer_scope(layer, sparse ? "part2_moe" : "part2_main");
    SuperKernelScope s(g, scope, scope_options(m.opts, scope));
    Tensor h = rms_norm(g, x, m.w.norm(p + "post_attention_layernorm.weight", m.cfg.hidden_size), m.eps(),
                        p + "post_attention_layernorm");
    Tensor out = sparse ? sparse_moe(m, h, layer) : mlp(m, h, p + "mlp.", m.cfg.intermediate_size);
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
  SK_RETURN_IF_ERROR(refuse_longcat_only_options(options));
  if (options.multi_streams > 0)
    return Status::unimplemented(
        "build option 'multi_streams': the Llama builder's layers have no branch to run on a second stream (its MoE "
        "input is the attention's output); build with multi_streams 0");
  if (config.quantization.present() && !is_int4(options.weight_dtype))
    return Status::invalid_argument(
        std::string("build option 'weight_dtype' ") + weight_dtype_name(options.weight_dtype) +
        ": the checkpoint holds packed 4-bit weights (config.json quantization_config): build with w4a8 or w4");
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    const int64_t window = config.attention_window(i);
    if (window > 0 && options.max_context > window)
      return Status::unimplemented(
          "build option 'max_context' = " + std::to_string(options.max_context) + ": layer " + std::to_string(i) +
          " attends within a sliding window of " + std::to_string(window) +
          " tokens (config key 'sliding_window'), and sliding-window attention is not implemented; build with "
          "max_context <= " +
          std::to_string(window) + " (the window then masks nothing)");
  }
  Graph g(std::string(config.model_type()) + (phase == Phase::kDecode ? "_decode" : "_prefill"));
  ModelWeights w(g, weights, options, &config.quantization);
  Llama m{config, options, g, w, weights, make_step_inputs(g, options, phase), Tensor{}};
  auto rope = config.rope_scaling();
  if (!rope) return rope.status();
  auto cos_sin = rope_table(g, *rope, config.resolved_head_dim(), options, phase);
  if (!cos_sin) return cos_sin.status();
  m.cos_sin = *cos_sin;
  const Shape table{config.vocab_size, config.hidden_size};
  decoder_stack(g, w, options, m.in, table, config.num_hidden_layers, m.eps(), config.tie_word_embeddings,
                [&](Tensor x, int64_t i) { return decoder_layer(m, x, i); });
  return finish(std::move(g), w);
}

}  // namespace sk::models
