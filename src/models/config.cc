// Model configs (published config.json keys), weight dtypes and build options.
#include <charconv>
#include <cmath>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "superkernel/models.h"

namespace sk::models {
namespace {

template <typename Config>
using Field = std::variant<int64_t Config::*, double Config::*, bool Config::*>;

template <typename Config>
struct KeyField {
  const char* key;
  Field<Config> field;
};

Status bad_value(std::string_view key, std::string_view value, const char* expected) {
  return Status::invalid_argument("config key '" + std::string(key) + "': '" + std::string(value) + "' is not " +
                                  expected);
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

template <typename Config, size_t N>
Status set_field(Config& config, const KeyField<Config> (&table)[N], const char* model, std::string_view key,
                 std::string_view value) {
  for (const KeyField<Config>& row : table) {
    if (key != row.key) continue;
    return std::visit([&](auto member) { return parse_into(key, value, config.*member); }, row.field);
  }
  return Status::not_found(std::string(model) + " config has no key '" + std::string(key) + "'");
}

template <typename Config, size_t N>
std::vector<std::string> table_keys(const KeyField<Config> (&table)[N]) {
  std::vector<std::string> keys;
  for (const KeyField<Config>& row : table) keys.emplace_back(row.key);
  return keys;
}

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
};

using Ll = LlamaConfig;
const KeyField<Ll> kLlamaKeys[] = {
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
};

Status need_positive(const char* key, int64_t value) {
  if (value > 0) return Status::ok();
  return Status::invalid_argument("config key '" + std::string(key) + "' must be positive, got " +
                                  std::to_string(value));
}

}  // namespace

Status LongCatFlashConfig::set(std::string_view key, std::string_view value) {
  return set_field(*this, kLongCatKeys, "LongCat-Flash", key, value);
}
std::vector<std::string> LongCatFlashConfig::keys() { return table_keys(kLongCatKeys); }

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
  return Status::ok();
}

Status LlamaConfig::set(std::string_view key, std::string_view value) {
  return set_field(*this, kLlamaKeys, "Llama", key, value);
}
std::vector<std::string> LlamaConfig::keys() { return table_keys(kLlamaKeys); }

Status LlamaConfig::validate() const {
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
  };
  for (auto [key, value] : positive) SK_RETURN_IF_ERROR(need_positive(key, value));
  if (num_attention_heads % num_key_value_heads != 0)
    return Status::invalid_argument(
        "config key 'num_attention_heads' = " + std::to_string(num_attention_heads) +
        " is not a multiple of 'num_key_value_heads' = " + std::to_string(num_key_value_heads));
  if (head_dim < 0 || (head_dim == 0 && hidden_size % num_attention_heads != 0))
    return Status::invalid_argument("config key 'head_dim' is missing and hidden_size " + std::to_string(hidden_size) +
                                    " is not a multiple of num_attention_heads " + std::to_string(num_attention_heads));
  if (resolved_head_dim() % 2 != 0)
    return Status::invalid_argument("config key 'head_dim' must be even (rotary halves), got " +
                                    std::to_string(resolved_head_dim()));
  if (!(rms_norm_eps >= 0) || !(rope_theta > 0))
    return Status::invalid_argument("config keys 'rms_norm_eps' (>= 0) and 'rope_theta' (> 0) are out of range");
  return Status::ok();
}

const char* weight_dtype_name(WeightDType dtype) {
  switch (dtype) {
    case WeightDType::kF32:
      return "f32";
    case WeightDType::kBF16:
      return "bf16";
    case WeightDType::kW8A8:
      return "w8a8";
  }
  return "?";
}

Expected<WeightDType> parse_weight_dtype(std::string_view text) {
  for (WeightDType d : {WeightDType::kF32, WeightDType::kBF16, WeightDType::kW8A8})
    if (text == weight_dtype_name(d)) return d;
  return Status::invalid_argument("weight dtype '" + std::string(text) + "' is not one of f32, bf16, w8a8");
}

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
  return Status::ok();
}

}  // namespace sk::models
