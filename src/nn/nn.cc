#include "superkernel/nn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "superkernel/ops.h"
#include "util/half.h"

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
  if (w.int4) return std::string(family) + (w.f32_activations ? ".w4" : ".w4a8_dyn");
  const DType dtype = info_of(g, w.weight).dtype;
  if (dtype == DType::kI8) return std::string(family) + ".w8a8_dyn";
  return std::string(family) + "." + dtype_name(dtype);
}

std::vector<Tensor> weight_operands(const Linear& w) {
  std::vector<Tensor> operands{w.weight};
  if (w.scale.valid()) operands.push_back(w.scale);
  if (w.zero.valid()) operands.push_back(w.zero);
  return operands;
}

}  // namespace

Tensor linear(Graph& g, Tensor x, const Linear& w, std::string name) {
  const TensorInfo& wi = info_of(g, w.weight);
  if (wi.dtype == DType::kF32 && !w.scale.valid() && !w.int4) return matmul(g, x, w.weight, std::move(name));
  std::vector<Tensor> inputs{x};
  for (Tensor t : weight_operands(w)) inputs.push_back(t);
  // Tiled 4-bit weights [N / 16, steps, 16, 64] hold N / 16 tiles.
  const int64_t n = w.int4 && wi.shape.size() == 4 ? dim(wi, 0) * 16 : dim(wi, 0);
  const Shape y = with_last(info_of(g, x).shape, n);
  return call_kernel(g, matmul_kernel("matmul", g, w), inputs, {{DType::kF32, y}}, {}, std::move(name))[0];
}

Tensor linear(Graph& g, Tensor x, const Linear& w, Tensor bias, std::string name) {
  std::string bias_name = name.empty() ? std::string() : name + ".bias";
  return add(g, linear(g, x, w, std::move(name)), bias, std::move(bias_name));
}

namespace {

float load_weight(const void* w, DType dtype, int64_t i) {
  uint16_t h;
  switch (dtype) {
    case DType::kBF16:
      std::memcpy(&h, static_cast<const uint8_t*>(w) + 2 * i, 2);
      return bf16_to_f32(h);
    case DType::kF16:
      std::memcpy(&h, static_cast<const uint8_t*>(w) + 2 * i, 2);
      return f16_to_f32(h);
    default: {
      float f;
      std::memcpy(&f, static_cast<const uint8_t*>(w) + 4 * i, 4);
      return f;
    }
  }
}

// The scale as the kernels will read it: rounded to f16 when stored as f16.
float stored_scale(float s, DType dtype) { return dtype == DType::kF16 ? f16_to_f32(f32_to_f16(s)) : s; }

int quantize_nibble(float v, float s, int z) {
  if (!(s != 0.0f) || !std::isfinite(v / s)) return z;
  return static_cast<int>(std::clamp(std::nearbyint(v / s) + static_cast<float>(z), 0.0f, 15.0f));
}

}  // namespace

