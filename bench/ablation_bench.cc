// sk_bench_ablation: what each super kernel optimisation buys, alone and all together, against
// superkernel mode with none of them, graph mode and eager mode, side by side in one run, at 1
// and 2 cores, on the dispatch chains (bench_graphs.h) and on a decoder block.
//
// Every configuration is compiled first; one whose compile fails (an optimisation this build does
// not implement yet, or a combination it rejects) is reported as "unsupported: <first line of the
// error>", never timed. Each compiled configuration runs once and its outputs (and the KV caches
// the decoder block writes) must equal eager mode's bit for bit before anything is timed; a
// difference ends the program with an error naming the configuration and tensor.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "bench_graphs.h"
#include "superkernel/nn.h"
#include "superkernel/ops.h"
#include "util/half.h"

namespace {

using namespace sk;

// ---- The decoder block ------------------------------------------------------------------------
// One decode token through kDecoderBlocks Llama-style blocks in a row (each with its own weights
// and paged KV cache): rms_norm, q/k/v GEMVs, RoPE on q and k, the KV append, paged attention over
// kContext positions, output GEMV, residual add, rms_norm, SwiGLU MLP (gate and up GEMVs,
// silu_mul, down GEMV), residual add. bf16 weights, f32 activations and caches; 5 MiB of weights
// per block, 20 MiB in all, which the 32 MiB last-level cache of the reference machine holds.
constexpr int64_t kHidden = 512;
constexpr int64_t kHeads = 8;
constexpr int64_t kHeadDim = 64;  // kHeads * kHeadDim == kHidden
constexpr int64_t kFfn = 1024;
constexpr int64_t kContext = 128;  // positions attended to, the new token's included
constexpr int64_t kBlockSize = 16;
constexpr int kDecoderBlocks = 4;

// Random bf16 [rows, cols] weights with values of about 1/sqrt(cols), made once per process and
// shared by every graph (constant_external: executables read them in place).
struct Bf16Weight {
  std::shared_ptr<std::vector<uint16_t>> values;
  Shape shape;
};

Bf16Weight bf16_weight(int64_t rows, int64_t cols, uint32_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(cols));
  const std::vector<float> f = bench::random_vec(static_cast<size_t>(rows * cols), seed, -bound, bound);
  auto values = std::make_shared<std::vector<uint16_t>>(f.size());
  for (size_t i = 0; i < f.size(); ++i) (*values)[i] = f32_to_bf16(f[i]);
  return {values, {rows, cols}};
}

struct BlockWeights {
  Bf16Weight q, k, v, o, gate, up, down;
  std::vector<float> attention_norm, mlp_norm;
};

const std::vector<BlockWeights>& decoder_weights() {
  static const std::vector<BlockWeights> weights = [] {
    std::vector<BlockWeights> w;
    for (int b = 0; b < kDecoderBlocks; ++b) {
      const uint32_t s = 100 + 10 * static_cast<uint32_t>(b);
      w.push_back({bf16_weight(kHidden, kHidden, s), bf16_weight(kHidden, kHidden, s + 1),
                   bf16_weight(kHidden, kHidden, s + 2), bf16_weight(kHidden, kHidden, s + 3),
                   bf16_weight(kFfn, kHidden, s + 4), bf16_weight(kFfn, kHidden, s + 5),
                   bf16_weight(kHidden, kFfn, s + 6), bench::random_vec(kHidden, s + 7, 0.9f, 1.1f),
                   bench::random_vec(kHidden, s + 8, 0.9f, 1.1f)});
    }
    return w;
  }();
  return weights;
}

nn::Linear linear_weight(Graph& g, const std::string& name, const Bf16Weight& w) {
  return {
      g.constant_external(name, DType::kBF16, w.shape, w.values->data(), w.values->size() * sizeof(uint16_t), w.values),
      Tensor{}};
}

