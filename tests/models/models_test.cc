// Every model in every execution mode on 1 and 2 cores gives bit-identical logits (prefill, then
// decode steps), the per-layer scopes become super-kernel segments, and bad configs and options
// fail with errors naming the key or option.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model_driver.h"
#include "superkernel/models.h"
#include "superkernel/runtime.h"
#include "superkernel/weights.h"
#include "test_runtime.h"

namespace sk {
namespace {

models::LongCatFlashConfig tiny_longcat() {
  models::LongCatFlashConfig c;
  c.vocab_size = 48;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_attention_heads = 2;
  c.q_lora_rank = 16;
  c.kv_lora_rank = 16;
  c.qk_nope_head_dim = 8;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 8;
  c.ffn_hidden_size = 32;
  c.expert_ffn_hidden_size = 16;
  c.n_routed_experts = 4;
  c.zero_expert_num = 2;
  c.moe_topk = 2;
  return c;
}

models::LlamaConfig tiny_llama() {
  models::LlamaConfig c;
  c.vocab_size = 48;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  return c;
}

models::BuildOptions tiny_options() {
  models::BuildOptions o;
  o.batch = 2;
  o.prefill_tokens = 8;
  o.block_size = 4;
  o.max_context = 16;
  return o;
}

const std::vector<std::vector<int32_t>> kPrompts = {{1, 7, 30, 2}, {45, 3, 9}};
const std::vector<std::vector<int32_t>> kSteps = {{4, 8}, {15, 16}, {23, 42}};

struct ModeRun {
  std::string what;
  testing::DriveResult result;
};

// Runs `build` in eager, graph and superkernel mode on 1 and 2 cores; all logits must agree bit
// for bit with the first run.
std::vector<ModeRun> run_all_modes(const testing::PhaseBuilder& build, const models::BuildOptions& options,
                                   const std::vector<std::string>& caches, int64_t vocab) {
  std::vector<ModeRun> runs;
  for (int cores : {1, 2}) {
    auto rt = testing::make_runtime(cores);
    for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
      const std::string what = std::string(execution_mode_name(mode)) + ", " + std::to_string(cores) + " cores";
      auto r = testing::drive(*rt, CompileOptions::for_mode(mode), build, options, caches, kPrompts, kSteps, vocab);
      if (!r) {
        ADD_FAILURE() << what << ": " << r.status().to_string();
        continue;
      }
      runs.push_back({what, std::move(*r)});
    }
  }
  const size_t rows = kPrompts[0].size() + kPrompts[1].size() + kSteps.size() * kPrompts.size();
  for (const ModeRun& run : runs) {
    EXPECT_EQ(run.result.logits.size(), rows * static_cast<size_t>(vocab)) << run.what;
    EXPECT_EQ(std::memcmp(run.result.logits.data(), runs.front().result.logits.data(),
                          std::min(run.result.logits.size(), runs.front().result.logits.size()) * sizeof(float)),
              0)
        << run.what << " differs from " << runs.front().what;
  }
  return runs;
}

bool has_scope(const std::vector<std::string>& scopes, const std::string& name) {
  return std::find(scopes.begin(), scopes.end(), name) != scopes.end();
}

TEST(Models, LongCatFlashIdenticalInEveryMode) {
  const auto config = tiny_longcat();
  const auto options = tiny_options();
  auto weights = random_weights(7);
  auto runs = run_all_modes([&](models::Phase p) { return models::build_longcat_flash(config, options, p, *weights); },
                            options, models::cache_names(config), config.vocab_size);
  ASSERT_EQ(runs.size(), 6u);
  // Superkernel mode: the three scopes of every layer are segments of the decode step.
  const auto& scopes = runs[2].result.decode_scopes;
  for (int i = 0; i < config.num_layers; ++i)
    for (const char* part : {"part1", "part2_moe", "part2_main"})
      EXPECT_TRUE(has_scope(scopes, "scope_" + std::to_string(i) + "_" + part)) << part;
}

TEST(Models, LongCatFlashBf16IdenticalInEveryMode) {
  const auto config = tiny_longcat();
  auto options = tiny_options();
  options.weight_dtype = models::WeightDType::kBF16;
  options.kv_cache_dtype = DType::kBF16;
  options.moe_core_limit = 1;
  auto weights = random_weights(11);
  auto runs = run_all_modes([&](models::Phase p) { return models::build_longcat_flash(config, options, p, *weights); },
                            options, models::cache_names(config), config.vocab_size);
  EXPECT_EQ(runs.size(), 6u);
}

// Random expert weights are packed [E, N, K]: quantised per row, they run in every mode alike.
TEST(Models, LongCatFlashW8A8PackedExpertsIdenticalInEveryMode) {
  const auto config = tiny_longcat();
  auto options = tiny_options();
  options.weight_dtype = models::WeightDType::kW8A8;
  auto weights = random_weights(11);
  auto runs = run_all_modes([&](models::Phase p) { return models::build_longcat_flash(config, options, p, *weights); },
                            options, models::cache_names(config), config.vocab_size);
  EXPECT_EQ(runs.size(), 6u);
  auto g = models::build_longcat_flash(config, options, models::Phase::kDecode, *weights);
  ASSERT_TRUE(g) << g.status().to_string();
  bool grouped_w8a8 = false;
  for (size_t i = 0; i < g->num_ops(); ++i) grouped_w8a8 |= g->op(i).kernel == "grouped_matmul.w8a8_dyn";
  EXPECT_TRUE(grouped_w8a8);
}

TEST(Models, LlamaIdenticalInEveryMode) {
  const auto config = tiny_llama();
  for (models::WeightDType dtype : {models::WeightDType::kF32, models::WeightDType::kW8A8}) {
    auto options = tiny_options();
    options.weight_dtype = dtype;
    auto weights = random_weights(3);
    auto runs = run_all_modes([&](models::Phase p) { return models::build_llama(config, options, p, *weights); },
                              options, models::cache_names(config), config.vocab_size);
    ASSERT_EQ(runs.size(), 6u) << models::weight_dtype_name(dtype);
    EXPECT_TRUE(has_scope(runs[2].result.decode_scopes, "scope_1_part2_main"));
  }
}

// A tiny config of one of LlamaConfig's families: `keys` on top of small common sizes.
models::LlamaConfig tiny_family(const char* model_type,
                                std::initializer_list<std::pair<const char*, const char*>> keys) {
  models::LlamaConfig config;
  EXPECT_TRUE(config.set("model_type", model_type));
  for (auto [key, value] : {std::pair<const char*, const char*>{"vocab_size", "48"},
                            {"hidden_size", "32"},
                            {"intermediate_size", "24"},
                            {"num_attention_heads", "4"},
                            {"num_key_value_heads", "2"},
                            {"head_dim", "8"}})
    EXPECT_TRUE(config.set(key, value)) << key;
  for (auto [key, value] : keys) EXPECT_TRUE(config.set(key, value)) << key;
  EXPECT_TRUE(config.validate()) << config.validate().to_string();
  return config;
}

TEST(Models, MixtralIdenticalInEveryMode) {
  models::LlamaConfig config =
      tiny_family("mixtral", {{"num_hidden_layers", "2"}, {"num_local_experts", "4"}, {"num_experts_per_tok", "2"}});
  for (models::WeightDType dtype : {models::WeightDType::kF32, models::WeightDType::kW8A8, models::WeightDType::kF16}) {
    auto options = tiny_options();
    options.weight_dtype = dtype;
    auto weights = random_weights(4);
    auto runs = run_all_modes([&](models::Phase p) { return models::build_llama(config, options, p, *weights); },
                              options, models::cache_names(config), config.vocab_size);
    ASSERT_EQ(runs.size(), 6u) << models::weight_dtype_name(dtype);
    EXPECT_TRUE(has_scope(runs[2].result.decode_scopes, "scope_1_part2_moe"));
  }
  // Llama's keys and Mixtral's are apart: an expert count is not a Llama key, a bias not Mixtral's.
  models::LlamaConfig llama;
  EXPECT_EQ(llama.set("num_local_experts", "4").code(), StatusCode::kNotFound);
  EXPECT_EQ(config.set("attention_bias", "true").code(), StatusCode::kNotFound);
  EXPECT_FALSE(config.set("model_type", "gemma"));
}

// A sliding window no shorter than the cache masks nothing and builds; a shorter one is refused
// at build time, naming max_context, the layer and the window.
TEST(Models, SlidingWindowsShorterThanTheCacheAreRefused) {
  const models::LlamaConfig config = tiny_family("mistral", {{"num_hidden_layers", "2"}, {"sliding_window", "16"}});
  auto options = tiny_options();  // max_context 16
  auto weights = random_weights(4);
  EXPECT_TRUE(models::build_llama(config, options, models::Phase::kDecode, *weights));
  options.max_context = 20;
  auto refused = models::build_llama(config, options, models::Phase::kDecode, *weights);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(refused.status().message().find("'max_context' = 20: layer 0 attends within a sliding window of 16"),
            std::string::npos)
      << refused.status().to_string();
  // Qwen2: the window only with use_sliding_window, and only on layers >= max_window_layers.
  models::LlamaConfig qwen;
  ASSERT_TRUE(qwen.set("model_type", "qwen2"));
  for (auto [key, value] : {std::pair<const char*, const char*>{"num_hidden_layers", "4"},
                            {"sliding_window", "8"},
                            {"max_window_layers", "2"}})
    ASSERT_TRUE(qwen.set(key, value)) << key;
  EXPECT_EQ(qwen.attention_window(3), 0);
  ASSERT_TRUE(qwen.set("use_sliding_window", "true"));
  EXPECT_EQ(qwen.attention_window(1), 0);
  EXPECT_EQ(qwen.attention_window(2), 8);
  ASSERT_TRUE(
      qwen.set("layer_types", "[\"sliding_attention\",\"full_attention\",\"full_attention\",\"full_attention\"]"));
  EXPECT_EQ(qwen.attention_window(0), 8);
  EXPECT_EQ(qwen.attention_window(2), 0);
  ASSERT_TRUE(qwen.set("layer_types", "[\"full_attention\"]"));
  EXPECT_NE(qwen.validate().message().find("'layer_types' has 1 entries for num_hidden_layers = 4"), std::string::npos);
}

// Qwen2-MoE (a dense layer between sparse ones, the shared expert and its gate, q/k/v biases) and
// Qwen3-MoE (q/k norms, decoder_sparse_step) in every mode and core count, in every weight dtype
// the experts' grouped matmuls take (f32, w8a8, bf16, f16).
TEST(Models, QwenMoeIdenticalInEveryMode) {
  const models::LlamaConfig qwen2_moe = tiny_family("qwen2_moe", {{"num_hidden_layers", "3"},
                                                                  {"num_experts", "4"},
                                                                  {"num_experts_per_tok", "2"},
                                                                  {"moe_intermediate_size", "16"},
                                                                  {"shared_expert_intermediate_size", "24"},
                                                                  {"mlp_only_layers", "[1]"}});
  const models::LlamaConfig qwen3_moe = tiny_family("qwen3_moe", {{"num_hidden_layers", "2"},
                                                                  {"num_experts", "4"},
                                                                  {"num_experts_per_tok", "2"},
                                                                  {"moe_intermediate_size", "16"},
                                                                  {"decoder_sparse_step", "2"},
                                                                  {"norm_topk_prob", "true"}});
  EXPECT_TRUE(qwen2_moe.is_sparse_layer(0));
  EXPECT_FALSE(qwen2_moe.is_sparse_layer(1));
  EXPECT_FALSE(qwen3_moe.is_sparse_layer(0));
  EXPECT_TRUE(qwen3_moe.is_sparse_layer(1));
  for (const models::LlamaConfig* config : {&qwen2_moe, &qwen3_moe}) {
    for (models::WeightDType dtype : {models::WeightDType::kF32, models::WeightDType::kW8A8, models::WeightDType::kBF16,
                                      models::WeightDType::kF16}) {
      auto options = tiny_options();
      options.weight_dtype = dtype;
      auto weights = random_weights(6);
      auto runs = run_all_modes([&](models::Phase p) { return models::build_llama(*config, options, p, *weights); },
                                options, models::cache_names(*config), config->vocab_size);
      ASSERT_EQ(runs.size(), 6u) << config->model_type() << " " << models::weight_dtype_name(dtype);
      EXPECT_TRUE(has_scope(runs[2].result.decode_scopes, "scope_1_part2_moe") != (config == &qwen2_moe))
          << config->model_type();
      EXPECT_TRUE(has_scope(runs[2].result.decode_scopes, "scope_1_part2_main") == (config == &qwen2_moe))
          << config->model_type();
    }
  }
  // Each family reads its own keys: no shared expert in Qwen3-MoE, no experts in Qwen2.
  models::LlamaConfig qwen3_moe_keys;
  ASSERT_TRUE(qwen3_moe_keys.set("model_type", "qwen3_moe"));
  EXPECT_EQ(qwen3_moe_keys.set("shared_expert_intermediate_size", "8").code(), StatusCode::kNotFound);
  // List values: config.json's compact arrays; anything else names the key.
  ASSERT_TRUE(qwen3_moe_keys.set("mlp_only_layers", "[0, 2]"));
  EXPECT_EQ(qwen3_moe_keys.mlp_only_layers, (std::vector<int64_t>{0, 2}));
  const Status bad_list = qwen3_moe_keys.set("mlp_only_layers", "[1,x]");
  EXPECT_EQ(bad_list.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_list.message().find("config key 'mlp_only_layers': '[1,x]' is not an array of integers"),
            std::string::npos)
      << bad_list.to_string();
  EXPECT_EQ(qwen3_moe_keys.set("mlp_only_layers", "3").code(), StatusCode::kInvalidArgument);
  models::LlamaConfig qwen2;
  ASSERT_TRUE(qwen2.set("model_type", "qwen2"));
  EXPECT_EQ(qwen2.set("num_experts", "8").code(), StatusCode::kNotFound);
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.set("mlp_only_layers", "[1]"));
}