Expected<Int4Weights> quantize_int4(const void* w, DType dtype, int64_t out, int64_t in, const Int4Options& options) {
  const int64_t g = options.group;
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16)
    return Status::invalid_argument(std::string("quantize_int4: weights of dtype ") + dtype_name(dtype) +
                                    ", expected f32, bf16 or f16");
  if (options.scale_dtype != DType::kF32 && options.scale_dtype != DType::kF16)
    return Status::invalid_argument(std::string("quantize_int4: scale_dtype ") + dtype_name(options.scale_dtype) +
                                    ", expected f32 or f16");
  if (g < 32 || (g & (g - 1)) != 0)
    return Status::invalid_argument("quantize_int4: group " + std::to_string(g) + " is not a power of two >= 32");
  if (out < 0 || in <= 0 || in % g != 0)
    return Status::invalid_argument("quantize_int4: in = " + std::to_string(in) +
                                    " is not a positive multiple of group " + std::to_string(g));
  if (out > 0 && w == nullptr) return Status::invalid_argument("quantize_int4: no weight data");
  Int4Weights q;
  q.out = out;
  q.in = in;
  q.group = g;
  q.scale_dtype = options.scale_dtype;
  const int64_t groups = in / g;
  const size_t scale_size = options.scale_dtype == DType::kF16 ? 2 : 4;
  q.packed.assign(static_cast<size_t>(out * in / 2), 0);
  q.scale.assign(static_cast<size_t>(groups * out) * scale_size, 0);
  if (options.zero_points) q.zero.assign(static_cast<size_t>(groups * out), 0);
  std::vector<float> v(static_cast<size_t>(g));
  for (int64_t n = 0; n < out; ++n) {
    for (int64_t b = 0; b < groups; ++b) {
      for (int64_t i = 0; i < g; ++i) v[static_cast<size_t>(i)] = load_weight(w, dtype, n * in + b * g + i);
      float s = 0.0f;
      int z = 8;
      if (options.zero_points) {
        float lo = 0.0f;
        float hi = 0.0f;  // the range holds 0, so that 0 is (nearly) exact
        for (float x : v) {
          if (!std::isfinite(x)) continue;
          lo = std::min(lo, x);
          hi = std::max(hi, x);
        }
        s = stored_scale((hi - lo) / 15.0f, options.scale_dtype);
        z = s > 0.0f ? static_cast<int>(std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f)) : 0;
        q.zero[static_cast<size_t>(b * out + n)] = static_cast<int8_t>(z);
      } else {
        float m = 0.0f;
        for (float x : v) {
          if (std::isfinite(x) && std::fabs(x) > std::fabs(m)) m = x;
        }
        s = stored_scale(m / -8.0f, options.scale_dtype);
      }
      if (options.scale_dtype == DType::kF16) {
        const uint16_t h = f32_to_f16(s);
        std::memcpy(q.scale.data() + (b * out + n) * 2, &h, 2);
      } else {
        std::memcpy(q.scale.data() + (b * out + n) * 4, &s, 4);
      }
      for (int64_t i = 0; i < g; ++i) {
        const int nib = quantize_nibble(v[static_cast<size_t>(i)], s, z);
        const int64_t k = b * g + i;
        q.packed[static_cast<size_t>(n * in / 2 + k / 2)] |= static_cast<uint8_t>(nib << (4 * (k % 2)));
      }
    }
  }
  return q;
}

Shape int4_weight_shape(const Int4Weights& q) {
  if (q.tiled) return {q.out / 16, (q.in + 127) / 128, 16, 64};
  return {q.out, q.in / 2};
}

Shape int4_group_shape(const Int4Weights& q) {
  if (q.tiled) return {q.out / 16, q.in / q.group, 16};
  return {q.in / q.group, q.out};
}

