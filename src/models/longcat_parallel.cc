#include "models/longcat_parallel.h"

#include <algorithm>

#include "superkernel/ops.h"

namespace sk::models {

LongCatParallel::LongCatParallel(const LongCatFlashConfig& config, const BuildOptions& options, Graph& g,
                                 ModelWeights& weights)
    : cfg_(config),
      g_(g),
      w_(weights),
      tp_(options.parallel.tp),
      ep_(options.parallel.ep),
      rank_(options.parallel.ranks.rank),
      group_(options.parallel.ranks) {}

Status LongCatParallel::validate() const {
  auto not_divisible = [](const char* what, const char* key, int64_t value, const char* option, int32_t parts) {
    return Status::invalid_argument(std::string("build option '") + option + "' = " + std::to_string(parts) + ": " +
                                    what + " (config key '" + key + "' = " + std::to_string(value) +
                                    ") do not divide between " + std::to_string(parts) + " ranks");
  };
  if (cfg_.num_attention_heads % tp_ != 0)
    return not_divisible("the attention heads", "num_attention_heads", cfg_.num_attention_heads, "parallel.tp", tp_);
  if (cfg_.ffn_hidden_size % tp_ != 0)
    return not_divisible("the dense MLPs' hidden units", "ffn_hidden_size", cfg_.ffn_hidden_size, "parallel.tp", tp_);
  if (cfg_.n_routed_experts % ep_ != 0)
    return not_divisible("the routed experts", "n_routed_experts", cfg_.n_routed_experts, "parallel.ep", ep_);
  return Status::ok();
}

Shard LongCatParallel::unit_shard(const Shape& shape, int dim, int64_t units) const {
  const int64_t per_unit = shape[static_cast<size_t>(dim)] / units;
  const int64_t first = units / tp_ * rank_;
  return Shard{dim, first * per_unit, (first + units / tp_) * per_unit};
}

nn::Linear LongCatParallel::rows(const std::string& name, const Shape& shape, int64_t units) {
  if (tp_ == 1) return w_.linear(name, shape);
  return w_.linear_shard(name, shape, unit_shard(shape, 0, units));
}

Tensor LongCatParallel::f32_rows(const std::string& name, const Shape& shape, int64_t units) {
  if (tp_ == 1) return w_.f32(name, shape, WeightInit::kLinear);
  return w_.f32_shard(name, shape, unit_shard(shape, 0, units), WeightInit::kLinear);
}

nn::Linear LongCatParallel::experts(const std::string& packed, const Shape& shape,
                                    const std::function<std::vector<std::string>(int64_t)>& per_expert) {
  if (ep_ == 1) return w_.experts(packed, shape, per_expert);
  const int64_t local = shape[0] / ep_;
  return w_.experts(packed, shape, per_expert, local * rank_, local);
}

Tensor LongCatParallel::row_parallel(Tensor x, const std::string& module, const Shape& shape, int64_t units,
                                     bool bias) {
  if (tp_ == 1) return linear(g_, x, w_.linear(module, shape, bias), module);
  Tensor partial = nn::linear(g_, x, w_.linear_shard(module + ".weight", shape, unit_shard(shape, 1, units)), module);
  Tensor sum = comm::all_reduce(g_, group_, partial, module + ".all_reduce");
  if (!bias) return sum;
  return add(g_, sum, w_.f32(module + ".bias", {shape.front()}, WeightInit::kBias), module + ".bias");
}

Tensor LongCatParallel::local_tokens(Tensor x, int64_t tokens, const std::string& prefix) {
  const int64_t slice = (tokens + ep_ - 1) / ep_;
  if (slice * ep_ == tokens) return g_.slice(x, 0, slice * rank_, slice * (rank_ + 1), prefix + "local_tokens");
  // The token count does not divide: every rank takes ceil(T/ep) rows, the slices past the last
  // token padded with copies of it (routed like any token; gather_tokens drops their results).
  std::vector<int32_t> rows(static_cast<size_t>(slice));
  for (int64_t i = 0; i < slice; ++i)
    rows[static_cast<size_t>(i)] = static_cast<int32_t>(std::min(slice * rank_ + i, tokens - 1));
  Tensor ids =
      g_.constant(prefix + "local_token_rows", DType::kI32, {slice}, rows.data(), rows.size() * sizeof(int32_t));
  return embedding(g_, ids, x, prefix + "local_tokens");
}

Tensor LongCatParallel::dispatch_combine(const nn::DispatchOutput& sorted,
                                         const std::function<Tensor(Tensor, Tensor)>& ffn, const std::string& prefix) {
  const int64_t local_experts = cfg_.n_routed_experts / ep_;
  const int64_t rows = g_.tensor(sorted.x_sorted).shape[0];  // this rank's (token, slot) rows
  // Experts are numbered rank by rank, so rows grouped by expert are grouped by destination rank,
  // and the per-expert counts are the send counts of (rank, local expert) blocks.
  comm::AllToAllV in =
      comm::all_to_all_v(g_, group_, sorted.x_sorted, sorted.counts, rows * ep_, static_cast<int32_t>(local_experts),
                         SK_COMM_RANK_MAJOR, SK_COMM_GROUP_MAJOR, prefix + "dispatch.all_to_all");
  Tensor y = ffn(in.y, in.group_counts);
  // Back to the ranks the rows came from, in the order they were sent.
  comm::AllToAllV back = comm::all_to_all_v(g_, group_, y, in.recv_counts, rows, static_cast<int32_t>(local_experts),
                                            SK_COMM_GROUP_MAJOR, SK_COMM_RANK_MAJOR, prefix + "combine.all_to_all");
  return back.y;
}

Tensor LongCatParallel::gather_tokens(Tensor local, int64_t tokens, const std::string& prefix) {
  Tensor all = comm::all_gather(g_, group_, local, prefix + "all_gather");
  if (!all.valid() || g_.tensor(all).shape[0] == tokens) return all;
  return g_.slice(all, 0, 0, tokens, prefix + "tokens");
}

}  // namespace sk::models
