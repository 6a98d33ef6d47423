// What every model builder shares: the step inputs, the weight fetcher that keeps the first
// error, scopes named from the build options, and small constants.
#ifndef SUPERKERNEL_MODELS_MODEL_UTIL_H_
#define SUPERKERNEL_MODELS_MODEL_UTIL_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "superkernel/graph.h"
#include "superkernel/models.h"
#include "superkernel/nn.h"
#include "superkernel/weights.h"

namespace sk::models {

// The i32 inputs of a decode or prefill graph (models.h lists them).
struct StepTensors {
  Phase phase = Phase::kDecode;
  int64_t tokens = 0;  // T
  Tensor input_ids, positions, slot_mapping, block_tables;
  Tensor context_lens;  // decode
  Tensor seq_ids;       // prefill
  Tensor logit_rows;    // prefill with PrefillLogits::kLastToken: [B] rows of the last tokens
};
// The rows of x [T, hidden] the LM head runs on: x itself, or its rows `logit_rows` (prefill with
// PrefillLogits::kLastToken).
Tensor lm_head_rows(Graph& g, const StepTensors& in, Tensor x);
StepTensors make_step_inputs(Graph& g, const BuildOptions& options, Phase phase);

// A Linear layer and its optional bias (invalid when the config turns biases off).
struct BiasedLinear {
  nn::Linear weight;
  Tensor bias;
};
// x [..., in] -> [..., out], plus the bias when there is one.
Tensor linear(Graph& g, Tensor x, const BiasedLinear& layer, const std::string& name);

// Fetches weights by published name in the dtype the build options ask for. The first failure
// is kept (status()) and later calls return invalid handles, so model code reads straight
// through; builders check status() before returning the graph.
// The bytes of a constant (graph-owned or external).
const void* constant_bytes(const TensorInfo& info);

class ModelWeights {
 public:
  // `packed`: the checkpoint's 4-bit layout (Llama's quantization_config), or null.
  ModelWeights(Graph& g, WeightSource& source, const BuildOptions& options,
               const CheckpointQuantization* packed = nullptr)
      : g_(g), source_(source), dtype_(options.weight_dtype), options_(options), packed_(packed) {}

  Tensor f32(const std::string& name, const Shape& shape, WeightInit init);
  Tensor norm(const std::string& name, int64_t dim) { return f32(name, {dim}, WeightInit::kNorm); }
  // A Linear weight [out, in] (or stacked experts [E, out, in]) in the build's weight dtype. 4-bit
  // builds read a checkpoint's packed `module.qweight`/`qzeros`/`scales` when it has them (layers
  // the checkpoint keeps in float, such as the LM head, stay in their stored float dtype), and
  // otherwise quantise the float weight at load (nn::quantize_int4, once per source).
  nn::Linear linear(const std::string& name, const Shape& shape);
  // A Linear layer `module` (weight `module.weight` [out, in]) with the f32 bias
  // `module.bias` [out] when `bias` (the config's attention_bias, mlp_bias, ...).
  BiasedLinear linear(const std::string& module, const Shape& shape, bool bias);
  // Stacked expert weights [E, out, in] in the build's weight dtype: the packed tensor `packed`
  // when the source has it; otherwise, for each expert e, the tensors `per_expert(e)` (each
  // [out / parts, in]) stacked along `out` and copied once into one constant of this graph.
  // Under w8a8 either layout is quantised per expert output row (scales [E, out]). With
  // `count` >= 0 only experts [first, first + count) (expert parallelism: this rank's experts).
  nn::Linear experts(const std::string& packed, const Shape& shape,
                     const std::function<std::vector<std::string>(int64_t)>& per_expert, int64_t first = 0,
                     int64_t count = -1);
  // Tensor parallelism: the part `shard` of a weight whose whole shape is `shape`
  // (WeightSource::get_shard), as f32 or as a Linear in the build's weight dtype.
  Tensor f32_shard(const std::string& name, const Shape& shape, const Shard& shard, WeightInit init);
  nn::Linear linear_shard(const std::string& name, const Shape& shape, const Shard& shard);
  const Status& status() const { return status_; }

