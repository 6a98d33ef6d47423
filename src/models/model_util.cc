#include "models/model_util.h"

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

std::string scope_options(const BuildOptions& options, std::string_view scope) {
  return options.scope_options ? options.scope_options(scope) : std::string();
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

Expected<Graph> finish(Graph g, const ModelWeights& weights) {
  if (!weights.status()) return weights.status().with_context("graph '" + g.name() + "'");
  if (Status s = g.verify(); !s) return s;
  return g;
}

}  // namespace sk::models
