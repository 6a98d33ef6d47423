// The C++ model builders (include/superkernel/models.h) in the `models` submodule: the same
// LongCat-Flash and Llama graphs the CLI runs, for side-by-side comparisons with models written
// in PyTorch. Configs are dicts of published config.json keys.
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "py_support.h"
#include "superkernel/models.h"
#include "superkernel/weights.h"

namespace skpy {
namespace {

template <typename Config>
Config config_from(const nb::dict& values) {
  Config c;
  for (auto [key, value] : values) {
    const std::string k = nb::cast<std::string>(nb::str(key));
    std::string v;
    if (nb::isinstance<nb::bool_>(value))
      v = nb::cast<bool>(value) ? "true" : "false";
    else
      v = nb::cast<std::string>(nb::str(value));
    check(c.set(k, v));
  }
  check(c.validate());
  return c;
}

sk::models::BuildOptions build_options(int64_t batch, int64_t block_size, int64_t max_context, int64_t prefill_tokens,
                                       const std::string& weight_dtype, const std::string& scope_options) {
  sk::models::BuildOptions o;
  o.batch = batch;
  o.block_size = block_size;
  o.max_context = max_context;
  o.prefill_tokens = prefill_tokens;
  o.weight_dtype = unwrap(sk::models::parse_weight_dtype(weight_dtype));
  if (!scope_options.empty()) o.scope_options = [scope_options](std::string_view) { return scope_options; };
  check(o.validate());
  return o;
}

sk::models::Phase phase_of(const std::string& phase) {
  if (phase == "decode") return sk::models::Phase::kDecode;
  if (phase == "prefill") return sk::models::Phase::kPrefill;
  throw StatusError(sk::Status::invalid_argument("phase '" + phase + "': expected 'decode' or 'prefill'"));
}

}  // namespace

void bind_models(nb::module_& m) {
  using nb::arg;
  nb::module_ models = m.def_submodule("models", "The C++ model builders (include/superkernel/models.h).");
  models.def(
      "build_llama",
      [](nb::dict config, std::string phase, int64_t batch, int64_t block_size, int64_t max_context,
         int64_t prefill_tokens, std::string weight_dtype, uint64_t seed, std::string scope_options) {
        auto cfg = config_from<sk::models::LlamaConfig>(config);
        auto opts = build_options(batch, block_size, max_context, prefill_tokens, weight_dtype, scope_options);
        auto weights = sk::random_weights(seed);
        return unwrap(sk::models::build_llama(cfg, opts, phase_of(phase), *weights));
      },
      arg("config"), arg("phase") = "decode", arg("batch") = 1, arg("block_size") = 16, arg("max_context") = 256,
      arg("prefill_tokens") = 16, arg("weight_dtype") = "f32", arg("seed") = 1, arg("scope_options") = "",
      "The Llama-style decoder with random weights (seeded): inputs input_ids, positions, slot_mapping, "
      "block_tables, context_lens (decode) or seq_ids (prefill), all i32; output logits.");
  models.def(
      "build_longcat_flash",
      [](nb::dict config, std::string phase, int64_t batch, int64_t block_size, int64_t max_context,
         int64_t prefill_tokens, std::string weight_dtype, uint64_t seed, std::string scope_options) {
        auto cfg = config_from<sk::models::LongCatFlashConfig>(config);
        auto opts = build_options(batch, block_size, max_context, prefill_tokens, weight_dtype, scope_options);
        auto weights = sk::random_weights(seed);
        return unwrap(sk::models::build_longcat_flash(cfg, opts, phase_of(phase), *weights));
      },
      arg("config"), arg("phase") = "decode", arg("batch") = 1, arg("block_size") = 16, arg("max_context") = 256,
      arg("prefill_tokens") = 16, arg("weight_dtype") = "f32", arg("seed") = 1, arg("scope_options") = "",
      "The LongCat-Flash decoder with random weights (seeded), as build_llama.");
  models.def(
      "llama_cache_names",
      [](nb::dict config) { return sk::models::cache_names(config_from<sk::models::LlamaConfig>(config)); },
      arg("config"));
  models.def(
      "longcat_flash_cache_names",
      [](nb::dict config) { return sk::models::cache_names(config_from<sk::models::LongCatFlashConfig>(config)); },
      arg("config"));
}

}  // namespace skpy
