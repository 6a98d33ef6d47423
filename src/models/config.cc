// Model configs (published config.json keys), their RoPE scaling, weight dtypes and build options.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "superkernel/models.h"

namespace sk::models {
namespace {

template <typename Config>
using Field = std::variant<int64_t Config::*, double Config::*, bool Config::*, std::vector<int64_t> Config::*,
                           std::vector<std::string> Config::*>;

template <typename Config>
struct KeyField {
  const char* key;
  Field<Config> field;
};

std::string quoted(std::string_view key) { return "config key '" + std::string(key) + "'"; }

Status bad_value(std::string_view key, std::string_view value, const char* expected) {
  return Status::invalid_argument(quoted(key) + ": '" + std::string(value) + "' is not " + expected);
}

Status parse_into(std::string_view key, std::string_view value, int64_t& out) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size()) return bad_value(key, value, "an integer");
  out = v;
  return Status::ok();
}

Status parse_into(std::string_view key, std::string_view value, double& out) {
  double v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(v))
    return bad_value(key, value, "a finite number");
  out = v;
  return Status::ok();
}

Status parse_into(std::string_view key, std::string_view value, bool& out) {
  if (value == "true" || value == "1") {
    out = true;
  } else if (value == "false" || value == "0") {
    out = false;
  } else {
    return bad_value(key, value, "true or false");
  }
  return Status::ok();
}

template <typename T>
Status parse_into(std::string_view key, std::string_view value, std::optional<T>& out) {
  if (value == "null") {
    out.reset();
    return Status::ok();
  }
  T v{};
  SK_RETURN_IF_ERROR(parse_into(key, value, v));
  out = v;
  return Status::ok();
}

