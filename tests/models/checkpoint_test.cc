// Checkpoints whose config.json or tensors say something the model would not do: every config key
// the published definitions read is applied or refused naming its line, keys that do not change
// the logits are listed as ignored, and tensors no graph reads are an error listing them.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <unistd.h>

#include "superkernel/models.h"
#include "superkernel/runtime.h"
#include "superkernel/weights.h"

namespace sk {
namespace {

namespace fs = std::filesystem;

models::LlamaConfig tiny_llama() {
  models::LlamaConfig c;
  c.vocab_size = 32;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  return c;
}

models::LongCatFlashConfig tiny_longcat() {
  models::LongCatFlashConfig c;
  c.vocab_size = 32;
  c.hidden_size = 16;
  c.num_layers = 1;
  c.num_attention_heads = 2;
  c.q_lora_rank = 8;
  c.kv_lora_rank = 8;
  c.qk_nope_head_dim = 4;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 4;
  c.ffn_hidden_size = 24;
  c.expert_ffn_hidden_size = 8;
  c.n_routed_experts = 2;
  c.zero_expert_num = 1;
  c.moe_topk = 2;
  return c;
}

// config.json lines: "{", then one key per line from line 2 on, then "}".
using JsonKeys = std::vector<std::pair<std::string, std::string>>;  // key, JSON value text

const std::vector<std::pair<std::string, std::string>> kLlamaJson = {
    {"vocab_size", "32"},       {"hidden_size", "16"},        {"intermediate_size", "24"},
    {"num_hidden_layers", "2"}, {"num_attention_heads", "2"}, {"num_key_value_heads", "1"},
};
const std::vector<std::pair<std::string, std::string>> kLongCatJson = {
    {"vocab_size", "32"},
    {"hidden_size", "16"},
    {"num_layers", "1"},
    {"num_attention_heads", "2"},
    {"q_lora_rank", "8"},
    {"kv_lora_rank", "8"},
    {"qk_nope_head_dim", "4"},
    {"qk_rope_head_dim", "4"},
    {"v_head_dim", "4"},
    {"ffn_hidden_size", "24"},
    {"expert_ffn_hidden_size", "8"},
    {"n_routed_experts", "2"},
    {"zero_expert_num", "1"},
    {"moe_topk", "2"},
};

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "sk_models_checkpoint_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
    // A checkpoint needs a tensor file; the config-only tests read none of it.
    const float one = 1.0f;
    EXPECT_TRUE(write_safetensors(dir_ + "/model.safetensors", {{"placeholder", DType::kF32, {1}, &one, 4}}));
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // The tensors a decode graph of `config` reads, with random values, plus `extra` names (copies
  // of the embedding, any shape will do for tensors nobody reads).
  template <typename Config, typename Build>
  void write_tensors(const Config& config, Build build, const std::vector<std::string>& extra = {}) {
    models::BuildOptions o;
    auto weights = random_weights(7);
    auto g = build(config, o, models::Phase::kDecode, *weights);
    ASSERT_TRUE(g) << g.status().to_string();
    std::vector<SafetensorsEntry> entries;
    for (size_t i = 0; i < g->num_tensors(); ++i) {
      const TensorInfo& t = g->tensor(static_cast<int32_t>(i));
      if (t.kind != TensorKind::kConstant || t.external_data == nullptr) continue;
      entries.push_back({t.name, t.dtype, t.shape, t.external_data, static_cast<size_t>(t.storage_bytes)});
    }
    const SafetensorsEntry first = entries.front();
    for (const std::string& name : extra) entries.push_back({name, first.dtype, first.shape, first.data, first.bytes});
    ASSERT_TRUE(write_safetensors(dir_ + "/model.safetensors", entries));
  }

