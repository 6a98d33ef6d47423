// sk_bench_streams: a LongCat-style two-branch block (an attention-like + MLP main branch beside
// a MoE-like MLP branch that reads only the block's normed input) in superkernel mode, side by
// side in one run:
//   one_stream      both branches on the main stream, in program order (three segments a layer)
//   fused           stream fusion, branch on stream "moe" without a core limit (even split)
//   fused_limit1    stream fusion, branch on stream "moe" under LimitCoreNum(1, 1)
// at 1 and 2 cores (configurations whose core limits do not fit a core count are skipped with
// their error). Then weight prefetch: a chain of matmul layers where each layer's super kernel
// prefetches the next layer's weight from stream "prefetch" under LimitCoreNum(1, 1), compiled
// with prefetch=false (prefetch_off) and prefetch=true (prefetch_on), for weights that fit the
// shared L3 but not the private L2 (prefetch_l3, 16 MiB in all) and for weights that fit neither
// (prefetch_dram, 64 MiB). Then the tiling sink inside a fused MoE, on LongCat-mini's shapes
// (configs/longcat-mini.yaml, kLayers layers, kTokens tokens): the model's MoE (router,
// dispatch, grouped matmul, activation, grouped matmul, combine) compiled with
// super_kernel_optimize_options.tiling_sink=true (tiling_sink: the grouped matmuls' tilings are
// TILING steps inside the layer's super kernel) and =false (host_tiling: each grouped matmul
// cuts the segment and runs in a launch of its own, tiled first), for
//   moe_afd          the FFN-only (AFD) model: per layer one scope holding the MoE
//   longcat_decode   the decode step with the MoE on stream "moe" fused beside the main branch
#include <cstdio>
#include <functional>
#include <memory>
#include <random>

#include "bench_common.h"
#include "longcat_mini_config.h"
#include "superkernel/models.h"
#include "superkernel/ops.h"
#include "superkernel/weights.h"

