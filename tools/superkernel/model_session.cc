// Config -> runtime, model graphs and per-mode executables. Errors found here still point at the
// config line (or the checkpoint's config.json line) that caused them.
#include "model_session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <numeric>
#include <type_traits>

#include "superkernel/attrs_moe.h"
#include "superkernel/ops.h"
#include "superkernel/weights.h"

namespace sk::cli {
namespace {

Status at_key(const config::Config& cfg, const std::string& key, const Status& s) {
  return s.with_context(cfg.where(key).to_string() + ": key '" + key + "'");
}

struct ArchitectureName {
  const char* name;
  Architecture arch;
};
constexpr ArchitectureName kArchitectures[] = {
    {"longcat_flash", Architecture::kLongCatFlash},
    {"longcat_flash_afd", Architecture::kLongCatFlashAfd},
    {"llama", Architecture::kLlama},
    // LlamaConfig's other families (config.json's model_type): the Llama builder with their biases,
    // q/k norms and sparse MoE MLPs.
    {"mistral", Architecture::kLlama},
    {"mixtral", Architecture::kLlama},
    {"qwen2", Architecture::kLlama},
    {"qwen3", Architecture::kLlama},
    {"qwen2_moe", Architecture::kLlama},
    {"qwen3_moe", Architecture::kLlama},
    // DeepseekConfig's two families: MLA attention, shared and routed experts.
    {"deepseek_v2", Architecture::kDeepseek},
    {"deepseek_v3", Architecture::kDeepseek},
};

std::string architecture_list() {
  std::string out;
  for (const ArchitectureName& a : kArchitectures) out += std::string(out.empty() ? "" : ", ") + a.name;
  return out;
}

// config.json's model_type, the architecture of a checkpoint.
std::string model_type(const Checkpoint& ckpt) {
  for (const ConfigEntry& e : ckpt.config_entries()) {
    if (e.key == "model_type") return e.value;
  }
  return "";
}

// Sets the checkpoint's config.json keys (every one applied, refused or listed as ignored in
// `notes`), then the config file's model.config keys (each must be one the model knows).
template <typename ModelConfig>
Status fill_model_config(const config::Config& cfg, const Checkpoint* ckpt, ModelConfig& mc,
                         std::vector<std::string>& notes, const std::string& architecture) {
  if constexpr (std::is_same_v<ModelConfig, models::LlamaConfig> ||
                std::is_same_v<ModelConfig, models::DeepseekConfig>) {
    // The family (llama, mixtral, qwen2, ...) before any key: a checkpoint's model_type, or the name.
    if (!ckpt) SK_RETURN_IF_ERROR(mc.set("model_type", architecture));
  }
  if (ckpt) {
    std::vector<models::IgnoredKey> ignored;
    if (Status s = models::load_config_json(*ckpt, mc, &ignored); !s) return s;
    for (const models::IgnoredKey& k : ignored)
      notes.push_back(ckpt->config_path() + ":" + std::to_string(k.line) + ": key '" + k.key + "' ignored: " + k.why);
  }
  for (const config::ModelKey& k : cfg.model.keys) {
    const std::string where = k.where.to_string() + ": key 'model.config." + k.key + "'";
    Status s = mc.set(k.key, k.value);
    if (s.code() == StatusCode::kNotFound) {
      std::string known;
      for (const std::string& name : ModelConfig::keys()) known += (known.empty() ? "" : ", ") + name;
      return Status::invalid_argument(where + ": not a key of " + cfg.model.architecture + "; expected one of " +
                                      known);
    }
    if (!s) return s.with_context(where);
  }
  if constexpr (std::is_same_v<ModelConfig, models::LlamaConfig> ||
                std::is_same_v<ModelConfig, models::DeepseekConfig>) {
    if (ckpt && architecture != mc.model_type())
      return at_key(cfg, "model.architecture",
                    Status::invalid_argument("'" + architecture +
                                             "' names another architecture than the checkpoint's "
                                             "model_type (" +
                                             mc.model_type() + ")"));
  }
  if (Status s = mc.validate(); !s) {
    // Point at the size key the message names, when the config file sets it.
    for (const config::ModelKey& k : cfg.model.keys) {
      if (s.message().find("'" + k.key + "'") != std::string::npos) {
        return s.with_context(k.where.to_string() + ": key 'model.config." + k.key + "'");
      }
    }
    return at_key(cfg, ckpt ? "model.checkpoint" : "model.config", s);
  }
  return Status::ok();
}

// Which config key a builder error is about, so it can point at its line.
std::string key_of_build_error(const config::Config& cfg, const Status& s) {
  const std::string& m = s.message();
  if (m.find("int4_group") != std::string::npos && cfg.where("model.int4_group").line > 0) return "model.int4_group";
  if (m.find("weight dtype") != std::string::npos || m.find("weight_dtype") != std::string::npos ||
      m.find("4-bit") != std::string::npos)
    return cfg.model.w8a8 ? "model.w8a8" : "model.dtype";
  if (cfg.custom.enable_prefetch && m.find("prefetch") != std::string::npos) {
    return "model_config.custom_params.enable_prefetch";
  }
  if (cfg.custom.enable_multi_streams && m.find("stream") != std::string::npos) {
    return "model_config.custom_params.enable_multi_streams";
  }
  if (cfg.parallel.set && m.find("'parallel") != std::string::npos) return "parallel";
  return "model";
}

// Tokens per sequence the caches hold: the prompt and the tokens appended after it. Of
// new_tokens ids the first comes from the prefill and each other one from a decode step, whose
// input is the id before it (the last id is sampled, never appended); at least one decode step,
// which trace and report run.
int64_t cache_tokens(const config::Config& cfg) {
  return static_cast<int64_t>(cfg.decode.prompt_tokens) + std::max(cfg.decode.new_tokens - 1, 1);
}

Expected<models::BuildOptions> build_options(const config::Config& cfg, const comm::Group& ranks) {
  models::BuildOptions b;
  std::string dtype = cfg.model.w8a8 ? "w8a8" : cfg.model.dtype;
  auto wd = models::parse_weight_dtype(dtype);
  if (!wd) return at_key(cfg, cfg.model.w8a8 ? "model.w8a8" : "model.dtype", wd.status());
  b.weight_dtype = *wd;
  b.int4_group = cfg.model.int4_group;
  b.int4_symmetric = cfg.model.int4_symmetric;
  // parse.cc admits only "f32" and "bf16".
  b.kv_cache_dtype = cfg.model.kv_cache_dtype == "bf16" ? DType::kBF16 : DType::kF32;
  b.batch = cfg.decode.batch;
  b.prefill_tokens = static_cast<int64_t>(cfg.decode.batch) * cfg.decode.prompt_tokens;
  // Generation reads only each sequence's last prompt token's logits (Generator::prefill).
  b.prefill_logits = models::PrefillLogits::kLastToken;
  b.block_size = 16;
  const int64_t context = cache_tokens(cfg);
  b.max_context = (context + b.block_size - 1) / b.block_size * b.block_size;
  const config::StreamCoreLimit moe = cfg.core_limit("moe");
  if (moe.cube != 0 && moe.vector != 0 && moe.cube != moe.vector) {
    return Status::unimplemented(moe.where.to_string() +
                                 ": key 'runtime.core_limits.moe': different cube and vector limits are not "
                                 "supported by the model builders yet; set them equal");
  }
  b.moe_core_limit = std::max(moe.cube, moe.vector);
  b.multi_streams = cfg.custom.enable_multi_streams;
  b.prefetch = cfg.custom.enable_prefetch;
  const config::StreamCoreLimit prefetch = cfg.core_limit("prefetch");
  b.prefetch_core_limit = std::max(prefetch.cube, prefetch.vector);
  b.scope_options = [&cfg](std::string_view scope) { return cfg.scope_options_for(scope); };
  b.parallel = {cfg.parallel.tp, cfg.parallel.ep, ranks};
  if (Status s = b.validate(); !s) return at_key(cfg, key_of_build_error(cfg, s), s);
  return b;
}

int64_t bytes_of(const Graph& g, TensorKind kind) {
  int64_t bytes = 0;
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& t = g.tensor(static_cast<int32_t>(i));
    if (t.kind == kind) bytes += t.storage_bytes;
  }
  return bytes;
}
int64_t constant_bytes(const Graph& g) { return bytes_of(g, TensorKind::kConstant); }
int64_t variable_bytes(const Graph& g) { return bytes_of(g, TensorKind::kVariable); }

// The first of `keys` the config file sets, so that an error points at a line the user wrote.
std::string first_set_key(const config::Config& cfg, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (cfg.where(k).line > 0) return k;
  return *(keys.end() - 1);
}

// Refuses a model whose weights and caches do not fit in the memory available, before any of it
// is allocated. The config line named is the one behind the larger part.
Status check_fits(const config::Config& cfg, const models::MemoryEstimate& estimate, int cache_copies) {
  int64_t caches = 0, needed = 0;
  if (__builtin_mul_overflow(estimate.cache_bytes, static_cast<int64_t>(cache_copies), &caches)) caches = INT64_MAX;
  if (__builtin_add_overflow(estimate.weight_bytes, caches, &needed)) needed = INT64_MAX;
  const int64_t available = available_memory_bytes();
  if (needed <= available) return Status::ok();
  const std::string key =
      estimate.weight_bytes >= caches
          ? first_set_key(cfg, {"model.config", "model.checkpoint", "model.dtype", "model.architecture", "model"})
          : first_set_key(cfg, {"decode.new_tokens", "decode.prompt_tokens", "decode.batch", "decode"});
  const int64_t context = cache_tokens(cfg);
  std::string parts = "weights " + std::to_string(estimate.weight_bytes) + " bytes (" +
                      human_bytes(estimate.weight_bytes) + ", " +
                      (cfg.model.w8a8 ? std::string("w8a8") : cfg.model.dtype) + ")";
  if (estimate.cache_bytes > 0) {
    parts += ", KV cache " + std::to_string(estimate.cache_bytes) + " bytes (" + human_bytes(estimate.cache_bytes) +
             ": batch " + std::to_string(cfg.decode.batch) + ", up to " + std::to_string(context) + " tokens each)";
    if (cache_copies > 1) parts += " x " + std::to_string(cache_copies) + " (one per execution mode)";
  }
  return at_key(
      cfg, key,
      Status::failed_precondition(
          "the model does not fit in memory: it needs " + std::to_string(needed) + " bytes (" + human_bytes(needed) +
          ": " + parts + "), and " + std::to_string(available) + " bytes (" + human_bytes(available) +
          ") are available (MemAvailable); choose smaller model.config sizes, model.dtype bf16 or "
          "model.w8a8, or fewer decode tokens"));
}

template <typename ModelConfig, typename BuildFn, typename EstimateFn>
Status build_graphs(const config::Config& cfg, const Checkpoint* ckpt, WeightSource& weights, Progress& progress,
                    Model& m, int cache_copies, BuildFn build, EstimateFn estimate) {
  ModelConfig mc;
  if (Status s = fill_model_config(cfg, ckpt, mc, m.notes, m.name); !s) return s;
  if constexpr (std::is_same_v<ModelConfig, models::LlamaConfig>) {
    if (mc.quantization.present()) {
      if (cfg.where("model.int4_group").line > 0 || cfg.where("model.int4_symmetric").line > 0)
        return at_key(cfg, cfg.where("model.int4_group").line > 0 ? "model.int4_group" : "model.int4_symmetric",
                      Status::invalid_argument("the checkpoint's packed 4-bit weights bring their own groups and "
                                               "zero points (config.json quantization_config); remove this key"));
      m.build.int4_group = mc.quantization.group_size > 0 ? mc.quantization.group_size : 128;  // for the estimate
    }
  }
  if (Status s = check_fits(cfg, estimate(mc, m.build), cache_copies); !s) return s;
  m.vocab_size = mc.vocab_size;
  m.hidden_size = mc.hidden_size;
  m.caches = models::cache_names(mc);
  auto built = [&](Expected<Graph> g) -> Expected<Graph> {
    if (!g) return at_key(cfg, key_of_build_error(cfg, g.status()), g.status());
    return g;
  };
  if (m.arch != Architecture::kLongCatFlashAfd) {
    progress.update("building the prefill graph");
    auto prefill = built(build(mc, m.build, models::Phase::kPrefill, weights));
    if (!prefill) return prefill.status();
    m.prefill.emplace(std::move(*prefill));
  } else {
    m.caches.clear();  // FFN only: no attention, no caches
  }
  progress.update("building the decode graph");
  auto decode = built(build(mc, m.build, models::Phase::kDecode, weights));
  if (!decode) return decode.status();
  m.decode = std::move(*decode);
  if (!ckpt) return Status::ok();
  // Every checkpoint tensor must be read by some graph (AFD reads only the FFN side's).
  std::vector<std::string> skipped;
  const bool allow = cfg.model.allow_unused_tensors || m.arch == Architecture::kLongCatFlashAfd;
  Status unread;
  if constexpr (std::is_same_v<ModelConfig, models::LongCatFlashConfig>) {
    // Expert parallelism: the other ranks' experts are theirs to read.
    unread =
        models::check_unread_tensors(mc, weights, allow, &skipped, {m.build.parallel.ranks.rank, m.build.parallel.ep});
  } else {
    unread = models::check_unread_tensors(mc, weights, allow, &skipped);
  }
  if (Status s = unread; !s) {
    const Status located = at_key(cfg, "model.checkpoint", s);
    return Status(located.code(), located.message() + "; --allow-unused-tensors runs it anyway");
  }
  for (const std::string& name : skipped) m.notes.push_back(weights.describe() + ": tensor '" + name + "' not read");
  // Stored dtypes the graphs do not bind in place (-v): what model.dtype converted at load.
  std::map<std::pair<std::string, std::string>, int> converted;
  for (size_t i = 0; i < m.decode.num_tensors(); ++i) {
    const TensorInfo& t = m.decode.tensor(static_cast<int32_t>(i));
    if (t.kind != TensorKind::kConstant) continue;
    auto stored = weights.stored(t.name);
    if (stored && stored->first != t.dtype) ++converted[{dtype_name(stored->first), dtype_name(t.dtype)}];
  }
  for (const auto& [types, n] : converted)
    m.notes.push_back(weights.describe() + ": " + std::to_string(n) + " tensor" + (n == 1 ? "" : "s") + " stored as " +
                      types.first + " converted to " + types.second + " at load (model.dtype " +
                      (cfg.model.w8a8 ? std::string("w8a8") : cfg.model.dtype) +
                      "; norms and embeddings are f32 in every build)");
  return Status::ok();
}

}  // namespace

