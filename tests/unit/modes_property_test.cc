// Property: for random graphs of built-in ops, every execution mode and every core count gives
// bit-identical outputs (superkernel mode with recompute on and off).
#include <gtest/gtest.h>

#include <cstdio>

#include "common/random_graph.h"
#include "common/test_runtime.h"

namespace sk {
namespace {

testing::RunResult run_compiled(Executable& exe, const testing::RandomGraph& rg) {
  for (const testing::InputBytes& in : rg.inputs) {
    Status s = exe.set_input(in.name, in.bytes.data(), in.bytes.size());
    if (!s) throw std::runtime_error(s.to_string());
  }
  Status s = exe.run();
  if (!s) throw std::runtime_error(s.to_string());
  return testing::collect_outputs(exe);
}

testing::RunResult run_once(Runtime& rt, const testing::RandomGraph& rg, const CompileOptions& options) {
  auto exe = rt.compile(*rg.graph, options);
  if (!exe) throw std::runtime_error(exe.status().to_string());
  if (options.super_kernel_optimize_options.jit && options.mode() != ExecutionMode::kEager &&
      (*exe)->report().jit_code_bytes == 0)
    throw std::runtime_error("jit=true but the launches run on the interpreter");
  return run_compiled(**exe, rg);
}

// Superkernel mode with recompute on or off; counts the ops it recomputed into `recomputed`.
testing::RunResult run_superkernel(Runtime& rt, const testing::RandomGraph& rg, bool recompute, int& recomputed) {
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
  o.super_kernel_optimize_options.recompute = recompute;
  auto exe = rt.compile(*rg.graph, o);
  if (!exe) throw std::runtime_error(exe.status().to_string());
  for (const SegmentReport& seg : (*exe)->report().segments)
    for (const std::string& d : seg.recompute) recomputed += d.find(": recomputed on") != std::string::npos;
  return run_compiled(**exe, rg);
}

testing::RunResult run_once(Runtime& rt, const testing::RandomGraph& rg, ExecutionMode mode) {
  return run_once(rt, rg, CompileOptions::for_mode(mode));
}

// The backends and code options compared with eager besides the plain modes: the JIT in graph
// and superkernel mode, code preload on either backend, and kernel replicas.
struct Variant {
  std::string name;
  CompileOptions options;
};

std::vector<Variant> backend_variants() {
  std::vector<Variant> v;
  auto add = [&](const std::string& name, ExecutionMode mode, bool jit, PreloadCode preload, int replicas) {
    CompileOptions o = CompileOptions::for_mode(mode);
    o.super_kernel_optimize_options.jit = jit;
    o.super_kernel_optimize_options.preload_code = preload;
    o.super_kernel_optimize_options.kernel_replicas = replicas;
    v.push_back({name, o});
  };
  add("graph+jit", ExecutionMode::kGraph, true, PreloadCode::kNone, 0);
  add("superkernel+jit", ExecutionMode::kSuperKernel, true, PreloadCode::kNone, 0);
  add("superkernel+preload", ExecutionMode::kSuperKernel, false, PreloadCode::kPerFunc, 0);
  add("superkernel+jit+preload+replicas", ExecutionMode::kSuperKernel, true, PreloadCode::kMax, 2);
  return v;
}

TEST(ModesProperty, RandomGraphsAreBitIdenticalAcrossModesAndCoreCounts) {
  // The last two run every launch's cores interleaved on one thread (the load policy's form for
  // a loaded CPU): the same instructions in another order the waits allow.
  std::vector<std::shared_ptr<Runtime>> runtimes = {testing::make_runtime(1), testing::make_runtime(2),
                                                    testing::make_runtime(3),
                                                    testing::make_runtime(2, 60.0, 0, LoadPolicy::kOneThread),
                                                    testing::make_runtime(3, 60.0, 0, LoadPolicy::kOneThread)};
  std::vector<int> recomputed(runtimes.size(), 0);
  const uint32_t seeds = testing::property_seeds(90);
  int all_zero_graphs = 0;
  for (uint32_t seed = 1; seed <= seeds; ++seed) {
    testing::RandomGraphOptions opt;
    opt.host_ops = seed % 3 != 0;
    opt.scopes = seed % 2 == 0;  // odd seeds fuse the whole graph in superkernel mode
    testing::RandomGraph rg = testing::make_random_graph(seed, opt);
    ASSERT_TRUE(rg.graph->verify().is_ok()) << "seed " << seed << ": " << rg.graph->verify().to_string();
    testing::RunResult reference = run_once(*runtimes[0], rg, ExecutionMode::kEager);
    // Guard against vacuous comparisons: graphs must compute something. A few legitimately give
    // zeros (attention over a cache that starts empty, projected), so count them.
    bool any_nonzero = false;
    for (const auto& bytes : reference.bytes)
      for (uint8_t b : bytes) any_nonzero |= b != 0;
    all_zero_graphs += !any_nonzero;
    for (size_t r = 0; r < runtimes.size(); ++r) {
      Runtime& rt = *runtimes[r];
      for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph}) {
        std::string why;
        ASSERT_TRUE(testing::bitwise_equal(reference, run_once(rt, rg, m), &why))
            << "seed " << seed << " mode " << execution_mode_name(m) << " cores " << rt.num_cores() << ": " << why;
      }
      for (bool recompute : {true, false}) {
        std::string why;
        ASSERT_TRUE(testing::bitwise_equal(reference, run_superkernel(rt, rg, recompute, recomputed[r]), &why))
            << "seed " << seed << " superkernel mode, recompute " << recompute << ", cores " << rt.num_cores() << ": "
            << why;
      }
      for (const Variant& v : backend_variants()) {
        std::string why;
        ASSERT_TRUE(testing::bitwise_equal(reference, run_once(rt, rg, v.options), &why))
            << "seed " << seed << " " << v.name << " cores " << rt.num_cores() << ": " << why;
      }
    }
  }
  EXPECT_LT(all_zero_graphs, static_cast<int>(seeds) / 10 + 1);
  // Guard against a vacuous property: recompute rewrote some plans on more than one core.
  EXPECT_EQ(recomputed[0], 0);
  EXPECT_GT(recomputed[1], 0);
  EXPECT_GT(recomputed[2], 0);
  EXPECT_GT(runtimes[3]->one_thread_launches(), 0);
  EXPECT_GT(runtimes[4]->one_thread_launches(), 0);
  std::printf("modes_property: %lld calls shared with the chunk helper\n",
              static_cast<long long>(runtimes[3]->shared_calls()));
  EXPECT_GT(runtimes[3]->shared_calls(), 0) << "the 2-core one-thread runtime shared no GEMV with its helper";
  EXPECT_EQ(runtimes[2]->one_thread_launches(), 0) << "the adaptive policy moves launches of 2-core runtimes only";
}