  void write_json(const std::string& model_type, JsonKeys keys, const JsonKeys& more) {
    keys.insert(keys.end(), more.begin(), more.end());
    std::ofstream out(dir_ + "/config.json");
    out << "{\n  \"model_type\": \"" << model_type << "\"";
    for (const auto& [k, v] : keys) out << ",\n  \"" << k << "\": " << v;
    out << "\n}\n";
  }
  // The line of `key` in what write_json wrote (model_type is line 2).
  // An object's fields ("rope_parameters.factor") are on the object's line.
  static int line_of(const std::string& key, const JsonKeys& base, const JsonKeys& more) {
    JsonKeys all = base;
    all.insert(all.end(), more.begin(), more.end());
    const std::string object = key.substr(0, key.find('.'));
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].first == key || all[i].first == object) return static_cast<int>(i) + 3;
    return 0;
  }

  std::shared_ptr<Checkpoint> open() {
    auto ckpt = Checkpoint::open(dir_);
    EXPECT_TRUE(ckpt) << ckpt.status().to_string();
    return ckpt ? *ckpt : nullptr;
  }

  // load_config_json fails naming `key` at its line and saying `what`.
  template <typename Config>
  void expect_refused(const JsonKeys& base, const JsonKeys& more, const std::string& key, const std::string& what) {
    write_json(std::is_same_v<Config, models::LlamaConfig>      ? "llama"
               : std::is_same_v<Config, models::DeepseekConfig> ? "deepseek_v3"
                                                                : "longcat_flash",
               base, more);
    auto ckpt = open();
    ASSERT_TRUE(ckpt);
    Config c;
    Status s = models::load_config_json(*ckpt, c);
    ASSERT_FALSE(s) << key;
    const std::string where = "config.json:" + std::to_string(line_of(key, base, more)) + ": key '" + key + "'";
    EXPECT_NE(s.message().find(where), std::string::npos) << s.message() << "\nexpected: " << where;
    EXPECT_NE(s.message().find(what), std::string::npos) << s.message() << "\nexpected: " << what;
  }

  std::string dir_;
};

Expected<Graph> llama(const models::LlamaConfig& c, const models::BuildOptions& o, models::Phase p, WeightSource& w) {
  return models::build_llama(c, o, p, w);
}
Expected<Graph> longcat(const models::LongCatFlashConfig& c, const models::BuildOptions& o, models::Phase p,
                        WeightSource& w) {
  return models::build_longcat_flash(c, o, p, w);
}

TEST_F(CheckpointTest, KeysThatChangeTheMathAreRefusedByLine) {
  using models::LlamaConfig;
  using models::LongCatFlashConfig;
  expect_refused<LlamaConfig>(kLlamaJson, {{"hidden_act", "\"gelu\""}}, "hidden_act", "'gelu' is not implemented");
  expect_refused<LlamaConfig>(kLlamaJson, {{"quantization_config", "{\"quant_method\": \"fp8\"}"}},
                              "quantization_config.quant_method", "'fp8' is not implemented");
  expect_refused<LlamaConfig>(kLlamaJson, {{"partial_rotary_factor", "0.5"}}, "partial_rotary_factor",
                              "whole rotary head");
  expect_refused<LlamaConfig>(kLlamaJson, {{"is_causal", "false"}}, "is_causal", "causal");
  expect_refused<LlamaConfig>(kLlamaJson, {{"rms_norm_eps", "\"small\""}}, "rms_norm_eps", "not a finite number");
  expect_refused<LongCatFlashConfig>(kLongCatJson, {{"norm_topk_prob", "true"}}, "norm_topk_prob", "renormalise");
  expect_refused<LongCatFlashConfig>(kLongCatJson, {{"zero_expert_type", "\"copy\""}}, "zero_expert_type", "identity");
  expect_refused<LongCatFlashConfig>(kLongCatJson, {{"router_bias", "true"}}, "router_bias",
                                     "ignores the classifier bias");
  expect_refused<LongCatFlashConfig>(kLongCatJson, {{"num_key_value_heads", "1"}}, "num_key_value_heads",
                                     "every attention head");
  expect_refused<LongCatFlashConfig>(kLongCatJson, {{"qk_head_dim", "9"}}, "qk_head_dim", "qk_nope_head_dim");
  expect_refused<LongCatFlashConfig>(kLongCatJson, {{"head_dim", "64"}}, "head_dim", "rotary");
  expect_refused<LongCatFlashConfig>(kLongCatJson, {{"num_hidden_layers", "1"}}, "num_hidden_layers", "2 * num_layers");
  // An alias transformers maps onto a key may not disagree with it.
  expect_refused<LongCatFlashConfig>(kLongCatJson, {{"num_experts_per_tok", "1"}}, "num_experts_per_tok",
                                     "disagrees with key 'moe_topk'");
}