Status locate_compile_error(const config::Config& cfg, const Graph& g, const Status& s) {
  for (size_t i = 0; i < g.num_scopes(); ++i) {
    const std::string& name = g.scope(static_cast<int32_t>(i)).name;
    if (name.empty() || s.message().find("'" + name + "'") == std::string::npos) continue;
    if (const config::ScopeOptionRule* rule = cfg.scope_rule_for(name)) {
      return s.with_context(rule->where.to_string() + ": key 'model_config.scope_options." + rule->pattern + "'");
    }
  }
  // Or a compile option the config set (e.g. an arena_limit_bytes the plan exceeds).
  for (const config::CompileOptionSetting& setting : cfg.compile_settings) {
    const std::string& m = s.message();
    if (m.find("option '" + setting.key + "'") != std::string::npos ||
        m.find("option " + setting.key + " ") != std::string::npos)
      return s.with_context(setting.where.to_string() + ": key 'model_config.compile_options." + setting.key + "'");
  }
  return s;
}

Expected<std::shared_ptr<Runtime>> create_runtime(const config::Config& cfg) {
  RuntimeOptions ro;
  ro.num_cores = cfg.runtime.cores;
  ro.cube_cores = cfg.runtime.cube_cores;
  auto policy = parse_load_policy(cfg.runtime.load_policy);  // the config reader checked the name
  if (!policy) return at_key(cfg, "runtime.load_policy", policy.status());
  ro.load_policy = *policy;
  ro.chunk_bytes = cfg.runtime.chunk_bytes;
  auto rt = Runtime::create(ro);
  if (!rt) return at_key(cfg, cfg.runtime.cores ? "runtime.cores" : "runtime", rt.status());
  return rt;
}