TEST(Models, AfdIdenticalInEveryMode) {
  const auto config = tiny_longcat();
  auto options = tiny_options();
  auto weights = random_weights(5);
  auto graph = models::build_longcat_flash_afd(config, options, *weights);
  ASSERT_TRUE(graph) << graph.status().to_string();
  const std::vector<float> x = testing::random_floats(static_cast<size_t>(options.batch * config.hidden_size), 9);
  std::vector<float> first;
  for (int cores : {1, 2}) {
    auto rt = testing::make_runtime(cores);
    for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
      auto exe = rt->compile(*graph, CompileOptions::for_mode(mode));
      ASSERT_TRUE(exe) << exe.status().to_string();
      ASSERT_TRUE((*exe)->set_input(models::kHiddenStates, x));
      ASSERT_TRUE((*exe)->run());
      std::vector<float> y = (*exe)->output_f32(models::kHiddenStatesOut);
      ASSERT_EQ(y.size(), x.size());
      if (first.empty()) first = y;
      EXPECT_EQ(std::memcmp(y.data(), first.data(), y.size() * sizeof(float)), 0) << execution_mode_name(mode);
      if (mode == ExecutionMode::kSuperKernel) {
        bool found = false;
        for (const SegmentReport& s : (*exe)->report().segments) found |= s.scope == "scope_1_moe";
        EXPECT_TRUE(found);
      }
    }
  }
}

