// The C++ model builders (include/superkernel/models.h) in the `models` submodule: the same
// LongCat-Flash and Llama graphs the CLI runs, for side-by-side comparisons with models written
// in PyTorch. Configs are dicts of published config.json keys.
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings.h"
#include "py_support.h"
#include "superkernel/models.h"
#include "superkernel/nn.h"
#include "superkernel/weights.h"

namespace skpy {
namespace {

template <typename Config>
Config config_from(const nb::dict& values) {
  Config c;
  if constexpr (std::is_same_v<Config, sk::models::LlamaConfig> || std::is_same_v<Config, sk::models::DeepseekConfig>) {
    // The family first (llama, mixtral, qwen2, ...): it decides which keys the others are.
    if (values.contains("model_type")) check(c.set("model_type", nb::cast<std::string>(nb::str(values["model_type"]))));
  }
  for (auto [key, value] : values) {
    const std::string k = nb::cast<std::string>(nb::str(key));
    std::string v;
    if (nb::isinstance<nb::bool_>(value)) {
      v = nb::cast<bool>(value) ? "true" : "false";
    } else if (nb::isinstance<nb::list>(value) || nb::isinstance<nb::tuple>(value)) {
      // A list as config.json writes it ([1,2], ["a","b"]): what the config reader parses.
      for (nb::handle item : value) {
        const std::string text = nb::cast<std::string>(nb::str(item));
        v += (v.empty() ? "" : ",") + (nb::isinstance<nb::str>(item) ? "\"" + text + "\"" : text);
      }
      v = "[" + v + "]";
    } else if (value.is_none()) {
      v = "null";
    } else {
      v = nb::cast<std::string>(nb::str(value));
    }
    check(c.set(k, v));
  }
  check(c.validate());
  return c;
}

sk::models::BuildOptions build_options(int64_t batch, int64_t block_size, int64_t max_context, int64_t prefill_tokens,
                                       const std::string& weight_dtype, const nb::object& scope_options,
                                       int multi_streams, int64_t moe_core_limit, const std::string& kv_cache_dtype,
                                       int64_t cache_sequences = 0, const std::string& prefill_logits = "every") {
  sk::models::BuildOptions o;
  o.cache_sequences = cache_sequences;
  if (prefill_logits != "every" && prefill_logits != "last")
    throw StatusError(sk::Status::invalid_argument("prefill_logits '" + prefill_logits + "': expected every or last"));
  o.prefill_logits =
      prefill_logits == "last" ? sk::models::PrefillLogits::kLastToken : sk::models::PrefillLogits::kEveryToken;
  o.batch = batch;
  o.block_size = block_size;
  o.max_context = max_context;
  o.prefill_tokens = prefill_tokens;
  o.weight_dtype = unwrap(sk::models::parse_weight_dtype(weight_dtype));
  o.multi_streams = multi_streams;
  o.moe_core_limit = moe_core_limit;
  if (kv_cache_dtype != "f32" && kv_cache_dtype != "bf16")
    throw StatusError(sk::Status::invalid_argument("kv_cache_dtype '" + kv_cache_dtype + "': expected f32 or bf16"));
  o.kv_cache_dtype = kv_cache_dtype == "bf16" ? sk::DType::kBF16 : sk::DType::kF32;
  // A string gives every scope the same options; a callable maps a scope name to its options (the
  // command line's per-pattern scope_options). Either is called only while the graph is built.
  if (nb::isinstance<nb::str>(scope_options)) {
    const std::string text = nb::cast<std::string>(scope_options);
    if (!text.empty()) o.scope_options = [text](std::string_view) { return text; };
  } else if (!scope_options.is_none()) {
    o.scope_options = [scope_options](std::string_view scope) {
      return nb::cast<std::string>(scope_options(std::string(scope)));
    };
  }
  check(o.validate());
  return o;
}

// A model's weight source, shared by every graph built from it (a checkpoint's mapped or converted
// tensors are loaded once for the prefill graph and every decode graph).
struct Weights {
  std::shared_ptr<sk::WeightSource> source;
  std::string checkpoint;  // empty: seeded random weights
};

Weights checkpoint_weights(const std::string& dir) {
  auto ckpt = unwrap(sk::Checkpoint::open(dir));
  return {std::shared_ptr<sk::WeightSource>(sk::checkpoint_weights(ckpt)), dir};
}

// The config of a build: from the checkpoint's config.json (the keys applied, refused and ignored
// as for the C++ command line) when `checkpoint` is given, else from a dict of config.json keys.
template <typename Config>
Config load_config(const nb::object& values, const std::string& checkpoint,
                   std::vector<sk::models::IgnoredKey>* ignored = nullptr) {
  if (checkpoint.empty()) return config_from<Config>(values.is_none() ? nb::dict() : nb::cast<nb::dict>(values));
  if (!values.is_none() && nb::len(values) > 0)
    throw StatusError(sk::Status::invalid_argument("give a config dict or a checkpoint, not both"));
  Config c;
  auto ckpt = unwrap(sk::Checkpoint::open(checkpoint));
  check(sk::models::load_config_json(*ckpt, c, ignored));
  return c;
}

// The weights a build reads: `weights` when given, else the checkpoint's, else the seeded ones.
std::shared_ptr<sk::WeightSource> weights_of(const nb::object& weights, const std::string& checkpoint, uint64_t seed) {
  if (!weights.is_none()) return nb::cast<Weights&>(weights).source;
  if (!checkpoint.empty()) return checkpoint_weights(checkpoint).source;
  return std::shared_ptr<sk::WeightSource>(sk::random_weights(seed));
}

nb::list ignored_list(const std::vector<sk::models::IgnoredKey>& ignored) {
  nb::list out;
  for (const auto& k : ignored) out.append(nb::make_tuple(k.key, k.line, k.why));
  return out;
}

sk::models::Phase phase_of(const std::string& phase) {
  if (phase == "decode") return sk::models::Phase::kDecode;
  if (phase == "prefill") return sk::models::Phase::kPrefill;
  throw StatusError(sk::Status::invalid_argument("phase '" + phase + "': expected 'decode' or 'prefill'"));
}

// Everything a model written in Python needs from a LongCat-Flash config: the resolved fields, the
// config.json keys that were not applied, and the RoPE table (rows as nn::rope_cos_sin_table
// computes them, f32 bytes) with the softmax factor yarn's mscale_all_dim adds. The config comes
// from a checkpoint's config.json (load_config_json: the same keys applied, refused and ignored
// as for the C++ model) or from a dict of config.json keys.
nb::dict longcat_flash_config(const nb::object& values, const std::string& checkpoint, int64_t rope_positions) {
  std::vector<sk::models::IgnoredKey> ignored;
  const auto c = load_config<sk::models::LongCatFlashConfig>(values, checkpoint, &ignored);
  const sk::nn::RopeScaling rope = unwrap(c.rope_scaling());
  nb::dict d;
  d["vocab_size"] = c.vocab_size;
  d["hidden_size"] = c.hidden_size;
  d["num_layers"] = c.num_layers;
  d["num_attention_heads"] = c.num_attention_heads;
  d["q_lora_rank"] = c.q_lora_rank;
  d["kv_lora_rank"] = c.kv_lora_rank;
  d["qk_nope_head_dim"] = c.qk_nope_head_dim;
  d["qk_rope_head_dim"] = c.qk_rope_head_dim;
  d["v_head_dim"] = c.v_head_dim;
  d["ffn_hidden_size"] = c.ffn_hidden_size;
  d["expert_ffn_hidden_size"] = c.expert_ffn_hidden_size;
  d["n_routed_experts"] = c.n_routed_experts;
  d["zero_expert_num"] = c.zero_expert_num;
  d["moe_topk"] = c.moe_topk;
  d["routed_scaling_factor"] = c.routed_scaling_factor;
  d["rms_norm_eps"] = c.rms_norm_eps;
  d["mla_scale_q_lora"] = c.mla_scale_q_lora;
  d["mla_scale_kv_lora"] = c.mla_scale_kv_lora;
  d["max_position_embeddings"] = c.max_position_embeddings;
  d["attention_bias"] = c.attention_bias;
  d["tie_word_embeddings"] = c.tie_word_embeddings;
  d["rope_type"] = sk::nn::rope_type_name(rope.type);
  d["rope_original_max_position_embeddings"] = rope.original_max_position_embeddings;
  d["ignored"] = ignored_list(ignored);
  // The published MLA multiplies its softmax scale by yarn_get_mscale(factor, mscale_all_dim)^2.
  double softmax_mscale = 1.0;
  if (rope.type != sk::nn::RopeScaling::Type::kDefault && rope.mscale_all_dim != 0.0) {
    const double m = sk::nn::yarn_mscale(rope.factor, rope.mscale_all_dim);
    softmax_mscale = m * m;
  }
  d["softmax_mscale"] = softmax_mscale;
  const int64_t dim = c.qk_rope_head_dim, half = dim / 2;
  const double scale = sk::nn::rope_attention_scaling(rope);
  std::vector<float> table(static_cast<size_t>(std::max<int64_t>(rope_positions, 0) * dim));
  std::vector<double> inv = sk::nn::rope_inv_freq(rope, dim, rope_positions);
  for (int64_t p = 0; p < rope_positions; ++p) {
    if (rope.type == sk::nn::RopeScaling::Type::kDynamic) inv = sk::nn::rope_inv_freq(rope, dim, p + 1);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * inv[static_cast<size_t>(i)];
      table[static_cast<size_t>(p * dim + i)] = static_cast<float>(std::cos(angle) * scale);
      table[static_cast<size_t>(p * dim + half + i)] = static_cast<float>(std::sin(angle) * scale);
    }
  }
  d["rope_cos_sin"] = nb::bytes(reinterpret_cast<const char*>(table.data()), table.size() * sizeof(float));
  return d;
}

// A Llama config's resolved fields (from a checkpoint's config.json or a dict of its keys) and the
// keys that were not applied.
nb::dict llama_config(const nb::object& values, const std::string& checkpoint) {
  std::vector<sk::models::IgnoredKey> ignored;
  const auto c = load_config<sk::models::LlamaConfig>(values, checkpoint, &ignored);
  nb::dict d;
  d["vocab_size"] = c.vocab_size;
  d["hidden_size"] = c.hidden_size;
  d["intermediate_size"] = c.intermediate_size;
  d["num_hidden_layers"] = c.num_hidden_layers;
  d["num_attention_heads"] = c.num_attention_heads;
  d["num_key_value_heads"] = c.resolved_kv_heads();
  d["head_dim"] = c.resolved_head_dim();
  d["max_position_embeddings"] = c.max_position_embeddings;
  d["tie_word_embeddings"] = c.tie_word_embeddings;
  d["quantized"] = c.quantization.present();
  d["model_type"] = c.model_type();
  d["num_local_experts"] = c.num_local_experts;
  d["num_experts_per_tok"] = c.num_experts_per_tok;
  d["ignored"] = ignored_list(ignored);
  return d;
}

// A DeepSeek-V2/V3 config's resolved fields and the keys that were not applied.
nb::dict deepseek_config(const nb::object& values, const std::string& checkpoint) {
  std::vector<sk::models::IgnoredKey> ignored;
  const auto c = load_config<sk::models::DeepseekConfig>(values, checkpoint, &ignored);
  nb::dict d;
  d["model_type"] = c.model_type();
  d["vocab_size"] = c.vocab_size;
  d["hidden_size"] = c.hidden_size;
  d["num_hidden_layers"] = c.num_hidden_layers;
  d["num_attention_heads"] = c.num_attention_heads;
  d["n_routed_experts"] = c.n_routed_experts;
  d["n_shared_experts"] = c.n_shared_experts;
  d["num_experts_per_tok"] = c.num_experts_per_tok;
  d["first_k_dense_replace"] = c.first_k_dense_replace;
  d["max_position_embeddings"] = c.max_position_embeddings;
  d["tie_word_embeddings"] = c.tie_word_embeddings;
  d["ignored"] = ignored_list(ignored);
  return d;
}

// The tensors of `weights` that no graph built from it read: an error listing them, unless the
// published definition skips them or `allow` (then they are returned).
template <typename Config>
std::vector<std::string> unread_tensors(const nb::object& values, const std::string& checkpoint, Weights& weights,
                                        bool allow) {
  const auto c = load_config<Config>(values, checkpoint);
  std::vector<std::string> skipped;
  check(sk::models::check_unread_tensors(c, *weights.source, allow, &skipped));
  return skipped;
}

// One weight of sk::random_weights(seed) as its bytes: the weights `superkernel run` uses without
// a checkpoint, so a model written in Python can run on exactly the same ones.
nb::bytes random_weight(uint64_t seed, const std::string& name, const std::string& dtype, const sk::Shape& shape,
                        const std::string& init) {
  static const std::pair<const char*, sk::WeightInit> kInits[] = {{"linear", sk::WeightInit::kLinear},
                                                                  {"norm", sk::WeightInit::kNorm},
                                                                  {"bias", sk::WeightInit::kBias},
                                                                  {"embedding", sk::WeightInit::kEmbedding},
                                                                  {"zero", sk::WeightInit::kZero}};
  const sk::WeightInit* kind = nullptr;
  for (const auto& [text, value] : kInits)
    if (init == text) kind = &value;
  if (kind == nullptr)
    throw StatusError(sk::Status::invalid_argument("random_weight '" + name + "': init '" + init +
                                                   "': expected linear, norm, bias, embedding or zero"));
  if (dtype != "f32" && dtype != "bf16")
    throw StatusError(
        sk::Status::invalid_argument("random_weight '" + name + "': dtype '" + dtype + "': expected f32 or bf16"));
  sk::Graph g("random_weight");
  auto source = sk::random_weights(seed);
  const sk::Tensor t = unwrap(source->get(g, name, dtype == "f32" ? sk::DType::kF32 : sk::DType::kBF16, shape, *kind));
  const sk::TensorInfo& info = g.tensor(t);
  const void* bytes = info.external_data != nullptr ? info.external_data : info.data.data();
  size_t n = sk::dtype_size(info.dtype);
  for (int64_t d : info.shape) n *= static_cast<size_t>(d);
  return nb::bytes(static_cast<const char*>(bytes), n);
}

}  // namespace