// Property: random graphs with MoE blocks (their grouped matmuls are tiling-sink kernels, some
// experts empty, some drawing every token) give the same bits in eager and graph mode and in
// superkernel mode with the tiling sink on (TILING inside the super kernel) and off (each
// grouped matmul cut out, tiled in its own launch), at 1, 2 and 3 cores, fused whole, in scopes,
// and stream-fused over two streams.
TEST(ModesProperty, RandomMoeGraphsAreBitIdenticalWithTilingSinkOnAndOff) {
  std::vector<std::shared_ptr<Runtime>> runtimes = {testing::make_runtime(1, 20.0), testing::make_runtime(2, 20.0),
                                                    testing::make_runtime(3, 20.0)};
  int fused_sinks = 0, cut_sinks = 0;
  for (uint32_t seed = 1, seeds = testing::property_seeds(40); seed <= seeds; ++seed) {
    testing::RandomGraphOptions opt;
    opt.moe = true;
    opt.max_ops = 16;
    opt.scopes = seed % 2 == 0;
    opt.host_ops = seed % 4 == 0;
    opt.streams = seed % 3 == 0 ? 2 : 1;
    testing::RandomGraph rg = testing::make_random_graph(seed, opt);
    ASSERT_TRUE(rg.graph->verify().is_ok()) << "seed " << seed << ": " << rg.graph->verify().to_string();
    const testing::RunResult reference = run_once(*runtimes[0], rg, ExecutionMode::kEager);
    for (auto& rt : runtimes) {
      std::string why;
      ASSERT_TRUE(testing::bitwise_equal(reference, run_once(*rt, rg, ExecutionMode::kGraph), &why))
          << "seed " << seed << " graph mode, cores " << rt->num_cores() << ": " << why;
      for (bool sink : {true, false}) {
        CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
        o.super_kernel_optimize_options.stream_fusion = opt.streams > 1;
        o.super_kernel_optimize_options.tiling_sink = sink;
        auto exe = rt->compile(*rg.graph, o);
        ASSERT_TRUE(exe.has_value()) << "seed " << seed << ": " << exe.status().to_string();
        const CompileReport& r = (*exe)->report();
        for (const UnfusedOp& u : r.unfused) cut_sinks += u.reason == CutReason::kTilingSink;
        // A TILING inside a super kernel: the header of the launch it belongs to names a segment.
        for (size_t at = r.program_text.find("TILING"); sink && at != std::string::npos;
             at = r.program_text.find("TILING", at + 1)) {
          const size_t header = r.program_text.rfind("\nlaunch ", at) + 1;  // npos + 1: the first launch
          const std::string line = r.program_text.substr(header, r.program_text.find('\n', header) - header);
          fused_sinks += line.find("\"segment ") != std::string::npos;
        }
        ASSERT_TRUE(testing::bitwise_equal(reference, run_compiled(**exe, rg), &why))
            << "seed " << seed << " superkernel tiling_sink=" << sink << ", cores " << rt->num_cores() << ": " << why;
      }
    }
  }
  // Guard against a vacuous property: tiling-sink ops were fused with it on and cut with it off.
  EXPECT_GT(fused_sinks, 0);
  EXPECT_GT(cut_sinks, 0);
}

