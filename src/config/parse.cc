// YAML -> Config: the shape of the file (sections, keys, value types and ranges). The rules that
// tie keys together run afterwards (rules.cc), on the typed struct.
// yaml-cpp 0.7's node/impl.h trips GCC 12's -Wdangling-pointer in its own inline code (a false
// positive the project's -Werror would turn into a build failure).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
#include <yaml-cpp/yaml.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <utility>

#include "config/config.h"
#include "config/rules.h"
#include "config/suggest.h"
#include "superkernel/runtime.h"

namespace sk::config {
namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// One key of a mapping: its dotted path, the key node (whose position errors report) and the value.
struct Entry {
  std::string path;
  YAML::Node key;
  YAML::Node value;
};

class Reader {
 public:
  explicit Reader(Config& cfg) : cfg_(cfg) {}

  Location at(const YAML::Node& node) const {
    const int line = node.Mark().line;
    return {cfg_.file, line >= 0 ? line + 1 : 0};
  }

  Status error(const Entry& e, const std::string& expected) const {
    std::string got;
    if (!e.value || e.value.IsNull()) {
      got = ", got nothing";
    } else if (e.value.IsScalar()) {
      got = ", got '" + e.value.Scalar() + "'";
    } else if (e.value.IsSequence()) {
      got = ", got a list";
    } else if (e.value.IsMap()) {
      got = ", got a mapping";
    }
    return Status::invalid_argument(at(e.key).to_string() + ": key '" + e.path + "': expected " + expected + got);
  }

  // Calls `handle` for every key of the mapping `node` (named `path`), in file order, after
  // checking that the key is one of `known` (all keys when empty) and appears once.
  Status for_each(const Entry& section, const std::vector<std::string>& known,
                  const std::function<Status(const Entry&)>& handle) {
    if (!section.value.IsMap()) {
      return error(section, known.empty() ? "a mapping" : "a mapping with keys " + join(known, ", "));
    }
    std::map<std::string, int> seen;
    for (auto it = section.value.begin(); it != section.value.end(); ++it) {
      const YAML::Node key = it->first;  // a copy: `it->` yields a temporary that owns `first`
      const std::string prefix = section.path.empty() ? "" : section.path + ".";
      if (!key.IsScalar()) {
        return Status::invalid_argument(at(key).to_string() + ": in '" + section.path + "': expected a plain key");
      }
      Entry e{prefix + key.Scalar(), key, it->second};
      if (!known.empty() && std::find(known.begin(), known.end(), key.Scalar()) == known.end()) {
        return Status::invalid_argument(at(key).to_string() + ": key '" + e.path + "': unknown key" +
                                        did_you_mean(key.Scalar(), known) + "; expected one of " + join(known, ", "));
      }
      if (auto [prev, fresh] = seen.emplace(key.Scalar(), at(key).line); !fresh) {
        return Status::invalid_argument(at(key).to_string() + ": key '" + e.path + "': set twice (first at line " +
                                        std::to_string(prev->second) + ")");
      }
      cfg_.lines[e.path] = at(key);
      if (Status s = handle(e); !s) return s;
    }
    return Status::ok();
  }

  Expected<std::string> scalar(const Entry& e, const std::string& expected) const {
    if (!e.value.IsScalar()) return error(e, expected);
    return e.value.Scalar();
  }

  Status boolean(const Entry& e, bool& out) const {
    const char* expected = "true or false";
    auto text = scalar(e, expected);
    if (!text) return text.status();
    const std::string v = lower(*text);
    if (v == "true" || v == "1") {
      out = true;
    } else if (v == "false" || v == "0") {
      out = false;
    } else {
      return error(e, expected);
    }
    return Status::ok();
  }

  template <typename Int>
  Status integer(const Entry& e, Int lo, Int hi, Int& out) const {
    const std::string expected = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    auto text = scalar(e, expected);
    if (!text) return text.status();
    Int v{};
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
    if (ec != std::errc() || end != text->data() + text->size() || v < lo || v > hi) return error(e, expected);
    out = v;
    return Status::ok();
  }

  // A finite number in [lo, hi], or in (lo, hi] when `lo_open`.
  Status number(const Entry& e, double lo, double hi, bool lo_open, float& out) const {
    std::ostringstream expected;
    expected << "a number in " << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
    auto text = scalar(e, expected.str());
    if (!text) return text.status();
    double v = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
    const bool in_range = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
    if (ec != std::errc() || end != text->data() + text->size() || !in_range) return error(e, expected.str());
    out = static_cast<float>(v);
    return Status::ok();
  }