// A JSON array as config_tree() gives it (compact: `[1,2]`, `["a","b"]`), or null (empty).
Expected<std::vector<std::string_view>> array_items(std::string_view key, std::string_view value) {
  std::vector<std::string_view> items;
  if (value == "null") return items;
  if (value.size() < 2 || value.front() != '[' || value.back() != ']') return bad_value(key, value, "an array");
  std::string_view rest = value.substr(1, value.size() - 2);
  auto trimmed = [](std::string_view t) {
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    return t;
  };
  if (trimmed(rest).empty()) return items;
  while (true) {
    const size_t comma = rest.find(',');
    items.push_back(trimmed(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return items;
}

Status parse_into(std::string_view key, std::string_view value, std::vector<int64_t>& out) {
  auto items = array_items(key, value);
  if (!items) return items.status();
  std::vector<int64_t> parsed;
  for (std::string_view item : *items) {
    int64_t v = 0;
    if (!parse_into(key, item, v)) return bad_value(key, value, "an array of integers");
    parsed.push_back(v);
  }
  out = std::move(parsed);
  return Status::ok();
}

Status parse_into(std::string_view key, std::string_view value, std::vector<std::string>& out) {
  auto items = array_items(key, value);
  if (!items) return items.status();
  std::vector<std::string> parsed;
  for (std::string_view item : *items) {
    if (item.size() < 2 || item.front() != '"' || item.back() != '"')
      return bad_value(key, value, "an array of strings");
    parsed.emplace_back(item.substr(1, item.size() - 2));
  }
  out = std::move(parsed);
  return Status::ok();
}

template <typename Config>
const KeyField<Config>* find_key(std::span<const KeyField<Config>> table, std::string_view key) {
  for (const KeyField<Config>& row : table)
    if (key == row.key) return &row;
  return nullptr;
}

template <typename Config>
std::vector<std::string> table_keys(std::span<const KeyField<Config>> table) {
  std::vector<std::string> keys;
  for (const KeyField<Config>& row : table) keys.emplace_back(row.key);
  return keys;
}

// ---- keys the published definitions read that admit only the value this implementation runs ----

bool is_null(std::string_view v) { return v == "null"; }
bool numeric_one(std::string_view v) {
  double d = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  return ec == std::errc() && end == v.data() + v.size() && d == 1.0;
}

struct Restricted {
  const char* key;
  bool (*accepts)(std::string_view value);
  const char* why;
};

const Restricted kRestrictedCommon[] = {
    {"hidden_act", [](std::string_view v) { return v == "silu" || v == "swish" || is_null(v); },
     "only silu (swish) is implemented: the MLPs and experts run silu_mul"},
    {"is_causal", [](std::string_view v) { return v == "true" || is_null(v); }, "only causal attention is implemented"},
    {"pruned_heads", [](std::string_view v) { return v == "{}" || is_null(v); }, "pruned heads are not implemented"},
    {"partial_rotary_factor", [](std::string_view v) { return numeric_one(v) || is_null(v); },
     "only a rotary embedding over the whole rotary head is implemented"},
    {"original_max_position_embeddings", is_null,
     "give it inside rope_parameters (transformers treats the top-level key differently by RoPE type)"},
};

const Restricted kRestrictedLongCat[] = {
    {"quantization_config", is_null,
     "quantised LongCat-Flash checkpoints are not implemented (store f32, bf16 or f16 weights; model.w8a8 "
     "quantises at load)"},
    {"norm_topk_prob", [](std::string_view v) { return v == "false" || is_null(v); },
     "the published router does not renormalise the top-k weights"},
    {"zero_expert_type", [](std::string_view v) { return v == "identity" || is_null(v); },
     "only identity zero-computation experts are implemented"},
    {"topk_method", is_null, "only the published top-k routing (no topk_method) is implemented"},
    {"attention_method", [](std::string_view v) { return v == "MLA" || is_null(v); },
     "only MLA attention is implemented"},
    // transformers builds router.classifier with this bias but its forward multiplies by the
    // weight alone, while the original code adds the bias: which one a checkpoint expects is unclear.
    {"router_bias", [](std::string_view v) { return v == "false" || is_null(v); },
     "transformers' LongcatFlashTopkRouter ignores the classifier bias that the original code adds"},
};

Status check_restricted(std::span<const Restricted> table, std::string_view key, std::string_view value,
                        bool* handled) {
  for (const Restricted& r : table) {
    if (key != r.key) continue;
    *handled = true;
    if (r.accepts(value)) return Status::ok();
    return Status::unimplemented(quoted(key) + ": '" + std::string(value) + "' is not implemented: " + r.why);
  }
  return Status::ok();
}

// ---- RoPE ------------------------------------------------------------------------------------

Status set_rope_key(RopeKeys& rope, std::string_view key, std::string_view value) {
  const size_t dot = key.find('.');
  const std::string_view object = key.substr(0, dot);
  if (dot == std::string_view::npos) {
    // The object itself: null means absent (its members arrive as dotted keys).
    if (is_null(value) || value == "{}") return Status::ok();
    return bad_value(key, value, "an object of RoPE fields");
  }
  if (!rope.object.empty() && rope.object != object)
    return Status::invalid_argument(
        quoted(key) +
        ": config.json sets both 'rope_parameters' and 'rope_scaling' (transformers then uses "
        "rope_scaling alone and drops rope_parameters, rope_theta included); keep one");
  rope.object = std::string(object);
  const std::string_view field = key.substr(dot + 1);
  rope.fields.emplace_back(field);
  if (field == "rope_type" || field == "type") {
    std::string& out = field == "rope_type" ? rope.rope_type : rope.type;
    out = is_null(value) ? std::string() : std::string(value);
    return Status::ok();
  }
  const std::pair<const char*, std::optional<double> RopeKeys::*> numbers[] = {
      {"rope_theta", &RopeKeys::rope_theta},
      {"factor", &RopeKeys::factor},
      {"attention_factor", &RopeKeys::attention_factor},
      {"beta_fast", &RopeKeys::beta_fast},
      {"beta_slow", &RopeKeys::beta_slow},
      {"mscale", &RopeKeys::mscale},
      {"mscale_all_dim", &RopeKeys::mscale_all_dim},
      {"low_freq_factor", &RopeKeys::low_freq_factor},
      {"high_freq_factor", &RopeKeys::high_freq_factor},
      {"partial_rotary_factor", &RopeKeys::partial_rotary_factor},
  };
  for (const auto& [name, member] : numbers)
    if (field == name) return parse_into(key, value, rope.*member);
  if (field == "original_max_position_embeddings") return parse_into(key, value, rope.original_max_position_embeddings);
  if (field == "truncate") return parse_into(key, value, rope.truncate);
  return Status::ok();  // any other field: kept in `fields`, refused by resolve_rope with the type
}

// What transformers' RoPE initialisers compute from these keys; errors name the key.
Expected<nn::RopeScaling> resolve_rope(const RopeKeys& k, double rope_theta, int64_t max_position_embeddings,
                                       int64_t rotary_dim) {
  using Type = nn::RopeScaling::Type;
  const std::string object = k.object.empty() ? "rope_parameters" : k.object;
  auto key = [&](const char* field) { return quoted(object + "." + field); };
  const std::string type_name = !k.rope_type.empty() ? k.rope_type : !k.type.empty() ? k.type : "default";
  const char* type_key = !k.rope_type.empty() ? "rope_type" : "type";
  struct TypeRule {
    const char* name;
    Type type;
    std::vector<std::string> required, optional;
  };
  const TypeRule rules[] = {
      {"default", Type::kDefault, {}, {}},
      {"linear", Type::kLinear, {"factor"}, {}},
      {"dynamic", Type::kDynamic, {"factor"}, {}},
      {"yarn",
       Type::kYarn,
       {"factor"},
       {"original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
        "truncate"}},
      // transformers fills llama3's original_max_position_embeddings from max_position_embeddings.
      {"llama3",
       Type::kLlama3,
       {"factor", "low_freq_factor", "high_freq_factor"},
       {"original_max_position_embeddings"}},
  };
  const TypeRule* rule = nullptr;
  for (const TypeRule& r : rules)
    if (type_name == r.name) rule = &r;
  if (!rule)
    return Status::unimplemented(key(type_key) + ": '" + type_name +
                                 "' is not implemented (RoPE types: default, linear, dynamic, yarn, llama3)");
  for (const std::string& field : k.fields) {
    const bool common =
        field == "rope_type" || field == "type" || field == "rope_theta" || field == "partial_rotary_factor";
    const auto in = [&](const std::vector<std::string>& list) {
      return std::find(list.begin(), list.end(), field) != list.end();
    };
    if (!common && !in(rule->required) && !in(rule->optional))
      return Status::unimplemented(key(field.c_str()) + ": not a field of rope_type '" + type_name +
                                   "' (transformers would ignore it; remove it or fix the type)");
  }
  const auto given = [&](const std::string& field) {
    return std::find(k.fields.begin(), k.fields.end(), field) != k.fields.end();
  };
  for (const std::string& field : rule->required)
    if (!given(field)) return Status::invalid_argument(key(field.c_str()) + ": rope_type '" + type_name + "' needs it");
  if (k.partial_rotary_factor && *k.partial_rotary_factor != 1.0)
    return Status::unimplemented(key("partial_rotary_factor") +
                                 ": only a rotary embedding over the whole rotary head is implemented");

  nn::RopeScaling r;
  r.type = rule->type;
  r.theta = k.rope_theta.value_or(rope_theta);
  if (!(r.theta > 0)) return Status::invalid_argument(key("rope_theta") + " (or 'rope_theta') must be positive");
  if (rule->type == Type::kDefault) return r;
  if (!k.factor || !(*k.factor > 0)) return Status::invalid_argument(key("factor") + ": must be a positive number");
  r.factor = *k.factor;
  r.original_max_position_embeddings = k.original_max_position_embeddings.value_or(max_position_embeddings);
  if (rule->type == Type::kDynamic) {
    r.original_max_position_embeddings = max_position_embeddings;
    if (rotary_dim <= 2)
      return Status::invalid_argument(key("rope_type") + ": 'dynamic' needs a rotary dimension above 2, got " +
                                      std::to_string(rotary_dim));
  }
  if (r.original_max_position_embeddings <= 0)
    return Status::invalid_argument(key("original_max_position_embeddings") +
                                    " (or 'max_position_embeddings'): must be positive, got " +
                                    std::to_string(r.original_max_position_embeddings));
  if (rule->type == Type::kYarn) {
    if (k.attention_factor) {
      if (!(*k.attention_factor > 0)) return Status::invalid_argument(key("attention_factor") + ": must be positive");
      r.attention_factor = *k.attention_factor;
    }
    r.beta_fast = k.beta_fast.value_or(0.0);  // 0: transformers' `or 32`
    r.beta_slow = k.beta_slow.value_or(0.0);
    r.mscale = k.mscale.value_or(0.0);
    r.mscale_all_dim = k.mscale_all_dim.value_or(0.0);
    r.truncate = k.truncate.value_or(true);
  }
  if (rule->type == Type::kLlama3) {
    r.low_freq_factor = *k.low_freq_factor;
    r.high_freq_factor = *k.high_freq_factor;
    if (!(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor))
      return Status::invalid_argument(key("high_freq_factor") + ": must exceed low_freq_factor (> 0)");
  }
  return r;
}

// ---- packed 4-bit checkpoints (quantization_config) ----------------------------------------------

// Fields of AWQ's and GPTQ's quantization_config that do not change the weights the checkpoint
// holds (how they were computed, which kernel to run them with, metadata).
const char* const kQuantizationInert[] = {"damp_percent",
                                          "damp_auto_increment",
                                          "true_sequential",
                                          "static_groups",
                                          "model_name_or_path",
                                          "model_file_base_name",
                                          "meta",
                                          "dataset",
                                          "tokenizer",
                                          "use_exllama",
                                          "exllama_config",
                                          "max_input_length",
                                          "cache_block_outputs",
                                          "batch_size",
                                          "use_cuda_fp16",
                                          "module_name_preceding_first_block",
                                          "backend",
                                          "do_fuse",
                                          "fuse_max_seq_len",
                                          "modules_to_fuse",
                                          "mv",
                                          "quantizer",
                                          "pad_token_id",
                                          "use_marlin",
                                          "disable_exllama",
                                          "exllama_version",
                                          "sym_for_zero",
                                          "hyb_act",
                                          "mse",
                                          "v2",
                                          "v2_alpha",
                                          "act_group_aware",
                                          "true_sequence",
                                          "fail_safe",
                                          "damp"};

Status set_quantization_key(CheckpointQuantization& q, std::string_view key, std::string_view value) {
  using Method = CheckpointQuantization::Method;
  const size_t dot = key.find('.');
  if (dot == std::string_view::npos) {
    if (is_null(value)) return Status::ok();
    q.given = true;
    return Status::ok();  // the members arrive as dotted keys
  }
  const std::string_view field = key.substr(dot + 1);
  const std::string top(field.substr(0, field.find('.')));
  auto refuse = [&](const std::string& why) {
    return Status::unimplemented(quoted(key) + ": '" + std::string(value) + "' is not implemented: " + why);
  };
  if (field == "quant_method") {
    if (value == "awq") {
      q.method = Method::kAwq;
    } else if (value == "gptq") {
      q.method = Method::kGptq;
    } else {
      return refuse(
          "packed 4-bit checkpoints are read in the AWQ (GEMM) and GPTQ layouts only; quantise a float "
          "checkpoint at load instead (model.dtype w8a8, w4a8 or w4)");
    }
    return Status::ok();
  }
  if (field == "bits" || field == "w_bit") {
    SK_RETURN_IF_ERROR(parse_into(key, value, q.bits));
    return q.bits == 4 ? Status::ok() : refuse("only 4-bit weights have kernels (matmul.w4a8_dyn, matmul.w4)");
  }
  if (field == "group_size" || field == "q_group_size") {
    SK_RETURN_IF_ERROR(parse_into(key, value, q.group_size));
    const int64_t g = q.group_size;
    if (g == -1 || (g >= 32 && (g & (g - 1)) == 0)) return Status::ok();
    return refuse("the 4-bit kernels take groups of a power of two >= 32 (or -1, one group per row)");
  }
  if (field == "zero_point") {
    bool zero = true;
    SK_RETURN_IF_ERROR(parse_into(key, value, zero));
    return zero ? Status::ok() : refuse("AWQ checkpoints without zero points are not implemented");
  }
  if (field == "version") {
    if (value == "gemm" || value == "GEMM" || is_null(value)) return Status::ok();
    return refuse("AWQ's GEMM packing is the only one read (GEMV, Marlin and ExLlama packings reorder qweight)");
  }
  if (field == "desc_act") {
    SK_RETURN_IF_ERROR(parse_into(key, value, q.desc_act));
    return q.desc_act ? refuse(
                            "act-order (desc_act) permutes the groups along the input, which the 4-bit layout's "
                            "contiguous groups cannot express")
                      : Status::ok();
  }
  if (field == "sym") {
    bool sym = false;
    return parse_into(key, value, sym);  // the zeros are stored either way
  }
  if (field == "checkpoint_format" || field == "format") {
    if (value == "gptq") {
      q.gptq_v1_zeros = true;
    } else if (value == "gptq_v2") {
      q.gptq_v1_zeros = false;
    } else {
      return refuse("GPTQ checkpoints are read in the formats gptq and gptq_v2");
    }
    return Status::ok();
  }
  if (field == "pack_dtype")
    return value == "int32" ? Status::ok() : refuse("qweight and qzeros are read as int32 words");
  if (field == "lm_head") {
    bool quantised = false;
    SK_RETURN_IF_ERROR(parse_into(key, value, quantised));
    return quantised ? refuse("a 4-bit LM head is not read (it is stored as float weights)") : Status::ok();
  }
  if (field == "modules_to_not_convert" || field == "modules_in_block_to_quantize" || field == "dynamic") {
    if (is_null(value) || value == "[]" || value == "{}") return Status::ok();
    return refuse("every Linear layer of the decoder layers must be quantised alike");
  }
  for (const char* inert : kQuantizationInert)
    if (top == inert) return Status::ok();
  return Status::unimplemented(quoted(key) +
                               ": a quantization_config field this loader does not know; it reads "
                               "AWQ (GEMM) and GPTQ 4-bit checkpoints");
}

// ---- tables ------------------------------------------------------------------------------------

using L = LongCatFlashConfig;
const KeyField<L> kLongCatKeys[] = {
    {"vocab_size", &L::vocab_size},
    {"hidden_size", &L::hidden_size},
    {"num_layers", &L::num_layers},
    {"num_attention_heads", &L::num_attention_heads},
    {"q_lora_rank", &L::q_lora_rank},
    {"kv_lora_rank", &L::kv_lora_rank},
    {"qk_nope_head_dim", &L::qk_nope_head_dim},
    {"qk_rope_head_dim", &L::qk_rope_head_dim},
    {"v_head_dim", &L::v_head_dim},
    {"ffn_hidden_size", &L::ffn_hidden_size},
    {"expert_ffn_hidden_size", &L::expert_ffn_hidden_size},
    {"n_routed_experts", &L::n_routed_experts},
    {"zero_expert_num", &L::zero_expert_num},
    {"moe_topk", &L::moe_topk},
    {"routed_scaling_factor", &L::routed_scaling_factor},
    {"rms_norm_eps", &L::rms_norm_eps},
    {"rope_theta", &L::rope_theta},
    {"mla_scale_q_lora", &L::mla_scale_q_lora},
    {"mla_scale_kv_lora", &L::mla_scale_kv_lora},
    {"max_position_embeddings", &L::max_position_embeddings},
    {"attention_bias", &L::attention_bias},
    {"tie_word_embeddings", &L::tie_word_embeddings},
    {"num_key_value_heads", &L::num_key_value_heads},
    {"qk_head_dim", &L::qk_head_dim},
    {"head_dim", &L::head_dim},
    {"num_hidden_layers", &L::num_hidden_layers},
    // transformers' attribute_map: these names set the keys above.
    {"num_local_experts", &L::n_routed_experts},
    {"num_experts_per_tok", &L::moe_topk},
    {"intermediate_size", &L::ffn_hidden_size},
    {"moe_intermediate_size", &L::expert_ffn_hidden_size},
};
// Keys that may be null in config.json, meaning their default (0: derived from other keys).
const char* const kLongCatNullable[] = {"num_key_value_heads", "qk_head_dim", "head_dim", "zero_expert_num",
                                        "num_hidden_layers"};

using Ll = LlamaConfig;
// The keys every family reads (transformers' LlamaConfig and the configs derived from it).
const KeyField<Ll> kDecoderKeys[] = {
    {"vocab_size", &Ll::vocab_size},
    {"hidden_size", &Ll::hidden_size},
    {"intermediate_size", &Ll::intermediate_size},
    {"num_hidden_layers", &Ll::num_hidden_layers},
    {"num_attention_heads", &Ll::num_attention_heads},
    {"num_key_value_heads", &Ll::num_key_value_heads},
    {"head_dim", &Ll::head_dim},
    {"rms_norm_eps", &Ll::rms_norm_eps},
    {"rope_theta", &Ll::rope_theta},
    {"tie_word_embeddings", &Ll::tie_word_embeddings},
    {"max_position_embeddings", &Ll::max_position_embeddings},
};
const char* const kDecoderNullable[] = {"num_key_value_heads", "head_dim", "sliding_window", "layer_types",
                                        "mlp_only_layers"};

// Each family's keys beyond kDecoderKeys.
const KeyField<Ll> kLlamaKeys[] = {{"attention_bias", &Ll::attention_bias}, {"mlp_bias", &Ll::mlp_bias}};
const KeyField<Ll> kMistralKeys[] = {{"sliding_window", &Ll::sliding_window}};
// "num_experts" is MixtralConfig's and Qwen3MoeConfig's alias (attribute_map) of num_local_experts.
const KeyField<Ll> kMixtralKeys[] = {
    {"num_local_experts", &Ll::num_local_experts},
    {"num_experts", &Ll::num_local_experts},
    {"num_experts_per_tok", &Ll::num_experts_per_tok},
    {"sliding_window", &Ll::sliding_window},
};
const KeyField<Ll> kQwen2Keys[] = {
    {"use_sliding_window", &Ll::use_sliding_window},
    {"sliding_window", &Ll::sliding_window},
    {"max_window_layers", &Ll::max_window_layers},
    {"layer_types", &Ll::layer_types},
};
const KeyField<Ll> kQwen3Keys[] = {
    {"attention_bias", &Ll::attention_bias}, {"use_sliding_window", &Ll::use_sliding_window},
    {"sliding_window", &Ll::sliding_window}, {"max_window_layers", &Ll::max_window_layers},
    {"layer_types", &Ll::layer_types},
};
const KeyField<Ll> kQwen2MoeKeys[] = {
    {"use_sliding_window", &Ll::use_sliding_window},
    {"sliding_window", &Ll::sliding_window},
    {"max_window_layers", &Ll::max_window_layers},
    {"layer_types", &Ll::layer_types},
    {"qkv_bias", &Ll::qkv_bias},
    {"num_experts", &Ll::num_local_experts},
    {"num_experts_per_tok", &Ll::num_experts_per_tok},
    {"moe_intermediate_size", &Ll::moe_intermediate_size},
    {"shared_expert_intermediate_size", &Ll::shared_expert_intermediate_size},
    {"norm_topk_prob", &Ll::norm_topk_prob},
    {"decoder_sparse_step", &Ll::decoder_sparse_step},
    {"mlp_only_layers", &Ll::mlp_only_layers},
};
const KeyField<Ll> kQwen3MoeKeys[] = {
    {"attention_bias", &Ll::attention_bias},
    {"use_sliding_window", &Ll::use_sliding_window},
    {"sliding_window", &Ll::sliding_window},
    {"num_experts", &Ll::num_local_experts},
    {"num_local_experts", &Ll::num_local_experts},
    {"num_experts_per_tok", &Ll::num_experts_per_tok},
    {"moe_intermediate_size", &Ll::moe_intermediate_size},
    {"norm_topk_prob", &Ll::norm_topk_prob},
    {"decoder_sparse_step", &Ll::decoder_sparse_step},
    {"mlp_only_layers", &Ll::mlp_only_layers},
};

const Restricted kRestrictedUnquantised[] = {
    {"quantization_config", is_null,
     "quantised checkpoints of this family are not implemented (store f32, bf16 or f16 weights; model.w8a8 "
     "quantises at load)"},
};

using Ds = DeepseekConfig;
// The keys both DeepSeek families read (transformers' DeepseekV2Config and DeepseekV3Config).
const KeyField<Ds> kDeepseekKeys[] = {
    {"vocab_size", &Ds::vocab_size},
    {"hidden_size", &Ds::hidden_size},
    {"intermediate_size", &Ds::intermediate_size},
    {"moe_intermediate_size", &Ds::moe_intermediate_size},
    {"num_hidden_layers", &Ds::num_hidden_layers},
    {"num_attention_heads", &Ds::num_attention_heads},
    {"num_key_value_heads", &Ds::num_key_value_heads},
    {"n_shared_experts", &Ds::n_shared_experts},
    {"n_routed_experts", &Ds::n_routed_experts},
    {"routed_scaling_factor", &Ds::routed_scaling_factor},
    {"kv_lora_rank", &Ds::kv_lora_rank},
    {"q_lora_rank", &Ds::q_lora_rank},
    {"qk_rope_head_dim", &Ds::qk_rope_head_dim},
    {"v_head_dim", &Ds::v_head_dim},
    {"qk_nope_head_dim", &Ds::qk_nope_head_dim},
    {"n_group", &Ds::n_group},
    {"topk_group", &Ds::topk_group},
    {"num_experts_per_tok", &Ds::num_experts_per_tok},
    {"first_k_dense_replace", &Ds::first_k_dense_replace},
    {"max_position_embeddings", &Ds::max_position_embeddings},
    {"rms_norm_eps", &Ds::rms_norm_eps},
    {"rope_theta", &Ds::rope_theta},
    {"tie_word_embeddings", &Ds::tie_word_embeddings},
    {"attention_bias", &Ds::attention_bias},
    {"head_dim", &Ds::head_dim},
    {"qk_head_dim", &Ds::qk_head_dim},
};
const KeyField<Ds> kDeepseekV2Keys[] = {
    {"mlp_bias", &Ds::mlp_bias}, {"num_experts", &Ds::n_routed_experts},  // DeepseekV2Config.attribute_map
};
const KeyField<Ds> kDeepseekV3Keys[] = {
    {"norm_topk_prob", &Ds::norm_topk_prob},
    {"rope_interleave", &Ds::rope_interleave},
    {"num_nextn_predict_layers", &Ds::num_nextn_predict_layers},
    // DeepseekV3Config.attribute_map
    {"num_local_experts", &Ds::n_routed_experts},
    {"num_mtp_layers", &Ds::num_nextn_predict_layers},
};
const char* const kDeepseekNullable[] = {
    "num_key_value_heads",  "head_dim", "qk_head_dim", "q_lora_rank", "n_group", "topk_group", "num_experts_per_tok",
    "first_k_dense_replace"};
// Keys of the original DeepSeek configs that transformers does not read, accepted only with the
// value transformers' fixed behaviour matches.
const Restricted kRestrictedDeepseekV2[] = {
    {"quantization_config", is_null,
     "quantised DeepSeek checkpoints are not implemented (store f32, bf16 or f16 weights; model.w8a8 "
     "quantises at load)"},
    {"scoring_func", [](std::string_view v) { return v == "softmax" || is_null(v); },
     "DeepSeek-V2 routes by softmax scores"},
    {"moe_layer_freq", [](std::string_view v) { return numeric_one(v) || is_null(v); },
     "every layer from first_k_dense_replace on is a MoE layer (transformers reads no moe_layer_freq)"},
    // The original DeepSeek-V2 code renormalises with it; transformers' DeepseekV2TopkRouter does not.
    {"norm_topk_prob", [](std::string_view v) { return v == "false" || is_null(v); },
     "transformers' DeepseekV2TopkRouter does not renormalise the top-k weights, the original code does"},
};
const Restricted kRestrictedDeepseekV3[] = {
    {"quantization_config", is_null,
     "quantised DeepSeek checkpoints (the published FP8 blocks) are not implemented (dequantise to bf16 first; "
     "model.w8a8 quantises at load)"},
    {"scoring_func", [](std::string_view v) { return v == "sigmoid" || is_null(v); },
     "DeepSeek-V3 routes by sigmoid scores"},
    {"topk_method", [](std::string_view v) { return v == "noaux_tc" || is_null(v); },
     "DeepSeek-V3 routes by group-limited top-k with the correction bias (noaux_tc)"},
    {"moe_layer_freq", [](std::string_view v) { return numeric_one(v) || is_null(v); },
     "every layer from first_k_dense_replace on is a MoE layer (transformers reads no moe_layer_freq)"},
};

// The published config classes' defaults for the keys a config.json may leave out.
void llama_defaults(LlamaConfig&) {}
void mistral_defaults(LlamaConfig& c) {
  c.intermediate_size = 14336;
  c.num_key_value_heads = 8;
  c.max_position_embeddings = 4096 * 32;
  c.sliding_window = 4096;
}
void mixtral_defaults(LlamaConfig& c) {
  mistral_defaults(c);
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 1e6;
  c.sliding_window = 0;
  c.num_local_experts = 8;
  c.num_experts_per_tok = 2;
}
void qwen_defaults(LlamaConfig& c) {
  c.vocab_size = 151936;
  c.max_position_embeddings = 32768;
  c.sliding_window = 4096;
  c.max_window_layers = 28;
}
void qwen2_defaults(LlamaConfig& c) {
  qwen_defaults(c);
  c.intermediate_size = 22016;
  c.num_key_value_heads = 32;
  c.qkv_bias = true;
}
void qwen3_defaults(LlamaConfig& c) {
  qwen2_defaults(c);
  c.head_dim = 128;
  c.qkv_bias = false;
  c.qk_norm = true;
}
void qwen2_moe_defaults(LlamaConfig& c) {
  qwen_defaults(c);
  c.hidden_size = 2048;
  c.intermediate_size = 5632;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 16;
  c.qkv_bias = true;
  c.num_local_experts = 60;
  c.num_experts_per_tok = 4;
  c.moe_intermediate_size = 1408;
  c.shared_expert_intermediate_size = 5632;
  c.norm_topk_prob = false;
}
void qwen3_moe_defaults(LlamaConfig& c) {
  qwen_defaults(c);
  c.hidden_size = 2048;
  c.intermediate_size = 6144;
  c.num_hidden_layers = 24;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 4;
  c.qk_norm = true;
  c.num_local_experts = 128;
  c.num_experts_per_tok = 8;
  c.moe_intermediate_size = 768;
  c.norm_topk_prob = false;
}

// One row per family: its model_type, class name, keys, refusals and defaults.
struct FamilyDecl {
  LlamaConfig::Family family;
  const char* model_type;
  const char* name;
  std::span<const KeyField<Ll>> keys;
  std::span<const Restricted> restricted;
  void (*defaults)(LlamaConfig&);
};
const FamilyDecl kFamilies[] = {
    {LlamaConfig::Family::kLlama, "llama", "Llama", kLlamaKeys, {}, llama_defaults},
    {LlamaConfig::Family::kMistral, "mistral", "Mistral", kMistralKeys, kRestrictedUnquantised, mistral_defaults},
    {LlamaConfig::Family::kMixtral, "mixtral", "Mixtral", kMixtralKeys, kRestrictedUnquantised, mixtral_defaults},
    {LlamaConfig::Family::kQwen2, "qwen2", "Qwen2", kQwen2Keys, kRestrictedUnquantised, qwen2_defaults},
    {LlamaConfig::Family::kQwen3, "qwen3", "Qwen3", kQwen3Keys, kRestrictedUnquantised, qwen3_defaults},
    {LlamaConfig::Family::kQwen2Moe, "qwen2_moe", "Qwen2Moe", kQwen2MoeKeys, kRestrictedUnquantised,
     qwen2_moe_defaults},
    {LlamaConfig::Family::kQwen3Moe, "qwen3_moe", "Qwen3Moe", kQwen3MoeKeys, kRestrictedUnquantised,
     qwen3_moe_defaults},
};

const FamilyDecl& family_decl(LlamaConfig::Family family) {
  for (const FamilyDecl& f : kFamilies)
    if (f.family == family) return f;
  return kFamilies[0];
}

std::string family_list() {
  std::string list;
  for (const FamilyDecl& f : kFamilies) list += std::string(list.empty() ? "" : ", ") + f.model_type;
  return list;
}

// A key of `config`: a RoPE object member, a refused value, or a field of `tables` (the first
// that has it); `nullable` keys set to null take 0 / empty.
template <typename Config>
Status set_key(Config& config, std::type_identity_t<std::initializer_list<std::span<const KeyField<Config>>>> tables,
               std::span<const char* const> nullable, std::span<const Restricted> restricted, const char* model,
               std::string_view key, std::string_view value) {
  if (key.rfind("rope_parameters", 0) == 0 || key.rfind("rope_scaling", 0) == 0) {
    const std::string_view object = key.substr(0, key.find('.'));
    if (object == "rope_parameters" || object == "rope_scaling") return set_rope_key(config.rope, key, value);
  }
  bool handled = false;
  SK_RETURN_IF_ERROR(check_restricted(kRestrictedCommon, key, value, &handled));
  SK_RETURN_IF_ERROR(check_restricted(restricted, key, value, &handled));
  if (handled) return Status::ok();
  const KeyField<Config>* row = nullptr;
  for (std::span<const KeyField<Config>> table : tables)
    if (!row) row = find_key(table, key);
  if (!row) return Status::not_found(std::string(model) + " config has no key '" + std::string(key) + "'");
  if (is_null(value) && std::find(nullable.begin(), nullable.end(), key) != nullable.end()) {
    if (auto* count = std::get_if<int64_t Config::*>(&row->field)) {
      config.** count = 0;
      return Status::ok();
    }
  }
  return std::visit([&](auto member) { return parse_into(key, value, config.*member); }, row->field);
}

Status need_positive(const char* key, int64_t value) {
  if (value > 0) return Status::ok();
  return Status::invalid_argument(quoted(key) + " must be positive, got " + std::to_string(value));
}

// The only value of a key the published code runs (0: absent).
Status need_derived(const char* key, int64_t value, int64_t derived, const std::string& why) {
  if (value == 0 || value == derived) return Status::ok();
  return Status::unimplemented(quoted(key) + " = " + std::to_string(value) + " is not implemented: " + why);
}

}  // namespace

Status LongCatFlashConfig::set(std::string_view key, std::string_view value) {
  return set_key(*this, {kLongCatKeys}, kLongCatNullable, kRestrictedLongCat, "LongCat-Flash", key, value);
}
std::vector<std::string> LongCatFlashConfig::keys() {
  std::vector<std::string> keys = table_keys<L>(kLongCatKeys);
  keys.insert(keys.end(), {"rope_parameters.<field>", "rope_scaling.<field>"});
  return keys;
}

Expected<nn::RopeScaling> LongCatFlashConfig::rope_scaling() const {
  return resolve_rope(rope, rope_theta, max_position_embeddings, qk_rope_head_dim);
}

Status LongCatFlashConfig::validate() const {
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"num_layers", num_layers},
      {"num_attention_heads", num_attention_heads},
      {"q_lora_rank", q_lora_rank},
      {"kv_lora_rank", kv_lora_rank},
      {"qk_nope_head_dim", qk_nope_head_dim},
      {"qk_rope_head_dim", qk_rope_head_dim},
      {"v_head_dim", v_head_dim},
      {"ffn_hidden_size", ffn_hidden_size},
      {"expert_ffn_hidden_size", expert_ffn_hidden_size},
      {"n_routed_experts", n_routed_experts},
      {"moe_topk", moe_topk},
  };
  for (auto [key, value] : positive) SK_RETURN_IF_ERROR(need_positive(key, value));
  if (zero_expert_num < 0)
    return Status::invalid_argument("config key 'zero_expert_num' must be >= 0, got " +
                                    std::to_string(zero_expert_num));
  if (moe_topk > n_routed_experts + zero_expert_num)
    return Status::invalid_argument("config key 'moe_topk' = " + std::to_string(moe_topk) + " exceeds the " +
                                    std::to_string(n_routed_experts + zero_expert_num) +
                                    " experts (n_routed_experts + zero_expert_num)");
  if (qk_rope_head_dim % 2 != 0)
    return Status::invalid_argument("config key 'qk_rope_head_dim' must be even (rotary pairs), got " +
                                    std::to_string(qk_rope_head_dim));
  if (!(rms_norm_eps >= 0) || !(rope_theta > 0))
    return Status::invalid_argument("config keys 'rms_norm_eps' (>= 0) and 'rope_theta' (> 0) are out of range");
  SK_RETURN_IF_ERROR(need_derived("num_key_value_heads", num_key_value_heads, num_attention_heads,
                                  "MLA expands every attention head from the shared latent"));
  SK_RETURN_IF_ERROR(need_derived("qk_head_dim", qk_head_dim, qk_nope_head_dim + qk_rope_head_dim,
                                  "the query splits into qk_nope_head_dim + qk_rope_head_dim"));
  SK_RETURN_IF_ERROR(need_derived("head_dim", head_dim, qk_rope_head_dim,
                                  "the published rotary embedding rotates head_dim dims of qk_rope_head_dim"));
  if (num_hidden_layers != 0 && num_hidden_layers != 2 * num_layers)
    return Status::unimplemented(
        "config key 'num_hidden_layers' = " + std::to_string(num_hidden_layers) +
        " is not 2 * num_layers = " + std::to_string(2 * num_layers) +
        ": transformers counts the two attention sublayers of each layer (num_layers = num_hidden_layers / 2) while "
        "the original code counts layers; give num_layers");
  if (!(max_position_embeddings > 0))
    return Status::invalid_argument("config key 'max_position_embeddings' must be positive");
  auto rope_ok = rope_scaling();
  return rope_ok ? Status::ok() : rope_ok.status();
}

