// Typed builders for the library kernels an LLM needs (linear layers in f32/bf16/int8, rotary
// embedding, paged KV caches, decode and prefill attention, MLA, mixture of experts). Each one
// appends one op through call_kernel with the attribute struct of include/superkernel/attrs_*.h
// and the output shapes of the kernel's contract (docs/kernels_*.md), so model code reads like
// the published definition:
//
//   sk::nn::Linear q_proj{g.constant(...)};              // [out, in], f32
//   sk::Tensor q = sk::nn::linear(g, x, q_proj);         // x [T, in] -> [T, out]
//   q = sk::nn::rope(g, g.reshape(q, {T, H, Dh}), positions, cos_sin, {Dh, Dh, 1});
//   sk::nn::kv_append(g, k, v, slot_mapping, k_cache, v_cache);   // writes the caches in place
//   sk::Tensor o = sk::nn::paged_attention(g, q, k_cache, v_cache, block_tables, context_lens, scale);
//
// Bad operands are recorded as graph errors by the graph (naming the op and operand); builders
// return the output tensor(s) with the contract's shape.
#ifndef SUPERKERNEL_NN_H_
#define SUPERKERNEL_NN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "superkernel/attrs_attention.h"
#include "superkernel/attrs_moe.h"
#include "superkernel/graph.h"