// Property: every super kernel optimisation, alone and together, keeps random graphs (with and
// without scopes, host ops and several streams) deadlock-free and bit-identical to eager at 1, 2
// and 3 cores. Each configuration is a list of CompileOptions::set pairs.
TEST(ModesProperty, RandomGraphsWithEachOptimisationAreBitIdentical) {
  using Setting = std::vector<std::pair<std::string, std::string>>;
  const std::string opt = "super_kernel_optimize_options.";
  const std::vector<Setting> configs = {
      {{opt + "early_start", "1"}},
      {{opt + "early_start", "2"}},
      {{opt + "sync_choice", "cost"}},
      {{opt + "early_start", "2"}, {opt + "sync_choice", "cost"}},
      {{opt + "recompute", "true"}, {opt + "early_start", "2"}, {opt + "sync_choice", "cost"}},
      {{opt + "recompute", "true"}, {opt + "early_start", "1"}, {opt + "jit", "true"}},
  };
  std::vector<std::shared_ptr<Runtime>> runtimes = {testing::make_runtime(1, 20.0), testing::make_runtime(2, 20.0),
                                                    testing::make_runtime(3, 20.0)};
  for (uint32_t seed = 1, seeds = testing::property_seeds(40); seed <= seeds; ++seed) {
    testing::RandomGraphOptions ro;
    ro.host_ops = seed % 3 == 0;
    ro.scopes = seed % 2 == 0;
    ro.streams = seed % 4 == 1 ? 2 : 1;
    testing::RandomGraph rg = testing::make_random_graph(seed, ro);
    const testing::RunResult reference = run_once(*runtimes[0], rg, ExecutionMode::kEager);
    for (auto& rt : runtimes)
      for (const Setting& setting : configs) {
        CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
        o.super_kernel_optimize_options.stream_fusion = true;
        std::string label;
        for (const auto& [key, value] : setting) {
          ASSERT_TRUE(o.set(key, value).is_ok()) << key;
          label += " " + key + "=" + value;
        }
        auto exe = rt->compile(*rg.graph, o);
        ASSERT_TRUE(exe.has_value()) << "seed " << seed << label << ": " << exe.status().to_string();
        std::string why;
        ASSERT_TRUE(testing::bitwise_equal(reference, run_compiled(**exe, rg), &why))
            << "seed " << seed << label << " cores " << rt->num_cores() << ": " << why;
      }
  }
}

