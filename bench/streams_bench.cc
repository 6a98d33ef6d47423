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
// (prefetch_dram, 64 MiB). The tiling sink inside a fused MoE is not implemented: no column.
#include <cstdio>
#include <memory>
#include <random>

#include "bench_common.h"
#include "superkernel/ops.h"

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

// Times prefetch_off against prefetch_on (same graph) at `cores`, interleaved; appends results.
bool bench_prefetch(Runtime& rt, const bench::Args& args, int cores, std::vector<bench::Result>& results) {
  const std::vector<float> input = random_vec(static_cast<size_t>(kTokens * kHidden), 1, 1.0f);
  for (const auto& [label, bytes] : {std::pair<std::string, int64_t>{"prefetch_l3", 2 << 20},
                                     std::pair<std::string, int64_t>{"prefetch_dram", 8 << 20}}) {
    if (!bench::selected(args, label)) continue;
    auto graph = build_prefetch_chain(bytes, 11);
    std::unique_ptr<Executable> exes[2];
    std::vector<double> us[2];
    std::vector<float> reference;
    for (int on = 0; on < 2; ++on) {
      CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
      o.prefetch = on == 1;
      auto exe = rt.compile(*graph, o);
      if (!exe) {
        std::fprintf(stderr, "%s at %d core(s): skipped: %s\n", label.c_str(), cores, exe.status().to_string().c_str());
        return true;
      }
      if (Status s = (*exe)->set_input("x", input); !s || !(s = (*exe)->run())) {
        std::fprintf(stderr, "%s: %s\n", label.c_str(), s.to_string().c_str());
        return false;
      }
      std::vector<float> y = (*exe)->output_f32("y");
      if (reference.empty()) reference = y;
      if (y != reference) {
        std::fprintf(stderr, "%s at %d core(s): output differs with prefetch on\n", label.c_str(), cores);
        return false;
      }
      exes[on] = std::move(*exe);
    }
    for (int round = 0; round < 1 + args.runs; ++round) {
      for (int i = 0; i < 2; ++i) {
        const int on = (i + round) % 2;
        const double t0 = bench::now_seconds();
        if (Status s = exes[on]->run(); !s) {
          std::fprintf(stderr, "%s: %s\n", label.c_str(), s.to_string().c_str());
          return false;
        }
        if (round >= 1) us[on].push_back((bench::now_seconds() - t0) * 1e6);
      }
    }
    for (int on = 0; on < 2; ++on) {
      bench::Stats st = bench::stats_of(us[on]);
      results.push_back({label + "_x" + std::to_string(kLayers), on ? "prefetch_on" : "prefetch_off", cores,
                         "us_per_run", st.median, st.min, st.max, args.runs, "us"});
    }
  }
  return true;
}

constexpr const char* kUsage =
    "usage: sk_bench_streams [--json PATH] [--runs N] [--quick] [--cores N] [--mode NAME]...\n"
    "                        [--only two_branch|prefetch_l3|prefetch_dram]...\n";

}  // namespace

int main(int argc, char** argv) {
  bench::Args args = bench::parse_args(argc, argv, kUsage);
  const std::vector<Variant> variants = {{"one_stream", false, 0}, {"fused", true, 0}, {"fused_limit1", true, 1}};
  std::vector<bench::Result> results;
  const std::vector<float> input = random_vec(static_cast<size_t>(kTokens * kHidden), 1, 1.0f);
  for (int cores = 1; cores <= std::min(2, bench::machine_cores()); ++cores) {
    if (!bench::cores_selected(args, cores) || !bench::selected(args, "two_branch")) continue;
    RuntimeOptions ro;
    ro.num_cores = cores;
    auto rt = Runtime::create(ro);
    if (!rt) {
      std::fprintf(stderr, "runtime: %s\n", rt.status().to_string().c_str());
      return 1;
    }
    struct Prepared {
      const Variant* variant;
      std::unique_ptr<Executable> exe;
      std::vector<double> us;
    };
    std::vector<Prepared> prepared;
    std::vector<float> reference;
    for (const Variant& v : variants) {
      if (!bench::mode_selected(args, v.name)) continue;
      auto graph = build_block(v, 7);
      auto exe = (*rt)->compile(*graph, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
      if (!exe) {
        std::fprintf(stderr, "%s at %d core(s): skipped: %s\n", v.name.c_str(), cores,
                     exe.status().to_string().c_str());
        continue;
      }
      if (Status s = (*exe)->set_input("x", input); !s || !(s = (*exe)->run())) {
        std::fprintf(stderr, "%s: %s\n", v.name.c_str(), s.to_string().c_str());
        return 1;
      }
      // Every variant computes the same block: check before timing.
      std::vector<float> y = (*exe)->output_f32("y");
      if (reference.empty()) reference = y;
      if (y != reference) {
        std::fprintf(stderr, "%s at %d core(s): output differs from %s\n", v.name.c_str(), cores,
                     prepared.front().variant->name.c_str());
        return 1;
      }
      prepared.push_back({&v, std::move(*exe), {}});
    }
    // Interleaved rounds, rotating the order, so drifts of a shared machine hit every variant.
    const int warmup = 1;
    for (int round = 0; round < warmup + args.runs; ++round) {
      for (size_t i = 0; i < prepared.size(); ++i) {
        Prepared& p = prepared[(i + static_cast<size_t>(round)) % prepared.size()];
        const double t0 = bench::now_seconds();
        if (Status s = p.exe->run(); !s) {
          std::fprintf(stderr, "%s: %s\n", p.variant->name.c_str(), s.to_string().c_str());
          return 1;
        }
        if (round >= warmup) p.us.push_back((bench::now_seconds() - t0) * 1e6);
      }
    }
    for (const Prepared& p : prepared) {
      bench::Stats st = bench::stats_of(p.us);
      results.push_back({"two_branch_x" + std::to_string(kLayers), p.variant->name, cores, "us_per_run", st.median,
                         st.min, st.max, args.runs, "us"});
    }
  }
  if (!results.empty()) bench::print_table(results, {"one_stream", "fused", "fused_limit1"}, "one_stream");
  std::vector<bench::Result> prefetch_results;
  for (int cores = 2; cores <= std::min(2, bench::machine_cores()); ++cores) {
    if (!bench::cores_selected(args, cores)) continue;
    RuntimeOptions ro;
    ro.num_cores = cores;
    auto rt = Runtime::create(ro);
    if (!rt || !bench_prefetch(**rt, args, cores, prefetch_results)) return 1;
  }
  if (!prefetch_results.empty()) {
    std::printf("\n");
    bench::print_table(prefetch_results, {"prefetch_off", "prefetch_on"}, "prefetch_off");
  }
  results.insert(results.end(), prefetch_results.begin(), prefetch_results.end());
  if (!args.json.empty()) {
    if (!bench::write_json(args.json, results)) {
      std::fprintf(stderr, "cannot write %s\n", args.json.c_str());
      return 1;
    }
    std::printf("wrote %s\n", args.json.c_str());
  }
  return 0;
}