// prefetch: each AFD layer warms the next layer's router and expert gate/up weights from stream
// "prefetch" inside the layer's super kernel; outputs match the build without prefetches.
TEST(Models, AfdPrefetchFusesAndKeepsTheResults) {
  const auto config = tiny_longcat();
  auto weights = random_weights(5);
  auto plain = models::build_longcat_flash_afd(config, tiny_options(), *weights);
  ASSERT_TRUE(plain) << plain.status().to_string();
  const std::vector<float> x =
      testing::random_floats(static_cast<size_t>(tiny_options().batch * config.hidden_size), 9);
  auto run = [&](Runtime& rt, const Graph& g, const CompileOptions& o, size_t* segments) {
    auto exe = rt.compile(g, o);
    EXPECT_TRUE(exe) << exe.status().to_string();
    if (!exe) return std::vector<float>{};
    EXPECT_TRUE((*exe)->set_input(models::kHiddenStates, x));
    EXPECT_TRUE((*exe)->run());
    if (segments) *segments = (*exe)->report().segments.size();
    return (*exe)->output_f32(models::kHiddenStatesOut);
  };
  auto rt1 = testing::make_runtime(1);
  const std::vector<float> reference = run(*rt1, *plain, CompileOptions::for_mode(ExecutionMode::kEager), nullptr);
  ASSERT_FALSE(reference.empty());
  for (int32_t limit : {0, 1}) {
    auto options = tiny_options();
    options.multi_streams = 2;
    options.prefetch = true;
    options.prefetch_core_limit = limit;
    auto graph = models::build_longcat_flash_afd(config, options, *weights);
    ASSERT_TRUE(graph) << graph.status().to_string();
    int prefetches = 0;
    for (size_t i = 0; i < graph->num_ops(); ++i) prefetches += graph->op(i).kernel == "prefetch" ? 1 : 0;
    EXPECT_EQ(prefetches, 2 * (config.num_layers - 1));  // router and gate/up of every next layer
    for (int cores : {1, 2, 3}) {
      if (limit >= cores) continue;  // the compute stream needs a core of its own
      auto rt = testing::make_runtime(cores);
      for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
        for (bool on : {true, false}) {
          CompileOptions o = CompileOptions::for_mode(mode);
          o.prefetch = on;
          size_t segments = 0;
          std::vector<float> y = run(*rt, *graph, o, &segments);
          ASSERT_EQ(y.size(), reference.size());
          EXPECT_EQ(std::memcmp(y.data(), reference.data(), y.size() * sizeof(float)), 0)
              << execution_mode_name(mode) << " cores " << cores << " limit " << limit << " prefetch " << on;
          if (mode == ExecutionMode::kSuperKernel) {
            EXPECT_EQ(segments, static_cast<size_t>(config.num_layers));
          }
        }
      }
    }
  }
}

