// sk_bench_dispatch: per-node scheduling cost of long chains of small ops, in every execution
// mode side by side, at 1 and 2 cores. The chains (bench_graphs.h):
//   chain_elementwise        1000 x (mul, add) on a 256-float tensor        = 2000 nodes
//   chain_matvec_norm_256    1000 x (f32 matvec 256x256, rms_norm)          = 2000 nodes
//   chain_matvec_norm_512    1000 x (f32 matvec 512x512, rms_norm)          = 2000 nodes
// In superkernel mode all ops sit in one fusion scope.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <thread>

#include "bench_common.h"
#include "bench_graphs.h"
#include "busy_load.h"

namespace {

using namespace sk;

// Core-to-core cache-line round trip between CPUs `a` and `b` (two pinned threads bouncing a
// counter): the floor under any cross-core sync, measured in the same run because on shared or
// virtual machines it moves. Negative when a thread cannot be pinned.
double handoff_round_trip_ns(int a, int b) {
  alignas(128) static std::atomic<uint64_t> ping{0};
  alignas(128) static std::atomic<uint64_t> pong{0};
  ping = 0;
  pong = 0;
  const uint64_t n = 200000;
  std::atomic<bool> pinned{true};
  std::thread other([&] {
    if (!bench::pin_current_thread(b)) pinned = false;
    for (uint64_t i = 1; i <= n; ++i) {
      while (ping.load(std::memory_order_acquire) < i) __builtin_ia32_pause();
      pong.store(i, std::memory_order_release);
    }
  });
  double t = 0;
  std::thread self([&] {
    if (!bench::pin_current_thread(a)) pinned = false;
    const double t0 = bench::now_seconds();
    for (uint64_t i = 1; i <= n; ++i) {
      ping.store(i, std::memory_order_release);
      while (pong.load(std::memory_order_acquire) < i) __builtin_ia32_pause();
    }
    t = bench::now_seconds() - t0;
  });
  self.join();
  other.join();
  return pinned ? t * 1e9 / n : -1.0;
}

// --contend: per bench and core count, one line per load with every column's median, its ratio to
// the same column's quiet median, and superkernel/graph under that load.
void print_contended(const std::vector<bench::Result>& results, const std::vector<std::string>& columns) {
  std::map<std::string, const bench::Result*> by_key;  // "bench/cores/mode"
  std::vector<std::pair<std::string, int>> rows;
  for (const bench::Result& r : results) {
    if (r.metric != "ns_per_node") continue;
    by_key[r.bench + "/" + std::to_string(r.cores) + "/" + r.mode] = &r;
    if (std::find(rows.begin(), rows.end(), std::make_pair(r.bench, r.cores)) == rows.end())
      rows.emplace_back(r.bench, r.cores);
  }
  std::printf("\nbeside one busy process (ns per node, median; x quiet = median under the load / quiet median):\n");
  std::printf("%-24s %5s %-9s", "bench", "cores", "load");
  for (const std::string& c : columns) std::printf(" %14s", c.c_str());
  for (const std::string& c : columns) std::printf(" %14s", (c + " xq").c_str());
  std::printf(" %17s\n", "superkernel/graph");
  for (const auto& [name, cores] : rows) {
    for (const char* load : {"quiet", "unpinned", "pinned", "after"}) {
      const std::string suffix = std::string(load) == "quiet" ? "" : std::string("@") + load;
      auto find = [&](const std::string& column) -> const bench::Result* {
        auto it = by_key.find(name + "/" + std::to_string(cores) + "/" + column + suffix);
        return it == by_key.end() ? nullptr : it->second;
      };
      std::printf("%-24s %5d %-9s", name.c_str(), cores, load);
      for (const std::string& c : columns) {
        const bench::Result* r = find(c);
        r ? std::printf(" %14.1f", r->median) : std::printf(" %14s", "-");
      }
      for (const std::string& c : columns) {
        const bench::Result* r = find(c);
        const double q = r && r->ratios.count("quiet") ? r->ratios.at("quiet") : (r && suffix.empty() ? 1.0 : -1.0);
        q >= 0 ? std::printf(" %14.2f", q) : std::printf(" %14s", "-");
      }
      const bench::Result* g = find("graph");
      const bench::Result* sk = find("superkernel");
      g&& sk && g->median > 0 ? std::printf(" %17.2f\n", sk->median / g->median) : std::printf(" %17s\n", "-");
    }
  }
}

const char* kUsage =
    "usage: sk_bench_dispatch [--json PATH] [--runs N] [--quick] [--only BENCH]... [--mode MODE]... [--cores N]\n"
    "                         [--dump]   (adds graph+dump and superkernel+dump: the data dump's cost)\n"
    "                         [--trace]  (adds <mode>+trace for every mode: tracing's cost; tracing off is\n"
    "                                     the plain rows)\n"
    "                         [--recompute]  (adds superkernel+recompute: superkernel mode with\n"
    "                                     super_kernel_optimize_options.recompute on)\n"
    "                         [--jit]    (adds graph+jit and superkernel+jit: the x86-64 JIT backend)\n"
    "                         [--preload] (adds superkernel+preload (per-func) and superkernel+preload-max,\n"
    "                                     and superkernel+jit+preload with --jit)\n"
    "                         [--replicas N] (adds superkernel+replicas: N copies of the kernel package,\n"
    "                                     and superkernel+jit+replicas with --jit)\n"
    "                         [--contend] (times every configuration again beside one busy process,\n"
    "                                     unpinned and then pinned to the run's last CPU, then quiet again:\n"
    "                                     <mode>@unpinned, <mode>@pinned, <mode>@after, with each one's\n"
    "                                     ratio to its quiet time)\n"
    "                         [--load-policy adaptive|static|one_thread] (RuntimeOptions::load_policy;\n"
    "                                     default adaptive)\n"
    "  benches: chain_elementwise chain_matvec_norm_256 chain_matvec_norm_512\n";

}  // namespace