Expected<Int4Weights> tile_int4(const Int4Weights& q) {
  if (q.tiled) return Status::invalid_argument("tile_int4: the weights are tiled already");
  if (q.out % 16 != 0)
    return Status::invalid_argument("tile_int4: out = " + std::to_string(q.out) + " is not a multiple of 16");
  const int64_t groups = q.group > 0 ? q.in / q.group : 0;
  const size_t scale_size = dtype_size(q.scale_dtype);
  if (q.packed.size() != static_cast<size_t>(q.out * q.in / 2) ||
      q.scale.size() != static_cast<size_t>(groups * q.out) * scale_size ||
      (!q.zero.empty() && q.zero.size() != static_cast<size_t>(groups * q.out)))
    return Status::invalid_argument("tile_int4: packed, scale or zero does not have the size of [" +
                                    std::to_string(q.out) + ", " + std::to_string(q.in) + "] in groups of " +
                                    std::to_string(q.group));
  Int4Weights t;
  t.out = q.out;
  t.in = q.in;
  t.group = q.group;
  t.scale_dtype = q.scale_dtype;
  t.tiled = true;
  const int64_t steps = (q.in + 127) / 128;
  t.packed.assign(static_cast<size_t>(q.out / 16 * steps * 16 * 64), 0);
  // Row n's bytes [64s, 64s + 64) go to tile n / 16, step s, row n % 16 (the last step short
  // when in is not a multiple of 128; its rest stays zero).
  const int64_t row_bytes = q.in / 2;
  for (int64_t n = 0; n < q.out; ++n) {
    for (int64_t b = 0; b < row_bytes; b += 64) {
      const int64_t at = ((n / 16 * steps + b / 64) * 16 + n % 16) * 64;
      std::memcpy(t.packed.data() + at, q.packed.data() + n * row_bytes + b,
                  static_cast<size_t>(std::min<int64_t>(64, row_bytes - b)));
    }
  }
  t.scale.resize(q.scale.size());
  if (!q.zero.empty()) t.zero.resize(q.zero.size());
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t n = 0; n < q.out; ++n) {
      const int64_t from = g * q.out + n;
      const int64_t to = (n / 16 * groups + g) * 16 + n % 16;
      std::memcpy(t.scale.data() + to * scale_size, q.scale.data() + from * scale_size, scale_size);
      if (!q.zero.empty()) t.zero[static_cast<size_t>(to)] = q.zero[static_cast<size_t>(from)];
    }
  }
  return t;
}

Linear int4_constants(Graph& g, const std::string& name, const Int4Weights& q, bool f32_activations) {
  Linear l;
  l.int4 = true;
  l.f32_activations = f32_activations;
  l.weight = g.constant(name + ".qweight", DType::kI8, int4_weight_shape(q), q.packed.data(), q.packed.size());
  l.scale = g.constant(name + ".scale", q.scale_dtype, int4_group_shape(q), q.scale.data(), q.scale.size());
  if (!q.zero.empty())
    l.zero = g.constant(name + ".zero", DType::kI8, int4_group_shape(q), q.zero.data(), q.zero.size());
  return l;
}

Tensor rope(Graph& g, Tensor x, Tensor positions, Tensor cos_sin, const sk_rope_attrs& attrs, std::string name) {
  return call_kernel(g, "rope.f32", {x, positions, cos_sin}, {{DType::kF32, info_of(g, x).shape}}, blob(attrs),
                     std::move(name))[0];
}

Tensor rope_cos_sin_table(Graph& g, std::string name, int64_t max_positions, int64_t rotary_dim, double theta) {
  RopeScaling rope;
  rope.theta = theta;
  return rope_cos_sin_table(g, std::move(name), max_positions, rotary_dim, rope);
}

const char* rope_type_name(RopeScaling::Type type) {
  switch (type) {
    case RopeScaling::Type::kDefault:
      return "default";
    case RopeScaling::Type::kLinear:
      return "linear";
    case RopeScaling::Type::kDynamic:
      return "dynamic";
    case RopeScaling::Type::kYarn:
      return "yarn";
    case RopeScaling::Type::kLlama3:
      return "llama3";
  }
  return "?";
}

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

double rope_attention_scaling(const RopeScaling& rope) {
  if (rope.type != RopeScaling::Type::kYarn) return 1.0;
  if (rope.attention_factor > 0.0) return rope.attention_factor;
  if (rope.mscale != 0.0 && rope.mscale_all_dim != 0.0)
    return yarn_mscale(rope.factor, rope.mscale) / yarn_mscale(rope.factor, rope.mscale_all_dim);
  return yarn_mscale(rope.factor, 1.0);
}