TEST_F(CheckpointTest, RopeSettingsAreHonouredOrRefusedByKey) {
  using models::LlamaConfig;
  expect_refused<LlamaConfig>(kLlamaJson, {{"rope_parameters", "{\"rope_type\": \"longrope\"}"}},
                              "rope_parameters.rope_type", "'longrope' is not implemented");
  expect_refused<LlamaConfig>(kLlamaJson, {{"rope_scaling", "{\"type\": \"su\", \"factor\": 2.0}"}},
                              "rope_scaling.type", "'su' is not implemented");
  // Each object is on one line here, so its fields' line is the object's.
  expect_refused<LlamaConfig>(
      kLlamaJson, {{"rope_parameters", "{\"rope_type\": \"yarn\", \"factor\": 2.0, \"low_freq_factor\": 1.0}"}},
      "rope_parameters.low_freq_factor", "not a field of rope_type 'yarn'");
  expect_refused<LlamaConfig>(kLlamaJson, {{"rope_parameters", "{\"rope_type\": \"linear\"}"}},
                              "rope_parameters.factor", "needs it");
  expect_refused<LlamaConfig>(
      kLlamaJson,
      {{"rope_parameters", "{\"rope_theta\": 5e5}"}, {"rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}"}},
      "rope_scaling.type", "both 'rope_parameters' and 'rope_scaling'");

  // Both forms give the same scaling; rope_parameters' rope_theta wins over the top-level one.
  write_json("llama", kLlamaJson,
             {{"rope_theta", "123.0"},
              {"rope_parameters",
               "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"rope_theta\": 5e5, "
               "\"original_max_position_embeddings\": 16, \"beta_fast\": 16}"}});
  auto a = open();
  LlamaConfig from_parameters;
  ASSERT_TRUE(models::load_config_json(*a, from_parameters));
  auto rope = from_parameters.rope_scaling();
  ASSERT_TRUE(rope) << rope.status().to_string();
  EXPECT_EQ(rope->type, nn::RopeScaling::Type::kYarn);
  EXPECT_EQ(rope->theta, 5e5);
  EXPECT_EQ(rope->factor, 4.0);
  EXPECT_EQ(rope->original_max_position_embeddings, 16);
  EXPECT_EQ(rope->beta_fast, 16.0);
  // yarn's attention factor 0.1 * ln(4) + 1 scales cos and sin.
  EXPECT_NEAR(nn::rope_attention_scaling(*rope), 0.1 * std::log(4.0) + 1.0, 1e-15);

  write_json("llama", kLlamaJson,
             {{"rope_theta", "5e5"},
              {"rope_scaling", "{\"type\": \"dynamic\", \"factor\": 2.0}"},
              {"max_position_embeddings", "32"}});
  auto b = open();
  LlamaConfig from_scaling;
  ASSERT_TRUE(models::load_config_json(*b, from_scaling));
  rope = from_scaling.rope_scaling();
  ASSERT_TRUE(rope) << rope.status().to_string();
  EXPECT_EQ(rope->type, nn::RopeScaling::Type::kDynamic);
  EXPECT_EQ(rope->theta, 5e5);
  EXPECT_EQ(rope->original_max_position_embeddings, 32);  // dynamic grows past max_position_embeddings
}

TEST_F(CheckpointTest, KeysThatDoNotChangeTheLogitsAreListedAsIgnored) {
  write_json("llama", kLlamaJson,
             {{"torch_dtype", "\"bfloat16\""},
              {"eos_token_id", "[1, 2]"},
              {"auto_map", "{\"AutoConfig\": \"x.Config\"}"},
              {"some_new_key", "3"},
              {"rope_scaling", "null"}});
  auto ckpt = open();
  models::LlamaConfig c;
  std::vector<models::IgnoredKey> ignored;
  ASSERT_TRUE(models::load_config_json(*ckpt, c, &ignored));
  std::vector<std::string> keys;
  for (const auto& k : ignored) keys.push_back(k.key);
  // model_type is applied (it picks Llama's or Mixtral's keys), so it is not among them.
  ASSERT_EQ(keys, (std::vector<std::string>{"torch_dtype", "eos_token_id", "auto_map", "some_new_key"}));
  EXPECT_EQ(ignored[0].line, line_of("torch_dtype", kLlamaJson, {{"torch_dtype", ""}}));
  EXPECT_NE(ignored[3].why.find("not read by transformers' Llama"), std::string::npos) << ignored[3].why;
  // num_key_value_heads absent would mean num_attention_heads; here it is 1.
  EXPECT_EQ(c.resolved_kv_heads(), 1);
}