int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) return static_cast<int64_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : INT64_MAX;
}

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

Expected<std::unique_ptr<Model>> build_model(const config::Config& cfg, Progress& progress, int cache_copies,
                                             const comm::Group& ranks) {
  auto m = std::make_unique<Model>();
  std::shared_ptr<Checkpoint> ckpt;
  m->name = cfg.model.architecture;
  if (!cfg.model.checkpoint.empty()) {
    progress.update("opening checkpoint " + cfg.model.checkpoint);
    auto opened = Checkpoint::open(cfg.model.checkpoint);
    if (!opened) return at_key(cfg, "model.checkpoint", opened.status());
    ckpt = *opened;
    const std::string type = model_type(*ckpt);
    if (m->name.empty()) m->name = type;
    if (m->name.empty()) {
      return Status::invalid_argument(ckpt->config_path() + ": no model_type; set model.architecture to one of " +
                                      architecture_list());
    }
  }
  const ArchitectureName* found = nullptr;
  for (const ArchitectureName& a : kArchitectures) {
    if (m->name == a.name) found = &a;
  }
  if (!found) {
    // Named in the config file, or else by the checkpoint's model_type.
    const std::string where = cfg.model.architecture.empty()
                                  ? ckpt->config_path() + ": key 'model_type'"
                                  : cfg.where("model.architecture").to_string() + ": key 'model.architecture'";
    return Status::invalid_argument(where + ": expected one of " + architecture_list() + ", got '" + m->name + "'");
  }
  m->arch = found->arch;
  auto b = build_options(cfg, ranks);
  if (!b) return b.status();
  m->build = std::move(*b);
  std::unique_ptr<WeightSource> weights = ckpt ? checkpoint_weights(ckpt) : random_weights(cfg.model.seed);

  Status s;
  switch (m->arch) {
    case Architecture::kLongCatFlash:
      s = build_graphs<models::LongCatFlashConfig>(
          cfg, ckpt.get(), *weights, progress, *m, cache_copies, models::build_longcat_flash,
          [](const models::LongCatFlashConfig& c, const models::BuildOptions& o) {
            return models::estimate_memory(c, o);
          });
      break;
    case Architecture::kLlama:
      s = build_graphs<models::LlamaConfig>(
          cfg, ckpt.get(), *weights, progress, *m, cache_copies, models::build_llama,
          [](const models::LlamaConfig& c, const models::BuildOptions& o) { return models::estimate_memory(c, o); });
      break;
    case Architecture::kDeepseek:
      s = build_graphs<models::DeepseekConfig>(
          cfg, ckpt.get(), *weights, progress, *m, cache_copies, models::build_deepseek,
          [](const models::DeepseekConfig& c, const models::BuildOptions& o) { return models::estimate_memory(c, o); });
      break;
    case Architecture::kLongCatFlashAfd: {
      // One FFN step graph (the decode phase); build_graphs asks for no prefill.
      auto afd = [](const models::LongCatFlashConfig& c, const models::BuildOptions& o, models::Phase,
                    WeightSource& w) { return models::build_longcat_flash_afd(c, o, w); };
      s = build_graphs<models::LongCatFlashConfig>(cfg, ckpt.get(), *weights, progress, *m, cache_copies, afd,
                                                   models::estimate_memory_afd);
      break;
    }
  }
  if (!s) return s;
  m->weight_bytes = constant_bytes(m->decode);
  m->cache_bytes = variable_bytes(m->decode);
  return m;
}