TEST(Models, PrefetchNeedsStreamsAndTheAfdVariant) {
  auto weights = random_weights(1);
  auto options = tiny_options();
  options.prefetch = true;
  auto no_streams = models::build_longcat_flash_afd(tiny_longcat(), options, *weights);
  ASSERT_FALSE(no_streams);
  EXPECT_NE(no_streams.status().message().find("build option 'prefetch': needs multi_streams"), std::string::npos)
      << no_streams.status().to_string();
  options.multi_streams = 2;
  auto decode = models::build_longcat_flash(tiny_longcat(), options, models::Phase::kDecode, *weights);
  ASSERT_FALSE(decode);
  EXPECT_EQ(decode.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(decode.status().message().find("prefetch"), std::string::npos);
}

// With multi_streams 1 (the MoE core limit 1 on 2 and 3 cores, none on 1), in every mode on 1 to 3
// cores, `build(options)` gives the logits of the single-stream eager build on one core;
// `check_superkernel(result, what)` runs on each superkernel-mode result.
void expect_multi_streams_match_one_stream(
    const std::function<Expected<Graph>(const models::BuildOptions&, models::Phase)>& build,
    const std::vector<std::string>& caches, int64_t vocab,
    const std::function<void(const testing::DriveResult&, const std::string&)>& check_superkernel) {
  const auto reference_options = tiny_options();
  auto rt1 = testing::make_runtime(1);
  auto reference = testing::drive(
      *rt1, CompileOptions::for_mode(ExecutionMode::kEager),
      [&](models::Phase p) { return build(reference_options, p); }, reference_options, caches, kPrompts, kSteps, vocab);
  ASSERT_TRUE(reference) << reference.status().to_string();
  for (int cores : {1, 2, 3}) {
    auto options = tiny_options();
    options.multi_streams = 1;
    options.moe_core_limit = cores > 1 ? 1 : 0;  // one core: the streams share it
    auto rt = testing::make_runtime(cores);
    for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
      const std::string what = std::string(execution_mode_name(mode)) + ", " + std::to_string(cores) + " cores";
      auto r = testing::drive(
          *rt, CompileOptions::for_mode(mode), [&](models::Phase p) { return build(options, p); }, options, caches,
          kPrompts, kSteps, vocab);
      ASSERT_TRUE(r) << what << ": " << r.status().to_string();
      ASSERT_EQ(r->logits.size(), reference->logits.size()) << what;
      EXPECT_EQ(std::memcmp(r->logits.data(), reference->logits.data(), r->logits.size() * sizeof(float)), 0) << what;
      if (mode == ExecutionMode::kSuperKernel) check_superkernel(*r, what);
    }
  }
}

