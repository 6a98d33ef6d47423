#include "models/model_util.h"

#include <cstring>
#include <memory>
#include <vector>

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
  }
  return in;
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

nn::Linear ModelWeights::linear(const std::string& name, const Shape& shape) {
  if (!status_) return {};
  if (dtype_ == WeightDType::kW8A8) {
    Expected<QuantizedWeight> q = source_.get_w8a8(g_, name, shape);
    if (!q) {
      status_ = q.status();
      return {};
    }
    return {q->weight, q->scale};
  }
  const DType dtype = dtype_ == WeightDType::kBF16 ? DType::kBF16 : DType::kF32;
  Expected<Tensor> t = source_.get(g_, name, dtype, shape, WeightInit::kLinear);
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
  if (dtype_ == WeightDType::kW8A8) {
    Expected<QuantizedWeight> q = source_.get_w8a8_shard(g_, name, shape, shard);
    if (!q) {
      status_ = q.status();
      return {};
    }
    return {q->weight, q->scale};
  }
  const DType dtype = dtype_ == WeightDType::kBF16 ? DType::kBF16 : DType::kF32;
  Expected<Tensor> t = source_.get_shard(g_, name, dtype, shape, shard, WeightInit::kLinear);
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
    const DType dtype = dtype_ == WeightDType::kBF16 ? DType::kBF16 : DType::kF32;
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
  const DType dtype = quantised ? DType::kI8 : dtype_ == WeightDType::kBF16 ? DType::kBF16 : DType::kF32;
  const size_t row_bytes = static_cast<size_t>(in) * dtype_size(dtype);
  auto weight = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(experts * out) * row_bytes);
  auto scale = std::make_shared<std::vector<float>>(quantised ? static_cast<size_t>(experts * out) : 0);
  for (int64_t e = 0; e < experts; ++e) {
    const std::vector<std::string> names = per_expert(first + e);
    const int64_t rows = out / static_cast<int64_t>(names.size());
    for (size_t part = 0; part < names.size(); ++part) {
      const size_t first_row = static_cast<size_t>(e * out + static_cast<int64_t>(part) * rows);
      nn::Linear w = linear(names[part], {rows, in});
      if (!status_) return {};
      std::memcpy(weight->data() + first_row * row_bytes, constant_bytes(g_.tensor(w.weight)), rows * row_bytes);
      if (quantised) std::memcpy(scale->data() + first_row, constant_bytes(g_.tensor(w.scale)), rows * sizeof(float));
    }
  }
  nn::Linear stacked;
  const Shape stacked_shape{experts, out, in};
  stacked.weight = g_.constant_external(packed, dtype, stacked_shape, weight->data(), weight->size(), weight);
  if (quantised)
    stacked.scale = g_.constant_external(packed + ".scale", DType::kF32, {experts, out}, scale->data(),
                                         scale->size() * sizeof(float), scale);
  return stacked;
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

Expected<Graph> finish(Graph g, const ModelWeights& weights) {
  if (!weights.status()) return weights.status().with_context("graph '" + g.name() + "'");
  if (Status s = g.verify(); !s) return s;
  return g;
}

}  // namespace sk::models
