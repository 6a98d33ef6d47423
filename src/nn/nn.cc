#include "superkernel/nn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "superkernel/ops.h"

namespace sk::nn {
namespace {

template <typename Attrs>
std::vector<uint8_t> blob(const Attrs& attrs) {
  std::vector<uint8_t> bytes(sizeof(Attrs));
  std::memcpy(bytes.data(), &attrs, sizeof(Attrs));
  return bytes;
}

// The shape and dtype of a handle, or an empty f32 shape for a bad handle: the op built from it
// then fails the graph's own operand check, which names the op and operand.
const TensorInfo& info_of(const Graph& g, Tensor t) {
  static const TensorInfo kInvalid;
  if (!t.valid() || t.graph_uid != g.uid() || static_cast<size_t>(t.id) >= g.num_tensors()) return kInvalid;
  return g.tensor(t);
}

int64_t dim(const TensorInfo& info, size_t i) { return i < info.shape.size() ? info.shape[i] : 0; }

// Kernels of the cache family are suffixed with the cache dtype.
std::string with_cache_suffix(const char* kernel, const Graph& g, Tensor cache) {
  return std::string(kernel) + "." + dtype_name(info_of(g, cache).dtype);
}

// x [..., in] with the last dim replaced by `out`.
Shape with_last(const Shape& x, int64_t out) {
  Shape y = x.empty() ? Shape{1} : x;
  y.back() = out;
  return y;
}

std::string matmul_kernel(const char* family, const Graph& g, const Linear& w) {
  const DType dtype = info_of(g, w.weight).dtype;
  if (dtype == DType::kI8) return std::string(family) + ".w8a8_dyn";
  return std::string(family) + "." + dtype_name(dtype);
}

std::vector<Tensor> weight_operands(const Linear& w) {
  std::vector<Tensor> operands{w.weight};
  if (w.scale.valid()) operands.push_back(w.scale);
  return operands;
}

}  // namespace

Tensor linear(Graph& g, Tensor x, const Linear& w, std::string name) {
  const TensorInfo& wi = info_of(g, w.weight);
  if (wi.dtype == DType::kF32 && !w.scale.valid()) return matmul(g, x, w.weight, std::move(name));
  std::vector<Tensor> inputs{x};
  for (Tensor t : weight_operands(w)) inputs.push_back(t);
  const Shape y = with_last(info_of(g, x).shape, dim(wi, 0));
  return call_kernel(g, matmul_kernel("matmul", g, w), inputs, {{DType::kF32, y}}, {}, std::move(name))[0];
}

Tensor rope(Graph& g, Tensor x, Tensor positions, Tensor cos_sin, const sk_rope_attrs& attrs, std::string name) {
  return call_kernel(g, "rope.f32", {x, positions, cos_sin}, {{DType::kF32, info_of(g, x).shape}}, blob(attrs),
                     std::move(name))[0];
}

Tensor rope_cos_sin_table(Graph& g, std::string name, int64_t max_positions, int64_t rotary_dim, double theta) {
  const int64_t half = rotary_dim / 2;
  std::vector<float> table(static_cast<size_t>(std::max<int64_t>(max_positions * rotary_dim, 0)));
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
      const double angle = static_cast<double>(p) * inv_freq;
      table[p * rotary_dim + i] = static_cast<float>(std::cos(angle));
      table[p * rotary_dim + half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return g.constant_f32(std::move(name), {max_positions, rotary_dim}, table);
}

void kv_append(Graph& g, Tensor k_new, Tensor v_new, Tensor slot_mapping, Tensor k_cache, Tensor v_cache,
               std::string name) {
  OpSpec spec;
  spec.kernel = with_cache_suffix("kv_append", g, k_cache);
  spec.name = std::move(name);
  spec.inputs = {k_new, v_new, slot_mapping, k_cache, v_cache};
  spec.outputs = {{info_of(g, k_cache).dtype, info_of(g, k_cache).shape},
                  {info_of(g, v_cache).dtype, info_of(g, v_cache).shape}};
  spec.write_into = {k_cache, v_cache};
  g.add_op(std::move(spec));
}

void mla_cache_append(Graph& g, Tensor c_kv, Tensor k_pe, Tensor slot_mapping, Tensor latent_cache, std::string name) {
  OpSpec spec;
  spec.kernel = with_cache_suffix("mla_cache_append", g, latent_cache);
  spec.name = std::move(name);
  spec.inputs = {c_kv, k_pe, slot_mapping, latent_cache};
  spec.outputs = {{info_of(g, latent_cache).dtype, info_of(g, latent_cache).shape}};
  spec.write_into = {latent_cache};
  g.add_op(std::move(spec));
}

Tensor paged_attention(Graph& g, Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, Tensor context_lens,
                       float scale, std::string name) {
  return call_kernel(g, with_cache_suffix("paged_attention", g, k_cache),
                     {q, k_cache, v_cache, block_tables, context_lens}, {{DType::kF32, info_of(g, q).shape}},
                     blob(sk_paged_attention_attrs{scale}), std::move(name))[0];
}

Tensor paged_attention_prefill(Graph& g, Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, Tensor seq_ids,
                               Tensor positions, float scale, std::string name) {
  return call_kernel(g, with_cache_suffix("paged_attention_prefill", g, k_cache),
                     {q, k_cache, v_cache, block_tables, seq_ids, positions}, {{DType::kF32, info_of(g, q).shape}},
                     blob(sk_paged_attention_attrs{scale}), std::move(name))[0];
}

namespace {
sk_mla_attention_attrs mla_attrs(const Graph& g, Tensor q_latent, Tensor q_pe, float scale) {
  return {static_cast<int32_t>(dim(info_of(g, q_latent), 2)), static_cast<int32_t>(dim(info_of(g, q_pe), 2)), scale};
}
}  // namespace

Tensor mla_attention(Graph& g, Tensor q_latent, Tensor q_pe, Tensor latent_cache, Tensor block_tables,
                     Tensor context_lens, float scale, std::string name) {
  return call_kernel(g, with_cache_suffix("mla_attention", g, latent_cache),
                     {q_latent, q_pe, latent_cache, block_tables, context_lens},
                     {{DType::kF32, info_of(g, q_latent).shape}}, blob(mla_attrs(g, q_latent, q_pe, scale)),
                     std::move(name))[0];
}

Tensor mla_attention_prefill(Graph& g, Tensor q_latent, Tensor q_pe, Tensor latent_cache, Tensor block_tables,
                             Tensor seq_ids, Tensor positions, float scale, std::string name) {
  return call_kernel(g, with_cache_suffix("mla_attention_prefill", g, latent_cache),
                     {q_latent, q_pe, latent_cache, block_tables, seq_ids, positions},
                     {{DType::kF32, info_of(g, q_latent).shape}}, blob(mla_attrs(g, q_latent, q_pe, scale)),
                     std::move(name))[0];
}

Tensor batched_matmul(Graph& g, Tensor x, Tensor w, std::string name) {
  const TensorInfo& xi = info_of(g, x);
  const Shape y{dim(xi, 0), dim(xi, 1), dim(info_of(g, w), 1)};
  return call_kernel(g, "batched_matmul.f32", {x, w}, {{DType::kF32, y}}, {}, std::move(name))[0];
}

RouterOutput moe_router(Graph& g, Tensor logits, Tensor bias, const sk_moe_router_attrs& attrs, std::string name) {
  const Shape out{dim(info_of(g, logits), 0), attrs.top_k};
  auto outs = call_kernel(g, "moe_router.f32", {logits, bias}, {{DType::kI32, out}, {DType::kF32, out}}, blob(attrs),
                          std::move(name));
  return {outs[0], outs[1]};
}

DispatchOutput moe_dispatch(Graph& g, Tensor x, Tensor topk_ids, const sk_moe_dispatch_attrs& attrs, std::string name) {
  const TensorInfo& xi = info_of(g, x);
  const TensorInfo& ids = info_of(g, topk_ids);
  auto outs = call_kernel(g, "moe_dispatch.f32", {x, topk_ids},
                          {{DType::kF32, {dim(ids, 0) * dim(ids, 1), dim(xi, 1)}},
                           {DType::kI32, {attrs.num_real_experts}},
                           {DType::kI32, ids.shape}},
                          blob(attrs), std::move(name));
  return {outs[0], outs[1], outs[2]};
}

Tensor grouped_matmul(Graph& g, Tensor x, Tensor counts, const Linear& w, std::string name) {
  std::vector<Tensor> inputs{x, counts};
  for (Tensor t : weight_operands(w)) inputs.push_back(t);
  const Shape y{dim(info_of(g, x), 0), dim(info_of(g, w.weight), 1)};
  return call_kernel(g, matmul_kernel("grouped_matmul", g, w), inputs, {{DType::kF32, y}}, {}, std::move(name))[0];
}

Tensor moe_combine(Graph& g, Tensor y, Tensor row_map, Tensor topk_weights, Tensor x, std::string name) {
  return call_kernel(g, "moe_combine.f32", {y, row_map, topk_weights, x}, {{DType::kF32, info_of(g, x).shape}}, {},
                     std::move(name))[0];
}

Tensor argmax(Graph& g, Tensor logits, std::string name) {
  return call_kernel(g, "argmax.f32", {logits}, {{DType::kI32, {dim(info_of(g, logits), 0)}}}, {}, std::move(name))[0];
}

}  // namespace sk::nn
