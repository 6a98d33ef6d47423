// A checkpoint's config.json and tensors against what the published definitions read: every
// config key applied, refused or reported ignored; every tensor read or reported.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "superkernel/models.h"
#include "superkernel/weights.h"

namespace sk::models {
namespace {

struct Reason {
  const char* key;
  const char* why;
};

// Keys of config.json that do not change the logits, with why.
const Reason kIgnoredCommon[] = {
    {"model_type", "names the architecture"},
    {"architectures", "metadata"},
    {"auto_map", "metadata (remote code)"},
    {"transformers_version", "metadata"},
    {"_name_or_path", "metadata"},
    {"torch_dtype", "the stored dtype: weights are converted to the configured model dtype"},
    {"dtype", "the stored dtype: weights are converted to the configured model dtype"},
    {"bos_token_id", "a token id for generation, not part of the logits"},
    {"eos_token_id", "a token id for generation, not part of the logits"},
    {"pad_token_id", "a token id for generation (the embedding's padding row only matters in training)"},
    {"sep_token_id", "a token id for generation, not part of the logits"},
    {"decoder_start_token_id", "a token id for generation, not part of the logits"},
    {"use_cache", "a generation setting"},
    {"initializer_range", "initialises untrained weights only"},
    {"attention_dropout", "dropout acts in training only"},
    {"output_attentions", "what the forward returns, not the logits"},
    {"output_hidden_states", "what the forward returns, not the logits"},
    {"return_dict", "what the forward returns, not the logits"},
    {"_attn_implementation", "the attention kernel transformers picks: same math"},
    {"attn_implementation", "the attention kernel transformers picks: same math"},
    {"tokenizer_class", "the tokenizer"},
};
const Reason kIgnoredLlama[] = {
    {"pretraining_tp", "not read by transformers' Llama (its slices sum to the same linear layers)"},
};
const Reason kIgnoredMoe[] = {
    {"output_router_logits", "what the forward returns, not the logits"},
    {"router_aux_loss_coef", "the training loss's load-balancing term"},
    {"router_jitter_noise", "multiplies the router's input by noise in training only"},
};
const Reason kIgnoredNone[] = {{"", ""}};
const Reason kIgnoredDeepseek[] = {
    {"output_router_logits", "what the forward returns, not the logits"},
    {"aux_loss_alpha", "the training loss's load-balancing term"},
    {"seq_aux", "the training loss's load-balancing term"},
    {"router_aux_loss_coef", "the training loss's load-balancing term"},
    {"ep_size", "expert parallelism, a deployment setting"},
    {"pretraining_tp", "not read by transformers' DeepSeek (its slices sum to the same linear layers)"},
};
const Reason kIgnoredLongCat[] = {
    {"output_router_logits", "what the forward returns, not the logits"},
    {"ep_size", "expert parallelism, a deployment setting"},
    {"params_dtype", "a dtype: weights are converted to the configured model dtype"},
    {"rounter_params_dtype", "the router's dtype: it runs in f32, as transformers keeps it"},
    {"router_dtype", "the router's dtype: it runs in f32, as transformers keeps it"},
    {"nextn_use_scmoe", "the multi-token-prediction layer, which decoding does not run"},
    {"num_nextn_layers", "the multi-token-prediction layer, which decoding does not run"},
    {"num_nextn_predict_layers", "the multi-token-prediction layer, which decoding does not run"},
};

template <size_t N>
const char* find_reason(const Reason (&table)[N], std::string_view key) {
  for (const Reason& r : table)
    if (key == r.key) return r.why;
  return nullptr;
}

// Which config class a checkpoint is read as.
enum class Kind { kLlama, kLongCat, kDeepseek };

// Names transformers maps onto other keys (the config classes' attribute_map).
std::string_view canonical(std::string_view key, Kind kind) {
  if (kind == Kind::kLlama) return key == "num_experts" ? "num_local_experts" : key;  // Mixtral's, Qwen3-MoE's alias
  if (kind == Kind::kDeepseek) {
    if (key == "num_experts" || key == "num_local_experts") return "n_routed_experts";
    return key == "num_mtp_layers" ? "num_nextn_predict_layers" : key;
  }
  if (key == "num_local_experts") return "n_routed_experts";
  if (key == "num_experts_per_tok") return "moe_topk";
  if (key == "intermediate_size") return "ffn_hidden_size";
  if (key == "moe_intermediate_size") return "expert_ffn_hidden_size";
  return key;
}

// "FILE:LINE: key 'k'" + the message, without the message's own "config key 'k'" opening.
std::string at(const std::string& where, const std::string& message, const std::string& key) {
  const std::string prefix = "config key '" + key + "'";
  if (message.rfind(prefix, 0) == 0) return where + message.substr(prefix.size());
  return where + ": " + message;
}

// The key a message opens with ("config key 'k'..."), or empty.
std::string key_named(const std::string& message) {
  const std::string prefix = "config key '";
  if (message.rfind(prefix, 0) != 0) return "";
  const size_t end = message.find('\'', prefix.size());
  return end == std::string::npos ? "" : message.substr(prefix.size(), end - prefix.size());
}

template <typename Config, size_t N>
Status load_json(const Checkpoint& ckpt, Config& config, const Reason (&model_ignored)[N], Kind kind, const char* model,
                 std::vector<IgnoredKey>* ignored) {
  const std::vector<ConfigEntry>& entries = ckpt.config_tree();
  auto where = [&](int line, const std::string& key) {
    return ckpt.config_path() + ":" + std::to_string(line) + ": key '" + key + "'";
  };
  std::map<std::string, const ConfigEntry*, std::less<>> set_by;  // canonical key -> the entry that set it
  std::string skip;                                               // members of an object taken whole
  for (const ConfigEntry& e : entries) {
    if (!skip.empty() && e.key.rfind(skip, 0) == 0) continue;
    skip.clear();
    // The RoPE objects' members arrive as "rope_parameters.<field>" entries.
    if (e.kind == ConfigEntry::Kind::kObject && (e.key == "rope_parameters" || e.key == "rope_scaling")) continue;
    // Llama reads packed 4-bit checkpoints field by field ("quantization_config.<field>").
    const bool by_field = kind == Kind::kLlama && e.key == "quantization_config";
    if (e.kind == ConfigEntry::Kind::kObject && !by_field) skip = e.key + ".";
    Status s = config.set(e.key, e.value);
    if (s.code() == StatusCode::kNotFound) {
      if (ignored) {
        const char* why = find_reason(model_ignored, e.key);
        if (!why) why = find_reason(kIgnoredCommon, e.key);
        ignored->push_back(
            {e.key, e.line, why ? why : std::string("not read by transformers' ") + model + " definition"});
      }
      continue;
    }
    if (!s) return Status(s.code(), at(where(e.line, e.key), s.message(), e.key));
    const std::string_view key = canonical(e.key, kind);
    if (auto it = set_by.find(key); it != set_by.end() && it->second->value != e.value)
      return Status::invalid_argument(where(e.line, e.key) + ": '" + e.value + "' disagrees with key '" +
                                      it->second->key + "' = '" + it->second->value + "' on line " +
                                      std::to_string(it->second->line) + " (transformers reads both as '" +
                                      std::string(key) + "')");
    set_by.emplace(std::string(key), &e);
  }
  Status s = config.validate();
  if (s) return s;
  // Point at the line of the key the message names, or of its object ("rope_parameters" for a
  // field it lacks); the last such entry, the one that counts.
  const std::string key = key_named(s.message());
  const std::string object = key.substr(0, key.find('.'));
  const ConfigEntry* named = nullptr;
  for (const ConfigEntry& e : entries)
    if (!key.empty() && e.key == key) named = &e;
  for (const ConfigEntry& e : entries)
    if (!named && !key.empty() && e.key == object) named = &e;
  if (!named) return s.with_context(ckpt.config_path());
  return Status(s.code(), at(where(named->line, key), s.message(), key));
}

// Names the published definition itself leaves unread: LongCat-Flash's `model.mtp.*` and
// DeepSeek-V3's `model.layers.{i}.*` past the `mtp_from` decoder layers (multi-token prediction).
bool skipped_by_definition(const std::string& name, Kind kind, int64_t mtp_from) {
  if (name.find("rotary_emb.inv_freq") != std::string::npos) return true;  // recomputed from the config
  if (kind == Kind::kLongCat) return name.rfind("model.mtp.", 0) == 0;
  if (kind != Kind::kDeepseek || mtp_from < 0 || name.rfind("model.layers.", 0) != 0) return false;
  const char* digits = name.c_str() + std::strlen("model.layers.");
  char* end = nullptr;
  const long layer = std::strtol(digits, &end, 10);
  return end != digits && *end == '.' && layer >= mtp_from;
}

// `model.layers.{i}.mlp.experts.{e}.*` with e outside rank `ep_rank.first`'s share of `experts`.
bool another_ranks_expert(const std::string& name, int64_t experts, std::pair<int32_t, int32_t> ep_rank) {
  if (ep_rank.second <= 1) return false;
  const size_t at = name.find(".mlp.experts.");
  if (name.rfind("model.layers.", 0) != 0 || at == std::string::npos) return false;
  const char* digits = name.c_str() + at + std::strlen(".mlp.experts.");
  char* end = nullptr;
  const long e = std::strtol(digits, &end, 10);
  if (end == digits || *end != '.') return false;  // packed tensors: every rank reads its part
  const int64_t per_rank = experts / ep_rank.second;
  return e < per_rank * ep_rank.first || e >= per_rank * (ep_rank.first + 1);
}

Status check_unread(const WeightSource& weights, Kind kind, bool tied, bool allow_unread,
                    std::vector<std::string>* skipped, int64_t experts = 0,
                    std::pair<int32_t, int32_t> ep_rank = {0, 1}, int64_t mtp_from = -1) {
  std::vector<std::string> unread;
  for (std::string& name : weights.unread_tensors()) {
    if (another_ranks_expert(name, experts, ep_rank)) continue;
    if (skipped_by_definition(name, kind, mtp_from) || allow_unread) {
      if (skipped) skipped->push_back(std::move(name));
    } else {
      unread.push_back(std::move(name));
    }
  }
  if (unread.empty()) return Status::ok();
  std::string list;
  for (size_t i = 0; i < unread.size() && i < 8; ++i) list += (i ? ", " : "") + unread[i];
  if (unread.size() > 8) list += " and " + std::to_string(unread.size() - 8) + " more";
  std::string hint;
  if (tied && std::find(unread.begin(), unread.end(), "lm_head.weight") != unread.end())
    hint = "; tie_word_embeddings is true, so the LM head is model.embed_tokens.weight";
  return Status::invalid_argument(
      weights.describe() + ": " + std::to_string(unread.size()) + " tensor" + (unread.size() == 1 ? "" : "s") +
      " the model does not read: " + list + hint +
      " (the config and the checkpoint disagree: check num_layers / num_hidden_layers, attention_bias, mlp_bias, "
      "tie_word_embeddings)");
}

}  // namespace

Status load_config_json(const Checkpoint& checkpoint, LongCatFlashConfig& config, std::vector<IgnoredKey>* ignored) {
  return load_json(checkpoint, config, kIgnoredLongCat, Kind::kLongCat, "LongcatFlash", ignored);
}

Status load_config_json(const Checkpoint& checkpoint, LlamaConfig& config, std::vector<IgnoredKey>* ignored) {
  // model_type first: it chooses the family, whose keys and defaults the rest are read with.
  for (const ConfigEntry& e : checkpoint.config_tree()) {
    if (e.key != "model_type") continue;
    if (Status s = config.set(e.key, e.value); !s)
      return Status(s.code(), at(checkpoint.config_path() + ":" + std::to_string(e.line) + ": key 'model_type'",
                                 s.message(), "model_type"));
  }
  using F = LlamaConfig::Family;
  switch (config.family) {
    case F::kLlama:
      return load_json(checkpoint, config, kIgnoredLlama, Kind::kLlama, config.model_name(), ignored);
    case F::kMixtral:
    case F::kQwen2Moe:
    case F::kQwen3Moe:
      return load_json(checkpoint, config, kIgnoredMoe, Kind::kLlama, config.model_name(), ignored);
    case F::kMistral:
    case F::kQwen2:
    case F::kQwen3:
      break;
  }
  return load_json(checkpoint, config, kIgnoredNone, Kind::kLlama, config.model_name(), ignored);
}

Status check_unread_tensors(const LongCatFlashConfig& config, const WeightSource& weights, bool allow_unread,
                            std::vector<std::string>* skipped, std::pair<int32_t, int32_t> ep_rank) {
  return check_unread(weights, Kind::kLongCat, config.tie_word_embeddings, allow_unread, skipped,
                      config.n_routed_experts, ep_rank);
}

Status check_unread_tensors(const LlamaConfig& config, const WeightSource& weights, bool allow_unread,
                            std::vector<std::string>* skipped) {
  return check_unread(weights, Kind::kLlama, config.tie_word_embeddings, allow_unread, skipped);
}

Status load_config_json(const Checkpoint& checkpoint, DeepseekConfig& config, std::vector<IgnoredKey>* ignored) {
  // model_type first: it chooses the family, whose keys and defaults the rest are read with.
  for (const ConfigEntry& e : checkpoint.config_tree()) {
    if (e.key != "model_type") continue;
    if (Status s = config.set(e.key, e.value); !s)
      return Status(s.code(), at(checkpoint.config_path() + ":" + std::to_string(e.line) + ": key 'model_type'",
                                 s.message(), "model_type"));
  }
  return load_json(checkpoint, config, kIgnoredDeepseek, Kind::kDeepseek, config.model_name(), ignored);
}

Status check_unread_tensors(const DeepseekConfig& config, const WeightSource& weights, bool allow_unread,
                            std::vector<std::string>* skipped) {
  const int64_t mtp_from = config.num_nextn_predict_layers > 0 ? config.num_hidden_layers : -1;
  return check_unread(weights, Kind::kDeepseek, config.tie_word_embeddings, allow_unread, skipped, 0, {0, 1}, mtp_from);
}

}  // namespace sk::models