// config.json files as published checkpoints write them (sizes shrunk): every key is applied or
// listed as ignored, none refused. Llama 3.1 (transformers 4.x: rope_scaling llama3, an eos list),
// and LongCat-Flash-Chat's original keys.
// The Qwen and Mistral families' config.json files as published (Qwen2.5-7B-Instruct,
// Qwen1.5-MoE-A2.7B, Qwen3-30B-A3B, Mistral-7B-v0.1; sizes shrunk): every key applied or ignored,
// none refused, and what they say reaches the config.
TEST_F(CheckpointTest, PublishedQwenAndMistralConfigsLoad) {
  const JsonKeys common = {{"attention_dropout", "0.0"},
                           {"bos_token_id", "151643"},
                           {"eos_token_id", "151645"},
                           {"hidden_act", "\"silu\""},
                           {"hidden_size", "16"},
                           {"initializer_range", "0.02"},
                           {"intermediate_size", "24"},
                           {"num_attention_heads", "4"},
                           {"num_hidden_layers", "2"},
                           {"num_key_value_heads", "2"},
                           {"rms_norm_eps", "1e-06"},
                           {"rope_theta", "1000000.0"},
                           {"tie_word_embeddings", "false"},
                           {"torch_dtype", "\"bfloat16\""},
                           {"use_cache", "true"},
                           {"vocab_size", "32"}};
  write_json("qwen2", common,
             {{"architectures", "[\"Qwen2ForCausalLM\"]"},
              {"max_position_embeddings", "32768"},
              {"max_window_layers", "28"},
              {"sliding_window", "131072"},
              {"use_sliding_window", "false"}});
  auto ckpt = open();
  models::LlamaConfig qwen2;
  std::vector<models::IgnoredKey> ignored;
  Status s = models::load_config_json(*ckpt, qwen2, &ignored);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.qk_norm);
  EXPECT_EQ(qwen2.attention_window(1), 0);  // use_sliding_window false

  write_json("qwen2_moe", common,
             {{"architectures", "[\"Qwen2MoeForCausalLM\"]"},
              {"max_position_embeddings", "8192"},
              {"max_window_layers", "21"},
              {"sliding_window", "32768"},
              {"use_sliding_window", "false"},
              {"decoder_sparse_step", "1"},
              {"moe_intermediate_size", "8"},
              {"shared_expert_intermediate_size", "24"},
              {"num_experts_per_tok", "4"},
              {"num_experts", "6"},
              {"norm_topk_prob", "false"},
              {"output_router_logits", "false"},
              {"router_aux_loss_coef", "0.001"}});
  ckpt = open();
  models::LlamaConfig qwen2_moe;
  s = models::load_config_json(*ckpt, qwen2_moe);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_EQ(qwen2_moe.num_local_experts, 6);
  EXPECT_EQ(qwen2_moe.shared_expert_intermediate_size, 24);
  EXPECT_FALSE(qwen2_moe.norm_topk_prob);
  EXPECT_TRUE(qwen2_moe.is_sparse_layer(0) && qwen2_moe.is_sparse_layer(1));

  write_json("qwen3_moe", common,
             {{"architectures", "[\"Qwen3MoeForCausalLM\"]"},
              {"attention_bias", "false"},
              {"decoder_sparse_step", "1"},
              {"head_dim", "8"},
              {"max_position_embeddings", "40960"},
              {"max_window_layers", "48"},
              {"mlp_only_layers", "[]"},
              {"moe_intermediate_size", "8"},
              {"norm_topk_prob", "true"},
              {"num_experts", "8"},
              {"num_experts_per_tok", "2"},
              {"output_router_logits", "false"},
              {"rope_scaling", "null"},
              {"router_aux_loss_coef", "0.001"},
              {"sliding_window", "null"},
              {"use_sliding_window", "false"}});
  ckpt = open();
  models::LlamaConfig qwen3_moe;
  ignored.clear();
  s = models::load_config_json(*ckpt, qwen3_moe, &ignored);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_TRUE(qwen3_moe.qk_norm);
  EXPECT_EQ(qwen3_moe.resolved_head_dim(), 8);
  EXPECT_EQ(qwen3_moe.num_local_experts, 8);
  // Qwen3MoeConfig has no max_window_layers: published files carry it, transformers never reads it.
  auto window_layers = std::find_if(ignored.begin(), ignored.end(),
                                    [](const models::IgnoredKey& k) { return k.key == "max_window_layers"; });
  ASSERT_NE(window_layers, ignored.end());
  EXPECT_NE(window_layers->why.find("not read by transformers' Qwen3Moe"), std::string::npos) << window_layers->why;

  write_json("mistral", common,
             {{"architectures", "[\"MistralForCausalLM\"]"},
              {"max_position_embeddings", "32768"},
              {"sliding_window", "4096"}});
  ckpt = open();
  models::LlamaConfig mistral;
  s = models::load_config_json(*ckpt, mistral);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_EQ(mistral.attention_window(0), 4096);

  // A model_type no family has names the families.
  write_json("gemma", common, {});
  ckpt = open();
  models::LlamaConfig gemma;
  s = models::load_config_json(*ckpt, gemma);
  EXPECT_NE(s.message().find("config.json:2: key 'model_type': 'gemma' is not one of llama, mistral, mixtral"),
            std::string::npos)
      << s.to_string();
}