Status LlamaConfig::set(std::string_view key, std::string_view value) {
  if (key == "model_type") {
    for (const FamilyDecl& f : kFamilies) {
      if (value != f.model_type) continue;
      if (family != f.family) {
        *this = LlamaConfig{};
        family = f.family;
        f.defaults(*this);
      }
      return Status::ok();
    }
    return Status::invalid_argument(quoted(key) + ": '" + std::string(value) + "' is not one of " + family_list());
  }
  const FamilyDecl& f = family_decl(family);
  if (family == Family::kLlama && key.substr(0, key.find('.')) == "quantization_config")
    return set_quantization_key(quantization, key, value);
  return set_key(*this, {kDecoderKeys, f.keys}, kDecoderNullable, f.restricted, f.name, key, value);
}

std::vector<std::string> LlamaConfig::keys() {
  std::vector<std::string> keys = table_keys<Ll>(kDecoderKeys);
  keys.insert(keys.end(), {"rope_parameters.<field>", "rope_scaling.<field>", "model_type (" + family_list() + ")",
                           "quantization_config.<field> (llama)"});
  // The family keys, each once, with the families that read it.
  std::vector<std::pair<std::string, std::string>> extra;
  for (const FamilyDecl& f : kFamilies) {
    for (const KeyField<Ll>& row : f.keys) {
      auto it = std::find_if(extra.begin(), extra.end(), [&](const auto& e) { return e.first == row.key; });
      if (it == extra.end()) {
        extra.emplace_back(row.key, f.model_type);
      } else {
        it->second += std::string(", ") + f.model_type;
      }
    }
  }
  for (const auto& [key, families] : extra) keys.push_back(key + " (" + families + ")");
  return keys;
}