bench::Workload decoder_block(bool scoped) {
  bench::Workload w;
  w.graph = std::make_unique<Graph>("decoder_block");
  Graph& g = *w.graph;
  const int64_t cache_blocks = kContext / kBlockSize;
  Tensor x = g.input("x", DType::kF32, {1, kHidden});
  Tensor positions = g.input("positions", DType::kI32, {1});
  Tensor slot_mapping = g.input("slot_mapping", DType::kI32, {1});
  Tensor block_tables = g.input("block_tables", DType::kI32, {1, cache_blocks});
  Tensor context_lens = g.input("context_lens", DType::kI32, {1});
  Tensor cos_sin = nn::rope_cos_sin_table(g, "rope_cos_sin", kContext, kHeadDim, 10000.0);
  const sk_rope_attrs halves{static_cast<int32_t>(kHeadDim), static_cast<int32_t>(kHeadDim), 1};
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kHeadDim)));
  const float eps = 1e-6f;

  std::optional<SuperKernelScope> scope;
  if (scoped) scope.emplace(g, "decoder");
  for (int b = 0; b < kDecoderBlocks; ++b) {
    const BlockWeights& bw = decoder_weights()[static_cast<size_t>(b)];
    const std::string p = "block" + std::to_string(b) + ".";
    Tensor h =
        rms_norm(g, x, g.constant_f32(p + "attention_norm", {kHidden}, bw.attention_norm), eps, p + "attention_norm");
    Tensor q = nn::linear(g, h, linear_weight(g, p + "q_proj", bw.q), p + "q_proj");
    Tensor k = nn::linear(g, h, linear_weight(g, p + "k_proj", bw.k), p + "k_proj");
    Tensor v = nn::linear(g, h, linear_weight(g, p + "v_proj", bw.v), p + "v_proj");
    q = nn::rope(g, g.reshape(q, {1, kHeads, kHeadDim}), positions, cos_sin, halves, p + "q_rope");
    k = nn::rope(g, g.reshape(k, {1, kHeads, kHeadDim}), positions, cos_sin, halves, p + "k_rope");
    const Shape cache_shape{cache_blocks, kBlockSize, kHeads, kHeadDim};
    Tensor k_cache = g.variable(p + "k_cache", DType::kF32, cache_shape);
    Tensor v_cache = g.variable(p + "v_cache", DType::kF32, cache_shape);
    nn::kv_append(g, k, g.reshape(v, {1, kHeads, kHeadDim}), slot_mapping, k_cache, v_cache, p + "kv_append");
    Tensor o = nn::paged_attention(g, q, k_cache, v_cache, block_tables, context_lens, scale, p + "attention");
    x = add(g, x, nn::linear(g, g.reshape(o, {1, kHidden}), linear_weight(g, p + "o_proj", bw.o), p + "o_proj"),
            p + "residual.0");
    h = rms_norm(g, x, g.constant_f32(p + "mlp_norm", {kHidden}, bw.mlp_norm), eps, p + "mlp_norm");
    Tensor gate = nn::linear(g, h, linear_weight(g, p + "gate_proj", bw.gate), p + "gate_proj");
    Tensor up = nn::linear(g, h, linear_weight(g, p + "up_proj", bw.up), p + "up_proj");
    Tensor act = silu_mul(g, gate, up, p + "silu_mul");
    x = add(g, x, nn::linear(g, act, linear_weight(g, p + "down_proj", bw.down), p + "down_proj"), p + "residual.1");

    // The cache holds kContext - 1 earlier positions; the new token goes to the last slot.
    const size_t cache_values = static_cast<size_t>(shape_numel(cache_shape));
    w.inputs.push_back(bench::input_bytes(p + "k_cache", bench::random_vec(cache_values, 200 + b, -1, 1)));
    w.inputs.push_back(bench::input_bytes(p + "v_cache", bench::random_vec(cache_values, 300 + b, -1, 1)));
    w.variables.push_back(p + "k_cache");
    w.variables.push_back(p + "v_cache");
  }
  scope.reset();
  g.output(x, "y");

  std::vector<int32_t> table(static_cast<size_t>(cache_blocks));
  for (int64_t i = 0; i < cache_blocks; ++i) table[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  w.inputs.push_back(bench::input_bytes("x", bench::random_vec(kHidden, 7, -1, 1)));
  w.inputs.push_back(bench::input_bytes("positions", std::vector<int32_t>{kContext - 1}));
  w.inputs.push_back(bench::input_bytes("slot_mapping", std::vector<int32_t>{kContext - 1}));
  w.inputs.push_back(bench::input_bytes("block_tables", table));
  w.inputs.push_back(bench::input_bytes("context_lens", std::vector<int32_t>{kContext}));
  w.per_run = kDecoderBlocks;
  w.metric = "us_per_block";
  w.unit = "us";
  w.seconds_to_unit = 1e6;
  return w;
}