TEST_F(CheckpointTest, PublishedConfigsLoad) {
  write_json("llama",
             {{"architectures", "[\"LlamaForCausalLM\"]"},
              {"attention_bias", "false"},
              {"attention_dropout", "0.0"},
              {"bos_token_id", "128000"},
              {"eos_token_id", "[128001, 128008, 128009]"},
              {"hidden_act", "\"silu\""},
              {"hidden_size", "16"},
              {"initializer_range", "0.02"},
              {"intermediate_size", "24"},
              {"max_position_embeddings", "131072"},
              {"mlp_bias", "false"},
              {"num_attention_heads", "2"},
              {"num_hidden_layers", "2"},
              {"num_key_value_heads", "1"},
              {"pretraining_tp", "1"},
              {"rms_norm_eps", "1e-05"},
              {"rope_scaling",
               "{\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
               "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}"},
              {"rope_theta", "500000.0"},
              {"tie_word_embeddings", "false"},
              {"torch_dtype", "\"bfloat16\""},
              {"transformers_version", "\"4.43.0.dev0\""},
              {"use_cache", "true"},
              {"vocab_size", "32"}},
             {});
  auto llama_ckpt = open();
  models::LlamaConfig l;
  Status s = models::load_config_json(*llama_ckpt, l);
  EXPECT_TRUE(s) << s.to_string();
  EXPECT_EQ(l.rope_scaling()->type, nn::RopeScaling::Type::kLlama3);

  write_json("longcat_flash",
             {{"architectures", "[\"LongcatFlashForCausalLM\"]"},
              {"attention_method", "\"MLA\""},
              {"auto_map", "{\"AutoConfig\": \"configuration_longcat_flash.LongcatFlashConfig\"}"},
              {"vocab_size", "32"},
              {"hidden_size", "16"},
              {"ffn_hidden_size", "24"},
              {"expert_ffn_hidden_size", "8"},
              {"num_layers", "1"},
              {"num_attention_heads", "2"},
              {"kv_lora_rank", "8"},
              {"q_lora_rank", "8"},
              {"qk_rope_head_dim", "4"},
              {"qk_nope_head_dim", "4"},
              {"v_head_dim", "4"},
              {"n_routed_experts", "2"},
              {"moe_topk", "2"},
              {"zero_expert_num", "1"},
              {"zero_expert_type", "\"identity\""},
              {"routed_scaling_factor", "6.0"},
              {"norm_topk_prob", "false"},
              {"router_bias", "false"},
              {"mla_scale_q_lora", "true"},
              {"mla_scale_kv_lora", "true"},
              {"rms_norm_eps", "1e-05"},
              {"rope_theta", "10000000.0"},
              {"max_position_embeddings", "131072"},
              {"bos_token_id", "1"},
              {"eos_token_id", "2"},
              {"pad_token_id", "3"},
              {"ep_size", "1"},
              {"params_dtype", "\"bfloat16\""},
              {"rounter_params_dtype", "\"float32\""},
              {"topk_method", "null"},
              {"nextn_use_scmoe", "false"},
              {"num_nextn_layers", "1"},
              {"torch_dtype", "\"bfloat16\""},
              {"transformers_version", "\"4.55.0\""}},
             {});
  auto longcat_ckpt = open();
  models::LongCatFlashConfig c;
  s = models::load_config_json(*longcat_ckpt, c);
  EXPECT_TRUE(s) << s.to_string();
}

TEST_F(CheckpointTest, AbsentKeysTakeThePublishedDefaults) {
  JsonKeys base = kLlamaJson;
  base.erase(base.begin() + 5);  // num_key_value_heads
  write_json("llama", base, {});
  auto ckpt = open();
  models::LlamaConfig c;
  ASSERT_TRUE(models::load_config_json(*ckpt, c));
  EXPECT_EQ(c.resolved_kv_heads(), 2);  // = num_attention_heads, not Llama-2-7B's 32
}