std::vector<std::vector<int32_t>> make_prompts(const config::Config& cfg, const Model& model,
                                               const std::vector<int32_t>& ids) {
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(cfg.decode.batch));
  const int64_t vocab = std::max<int64_t>(model.vocab_size, 1);
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (!ids.empty()) {
      prompts[b] = ids;
      continue;
    }
    // A fixed, seed-dependent prompt: arbitrary ids, the same in every mode and run.
    const uint64_t seed = cfg.decode.sampling.seed;
    for (int i = 0; i < cfg.decode.prompt_tokens; ++i) {
      const uint64_t h = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (b * 7919 + static_cast<uint64_t>(i) * 104729 + 1);
      prompts[b].push_back(static_cast<int32_t>(h % static_cast<uint64_t>(vocab)));
    }
  }
  return prompts;
}

Generator::~Generator() = default;

Expected<std::unique_ptr<Generator>> Generator::create(const config::Config& cfg, const Model& model, Runtime& runtime,
                                                       const CompileOptions& options) {
  std::unique_ptr<Generator> gen(new Generator());
  gen->cfg_ = &cfg;
  gen->model_ = &model;
  auto compile = [&](const Graph& g) -> Expected<std::unique_ptr<Executable>> {
    auto exe = runtime.compile(g, options);
    if (!exe) return locate_compile_error(cfg, g, exe.status());
    return exe;
  };
  auto decode = compile(model.decode);
  if (!decode) return decode.status();
  gen->decode_ = std::move(*decode);
  if (model.prefill) {
    auto prefill = compile(*model.prefill);
    if (!prefill) return prefill.status();
    gen->prefill_ = std::move(*prefill);
    gen->layout_.emplace(model.build);
  }
  if (gen->prefill_) {
    SK_RETURN_IF_ERROR(gen->caches_.bind(*gen->prefill_, model.caches));
    SK_RETURN_IF_ERROR(gen->caches_.bind(*gen->decode_, model.caches));
  }
  if (model.arch != Architecture::kLongCatFlashAfd) {
    // Sampling runs the library's sample kernel, so every mode draws the same tokens.
    Graph g("sampler");
    Tensor logits = g.input("logits", DType::kF32, {cfg.decode.batch, model.vocab_size});
    Tensor step = g.input("step", DType::kI64, {1});
    sk_sample_attrs attrs{};
    attrs.seed = cfg.decode.sampling.seed;
    attrs.temperature = cfg.decode.sampling.temperature;
    attrs.top_p = cfg.decode.sampling.top_p;
    attrs.top_k = cfg.decode.sampling.top_k;
    std::vector<uint8_t> blob(sizeof(attrs));
    std::memcpy(blob.data(), &attrs, sizeof(attrs));
    auto ids = call_kernel(g, "sample.f32", {logits, step}, {TensorSpec(DType::kI32, {cfg.decode.batch})}, blob);
    g.output(ids.at(0), "ids");
    auto sampler = runtime.compile(g, CompileOptions::for_mode(ExecutionMode::kGraph));
    if (!sampler) return sampler.status().with_context("sampler");
    gen->sampler_ = std::move(*sampler);
  }
  return gen;
}