// multi_streams: the shortcut MoE runs on stream "moe" under its core limit, fused with the main
// branch into one super kernel per layer, and the logits match the single-stream build's.
TEST(Models, LongCatFlashMultiStreamsFuseTheMoEBranch) {
  const auto config = tiny_longcat();
  auto weights = random_weights(7);
  expect_multi_streams_match_one_stream(
      [&](const models::BuildOptions& o, models::Phase p) {
        return models::build_longcat_flash(config, o, p, *weights);
      },
      models::cache_names(config), config.vocab_size,
      [&](const testing::DriveResult& r, const std::string& what) {
        for (int i = 0; i < config.num_layers; ++i) {
          const std::string layer = "scope_" + std::to_string(i) + "_";
          EXPECT_TRUE(has_scope(r.decode_scopes, layer + "part2_moe + " + layer + "part2_main")) << what;
        }
      });
  // The core limit must leave the main stream a core.
  auto options = tiny_options();
  options.multi_streams = 1;
  options.moe_core_limit = 2;
  auto rt = testing::make_runtime(2);
  auto r = testing::drive(
      *rt, CompileOptions::for_mode(ExecutionMode::kSuperKernel),
      [&](models::Phase p) { return models::build_longcat_flash(config, options, p, *weights); }, options,
      models::cache_names(config), kPrompts, kSteps, config.vocab_size);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("leave none for stream 'default'"), std::string::npos) << r.status().to_string();
}