// Property: random graphs over 2 or 3 streams with events and core limits, fused with stream
// fusion into multi-stream super kernels, finish (the watchdog turns a deadlock into an error)
// and match eager bit for bit at 1, 2 and 3 cores. Core limits the machine cannot hold must be
// reported as such; without stream fusion a multi-stream segment must name the option.
TEST(ModesProperty, RandomMultiStreamGraphsFuseDeadlockFreeAndBitIdentical) {
  std::vector<std::shared_ptr<Runtime>> runtimes = {testing::make_runtime(1, 20.0), testing::make_runtime(2, 20.0),
                                                    testing::make_runtime(3, 20.0)};
  std::vector<int> fused_multi_stream(runtimes.size(), 0);
  for (uint32_t seed = 1, seeds = testing::property_seeds(60); seed <= seeds; ++seed) {
    testing::RandomGraphOptions opt;
    opt.streams = 2 + static_cast<int>(seed % 2);
    opt.core_limits = seed % 3 != 0;
    opt.host_ops = seed % 4 == 0;
    opt.scopes = seed % 5 < 2;
    testing::RandomGraph rg = testing::make_random_graph(seed, opt);
    ASSERT_TRUE(rg.graph->verify().is_ok()) << "seed " << seed << ": " << rg.graph->verify().to_string();
    const testing::RunResult reference = run_once(*runtimes[0], rg, ExecutionMode::kEager);
    for (size_t r = 0; r < runtimes.size(); ++r) {
      Runtime& rt = *runtimes[r];
      std::string why;
      ASSERT_TRUE(testing::bitwise_equal(reference, run_once(rt, rg, ExecutionMode::kGraph), &why))
          << "seed " << seed << " graph mode, cores " << rt.num_cores() << ": " << why;
      auto plain = rt.compile(*rg.graph, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
      if (!plain) {
        EXPECT_NE(plain.status().message().find("stream-fusion=1"), std::string::npos)
            << "seed " << seed << ": " << plain.status().to_string();
      } else {
        ASSERT_TRUE(testing::bitwise_equal(reference, run_compiled(**plain, rg), &why))
            << "seed " << seed << " superkernel mode, cores " << rt.num_cores() << ": " << why;
      }
      CompileOptions fused = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
      fused.super_kernel_optimize_options.stream_fusion = true;
      auto exe = rt.compile(*rg.graph, fused);
      if (!exe) {
        const std::string msg = exe.status().message();
        EXPECT_TRUE(msg.find("core limits of") != std::string::npos || msg.find("LimitCoreNum") != std::string::npos)
            << "seed " << seed << " cores " << rt.num_cores() << ": " << exe.status().to_string();
        continue;
      }
      for (const SegmentReport& seg : (*exe)->report().segments) fused_multi_stream[r] += seg.partitions.size() > 1;
      ASSERT_TRUE(testing::bitwise_equal(reference, run_compiled(**exe, rg), &why))
          << "seed " << seed << " stream fusion, cores " << rt.num_cores() << ": " << why;
      // The same multi-stream super kernels as generated code.
      fused.super_kernel_optimize_options.jit = true;
      ASSERT_TRUE(testing::bitwise_equal(reference, run_once(rt, rg, fused), &why))
          << "seed " << seed << " stream fusion + jit, cores " << rt.num_cores() << ": " << why;
    }
  }
  // Guard against a vacuous property: multi-stream segments were built at every core count.
  for (size_t r = 0; r < runtimes.size(); ++r) EXPECT_GT(fused_multi_stream[r], 0) << "cores " << r + 1;
}

}  // namespace
}  // namespace sk