// One model builder as a Python function: the config (dict or checkpoint), the build options and
// the weights every builder takes.
template <typename Config, typename Build>
void def_builder(nb::module_& models, const char* name, Build build, const char* doc) {
  using nb::arg;
  models.def(
      name,
      [build](nb::object config, std::string phase, int64_t batch, int64_t block_size, int64_t max_context,
              int64_t prefill_tokens, std::string weight_dtype, uint64_t seed, nb::object scope_options,
              int multi_streams, int64_t moe_core_limit, std::string kv_cache_dtype, std::string checkpoint,
              nb::object weights, int64_t cache_sequences, std::string prefill_logits) {
        const auto cfg = load_config<Config>(config, checkpoint);
        auto opts = build_options(batch, block_size, max_context, prefill_tokens, weight_dtype, scope_options,
                                  multi_streams, moe_core_limit, kv_cache_dtype, cache_sequences, prefill_logits);
        auto source = weights_of(weights, checkpoint, seed);
        return unwrap(build(cfg, opts, phase_of(phase), *source));
      },
      arg("config") = nb::none(), arg("phase") = "decode", arg("batch") = 1, arg("block_size") = 16,
      arg("max_context") = 256, arg("prefill_tokens") = 16, arg("weight_dtype") = "f32", arg("seed") = 1,
      arg("scope_options") = nb::str(""), arg("multi_streams") = 0, arg("moe_core_limit") = 0,
      arg("kv_cache_dtype") = "f32", arg("checkpoint") = "", arg("weights") = nb::none(), arg("cache_sequences") = 0,
      arg("prefill_logits") = "every", doc);
}