 private:
  nn::Linear stack_experts(const std::string& packed, const Shape& shape,
                           const std::function<std::vector<std::string>(int64_t)>& per_expert, int64_t first,
                           int64_t count);
  Expected<nn::Linear> int4_linear(const std::string& name, const Shape& shape);
  Graph& g_;
  WeightSource& source_;
  WeightDType dtype_;
  const BuildOptions& options_;
  const CheckpointQuantization* packed_;
  Status status_;
};

// The options string of a scope (empty without a callback).
std::string scope_options(const BuildOptions& options, std::string_view scope);
// The options of a scope whose ops share a super kernel with another stream's: scope_options,
// plus stream-fusion=1 when multi_streams is on and the options do not set stream-fusion.
std::string stream_fused_scope_options(const BuildOptions& options, std::string_view scope);
// "scope_{layer}_{part}".
std::string layer_scope(int64_t layer, std::string_view part);
// "model.layers.{layer}.", the published module path of a decoder layer.
std::string layer_prefix(int64_t layer);

// scope_embed: `model.embed_tokens.weight` [vocab, hidden] (`table`) looked up at input_ids.
Tensor embed_tokens(Graph& g, ModelWeights& w, const BuildOptions& options, const StepTensors& in, const Shape& table);
// scope_lm_head: the rows the head runs on (lm_head_rows), the final RMS norm `model.norm`, and
// the LM head (`lm_head.weight`, or the embedding when `tied`) as the output kLogits.
void lm_head(Graph& g, ModelWeights& w, const BuildOptions& options, const StepTensors& in, Tensor x,
             const Shape& table, float eps, bool tied);

// A constant [n] filled with `value` (broadcast multiplier).
Tensor filled_f32(Graph& g, std::string name, int64_t n, float value);

// Blocks per sequence of the paged caches.
int64_t max_blocks_per_sequence(const BuildOptions& options);
// Blocks of each paged cache: max_blocks_per_sequence for every sequence the caches hold
// (BuildOptions::cache_sequences, or batch).
int64_t cache_blocks(const BuildOptions& options);

// The RoPE cos/sin table of a graph, rows 0 .. max_context - 1 (nn::rope_cos_sin_table). Dynamic
// NTK scaling past max_position_embeddings (M) matches what transformers computes in cached
// decode only for one sequence whose prefill stays below M (each decoded token at position p is
// rotated with the frequencies of length p + 1; a longer prefill rotates all its tokens with
// those of its full length, and a batch with those of its longest sequence): a batch, or a
// prefill graph of more than M tokens, is refused, and the prefill graph's table stops at row M
// so that a later prefill reaching past M fails (rope.f32: position out of range).
Expected<Tensor> rope_table(Graph& g, const nn::RopeScaling& rope, int64_t rotary_dim, const BuildOptions& options,
                            Phase phase);

// The decoder around its layers, as every builder has it: scope_embed, then
// `decoder_layer(x, i)` for layers 0 .. layers - 1 while the weights are found, then scope_lm_head
// (the output kLogits). Errors stay in `w` (finish() returns them).
template <typename DecoderLayer>
void decoder_stack(Graph& g, ModelWeights& w, const BuildOptions& options, const StepTensors& in, const Shape& table,
                   int64_t layers, float eps, bool tied, DecoderLayer decoder_layer) {
  Tensor x = embed_tokens(g, w, options, in, table);
  for (int64_t i = 0; i < layers && w.status(); ++i) x = decoder_layer(x, i);
  if (w.status()) lm_head(g, w, options, in, x, table, eps, tied);
}

// The build options only LongCat-Flash implements (prefetch, parallel), refused for the other
// builders naming the option.
Status refuse_longcat_only_options(const BuildOptions& options);

// The graph if it verifies and the weights were all found, else the first error.
Expected<Graph> finish(Graph g, const ModelWeights& weights);

}  // namespace sk::models

#endif  // SUPERKERNEL_MODELS_MODEL_UTIL_H_