// DeepSeek with multi_streams: the routed experts (router to combine) run on stream "moe" beside
// the shared experts, in the MoE scope's super kernel, with the single-stream logits.
TEST(Models, DeepseekMultiStreamsRunTheRoutedExpertsBesideTheShared) {
  models::DeepseekConfig config;
  config.vocab_size = 48;
  config.hidden_size = 32;
  config.intermediate_size = 40;
  config.moe_intermediate_size = 16;
  config.num_hidden_layers = 3;
  config.num_attention_heads = 2;
  config.num_key_value_heads = 2;
  config.q_lora_rank = 16;
  config.kv_lora_rank = 16;
  config.qk_nope_head_dim = 8;
  config.qk_rope_head_dim = 4;
  config.v_head_dim = 8;
  config.n_routed_experts = 8;
  config.n_shared_experts = 1;
  config.num_experts_per_tok = 2;
  config.n_group = 4;
  config.topk_group = 2;
  config.first_k_dense_replace = 1;
  auto weights = random_weights(7);
  // Layer 1's MoE: the router, dispatch, experts and combine on "moe"; the shared experts and the
  // sum on the main stream.
  auto options = tiny_options();
  options.multi_streams = 1;
  auto graph = models::build_deepseek(config, options, models::Phase::kDecode, *weights);
  ASSERT_TRUE(graph) << graph.status().to_string();
  int routed = 0, shared = 0, misplaced = 0;
  const std::string moe = "model.layers.1.mlp.";
  for (size_t i = 0; i < graph->num_ops(); ++i) {
    const OpInfo& op = graph->op(i);
    if (op.name.rfind(moe, 0) != 0 || op.kind == OpKind::kRecordEvent || op.kind == OpKind::kWaitEvent) continue;
    const bool on_moe = graph->stream_name(op.stream) == "moe";
    const bool is_shared = op.name.rfind(moe + "shared_experts.", 0) == 0;
    (is_shared ? shared : routed) += 1;
    if (on_moe == is_shared) {
      ADD_FAILURE() << op.name << " on stream " << graph->stream_name(op.stream);
      ++misplaced;
    }
  }
  EXPECT_GT(routed, 5);
  EXPECT_GT(shared, 3);
  EXPECT_EQ(misplaced, 0);
  expect_multi_streams_match_one_stream(
      [&](const models::BuildOptions& o, models::Phase p) { return models::build_deepseek(config, o, p, *weights); },
      models::cache_names(config), config.vocab_size,
      [](const testing::DriveResult& r, const std::string& what) {
        EXPECT_TRUE(has_scope(r.decode_scopes, "scope_1_part2_moe")) << what;
      });
}

TEST(Models, LlamaRefusesMultiStreams) {
  auto options = tiny_options();
  options.multi_streams = 1;
  auto weights = random_weights(7);
  auto g = models::build_llama(tiny_llama(), options, models::Phase::kDecode, *weights);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(g.status().message().find("build option 'multi_streams'"), std::string::npos) << g.status().to_string();
}

TEST(Models, ConfigErrorsNameTheKey) {
  models::LongCatFlashConfig c;
  EXPECT_TRUE(c.set("hidden_size", "64"));
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_TRUE(c.set("routed_scaling_factor", "2.5"));
  EXPECT_TRUE(c.set("mla_scale_q_lora", "false"));
  Status s = c.set("hidden_size", "6k");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("hidden_size"), std::string::npos);
  EXPECT_EQ(c.set("hiden_size", "1").code(), StatusCode::kNotFound);
  c = tiny_longcat();
  c.moe_topk = 7;
  s = c.validate();
  EXPECT_NE(s.message().find("moe_topk"), std::string::npos) << s.to_string();
  models::LlamaConfig l = tiny_llama();
  l.num_key_value_heads = 3;
  EXPECT_NE(l.validate().message().find("num_key_value_heads"), std::string::npos);
  EXPECT_EQ(models::parse_weight_dtype("int4").status().code(), StatusCode::kInvalidArgument);
  auto options = tiny_options();
  options.kv_cache_dtype = DType::kI8;
  EXPECT_NE(options.validate().message().find("kv_cache_dtype"), std::string::npos);
}

// The prefill logits of the last prompt token of each sequence, with the graph computing every
// token's rows (kEveryToken) or those rows only (kLastToken).
Expected<std::vector<float>> last_token_logits(Runtime& rt, ExecutionMode mode, const testing::PhaseBuilder& build,
                                               const models::BuildOptions& options,
                                               const std::vector<std::string>& caches, int64_t vocab) {
  auto graph = build(models::Phase::kPrefill);
  if (!graph) return graph.status();
  auto exe = rt.compile(*graph, CompileOptions::for_mode(mode));
  if (!exe) return exe.status();
  models::CacheStorage storage;
  SK_RETURN_IF_ERROR(storage.bind(**exe, caches));
  models::PagedCacheLayout layout(options);
  auto in = layout.prefill(kPrompts);
  if (!in) return in.status();
  SK_RETURN_IF_ERROR(models::set_step_inputs(**exe, *in));
  SK_RETURN_IF_ERROR((*exe)->run());
  const std::vector<float> all = (*exe)->output_f32(models::kLogits);
  // kLastToken computes nothing else: its output is exactly those rows.
  const int64_t rows_out =
      options.prefill_logits == models::PrefillLogits::kLastToken ? options.batch : options.prefill_tokens;
  if (static_cast<int64_t>(all.size()) != rows_out * vocab)
    return Status::internal("logits hold " + std::to_string(all.size()) + " values, not " + std::to_string(rows_out) +
                            " rows of " + std::to_string(vocab));
  std::vector<float> rows;
  for (int64_t b = 0; b < options.batch; ++b) {
    const int64_t row = layout.last_prefill_row(b);
    rows.insert(rows.end(), all.begin() + row * vocab, all.begin() + (row + 1) * vocab);
  }
  return rows;
}