// ---- The configurations -----------------------------------------------------------------------
using Settings = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kOpt = "super_kernel_optimize_options.";
constexpr const char* kNone = "superkernel:none";
constexpr const char* kAll = "superkernel:all";
constexpr int kReplicas = 2;

std::pair<std::string, std::string> opt(const std::string& key, const std::string& value) {
  return {kOpt + key, value};
}

// Superkernel mode with every optimisation off, spelled out rather than taken from the defaults,
// which change as optimisations prove themselves.
Settings none_settings() {
  return {opt("recompute", "false"), opt("early_start", "0"), opt("sync_choice", "p2p"), opt("jit", "false"),
          opt("preload_code", "none")};
}

struct Config {
  std::string name;
  ExecutionMode mode = ExecutionMode::kSuperKernel;
  Settings settings;  // superkernel mode: set after none_settings(), so they win
  std::string group;  // the optimisation it turns on ("" for the baselines)
};

// The options a superkernel configuration compiles with: none_settings() with its own on top.
Settings merged_settings(const Config& c) {
  Settings all = none_settings();
  for (const auto& [key, value] : c.settings) {
    auto same = std::find_if(all.begin(), all.end(), [&](const auto& a) { return a.first == key; });
    if (same != all.end()) {
      same->second = value;
    } else {
      all.emplace_back(key, value);
    }
  }
  return all;
}

std::vector<Config> single_configs() {
  // One optimisation on, named after its option ("superkernel:jit", "superkernel:early_start=2").
  auto alone = [](const std::string& key, const std::string& value) {
    return Config{"superkernel:" + (value == "true" ? key : key + "=" + value),
                  ExecutionMode::kSuperKernel,
                  {opt(key, value)},
                  key};
  };
  std::vector<Config> c = {
      {"eager", ExecutionMode::kEager, {}, ""},
      {"graph", ExecutionMode::kGraph, {}, ""},
      {kNone, ExecutionMode::kSuperKernel, {}, ""},
      alone("recompute", "true"),
      alone("early_start", "1"),
      alone("early_start", "2"),
      alone("sync_choice", "cost"),
      alone("jit", "true"),
      alone("preload_code", "per-func"),
      alone("preload_code", "max"),
  };
  Config replicas = alone("kernel_replicas", std::to_string(kReplicas));
  replicas.name = "superkernel:replicas=" + std::to_string(kReplicas);
  c.push_back(replicas);
  return c;
}

std::string settings_text(const Config& c) {
  if (c.mode != ExecutionMode::kSuperKernel) return "";
  std::string text;
  for (const auto& [key, value] : merged_settings(c))
    text += (text.empty() ? "" : ",") + key.substr(std::strlen(kOpt)) + "=" + value;
  return text;
}

std::string first_line(const Status& s) {
  const std::string text = s.to_string();
  return text.substr(0, text.find('\n'));
}

struct Prepared {
  Config config;
  bench::Workload workload;
  std::unique_ptr<Executable> exe;
  std::string unsupported;
};