Status Generator::bind_caches(Executable& exe) { return caches_.bind(exe, model_->caches); }

std::vector<std::pair<std::string, const Executable*>> Generator::executables() const {
  std::vector<std::pair<std::string, const Executable*>> out = {{"decode", decode_.get()}};
  if (prefill_) out.push_back({"prefill", prefill_.get()});
  if (sampler_) out.push_back({"sampler", sampler_.get()});
  return out;
}

std::string memory_plan(const Model& model, const std::vector<std::pair<std::string, const Executable*>>& arenas) {
  std::string out = "memory: weights " + human_bytes(model.weight_bytes);
  if (model.cache_bytes > 0)
    out += ", KV cache " + human_bytes(model.cache_bytes) + " (one buffer the prefill and decode executables share)";
  int64_t total = 0;
  std::string each;
  for (const auto& [name, exe] : arenas) {
    total += exe->report().arena_bytes;
    each += std::string(each.empty() ? "" : ", ") + name + " " + human_bytes(exe->report().arena_bytes);
  }
  out += ", " + std::string(arenas.size() == 1 ? "arena " : "arenas ") + human_bytes(total);
  if (arenas.size() > 1) out += " (" + each + ")";
  return out + "; " + human_bytes(available_memory_bytes()) + " available\n";
}

