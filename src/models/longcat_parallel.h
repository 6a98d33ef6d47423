// One rank's share of LongCat-Flash across processes (BuildOptions::parallel): which heads,
// hidden units and experts it holds, its shard of each split weight, and the collectives where
// the ranks' partial results meet. longcat_flash.cc builds the same layer with it; with tp = ep =
// 1 every call here is the identity (the whole weight, no collective).
//
// Tensor parallelism (tp ranks): MLA splits its heads (q_b_proj and kv_b_proj by rows, o_proj
// by columns), the dense MLPs their hidden units (gate/up by rows, down by columns); each rank's
// o_proj / down_proj output is a partial sum that an all-reduce completes, so the residual
// stream stays whole and identical on every rank. The latent KV cache (shared by all heads) is
// replicated. Expert parallelism (ep ranks): rank r holds routed experts [r E/ep, (r+1) E/ep) and
// routes its slice of the tokens (ceil(T/ep) rows, the last token repeated as padding): dispatch
// sends each (token, slot) row to the rank of its expert (all-to-all-v, arriving grouped by local
// expert), the experts run, a second all-to-all-v brings the rows back in dispatch order,
// moe_combine adds them (and the zero experts' weight * x, computed locally), and an all-gather
// rebuilds the MoE output of every token on every rank.
#ifndef SUPERKERNEL_MODELS_LONGCAT_PARALLEL_H_
#define SUPERKERNEL_MODELS_LONGCAT_PARALLEL_H_

#include <functional>
#include <string>

#include "models/model_util.h"
#include "superkernel/comm.h"
#include "superkernel/models.h"

namespace sk::models {

class LongCatParallel {
 public:
  LongCatParallel(const LongCatFlashConfig& config, const BuildOptions& options, Graph& g, ModelWeights& weights);
  // Heads, hidden units and experts must divide by tp and ep.
  Status validate() const;

  bool expert_parallel() const { return ep_ > 1; }
  int64_t heads() const { return cfg_.num_attention_heads / tp_; }
  int64_t ffn(int64_t hidden_units) const { return hidden_units / tp_; }

  // This rank's rows of a weight [units * rows_per_unit, in] split by heads or hidden units
  // (its unit range of `units`).
  nn::Linear rows(const std::string& name, const Shape& shape, int64_t units);
  Tensor f32_rows(const std::string& name, const Shape& shape, int64_t units);
  // The routed experts' stacked weights [E, out, in], only this rank's experts with ep > 1.
  nn::Linear experts(const std::string& packed, const Shape& shape,
                     const std::function<std::vector<std::string>(int64_t)>& per_expert);
  // A linear layer whose input dimension is split between the tensor-parallel ranks (o_proj,
  // down_proj): x [.., units * cols_per_unit / tp] times this rank's columns of `module.weight`
  // `shape`, the ranks' partial sums completed by an all-reduce (`module.all_reduce`), then the
  // bias `module.bias` when `bias`, added once after it. With tp = 1 the plain layer (bias fused).
  Tensor row_parallel(Tensor x, const std::string& module, const Shape& shape, int64_t units, bool bias);

  // Expert parallelism, in the order the MoE uses them:
  // the rows [T, D] -> this rank's token slice [ceil(T/ep), D] (the last token repeated past T);
  Tensor local_tokens(Tensor x, int64_t tokens, const std::string& prefix);
  // rows grouped by (global) expert -> rows back in the same order, the experts applied where
  // they live: `ffn(rows, counts)` runs this rank's experts over what arrives, grouped by local
  // expert with its per-expert counts;
  Tensor dispatch_combine(const nn::DispatchOutput& sorted, const std::function<Tensor(Tensor, Tensor)>& ffn,
                          const std::string& prefix);
  // this rank's combined tokens -> the MoE output of every token [T, D].
  Tensor gather_tokens(Tensor local, int64_t tokens, const std::string& prefix);

 private:
  Shard unit_shard(const Shape& shape, int dim, int64_t units) const;

  const LongCatFlashConfig& cfg_;
  Graph& g_;
  ModelWeights& w_;
  int32_t tp_ = 1, ep_ = 1, rank_ = 0;
  comm::Group group_;
};

}  // namespace sk::models

#endif  // SUPERKERNEL_MODELS_LONGCAT_PARALLEL_H_