// Compiles `config` for `def` on `rt`; a configuration the build rejects comes back with
// `unsupported` set. Errors after a successful compile (inputs, the first run) are failures.
Expected<Prepared> prepare(Runtime& rt, const bench::WorkloadDef& def, const Config& config) {
  Prepared p{config, def.make(config.mode == ExecutionMode::kSuperKernel), nullptr, ""};
  CompileOptions opts = CompileOptions::for_mode(config.mode);
  if (config.mode == ExecutionMode::kSuperKernel) {
    for (const auto& [key, value] : merged_settings(config))
      if (Status s = opts.set(key, value); !s) {
        p.unsupported = first_line(s);
        return p;
      }
  }
  auto exe = rt.compile(*p.workload.graph, opts);
  if (!exe) {
    p.unsupported = first_line(exe.status());
    return p;
  }
  p.exe = std::move(*exe);
  SK_RETURN_IF_ERROR(bench::set_inputs(*p.exe, p.workload));
  SK_RETURN_IF_ERROR(p.exe->run());
  return p;
}

// The bytes of every output and of the variables a run writes, by name.
Expected<std::vector<std::pair<std::string, std::vector<uint8_t>>>> results_of(const Prepared& p) {
  std::vector<std::string> names = p.exe->output_names();
  names.insert(names.end(), p.workload.variables.begin(), p.workload.variables.end());
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  for (const std::string& name : names) {
    auto t = p.exe->tensor(name);
    if (!t) return t.status();
    std::vector<uint8_t> bytes(static_cast<size_t>(shape_numel(t->shape)) * dtype_size(t->dtype));
    SK_RETURN_IF_ERROR(p.exe->read(name, bytes.data(), bytes.size()));
    out.emplace_back(name, std::move(bytes));
  }
  return out;
}

Status check_same_as(const std::vector<std::pair<std::string, std::vector<uint8_t>>>& reference,
                     const std::vector<std::pair<std::string, std::vector<uint8_t>>>& got, const std::string& where) {
  if (got.size() != reference.size())
    return Status::internal(where + ": " + std::to_string(got.size()) + " result tensors, eager has " +
                            std::to_string(reference.size()));
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& [name, bytes] = got[i];
    if (name != reference[i].first || bytes.size() != reference[i].second.size())
      return Status::internal(where + ": result '" + name + "' does not match eager's '" + reference[i].first + "'");
    if (std::memcmp(bytes.data(), reference[i].second.data(), bytes.size()) != 0) {
      size_t at = 0;
      while (bytes[at] == reference[i].second[at]) ++at;
      return Status::internal(where + ": '" + name + "' differs from eager mode's at byte " + std::to_string(at) +
                              " (results must be bit-identical)");
    }
  }
  return Status::ok();
}

// "all": every optimisation whose own row compiled, each at its strongest setting (early_start=2
// before 1, preload_code=max before per-func); nothing when none did.
std::optional<Config> all_config(const std::vector<Prepared>& singles) {
  Config all{kAll, ExecutionMode::kSuperKernel, {}, "all"};
  std::vector<std::string> groups_done;
  for (auto it = singles.rbegin(); it != singles.rend(); ++it) {  // strongest level listed last
    const Config& c = it->config;
    if (c.group.empty() || !it->exe) continue;
    if (std::find(groups_done.begin(), groups_done.end(), c.group) != groups_done.end()) continue;
    groups_done.push_back(c.group);
    all.settings.insert(all.settings.end(), c.settings.begin(), c.settings.end());
  }
  if (groups_done.empty()) return std::nullopt;
  return all;
}

// Launches per run of each configuration that compiled, by (bench, cores, configuration).
using LaunchCounts = std::map<std::tuple<std::string, int, std::string>, size_t>;