  Status choice(const Entry& e, const std::vector<std::string>& choices, std::string& out) const {
    const std::string expected = "one of " + join(choices, ", ");
    auto text = scalar(e, expected);
    if (!text) return text.status();
    if (std::find(choices.begin(), choices.end(), *text) == choices.end()) return error(e, expected);
    out = *text;
    return Status::ok();
  }

  // A scalar, or a list of scalars joined with `sep`.
  Status scalar_or_list(const Entry& e, const char* sep, std::string& out) const {
    const char* expected = "a value or a list of values";
    if (e.value.IsScalar()) {
      out = e.value.Scalar();
      return Status::ok();
    }
    if (!e.value.IsSequence()) return error(e, expected);
    std::vector<std::string> items;
    for (const YAML::Node& item : e.value) {
      if (!item.IsScalar()) return error(e, expected);
      items.push_back(item.Scalar());
    }
    out = join(items, sep);
    return Status::ok();
  }

 private:
  Config& cfg_;
};

Status read_custom_params(Reader& r, const Entry& section, CustomParams& out) {
  return r.for_each(section, {"enable_superkernel", "enable_multi_streams", "enable_prefetch"},
                    [&](const Entry& e) -> Status {
                      if (e.key.Scalar() == "enable_superkernel") return r.boolean(e, out.enable_superkernel);
                      if (e.key.Scalar() == "enable_prefetch") return r.boolean(e, out.enable_prefetch);
                      return r.integer(e, 0, 2, out.enable_multi_streams);
                    });
}

Status read_scope_options(Reader& r, const Entry& section, Config& cfg) {
  return r.for_each(section, {}, [&](const Entry& e) -> Status {
    ScopeOptionRule rule{e.key.Scalar(), "", r.at(e.key)};
    if (rule.pattern.empty()) return r.error(e, "a scope-name pattern as the key");
    if (e.value.IsScalar()) {
      rule.options = e.value.Scalar();
    } else if (e.value.IsMap()) {
      // {stream-fusion: 1, early-start: 1} is the readable spelling of "stream-fusion=1:early-start=1".
      std::vector<std::string> pairs;
      Status s = r.for_each(e, {}, [&](const Entry& option) -> Status {
        auto value = r.scalar(option, "a scope option value");
        if (!value) return value.status();
        pairs.push_back(option.key.Scalar() + "=" + *value);
        // Each option on its own first, so that an error points at its line.
        if (Status c = check_scope_options(rule.pattern, pairs.back()); !c)
          return Status::invalid_argument(r.at(option.key).to_string() + ": key '" + option.path + "': " + c.message());
        return Status::ok();
      });
      if (!s) return s;
      rule.options = join(pairs, ":");
    } else {
      return r.error(e, "scope options as \"key=value:key=value\" or a mapping of key: value");
    }
    // Checked now, as the compiler will read them, so that a typo is the same error (this line)
    // whichever command reads the config, before any model is built.
    std::vector<std::string> skipped;
    Status s = check_scope_options(rule.pattern, rule.options, &skipped);
    if (s && !skipped.empty()) s = Status::invalid_argument(skipped.front() + " (expected key=value)");
    if (!s) return Status::invalid_argument(r.at(e.key).to_string() + ": key '" + e.path + "': " + s.message());
    cfg.scope_options.push_back(std::move(rule));
    return Status::ok();
  });
}

// The compile options a config may set: all but the two mode switches (exe_mode sets those).
std::vector<std::string> settable_compile_options() {
  std::vector<std::string> keys = CompileOptions::keys();
  std::erase_if(keys,
                [](const std::string& k) { return k == "static_kernel_compile" || k == "super_kernel_optimize"; });
  return keys;
}

Status read_compile_options(Reader& r, const Entry& section, Config& cfg) {
  return r.for_each(section, {}, [&](const Entry& e) -> Status {
    CompileOptionSetting setting{e.key.Scalar(), "", r.at(e.key)};
    if (setting.key == "static_kernel_compile" || setting.key == "super_kernel_optimize") {
      return r.error(e,
                     "no execution-mode switch here (model_config.exe_mode and custom_params.enable_superkernel "
                     "select the mode)");
    }
    const std::vector<std::string> known = settable_compile_options();
    if (std::find(known.begin(), known.end(), setting.key) == known.end()) {
      return Status::invalid_argument(r.at(e.key).to_string() + ": key '" + e.path + "': unknown compile option" +
                                      did_you_mean(setting.key, known) + "; expected one of " + join(known, ", "));
    }
    if (Status s = r.scalar_or_list(e, ",", setting.value); !s) return s;
    // CompileOptions owns the keys, their types and their ranges: ask it, and keep its
    // explanation. The range checks are in validate(); on options where only this key differs
    // from the defaults, whatever validate() finds is about this key.
    CompileOptions probe;
    Status s = probe.set(setting.key, setting.value);
    if (s) s = probe.validate();
    if (!s) return Status::invalid_argument(r.at(e.key).to_string() + ": key '" + e.path + "': " + s.message());
    cfg.compile_settings.push_back(std::move(setting));
    return Status::ok();
  });
}

Status read_model_config(Reader& r, const Entry& section, Config& cfg) {
  return r.for_each(section, {"exe_mode", "custom_params", "scope_options", "compile_options"},
                    [&](const Entry& e) -> Status {
                      const std::string& k = e.key.Scalar();
                      if (k == "exe_mode") {
                        std::string mode;
                        if (Status s = r.choice(e, {"eager", "graph", "superkernel"}, mode); !s) return s;
                        cfg.exe_mode = *parse_execution_mode(mode);
                        return Status::ok();
                      }
                      if (k == "custom_params") return read_custom_params(r, e, cfg.custom);
                      if (k == "scope_options") return read_scope_options(r, e, cfg);
                      return read_compile_options(r, e, cfg);
                    });
}

Status read_model(Reader& r, const Entry& section, Config& cfg) {
  ModelSection& m = cfg.model;
  return r.for_each(section,
                    {"architecture", "checkpoint", "dtype", "w8a8", "int4_group", "int4_symmetric", "kv_cache_dtype",
                     "seed", "config"},
                    [&](const Entry& e) -> Status {
                      const std::string& k = e.key.Scalar();
                      if (k == "architecture") {
                        auto v = r.scalar(e, "an architecture name");
                        if (!v) return v.status();
                        m.architecture = *v;
                        return Status::ok();
                      }
                      if (k == "checkpoint") {
                        auto v = r.scalar(e, "a checkpoint directory");
                        if (!v) return v.status();
                        if (v->empty()) return r.error(e, "a checkpoint directory");
                        std::filesystem::path p(*v);
                        if (p.is_relative()) p = std::filesystem::path(cfg.file).parent_path() / p;
                        m.checkpoint = p.lexically_normal().string();
                        return Status::ok();
                      }
                      if (k == "dtype") return r.choice(e, {"f32", "bf16", "f16", "w4a8", "w4"}, m.dtype);
                      if (k == "int4_group") return r.integer<int64_t>(e, 32, 65536, m.int4_group);
                      if (k == "int4_symmetric") return r.boolean(e, m.int4_symmetric);
                      if (k == "w8a8") return r.boolean(e, m.w8a8);
                      if (k == "kv_cache_dtype") return r.choice(e, {"f32", "bf16"}, m.kv_cache_dtype);
                      if (k == "seed") return r.integer<uint64_t>(e, 0, UINT64_MAX, m.seed);
                      return r.for_each(e, {}, [&](const Entry& key) -> Status {
                        auto v = r.scalar(key, "a scalar value (as in config.json)");
                        if (!v) return v.status();
                        m.keys.push_back({key.key.Scalar(), *v, r.at(key.key)});
                        return Status::ok();
                      });
                    });
}

Status read_runtime(Reader& r, const Entry& section, Config& cfg) {
  RuntimeSection& rt = cfg.runtime;
  return r.for_each(section, {"cores", "cube_cores", "load_policy", "chunk_bytes", "core_limits"},
                    [&](const Entry& e) -> Status {
                      const std::string& k = e.key.Scalar();
                      if (k == "cores") return r.integer(e, 0, 1024, rt.cores);
                      if (k == "cube_cores") return r.integer(e, 0, 1024, rt.cube_cores);
                      if (k == "load_policy") return r.choice(e, {"adaptive", "static", "one_thread"}, rt.load_policy);
                      if (k == "chunk_bytes") {
                        Status st = r.integer<int64_t>(e, 0, kMaxChunkBytes, rt.chunk_bytes);
                        if (st && rt.chunk_bytes != 0 && rt.chunk_bytes < kMinChunkBytes)
                          return r.error(e, "0 (no chunk helper) or an integer in [" + std::to_string(kMinChunkBytes) +
                                                ", " + std::to_string(kMaxChunkBytes) + "]");
                        return st;
                      }
                      return r.for_each(e, {"moe", "prefetch"}, [&](const Entry& stream) -> Status {
                        StreamCoreLimit limit{stream.key.Scalar(), 0, 0, r.at(stream.key)};
                        Status s = r.for_each(stream, {"cube", "vector"}, [&](const Entry& v) -> Status {
                          return r.integer(v, 0, 1024, v.key.Scalar() == "cube" ? limit.cube : limit.vector);
                        });
                        if (!s) return s;
                        rt.core_limits.push_back(std::move(limit));
                        return Status::ok();
                      });
                    });
}

Status read_decode(Reader& r, const Entry& section, Config& cfg) {
  DecodeSection& d = cfg.decode;
  return r.for_each(section, {"batch", "prompt_tokens", "new_tokens", "sampling"}, [&](const Entry& e) -> Status {
    const std::string& k = e.key.Scalar();
    if (k == "batch") return r.integer(e, 1, 4096, d.batch);
    if (k == "prompt_tokens") return r.integer(e, 1, 1 << 20, d.prompt_tokens);
    if (k == "new_tokens") return r.integer(e, 1, 1 << 20, d.new_tokens);
    Sampling& s = d.sampling;
    return r.for_each(e, {"temperature", "top_k", "top_p", "seed"}, [&](const Entry& v) -> Status {
      const std::string& sk = v.key.Scalar();
      if (sk == "temperature") return r.number(v, 0.0, 1e6, false, s.temperature);
      if (sk == "top_k") return r.integer(v, 0, INT32_MAX, s.top_k);
      if (sk == "top_p") return r.number(v, 0.0, 1.0, true, s.top_p);
      return r.integer<uint64_t>(v, 0, UINT64_MAX, s.seed);
    });
  });
}

Status read_bench(Reader& r, const Entry& section, Config& cfg) {
  return r.for_each(section, {"warmup", "runs"}, [&](const Entry& e) -> Status {
    if (e.key.Scalar() == "warmup") return r.integer(e, 0, 100000, cfg.bench.warmup);
    return r.integer(e, 1, 100000, cfg.bench.runs);
  });
}

Status read_parallel(Reader& r, const Entry& section, Config& cfg) {
  cfg.parallel.set = true;
  return r.for_each(section, {"tp", "ep"}, [&](const Entry& e) -> Status {
    return r.integer(e, 1, 1 << 16, e.key.Scalar() == "tp" ? cfg.parallel.tp : cfg.parallel.ep);
  });
}

Status read_document(Reader& r, const YAML::Node& root, Config& cfg) {
  Entry top{"", YAML::Node(), root};
  if (!root.IsMap()) {
    return Status::invalid_argument(cfg.file +
                                    ":1: expected a mapping of sections (model_config, model, runtime, "
                                    "decode, bench, parallel)");
  }
  Status s = r.for_each(top, {"model_config", "model", "runtime", "decode", "bench", "parallel"},
                        [&](const Entry& e) -> Status {
                          const std::string& k = e.key.Scalar();
                          if (k == "model_config") return read_model_config(r, e, cfg);
                          if (k == "model") return read_model(r, e, cfg);
                          if (k == "runtime") return read_runtime(r, e, cfg);
                          if (k == "decode") return read_decode(r, e, cfg);
                          if (k == "parallel") return read_parallel(r, e, cfg);
                          return read_bench(r, e, cfg);
                        });
  if (!s) return s;
  if (!cfg.lines.count("model")) return Status::invalid_argument(cfg.file + ":1: the 'model' section is missing");
  return Status::ok();
}

}  // namespace

Expected<Config> parse_config(std::string_view text, const std::string& file) {
  Config cfg;
  cfg.file = file;
  Reader reader(cfg);
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (Status s = read_document(reader, root, cfg); !s) return s;
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(file + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  if (Status s = check_rules(cfg); !s) return s;
  // exe_mode graph with enable_superkernel is the original's spelling of superkernel mode.
  if (cfg.custom.enable_superkernel) cfg.exe_mode = ExecutionMode::kSuperKernel;
  if (cfg.exe_mode == ExecutionMode::kSuperKernel) cfg.custom.enable_superkernel = true;
  return cfg;
}

Expected<Config> load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(path + ": cannot open the config file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::not_found(path + ": cannot read the config file");
  return parse_config(text.str(), path);
}

}  // namespace sk::config
