// LongCat-Flash (Meituan): per layer two MLA sublayers, two SwiGLU MLPs and a shortcut-connected
// MoE over routed and zero-computation experts; and the FFN-only AFD variant. Function names
// follow the published modules; docs/MODELS.md shows the graphs and scopes.
#include <cmath>
#include <string>
#include <vector>

#include "models/longcat_parallel.h"
#include "models/mla.h"
#include "models/model_util.h"
#include "superkernel/models.h"
#include "superkernel/nn.h"
#include "superkernel/ops.h"

namespace sk::models {
namespace {

struct LongCat {
  const LongCatFlashConfig& cfg;
  const BuildOptions& opts;
  Graph& g;
  ModelWeights& w;
  StepTensors in;
  Tensor cos_sin;               // rope table [max_context, qk_rope_head_dim]
  Stream moe_stream;            // the MoE branch's stream: "moe" with multi_streams, else the main stream
  LongCatParallel& par;         // this rank's share across processes (everything with tp = ep = 1)
  double softmax_mscale = 1.0;  // yarn's mscale_all_dim factor on every attention score
  float eps() const { return static_cast<float>(cfg.rms_norm_eps); }
};

// The published q_a_layernorm and kv_a_layernorm are built without an eps argument: the RMSNorm
// default, not rms_norm_eps.
constexpr float kLoraNormEps = 1e-6f;

std::string latent_cache_name(int64_t layer, int sublayer) {
  return "latent_cache." + std::to_string(layer) + "." + std::to_string(sublayer);
}

// Multi-head latent attention, absorbed form, on x [T, hidden] -> [T, hidden].
Tensor mla(LongCat& m, Tensor x, int64_t layer, int sublayer) {
  const LongCatFlashConfig& c = m.cfg;
  Graph& g = m.g;
  const std::string p = layer_prefix(layer) + "self_attn." + std::to_string(sublayer) + ".";
  // H: this rank's heads; all_heads: every rank's, the weights' whole shapes.
  const int64_t T = m.in.tokens, D = c.hidden_size, H = m.par.heads(), R = c.kv_lora_rank;
  const int64_t all_heads = c.num_attention_heads;
  const int64_t nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim, v = c.v_head_dim;
  const sk_rope_attrs interleaved{static_cast<int32_t>(rope), static_cast<int32_t>(rope), 0};

  // attention_bias gives q_a_proj, kv_a_proj_with_mqa and o_proj a bias (q_b_proj, kv_b_proj none).
  auto biased = [&](const char* module, const Shape& shape) { return m.w.linear(p + module, shape, c.attention_bias); };

  // Query: low-rank down, norm, up; per head [nope | rope].
  Tensor q_a = linear(g, x, biased("q_a_proj", {c.q_lora_rank, D}), p + "q_a_proj");
  q_a = rms_norm(g, q_a, m.w.norm(p + "q_a_layernorm.weight", c.q_lora_rank), kLoraNormEps, p + "q_a_layernorm");
  Tensor q = nn::linear(
      g, q_a, m.par.rows(p + "q_b_proj.weight", {all_heads * (nope + rope), c.q_lora_rank}, all_heads), p + "q_b_proj");
  Tensor q3 = g.reshape(q, {T, H, nope + rope});
  Tensor q_nope = g.slice(q3, 2, 0, nope);
  Tensor q_pe = nn::rope(g, g.slice(q3, 2, nope, nope + rope), m.in.positions, m.cos_sin, interleaved, p + "q_rope");

  // Compressed KV latent and the shared rope key, appended to this sublayer's paged cache.
  Tensor kv_a = linear(g, x, biased("kv_a_proj_with_mqa", {R + rope, D}), p + "kv_a_proj_with_mqa");
  Tensor c_kv =
      rms_norm(g, g.slice(kv_a, 1, 0, R), m.w.norm(p + "kv_a_layernorm.weight", R), kLoraNormEps, p + "kv_a_layernorm");
  if (c.mla_scale_kv_lora)
    c_kv = mul(g, c_kv, filled_f32(g, p + "kv_lora_scale", R, static_cast<float>(std::sqrt(double(D) / double(R)))),
               p + "kv_lora_scale");
  Tensor k_pe = nn::rope(g, g.slice(kv_a, 1, R, R + rope), m.in.positions, m.cos_sin, interleaved, p + "k_rope");
  const MlaDims dims{H, nope, rope, v, R};
  Tensor cache = latent_cache(g, m.opts, dims, latent_cache_name(layer, sublayer));
  Tensor kv_b = m.par.f32_rows(p + "kv_b_proj.weight", {all_heads * (nope + v), R}, all_heads);
  if (!m.w.status()) return Tensor{};
  // LongCat scales q_nope and q_rope by sqrt(hidden / q_lora_rank): the same factor on every
  // score, folded into the softmax scale (as yarn's mscale_all_dim factor is).
  double scale = m.softmax_mscale / std::sqrt(static_cast<double>(nope + rope));
  if (c.mla_scale_q_lora) scale *= std::sqrt(static_cast<double>(D) / static_cast<double>(c.q_lora_rank));
  Tensor o = absorbed_attention(g, m.in, dims, q_nope, q_pe, c_kv, k_pe, kv_b, cache, scale, p);
  return m.par.row_parallel(o, p + "o_proj", {D, all_heads * v}, all_heads, c.attention_bias);
}

// SwiGLU MLP: down(silu(gate(x)) * up(x)).
Tensor mlp(LongCat& m, Tensor x, const std::string& prefix, int64_t ffn) {
  const int64_t D = m.cfg.hidden_size;
  Tensor gate = nn::linear(m.g, x, m.par.rows(prefix + "gate_proj.weight", {ffn, D}, ffn), prefix + "gate_proj");
  Tensor up = nn::linear(m.g, x, m.par.rows(prefix + "up_proj.weight", {ffn, D}, ffn), prefix + "up_proj");
  return m.par.row_parallel(silu_mul(m.g, gate, up, prefix + "act"), prefix + "down_proj", {D, ffn}, ffn, false);
}

// Router over routed + zero-computation experts, then the routed experts' SwiGLU FFNs (weights
// packed or per expert) and the weighted sum, where a zero-computation expert contributes its
// weight times x.
struct MoeWeights {
  Tensor router;
  Tensor bias;
  nn::Linear gate_up;
  nn::Linear down;
};

MoeWeights moe_weights(LongCat& m, int64_t layer) {
  const LongCatFlashConfig& c = m.cfg;
  const std::string p = layer_prefix(layer) + "mlp.";
  const int64_t D = c.hidden_size, E = c.n_routed_experts, Z = c.zero_expert_num, F = c.expert_ffn_hidden_size;
  auto expert = [&](int64_t e, const char* proj) {
    return p + "experts." + std::to_string(e) + "." + proj + ".weight";
  };
  MoeWeights mw;
  mw.router = m.w.f32(p + "router.classifier.weight", {E + Z, D}, WeightInit::kLinear);
  mw.bias = m.w.f32(p + "router.e_score_correction_bias", {E + Z}, WeightInit::kBias);
  mw.gate_up = m.par.experts(p + "experts.gate_up_proj", {E, 2 * F, D}, [&](int64_t e) {
    return std::vector<std::string>{expert(e, "gate_proj"), expert(e, "up_proj")};
  });
  mw.down = m.par.experts(p + "experts.down_proj", {E, D, F},
                          [&](int64_t e) { return std::vector<std::string>{expert(e, "down_proj")}; });
  return mw;
}

Tensor moe(LongCat& m, Tensor x, int64_t layer, const MoeWeights& mw) {
  const LongCatFlashConfig& c = m.cfg;
  Graph& g = m.g;
  const std::string p = layer_prefix(layer) + "mlp.";
  const int64_t E = c.n_routed_experts, Z = c.zero_expert_num, F = c.expert_ffn_hidden_size;
  // Expert parallelism: this rank routes its slice of the tokens (to experts on every rank).
  if (m.par.expert_parallel()) x = m.par.local_tokens(x, m.in.tokens, p);
  Tensor logits = matmul(g, x, mw.router, p + "router.classifier");
  Tensor bias = mw.bias;
  const sk_moe_router_attrs router{static_cast<int32_t>(c.moe_topk), static_cast<int32_t>(E), SK_MOE_SCORING_SOFTMAX,
                                   /*normalize=*/0, static_cast<float>(c.routed_scaling_factor)};
  nn::RouterOutput route = nn::moe_router(g, logits, bias, router, p + "router");
  nn::DispatchOutput sorted =
      nn::moe_dispatch(g, x, route.topk_ids, {static_cast<int32_t>(E), static_cast<int32_t>(Z)}, p + "dispatch");
  // The routed experts' SwiGLU FFNs over rows grouped by expert (this rank's experts, over the
  // rows every rank sent them, with expert parallelism).
  auto experts = [&](Tensor rows, Tensor counts) {
    Tensor gate_up = nn::grouped_matmul(g, rows, counts, mw.gate_up, p + "experts.gate_up_proj");
    Tensor h = silu_mul(g, g.slice(gate_up, 1, 0, F), g.slice(gate_up, 1, F, 2 * F), p + "experts.act");
    return nn::grouped_matmul(g, h, counts, mw.down, p + "experts.down_proj");
  };
  Tensor y =
      m.par.expert_parallel() ? m.par.dispatch_combine(sorted, experts, p) : experts(sorted.x_sorted, sorted.counts);
  Tensor out = nn::moe_combine(g, y, sorted.row_map, route.topk_weights, x, p + "combine");
  return m.par.expert_parallel() ? m.par.gather_tokens(out, m.in.tokens, p) : out;
}

Tensor moe(LongCat& m, Tensor x, int64_t layer) { return moe(m, x, layer, moe_weights(m, layer)); }

// Warms every byte of `t` (and its int8 scales) in the shared cache once `after` is produced.
void prefetch_all(Graph& g, const nn::Linear& t, Tensor after, const std::string& name) {
  for (Tensor part : {t.weight, t.scale}) {
    if (!part.valid()) continue;
    const TensorInfo& info = g.tensor(part);
    prefetch(g, part, after, shape_numel(info.shape) * static_cast<int64_t>(dtype_size(info.dtype)), 0,
             name + (part.id == t.weight.id ? "" : ".scale"));
  }
}

// RMS norm with the weight `name` + ".weight", named after the module.
Tensor norm(LongCat& m, Tensor x, const std::string& name) {
  return rms_norm(m.g, x, m.w.norm(name + ".weight", m.cfg.hidden_size), m.eps(), name);
}

Tensor decoder_layer(LongCat& m, Tensor x, int64_t layer) {
  Graph& g = m.g;
  const std::string p = layer_prefix(layer);
  const int64_t ffn = m.cfg.ffn_hidden_size;
  Tensor n;
  {
    const std::string scope = layer_scope(layer, "part1");
    SuperKernelScope s(g, scope, scope_options(m.opts, scope));
    x = add(g, x, mla(m, norm(m, x, p + "input_layernorm.0"), layer, 0), p + "residual.0");
    n = norm(m, x, p + "post_attention_layernorm.0");
  }
  // With multi_streams the shortcut MoE runs on its own stream beside the main branch, inside the
  // same super kernel (stream fusion); events order it after n and the shortcut add after it.
  const bool branch_stream = m.moe_stream.id != g.current_stream().id;
  Event n_ready, moe_done;
  if (branch_stream) {
    n_ready = g.create_event(p + "n_ready");
    moe_done = g.create_event(p + "moe_done");
    g.record(n_ready);
  }
  Tensor moe_out;
  {
    const std::string scope = layer_scope(layer, "part2_moe");
    SuperKernelScope s(g, scope, stream_fused_scope_options(m.opts, scope));
    StreamScope on(g, m.moe_stream);
    LimitCoreNum limit(g, m.opts.moe_core_limit, m.opts.moe_core_limit);
    if (branch_stream) g.wait(n_ready);
    moe_out = moe(m, n, layer);
    if (branch_stream) g.record(moe_done);
  }
  {
    const std::string scope = layer_scope(layer, "part2_main");
    SuperKernelScope s(g, scope, stream_fused_scope_options(m.opts, scope));
    x = add(g, x, mlp(m, n, p + "mlps.0.", ffn), p + "residual.1");
    x = add(g, x, mla(m, norm(m, x, p + "input_layernorm.1"), layer, 1), p + "residual.2");
    x = add(g, x, mlp(m, norm(m, x, p + "post_attention_layernorm.1"), p + "mlps.1.", ffn), p + "residual.3");
    if (branch_stream) g.wait(moe_done);
    x = add(g, x, moe_out, p + "shortcut");
  }
  return x;
}

Status check(const LongCatFlashConfig& config, const BuildOptions& options) {
  SK_RETURN_IF_ERROR(config.validate());
  return options.validate();
}

}  // namespace

std::vector<std::string> cache_names(const LongCatFlashConfig& config) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < config.num_layers; ++i)
    for (int j = 0; j < 2; ++j) names.push_back(latent_cache_name(i, j));
  return names;
}

