// The run configuration of the `superkernel` command line: a YAML file validated once into the
// typed `Config` below. Nothing outside src/config sees YAML; every error names the file, the
// line, the key and what was expected.
//
//   sk::Expected<sk::config::Config> cfg = sk::config::load_config("configs/longcat-mini.yaml");
//   if (!cfg) { std::cerr << cfg.status().message() << "\n"; return 2; }
//   sk::CompileOptions opts = cfg->compile_options(cfg->exe_mode);
//   std::string scope_opts = cfg->scope_options_for("scope_3_part2_moe");
//
// Every key, its default and the rules that tie keys together: docs/CONFIG.md.
#ifndef SUPERKERNEL_CONFIG_CONFIG_H_
#define SUPERKERNEL_CONFIG_CONFIG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "superkernel/options.h"
#include "superkernel/runtime.h"
#include "superkernel/status.h"

namespace sk::config {

// A value's position in the config file, so checks made after loading (by the model builders,
// the compiler) can still point at the line that set it.
struct Location {
  std::string file;
  int line = 0;  // 1-based; 0: not in the file (a default)
  std::string to_string() const { return file + ":" + std::to_string(line); }
};

// `model_config.custom_params`: the switches of the original system.
struct CustomParams {
  bool enable_superkernel = false;
  int enable_multi_streams = 0;  // 0: one stream; 1: the MoE branch on stream `moe`; 2: also a `prefetch` stream
  bool enable_prefetch = false;
};

// `model_config.scope_options`: fusion-scope options for the scopes whose name matches `pattern`
// (shell glob: `*`, `?`, `[...]`). The first matching pattern in file order wins.
struct ScopeOptionRule {
  std::string pattern;
  std::string options;  // "key=value:key=value" (docs/OPTIONS.md, scope options)
  Location where;
};

// `model_config.compile_options`: extra CompileOptions keys (CompileOptions::keys()), applied to
// every execution mode.
struct CompileOptionSetting {
  std::string key;
  std::string value;
  Location where;
};

// One size key of `model.config`, named as in the published config.json; its value as text.
struct ModelKey {
  std::string key;
  std::string value;
  Location where;
};

struct ModelSection {
  std::string architecture;            // as written; the model builders check it (empty with a checkpoint)
  std::string checkpoint;              // directory, resolved against the config file's directory; empty: random weights
  std::string dtype = "f32";           // weight dtype: "f32", "bf16", "f16", "w4a8" or "w4"
  bool w8a8 = false;                   // quantise the linear weights to int8 at load
  int64_t int4_group = 128;            // w4a8, w4: inputs per scale when quantising at load
  bool int4_symmetric = false;         // w4a8, w4: zero point 8 (as Q4_0) instead of min/max groups
  std::string kv_cache_dtype = "f32";  // KV / latent cache storage: "f32" or "bf16"
  uint64_t seed = 1;                   // random weights
  bool allow_unused_tensors = false;   // `--allow-unused-tensors`: checkpoint tensors no graph reads are no error
  std::vector<ModelKey> keys;
};

// `runtime.core_limits.<stream>`: LimitCoreNum(cube, vector) for the ops of that stream.
struct StreamCoreLimit {
  std::string stream;  // "moe" or "prefetch"
  int cube = 0;        // 0: no limit
  int vector = 0;
  Location where;
};

struct RuntimeSection {
  int cores = 0;                         // 0: every CPU the process may use
  int cube_cores = 0;                    // cores [0, cube_cores) form the cube group; 0: every core serves both kinds
  std::string load_policy = "adaptive";  // RuntimeOptions::load_policy by name
  int64_t chunk_bytes = RuntimeOptions{}.chunk_bytes;  // RuntimeOptions::chunk_bytes
  std::vector<StreamCoreLimit> core_limits;
};

// `decode.sampling`: the sample kernel's attributes (temperature 0 = argmax).
struct Sampling {
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
};

struct DecodeSection {
  int batch = 1;
  int prompt_tokens = 8;
  int new_tokens = 16;
  Sampling sampling;
};

// `parallel`: LongCat-Flash across MPI processes (docs/COMM.md): tensor-parallel ranks (heads and
// dense MLP hidden units split) and expert-parallel ranks (routed experts split). Each is 1 or the
// number of ranks `mpirun -np N` starts; the command line checks that when it starts MPI.
struct ParallelSection {
  bool set = false;  // the file has a `parallel` section: the command runs under MPI
  int tp = 1;
  int ep = 1;
};

// `bench`: how `superkernel bench` samples each mode.
struct BenchSection {
  int warmup = 3;
  int runs = 20;
};

struct Config {
  std::string file;  // the path it was loaded from
  ExecutionMode exe_mode = ExecutionMode::kGraph;
  CustomParams custom;
  std::vector<ScopeOptionRule> scope_options;
  std::vector<CompileOptionSetting> compile_settings;
  ModelSection model;
  RuntimeSection runtime;
  DecodeSection decode;
  BenchSection bench;
  ParallelSection parallel;
  // Where each key that the file sets was written, by dotted path
  // ("model_config.custom_params.enable_prefetch").
  std::map<std::string, Location, std::less<>> lines;

  // Where `key` was set; the file with line 0 when it was left at its default.
  Location where(std::string_view key) const;
  // Options for `mode` (the configured one, or another for side-by-side comparisons), with
  // `compile_options` applied. The settings were checked at load, so this cannot fail.
  CompileOptions compile_options(ExecutionMode mode) const;
  // The options string of the first rule matching `scope`; empty when none matches.
  std::string scope_options_for(std::string_view scope) const;
  // The rule that gave `scope` its options (nullptr when none), for error messages.
  const ScopeOptionRule* scope_rule_for(std::string_view scope) const;
  // The core limit of `stream` (all zero when none is configured).
  StreamCoreLimit core_limit(std::string_view stream) const;
};

// Reads and validates a config file. Errors: "FILE:LINE: key 'a.b': expected ..., got '...'".
Expected<Config> load_config(const std::string& path);
// The rules that need the machine, for the command that is about to start a runtime on it:
// runtime.cores at most `machine_cpus` (the CPUs this process may use), and runtime.cube_cores
// and the core limits checked against the cores runtime.cores 0 stands for.
Status check_machine(const Config& cfg, int machine_cpus);
// The same from text; `file` names it in errors and anchors relative checkpoint paths.
Expected<Config> parse_config(std::string_view text, const std::string& file);

}  // namespace sk::config

#endif  // SUPERKERNEL_CONFIG_CONFIG_H_