namespace {

using namespace sk;

constexpr int kLayers = 8;
constexpr int64_t kTokens = 4, kHidden = 512, kFfn = 1024;

std::vector<float> random_vec(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Variant {
  std::string name;
  bool branch_stream = false;
  int32_t branch_limit = 0;
};

// x -> per layer: n = norm(x); branch = mlp_b(n) [stream moe]; x += mlp_a(attn_like(n));
// x += branch. Weights are distinct per layer (kLayers * 5 matrices, about 40 MiB in f32).
std::unique_ptr<Graph> build_block(const Variant& v, uint32_t seed) {
  auto g = std::make_unique<Graph>("two_branch_" + v.name);
  const std::string fusion = v.branch_stream ? "stream-fusion=1" : "";
  Stream moe = v.branch_stream ? g->create_stream("moe") : g->current_stream();
  auto weight = [&](const std::string& name, int64_t rows, int64_t cols) {
    return g->constant_f32(name, {rows, cols},
                           random_vec(static_cast<size_t>(rows * cols), seed++, 1.0f / static_cast<float>(cols)));
  };
  auto mlp = [&](Tensor x, const std::string& p) {
    Tensor gate = matmul(*g, x, weight(p + "gate", kFfn, kHidden), p + "gate");
    Tensor up = matmul(*g, x, weight(p + "up", kFfn, kHidden), p + "up");
    return matmul(*g, silu_mul(*g, gate, up, p + "act"), weight(p + "down", kHidden, kFfn), p + "down");
  };
  Tensor x = g->input("x", DType::kF32, {kTokens, kHidden});
  Tensor gamma = g->constant_f32("gamma", {kHidden}, std::vector<float>(kHidden, 1.0f));
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    Tensor n;
    {
      SuperKernelScope s(*g, "scope_" + std::to_string(l) + "_part1");
      n = rms_norm(*g, x, gamma, 1e-6f, p + "norm");
    }
    Event n_ready = g->create_event(p + "n_ready"), branch_done = g->create_event(p + "branch_done");
    g->record(n_ready);
    Tensor branch;
    {
      SuperKernelScope s(*g, "scope_" + std::to_string(l) + "_part2_moe", fusion);
      StreamScope on(*g, moe);
      LimitCoreNum limit(*g, v.branch_limit, v.branch_limit);
      g->wait(n_ready);
      branch = mlp(n, p + "moe.");
      g->record(branch_done);
    }
    {
      SuperKernelScope s(*g, "scope_" + std::to_string(l) + "_part2_main", fusion);
      Tensor a = softmax(*g, matmul(*g, n, weight(p + "attn", kHidden, kHidden), p + "attn"), p + "attn_softmax");
      x = add(*g, x, mlp(a, p + "mlp."), p + "residual");
      g->wait(branch_done);
      x = add(*g, x, branch, p + "shortcut");
    }
  }
  g->output(x, "y");
  return g;
}

// x -> per layer: x = softmax(x w_l), each w_l [rows, kHidden]; with stream "prefetch" warming
// w_{l+1} once the layer's input is ready. Fewer rows than kHidden are read as a slice (x keeps
// kHidden columns by padding the output back up with a second matmul of a small shared weight).
std::unique_ptr<Graph> build_prefetch_chain(int64_t weight_bytes_per_layer, uint32_t seed) {
  auto g = std::make_unique<Graph>("prefetch_chain");
  const int64_t k = kHidden, n = weight_bytes_per_layer / (k * 4);
  Stream side = g->create_stream("prefetch");
  std::vector<Tensor> w;
  for (int l = 0; l < kLayers; ++l)
    w.push_back(g->constant_f32("w" + std::to_string(l), {n, k},
                                random_vec(static_cast<size_t>(n * k), seed++, 1.0f / static_cast<float>(k))));
  Tensor back = g->constant_f32("back", {k, n}, random_vec(static_cast<size_t>(n * k), seed++, 1.0f));
  Tensor x = g->input("x", DType::kF32, {kTokens, k});
  for (int l = 0; l < kLayers; ++l) {
    SuperKernelScope s(*g, "scope_" + std::to_string(l), "stream-fusion=1");
    if (l + 1 < kLayers) {
      StreamScope on(*g, side);
      LimitCoreNum limit(*g, 1, 1);
      prefetch(*g, w[l + 1], x, n * k * 4, 0, "prefetch_w" + std::to_string(l + 1));
    }
    x = softmax(*g, matmul(*g, matmul(*g, x, w[l], "w" + std::to_string(l)), back), "act" + std::to_string(l));
  }
  g->output(x, "y");
  return g;
}

// One column of a side-by-side comparison: a graph compiled with some options.
struct Contender {
  std::string mode;
  const Graph* graph;
  CompileOptions options;
};

// Compiles every contender (one that fails to compile is skipped with its error), feeds it,
// checks that all give the same `output` bit for bit, then times them with
// bench::time_interleaved and appends one result per contender. False on a run error or
// differing outputs.
bool run_side_by_side(Runtime& rt, const bench::Args& args, int cores, const std::string& bench_name,
                      const std::vector<Contender>& contenders, const std::function<Status(Executable&)>& feed,
                      const std::string& output, std::vector<bench::Result>& results) {
  struct Prepared {
    const Contender* contender;
    std::unique_ptr<Executable> exe;
  };
  std::vector<Prepared> prepared;
  std::vector<float> reference;
  for (const Contender& c : contenders) {
    if (!bench::mode_selected(args, c.mode)) continue;
    auto exe = rt.compile(*c.graph, c.options);
    if (!exe) {
      std::fprintf(stderr, "%s %s at %d core(s): skipped: %s\n", bench_name.c_str(), c.mode.c_str(), cores,
                   exe.status().to_string().c_str());
      continue;
    }
    if (Status s = feed(**exe); !s || !(s = (*exe)->run())) {
      std::fprintf(stderr, "%s %s: %s\n", bench_name.c_str(), c.mode.c_str(), s.to_string().c_str());
      return false;
    }
    // Every contender computes the same thing: check before timing.
    std::vector<float> y = (*exe)->output_f32(output);
    if (reference.empty()) reference = y;
    if (y != reference) {
      std::fprintf(stderr, "%s at %d core(s): %s's output differs from %s's\n", bench_name.c_str(), cores,
                   c.mode.c_str(), prepared.front().contender->mode.c_str());
      return false;
    }
    prepared.push_back({&c, std::move(*exe)});
  }
  std::vector<std::function<Status()>> calls;
  for (Prepared& p : prepared) calls.push_back([&p] { return p.exe->run(); });
  auto seconds = bench::time_interleaved(calls, /*warmup=*/1, args.runs);
  if (!seconds) {
    std::fprintf(stderr, "%s: %s\n", bench_name.c_str(), seconds.status().to_string().c_str());
    return false;
  }
  for (size_t i = 0; i < prepared.size(); ++i) {
    std::vector<double> us;
    for (double t : (*seconds)[i]) us.push_back(t * 1e6);
    bench::Stats st = bench::stats_of(us);
    results.push_back(
        {bench_name, prepared[i].contender->mode, cores, "us_per_run", st.median, st.min, st.max, args.runs, "us"});
  }
  return true;
}

std::function<Status(Executable&)> feed_f32(const std::string& name, const std::vector<float>& values) {
  return [name, &values](Executable& exe) { return exe.set_input(name, values); };
}

// prefetch_off against prefetch_on (same graph) at `cores`.
bool bench_prefetch(Runtime& rt, const bench::Args& args, int cores, std::vector<bench::Result>& results) {
  const std::vector<float> input = random_vec(static_cast<size_t>(kTokens * kHidden), 1, 1.0f);
  for (const auto& [label, bytes] : {std::pair<std::string, int64_t>{"prefetch_l3", 2 << 20},
                                     std::pair<std::string, int64_t>{"prefetch_dram", 8 << 20}}) {
    if (!bench::selected(args, label)) continue;
    auto graph = build_prefetch_chain(bytes, 11);
    std::vector<Contender> contenders;
    for (bool on : {false, true}) {
      CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
      o.prefetch = on;
      contenders.push_back({on ? "prefetch_on" : "prefetch_off", graph.get(), o});
    }
    if (!run_side_by_side(rt, args, cores, label + "_x" + std::to_string(kLayers), contenders, feed_f32("x", input),
                          "y", results))
      return false;
  }
  return true;
}

// LongCat-mini (configs/longcat-mini.yaml) with kLayers layers.

// Tiling sink (tiling_sink) against cutting at each grouped matmul and tiling in its own launch
// (host_tiling), on the LongCat-mini AFD model and decode step.
bool bench_tiling_sink(Runtime& rt, const bench::Args& args, int cores, std::vector<bench::Result>& results) {
  const models::LongCatFlashConfig config = sk::bench::longcat_mini_config(kLayers);
  models::BuildOptions build;
  build.batch = kTokens;
  build.max_context = 64;
  auto tiling = [](bool sink) {
    CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
    o.super_kernel_optimize_options.tiling_sink = sink;
    return o;
  };
  const std::string suffix = "_x" + std::to_string(kLayers);
  if (bench::selected(args, "moe_afd")) {
    auto weights = random_weights(3);
    auto graph = models::build_longcat_flash_afd(config, build, *weights);
    if (!graph) {
      std::fprintf(stderr, "moe_afd: %s\n", graph.status().to_string().c_str());
      return false;
    }
    const std::vector<float> hidden = random_vec(static_cast<size_t>(kTokens * config.hidden_size), 5, 1.0f);
    if (!run_side_by_side(rt, args, cores, "moe_afd" + suffix,
                          {{"tiling_sink", &*graph, tiling(true)}, {"host_tiling", &*graph, tiling(false)}},
                          feed_f32(models::kHiddenStates, hidden), models::kHiddenStatesOut, results))
      return false;
  }
  if (bench::selected(args, "longcat_decode")) {
    models::BuildOptions decode = build;
    decode.multi_streams = 1;
    auto weights = random_weights(3);
    auto graph = models::build_longcat_flash(config, decode, models::Phase::kDecode, *weights);
    if (!graph) {
      std::fprintf(stderr, "longcat_decode: %s\n", graph.status().to_string().c_str());
      return false;
    }
    // One decode step of kTokens sequences at position 0, rerun as is: each run writes the same
    // cache slots with the same values, so every run and contender computes the same logits.
    models::PagedCacheLayout layout(decode);
    auto step = layout.decode(std::vector<int32_t>(static_cast<size_t>(kTokens), 7));
    if (!step) {
      std::fprintf(stderr, "longcat_decode: %s\n", step.status().to_string().c_str());
      return false;
    }
    const models::StepInputs inputs = *step;
    if (!run_side_by_side(
            rt, args, cores, "longcat_decode" + suffix,
            {{"tiling_sink", &*graph, tiling(true)}, {"host_tiling", &*graph, tiling(false)}},
            [&inputs](Executable& exe) { return models::set_step_inputs(exe, inputs); }, models::kLogits, results))
      return false;
  }
  return true;
}

constexpr const char* kUsage =
    "usage: sk_bench_streams [--json PATH] [--runs N] [--quick] [--cores N] [--mode NAME]...\n"
    "                        [--only two_branch|prefetch_l3|prefetch_dram|moe_afd|longcat_decode]...\n";

std::shared_ptr<Runtime> runtime_with(int cores) {
  RuntimeOptions ro;
  ro.num_cores = cores;
  auto rt = Runtime::create(ro);
  if (!rt) {
    std::fprintf(stderr, "runtime: %s\n", rt.status().to_string().c_str());
    return nullptr;
  }
  return *rt;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args = bench::parse_args(argc, argv, kUsage);
  const std::vector<Variant> variants = {{"one_stream", false, 0}, {"fused", true, 0}, {"fused_limit1", true, 1}};
  std::vector<bench::Result> results;
  const std::vector<float> input = random_vec(static_cast<size_t>(kTokens * kHidden), 1, 1.0f);
  const int max_cores = std::min(2, bench::machine_cores());
  for (int cores = 1; cores <= max_cores; ++cores) {
    if (!bench::cores_selected(args, cores) || !bench::selected(args, "two_branch")) continue;
    auto rt = runtime_with(cores);
    if (!rt) return 1;
    std::vector<std::unique_ptr<Graph>> graphs;
    std::vector<Contender> contenders;
    for (const Variant& v : variants) {
      graphs.push_back(build_block(v, 7));
      contenders.push_back({v.name, graphs.back().get(), CompileOptions::for_mode(ExecutionMode::kSuperKernel)});
    }
    if (!run_side_by_side(*rt, args, cores, "two_branch_x" + std::to_string(kLayers), contenders, feed_f32("x", input),
                          "y", results))
      return 1;
  }
  if (!results.empty()) bench::print_table(results, {"one_stream", "fused", "fused_limit1"}, "one_stream");
  std::vector<bench::Result> prefetch_results;
  for (int cores = 2; cores <= max_cores; ++cores) {
    if (!bench::cores_selected(args, cores)) continue;
    auto rt = runtime_with(cores);
    if (!rt || !bench_prefetch(*rt, args, cores, prefetch_results)) return 1;
  }
  if (!prefetch_results.empty()) {
    std::printf("\n");
    bench::print_table(prefetch_results, {"prefetch_off", "prefetch_on"}, "prefetch_off");
  }
  std::vector<bench::Result> tiling_results;
  for (int cores = 1; cores <= max_cores; ++cores) {
    if (!bench::cores_selected(args, cores)) continue;
    auto rt = runtime_with(cores);
    if (!rt || !bench_tiling_sink(*rt, args, cores, tiling_results)) return 1;
  }
  if (!tiling_results.empty()) {
    std::printf("\n");
    bench::print_table(tiling_results, {"host_tiling", "tiling_sink"}, "host_tiling");
  }
  results.insert(results.end(), prefetch_results.begin(), prefetch_results.end());
  results.insert(results.end(), tiling_results.begin(), tiling_results.end());
  if (!args.json.empty()) {
    if (sk::Status s = bench::write_json(args.json, results); !s) {
      std::fprintf(stderr, "--json: %s\n", s.message().c_str());
      return 1;
    }
    std::printf("wrote %s\n", args.json.c_str());
  }
  return 0;
}