void bind_models(nb::module_& m) {
  using nb::arg;
  nb::module_ models = m.def_submodule("models", "The C++ model builders (include/superkernel/models.h).");
  def_builder<sk::models::LlamaConfig>(
      models, "build_llama",
      [](const sk::models::LlamaConfig& c, const sk::models::BuildOptions& o, sk::models::Phase p,
         sk::WeightSource& w) { return sk::models::build_llama(c, o, p, w); },
      "The Llama-style decoder (model_type mixtral: Mixtral): config a dict of config.json keys or `checkpoint` a "
      "directory; weights a Weights (shared by every graph built from it), else the checkpoint's, else seeded random "
      "ones. Inputs input_ids, positions, slot_mapping, block_tables, context_lens (decode) or seq_ids (prefill; "
      "logit_rows with prefill_logits 'last'), all i32; output logits. cache_sequences: "
      "BuildOptions::cache_sequences.");
  def_builder<sk::models::LongCatFlashConfig>(
      models, "build_longcat_flash",
      [](const sk::models::LongCatFlashConfig& c, const sk::models::BuildOptions& o, sk::models::Phase p,
         sk::WeightSource& w) { return sk::models::build_longcat_flash(c, o, p, w); },
      "The LongCat-Flash decoder, as build_llama.");
  def_builder<sk::models::DeepseekConfig>(
      models, "build_deepseek",
      [](const sk::models::DeepseekConfig& c, const sk::models::BuildOptions& o, sk::models::Phase p,
         sk::WeightSource& w) { return sk::models::build_deepseek(c, o, p, w); },
      "The DeepSeek-V2 / DeepSeek-V3 decoder (config.json's model_type deepseek_v2 or deepseek_v3), as build_llama.");
  nb::class_<Weights>(models, "Weights", "A weight source shared by the graphs built from it.")
      .def_static("checkpoint", &checkpoint_weights, arg("directory"),
                  "The tensors of a checkpoint directory (config.json + *.safetensors), mapped or converted once.")
      .def_static(
          "random",
          [](uint64_t seed) {
            return Weights{std::shared_ptr<sk::WeightSource>(sk::random_weights(seed)), ""};
          },
          arg("seed"), "The seeded random weights the C++ models use without a checkpoint.")
      .def("describe", [](const Weights& w) { return w.source->describe(); })
      .def_ro("checkpoint_dir", &Weights::checkpoint);
  models.def("llama_config", &llama_config, arg("config") = nb::none(), arg("checkpoint") = "",
             "A Llama config's resolved fields and 'ignored' [(key, line, why)], from a checkpoint directory's "
             "config.json or a dict of config.json keys.");
  models.def("llama_unread_tensors", &unread_tensors<sk::models::LlamaConfig>, arg("config") = nb::none(),
             arg("checkpoint") = "", arg("weights"), arg("allow") = false,
             "After the graphs are built: the checkpoint tensors none read, an error unless the published "
             "definition skips them or allow; returns those skipped.");
  models.def("deepseek_config", &deepseek_config, arg("config") = nb::none(), arg("checkpoint") = "",
             "A DeepSeek-V2/V3 config's resolved fields and 'ignored' [(key, line, why)], as llama_config.");
  models.def("deepseek_unread_tensors", &unread_tensors<sk::models::DeepseekConfig>, arg("config") = nb::none(),
             arg("checkpoint") = "", arg("weights"), arg("allow") = false);
  models.def("longcat_flash_unread_tensors", &unread_tensors<sk::models::LongCatFlashConfig>,
             arg("config") = nb::none(), arg("checkpoint") = "", arg("weights"), arg("allow") = false);
  models.def("longcat_flash_config", &longcat_flash_config, arg("config") = nb::none(), arg("checkpoint") = "",
             arg("rope_positions") = 0,
             "A LongCat-Flash config from a checkpoint directory's config.json (as the C++ loader reads it) or a "
             "dict of config.json keys: a dict of its fields, 'ignored' [(key, line, why)], 'softmax_mscale' and "
             "'rope_cos_sin' (f32 bytes [rope_positions, qk_rope_head_dim], as rope.f32 reads them).");
  models.def("random_weight", &random_weight, arg("seed"), arg("name"), arg("dtype"), arg("shape"), arg("init"),
             "The bytes of one weight of the seeded random source the C++ models use without a checkpoint "
             "(init: linear, norm, bias, embedding or zero).");
  models.def(
      "llama_cache_names",
      [](nb::object config, std::string checkpoint) {
        return sk::models::cache_names(load_config<sk::models::LlamaConfig>(config, checkpoint));
      },
      arg("config") = nb::none(), arg("checkpoint") = "");
  models.def(
      "deepseek_cache_names",
      [](nb::object config, std::string checkpoint) {
        return sk::models::cache_names(load_config<sk::models::DeepseekConfig>(config, checkpoint));
      },
      arg("config") = nb::none(), arg("checkpoint") = "");
  models.def(
      "longcat_flash_cache_names",
      [](nb::object config, std::string checkpoint) {
        return sk::models::cache_names(load_config<sk::models::LongCatFlashConfig>(config, checkpoint));
      },
      arg("config") = nb::none(), arg("checkpoint") = "");
}

}  // namespace skpy