int main(int argc, char** argv) {
  bench::Args args = bench::parse_args(argc, argv, kUsage, /*accepts_contend=*/true);
  const int max_cores = std::min(2, bench::machine_cores());
  // Read before any launch pins this thread: the CPUs the runtime's cores use, in order.
  const std::vector<int> cpus = bench::allowed_cpus();
  std::vector<bench::Result> results;
  const std::vector<ExecutionMode> modes = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};

  const std::vector<bench::WorkloadDef> benches = bench::dispatch_chains();

  for (int cores = 1; cores <= max_cores; ++cores) {
    if (!bench::cores_selected(args, cores)) continue;
    RuntimeOptions ro;
    ro.num_cores = cores;
    auto policy = parse_load_policy(args.load_policy);
    if (!policy) {
      std::fprintf(stderr, "--load-policy: %s\n", policy.status().message().c_str());
      return 2;
    }
    ro.load_policy = *policy;
    auto rt = Runtime::create(ro);
    if (!rt) {
      std::fprintf(stderr, "runtime: %s\n", rt.status().to_string().c_str());
      return 1;
    }
    for (const bench::WorkloadDef& b : benches) {
      if (!bench::selected(args, b.name)) continue;
      std::fprintf(stderr, "%s at %d core(s)...\n", b.name.c_str(), cores);
      struct Config {
        ExecutionMode mode;
        bool dump;
        std::string name;
        bool trace = false;
        bool jit = false;
        PreloadCode preload = PreloadCode::kNone;
        int replicas = 0;
        bool recompute = false;
      };
      std::vector<Config> configs;
      for (ExecutionMode m : modes) configs.push_back({m, false, execution_mode_name(m)});
      if (args.dump) {
        configs.push_back({ExecutionMode::kGraph, true, "graph+dump"});
        configs.push_back({ExecutionMode::kSuperKernel, true, "superkernel+dump"});
      }
      if (args.trace)
        for (ExecutionMode m : modes)
          configs.push_back({m, false, std::string(execution_mode_name(m)) + "+trace", true});
      if (args.recompute)
        configs.push_back(
            {ExecutionMode::kSuperKernel, false, "superkernel+recompute", false, false, PreloadCode::kNone, 0, true});
      const ExecutionMode sk_mode = ExecutionMode::kSuperKernel;
      if (args.jit) {
        configs.push_back({ExecutionMode::kGraph, false, "graph+jit", false, true});
        configs.push_back({sk_mode, false, "superkernel+jit", false, true});
      }
      if (args.preload) {
        configs.push_back({sk_mode, false, "superkernel+preload", false, false, PreloadCode::kPerFunc});
        configs.push_back({sk_mode, false, "superkernel+preload-max", false, false, PreloadCode::kMax});
        if (args.jit)
          configs.push_back({sk_mode, false, "superkernel+jit+preload", false, true, PreloadCode::kPerFunc});
      }
      if (args.replicas > 1) {
        configs.push_back({sk_mode, false, "superkernel+replicas", false, false, PreloadCode::kNone, args.replicas});
        if (args.jit)
          configs.push_back(
              {sk_mode, false, "superkernel+jit+replicas", false, true, PreloadCode::kNone, args.replicas});
      }
      // Compile every configuration first, then time them in interleaved rounds (each round runs
      // every configuration once, in rotating order) so slow drifts of a shared machine hit all
      // configurations alike.
      struct Prepared {
        const Config* config;
        bench::Workload chain;
        std::unique_ptr<Executable> exe;
      };
      std::vector<Prepared> prepared;
      for (const Config& config : configs) {
        if (!bench::mode_selected(args, config.name)) continue;
        bench::Workload chain = b.make(config.mode == ExecutionMode::kSuperKernel);
        CompileOptions opts = CompileOptions::for_mode(config.mode);
        opts.dump = config.dump;
        opts.super_kernel_debug_options.debug_op_exec_trace = config.trace;
        opts.super_kernel_optimize_options.recompute = config.recompute;
        opts.super_kernel_optimize_options.jit = config.jit;
        opts.super_kernel_optimize_options.preload_code = config.preload;
        opts.super_kernel_optimize_options.kernel_replicas = config.replicas;
        auto exe = (*rt)->compile(*chain.graph, opts);
        if (!exe) {
          std::fprintf(stderr, "%s/%s: skipped: %s\n", b.name.c_str(), config.name.c_str(),
                       exe.status().to_string().c_str());
          continue;
        }
        if (Status s = bench::set_inputs(**exe, chain); !s) {
          std::fprintf(stderr, "%s\n", s.to_string().c_str());
          return 1;
        }
        prepared.push_back({&config, std::move(chain), std::move(*exe)});
      }
      std::vector<std::function<Status()>> calls;
      for (Prepared& p : prepared)
        calls.push_back([&p, &b] {
          Status s = p.exe->run();
          return s ? s : s.with_context(b.name + "/" + p.config->name);
        });
      // Quiet first, then (--contend) the same rounds beside one busy process, unpinned and then
      // pinned to the last CPU this runtime uses (a worker's, not the launching thread's), then
      // quiet again once it stopped.
      std::vector<bench::LoadPlacement> loads = {bench::LoadPlacement::kNone};
      if (args.contend)
        loads.insert(loads.end(),
                     {bench::LoadPlacement::kUnpinned, bench::LoadPlacement::kPinned, bench::LoadPlacement::kAfter});
      std::vector<double> quiet_median(prepared.size(), 0.0);
      for (bench::LoadPlacement load : loads) {
        const bool loaded = load == bench::LoadPlacement::kUnpinned || load == bench::LoadPlacement::kPinned;
        bench::BusyLoad busy(load, cpus[static_cast<size_t>(cores - 1)], cpus);
        if (loaded && !busy.running()) {
          std::fprintf(stderr, "cannot start the %s load: %s\n", bench::load_placement_name(load),
                       busy.error().c_str());
          return 1;
        }
        // A load that just started or stopped gets 50 ms of untimed rounds: the scheduler's load
        // averages and the runtime's load policy take a few milliseconds to see it.
        if (load != bench::LoadPlacement::kNone)
          if (Status s = bench::settle(calls, bench::kSettleSeconds); !s) {
            std::fprintf(stderr, "%s\n", s.to_string().c_str());
            return 1;
          }
        const int64_t one_thread_before = (*rt)->one_thread_launches();
        // With --contend every load's rounds last at least 0.25 s, so that the medians span many
        // of the scheduler's slices (milliseconds).
        auto seconds = bench::time_interleaved(calls, 1, args.runs, args.contend ? bench::kContendSeconds : 0.0);
        if (cores > 1)
          std::fprintf(
              stderr, "  %s: %lld launches ran on one thread (load policy %s)\n", bench::load_placement_name(load),
              static_cast<long long>((*rt)->one_thread_launches() - one_thread_before), args.load_policy.c_str());
        if (loaded && !busy.stop()) {
          std::fprintf(stderr, "the %s load stopped during the rounds\n", bench::load_placement_name(load));
          return 1;
        }
        if (!seconds) {
          std::fprintf(stderr, "%s\n", seconds.status().to_string().c_str());
          return 1;
        }
        for (size_t i = 0; i < prepared.size(); ++i) {
          std::vector<double> ns_per_node;
          for (double t : (*seconds)[i]) ns_per_node.push_back(t * 1e9 / prepared[i].chain.per_run);
          bench::Stats st = bench::stats_of(ns_per_node);
          std::string mode = prepared[i].config->name;
          if (load == bench::LoadPlacement::kNone) {
            quiet_median[i] = st.median;
          } else {
            mode += std::string("@") + bench::load_placement_name(load);
          }
          bench::Result r(b.name, mode, cores, "ns_per_node", st.median, st.min, st.max,
                          static_cast<int>(ns_per_node.size()), "ns");
          if (load != bench::LoadPlacement::kNone) {
            r.settings = std::string("load=") + bench::load_placement_name(load);
            if (quiet_median[i] > 0) r.ratios["quiet"] = st.median / quiet_median[i];
          }
          results.push_back(r);
        }
        // Every configuration against graph mode under the same load.
        const size_t first = results.size() - prepared.size();
        for (size_t i = 0; i < prepared.size(); ++i) {
          if (prepared[i].config->name != "graph" || !loaded) continue;
          for (size_t j = 0; j < prepared.size(); ++j)
            if (results[first + i].median > 0)
              results[first + j].ratios["graph"] = results[first + j].median / results[first + i].median;
        }
      }
    }
  }
  std::vector<std::string> columns = {"eager", "graph", "superkernel"};
  if (args.dump) columns.insert(columns.end(), {"graph+dump", "superkernel+dump"});
  if (args.trace) columns.insert(columns.end(), {"eager+trace", "graph+trace", "superkernel+trace"});
  if (args.recompute) columns.push_back("superkernel+recompute");
  if (args.jit) columns.insert(columns.end(), {"graph+jit", "superkernel+jit"});
  if (args.preload) columns.insert(columns.end(), {"superkernel+preload", "superkernel+preload-max"});
  if (args.preload && args.jit) columns.push_back("superkernel+jit+preload");
  if (args.replicas > 1) columns.push_back("superkernel+replicas");
  if (args.replicas > 1 && args.jit) columns.push_back("superkernel+jit+replicas");
  bench::print_table(results, columns, "graph");
  if (args.contend) print_contended(results, columns);
  if (max_cores >= 2 && bench::cores_selected(args, 2)) {
    // The first two CPUs the process may use: where the runtime's cores 0 and 1 run.
    const double rt = handoff_round_trip_ns(cpus[0], cpus[1]);
    if (rt < 0) {
      std::printf("core-to-core round trip: not measured (cannot pin to CPUs %d and %d)\n", cpus[0], cpus[1]);
    } else {
      results.push_back({"core_handoff", "-", 2, "ns_round_trip", rt, rt, rt, 1, "ns"});
      std::printf("core-to-core cache-line round trip (CPUs %d and %d): %.0f ns\n", cpus[0], cpus[1], rt);
    }
  }
  if (!args.json.empty()) {
    if (sk::Status s = bench::write_json(args.json, results); !s) {
      std::fprintf(stderr, "--json: %s\n", s.message().c_str());
      return 1;
    }
    std::printf("wrote %s\n", args.json.c_str());
  }
  return 0;
}
