// DeepSeek-V2 and DeepSeek-V3 (transformers' DeepseekV2ForCausalLM / DeepseekV3ForCausalLM): per
// layer one MLA attention (absorbed, over a paged latent cache) and either a dense SwiGLU MLP
// (the first first_k_dense_replace layers) or a MoE of routed experts beside always-on shared
// experts. Function names follow the published modules; docs/MODELS.md shows the scopes.
#include <cmath>
#include <string>
#include <vector>

#include "models/mla.h"
#include "models/model_util.h"
#include "superkernel/attrs_moe.h"
#include "superkernel/models.h"
#include "superkernel/nn.h"
#include "superkernel/ops.h"

namespace sk::models {
namespace {

struct Deepseek {
  const DeepseekConfig& cfg;
  const BuildOptions& opts;
  Graph& g;
  ModelWeights& w;
  StepTensors in;
  Tensor cos_sin;               // rope table [max_context, qk_rope_head_dim]
  double softmax_mscale = 1.0;  // yarn's mscale_all_dim factor on every attention score
  Stream moe_stream;            // the routed experts' stream: "moe" with multi_streams, else the main stream
  float eps() const { return static_cast<float>(cfg.rms_norm_eps); }
};

// DeepseekV{2,3}RMSNorm(q_lora_rank) and (kv_lora_rank) are built without an eps argument.
constexpr float kLoraNormEps = 1e-6f;

std::string latent_cache_name(int64_t layer) { return "latent_cache." + std::to_string(layer); }

// DeepseekV2Attention / DeepseekV3Attention on x [T, hidden] -> [T, hidden].
Tensor attention(Deepseek& m, Tensor x, int64_t layer) {
  const DeepseekConfig& c = m.cfg;
  Graph& g = m.g;
  const std::string p = layer_prefix(layer) + "self_attn.";
  const int64_t T = m.in.tokens, D = c.hidden_size, H = c.num_attention_heads, R = c.kv_lora_rank;
  const int64_t nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim, v = c.v_head_dim;
  // V2 rotates interleaved pairs (its complex form); V3 too with rope_interleave, else halves.
  // V3's interleaved form returns the rotated pairs de-interleaved; q and k alike, so the scores
  // are the same as rotating in place.
  const bool halves = c.family == DeepseekConfig::Family::kV3 && !c.rope_interleave;
  const sk_rope_attrs rotary{static_cast<int32_t>(rope), static_cast<int32_t>(rope), halves ? 1 : 0};
  auto biased = [&](const char* module, const Shape& shape) { return m.w.linear(p + module, shape, c.attention_bias); };

  // Query: q_proj, or low-rank down, norm, up (q_lora_rank); per head [nope | rope].
  Tensor q;
  if (c.q_lora_rank == 0) {
    q = nn::linear(g, x, m.w.linear(p + "q_proj.weight", {H * (nope + rope), D}), p + "q_proj");
  } else {
    Tensor q_a = linear(g, x, biased("q_a_proj", {c.q_lora_rank, D}), p + "q_a_proj");
    q_a = rms_norm(g, q_a, m.w.norm(p + "q_a_layernorm.weight", c.q_lora_rank), kLoraNormEps, p + "q_a_layernorm");
    q = nn::linear(g, q_a, m.w.linear(p + "q_b_proj.weight", {H * (nope + rope), c.q_lora_rank}), p + "q_b_proj");
  }
  Tensor q3 = g.reshape(q, {T, H, nope + rope});
  Tensor q_nope = g.slice(q3, 2, 0, nope);
  Tensor q_pe = nn::rope(g, g.slice(q3, 2, nope, nope + rope), m.in.positions, m.cos_sin, rotary, p + "q_rope");

  // Compressed KV latent and the shared rope key.
  Tensor kv_a = linear(g, x, biased("kv_a_proj_with_mqa", {R + rope, D}), p + "kv_a_proj_with_mqa");
  Tensor c_kv =
      rms_norm(g, g.slice(kv_a, 1, 0, R), m.w.norm(p + "kv_a_layernorm.weight", R), kLoraNormEps, p + "kv_a_layernorm");
  Tensor k_pe = nn::rope(g, g.slice(kv_a, 1, R, R + rope), m.in.positions, m.cos_sin, rotary, p + "k_rope");
  const MlaDims dims{H, nope, rope, v, R};
  Tensor cache = latent_cache(g, m.opts, dims, latent_cache_name(layer));
  Tensor kv_b = m.w.f32(p + "kv_b_proj.weight", {H * (nope + v), R}, WeightInit::kLinear);
  if (!m.w.status()) return Tensor{};
  const double scale = m.softmax_mscale / std::sqrt(static_cast<double>(nope + rope));
  Tensor o = absorbed_attention(g, m.in, dims, q_nope, q_pe, c_kv, k_pe, kv_b, cache, scale, p);
  return linear(g, o, biased("o_proj", {D, H * v}), p + "o_proj");
}

// DeepseekV{2,3}MLP: down(silu(gate(x)) * up(x)), F hidden units, under the module prefix `p`
// (V2's mlp_bias gives the dense and shared MLPs biases).
Tensor mlp(Deepseek& m, Tensor x, const std::string& p, int64_t F) {
  const int64_t D = m.cfg.hidden_size;
  const bool bias = m.cfg.family == DeepseekConfig::Family::kV2 && m.cfg.mlp_bias;
  auto proj = [&](const char* name, const Shape& shape) { return m.w.linear(p + name, shape, bias); };
  Tensor gate = linear(m.g, x, proj("gate_proj", {F, D}), p + "gate_proj");
  Tensor up = linear(m.g, x, proj("up_proj", {F, D}), p + "up_proj");
  return linear(m.g, silu_mul(m.g, gate, up, p + "act"), proj("down_proj", {D, F}), p + "down_proj");
}

// DeepseekV2Moe / DeepseekV3MoE: the router (DeepseekV*TopkRouter, f32 logits), the routed
// experts' SwiGLU FFNs over rows grouped by expert (packed [E, 2F, D] / [E, D, F] as transformers
// saves them, or stacked from the published mlp.experts.{e}.gate_proj / up_proj / down_proj), the
// weighted sum, plus the shared experts (one MLP of n_shared_experts * moe_intermediate_size units).
Tensor moe(Deepseek& m, Tensor x, int64_t layer) {
  const DeepseekConfig& c = m.cfg;
  Graph& g = m.g;
  const std::string p = layer_prefix(layer) + "mlp.";
  const int64_t D = c.hidden_size, E = c.n_routed_experts, F = c.moe_intermediate_size;
  const bool v3 = c.family == DeepseekConfig::Family::kV3;
  auto expert = [&](int64_t e, const char* proj) {
    return p + "experts." + std::to_string(e) + "." + proj + ".weight";
  };
  Tensor router = m.w.f32(p + "gate.weight", {E, D}, WeightInit::kLinear);
  Tensor bias = v3 ? m.w.f32(p + "gate.e_score_correction_bias", {E}, WeightInit::kBias)
                   : filled_f32(g, p + "gate.no_bias", E, 0.0f);
  nn::Linear gate_up = m.w.experts(p + "experts.gate_up_proj", {E, 2 * F, D}, [&](int64_t e) {
    return std::vector<std::string>{expert(e, "gate_proj"), expert(e, "up_proj")};
  });
  nn::Linear down = m.w.experts(p + "experts.down_proj", {E, D, F},
                                [&](int64_t e) { return std::vector<std::string>{expert(e, "down_proj")}; });
  if (!m.w.status()) return Tensor{};
  Tensor logits = matmul(g, x, router, p + "gate");
  // V3: sigmoid scores, the bias picks (never weighs), within the topk_group best groups, then
  // renormalised (norm_topk_prob) and scaled. V2 (greedy): softmax top-k, scaled only.
  const sk_moe_router_attrs base{static_cast<int32_t>(c.num_experts_per_tok), static_cast<int32_t>(E),
                                 v3 ? SK_MOE_SCORING_SIGMOID : SK_MOE_SCORING_SOFTMAX, v3 && c.norm_topk_prob ? 1 : 0,
                                 static_cast<float>(c.routed_scaling_factor)};
  nn::RouterOutput route = v3 ? nn::moe_router(g, logits, bias,
                                               sk_moe_router_group_attrs{base, static_cast<int32_t>(c.groups()),
                                                                         static_cast<int32_t>(c.groups_chosen())},
                                               p + "gate")
                              : nn::moe_router(g, logits, bias, base, p + "gate");
  nn::DispatchOutput sorted = nn::moe_dispatch(g, x, route.topk_ids, {static_cast<int32_t>(E), 0}, p + "dispatch");
  Tensor h = nn::grouped_matmul(g, sorted.x_sorted, sorted.counts, gate_up, p + "experts.gate_up_proj");
  h = silu_mul(g, g.slice(h, 1, 0, F), g.slice(h, 1, F, 2 * F), p + "experts.act");
  Tensor y = nn::grouped_matmul(g, h, sorted.counts, down, p + "experts.down_proj");
  return nn::moe_combine(g, y, sorted.row_map, route.topk_weights, x, p + "combine");
}

// The MoE block: the routed experts plus the shared experts, which read the same input. With
// multi_streams the routed experts (router to combine) run on stream "moe" under moe_core_limit
// beside the shared experts on the main stream, in the same super kernel; events order them
// after x and the sum after both.
Tensor moe_block(Deepseek& m, Tensor x, int64_t layer) {
  Graph& g = m.g;
  const std::string p = layer_prefix(layer) + "mlp.";
  const bool branch_stream = m.moe_stream.id != g.current_stream().id;
  Event x_ready, routed_done;
  if (branch_stream) {
    x_ready = g.create_event(p + "x_ready");
    routed_done = g.create_event(p + "routed_done");
    g.record(x_ready);
  }
  Tensor routed;
  {
    StreamScope on(g, m.moe_stream);
    LimitCoreNum limit(g, m.opts.moe_core_limit, m.opts.moe_core_limit);
    if (branch_stream) g.wait(x_ready);
    routed = moe(m, x, layer);
    if (branch_stream) g.record(routed_done);
  }
  Tensor shared = mlp(m, x, p + "shared_experts.", m.cfg.n_shared_experts * m.cfg.moe_intermediate_size);
  if (!m.w.status()) return Tensor{};
  if (branch_stream) g.wait(routed_done);
  return add(g, routed, shared, p + "shared_experts.add");
}

Tensor norm(Deepseek& m, Tensor x, const std::string& name) {
  return rms_norm(m.g, x, m.w.norm(name + ".weight", m.cfg.hidden_size), m.eps(), name);
}

// Scopes as LongCat-Flash's: the attention (part1), then the MoE (part2_moe, stream-fused with
// multi_streams) or the dense MLP (part2_main).
Tensor decoder_layer(Deepseek& m, Tensor x, int64_t layer) {
  Graph& g = m.g;
  const std::string p = layer_prefix(layer);
  {
    const std::string scope = layer_scope(layer, "part1");
    SuperKernelScope s(g, scope, scope_options(m.opts, scope));
    x = add(g, x, attention(m, norm(m, x, p + "input_layernorm"), layer), p + "residual.0");
  }
  if (!m.w.status()) return x;
  const bool sparse = m.cfg.is_moe_layer(layer);
  const std::string scope = layer_scope(layer, sparse ? "part2_moe" : "part2_main");
  SuperKernelScope s(g, scope, sparse ? stream_fused_scope_options(m.opts, scope) : scope_options(m.opts, scope));
  Tensor h = norm(m, x, p + "post_attention_layernorm");
  Tensor out = sparse ? moe_block(m, h, layer) : mlp(m, h, p + "mlp.", m.cfg.intermediate_size);
  if (!m.w.status()) return x;
  return add(g, x, out, p + "residual.1");
}

}  // namespace

std::vector<std::string> cache_names(const DeepseekConfig& config) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) names.push_back(latent_cache_name(i));
  return names;
}