// A checkpoint with more layers than the config names, or biases the config turns off, or an LM
// head beside tie_word_embeddings: the tensors no graph reads are an error listing them.
TEST_F(CheckpointTest, UnreadTensorsAreAnErrorListingThem) {
  struct Case {
    const char* what;
    std::function<void(models::LlamaConfig&)> stored;  // the model the tensors come from
    JsonKeys config;                                   // what config.json says beyond the sizes
    std::vector<std::string> unread;
  };
  const Case cases[] = {
      {"more layers", [](models::LlamaConfig& c) { c.num_hidden_layers = 3; }, {}, {"model.layers.2."}},
      {"attention bias",
       [](models::LlamaConfig& c) { c.attention_bias = true; },
       {},
       {"model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.o_proj.bias"}},
      {"mlp bias", [](models::LlamaConfig& c) { c.mlp_bias = true; }, {}, {"model.layers.0.mlp.up_proj.bias"}},
      {"tied head", [](models::LlamaConfig&) {}, {{"tie_word_embeddings", "true"}}, {"lm_head.weight", "tie_word"}},
  };
  for (const Case& k : cases) {
    models::LlamaConfig stored = tiny_llama();
    k.stored(stored);
    write_tensors(stored, llama);
    write_json("llama", kLlamaJson, k.config);
    auto ckpt = open();
    ASSERT_TRUE(ckpt);
    models::LlamaConfig c;
    ASSERT_TRUE(models::load_config_json(*ckpt, c));
    auto weights = checkpoint_weights(ckpt);
    for (models::Phase phase : {models::Phase::kPrefill, models::Phase::kDecode}) {
      auto g = models::build_llama(c, models::BuildOptions{}, phase, *weights);
      ASSERT_TRUE(g) << k.what << ": " << g.status().to_string();
    }
    Status s = models::check_unread_tensors(c, *weights);
    ASSERT_FALSE(s) << k.what;
    for (const std::string& name : k.unread) EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
    // Allowed, they are listed instead.
    std::vector<std::string> skipped;
    EXPECT_TRUE(models::check_unread_tensors(c, *weights, /*allow_unread=*/true, &skipped));
    EXPECT_FALSE(skipped.empty()) << k.what;
  }
}

// LongCat-Flash's multi-token-prediction layer is skipped by the published definition itself.
TEST_F(CheckpointTest, LongCatSkipsTheMultiTokenPredictionLayer) {
  write_tensors(tiny_longcat(), longcat, {"model.mtp.layers.0.eh_proj.weight"});
  write_json("longcat_flash", kLongCatJson, {{"num_nextn_predict_layers", "1"}});
  auto ckpt = open();
  models::LongCatFlashConfig c;
  std::vector<models::IgnoredKey> ignored;
  ASSERT_TRUE(models::load_config_json(*ckpt, c, &ignored));
  EXPECT_EQ(ignored.back().key, "num_nextn_predict_layers");
  auto weights = checkpoint_weights(ckpt);
  ASSERT_TRUE(models::build_longcat_flash(c, models::BuildOptions{}, models::Phase::kDecode, *weights));
  std::vector<std::string> skipped;
  EXPECT_TRUE(models::check_unread_tensors(c, *weights, false, &skipped));
  EXPECT_EQ(skipped, std::vector<std::string>{"model.mtp.layers.0.eh_proj.weight"});
}

// A DeepSeek-V3 config.json as published (sizes shrunk): the keys transformers reads applied,
// the original code's routing keys accepted at the values transformers implies, the rest listed.
const JsonKeys kDeepseekV3Json = {
    {"architectures", "[\"DeepseekV3ForCausalLM\"]"},
    {"aux_loss_alpha", "0.001"},
    {"bos_token_id", "0"},
    {"eos_token_id", "1"},
    {"ep_size", "1"},
    {"first_k_dense_replace", "1"},
    {"hidden_act", "\"silu\""},
    {"hidden_size", "16"},
    {"intermediate_size", "24"},
    {"kv_lora_rank", "8"},
    {"max_position_embeddings", "64"},
    {"moe_intermediate_size", "8"},
    {"moe_layer_freq", "1"},
    {"n_group", "2"},
    {"n_routed_experts", "4"},
    {"n_shared_experts", "1"},
    {"norm_topk_prob", "true"},
    {"num_attention_heads", "2"},
    {"num_experts_per_tok", "2"},
    {"num_hidden_layers", "2"},
    {"num_key_value_heads", "2"},
    {"num_nextn_predict_layers", "1"},
    {"q_lora_rank", "8"},
    {"qk_nope_head_dim", "4"},
    {"qk_rope_head_dim", "4"},
    {"rms_norm_eps", "1e-06"},
    {"rope_theta", "10000"},
    {"routed_scaling_factor", "2.5"},
    {"scoring_func", "\"sigmoid\""},
    {"seq_aux", "true"},
    {"tie_word_embeddings", "false"},
    {"topk_group", "1"},
    {"topk_method", "\"noaux_tc\""},
    {"torch_dtype", "\"bfloat16\""},
    {"use_cache", "true"},
    {"v_head_dim", "4"},
    {"vocab_size", "32"},
};

