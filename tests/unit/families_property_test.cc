// Property: random graphs over every built-in kernel family (tests/common/random_ops.h), with
// random streams, events, core limits, scopes with random scope options and host ops, compiled
// with random compile options (stream fusion, jit, recompute, early start, sync choice, code
// preload, kernel replicas, tiling sink, prefetch, the access checker, split mode, debug sync,
// function alignment, per-op core caps, exec traces), give bit-identical outputs in every
// execution mode on 1, 2 and 3 cores (and 3 split into cube and vector cores), at every ISA level
// the CPU has, after each of two runs, and never deadlock (the
// watchdog turns a hang into an error).
//
// 96 graphs, scaled by SK_PROPERTY_SCALE (tests/common/random_graph.h; the sanitizer test presets
// run a third).
// The test prints how many graphs of each family ran, how many runs each option value had, and
// fails when a built-in kernel never ran, so that a new kernel gets a family here.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/builtin_package.h"
#include "common/random_graph.h"
#include "common/test_runtime.h"

namespace sk {
namespace {

// One compile configuration, drawn at random, and its "key=value" labels (counted per value).
struct Draw {
  CompileOptions options;
  std::vector<std::string> labels;
};

Draw draw_options(std::mt19937& rng, ExecutionMode mode, bool multi_stream) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Draw d;
  d.options = CompileOptions::for_mode(mode);
  SuperKernelOptimizeOptions& o = d.options.super_kernel_optimize_options;
  SuperKernelDebugOptions& dbg = d.options.super_kernel_debug_options;
  auto label = [&](const std::string& key, const std::string& value) { d.labels.push_back(key + "=" + value); };
  label("mode", execution_mode_name(mode));
  // Options of every mode.
  d.options.prefetch = pick(0, 3) != 0;
  label("prefetch", d.options.prefetch ? "1" : "0");
  dbg.debug_cross_core_sync_check = pick(0, 5) == 0;
  label("access_check", dbg.debug_cross_core_sync_check ? "1" : "0");
  o.kernel_replicas = pick(0, 4) == 0 ? pick(2, 3) : 0;
  label("kernel_replicas", std::to_string(o.kernel_replicas));
  if (mode == ExecutionMode::kEager) return d;
  o.jit = pick(0, 1) == 0;
  label("jit", o.jit ? "1" : "0");
  dbg.debug_per_op_max_core_num = pick(0, 7) == 0 ? pick(1, 2) : 0;
  label("per_op_max_cores", std::to_string(dbg.debug_per_op_max_core_num));
  dbg.debug_op_exec_trace = pick(0, 9) == 0;
  label("exec_trace", dbg.debug_op_exec_trace ? "1" : "0");
  if (mode == ExecutionMode::kGraph) return d;
  o.stream_fusion = multi_stream || pick(0, 1) == 0;
  label("stream_fusion", o.stream_fusion ? "1" : "0");
  o.recompute = pick(0, 1) == 0;
  label("recompute", o.recompute ? "1" : "0");
  o.early_start = pick(0, 2);
  label("early_start", std::to_string(o.early_start));
  o.sync_choice = pick(0, 1) == 0 ? SyncChoice::kPointToPoint : SyncChoice::kCost;
  label("sync_choice", sync_choice_name(o.sync_choice));
  o.preload_code = static_cast<PreloadCode>(pick(0, 2));
  label("preload_code", preload_code_name(o.preload_code));
  o.tiling_sink = pick(0, 1) == 0;
  label("tiling_sink", o.tiling_sink ? "1" : "0");
  o.split_mode = pick(0, 5) == 0 ? pick(1, 3) : 0;
  label("split_mode", std::to_string(o.split_mode));
  dbg.debug_sync_all = pick(0, 7) == 0;
  label("debug_sync_all", dbg.debug_sync_all ? "1" : "0");
  const int aligns[] = {0, 64, 4096};
  o.func_align = aligns[pick(0, 2)];
  label("func_align", std::to_string(o.func_align));
  return d;
}

std::string joined(const std::vector<std::string>& labels) {
  std::string s;
  for (const std::string& l : labels) s += " " + l;
  return s;
}

TEST(FamiliesProperty, EveryFamilyOptionAndIsaLevelIsBitIdenticalAcrossModesAndCoreCounts) {
  struct Machine {
    std::shared_ptr<Runtime> rt;
    std::string name;
  };
  // 1 to 3 cores, 3 split into a cube core and two vector cores (matmuls on the one, the vector
  // kernels on the others), and 2 and 3 cores interleaved on one thread (the load policy's form
  // for a loaded CPU).
  const std::vector<Machine> runtimes = {
      {testing::make_runtime(1, 20.0), "1 core"},
      {testing::make_runtime(2, 20.0), "2 cores"},
      {testing::make_runtime(3, 20.0), "3 cores"},
      {testing::make_runtime(3, 20.0, 1), "3 cores (1 cube, 2 vector)"},
      {testing::make_runtime(2, 20.0, 0, LoadPolicy::kOneThread), "2 cores on one thread"},
      {testing::make_runtime(3, 20.0, 1, LoadPolicy::kOneThread), "3 cores (1 cube, 2 vector) on one thread"}};
  const std::vector<int> levels = testing::isa_levels();
  ASSERT_FALSE(levels.empty()) << "the built-in package's ISA level cannot be forced";
  const int graphs = static_cast<int>(testing::property_seeds(96));

  std::vector<int> family_graphs(testing::kNumFamilies, 0), family_instances(testing::kNumFamilies, 0);
  std::map<std::string, int> kernel_graphs, option_runs, level_graphs;
  int runs = 0, refusals = 0, level_differs = 0, all_zero_graphs = 0;
  for (uint32_t seed = 1; seed <= static_cast<uint32_t>(graphs); ++seed) {
    std::mt19937 rng(seed * 7919u);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    testing::RandomGraphOptions go;
    go.min_ops = 3;
    go.max_ops = 14;
    go.streams = pick(0, 2) == 0 ? pick(2, 3) : 1;
    go.core_limits = go.streams > 1 && pick(0, 1) == 0;
    go.scopes = pick(0, 1) == 0;
    go.scope_options = go.scopes && pick(0, 3) != 0;
    go.host_ops = pick(0, 2) == 0;
    testing::RandomGraph rg = testing::make_random_graph(seed, go);
    ASSERT_TRUE(rg.graph->verify().is_ok()) << "seed " << seed << ": " << rg.graph->verify().to_string();
    int level = levels[seed % levels.size()];
    const std::string where = "seed " + std::to_string(seed) + " (isa " + testing::isa_name(level) + ", " +
                              std::to_string(go.streams) + " streams" + (go.scopes ? ", scopes" : "") + ")";

    // Compiles and runs at `level`, forced again after compiling for the replicas it loaded.
    auto run = [&](const Machine& m, const CompileOptions& o) -> std::optional<testing::RunResult> {
      testing::force_isa(level);
      auto exe = m.rt->compile(*rg.graph, o);
      if (!exe) {
        // The refusals allowed, each naming itself: core limits the machine cannot hold, and
        // stream fusion on a cube/vector split (not supported yet).
        const std::string msg = exe.status().message();
        const bool limits = go.core_limits && (msg.find("core limits of") != std::string::npos ||
                                               msg.find("LimitCoreNum") != std::string::npos);
        const bool split = msg.find("cube/vector core split is not supported yet") != std::string::npos;
        EXPECT_TRUE(limits || split) << where << " on " << m.name << ": " << exe.status().to_string();
        ++refusals;
        return std::nullopt;
      }
      testing::force_isa(level);
      for (const testing::InputBytes& in : rg.inputs) {
        const Status s = (*exe)->set_input(in.name, in.bytes.data(), in.bytes.size());
        EXPECT_TRUE(s.is_ok()) << where << ": " << s.to_string();
      }
      // Two steps, as a decode loop runs them: the second starts from the variables (caches,
      // state) the first left, and relaunches every launch of the executable.
      testing::RunResult result;
      for (int step = 0; step < 2; ++step) {
        const Status s = (*exe)->run();
        EXPECT_TRUE(s.is_ok()) << where << " on " << m.name << ", step " << step << ": " << s.to_string();
        if (!s) return std::nullopt;
        testing::RunResult outputs = testing::collect_outputs(**exe);
        for (size_t i = 0; i < outputs.names.size(); ++i) {
          result.names.push_back(outputs.names[i] + " after step " + std::to_string(step));
          result.bytes.push_back(std::move(outputs.bytes[i]));
        }
      }
      ++runs;
      return result;
    };

    const std::optional<testing::RunResult> reference =
        run(runtimes[0], CompileOptions::for_mode(ExecutionMode::kEager));
    ASSERT_TRUE(reference.has_value()) << where;
    bool any_nonzero = false;
    for (const auto& bytes : reference->bytes)
      for (uint8_t b : bytes) any_nonzero |= b != 0;
    all_zero_graphs += !any_nonzero;
    if (level != levels.back()) {
      // Guard against a level that never reaches the kernels: some graphs' bits differ between
      // levels (vector exp, FMA and reduction widths).
      const int forced = level;
      level = levels.back();
      const std::optional<testing::RunResult> top = run(runtimes[0], CompileOptions::for_mode(ExecutionMode::kEager));
      level = forced;
      std::string why;
      level_differs += top.has_value() && !testing::bitwise_equal(*reference, *top, &why);
    }
    std::vector<Draw> draws;
    for (size_t r = 0; r < runtimes.size(); ++r) {
      // Per machine: one eager or graph configuration and two superkernel ones.
      draws.push_back(
          draw_options(rng, pick(0, 2) == 0 ? ExecutionMode::kEager : ExecutionMode::kGraph, go.streams > 1));
      draws.push_back(draw_options(rng, ExecutionMode::kSuperKernel, go.streams > 1));
      draws.push_back(draw_options(rng, ExecutionMode::kSuperKernel, go.streams > 1));
      for (size_t k = draws.size() - 3; k < draws.size(); ++k) {
        const std::optional<testing::RunResult> got = run(runtimes[r], draws[k].options);
        if (::testing::Test::HasFailure()) {
          ADD_FAILURE() << where << " on " << runtimes[r].name << ":" << joined(draws[k].labels);
          testing::force_isa(-1);
          return;
        }
        if (!got) continue;
        for (const std::string& l : draws[k].labels) ++option_runs[l];
        std::string why;
        ASSERT_TRUE(testing::bitwise_equal(*reference, *got, &why))
            << where << " on " << runtimes[r].name << ":" << joined(draws[k].labels) << ": " << why;
      }
    }
    ++level_graphs[testing::isa_name(level)];
    std::set<std::string> kernels;
    for (size_t i = 0; i < rg.graph->num_ops(); ++i)
      if (!rg.graph->op(i).kernel.empty()) kernels.insert(rg.graph->op(i).kernel);
    for (const std::string& k : kernels) ++kernel_graphs[k];
    for (int f = 0; f < testing::kNumFamilies; ++f) {
      family_graphs[static_cast<size_t>(f)] += rg.families[static_cast<size_t>(f)] > 0;
      family_instances[static_cast<size_t>(f)] += rg.families[static_cast<size_t>(f)];
    }
  }
  testing::force_isa(-1);

  std::printf(
      "families_property: %d graphs (%d with all outputs zero), %d executables run twice and compared bit for "
      "bit, %d compiles refused (core limits, stream fusion on a cube/vector split)\n",
      graphs, all_zero_graphs, runs, refusals);
  for (const auto& [level, n] : level_graphs) std::printf("families_property: isa %s: %d graphs\n", level.c_str(), n);
  for (int f = 0; f < testing::kNumFamilies; ++f)
    std::printf("families_property: family %s: %d graphs (%d instances)\n",
                testing::family_name(static_cast<testing::Family>(f)), family_graphs[static_cast<size_t>(f)],
                family_instances[static_cast<size_t>(f)]);
  for (const auto& [kernel, n] : kernel_graphs)
    std::printf("families_property: kernel %s: %d graphs\n", kernel.c_str(), n);
  for (const auto& [option, n] : option_runs) std::printf("families_property: option %s: %d runs\n", option.c_str(), n);

  // Guards against a vacuous property: graphs compute something (a few legitimately give zeros:
  // attention over a cache that starts empty, projected), every built-in kernel ran, every ISA
  // level ran, and every value of every option was compared (with enough graphs to draw them all).
  EXPECT_LT(all_zero_graphs, graphs / 10 + 1);
  EXPECT_GT(runtimes[4].rt->one_thread_launches(), 0);
  EXPECT_GT(runtimes[5].rt->one_thread_launches(), 0);
  // The 2-core one also shared GEMV calls with its other thread (test runtimes: 4 KiB chunks).
  std::printf("families_property: %lld calls shared with the chunk helper\n",
              static_cast<long long>(runtimes[4].rt->shared_calls()));
  EXPECT_GT(runtimes[4].rt->shared_calls(), 0);
  for (const std::string& k : testing::builtin_kernel_names())
    if (testing::why_no_family(k) == nullptr) {
      EXPECT_GT(kernel_graphs[k], 0) << "built-in kernel '" << k
                                     << "' was in no random graph: give it a family in tests/common/random_ops.h";
    }
  EXPECT_EQ(level_graphs.size(), levels.size());
  std::printf("families_property: %d graphs gave other bits at the CPU's highest ISA level than at the one forced\n",
              level_differs);
  if (levels.size() > 1) {
    EXPECT_GT(level_differs, 0) << "forcing the ISA level changed no result";
  }
  if (graphs >= 24) {
    for (const char* option : {"mode=eager",        "mode=graph",
                               "mode=superkernel",  "prefetch=0",
                               "access_check=1",    "kernel_replicas=2",
                               "kernel_replicas=3", "jit=1",
                               "stream_fusion=1",   "recompute=1",
                               "early_start=1",     "early_start=2",
                               "sync_choice=cost",  "preload_code=per-func",
                               "preload_code=max",  "tiling_sink=0",
                               "split_mode=1",      "debug_sync_all=1",
                               "func_align=4096",   "per_op_max_cores=1",
                               "exec_trace=1"})
      EXPECT_GT(option_runs[option], 0) << option;
  }
}

// Guard: every kernel of the built-in package is generated by some family (the property test
// above and the graph fuzz target then run it), except the documented exclusions. Builds graphs
// of one family each (no compiling), so it holds at any SK_PROPERTY_SCALE.
TEST(FamiliesProperty, EveryBuiltinKernelIsGeneratedByAFamily) {
  const std::shared_ptr<Runtime> rt = testing::make_runtime(1, 20.0);  // loads the package
  const std::vector<std::string> builtin = testing::builtin_kernel_names();
  ASSERT_FALSE(builtin.empty()) << "the built-in package is not loaded";
  std::map<std::string, std::set<std::string>> families_of;  // kernel -> families generating it
  for (int f = 0; f < testing::kNumFamilies; ++f) {
    const auto family = static_cast<testing::Family>(f);
    std::set<std::string> kernels;
    // Enough graphs that every random branch of a family is taken (families pick their kernel
    // variants with probabilities of 1/4 or more per instance).
    for (uint32_t seed = 1; seed <= 64; ++seed) {
      testing::RandomGraphOptions go;
      go.min_ops = 4;
      go.max_ops = 4;
      go.families = {family};
      const testing::RandomGraph rg = testing::make_random_graph(seed, go);
      ASSERT_TRUE(rg.graph->verify().is_ok())
          << testing::family_name(family) << ", seed " << seed << ": " << rg.graph->verify().to_string();
      for (size_t i = 0; i < rg.graph->num_ops(); ++i)
        if (!rg.graph->op(i).kernel.empty()) kernels.insert(rg.graph->op(i).kernel);
    }
    EXPECT_FALSE(kernels.empty()) << testing::family_name(family) << " generated no kernel";
    for (const std::string& k : kernels) families_of[k].insert(testing::family_name(family));
  }
  for (const std::string& k : builtin) {
    if (const char* why = testing::why_no_family(k)) {
      std::printf("families_property: kernel %s: generated by no family (%s)\n", k.c_str(), why);
      continue;
    }
    EXPECT_TRUE(families_of.count(k) > 0)
        << "built-in kernel '" << k
        << "' is generated by no family: add one to tests/common/random_ops.h (or, if it cannot run in a "
           "single-process graph, an entry with the reason in kernels_without_family())";
  }
  for (const auto& [k, families] : families_of) {
    std::string line;
    for (const std::string& f : families) line += " " + f;
    std::printf("families_property: kernel %s: families%s\n", k.c_str(), line.c_str());
  }
}

}  // namespace
}  // namespace sk