Expected<Graph> build_longcat_flash(const LongCatFlashConfig& config, const BuildOptions& options, Phase phase,
                                    WeightSource& weights) {
  SK_RETURN_IF_ERROR(check(config, options));
  if (options.prefetch)
    return Status::unimplemented(
        "build option 'prefetch': only the LongCat-Flash AFD variant prefetches weights; build with prefetch off");
  Graph g(phase == Phase::kDecode ? "longcat_flash_decode" : "longcat_flash_prefill");
  ModelWeights w(g, weights, options);
  LongCatParallel par(config, options, g, w);
  SK_RETURN_IF_ERROR(par.validate());
  LongCat m{config, options, g, w, make_step_inputs(g, options, phase), Tensor{}, g.current_stream(), par};
  if (options.multi_streams > 0) m.moe_stream = g.create_stream("moe");
  auto rope = mla_rope(g, config.rope_scaling(), config.qk_rope_head_dim, options, phase);
  if (!rope) return rope.status();
  m.cos_sin = rope->cos_sin;
  m.softmax_mscale = rope->softmax_mscale;
  const Shape table{config.vocab_size, config.hidden_size};
  decoder_stack(g, w, options, m.in, table, config.num_layers, m.eps(), config.tie_word_embeddings,
                [&](Tensor x, int64_t i) { return decoder_layer(m, x, i); });
  return finish(std::move(g), w);
}