const char* LlamaConfig::model_type() const { return family_decl(family).model_type; }
const char* LlamaConfig::model_name() const { return family_decl(family).name; }

bool LlamaConfig::is_sparse_layer(int64_t layer) const {
  if (!is_moe()) return false;
  if (family == Family::kMixtral) return true;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

int64_t LlamaConfig::attention_window(int64_t layer) const {
  switch (family) {
    case Family::kLlama:
      return 0;
    case Family::kMistral:
    case Family::kMixtral:
      return sliding_window;
    case Family::kQwen3Moe:
      return use_sliding_window ? sliding_window : 0;
    case Family::kQwen2:
    case Family::kQwen3:
    case Family::kQwen2Moe:
      break;
  }
  // Qwen2Config / Qwen3Config / Qwen2MoeConfig: the window only with use_sliding_window, on the
  // layers layer_types (or, absent, the config's own rule) marks "sliding_attention".
  if (!use_sliding_window || sliding_window == 0) return 0;
  bool sliding = false;
  if (!layer_types.empty()) {
    sliding = layer < static_cast<int64_t>(layer_types.size()) && layer_types[layer] == "sliding_attention";
  } else if (family == Family::kQwen2Moe) {
    sliding = (layer + 1) % 2 != 0 && layer < max_window_layers;
  } else {
    sliding = layer >= max_window_layers;
  }
  return sliding ? sliding_window : 0;
}

Expected<nn::RopeScaling> LlamaConfig::rope_scaling() const {
  return resolve_rope(rope, rope_theta, max_position_embeddings, resolved_head_dim());
}

Status LlamaConfig::validate() const {
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
  };
  for (auto [key, value] : positive) SK_RETURN_IF_ERROR(need_positive(key, value));
  if (num_key_value_heads < 0) return need_positive("num_key_value_heads", num_key_value_heads);
  if (num_attention_heads % resolved_kv_heads() != 0)
    return Status::invalid_argument(
        "config key 'num_attention_heads' = " + std::to_string(num_attention_heads) +
        " is not a multiple of 'num_key_value_heads' = " + std::to_string(resolved_kv_heads()));
  if (head_dim < 0 || (head_dim == 0 && hidden_size % num_attention_heads != 0))
    return Status::invalid_argument("config key 'head_dim' is missing and hidden_size " + std::to_string(hidden_size) +
                                    " is not a multiple of num_attention_heads " + std::to_string(num_attention_heads));
  if (resolved_head_dim() % 2 != 0)
    return Status::invalid_argument("config key 'head_dim' must be even (rotary halves), got " +
                                    std::to_string(resolved_head_dim()));
  if (!(rms_norm_eps >= 0) || !(rope_theta > 0))
    return Status::invalid_argument("config keys 'rms_norm_eps' (>= 0) and 'rope_theta' (> 0) are out of range");
  if (!(max_position_embeddings > 0))
    return Status::invalid_argument("config key 'max_position_embeddings' must be positive");
  if (quantization.given && quantization.method == CheckpointQuantization::Method::kNone)
    return Status::invalid_argument(
        "config key 'quantization_config.quant_method' is missing: the packed 4-bit layouts read are awq and gptq");
  if (sliding_window < 0) return need_positive("sliding_window", sliding_window);
  for (const std::string& type : layer_types)
    if (type != "full_attention" && type != "sliding_attention")
      return Status::invalid_argument("config key 'layer_types': '" + type +
                                      "' is not full_attention or sliding_attention");
  if (!layer_types.empty() && static_cast<int64_t>(layer_types.size()) != num_hidden_layers)
    return Status::invalid_argument("config key 'layer_types' has " + std::to_string(layer_types.size()) +
                                    " entries for num_hidden_layers = " + std::to_string(num_hidden_layers));
  const bool moe_family = family == Family::kMixtral || family == Family::kQwen2Moe || family == Family::kQwen3Moe;
  if (moe_family && num_local_experts != 0) {
    const char* experts = family == Family::kMixtral ? "num_local_experts" : "num_experts";
    SK_RETURN_IF_ERROR(need_positive(experts, num_local_experts));
    SK_RETURN_IF_ERROR(need_positive("num_experts_per_tok", num_experts_per_tok));
    if (num_experts_per_tok > num_local_experts)
      return Status::invalid_argument("config key 'num_experts_per_tok' = " + std::to_string(num_experts_per_tok) +
                                      " exceeds " + experts + " = " + std::to_string(num_local_experts));
    if (family != Family::kMixtral) {
      SK_RETURN_IF_ERROR(need_positive("moe_intermediate_size", moe_intermediate_size));
      SK_RETURN_IF_ERROR(need_positive("decoder_sparse_step", decoder_sparse_step));
    }
    if (family == Family::kQwen2Moe)
      SK_RETURN_IF_ERROR(need_positive("shared_expert_intermediate_size", shared_expert_intermediate_size));
  } else if (family == Family::kMixtral) {
    return need_positive("num_local_experts", num_local_experts);
  }
  auto rope_ok = rope_scaling();
  return rope_ok ? Status::ok() : rope_ok.status();
}

