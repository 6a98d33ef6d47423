// The absorbed MLA core (models/mla.h).
#include "models/mla.h"

#include <vector>

#include "superkernel/nn.h"
#include "superkernel/ops.h"

namespace sk::models {
namespace {

// W_UK of the absorbed form: the k_nope rows of kv_b_proj [H * (nope + v), R], per head
// transposed to [R, nope] so batched_matmul maps q_nope [nope] to the latent [R]. Built once on
// the host from the weight's bytes (a graph constant, f32).
Tensor absorbed_w_uk(Graph& g, Tensor kv_b_proj, const MlaDims& d, const std::string& name) {
  const auto* kv_b = static_cast<const float*>(constant_bytes(g.tensor(kv_b_proj)));
  const int64_t H = d.heads, nope = d.nope, v = d.v, R = d.rank;
  std::vector<float> w_uk(static_cast<size_t>(H * R * nope));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t k = 0; k < nope; ++k)
      for (int64_t r = 0; r < R; ++r) w_uk[(h * R + r) * nope + k] = kv_b[(h * (nope + v) + k) * R + r];
  return g.constant_f32(name, {H, R, nope}, w_uk);
}

}  // namespace

Expected<MlaRope> mla_rope(Graph& g, const Expected<nn::RopeScaling>& rope, int64_t rotary_dim,
                           const BuildOptions& options, Phase phase) {
  if (!rope) return rope.status();
  auto cos_sin = rope_table(g, *rope, rotary_dim, options, phase);
  if (!cos_sin) return cos_sin.status();
  MlaRope out{*cos_sin, 1.0};
  if (rope->type != nn::RopeScaling::Type::kDefault && rope->mscale_all_dim != 0.0) {
    const double mscale = nn::yarn_mscale(rope->factor, rope->mscale_all_dim);
    out.softmax_mscale = mscale * mscale;
  }
  return out;
}

Tensor latent_cache(Graph& g, const BuildOptions& options, const MlaDims& d, const std::string& name) {
  return g.variable(name, options.kv_cache_dtype, {cache_blocks(options), options.block_size, d.rank + d.rope});
}

Tensor absorbed_attention(Graph& g, const StepTensors& in, const MlaDims& d, Tensor q_nope, Tensor q_pe, Tensor c_kv,
                          Tensor k_pe, Tensor kv_b, Tensor cache, double scale, const std::string& p) {
  const int64_t T = in.tokens, H = d.heads, nope = d.nope, v = d.v, R = d.rank;
  nn::mla_cache_append(g, c_kv, k_pe, in.slot_mapping, cache, p + "cache_append");
  // Absorbed projections: W_UK folds k_nope's expansion into the query, W_UV v's into the output.
  Tensor w_uk = absorbed_w_uk(g, kv_b, d, p + "kv_b_proj.w_uk");
  Tensor w_uv = g.slice(g.reshape(kv_b, {H, nope + v, R}), 1, nope, nope + v);  // [H, v, R]
  Tensor q_latent = g.transpose(nn::batched_matmul(g, g.transpose(q_nope, {1, 0, 2}), w_uk, p + "w_uk"), {1, 0, 2});
  Tensor latent =
      in.phase == Phase::kDecode
          ? nn::mla_attention(g, q_latent, q_pe, cache, in.block_tables, in.context_lens, float(scale), p + "attention")
          : nn::mla_attention_prefill(g, q_latent, q_pe, cache, in.block_tables, in.seq_ids, in.positions, float(scale),
                                      p + "attention");
  Tensor heads = nn::batched_matmul(g, g.transpose(latent, {1, 0, 2}), w_uv, p + "w_uv");  // [H, T, v]
  return g.reshape(copy(g, g.transpose(heads, {1, 0, 2}), p + "heads"), {T, H * v});
}

}  // namespace sk::models