void print_rows(const std::vector<bench::Result>& results, const LaunchCounts& launches, const std::string& bench,
                int cores) {
  const bench::Result* first = nullptr;
  for (const bench::Result& r : results)
    if (r.bench == bench && r.cores == cores) {
      first = &r;
      break;
    }
  if (first == nullptr) return;
  std::printf("\n%s at %d core(s): %s (%s, median of %d runs)\n", bench.c_str(), cores, first->metric.c_str(),
              first->unit.c_str(), first->runs);
  std::printf("%-36s %10s %10s %10s %8s %8s %8s\n", "configuration", "median", "min", "max", "/graph", "/sk-none",
              "launches");
  for (const bench::Result& r : results) {
    if (r.bench != bench || r.cores != cores) continue;
    if (!r.unsupported.empty()) {
      std::printf("%-36s unsupported: %s\n", r.mode.c_str(), r.unsupported.c_str());
      continue;
    }
    auto ratio = [&](const char* mode) {
      auto it = r.ratios.find(mode);
      char buf[16];
      if (it == r.ratios.end()) return std::string("-");
      std::snprintf(buf, sizeof(buf), "%.2f", it->second);
      return std::string(buf);
    };
    std::printf("%-36s %10.1f %10.1f %10.1f %8s %8s %8zu", r.mode.c_str(), r.median, r.min, r.max,
                ratio("graph").c_str(), ratio(kNone).c_str(), launches.at({bench, cores, r.mode}));
    if (r.mode == kAll) std::printf("   %s", r.settings.c_str());
    std::printf("\n");
  }
}

const char* kUsage =
    "usage: sk_bench_ablation [--json PATH] [--runs N] [--quick] [--only BENCH]... [--cores N]\n"
    "  benches: chain_elementwise chain_matvec_norm_256 chain_matvec_norm_512 decoder_block\n"
    "  rows: eager, graph, superkernel:none, each optimisation alone, superkernel:all; a configuration\n"
    "        this build rejects prints as 'unsupported: <reason>'. Progress goes to stderr.\n";

}  // namespace

