// The YAML run configuration: what a valid file becomes, and for each kind of mistake, an error
// naming file:line, the key and what was expected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/config.h"

namespace sk::config {
namespace {

constexpr const char* kFile = "cfg/test.yaml";

// A complete valid config; tests replace single lines of it.
constexpr const char* kValid = R"(model_config:
  exe_mode: graph
  custom_params:
    enable_superkernel: true
    enable_multi_streams: 1
    enable_prefetch: false
  scope_options:
    "scope_*_part2_moe": "stream-fusion=1"
    "*":
      early-start: 1
      preload-code: per-func
  compile_options:
    super_kernel_debug_options.debug_sync_all: false
model:
  architecture: longcat_flash
  dtype: bf16
  seed: 7
  config:
    hidden_size: 256
    num_layers: 2
runtime:
  cores: 2
  cube_cores: 0
  core_limits:
    moe: {cube: 1, vector: 1}
decode:
  batch: 2
  prompt_tokens: 4
  new_tokens: 3
  sampling:
    temperature: 0.7
    top_k: 5
    top_p: 0.9
    seed: 11
bench:
  warmup: 1
  runs: 4
)";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Parses `text`, expects an error, and checks it starts with "cfg/test.yaml:<line>:" and names `key`.
void expect_error(const std::string& text, int line, const std::string& key, const std::string& also = "") {
  auto cfg = parse_config(text, kFile);
  ASSERT_FALSE(cfg) << "expected an error at line " << line;
  const std::string m = cfg.status().message();
  const std::string prefix = std::string(kFile) + ":" + std::to_string(line) + ":";
  EXPECT_TRUE(m.starts_with(prefix)) << m;
  EXPECT_TRUE(m.find(key) != std::string::npos) << m;
  EXPECT_TRUE(also.empty() || m.find(also) != std::string::npos) << m;
}

TEST(Config, ValidFileBecomesTypedStruct) {
  auto cfg = parse_config(kValid, kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  // exe_mode graph + enable_superkernel is superkernel mode, as in the original.
  EXPECT_EQ(cfg->exe_mode, ExecutionMode::kSuperKernel);
  EXPECT_TRUE(cfg->custom.enable_superkernel);
  EXPECT_EQ(cfg->custom.enable_multi_streams, 1);
  EXPECT_EQ(cfg->model.architecture, "longcat_flash");
  EXPECT_EQ(cfg->model.dtype, "bf16");
  EXPECT_EQ(cfg->model.seed, 7u);
  ASSERT_EQ(cfg->model.keys.size(), 2u);
  EXPECT_EQ(cfg->model.keys[0].key, "hidden_size");
  EXPECT_EQ(cfg->model.keys[0].value, "256");
  EXPECT_EQ(cfg->model.keys[0].where.line, 19);
  EXPECT_EQ(cfg->runtime.cores, 2);
  EXPECT_EQ(cfg->core_limit("moe").cube, 1);
  EXPECT_EQ(cfg->core_limit("prefetch").cube, 0);
  EXPECT_EQ(cfg->decode.batch, 2);
  EXPECT_FLOAT_EQ(cfg->decode.sampling.top_p, 0.9f);
  EXPECT_EQ(cfg->decode.sampling.seed, 11u);
  EXPECT_EQ(cfg->bench.runs, 4);
  EXPECT_EQ(cfg->where("model.config.num_layers").line, 20);
  EXPECT_EQ(cfg->where("decode.batch").to_string(), "cfg/test.yaml:27");
}

TEST(Config, ScopeOptionsFirstMatchingPatternWins) {
  auto cfg = parse_config(kValid, kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->scope_options_for("scope_3_part2_moe"), "stream-fusion=1");
  EXPECT_EQ(cfg->scope_options_for("scope_0_part1"), "early-start=1:preload-code=per-func");
  ASSERT_NE(cfg->scope_rule_for("scope_0_part1"), nullptr);
  EXPECT_EQ(cfg->scope_rule_for("scope_0_part1")->where.line, 9);
}

TEST(Config, CompileOptionsApplyToEveryMode) {
  std::string text = replace(kValid, "debug_sync_all: false", "debug_sync_all: true");
  auto cfg = parse_config(text, kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
    CompileOptions o = cfg->compile_options(mode);
    EXPECT_EQ(o.mode(), mode);
    EXPECT_TRUE(o.super_kernel_debug_options.debug_sync_all);
  }
}

TEST(Config, DefaultsWhenSectionsAreLeftOut) {
  auto cfg = parse_config("model:\n  architecture: llama\n", kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->exe_mode, ExecutionMode::kGraph);
  EXPECT_EQ(cfg->decode.batch, 1);
  EXPECT_EQ(cfg->decode.sampling.temperature, 0.0f);
  EXPECT_EQ(cfg->where("decode.batch").line, 0);
}

TEST(Config, CheckpointPathIsRelativeToTheConfigFile) {
  auto cfg = parse_config("model:\n  checkpoint: ../ckpt/tiny\n", kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->model.checkpoint, "ckpt/tiny");
}

TEST(ConfigErrors, NotYaml) { expect_error("model:\n  architecture: [llama\n", 3, "not valid YAML"); }

TEST(ConfigErrors, TopLevelNotAMapping) { expect_error("- a\n- b\n", 1, "expected a mapping of sections"); }

TEST(ConfigErrors, MissingModelSection) { expect_error("decode:\n  batch: 1\n", 1, "'model' section is missing"); }

TEST(ConfigErrors, UnknownSection) {
  expect_error(std::string(kValid) + "decoder:\n  batch: 1\n", 38, "key 'decoder'", "unknown key");
}

TEST(ConfigErrors, UnknownKeyListsTheKnownOnes) {
  expect_error(replace(kValid, "  batch: 2", "  batchsize: 2"), 27, "key 'decode.batchsize'",
               "batch, prompt_tokens, new_tokens, sampling");
}

TEST(ConfigErrors, DuplicateKey) {
  expect_error(replace(kValid, "  new_tokens: 3", "  new_tokens: 3\n  new_tokens: 4"), 30, "decode.new_tokens",
               "set twice (first at line 29)");
}

TEST(Config, LoadPolicyIsReadAndAnUnknownOneIsAnErrorListingThem) {
  auto cfg = parse_config(replace(kValid, "  cube_cores: 0", "  cube_cores: 0\n  load_policy: static"), kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->runtime.load_policy, "static");
  EXPECT_EQ(parse_config(kValid, kFile)->runtime.load_policy, "adaptive");
  expect_error(replace(kValid, "  cube_cores: 0", "  cube_cores: 0\n  load_policy: solo"), 24, "runtime.load_policy",
               "expected one of adaptive, static, one_thread, got 'solo'");
}

TEST(Config, ChunkBytesIsReadAndOutOfRangeIsAnErrorAtItsLine) {
  auto cfg = parse_config(replace(kValid, "  cube_cores: 0", "  cube_cores: 0\n  chunk_bytes: 65536"), kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->runtime.chunk_bytes, 65536);
  EXPECT_EQ(parse_config(kValid, kFile)->runtime.chunk_bytes, 256 << 10);
  EXPECT_EQ(
      parse_config(replace(kValid, "  cube_cores: 0", "  cube_cores: 0\n  chunk_bytes: 0"), kFile)->runtime.chunk_bytes,
      0);
  expect_error(replace(kValid, "  cube_cores: 0", "  cube_cores: 0\n  chunk_bytes: 100"), 24, "runtime.chunk_bytes",
               "expected 0 (no chunk helper) or an integer in [4096, 1073741824], got '100'");
  expect_error(replace(kValid, "  cube_cores: 0", "  cube_cores: 0\n  chunk_bytes: lots"), 24, "runtime.chunk_bytes",
               "got 'lots'");
}

TEST(ConfigErrors, BadExeMode) {
  expect_error(replace(kValid, "exe_mode: graph", "exe_mode: npugraph_ex"), 2, "model_config.exe_mode",
               "expected one of eager, graph, superkernel, got 'npugraph_ex'");
}

TEST(ConfigErrors, BadBool) {
  expect_error(replace(kValid, "enable_prefetch: false", "enable_prefetch: maybe"), 6,
               "model_config.custom_params.enable_prefetch", "expected true or false");
}

TEST(ConfigErrors, MultiStreamsOutOfRange) {
  expect_error(replace(kValid, "enable_multi_streams: 1", "enable_multi_streams: 3"), 5,
               "model_config.custom_params.enable_multi_streams", "expected an integer in [0, 2], got '3'");
}

TEST(ConfigErrors, IntegerNotANumber) {
  expect_error(replace(kValid, "  batch: 2", "  batch: two"), 27, "decode.batch", "an integer in [1, 4096]");
}

TEST(ConfigErrors, ZeroBatch) { expect_error(replace(kValid, "  batch: 2", "  batch: 0"), 27, "decode.batch"); }

TEST(ConfigErrors, TopPOutOfRange) {
  expect_error(replace(kValid, "top_p: 0.9", "top_p: 0"), 33, "decode.sampling.top_p", "(0, 1]");
}

TEST(ConfigErrors, SectionNotAMapping) {
  expect_error(replace(kValid, "    moe: {cube: 1, vector: 1}", "    moe: 2"), 25, "runtime.core_limits.moe",
               "a mapping with keys cube, vector, got '2'");
}

TEST(ConfigErrors, EmptyValue) {
  expect_error(replace(kValid, "  new_tokens: 3", "  new_tokens:"), 29, "decode.new_tokens", "got nothing");
}

TEST(ConfigErrors, UnknownDType) {
  expect_error(replace(kValid, "dtype: bf16", "dtype: fp8"), 16, "model.dtype", "one of f32, bf16");
}

TEST(Config, WeightTypes) {
  for (const char* dtype : {"f32", "bf16", "f16", "w4a8", "w4"}) {
    auto cfg = parse_config(replace(kValid, "dtype: bf16", std::string("dtype: ") + dtype), kFile);
    ASSERT_TRUE(cfg) << cfg.status().message();
    EXPECT_EQ(cfg->model.dtype, dtype);
  }
  auto cfg =
      parse_config(replace(kValid, "dtype: bf16", "dtype: w4a8\n  int4_group: 32\n  int4_symmetric: true"), kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->model.int4_group, 32);
  EXPECT_TRUE(cfg->model.int4_symmetric);
}

TEST(ConfigErrors, Int4KeysNeedFourBitWeights) {
  expect_error(replace(kValid, "dtype: bf16", "dtype: bf16\n  int4_group: 32"), 17, "model.int4_group",
               "4-bit weights only");
  expect_error(replace(kValid, "dtype: bf16", "dtype: f16\n  int4_symmetric: true"), 17, "model.int4_symmetric",
               "4-bit weights only");
  expect_error(replace(kValid, "dtype: bf16", "dtype: w4\n  int4_group: 48"), 17, "model.int4_group", "power of two");
  expect_error(replace(kValid, "dtype: bf16", "dtype: w4a8\n  w8a8: true"), 17, "model.w8a8", "model.dtype is w4a8");
}

TEST(Config, KvCacheDTypeDefaultsToF32) {
  auto cfg = parse_config(kValid, kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->model.kv_cache_dtype, "f32");
  cfg = parse_config(replace(kValid, "  seed: 7", "  kv_cache_dtype: bf16"), kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->model.kv_cache_dtype, "bf16");
}

TEST(ConfigErrors, UnknownKvCacheDType) {
  expect_error(replace(kValid, "  seed: 7", "  kv_cache_dtype: i8"), 17, "model.kv_cache_dtype", "one of f32, bf16");
}

TEST(ConfigErrors, ModelKeyNotAScalar) {
  expect_error(replace(kValid, "    num_layers: 2", "    num_layers: [2]"), 20, "model.config.num_layers",
               "a scalar value");
}

TEST(ConfigErrors, UnknownCompileOption) {
  expect_error(replace(kValid, "super_kernel_debug_options.debug_sync_all: false", "debug_sync_al: 1"), 13,
               "model_config.compile_options.debug_sync_al");
}

TEST(ConfigErrors, ModeSwitchInCompileOptions) {
  expect_error(replace(kValid, "super_kernel_debug_options.debug_sync_all: false", "super_kernel_optimize: true"), 13,
               "model_config.compile_options.super_kernel_optimize", "model_config.exe_mode");
}

TEST(ConfigErrors, UnknownKeySaysWhichWasMeant) {
  expect_error(replace(kValid, "  prompt_tokens: 4", "  promt_tokens: 4"), 28, "key 'decode.promt_tokens'",
               "did you mean 'prompt_tokens'?");
}

TEST(ConfigErrors, UnknownCompileOptionListsTheValidOnes) {
  expect_error(replace(kValid, "super_kernel_debug_options.debug_sync_all: false",
                       "super_kernel_debug_options.debug_sync_al: 1"),
               13, "model_config.compile_options.super_kernel_debug_options.debug_sync_al",
               "did you mean 'super_kernel_debug_options.debug_sync_all'?; expected one of prefetch, dump, dump_dir");
}

// Values set() accepts but validate() refuses are errors at their line, not when compiling.
TEST(ConfigErrors, CompileOptionOutOfRange) {
  expect_error(replace(kValid, "super_kernel_debug_options.debug_sync_all: false",
                       "super_kernel_optimize_options.early_start: 3"),
               13, "model_config.compile_options.super_kernel_optimize_options.early_start", "must be 0, 1 or 2");
  expect_error(replace(kValid, "super_kernel_debug_options.debug_sync_all: false",
                       "super_kernel_optimize_options.func_align: 8192"),
               13, "model_config.compile_options.super_kernel_optimize_options.func_align", "at most");
  expect_error(replace(kValid, "super_kernel_debug_options.debug_sync_all: false",
                       "super_kernel_optimize_options.kernel_replicas: 100"),
               13, "model_config.compile_options.super_kernel_optimize_options.kernel_replicas", "at most 64");
}

// Scope options are checked when the file is read, as the compiler will read them.
TEST(ConfigErrors, ScopeOptionTypo) {
  expect_error(replace(kValid, "\"stream-fusion=1\"", "\"stream-fusio=1\""), 8,
               "model_config.scope_options.scope_*_part2_moe", "unknown option 'stream-fusio'");
  expect_error(replace(kValid, "      early-start: 1", "      early-start: 3"), 10, "model_config.scope_options.*",
               "invalid value '3'");
  // A pair without '=' (which the compiler would skip with a warning) is a mistake in a config.
  expect_error(replace(kValid, "\"stream-fusion=1\"", "\"stream-fusion\""), 8,
               "model_config.scope_options.scope_*_part2_moe", "has no '=value'");
}

TEST(ConfigErrors, ScopeOptionsNotText) {
  expect_error(replace(kValid, "\"scope_*_part2_moe\": \"stream-fusion=1\"", "\"scope_*_part2_moe\": [1, 2]"), 8,
               "model_config.scope_options.scope_*_part2_moe", "key=value");
}

// The rules between keys (docs/CONFIG.md, "Rules").

TEST(ConfigRules, SuperKernelNeedsAStaticGraphMode) {
  std::string text = replace(kValid, "exe_mode: graph", "exe_mode: eager");
  text = replace(text, "enable_multi_streams: 1", "enable_multi_streams: 0");
  text = replace(text, "    moe: {cube: 1, vector: 1}\n", "");
  text = replace(text, "  core_limits:\n", "");
  expect_error(text, 4, "model_config.custom_params.enable_superkernel",
               "static graph mode; set exe_mode to graph or superkernel (model_config.exe_mode is eager at line 2)");
}

TEST(ConfigRules, SuperKernelModeContradictsDisabledSwitch) {
  std::string text = replace(kValid, "exe_mode: graph", "exe_mode: superkernel");
  text = replace(text, "enable_superkernel: true", "enable_superkernel: false");
  expect_error(text, 4, "enable_superkernel", "contradicts exe_mode superkernel");
}

TEST(ConfigRules, StreamsNeedAStaticGraphMode) {
  std::string text = replace(kValid, "exe_mode: graph", "exe_mode: eager");
  text = replace(text, "enable_superkernel: true", "enable_superkernel: false");
  expect_error(text, 5, "model_config.custom_params.enable_multi_streams", "static graph mode");
}

TEST(ConfigRules, PrefetchNeedsMultiStreams) {
  std::string text = replace(kValid, "enable_multi_streams: 1", "enable_multi_streams: 0");
  text = replace(text, "enable_prefetch: false", "enable_prefetch: true");
  expect_error(text, 6, "prefetch needs multi-streams",
               "(model_config.custom_params.enable_multi_streams is 0 at line 5)");
}

TEST(ConfigRules, PrefetchNeedsMultiStreamsEvenByDefault) {
  expect_error("model_config:\n  custom_params:\n    enable_prefetch: true\nmodel:\n  architecture: llama\n", 3,
               "enable_prefetch", "is 0 by default");
}

TEST(ConfigRules, CoreLimitNeedsItsStream) {
  expect_error(replace(kValid, "enable_multi_streams: 1", "enable_multi_streams: 0"), 25, "runtime.core_limits.moe",
               "needs enable_multi_streams 1 or 2");
}

TEST(ConfigRules, PrefetchStreamLimitNeedsLevelTwo) {
  expect_error(replace(kValid, "    moe: {cube: 1, vector: 1}", "    prefetch: {cube: 1}"), 25,
               "runtime.core_limits.prefetch", "enable_multi_streams 2 and enable_prefetch true");
}

TEST(ConfigRules, CoreLimitAboveTheGroup) {
  expect_error(replace(kValid, "    moe: {cube: 1, vector: 1}", "    moe: {cube: 3, vector: 1}"), 25,
               "runtime.core_limits.moe.cube", "at most 2");
}

TEST(ConfigRules, CoreLimitOfNothing) {
  expect_error(replace(kValid, "    moe: {cube: 1, vector: 1}", "    moe: {cube: 0}"), 25, "runtime.core_limits.moe",
               "above 0");
}

TEST(ConfigRules, CubeSplitLeavesNoVectorCore) {
  expect_error(replace(kValid, "  cube_cores: 0", "  cube_cores: 2"), 23, "runtime.cube_cores",
               "fewer than runtime.cores (2)");
}

TEST(ConfigRules, VectorLimitAboveTheVectorGroup) {
  std::string text = replace(kValid, "  cores: 2", "  cores: 3");
  text = replace(text, "  cube_cores: 0", "  cube_cores: 2");
  text = replace(text, "    moe: {cube: 1, vector: 1}", "    moe: {cube: 1, vector: 2}");
  expect_error(text, 25, "runtime.core_limits.moe.vector", "at most 1 (the vector group's cores)");
}

// The rules that need the machine: checked by check_machine() before a runtime starts.
TEST(ConfigRules, CoresAboveTheMachine) {
  auto cfg = parse_config(replace(kValid, "  cores: 2", "  cores: 16"), kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  Status s = check_machine(*cfg, 4);
  EXPECT_TRUE(s.message().starts_with(std::string(kFile) + ":22: key 'runtime.cores'")) << s.message();
  EXPECT_NE(s.message().find("expected at most 4 (the CPUs this process may use), got 16"), std::string::npos);
  EXPECT_TRUE(check_machine(*cfg, 16).is_ok());
}

TEST(ConfigRules, AllCoresStandsForTheMachinesCpus) {
  std::string text = replace(kValid, "  cores: 2", "  cores: 0");
  text = replace(text, "  cube_cores: 0", "  cube_cores: 4");
  text = replace(text, "    moe: {cube: 1, vector: 1}", "    moe: {cube: 1}");
  auto cfg = parse_config(text, kFile);
  ASSERT_TRUE(cfg) << cfg.status().message();
  Status s = check_machine(*cfg, 4);
  EXPECT_TRUE(s.message().starts_with(std::string(kFile) + ":23: key 'runtime.cube_cores'")) << s.message();
  EXPECT_NE(s.message().find("the 4 CPUs runtime.cores 0 takes"), std::string::npos) << s.message();
  EXPECT_TRUE(check_machine(*cfg, 8).is_ok());
  cfg->runtime.core_limits[0].cube = 6;
  s = check_machine(*cfg, 8);
  EXPECT_NE(s.message().find("key 'runtime.core_limits.moe.cube'"), std::string::npos) << s.message();
}

TEST(ConfigRules, CheckpointAndSizeKeysExclude) {
  expect_error(replace(kValid, "  architecture: longcat_flash", "  checkpoint: ckpt"), 19, "model.config.hidden_size",
               "come from the checkpoint's config.json");
}

TEST(ConfigRules, ModelNeedsArchitectureOrCheckpoint) {
  expect_error("model:\n  seed: 3\n", 1, "key 'model'", "checkpoint");
}

TEST(ConfigRules, SamplingKnobsNeedATemperature) {
  expect_error(replace(kValid, "temperature: 0.7", "temperature: 0"), 32, "decode.sampling.top_k", "temperature 0");
}

TEST(ConfigFile, MissingFileIsNotFound) {
  auto cfg = load_config("/nonexistent/dir/x.yaml");
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.status().code(), StatusCode::kNotFound);
  EXPECT_NE(cfg.status().message().find("/nonexistent/dir/x.yaml"), std::string::npos);
}

TEST(ConfigFile, ShippedConfigsLoad) {
  for (const auto& entry : std::filesystem::directory_iterator(SK_CONFIGS_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    auto cfg = load_config(entry.path().string());
    EXPECT_TRUE(cfg) << cfg.status().message();
  }
}

}  // namespace
}  // namespace sk::config