void deepseek_v2_defaults(DeepseekConfig& c) {
  c.vocab_size = 102400;
  c.hidden_size = 4096;
  c.intermediate_size = 11008;
  c.moe_intermediate_size = 1407;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 0;
  c.n_shared_experts = 2;
  c.n_routed_experts = 64;
  c.routed_scaling_factor = 1.0;
  c.n_group = 0;
  c.topk_group = 0;
  c.num_experts_per_tok = 0;  // None: a checkpoint must give it
  c.first_k_dense_replace = 0;
  c.norm_topk_prob = false;
  c.max_position_embeddings = 2048;
}

Status DeepseekConfig::set(std::string_view key, std::string_view value) {
  if (key == "model_type") {
    const Family f = value == "deepseek_v2" ? Family::kV2 : Family::kV3;
    if (value != "deepseek_v2" && value != "deepseek_v3")
      return Status::invalid_argument(quoted(key) + ": '" + std::string(value) + "' is not deepseek_v2 or deepseek_v3");
    if (family != f) {
      *this = DeepseekConfig{};
      family = f;
      if (f == Family::kV2) deepseek_v2_defaults(*this);
    }
    return Status::ok();
  }
  if (family == Family::kV2 && key == "topk_method") {
    if (value == "greedy" || is_null(value)) {
      group_limited = false;
    } else if (value == "group_limited_greedy") {
      group_limited = true;  // validate() refuses it unless every group is chosen
    } else {
      return Status::unimplemented(quoted(key) + ": '" + std::string(value) +
                                   "' is not implemented: DeepSeek-V2 routes by greedy or group_limited_greedy");
    }
    return Status::ok();
  }
  if (family == Family::kV2)
    return set_key(*this, {kDeepseekKeys, kDeepseekV2Keys}, kDeepseekNullable, kRestrictedDeepseekV2, model_name(), key,
                   value);
  return set_key(*this, {kDeepseekKeys, kDeepseekV3Keys}, kDeepseekNullable, kRestrictedDeepseekV3, model_name(), key,
                 value);
}