TEST(Models, PrefillLastTokenLogitsAreTheEveryTokenRowsBitForBit) {
  const auto llama = tiny_llama();
  const auto longcat = tiny_longcat();
  auto weights = random_weights(5);
  for (const bool is_llama : {true, false}) {
    const std::string model = is_llama ? "llama" : "longcat";
    std::vector<float> want;  // the first run's rows
    for (auto which : {models::PrefillLogits::kEveryToken, models::PrefillLogits::kLastToken}) {
      auto options = tiny_options();
      options.prefill_logits = which;
      const testing::PhaseBuilder build = [&](models::Phase p) {
        return is_llama ? models::build_llama(llama, options, p, *weights)
                        : models::build_longcat_flash(longcat, options, p, *weights);
      };
      const auto caches = is_llama ? models::cache_names(llama) : models::cache_names(longcat);
      const int64_t vocab = is_llama ? llama.vocab_size : longcat.vocab_size;
      for (int cores : {1, 2}) {
        auto rt = testing::make_runtime(cores);
        for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
          const std::string what = model + ", " + execution_mode_name(mode) + ", " + std::to_string(cores) + " cores";
          auto run = last_token_logits(*rt, mode, build, options, caches, vocab);
          ASSERT_TRUE(run) << what << ": " << run.status().to_string();
          const std::vector<float>& got = *run;
          ASSERT_EQ(got.size(), 2u * static_cast<size_t>(vocab)) << what;
          if (want.empty()) want = got;
          EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
        }
      }
    }
  }
}

