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

// A Linear weight [out, in] (PyTorch layout) or stacked expert weights [E, out, in]. f32, bf16
// and f16 weights need no scale; int8 weights carry per-output-channel f32 scales ([out] or
// [E, out]) and multiply with per-token dynamic activation quantisation (matmul.w8a8_dyn).
// Group-wise 4-bit weights (`int4`, docs/kernels_matmul.md "4-bit weights"): weight i8
// [out, in / 2] holding two 4-bit values per byte, scale f32 or f16 [in / G, out], zero i8
// [in / G, out] or none (symmetric, zero point 8), or the same values in the tiled layout
// (tile_int4 below); they multiply with per-token int8 activations (matmul.w4a8_dyn) or, with
// `f32_activations`, with x as it is (matmul.w4).
struct Linear {
  Tensor weight;
  Tensor scale{};  // int8: [out] (or [E, out]); int4: [in / G, out]
  Tensor zero{};   // int4 only, optional
  bool int4 = false;
  bool f32_activations = false;  // int4 only
};

// x [..., in] -> [..., out] with matmul.{f32,bf16,f16,w8a8_dyn,w4a8_dyn,w4} chosen by the weight.
Tensor linear(Graph& g, Tensor x, const Linear& w, std::string name = "");
// The same plus a bias f32 [out] (an `add` named name + ".bias").
Tensor linear(Graph& g, Tensor x, const Linear& w, Tensor bias, std::string name = "");

// Quantisation of a Linear weight to group-wise 4-bit values at load time:
//
//   auto q = sk::nn::quantize_int4(w.data(), sk::DType::kBF16, out, in, {.group = 128});
//   if (!q) return q.status();
//   sk::nn::Linear proj = sk::nn::int4_constants(g, "layers.0.q_proj", *q);
//   sk::Tensor y = sk::nn::linear(g, x, proj);
struct Int4Options {
  int64_t group = 128;              // G: a power of two >= 32 that divides `in`
  bool zero_points = true;          // asymmetric (min/max per group, as AWQ and GPTQ); false:
                                    // symmetric with zero point 8 (as llama.cpp's Q4_0)
  DType scale_dtype = DType::kF16;  // kF16 or kF32
};
struct Int4Weights {
  int64_t out = 0, in = 0, group = 0;
  DType scale_dtype = DType::kF16;
  std::vector<uint8_t> packed;  // [out, in / 2]: k = 2j in bits 0-3 of byte j, k = 2j + 1 in bits 4-7
  std::vector<uint8_t> scale;   // [in / group, out] of scale_dtype
  std::vector<int8_t> zero;     // [in / group, out] in [0, 15]; empty when symmetric
  // The tiled layout: packed [out / 16, ceil(in / 128), 16, 64] (tile t, step s: 64 bytes of each
  // of rows 16t..16t+15, k = 128s..128s+127, zero-padded), scale and zero [out / 16, in / group, 16].
  bool tiled = false;
};
// w [out, in] row-major of dtype kF32, kBF16 or kF16. Per group of G values along `in`:
// asymmetric: s = (max - min) / 15 over the group and 0, z = round(-min / s), q = clamp(round(x / s)
// + z, 0, 15); symmetric: s = -m / 8 for the value m of largest magnitude, q = clamp(round(x / s) +
// 8, 0, 15). q uses s as stored (after rounding to f16). Errors name the bad argument.
Expected<Int4Weights> quantize_int4(const void* w, DType dtype, int64_t out, int64_t in,
                                    const Int4Options& options = {});
// The same weights in the tiled layout, which the kernels read as one stream per core instead
// of one per weight row and one per group (decode with short rows: docs/PERFORMANCE.md). The
// products are the same bits. `out` must be a multiple of 16.
//
//   auto t = sk::nn::tile_int4(*q);   // q from quantize_int4 or a checkpoint's packed weights
//   sk::nn::Linear proj = sk::nn::int4_constants(g, "layers.0.q_proj", *t);
Expected<Int4Weights> tile_int4(const Int4Weights& q);
// The shapes of the weight and of the scale / zero tensors of `q` in its layout.
Shape int4_weight_shape(const Int4Weights& q);
Shape int4_group_shape(const Int4Weights& q);
// The graph constants `name`.qweight, `name`.scale (and `name`.zero) of quantised weights, as a Linear.
Linear int4_constants(Graph& g, const std::string& name, const Int4Weights& q, bool f32_activations = false);

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
// The same with DeepSeek-V3's group-limited selection (n_group, topk_group).
RouterOutput moe_router(Graph& g, Tensor logits, Tensor bias, const sk_moe_router_group_attrs& attrs,
                        std::string name = "");

struct DispatchOutput {
  Tensor x_sorted;  // f32 [T*k, D]
  Tensor counts;    // i32 [E]
  Tensor row_map;   // i32 [T, k]
};
// moe_dispatch.f32: x [T, D], topk_ids [T, k].
DispatchOutput moe_dispatch(Graph& g, Tensor x, Tensor topk_ids, const sk_moe_dispatch_attrs& attrs,
                            std::string name = "");

// grouped_matmul.{f32,bf16,f16,w8a8_dyn}: x [R, in] grouped by counts [E], w [E, out, in] -> [R, out].
Tensor grouped_matmul(Graph& g, Tensor x, Tensor counts, const Linear& w, std::string name = "");

// moe_combine.f32: y [R, D], row_map [T, k], topk_weights [T, k], x [T, D] -> [T, D].
Tensor moe_combine(Graph& g, Tensor y, Tensor row_map, Tensor topk_weights, Tensor x, std::string name = "");

// argmax.f32: logits [B, V] -> i32 [B].
Tensor argmax(Graph& g, Tensor logits, std::string name = "");

}  // namespace sk::nn

#endif  // SUPERKERNEL_NN_H_
