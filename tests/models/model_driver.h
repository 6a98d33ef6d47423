// Drives a model the way a user does: compile its prefill and decode graphs, share the paged
// caches between them (bind_variable), run prefill once and a few decode steps, and collect the
// logits of every real token.
#ifndef SUPERKERNEL_TESTS_MODELS_MODEL_DRIVER_H_
#define SUPERKERNEL_TESTS_MODELS_MODEL_DRIVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "superkernel/models.h"
#include "superkernel/runtime.h"

namespace sk::testing {

struct DriveResult {
  std::vector<float> logits;                // prompt tokens sequence by sequence, then each step's B rows
  std::vector<std::string> prefill_scopes;  // segment scope names of the decode executable
  std::vector<std::string> decode_scopes;
};

using PhaseBuilder = std::function<Expected<Graph>(models::Phase)>;

inline Expected<DriveResult> drive(Runtime& rt, const CompileOptions& compile, const PhaseBuilder& build,
                                   const models::BuildOptions& options, const std::vector<std::string>& caches,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const std::vector<std::vector<int32_t>>& steps, int64_t vocab) {
  auto prefill_graph = build(models::Phase::kPrefill);
  if (!prefill_graph) return prefill_graph.status();
  auto decode_graph = build(models::Phase::kDecode);
  if (!decode_graph) return decode_graph.status();
  auto prefill = rt.compile(*prefill_graph, compile);
  if (!prefill) return prefill.status();
  auto decode = rt.compile(*decode_graph, compile);
  if (!decode) return decode.status();

  models::CacheStorage storage;
  SK_RETURN_IF_ERROR(storage.bind(**prefill, caches));
  SK_RETURN_IF_ERROR(storage.bind(**decode, caches));

  DriveResult result;
  for (const SegmentReport& s : (*prefill)->report().segments) result.prefill_scopes.push_back(s.scope);
  for (const SegmentReport& s : (*decode)->report().segments) result.decode_scopes.push_back(s.scope);

  models::PagedCacheLayout layout(options);
  auto in = layout.prefill(prompts);
  if (!in) return in.status();
  SK_RETURN_IF_ERROR(models::set_step_inputs(**prefill, *in));
  SK_RETURN_IF_ERROR((*prefill)->run());
  std::vector<float> logits = (*prefill)->output_f32(models::kLogits);
  size_t real = 0;
  for (const auto& p : prompts) real += p.size();
  result.logits.assign(logits.begin(), logits.begin() + static_cast<int64_t>(real) * vocab);

  for (const std::vector<int32_t>& ids : steps) {
    auto step = layout.decode(ids);
    if (!step) return step.status();
    SK_RETURN_IF_ERROR(models::set_step_inputs(**decode, *step));
    SK_RETURN_IF_ERROR((*decode)->run());
    logits = (*decode)->output_f32(models::kLogits);
    result.logits.insert(result.logits.end(), logits.begin(), logits.end());
  }
  return result;
}

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_MODELS_MODEL_DRIVER_H_
