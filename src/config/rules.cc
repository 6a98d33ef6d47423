// Cross-key rules of the run configuration. They follow the original system's: super kernels and
// extra streams need a static graph, prefetch needs its own stream, a core limit needs the stream
// it limits. Each rule's error points at the key that breaks it and names the key it conflicts with.
#include "config/rules.h"

namespace sk::config {
namespace {

constexpr const char* kExeMode = "model_config.exe_mode";
constexpr const char* kSuperKernel = "model_config.custom_params.enable_superkernel";
constexpr const char* kStreams = "model_config.custom_params.enable_multi_streams";
constexpr const char* kPrefetch = "model_config.custom_params.enable_prefetch";

Status broken(const Config& cfg, const std::string& key, const std::string& why) {
  return Status::invalid_argument(cfg.where(key).to_string() + ": key '" + key + "': " + why);
}

// "(model_config.exe_mode is eager at line 3)" or "(model_config.exe_mode is eager by default)".
std::string set_at(const Config& cfg, const std::string& key, const std::string& value) {
  const Location loc = cfg.where(key);
  return "(" + key + " is " + value + (loc.line ? " at line " + std::to_string(loc.line) : " by default") + ")";
}

Status check_execution(const Config& cfg) {
  const std::string mode = execution_mode_name(cfg.exe_mode);
  const bool sk_set = cfg.lines.count(kSuperKernel) > 0;
  if (cfg.exe_mode == ExecutionMode::kEager && cfg.custom.enable_superkernel) {
    return broken(
        cfg, kSuperKernel,
        "super kernels need a static graph mode; set exe_mode to graph or superkernel " + set_at(cfg, kExeMode, mode));
  }
  if (cfg.exe_mode == ExecutionMode::kSuperKernel && sk_set && !cfg.custom.enable_superkernel) {
    return broken(cfg, kSuperKernel, "false contradicts exe_mode superkernel " + set_at(cfg, kExeMode, mode));
  }
  if (cfg.exe_mode == ExecutionMode::kEager && cfg.custom.enable_multi_streams > 0) {
    return broken(
        cfg, kStreams,
        "extra streams need a static graph mode; set exe_mode to graph or superkernel " + set_at(cfg, kExeMode, mode));
  }
  if (cfg.custom.enable_prefetch && cfg.custom.enable_multi_streams == 0) {
    return broken(cfg, kPrefetch,
                  "prefetch needs multi-streams: set enable_multi_streams to 1 or 2 " +
                      set_at(cfg, kStreams, std::to_string(cfg.custom.enable_multi_streams)));
  }
  return Status::ok();
}

// `cores`: the worker cores the runtime will start (runtime.cores, or the machine's CPUs when that
// is 0 and the machine is known), 0 when not known yet.
Status check_cores(const Config& cfg, int cores) {
  const RuntimeSection& rt = cfg.runtime;
  if (cores > 0 && rt.cube_cores >= cores) {
    const std::string of = rt.cores > 0 ? "runtime.cores (" + std::to_string(cores) + ")"
                                        : "the " + std::to_string(cores) + " CPUs runtime.cores 0 takes";
    return broken(cfg, "runtime.cube_cores",
                  "expected fewer than " + of +
                      " so that the vector group keeps a core; 0 lets every core serve both "
                      "kinds");
  }
  for (const StreamCoreLimit& limit : rt.core_limits) {
    const std::string key = "runtime.core_limits." + limit.stream;
    if (limit.stream == "moe" && cfg.custom.enable_multi_streams < 1) {
      return broken(cfg, key,
                    "a core limit for stream moe needs enable_multi_streams 1 or 2 " +
                        set_at(cfg, kStreams, std::to_string(cfg.custom.enable_multi_streams)));
    }
    if (limit.stream == "prefetch" && (cfg.custom.enable_multi_streams < 2 || !cfg.custom.enable_prefetch)) {
      return broken(cfg, key, "a core limit for stream prefetch needs enable_multi_streams 2 and enable_prefetch true");
    }
    if (limit.cube == 0 && limit.vector == 0) {
      return broken(cfg, key, "expected a cube or vector limit above 0 (leave the stream out for no limit)");
    }
    if (cores == 0) continue;  // the machine's core count is known only when the runtime starts
    const int cube_group = rt.cube_cores > 0 ? rt.cube_cores : cores;
    const int vector_group = rt.cube_cores > 0 ? cores - rt.cube_cores : cores;
    if (limit.cube > cube_group) {
      return broken(cfg, key + ".cube",
                    "expected at most " + std::to_string(cube_group) + " (the cube group's cores), got " +
                        std::to_string(limit.cube));
    }
    if (limit.vector > vector_group) {
      return broken(cfg, key + ".vector",
                    "expected at most " + std::to_string(vector_group) + " (the vector group's cores), got " +
                        std::to_string(limit.vector));
    }
  }
  return Status::ok();
}

Status check_model(const Config& cfg) {
  const ModelSection& m = cfg.model;
  if (m.checkpoint.empty() && m.architecture.empty()) {
    return broken(cfg, "model", "expected 'checkpoint' (a directory) or 'architecture' with its size keys");
  }
  if (!m.checkpoint.empty() && !m.keys.empty()) {
    return broken(cfg, "model.config." + m.keys.front().key,
                  "the sizes come from the checkpoint's config.json; remove model.config or model.checkpoint");
  }
  const bool int4 = m.dtype == "w4a8" || m.dtype == "w4";
  if (m.w8a8 && m.dtype != "f32" && m.dtype != "bf16") {
    return broken(
        cfg, "model.w8a8",
        "int8 weights and model.dtype " + m.dtype + " exclude each other " + set_at(cfg, "model.dtype", m.dtype));
  }
  for (const char* key : {"model.int4_group", "model.int4_symmetric"}) {
    if (!int4 && cfg.lines.count(key)) {
      return broken(
          cfg, key,
          "applies to 4-bit weights only: set model.dtype to w4a8 or w4 " + set_at(cfg, "model.dtype", m.dtype));
    }
  }
  if (int4 && (m.int4_group < 32 || (m.int4_group & (m.int4_group - 1)) != 0)) {
    return broken(cfg, "model.int4_group",
                  "expected a power of two >= 32 (inputs per scale), got " + std::to_string(m.int4_group));
  }
  return Status::ok();
}

Status check_sampling(const Config& cfg) {
  const Sampling& s = cfg.decode.sampling;
  if (s.temperature == 0.0f) {
    for (const char* key : {"top_k", "top_p"}) {
      const std::string path = std::string("decode.sampling.") + key;
      if (cfg.lines.count(path)) {
        return broken(cfg, path, "has no effect with temperature 0 (argmax); set decode.sampling.temperature above 0");
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status check_rules(const Config& cfg) {
  for (auto check : {check_execution, check_model, check_sampling}) {
    if (Status s = check(cfg); !s) return s;
  }
  return check_cores(cfg, cfg.runtime.cores);
}

Status check_machine(const Config& cfg, int machine_cpus) {
  if (cfg.runtime.cores > machine_cpus) {
    return broken(cfg, "runtime.cores",
                  "expected at most " + std::to_string(machine_cpus) + " (the CPUs this process may use), got " +
                      std::to_string(cfg.runtime.cores));
  }
  return check_cores(cfg, cfg.runtime.cores > 0 ? cfg.runtime.cores : machine_cpus);
}

}  // namespace sk::config
