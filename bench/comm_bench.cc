// Collectives inside super kernels, side by side in one run under MPI (docs/PERFORMANCE.md,
// "Collectives"):
//
//   mpirun --bind-to none -np 2 build/bench/sk_bench_comm [--runs N] [--quick]
//
//  1. each collective fused in a segment (compute, collective, compute: one launch) against the
//     same graph with the collective cut out of it (three launches) and against graph mode, on
//     2 ranks x 1 core; beside them the collective alone and MPI's own MPI_Allreduce (which does
//     not fix its reduction order) for the same bytes, the inputs of the scaling model;
//  2. the parallel LongCat-Flash decode step (longcat-mini's sizes, tp 2, ep 2, the MoE on its
//     own stream) per mode on 2 ranks x 1 core, against the one-rank model on 1 rank x 2 cores
//     (rank 1 sleeping meanwhile), the two interleaved step by step.
//
// Every figure is rank 0's median; ranks are pinned to CPUs 0 and 1 (2 ranks x 1 core) or rank 0
// to both (1 rank x 2 cores), so run with --bind-to none.
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "longcat_mini_config.h"
#include "superkernel/comm.h"
#include "superkernel/models.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"
#include "superkernel/weights.h"

namespace sk {
namespace {

int g_runs = 30;
std::vector<bench::Result> g_results;  // rank 0's medians, for --json
std::shared_ptr<comm::Communicator> g_comm;

[[noreturn]] void die(const Status& s) {
  std::fprintf(stderr, "rank %d: %s\n", g_comm ? g_comm->rank() : -1, s.to_string().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

template <typename T>
T must(Expected<T> e) {
  if (!e) die(e.status());
  return std::move(*e);
}
void must(const Status& s) {
  if (!s) die(s);
}

bool pin_process_to(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

std::shared_ptr<Runtime> make_runtime(int cores) {
  RuntimeOptions o;
  o.num_cores = cores;
  auto rt = must(Runtime::create(o));
  must(g_comm->load_kernels(*rt));
  return rt;
}

// ---- 1. collectives fused vs cut ---------------------------------------------------------------

enum class Kind { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kAllToAllV };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kAllReduce:
      return "all_reduce";
    case Kind::kReduceScatter:
      return "reduce_scatter";
    case Kind::kAllGather:
      return "all_gather";
    case Kind::kAllToAll:
      return "all_to_all";
    case Kind::kAllToAllV:
      return "all_to_all_v";
  }
  return "?";
}

// The collective of `kind` on h [rows, cols] (every row sent for all_to_all_v: counts split rows
// evenly between the ranks).
Tensor collective(Graph& g, Kind kind, Tensor h, int64_t rows) {
  const comm::Group grp = g_comm->group();
  switch (kind) {
    case Kind::kAllReduce:
      return comm::all_reduce(g, grp, h, "collective");
    case Kind::kReduceScatter:
      return comm::reduce_scatter(g, grp, h, "collective");
    case Kind::kAllGather:
      return comm::all_gather(g, grp, h, "collective");
    case Kind::kAllToAll:
      return comm::all_to_all(g, grp, h, "collective");
    case Kind::kAllToAllV: {
      std::vector<int32_t> counts(static_cast<size_t>(grp.size), static_cast<int32_t>(rows / grp.size));
      Tensor c = g.constant("counts", DType::kI32, {grp.size}, counts.data(), counts.size() * 4);
      return comm::all_to_all_v(g, grp, h, c, rows, 1, SK_COMM_RANK_MAJOR, SK_COMM_RANK_MAJOR, "collective").y;
    }
  }
  return Tensor{};
}

// compute -> collective -> compute; `cut`: the collective outside the scope (its own launch).
// `alone`: the collective only.
Graph collective_graph(Kind kind, int64_t rows, int64_t cols, bool cut, bool alone) {
  Graph g(kind_name(kind));
  Tensor x = g.input("x", DType::kF32, {rows, cols});
  std::vector<float> half(static_cast<size_t>(cols), 0.5f);
  Tensor c = g.constant_f32("c", {cols}, half);
  if (alone) {
    g.output(collective(g, kind, x, rows), "y");
    return g;
  }
  Tensor h;
  {
    SuperKernelScope s(g, "block");
    h = mul(g, x, c, "before");
  }
  Tensor y;
  if (cut) {
    SuperKernelScope s(g, "");  // "do not fuse"
    y = collective(g, kind, h, rows);
  } else {
    SuperKernelScope s(g, "block");
    y = collective(g, kind, h, rows);
  }
  {
    SuperKernelScope s(g, "block");
    g.output(add(g, y, y, "after"), "y");
  }
  return g;
}

struct Timed {
  std::string name;
  std::unique_ptr<Executable> exe;
  std::function<void()> raw;  // instead of exe
  std::vector<double> seconds;
};

// Interleaves the contenders run by run (every rank in the same order), after a warm-up.
void time_interleaved(std::vector<Timed>& ts, int runs) {
  for (int r = -3; r < runs; ++r) {
    for (Timed& t : ts) {
      const double t0 = bench::now_seconds();
      if (t.exe) {
        must(t.exe->run());
      } else {
        t.raw();
      }
      if (r >= 0) t.seconds.push_back(bench::now_seconds() - t0);
    }
  }
}

void bench_collectives(const std::shared_ptr<Runtime>& rt, bool quick) {
  const int32_t n = g_comm->size();
  struct Case {
    Kind kind;
    int64_t rows, cols;
  };
  std::vector<Case> cases = {
      {Kind::kAllReduce, 1, 1024},     {Kind::kAllReduce, 1, 6144}, {Kind::kAllReduce, 16, 4096},
      {Kind::kReduceScatter, 2, 1024}, {Kind::kAllGather, 1, 1024}, {Kind::kAllToAll, 2, 1024},
      {Kind::kAllToAllV, 24, 1024},
  };
  if (quick) cases.resize(2);
  if (g_comm->rank() == 0) {
    std::printf("## Collectives: fused in the segment vs cut out of it (%d ranks x 1 core, median us of %d runs)\n\n",
                n, g_runs);
    std::printf("| collective | bytes per rank | fused | cut | graph | cut / fused | alone | MPI_Allreduce |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (const Case& c : cases) {
    const int64_t rows = c.kind == Kind::kReduceScatter || c.kind == Kind::kAllToAll ? c.rows * n : c.rows;
    std::vector<float> x(static_cast<size_t>(rows * c.cols));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>((i * 7 + static_cast<size_t>(g_comm->rank())) % 13) / 13.0f;
    std::vector<Timed> ts;
    auto add_exe = [&](const char* name, bool cut, bool alone, ExecutionMode mode) {
      Graph g = collective_graph(c.kind, rows, c.cols, cut, alone);
      auto exe = must(rt->compile(g, CompileOptions::for_mode(mode)));
      must(exe->set_input("x", x));
      ts.push_back({name, std::move(exe), {}, {}});
    };
    add_exe("fused", false, false, ExecutionMode::kSuperKernel);
    add_exe("cut", true, false, ExecutionMode::kSuperKernel);
    add_exe("graph", false, false, ExecutionMode::kGraph);
    add_exe("alone", false, true, ExecutionMode::kGraph);
    std::vector<float> mpi_out(x.size());
    if (c.kind == Kind::kAllReduce)
      ts.push_back({"mpi",
                    nullptr,
                    [&] {
                      MPI_Allreduce(x.data(), mpi_out.data(), static_cast<int>(x.size()), MPI_FLOAT, MPI_SUM,
                                    MPI_COMM_WORLD);
                    },
                    {}});
    time_interleaved(ts, g_runs);
    if (g_comm->rank() != 0) continue;
    auto us = [&](size_t i) { return bench::stats_of(ts[i].seconds).median * 1e6; };
    const std::string name = std::string(kind_name(c.kind)) + "/" + std::to_string(rows * c.cols * 4) + "B";
    for (const Timed& t : ts) {
      const bench::Stats st = bench::stats_of(t.seconds);
      g_results.emplace_back(name, t.name, 1, "latency", st.median * 1e6, st.min * 1e6, st.max * 1e6, g_runs, "us");
    }
    std::printf("| %s | %lld | %.1f | %.1f | %.1f | %.2f | %.1f | %s |\n", kind_name(c.kind),
                static_cast<long long>(rows * c.cols * 4), us(0), us(1), us(2), us(1) / us(0), us(3),
                ts.size() > 4 ? std::to_string(us(4)).substr(0, std::to_string(us(4)).find('.') + 2).c_str() : "-");
  }
  if (g_comm->rank() == 0) std::printf("\n");
}

// ---- 2. the parallel model step ----------------------------------------------------------------

// A decode step ready to rerun: the graph compiled for `mode`, its caches, a prefill's worth of
// context (8 tokens) and the inputs of the next step.
struct Step {
  std::unique_ptr<Executable> exe;
  models::CacheStorage caches;
};

std::unique_ptr<Step> make_step(Runtime& rt, const models::BuildOptions& opts, ExecutionMode mode) {
  const models::LongCatFlashConfig cfg = sk::bench::longcat_mini_config(4);
  auto weights = random_weights(1);
  Graph g = must(models::build_longcat_flash(cfg, opts, models::Phase::kDecode, *weights));
  auto step = std::make_unique<Step>();
  step->exe = must(rt.compile(g, CompileOptions::for_mode(mode)));
  must(step->caches.bind(*step->exe, models::cache_names(cfg)));
  models::PagedCacheLayout layout(opts);
  for (int t = 0; t < 8; ++t) {
    auto in = must(layout.decode({static_cast<int32_t>(t * 37 % cfg.vocab_size)}));
    must(models::set_step_inputs(*step->exe, in));
    must(step->exe->run());
  }
  return step;
}

models::BuildOptions step_options(int32_t tp, int32_t ep) {
  models::BuildOptions o;
  o.batch = 1;
  o.block_size = 16;
  o.max_context = 32;
  o.prefill_tokens = 8;
  o.multi_streams = 1;  // the MoE branch on its own stream, fused beside the main one
  o.scope_options = [](std::string_view scope) {
    return std::string(scope).find("part2_moe") != std::string::npos ? "feed-sync-all=1" : "";
  };
  o.parallel = {tp, ep, g_comm->group()};
  return o;
}

void bench_model(const std::shared_ptr<Runtime>& one_core, const std::shared_ptr<Runtime>& two_cores) {
  const std::vector<ExecutionMode> modes = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};
  const int32_t n = g_comm->size();
  std::vector<std::unique_ptr<Step>> parallel, single;
  for (ExecutionMode m : modes) parallel.push_back(make_step(*one_core, step_options(n, n), m));
  if (g_comm->rank() == 0) {
    models::BuildOptions o = step_options(1, 1);
    o.parallel = {};
    o.moe_core_limit = 1;  // the MoE stream on one core, the main stream on the other
    for (ExecutionMode m : modes) single.push_back(make_step(*two_cores, o, m));
  }
  std::vector<std::vector<double>> par_s(modes.size()), single_s(modes.size());
  for (int r = -3; r < g_runs; ++r) {
    for (size_t i = 0; i < modes.size(); ++i) {
      const double t0 = bench::now_seconds();
      must(parallel[i]->exe->run());
      if (r >= 0) par_s[i].push_back(bench::now_seconds() - t0);
    }
    // 1 rank x 2 cores: rank 0 alone, rank 1 asleep (polling a message every 200 us, so that it
    // leaves its CPU to rank 0's second core).
    if (g_comm->rank() == 0) {
      for (size_t i = 0; i < modes.size(); ++i) {
        const double t0 = bench::now_seconds();
        must(single[i]->exe->run());
        if (r >= 0) single_s[i].push_back(bench::now_seconds() - t0);
      }
      for (int q = 1; q < n; ++q) MPI_Send(nullptr, 0, MPI_BYTE, q, 99, MPI_COMM_WORLD);
    } else {
      MPI_Request req;
      MPI_Irecv(nullptr, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD, &req);
      int done = 0;
      while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  }
  if (g_comm->rank() != 0) return;
  std::printf("## Parallel LongCat-Flash decode step (longcat-mini sizes, batch 1, MoE on its own stream)\n\n");
  std::printf("| mode | %d ranks x 1 core (tp %d, ep %d), ms | 1 rank x 2 cores, ms | 2x1 / 1x2 |\n", n, n, n);
  std::printf("|---|---:|---:|---:|\n");
  for (size_t i = 0; i < modes.size(); ++i) {
    const double p = bench::stats_of(par_s[i]).median * 1e3, s = bench::stats_of(single_s[i]).median * 1e3;
    std::printf("| %s | %.3f | %.3f | %.2f |\n", execution_mode_name(modes[i]), p, s, p / s);
    const bench::Stats ps = bench::stats_of(par_s[i]), ss = bench::stats_of(single_s[i]);
    g_results.emplace_back("longcat-parallel-step/" + std::to_string(n) + "x1", execution_mode_name(modes[i]), 1,
                           "step_latency", ps.median * 1e3, ps.min * 1e3, ps.max * 1e3, g_runs, "ms");
    g_results.emplace_back("longcat-parallel-step/1x2", execution_mode_name(modes[i]), 2, "step_latency",
                           ss.median * 1e3, ss.min * 1e3, ss.max * 1e3, g_runs, "ms");
  }
  std::printf("\nmedians of %d interleaved steps; rank 0's times\n", g_runs);
}

}  // namespace
}  // namespace sk

int main(int argc, char** argv) {
  bool quick = false;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      sk::g_runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: mpirun --bind-to none -np 2 sk_bench_comm [--runs N] [--quick] [--json PATH]\n");
      return 2;
    }
  }
  auto world = sk::comm::Communicator::world();
  if (!world) {
    std::fprintf(stderr, "%s\n", world.status().to_string().c_str());
    return 1;
  }
  sk::g_comm = *world;
  if (!json.empty() && sk::g_comm->rank() == 0) {
    // Before the work: an unwritable path fails now, not after minutes of timing.
    if (auto f = sk::OutputFile::open(json); !f) {
      std::fprintf(stderr, "--json: %s\n", f.status().message().c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  const int rank = sk::g_comm->rank();
  const int cpus = sk::bench::machine_cores();
  if (cpus < 2) {
    std::fprintf(stderr, "rank %d sees %d CPU(s): run under mpirun --bind-to none on a machine with 2 or more\n", rank,
                 cpus);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  // Rank 0 makes its two-core runtime while it may use CPUs 0 and 1 (devices read the CPU list
  // once per process), then every rank keeps one CPU of its own: rank r on CPU r.
  std::shared_ptr<sk::Runtime> two_cores;
  if (rank == 0) two_cores = sk::make_runtime(2);
  sk::pin_process_to({rank % cpus});
  std::shared_ptr<sk::Runtime> one_core = sk::make_runtime(1);
  if (rank == 0)
    std::printf("machine: %d CPUs, isa %s; %d ranks; indicative only on a shared machine\n\n", cpus,
                sk::Runtime::cpu_isa().c_str(), sk::g_comm->size());
  sk::bench_collectives(one_core, quick);
  // The one-core runtimes served part 1; part 2 compares them with rank 0's two-core runtime.
  sk::bench_model(one_core, two_cores ? two_cores : one_core);
  if (!json.empty() && rank == 0) {
    if (sk::Status s = sk::bench::write_json(json, sk::g_results); !s) {
      std::fprintf(stderr, "--json: %s\n", s.message().c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  one_core.reset();
  two_cores.reset();
  sk::g_comm.reset();
  (void)sk::comm::finalize();
  return 0;
}