std::vector<double> rope_inv_freq(const RopeScaling& rope, int64_t rotary_dim, int64_t seq_len) {
  const int64_t half = std::max<int64_t>(rotary_dim / 2, 0);
  const double dim = static_cast<double>(rotary_dim);
  double base = rope.theta;
  if (rope.type == RopeScaling::Type::kDynamic) {
    // NTK-aware: the base grows once the sequence outgrows the configured context.
    const double m = static_cast<double>(rope.original_max_position_embeddings);
    const double n = std::max(static_cast<double>(seq_len), m);
    base *= std::pow(rope.factor * n / m - (rope.factor - 1.0), dim / (dim - 2.0));
  }
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(base, 2.0 * static_cast<double>(i) / dim);
  switch (rope.type) {
    case RopeScaling::Type::kDefault:
    case RopeScaling::Type::kDynamic:
      break;
    case RopeScaling::Type::kLinear:
      for (double& f : inv) f /= rope.factor;
      break;
    case RopeScaling::Type::kYarn: {
      // Dims that turn fewer than beta_slow times over the original context are interpolated
      // (divided by factor), those turning more than beta_fast times kept, a linear ramp between.
      const double orig = static_cast<double>(rope.original_max_position_embeddings);
      const double beta_fast = rope.beta_fast != 0.0 ? rope.beta_fast : 32.0;
      const double beta_slow = rope.beta_slow != 0.0 ? rope.beta_slow : 1.0;
      auto correction_dim = [&](double rotations) {
        return dim * std::log(orig / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(rope.theta));
      };
      double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
      if (rope.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, dim - 1.0);
      if (low == high) high += 0.001;
      for (int64_t i = 0; i < half; ++i) {
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double extrapolation = 1.0 - ramp;
        inv[i] = inv[i] / rope.factor * (1.0 - extrapolation) + inv[i] * extrapolation;
      }
      break;
    }
    case RopeScaling::Type::kLlama3: {
      // Long wavelengths are divided by factor, short ones kept, the band between smoothed.
      const double orig = static_cast<double>(rope.original_max_position_embeddings);
      const double low_wavelen = orig / rope.low_freq_factor;
      const double high_wavelen = orig / rope.high_freq_factor;
      for (double& f : inv) {
        const double wavelen = 2.0 * std::numbers::pi / f;
        if (wavelen > low_wavelen) {
          f /= rope.factor;
        } else if (!(wavelen < high_wavelen)) {
          const double smooth =
              (orig / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
          f = (1.0 - smooth) * f / rope.factor + smooth * f;
        }
      }
      break;
    }
  }
  return inv;
}

Tensor rope_cos_sin_table(Graph& g, std::string name, int64_t max_positions, int64_t rotary_dim,
                          const RopeScaling& rope) {
  const int64_t half = rotary_dim / 2;
  const double scale = rope_attention_scaling(rope);
  std::vector<float> table(static_cast<size_t>(std::max<int64_t>(max_positions * rotary_dim, 0)));
  std::vector<double> inv = rope_inv_freq(rope, rotary_dim, max_positions);
  for (int64_t p = 0; p < max_positions; ++p) {
    if (rope.type == RopeScaling::Type::kDynamic) inv = rope_inv_freq(rope, rotary_dim, p + 1);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * inv[i];
      table[p * rotary_dim + i] = static_cast<float>(std::cos(angle) * scale);
      table[p * rotary_dim + half + i] = static_cast<float>(std::sin(angle) * scale);
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

namespace {
RouterOutput router(Graph& g, Tensor logits, Tensor bias, int32_t top_k, std::vector<uint8_t> attrs, std::string name) {
  const Shape out{dim(info_of(g, logits), 0), top_k};
  auto outs = call_kernel(g, "moe_router.f32", {logits, bias}, {{DType::kI32, out}, {DType::kF32, out}},
                          std::move(attrs), std::move(name));
  return {outs[0], outs[1]};
}
}  // namespace

RouterOutput moe_router(Graph& g, Tensor logits, Tensor bias, const sk_moe_router_attrs& attrs, std::string name) {
  return router(g, logits, bias, attrs.top_k, blob(attrs), std::move(name));
}

RouterOutput moe_router(Graph& g, Tensor logits, Tensor bias, const sk_moe_router_group_attrs& attrs,
                        std::string name) {
  return router(g, logits, bias, attrs.base.top_k, blob(attrs), std::move(name));
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