std::vector<std::string> DeepseekConfig::keys() {
  std::vector<std::string> keys = table_keys<Ds>(kDeepseekKeys);
  keys.insert(keys.end(), {"rope_parameters.<field>", "rope_scaling.<field>", "model_type (deepseek_v2, deepseek_v3)",
                           "topk_method (deepseek_v2)"});
  for (const KeyField<Ds>& row : kDeepseekV2Keys) keys.push_back(std::string(row.key) + " (deepseek_v2)");
  for (const KeyField<Ds>& row : kDeepseekV3Keys) keys.push_back(std::string(row.key) + " (deepseek_v3)");
  return keys;
}

Expected<nn::RopeScaling> DeepseekConfig::rope_scaling() const {
  return resolve_rope(rope, rope_theta, max_position_embeddings, qk_rope_head_dim);
}

Status DeepseekConfig::validate() const {
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"moe_intermediate_size", moe_intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"n_shared_experts", n_shared_experts},
      {"n_routed_experts", n_routed_experts},
      {"kv_lora_rank", kv_lora_rank},
      {"qk_rope_head_dim", qk_rope_head_dim},
      {"v_head_dim", v_head_dim},
      {"qk_nope_head_dim", qk_nope_head_dim},
      {"num_experts_per_tok", num_experts_per_tok},
  };
  for (auto [key, value] : positive) SK_RETURN_IF_ERROR(need_positive(key, value));
  for (auto [key, value] : {std::pair<const char*, int64_t>{"q_lora_rank", q_lora_rank},
                            {"n_group", n_group},
                            {"topk_group", topk_group},
                            {"first_k_dense_replace", first_k_dense_replace},
                            {"num_nextn_predict_layers", num_nextn_predict_layers}})
    if (value < 0)
      return Status::invalid_argument(quoted(key) + " must be >= 0 (or null), got " + std::to_string(value));
  if (num_experts_per_tok > n_routed_experts)
    return Status::invalid_argument(quoted("num_experts_per_tok") + " = " + std::to_string(num_experts_per_tok) +
                                    " exceeds n_routed_experts = " + std::to_string(n_routed_experts));
  if (qk_rope_head_dim % 2 != 0)
    return Status::invalid_argument(quoted("qk_rope_head_dim") + " must be even (rotary pairs), got " +
                                    std::to_string(qk_rope_head_dim));
  if (!(rms_norm_eps >= 0) || !(rope_theta > 0))
    return Status::invalid_argument("config keys 'rms_norm_eps' (>= 0) and 'rope_theta' (> 0) are out of range");
  if (!std::isfinite(routed_scaling_factor))
    return Status::invalid_argument(quoted("routed_scaling_factor") + " must be finite");
  if (!(max_position_embeddings > 0))
    return Status::invalid_argument(quoted("max_position_embeddings") + " must be positive");
  SK_RETURN_IF_ERROR(need_derived("num_key_value_heads", num_key_value_heads, num_attention_heads,
                                  "MLA expands every attention head from the shared latent"));
  SK_RETURN_IF_ERROR(need_derived("qk_head_dim", qk_head_dim, qk_nope_head_dim + qk_rope_head_dim,
                                  "the query splits into qk_nope_head_dim + qk_rope_head_dim"));
  SK_RETURN_IF_ERROR(need_derived("head_dim", head_dim, qk_rope_head_dim,
                                  "transformers sets head_dim to qk_rope_head_dim (the rotary embedding's width)"));
  // Routing groups: V3 always routes within them; V2 only with group_limited_greedy.
  const bool grouped = family == Family::kV3 || group_limited;
  if (grouped) {
    const int64_t groups = this->groups(), chosen = groups_chosen();
    if (n_routed_experts % groups != 0)
      return Status::invalid_argument(quoted("n_group") + " = " + std::to_string(groups) +
                                      " does not divide n_routed_experts = " + std::to_string(n_routed_experts));
    if (chosen > groups)
      return Status::invalid_argument(quoted("topk_group") + " = " + std::to_string(chosen) +
                                      " exceeds n_group = " + std::to_string(groups));
    if (num_experts_per_tok > chosen * (n_routed_experts / groups))
      return Status::invalid_argument(quoted("num_experts_per_tok") + " = " + std::to_string(num_experts_per_tok) +
                                      " exceeds the " + std::to_string(chosen * (n_routed_experts / groups)) +
                                      " experts of the topk_group chosen groups");
    if (family == Family::kV2 && chosen < groups)
      return Status::unimplemented(
          quoted("topk_method") +
          ": 'group_limited_greedy' with topk_group < n_group is not implemented (it ranks a group by its best "
          "score; the router kernel ranks by the sum of the two best, DeepSeek-V3's rule)");
  }
  auto rope_ok = rope_scaling();
  return rope_ok ? Status::ok() : rope_ok.status();
}