Expected<Graph> build_deepseek(const DeepseekConfig& config, const BuildOptions& options, Phase phase,
                               WeightSource& weights) {
  SK_RETURN_IF_ERROR(config.validate());
  SK_RETURN_IF_ERROR(options.validate());
  SK_RETURN_IF_ERROR(refuse_longcat_only_options(options));
  Graph g(std::string(config.model_type()) + (phase == Phase::kDecode ? "_decode" : "_prefill"));
  ModelWeights w(g, weights, options);
  Deepseek m{config, options, g, w, make_step_inputs(g, options, phase), Tensor{}, 1.0, g.current_stream()};
  if (options.multi_streams > 0) m.moe_stream = g.create_stream("moe");
  auto rope = mla_rope(g, config.rope_scaling(), config.qk_rope_head_dim, options, phase);
  if (!rope) return rope.status();
  m.cos_sin = rope->cos_sin;
  m.softmax_mscale = rope->softmax_mscale;
  const Shape table{config.vocab_size, config.hidden_size};
  decoder_stack(g, w, options, m.in, table, config.num_hidden_layers, m.eps(), config.tie_word_embeddings,
                [&](Tensor x, int64_t i) { return decoder_layer(m, x, i); });
  return finish(std::move(g), w);
}

}  // namespace sk::models