int main(int argc, char** argv) {
  bench::Args args = bench::parse_args(argc, argv, kUsage);
  if (!args.modes.empty() || args.dump || args.trace) {
    std::fprintf(stderr, "sk_bench_ablation runs every configuration; --mode, --dump and --trace do not apply\n%s",
                 kUsage);
    return 2;
  }
  std::vector<bench::WorkloadDef> benches = bench::dispatch_chains();
  benches.push_back({"decoder_block", [](bool s) { return decoder_block(s); }});
  for (const std::string& name : args.only) {
    if (std::none_of(benches.begin(), benches.end(), [&](const bench::WorkloadDef& b) { return b.name == name; })) {
      std::fprintf(stderr, "unknown bench '%s'\n%s", name.c_str(), kUsage);
      return 2;
    }
  }
  const std::vector<Config> singles = single_configs();
  const int max_cores = std::min(2, bench::machine_cores());
  std::vector<bench::Result> results;
  std::vector<std::pair<std::string, int>> printed;
  LaunchCounts launches;

  for (int cores = 1; cores <= max_cores; ++cores) {
    if (!bench::cores_selected(args, cores)) continue;
    RuntimeOptions ro;
    ro.num_cores = cores;
    auto rt = Runtime::create(ro);
    if (!rt) {
      std::fprintf(stderr, "runtime: %s\n", rt.status().to_string().c_str());
      return 1;
    }
    for (const bench::WorkloadDef& b : benches) {
      if (!bench::selected(args, b.name)) continue;
      std::vector<Prepared> prepared;
      std::vector<std::pair<std::string, std::vector<uint8_t>>> reference;
      auto add = [&](const Config& config) -> Status {
        std::fprintf(stderr, "%s at %d core(s): compiling %s\n", b.name.c_str(), cores, config.name.c_str());
        Expected<Prepared> p = prepare(**rt, b, config);
        const std::string where = b.name + " at " + std::to_string(cores) + " core(s), " + config.name;
        if (!p) return p.status().with_context(where);
        if (!p->exe && config.group.empty()) return Status::internal(where + ": " + p->unsupported);
        if (p->exe) {
          auto got = results_of(*p);
          if (!got) return got.status().with_context(where);
          if (config.mode == ExecutionMode::kEager) {
            reference = std::move(*got);
          } else {
            SK_RETURN_IF_ERROR(check_same_as(reference, *got, where));
          }
        }
        prepared.push_back(std::move(*p));
        return Status::ok();
      };
      for (const Config& c : singles)
        if (Status s = add(c); !s) {
          std::fprintf(stderr, "%s\n", s.to_string().c_str());
          return 1;
        }
      if (std::optional<Config> all = all_config(prepared)) {
        if (Status s = add(*all); !s) {
          std::fprintf(stderr, "%s\n", s.to_string().c_str());
          return 1;
        }
      } else {
        prepared.push_back({Config{kAll, ExecutionMode::kSuperKernel, {}, "all"},
                            {},
                            nullptr,
                            "no optimisation is supported by this build"});
      }

      std::vector<std::function<Status()>> calls;
      std::vector<size_t> timed;
      for (size_t i = 0; i < prepared.size(); ++i) {
        if (!prepared[i].exe) continue;
        timed.push_back(i);
        calls.push_back([&p = prepared[i]] { return p.exe->run(); });
      }
      std::fprintf(stderr, "%s at %d core(s): timing %zu configurations, %d runs each\n", b.name.c_str(), cores,
                   calls.size(), args.runs);
      auto seconds = bench::time_interleaved(calls, /*warmup=*/1, args.runs);
      if (!seconds) {
        std::fprintf(stderr, "%s at %d core(s): %s\n", b.name.c_str(), cores, seconds.status().to_string().c_str());
        return 1;
      }
      std::vector<bench::Stats> stats(prepared.size());
      for (size_t t = 0; t < timed.size(); ++t) {
        const Prepared& p = prepared[timed[t]];
        std::vector<double> per_unit;
        for (double s : (*seconds)[t]) per_unit.push_back(s * p.workload.seconds_to_unit / p.workload.per_run);
        stats[timed[t]] = bench::stats_of(per_unit);
      }
      const bench::Workload& any = prepared.front().workload;
      auto median_of = [&](const std::string& name) {
        for (size_t i = 0; i < prepared.size(); ++i)
          if (prepared[i].config.name == name && prepared[i].exe) return stats[i].median;
        return 0.0;
      };
      const double graph = median_of("graph"), none = median_of(kNone);
      for (size_t i = 0; i < prepared.size(); ++i) {
        const Prepared& p = prepared[i];
        bench::Result r(b.name, p.config.name, cores, any.metric, stats[i].median, stats[i].min, stats[i].max,
                        args.runs, any.unit);
        if (p.exe || p.config.name != kAll) r.settings = settings_text(p.config);
        r.unsupported = p.unsupported;
        if (p.exe) launches[{b.name, cores, p.config.name}] = p.exe->report().num_launches;
        if (p.exe && graph > 0) r.ratios["graph"] = stats[i].median / graph;
        if (p.exe && none > 0) r.ratios[kNone] = stats[i].median / none;
        results.push_back(std::move(r));
      }
      printed.emplace_back(b.name, cores);
    }
  }
  std::printf("machine: %d cores, isa %s\n", bench::machine_cores(), Runtime::cpu_isa().c_str());
  for (const auto& [bench_name, cores] : printed) print_rows(results, launches, bench_name, cores);
  if (!args.json.empty()) {
    if (sk::Status s = bench::write_json(args.json, results); !s) {
      std::fprintf(stderr, "--json: %s\n", s.message().c_str());
      return 1;
    }
    std::printf("wrote %s\n", args.json.c_str());
  }
  return 0;
}
