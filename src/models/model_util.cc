#include "models/model_util.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "superkernel/ops.h"
#include "superkernel/tensor_ops.h"

namespace sk::models {

StepTensors make_step_inputs(Graph& g, const BuildOptions& options, Phase phase) {
  StepTensors in;
  in.phase = phase;
  in.tokens = phase == Phase::kDecode ? options.batch : options.prefill_tokens;
  in.input_ids = g.input(kInputIds, DType::kI32, {in.tokens});
  in.positions = g.input(kPositions, DType::kI32, {in.tokens});
  in.slot_mapping = g.input(kSlotMapping, DType::kI32, {in.tokens});
  in.block_tables = g.input(kBlockTables, DType::kI32, {options.batch, max_blocks_per_sequence(options)});
  if (phase == Phase::kDecode) {
    in.context_lens = g.input(kContextLens, DType::kI32, {options.batch});
  } else {
    in.seq_ids = g.input(kSeqIds, DType::kI32, {in.tokens});
    if (options.prefill_logits == PrefillLogits::kLastToken)
      in.logit_rows = g.input(kLogitRows, DType::kI32, {options.batch});
  }
  return in;
}

Tensor lm_head_rows(Graph& g, const StepTensors& in, Tensor x) {
  return in.logit_rows.valid() ? index_select(g, x, 0, in.logit_rows, "logit_rows") : x;
}

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

Tensor embed_tokens(Graph& g, ModelWeights& w, const BuildOptions& options, const StepTensors& in, const Shape& table) {
  SuperKernelScope s(g, "scope_embed", scope_options(options, "scope_embed"));
  return embedding(g, in.input_ids, w.f32("model.embed_tokens.weight", table, WeightInit::kEmbedding),
                   "model.embed_tokens");
}

void lm_head(Graph& g, ModelWeights& w, const BuildOptions& options, const StepTensors& in, Tensor x,
             const Shape& table, float eps, bool tied) {
  SuperKernelScope s(g, "scope_lm_head", scope_options(options, "scope_lm_head"));
  x = rms_norm(g, lm_head_rows(g, in, x), w.norm("model.norm.weight", table[1]), eps, "model.norm");
  const std::string head = tied ? "model.embed_tokens.weight" : "lm_head.weight";
  g.output(nn::linear(g, x, w.linear(head, table), "lm_head"), kLogits);
}

Tensor ModelWeights::f32(const std::string& name, const Shape& shape, WeightInit init) {
  if (!status_) return Tensor{};
  Expected<Tensor> t = source_.get(g_, name, DType::kF32, shape, init);
  if (!t) {
    status_ = t.status();
    return Tensor{};
  }
  return *t;
}

namespace {

DType float_dtype(WeightDType dtype) {
  return dtype == WeightDType::kBF16 ? DType::kBF16 : dtype == WeightDType::kF16 ? DType::kF16 : DType::kF32;
}

bool is_float(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

// "model.layers.0.self_attn.q_proj" of "model.layers.0.self_attn.q_proj.weight".
std::string module_of(const std::string& weight) {
  const std::string suffix = ".weight";
  return weight.size() > suffix.size() && weight.compare(weight.size() - suffix.size(), suffix.size(), suffix) == 0
             ? weight.substr(0, weight.size() - suffix.size())
             : weight;
}

const uint32_t* words(const std::shared_ptr<const void>& p) { return static_cast<const uint32_t*>(p.get()); }

// AWQ's GEMM packing puts output column 8c + (0, 2, 4, 6, 1, 3, 5, 7)[t] of word c in bits 4t:
// column 8c + j sits at nibble kAwqNibble[j].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// A checkpoint's AWQ or GPTQ tensors of one Linear layer [out, in] in the 4-bit kernels' layout
// (docs/kernels_matmul.md, "How published layouts map onto it").
Expected<nn::Int4Weights> repack_int4(WeightSource& source, const std::string& module, const CheckpointQuantization& q,
                                      int64_t out, int64_t in) {
  const bool awq = q.method == CheckpointQuantization::Method::kAwq;
  const int64_t group = q.group_size == -1 ? in : q.group_size;
  const std::string where = source.describe() + ": " + module;
  if (out % 8 != 0 || in % 8 != 0 || group < 32 || in % group != 0 || (group & (group - 1)) != 0 || in > 65536)
    return Status::unimplemented(where + ": a 4-bit layer [" + std::to_string(out) + ", " + std::to_string(in) +
                                 "] with group " + std::to_string(group) +
                                 " (the 4-bit kernels need out and in multiples of 8, in <= 65536 and a group of a "
                                 "power of two >= 32 dividing in)");
  const int64_t groups = in / group;
  auto qweight =
      source.read(module + ".qweight", DType::kI32, awq ? Shape{in, out / 8} : Shape{in / 8, out}, WeightInit::kZero);
  if (!qweight) return qweight.status();
  auto qzeros = source.read(module + ".qzeros", DType::kI32, {groups, out / 8}, WeightInit::kZero);
  if (!qzeros) return qzeros.status();
  auto scales_dtype = source.stored(module + ".scales");
  if (!scales_dtype) return scales_dtype.status();
  const DType scale_dtype = scales_dtype->first == DType::kF16 ? DType::kF16 : DType::kF32;
  auto scales = source.read(module + ".scales", scale_dtype, {groups, out}, WeightInit::kZero);
  if (!scales) return scales.status();
  if (!awq) {
    auto g_idx = source.read(module + ".g_idx", DType::kI32, {in}, WeightInit::kZero);
    if (g_idx) {
      const auto* idx = static_cast<const int32_t*>(g_idx->get());
      for (int64_t k = 0; k < in; ++k)
        if (idx[k] != k / group)
          return Status::unimplemented(where + ".g_idx: g_idx[" + std::to_string(k) + "] = " + std::to_string(idx[k]) +
                                       ", not k / group_size = " + std::to_string(k / group) +
                                       ": permuted groups (act-order) are not implemented");
    } else if (g_idx.status().code() != StatusCode::kNotFound) {
      return g_idx.status();
    }
  }
  nn::Int4Weights w;
  w.out = out;
  w.in = in;
  w.group = group;
  w.scale_dtype = scale_dtype;
  w.packed.assign(static_cast<size_t>(out * in / 2), 0);
  w.zero.assign(static_cast<size_t>(groups * out), 0);
  const uint32_t* qw = words(*qweight);
  const uint32_t* qz = words(*qzeros);
  for (int64_t n = 0; n < out; ++n) {
    uint8_t* row = w.packed.data() + n * in / 2;
    if (awq) {
      const int shift = 4 * kAwqNibble[n % 8];
      for (int64_t k = 0; k < in; ++k) {
        const uint32_t v = (qw[k * (out / 8) + n / 8] >> shift) & 15u;
        row[k / 2] |= static_cast<uint8_t>(v << (4 * (k % 2)));
      }
    } else {
      // GPTQ: word i of column n holds k = 8i + t in bits 4t, the byte order of our row.
      for (int64_t i = 0; i < in / 8; ++i) {
        const uint32_t v = qw[i * out + n];
        for (int b = 0; b < 4; ++b) row[4 * i + b] = static_cast<uint8_t>(v >> (8 * b));
      }
    }
    for (int64_t g = 0; g < groups; ++g) {
      const int shift = 4 * (awq ? kAwqNibble[n % 8] : static_cast<int>(n % 8));
      int z = static_cast<int>((qz[g * (out / 8) + n / 8] >> shift) & 15u);
      if (!awq && q.gptq_v1_zeros) z += 1;  // GPTQ's original format stores zero - 1
      w.zero[static_cast<size_t>(g * out + n)] = static_cast<int8_t>(z);
    }
  }
  const size_t scale_bytes = static_cast<size_t>(groups * out) * dtype_size(scale_dtype);
  const auto* s = static_cast<const uint8_t*>(scales->get());
  w.scale.assign(s, s + scale_bytes);
  return w;
}

// The tiled layout when the rows make whole tiles (out % 16 == 0): the same products, read as one
// stream per core (docs/kernels_matmul.md, "Tiled layout").
Expected<WeightSource::Derived> tiled_if_possible(nn::Int4Weights w, const std::string& name) {
  if (w.out % 16 == 0) {
    auto t = nn::tile_int4(w);
    if (!t) return t.status().with_context("weight '" + name + "'");
    w = std::move(*t);
  }
  return std::shared_ptr<const void>(std::make_shared<nn::Int4Weights>(std::move(w)));
}

}  // namespace

Expected<nn::Linear> ModelWeights::int4_linear(const std::string& name, const Shape& shape) {
  if (shape.size() != 2)
    return Status::unimplemented("weight '" + name + "': 4-bit weights (model.dtype " +
                                 std::string(weight_dtype_name(dtype_)) +
                                 ") are implemented for Linear layers [out, in], not stacked experts " +
                                 shape_to_string(shape) + " (grouped_matmul has no 4-bit kernel)");
  const int64_t out = shape[0], in = shape[1];
  const std::string module = module_of(name);
  const bool from_checkpoint = packed_ != nullptr && packed_->present();
  if (from_checkpoint && !source_.stored(module + ".qweight")) {
    // A layer the checkpoint keeps in float (the LM head): its stored dtype, as published.
    auto stored = source_.stored(name);
    if (!stored) return stored.status();
    if (!is_float(stored->first))
      return Status::invalid_argument(source_.describe() + ": tensor '" + name + "' is " + dtype_name(stored->first) +
                                      ", expected a float dtype or packed 4-bit weights");
    Expected<Tensor> t = source_.get(g_, name, stored->first, shape, WeightInit::kLinear);
    if (!t) return t.status();
    return nn::Linear{*t, Tensor{}};
  }
  const int64_t group = options_.int4_group;
  const bool symmetric = options_.int4_symmetric;
  const std::string key = from_checkpoint ? "int4 packed " + module
                                          : "int4 g" + std::to_string(group) + (symmetric ? " sym " : " asym ") + name;
  auto made = source_.derived(key, [&]() -> Expected<WeightSource::Derived> {
    if (from_checkpoint) {
      auto w = repack_int4(source_, module, *packed_, out, in);
      if (!w) return w.status();
      return tiled_if_possible(std::move(*w), name);
    }
    if (in % group != 0)
      return Status::invalid_argument("weight '" + name + "' " + shape_to_string(shape) +
                                      ": its input size is not a multiple of the 4-bit group " + std::to_string(group) +
                                      " (build option int4_group, model.int4_group)");
    // Quantised from the stored dtype itself, so nothing is rounded twice.
    auto stored = source_.stored(name);
    const DType dtype = stored && is_float(stored->first) ? stored->first : DType::kF32;
    auto values = source_.read(name, dtype, shape, WeightInit::kLinear);
    if (!values) return values.status();
    nn::Int4Options o;
    o.group = group;
    o.zero_points = !symmetric;
    auto w = nn::quantize_int4(values->get(), dtype, out, in, o);
    if (!w) return w.status().with_context("weight '" + name + "'");
    return tiled_if_possible(std::move(*w), name);
  });
  if (!made) return made.status();
  auto w = std::static_pointer_cast<const nn::Int4Weights>(*made);
  nn::Linear l;
  l.int4 = true;
  l.f32_activations = dtype_ == WeightDType::kW4;
  l.weight = g_.constant_external(module + ".qweight", DType::kI8, nn::int4_weight_shape(*w), w->packed.data(),
                                  w->packed.size(), w);
  l.scale = g_.constant_external(module + ".scales", w->scale_dtype, nn::int4_group_shape(*w), w->scale.data(),
                                 w->scale.size(), w);
  if (!w->zero.empty())
    l.zero = g_.constant_external(module + ".qzeros", DType::kI8, nn::int4_group_shape(*w), w->zero.data(),
                                  w->zero.size(), w);
  return l;
}

nn::Linear ModelWeights::linear(const std::string& name, const Shape& shape) {
  if (!status_) return {};
  if (is_int4(dtype_)) {
    Expected<nn::Linear> l = int4_linear(name, shape);
    if (!l) {
      status_ = l.status();
      return {};
    }
    return *l;
  }
  if (dtype_ == WeightDType::kW8A8) {
    Expected<QuantizedWeight> q = source_.get_w8a8(g_, name, shape);
    if (!q) {
      status_ = q.status();
      return {};
    }
    return {q->weight, q->scale};
  }
  Expected<Tensor> t = source_.get(g_, name, float_dtype(dtype_), shape, WeightInit::kLinear);
  if (!t) {
    status_ = t.status();
    return {};
  }
  return {*t, Tensor{}};
}

BiasedLinear ModelWeights::linear(const std::string& module, const Shape& shape, bool bias) {
  BiasedLinear out{linear(module + ".weight", shape), Tensor{}};
  if (bias && !shape.empty()) out.bias = f32(module + ".bias", {shape.front()}, WeightInit::kBias);
  return out;
}

Tensor linear(Graph& g, Tensor x, const BiasedLinear& layer, const std::string& name) {
  return layer.bias.valid() ? nn::linear(g, x, layer.weight, layer.bias, name) : nn::linear(g, x, layer.weight, name);
}

const void* constant_bytes(const TensorInfo& info) {
  return info.external_data != nullptr ? info.external_data : info.data.data();
}

Tensor ModelWeights::f32_shard(const std::string& name, const Shape& shape, const Shard& shard, WeightInit init) {
  if (!status_) return Tensor{};
  Expected<Tensor> t = source_.get_shard(g_, name, DType::kF32, shape, shard, init);
  if (!t) {
    status_ = t.status();
    return Tensor{};
  }
  return *t;
}

nn::Linear ModelWeights::linear_shard(const std::string& name, const Shape& shape, const Shard& shard) {
  if (!status_) return {};
  if (is_int4(dtype_)) {
    status_ = Status::unimplemented("weight '" + name + "': weight dtype " + std::string(weight_dtype_name(dtype_)) +
                                    " has no tensor-parallel shards (shards take f32, bf16, f16 and w8a8 weights)");
    return {};
  }
  if (dtype_ == WeightDType::kW8A8) {
    Expected<QuantizedWeight> q = source_.get_w8a8_shard(g_, name, shape, shard);
    if (!q) {
      status_ = q.status();
      return {};
    }
    return {q->weight, q->scale};
  }
  Expected<Tensor> t = source_.get_shard(g_, name, float_dtype(dtype_), shape, shard, WeightInit::kLinear);
  if (!t) {
    status_ = t.status();
    return {};
  }
  return {*t, Tensor{}};
}

nn::Linear ModelWeights::experts(const std::string& packed, const Shape& shape,
                                 const std::function<std::vector<std::string>(int64_t)>& per_expert, int64_t first,
                                 int64_t count) {
  if (!status_) return {};
  if (is_int4(dtype_)) {
    status_ = Status::unimplemented("expert weights '" + packed + "': weight dtype " +
                                    std::string(weight_dtype_name(dtype_)) +
                                    " has no grouped matmul (grouped_matmul takes f32, bf16, f16 and w8a8 experts)");
    return {};
  }
  if (count < 0) count = shape[0] - first;
  const bool all = first == 0 && count == shape[0];
  const Shard mine{0, first, first + count};
  Expected<nn::Linear> packed_weights = [&]() -> Expected<nn::Linear> {
    if (dtype_ == WeightDType::kW8A8) {
      Expected<QuantizedWeight> q =
          all ? source_.get_w8a8(g_, packed, shape) : source_.get_w8a8_shard(g_, packed, shape, mine);
      if (!q) return q.status();
      return nn::Linear{q->weight, q->scale};
    }
    const DType dtype = float_dtype(dtype_);
    Expected<Tensor> t = all ? source_.get(g_, packed, dtype, shape, WeightInit::kLinear)
                             : source_.get_shard(g_, packed, dtype, shape, mine, WeightInit::kLinear);
    if (!t) return t.status();
    return nn::Linear{*t, Tensor{}};
  }();
  if (packed_weights) return *packed_weights;
  if (packed_weights.status().code() != StatusCode::kNotFound) {
    status_ = packed_weights.status();
    return {};
  }
  nn::Linear stacked = stack_experts(packed, shape, per_expert, first, count);
  if (!status_) status_ = status_.with_context("expert weights: no packed '" + packed + "' and per-expert");
  return stacked;
}

nn::Linear ModelWeights::stack_experts(const std::string& packed, const Shape& shape,
                                       const std::function<std::vector<std::string>(int64_t)>& per_expert,
                                       int64_t first, int64_t count) {
  const int64_t experts = count, out = shape[1], in = shape[2];
  const bool quantised = dtype_ == WeightDType::kW8A8;
  const DType dtype = quantised ? DType::kI8 : float_dtype(dtype_);
  const size_t row_bytes = static_cast<size_t>(in) * dtype_size(dtype);
  struct Stacked {
    std::vector<uint8_t> weight;  // [experts, out, in] of dtype
    std::vector<float> scale;     // w8a8: [experts, out]
  };
  // Stacked once per source: every graph built from it (prefill, decode graphs of each row count)
  // binds the same bytes, so a served MoE model holds its experts once, not once per graph.
  const std::string key =
      "stacked experts " + packed + " " + dtype_name(dtype) + " " + std::to_string(first) + "+" + std::to_string(count);
  Expected<WeightSource::Derived> made = source_.derived(key, [&]() -> Expected<WeightSource::Derived> {
    auto stacked = std::make_shared<Stacked>();
    stacked->weight.resize(static_cast<size_t>(experts * out) * row_bytes);
    stacked->scale.resize(quantised ? static_cast<size_t>(experts * out) : 0);
    for (int64_t e = 0; e < experts; ++e) {
      const std::vector<std::string> names = per_expert(first + e);
      const int64_t rows = out / static_cast<int64_t>(names.size());
      for (size_t part = 0; part < names.size(); ++part) {
        const size_t first_row = static_cast<size_t>(e * out + static_cast<int64_t>(part) * rows);
        nn::Linear w = linear(names[part], {rows, in});
        if (!status_) return status_;
        std::memcpy(stacked->weight.data() + first_row * row_bytes, constant_bytes(g_.tensor(w.weight)),
                    rows * row_bytes);
        if (quantised)
          std::memcpy(stacked->scale.data() + first_row, constant_bytes(g_.tensor(w.scale)), rows * sizeof(float));
      }
    }
    return WeightSource::Derived(stacked);
  });
  if (!made) {
    if (status_) status_ = made.status();
    return {};
  }
  auto stacked = std::static_pointer_cast<const Stacked>(*made);
  nn::Linear out_linear;
  out_linear.weight =
      g_.constant_external(packed, dtype, {experts, out, in}, stacked->weight.data(), stacked->weight.size(), stacked);
  if (quantised)
    out_linear.scale = g_.constant_external(packed + ".scale", DType::kF32, {experts, out}, stacked->scale.data(),
                                            stacked->scale.size() * sizeof(float), stacked);
  return out_linear;
}

std::string scope_options(const BuildOptions& options, std::string_view scope) {
  return options.scope_options ? options.scope_options(scope) : std::string();
}

std::string stream_fused_scope_options(const BuildOptions& options, std::string_view scope) {
  std::string text = scope_options(options, scope);
  if (options.multi_streams == 0 || text.find("stream-fusion") != std::string::npos) return text;
  return text + (text.empty() ? "" : ":") + "stream-fusion=1";
}

std::string layer_scope(int64_t layer, std::string_view part) {
  return "scope_" + std::to_string(layer) + "_" + std::string(part);
}

Tensor filled_f32(Graph& g, std::string name, int64_t n, float value) {
  const std::vector<float> values(static_cast<size_t>(n), value);
  return g.constant_f32(std::move(name), {n}, values);
}

int64_t max_blocks_per_sequence(const BuildOptions& options) {
  return options.block_size > 0 ? (options.max_context + options.block_size - 1) / options.block_size : 0;
}

int64_t cache_blocks(const BuildOptions& options) {
  return (options.cache_sequences > 0 ? options.cache_sequences : options.batch) * max_blocks_per_sequence(options);
}

Expected<Tensor> rope_table(Graph& g, const nn::RopeScaling& rope, int64_t rotary_dim, const BuildOptions& options,
                            Phase phase) {
  int64_t rows = options.max_context;
  const int64_t m = rope.original_max_position_embeddings;
  if (rope.type == nn::RopeScaling::Type::kDynamic && options.max_context > m) {
    const std::string what = "rope_type 'dynamic' with max_context " + std::to_string(options.max_context) +
                             " > max_position_embeddings " + std::to_string(m) + ": ";
    if (options.batch > 1)
      return Status::unimplemented(
          what +
          "transformers rotates every sequence of a batch with the frequencies of the longest one, which "
          "a per-position table cannot express; build with batch 1 or max_context <= max_position_embeddings");
    if (phase == Phase::kPrefill) {
      if (options.prefill_tokens > m)
        return Status::unimplemented(
            what + "a prefill of " + std::to_string(options.prefill_tokens) +
            " tokens would rotate its tokens with the frequencies of its full length, which a per-position table "
            "cannot express; prefill at most max_position_embeddings tokens and decode the rest");
      rows = m;
    }
  }
  return nn::rope_cos_sin_table(g, "rope_cos_sin", rows, rotary_dim, rope);
}

Status refuse_longcat_only_options(const BuildOptions& options) {
  if (options.prefetch)
    return Status::unimplemented(
        "build option 'prefetch': only the LongCat-Flash AFD variant prefetches weights; build with prefetch off");
  if (options.parallel.tp > 1 || options.parallel.ep > 1)
    return Status::unimplemented("build option 'parallel': only LongCat-Flash runs across processes");
  return Status::ok();
}

Expected<Graph> finish(Graph g, const ModelWeights& weights) {
  if (!weights.status()) return weights.status().with_context("graph '" + g.name() + "'");
  if (Status s = g.verify(); !s) return s;
  return g;
}

}  // namespace sk::models
