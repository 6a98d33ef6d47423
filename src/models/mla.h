// Multi-head latent attention in its absorbed form, shared by the models that use it
// (LongCat-Flash, DeepSeek-V2/V3): each model computes the query heads, the compressed KV latent
// and the shared rope key its own way; from there the cache append, the absorbed projections and
// the attention over the paged latent cache are the same.
#ifndef SUPERKERNEL_MODELS_MLA_H_
#define SUPERKERNEL_MODELS_MLA_H_

#include <string>

#include "models/model_util.h"
#include "superkernel/graph.h"
#include "superkernel/nn.h"

namespace sk::models {

struct MlaDims {
  int64_t heads = 0;  // H (this rank's)
  int64_t nope = 0;   // qk_nope_head_dim
  int64_t rope = 0;   // qk_rope_head_dim
  int64_t v = 0;      // v_head_dim
  int64_t rank = 0;   // kv_lora_rank
};

// An MLA model's RoPE: the cos/sin table of `rotary_dim` dims (rope_table) and the factor the
// published MLA puts on its softmax scale (yarn_get_mscale(factor, mscale_all_dim)^2 under a
// scaled RoPE with mscale_all_dim, else 1); or the error of either.
struct MlaRope {
  Tensor cos_sin;
  double softmax_mscale = 1.0;
};
Expected<MlaRope> mla_rope(Graph& g, const Expected<nn::RopeScaling>& rope, int64_t rotary_dim,
                           const BuildOptions& options, Phase phase);

// The paged latent cache variable [cache blocks, block_size, rank + rope] named `name`.
Tensor latent_cache(Graph& g, const BuildOptions& options, const MlaDims& d, const std::string& name);

// q_nope [T, H, nope], q_pe [T, H, rope] and k_pe [T, rope] after RoPE, c_kv [T, rank] after its
// norm; kv_b the f32 kv_b_proj weight [H * (nope + v), rank] (a graph constant). Appends
// [c_kv | k_pe] to `cache` at the step's slots, attends with W_UK folded into the query and W_UV
// into the output, and returns the heads [T, H * v] (o_proj's input). `scale` multiplies every
// score; ops are named under `prefix`.
Tensor absorbed_attention(Graph& g, const StepTensors& in, const MlaDims& d, Tensor q_nope, Tensor q_pe, Tensor c_kv,
                          Tensor k_pe, Tensor kv_b, Tensor cache, double scale, const std::string& prefix);

}  // namespace sk::models

#endif  // SUPERKERNEL_MODELS_MLA_H_