Expected<Graph> deepseek(const models::DeepseekConfig& c, const models::BuildOptions& o, models::Phase p,
                         WeightSource& w) {
  return models::build_deepseek(c, o, p, w);
}

TEST_F(CheckpointTest, PublishedDeepseekV3ConfigLoadsAndSkipsItsMtpLayer) {
  write_json("deepseek_v3", kDeepseekV3Json, {});
  auto ckpt = open();
  models::DeepseekConfig c;
  std::vector<models::IgnoredKey> ignored;
  Status s = models::load_config_json(*ckpt, c, &ignored);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_EQ(c.family, models::DeepseekConfig::Family::kV3);
  EXPECT_EQ(c.n_routed_experts, 4);
  EXPECT_EQ(c.groups_chosen(), 1);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  std::string listed;
  for (const models::IgnoredKey& k : ignored) listed += k.key + " ";
  EXPECT_EQ(listed, "architectures aux_loss_alpha bos_token_id eos_token_id ep_size seq_aux torch_dtype use_cache ");
  // The multi-token-prediction layer (model.layers.2 of 2 decoder layers) is not read, and not an error.
  write_tensors(c, deepseek, {"model.layers.2.eh_proj.weight", "model.layers.2.mlp.gate.weight"});
  ckpt = open();
  auto weights = checkpoint_weights(ckpt);
  ASSERT_TRUE(models::build_deepseek(c, models::BuildOptions{}, models::Phase::kDecode, *weights));
  std::vector<std::string> skipped;
  s = models::check_unread_tensors(c, *weights, false, &skipped);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_EQ(skipped, (std::vector<std::string>{"model.layers.2.eh_proj.weight", "model.layers.2.mlp.gate.weight"}));
  // Without num_nextn_predict_layers they are unread tensors.
  JsonKeys no_mtp = kDeepseekV3Json;
  std::erase_if(no_mtp, [](const auto& k) { return k.first == "num_nextn_predict_layers"; });
  write_json("deepseek_v3", no_mtp, {});
  ckpt = open();
  models::DeepseekConfig c2;
  ASSERT_TRUE(models::load_config_json(*ckpt, c2));
  weights = checkpoint_weights(ckpt);
  ASSERT_TRUE(models::build_deepseek(c2, models::BuildOptions{}, models::Phase::kDecode, *weights));
  s = models::check_unread_tensors(c2, *weights);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("model.layers.2.eh_proj.weight"), std::string::npos) << s.message();
}

TEST_F(CheckpointTest, DeepseekKeysThatChangeTheMathAreRefusedByLine) {
  using C = models::DeepseekConfig;
  auto without = [](std::initializer_list<const char*> keys) {
    JsonKeys base = kDeepseekV3Json;
    for (const char* key : keys) std::erase_if(base, [&](const auto& k) { return k.first == key; });
    return base;
  };
  expect_refused<C>(kDeepseekV3Json,
                    {{"quantization_config", "{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}"}},
                    "quantization_config", "FP8");
  expect_refused<C>(without({"topk_method"}), {{"topk_method", "\"greedy\""}}, "topk_method", "noaux_tc");
  expect_refused<C>(without({"scoring_func"}), {{"scoring_func", "\"softmax\""}}, "scoring_func", "sigmoid");
  expect_refused<C>(without({"moe_layer_freq"}), {{"moe_layer_freq", "2"}}, "moe_layer_freq", "first_k_dense_replace");
  expect_refused<C>(without({"num_key_value_heads"}), {{"num_key_value_heads", "1"}}, "num_key_value_heads",
                    "MLA expands every attention head");
  expect_refused<C>(without({"topk_group"}), {{"topk_group", "3"}}, "topk_group", "exceeds n_group");
  expect_refused<C>(without({"n_group"}), {{"n_group", "3"}}, "n_group", "does not divide n_routed_experts");
  expect_refused<C>(kDeepseekV3Json, {{"num_local_experts", "8"}}, "num_local_experts",
                    "disagrees with key 'n_routed_experts'");
  // An absent num_key_value_heads is DeepseekV3Config's default, 128, which transformers cannot
  // run with 2 heads either.
  write_json("deepseek_v3", without({"num_key_value_heads"}), {});
  auto ckpt = open();
  C c;
  EXPECT_NE(models::load_config_json(*ckpt, c).message().find("num_key_value_heads' = 128"), std::string::npos);
}