Status Generator::read_logits(Executable& exe, const std::vector<int64_t>& rows) {
  const char* out = model_->arch == Architecture::kLongCatFlashAfd ? models::kHiddenStatesOut : models::kLogits;
  auto t = exe.tensor(out);
  if (!t) return t.status();
  const int64_t width = t->shape.back();
  std::vector<float> all = exe.output_f32(out);
  if (all.empty()) return Status::internal(std::string("cannot read output ") + out);
  logits_.assign(rows.size() * static_cast<size_t>(width), 0.0f);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy_n(all.begin() + rows[r] * width, width, logits_.begin() + static_cast<int64_t>(r) * width);
  }
  return Status::ok();
}

Status Generator::sample() {
  if (!sampler_) return Status::ok();
  SK_RETURN_IF_ERROR(sampler_->set_input("logits", logits_));
  const int64_t step = step_++;
  SK_RETURN_IF_ERROR(sampler_->set_input("step", &step, sizeof(step)));
  SK_RETURN_IF_ERROR(sampler_->run());
  ids_.assign(static_cast<size_t>(cfg_->decode.batch), 0);
  return sampler_->read("ids", ids_.data(), ids_.size() * sizeof(int32_t));
}

Status Generator::prefill(const std::vector<std::vector<int32_t>>& prompts) {
  std::vector<int64_t> rows(static_cast<size_t>(cfg_->decode.batch));
  if (!layout_) {
    // AFD: deterministic hidden states stand in for the attention side's output.
    std::vector<float> h(static_cast<size_t>(cfg_->decode.batch * model_->hidden_size));
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    logits_ = std::move(h);
    return Status::ok();
  }
  auto in = layout_->prefill(prompts);
  if (!in) return in.status();
  SK_RETURN_IF_ERROR(models::set_step_inputs(*prefill_, *in));
  SK_RETURN_IF_ERROR(prefill_->run());
  for (size_t b = 0; b < rows.size(); ++b) rows[b] = layout_->last_prefill_row(static_cast<int64_t>(b));
  SK_RETURN_IF_ERROR(read_logits(*prefill_, rows));
  return sample();
}

Status Generator::decode_step() {
  std::vector<int64_t> rows(static_cast<size_t>(cfg_->decode.batch));
  std::iota(rows.begin(), rows.end(), 0);
  if (!layout_) {
    SK_RETURN_IF_ERROR(decode_->set_input(models::kHiddenStates, logits_));
    SK_RETURN_IF_ERROR(decode_->run());
    return read_logits(*decode_, rows);
  }
  auto in = layout_->decode(ids_);
  if (!in) return in.status();
  last_ = std::move(*in);
  SK_RETURN_IF_ERROR(models::set_step_inputs(*decode_, last_));
  SK_RETURN_IF_ERROR(decode_->run());
  SK_RETURN_IF_ERROR(read_logits(*decode_, rows));
  return sample();
}

Status Generator::rerun_step() { return decode_->run(); }

Status Generator::rerun_prefill() {
  if (!prefill_) return Status::unimplemented("the FFN-only model has no prefill");
  return prefill_->run();
}

}  // namespace sk::cli