const char* weight_dtype_name(WeightDType dtype) {
  switch (dtype) {
    case WeightDType::kF32:
      return "f32";
    case WeightDType::kBF16:
      return "bf16";
    case WeightDType::kW8A8:
      return "w8a8";
    case WeightDType::kF16:
      return "f16";
    case WeightDType::kW4A8:
      return "w4a8";
    case WeightDType::kW4:
      return "w4";
  }
  return "?";
}

Expected<WeightDType> parse_weight_dtype(std::string_view text) {
  for (WeightDType d : {WeightDType::kF32, WeightDType::kBF16, WeightDType::kF16, WeightDType::kW8A8,
                        WeightDType::kW4A8, WeightDType::kW4})
    if (text == weight_dtype_name(d)) return d;
  return Status::invalid_argument("weight dtype '" + std::string(text) +
                                  "' is not one of f32, bf16, f16, w8a8, w4a8, w4");
}

bool is_int4(WeightDType dtype) { return dtype == WeightDType::kW4A8 || dtype == WeightDType::kW4; }

Status BuildOptions::validate() const {
  auto bad = [](const char* option, const std::string& why) {
    return Status::invalid_argument("build option '" + std::string(option) + "': " + why);
  };
  if (kv_cache_dtype != DType::kF32 && kv_cache_dtype != DType::kBF16)
    return bad("kv_cache_dtype", std::string(dtype_name(kv_cache_dtype)) + " is not f32 or bf16");
  if (batch <= 0) return bad("batch", "must be positive, got " + std::to_string(batch));
  if (prefill_tokens <= 0) return bad("prefill_tokens", "must be positive, got " + std::to_string(prefill_tokens));
  if (block_size <= 0) return bad("block_size", "must be positive, got " + std::to_string(block_size));
  if (max_context <= 0) return bad("max_context", "must be positive, got " + std::to_string(max_context));
  if (cache_sequences != 0 && cache_sequences < batch)
    return bad("cache_sequences", "must be 0 (batch) or at least batch (" + std::to_string(batch) + "), got " +
                                      std::to_string(cache_sequences));
  if (moe_core_limit < 0) return bad("moe_core_limit", "must be >= 0, got " + std::to_string(moe_core_limit));
  if (multi_streams < 0 || multi_streams > 2)
    return bad("multi_streams", "must be 0, 1 or 2, got " + std::to_string(multi_streams));
  if (prefetch_core_limit < 0)
    return bad("prefetch_core_limit", "must be >= 0, got " + std::to_string(prefetch_core_limit));
  if (prefetch && multi_streams == 0)
    return bad("prefetch", "needs multi_streams 1 or 2 (prefetches run on a stream of their own)");
  const int32_t ranks = parallel.ranks.size;
  if (ranks < 1 || parallel.ranks.rank < 0 || parallel.ranks.rank >= ranks)
    return bad("parallel.ranks",
               "rank " + std::to_string(parallel.ranks.rank) + " of " + std::to_string(ranks) + " ranks is not a rank");
  for (const auto& [name, value] :
       {std::pair<const char*, int32_t>{"parallel.tp", parallel.tp}, {"parallel.ep", parallel.ep}})
    if (value != 1 && value != ranks)
      return bad(name, "must be 1 or the number of ranks (" + std::to_string(ranks) + "), got " +
                           std::to_string(value) +
                           (value > ranks ? "; run with as many ranks (mpirun -np " + std::to_string(value) + ")"
                                          : "; splitting the ranks into groups is not supported yet"));
  if (int4_group < 32 || (int4_group & (int4_group - 1)) != 0)
    return bad("int4_group", "must be a power of two >= 32, got " + std::to_string(int4_group));
  return Status::ok();
}

}  // namespace sk::models