namespace sk::nn {

// A Linear weight [out, in] (PyTorch layout) or stacked expert weights [E, out, in]. f32 and
// bf16 weights need no scale; int8 weights carry per-output-channel f32 scales ([out] or
// [E, out]) and multiply with per-token dynamic activation quantisation (matmul.w8a8_dyn).
struct Linear {
  Tensor weight;
  Tensor scale;  // int8 weights only
};

// x [..., in] -> [..., out] with matmul.{f32,bf16,w8a8_dyn} chosen by the weight dtype.
Tensor linear(Graph& g, Tensor x, const Linear& w, std::string name = "");
// The same plus a bias f32 [out] (an `add` named name + ".bias").
Tensor linear(Graph& g, Tensor x, const Linear& w, Tensor bias, std::string name = "");

// rope.f32: x [T, H, Dh] or [T, H*Dh], positions i32 [T], cos_sin [max_pos, rotary_dim].
Tensor rope(Graph& g, Tensor x, Tensor positions, Tensor cos_sin, const sk_rope_attrs& attrs, std::string name = "");
// The cos/sin table rope.f32 reads: row p holds cos(p * f_i) for i < rotary_dim / 2, then the
// sines, with f_i = theta^(-2i / rotary_dim); computed in double, stored as f32.
Tensor rope_cos_sin_table(Graph& g, std::string name, int64_t max_positions, int64_t rotary_dim, double theta);

// The RoPE types of transformers' modeling_rope_utils.py that Llama and LongCat-Flash
// checkpoints use, with their parameters (the defaults are transformers').
//
//   sk::nn::RopeScaling yarn;
//   yarn.type = sk::nn::RopeScaling::Type::kYarn;
//   yarn.theta = 1e4; yarn.factor = 4; yarn.original_max_position_embeddings = 4096;
//   sk::Tensor cos_sin = sk::nn::rope_cos_sin_table(g, "rope_cos_sin", max_context, head_dim, yarn);
struct RopeScaling {
  enum class Type { kDefault, kLinear, kDynamic, kYarn, kLlama3 };
  Type type = Type::kDefault;
  double theta = 10000.0;
  double factor = 1.0;  // linear, dynamic, yarn, llama3
  // yarn, llama3: the pre-training context length. dynamic: the model's max_position_embeddings,
  // past which the base grows with the sequence length.
  int64_t original_max_position_embeddings = 0;
  double attention_factor = 0.0;  // yarn: cos and sin are multiplied by it; 0 = derived from factor
  double beta_fast = 32.0;        // yarn
  double beta_slow = 1.0;         // yarn
  double mscale = 0.0;            // yarn: with mscale_all_dim, derives attention_factor
  double mscale_all_dim = 0.0;    // yarn
  bool truncate = true;           // yarn: round the correction range to whole dims
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
};
const char* rope_type_name(RopeScaling::Type type);  // "default", "linear", "dynamic", "yarn", "llama3"

// The inverse frequencies f_i, i < rotary_dim / 2, for a sequence of `seq_len` tokens (only
// dynamic depends on it), in double.
std::vector<double> rope_inv_freq(const RopeScaling& rope, int64_t rotary_dim, int64_t seq_len);
// What cos and sin are multiplied by: yarn's attention factor (given or derived); 1 otherwise.
double rope_attention_scaling(const RopeScaling& rope);
// yarn's get_mscale: 1 for scale <= 1, else 0.1 * mscale * ln(scale) + 1.
double yarn_mscale(double scale, double mscale);
// The scaled table: row p holds cos(p * f_i) * s, then sin(p * f_i) * s, with
// s = rope_attention_scaling(rope) and f = rope_inv_freq(rope, rotary_dim, n(p)). n(p) is
// max(p + 1, original_max_position_embeddings) for dynamic (the frequencies transformers uses
// for a token decoded at position p, since its dynamic update grows the base to the sequence
// length of each forward call) and irrelevant otherwise. Computed in double, stored as f32.
Tensor rope_cos_sin_table(Graph& g, std::string name, int64_t max_positions, int64_t rotary_dim,
                          const RopeScaling& rope);

// kv_append.<cache dtype>: writes k_new, v_new [T, Hkv, Dh] at slot_mapping [T] into the caches
// (graph variables [num_blocks, block_size, Hkv, Dh]) in place.
void kv_append(Graph& g, Tensor k_new, Tensor v_new, Tensor slot_mapping, Tensor k_cache, Tensor v_cache,
               std::string name = "");
// mla_cache_append.<cache dtype>: c_kv [T, R], k_pe [T, P] into latent_cache [blocks, bs, R+P].
void mla_cache_append(Graph& g, Tensor c_kv, Tensor k_pe, Tensor slot_mapping, Tensor latent_cache,
                      std::string name = "");

// paged_attention.<cache dtype>: q [B, Hq, Dh] -> [B, Hq, Dh], one query per sequence.
Tensor paged_attention(Graph& g, Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, Tensor context_lens,
                       float scale, std::string name = "");
// paged_attention_prefill.<cache dtype>: q [T, Hq, Dh]; token t of sequence seq_ids[t] attends to
// positions 0 .. positions[t] of its sequence.
Tensor paged_attention_prefill(Graph& g, Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, Tensor seq_ids,
                               Tensor positions, float scale, std::string name = "");
// mla_attention.<cache dtype>: q_latent [B, H, R], q_pe [B, H, P] -> [B, H, R].
Tensor mla_attention(Graph& g, Tensor q_latent, Tensor q_pe, Tensor latent_cache, Tensor block_tables,
                     Tensor context_lens, float scale, std::string name = "");
// mla_attention_prefill.<cache dtype>: as mla_attention with seq_ids and positions per token.
Tensor mla_attention_prefill(Graph& g, Tensor q_latent, Tensor q_pe, Tensor latent_cache, Tensor block_tables,
                             Tensor seq_ids, Tensor positions, float scale, std::string name = "");

// batched_matmul.f32: x [Hb, M, K], w [Hb, N, K] -> [Hb, M, N].
Tensor batched_matmul(Graph& g, Tensor x, Tensor w, std::string name = "");

struct RouterOutput {
  Tensor topk_ids;      // i32 [T, k]
  Tensor topk_weights;  // f32 [T, k]
};
// moe_router.f32: logits [T, E+Z], bias [E+Z].
RouterOutput moe_router(Graph& g, Tensor logits, Tensor bias, const sk_moe_router_attrs& attrs, std::string name = "");

struct DispatchOutput {
  Tensor x_sorted;  // f32 [T*k, D]
  Tensor counts;    // i32 [E]
  Tensor row_map;   // i32 [T, k]
};
// moe_dispatch.f32: x [T, D], topk_ids [T, k].
DispatchOutput moe_dispatch(Graph& g, Tensor x, Tensor topk_ids, const sk_moe_dispatch_attrs& attrs,
                            std::string name = "");

// grouped_matmul.{f32,bf16,w8a8_dyn}: x [R, in] grouped by counts [E], w [E, out, in] -> [R, out].
Tensor grouped_matmul(Graph& g, Tensor x, Tensor counts, const Linear& w, std::string name = "");

// moe_combine.f32: y [R, D], row_map [T, k], topk_weights [T, k], x [T, D] -> [T, D].
Tensor moe_combine(Graph& g, Tensor y, Tensor row_map, Tensor topk_weights, Tensor x, std::string name = "");

// argmax.f32: logits [B, V] -> i32 [B].
Tensor argmax(Graph& g, Tensor logits, std::string name = "");

}  // namespace sk::nn

#endif  // SUPERKERNEL_NN_H_