// A server's decode launches: graphs of fewer rows than the caches' sequences
// (BuildOptions::cache_sequences), their block tables pointing into the shared caches. Stepping
// each sequence on its own through a one-row graph gives the rows of the full batch's steps bit
// for bit, for both cache layouts (Llama's K/V, LongCat-Flash's latent).
TEST(Models, DecodeGraphsOfFewerRowsReadTheSharedCaches) {
  const auto llama = tiny_llama();
  const auto longcat = tiny_longcat();
  auto weights = random_weights(9);
  auto rt = testing::make_runtime(2);
  for (const bool is_llama : {true, false}) {
    const auto caches = is_llama ? models::cache_names(llama) : models::cache_names(longcat);
    const int64_t vocab = is_llama ? llama.vocab_size : longcat.vocab_size;
    auto build_with = [&](const models::BuildOptions& o) {
      return [&, o](models::Phase p) {
        return is_llama ? models::build_llama(llama, o, p, *weights)
                        : models::build_longcat_flash(longcat, o, p, *weights);
      };
    };
    const models::BuildOptions full = tiny_options();
    auto want = testing::drive(*rt, CompileOptions::for_mode(ExecutionMode::kSuperKernel), build_with(full), full,
                               caches, kPrompts, kSteps, vocab);
    ASSERT_TRUE(want) << want.status().to_string();

    models::BuildOptions one = full;
    one.batch = 1;
    one.cache_sequences = full.batch;
    auto prefill_graph = build_with(full)(models::Phase::kPrefill);
    auto decode_graph = build_with(one)(models::Phase::kDecode);
    ASSERT_TRUE(prefill_graph && decode_graph);
    auto prefill = rt->compile(*prefill_graph, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
    auto decode = rt->compile(*decode_graph, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
    ASSERT_TRUE(prefill && decode);
    models::CacheStorage storage;
    ASSERT_TRUE(storage.bind(**prefill, caches));
    ASSERT_TRUE(storage.bind(**decode, caches));  // the same cache shapes: the one-row graph holds both sequences
    models::PagedCacheLayout layout(full);
    auto in = layout.prefill(kPrompts);
    ASSERT_TRUE(in);
    ASSERT_TRUE(models::set_step_inputs(**prefill, *in));
    ASSERT_TRUE((*prefill)->run());
    const size_t prompt_rows = kPrompts[0].size() + kPrompts[1].size();
    const int64_t blocks = full.max_context / full.block_size;
    for (size_t step = 0; step < kSteps.size(); ++step) {
      auto both = layout.decode(kSteps[step]);
      ASSERT_TRUE(both);
      for (int64_t b = 0; b < full.batch; ++b) {
        models::StepInputs row;
        row.phase = models::Phase::kDecode;
        row.input_ids = {both->input_ids[b]};
        row.positions = {both->positions[b]};
        row.slot_mapping = {both->slot_mapping[b]};
        row.context_lens = {both->context_lens[b]};
        row.block_tables.assign(both->block_tables.begin() + b * blocks, both->block_tables.begin() + (b + 1) * blocks);
        ASSERT_TRUE(models::set_step_inputs(**decode, row));
        ASSERT_TRUE((*decode)->run());
        const std::vector<float> got = (*decode)->output_f32(models::kLogits);
        const size_t at = (prompt_rows + step * full.batch + b) * vocab;
        ASSERT_EQ(got.size(), static_cast<size_t>(vocab));
        EXPECT_EQ(std::memcmp(got.data(), want->logits.data() + at, got.size() * sizeof(float)), 0)
            << (is_llama ? "llama" : "longcat") << ", step " << step << ", sequence " << b;
      }
    }
  }
  models::BuildOptions bad = tiny_options();
  bad.cache_sequences = 1;  // fewer than the batch
  const Status s = bad.validate();
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("cache_sequences"), std::string::npos) << s.to_string();
}

TEST(Models, PagedCacheLayout) {
  models::PagedCacheLayout layout(tiny_options());
  EXPECT_EQ(layout.num_blocks(), 8);
  // Block j of sequence b is block j * batch + b.
  EXPECT_EQ(layout.slot(0, 5), (1 * 2 + 0) * 4 + 1);
  EXPECT_EQ(layout.slot(1, 0), 1 * 4);
  auto in = layout.prefill({{1, 2, 3}, {4}});
  ASSERT_TRUE(in);
  EXPECT_EQ(in->positions, (std::vector<int32_t>{0, 1, 2, 0, 0, 0, 0, 0}));
  EXPECT_EQ(in->seq_ids, (std::vector<int32_t>{0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(in->slot_mapping, (std::vector<int32_t>{0, 1, 2, 4, -1, -1, -1, -1}));
  EXPECT_EQ(layout.last_prefill_row(1), 3);
  auto step = layout.decode({5, 6});
  ASSERT_TRUE(step);
  EXPECT_EQ(step->positions, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(step->context_lens, (std::vector<int32_t>{4, 2}));
  EXPECT_FALSE(layout.prefill({{1, 2, 3, 4, 5, 6, 7, 8, 9}, {}}));
  EXPECT_FALSE(layout.decode({1}));
  EXPECT_EQ(layout.slot(2, 0), -1);
  EXPECT_EQ(layout.slot(0, 16), -1);
  layout.reset();
  EXPECT_EQ(layout.context_len(0), 0);
  auto again = layout.decode({5, 6});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->context_lens, (std::vector<int32_t>{1, 1}));
  EXPECT_TRUE(again->logit_rows.empty());
  EXPECT_TRUE(in->logit_rows.empty());  // kEveryToken: no row input

  // kLastToken: the graph's input logit_rows names each sequence's last token; its row b is sequence b's.
  auto options = tiny_options();
  options.prefill_logits = models::PrefillLogits::kLastToken;
  models::PagedCacheLayout last(options);
  auto rows = last.prefill({{1, 2, 3}, {4}});
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->logit_rows, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(last.last_prefill_row(1), 1);
}

TEST(Models, PagedCacheLayoutRefusesBadGeometry) {
  auto options = tiny_options();
  options.block_size = 0;
  models::PagedCacheLayout layout(options);
  EXPECT_FALSE(layout.status());
  auto in = layout.decode({1, 2});
  ASSERT_FALSE(in);
  EXPECT_NE(in.status().message().find("block_size"), std::string::npos) << in.status().to_string();
  options = tiny_options();
  options.batch = -3;
  EXPECT_FALSE(models::PagedCacheLayout(options).prefill({}));
}

// A second model's executable cannot share the first one's cache storage.
TEST(Models, CacheStorageRefusesOtherCaches) {
  auto weights = random_weights(2);
  const auto options = tiny_options();
  auto rt = testing::make_runtime(1);
  auto longcat = models::build_longcat_flash(tiny_longcat(), options, models::Phase::kDecode, *weights);
  auto llama = models::build_llama(tiny_llama(), options, models::Phase::kDecode, *weights);
  ASSERT_TRUE(longcat && llama);
  auto a = rt->compile(*longcat, CompileOptions::for_mode(ExecutionMode::kGraph));
  auto b = rt->compile(*llama, CompileOptions::for_mode(ExecutionMode::kGraph));
  ASSERT_TRUE(a && b);
  models::CacheStorage storage;
  ASSERT_TRUE(storage.bind(**a, models::cache_names(tiny_longcat())));
  Status s = storage.bind(**b, models::cache_names(tiny_llama()));
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("cache"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace sk