Expected<Graph> build_longcat_flash_afd(const LongCatFlashConfig& config, const BuildOptions& options,
                                        WeightSource& weights) {
  SK_RETURN_IF_ERROR(check(config, options));
  if (options.parallel.tp > 1 || options.parallel.ep > 1)
    return Status::unimplemented(
        "build option 'parallel': the LongCat-Flash AFD variant runs in one process only (the decode and prefill "
        "graphs of build_longcat_flash split across processes)");
  Graph g("longcat_flash_afd");
  ModelWeights w(g, weights, options);
  LongCatParallel par(config, options, g, w);
  LongCat m{config, options, g, w, StepTensors{}, Tensor{}, g.current_stream(), par};
  m.in.tokens = options.batch;
  Tensor x = g.input(kHiddenStates, DType::kF32, {options.batch, config.hidden_size});
  // With prefetch, each layer's scope also warms the next layer's router and expert gate/up
  // weights from stream "prefetch" (fused with the layer's ops; no op waits for a prefetch).
  const Stream prefetch_stream = options.prefetch ? g.create_stream("prefetch") : g.current_stream();
  MoeWeights next = moe_weights(m, 0);
  for (int64_t i = 0; i < config.num_layers && w.status(); ++i) {
    const MoeWeights current = next;
    const std::string scope = layer_scope(i, "moe");
    SuperKernelScope s(g, scope,
                       options.prefetch ? stream_fused_scope_options(options, scope) : scope_options(options, scope));
    if (options.prefetch && i + 1 < config.num_layers) {
      next = moe_weights(m, i + 1);
      StreamScope on(g, prefetch_stream);
      LimitCoreNum limit(g, options.prefetch_core_limit, options.prefetch_core_limit);
      const std::string p = layer_prefix(i + 1) + "mlp.";
      prefetch_all(g, {next.router, Tensor{}}, x, p + "router.classifier.prefetch");
      prefetch_all(g, next.gate_up, x, p + "experts.gate_up_proj.prefetch");
    } else if (i + 1 < config.num_layers) {
      next = moe_weights(m, i + 1);
    }
    LimitCoreNum limit(g, options.moe_core_limit, options.moe_core_limit);
    x = moe(m, x, i, current);
  }
  if (w.status()) g.output(x, kHiddenStatesOut);
  return finish(std::move(g), w);
}

}  // namespace sk::models