TEST_F(CheckpointTest, DeepseekV2RoutesGreedilyAndRefusesWhatTransformersDoesNotRun) {
  JsonKeys v2 = kDeepseekV3Json;
  std::erase_if(v2, [](const auto& k) {
    return k.first == "topk_method" || k.first == "scoring_func" || k.first == "norm_topk_prob" ||
           k.first == "num_nextn_predict_layers";
  });
  write_json("deepseek_v2", v2, {{"topk_method", "\"greedy\""}, {"scoring_func", "\"softmax\""}});
  auto ckpt = open();
  models::DeepseekConfig c;
  Status s = models::load_config_json(*ckpt, c);
  ASSERT_TRUE(s) << s.to_string();
  EXPECT_EQ(c.family, models::DeepseekConfig::Family::kV2);
  EXPECT_FALSE(c.group_limited);
  auto refused = [&](const JsonKeys& more, const std::string& what) {
    write_json("deepseek_v2", v2, more);
    auto k = open();
    models::DeepseekConfig d;
    Status r = models::load_config_json(*k, d);
    EXPECT_FALSE(r) << what;
    EXPECT_NE(r.message().find(what), std::string::npos) << r.message();
  };
  refused({{"topk_method", "\"group_limited_greedy\""}}, "topk_group < n_group is not implemented");
  refused({{"norm_topk_prob", "true"}}, "does not renormalise");
  refused({{"scoring_func", "\"sigmoid\""}}, "softmax");
  // rope_interleave is DeepseekV3Config's: V2 always rotates interleaved pairs and lists it as ignored.
  write_json("deepseek_v2", v2, {{"rope_interleave", "false"}});
  ckpt = open();
  std::vector<models::IgnoredKey> ignored;
  models::DeepseekConfig d;
  ASSERT_TRUE(models::load_config_json(*ckpt, d, &ignored));
  EXPECT_TRUE(std::any_of(ignored.begin(), ignored.end(), [](const auto& k) { return k.key == "rope_interleave"; }));
}

// transformers' aliases set the keys they stand for.
TEST_F(CheckpointTest, LongCatAliasesSetTheirKeys) {
  JsonKeys base = kLongCatJson;
  base.pop_back();  // moe_topk
  write_json("longcat_flash", base, {{"num_experts_per_tok", "1"}, {"num_hidden_layers", "2"}});
  auto ckpt = open();
  models::LongCatFlashConfig c;
  ASSERT_TRUE(models::load_config_json(*ckpt, c)) << models::load_config_json(*ckpt, c).to_string();
  EXPECT_EQ(c.moe_topk, 1);
}

// Dynamic NTK past max_position_embeddings is exact for one sequence decoded token by token;
// what a per-position table cannot reproduce is refused at build time.
TEST_F(CheckpointTest, DynamicRopeRefusesWhatItCannotMatch) {
  models::LlamaConfig c = tiny_llama();
  ASSERT_TRUE(c.set("max_position_embeddings", "8"));
  ASSERT_TRUE(c.set("rope_parameters.rope_type", "dynamic"));
  ASSERT_TRUE(c.set("rope_parameters.factor", "2.0"));
  auto weights = random_weights(1);
  models::BuildOptions o;
  o.max_context = 32;
  o.prefill_tokens = 8;
  EXPECT_TRUE(models::build_llama(c, o, models::Phase::kDecode, *weights));
  EXPECT_TRUE(models::build_llama(c, o, models::Phase::kPrefill, *weights));
  o.batch = 2;
  auto batched = models::build_llama(c, o, models::Phase::kDecode, *weights);
  ASSERT_FALSE(batched);
  EXPECT_NE(batched.status().message().find("batch"), std::string::npos) << batched.status().to_string();
  o.batch = 1;
  o.prefill_tokens = 9;
  auto long_prefill = models::build_llama(c, o, models::Phase::kPrefill, *weights);
  ASSERT_FALSE(long_prefill);
  EXPECT_NE(long_prefill.status().message().find("prefill of 9 tokens"), std::string::npos)
      << long_prefill.status().to_string();
  // Within max_position_embeddings dynamic is the default RoPE: nothing to refuse.
  o.max_context = 8;
  o.batch = 2;
  EXPECT_TRUE(models::build_llama(c, o, models::Phase::kPrefill, *weights));
}

}  // namespace
}  // namespace sk
