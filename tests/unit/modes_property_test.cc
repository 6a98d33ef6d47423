// Property: for random graphs of built-in ops, every execution mode and every core count gives
// bit-identical outputs (superkernel mode with recompute on and off).
#include <gtest/gtest.h>

#include "common/random_graph.h"
#include "common/test_runtime.h"

namespace sk {
namespace {

testing::RunResult run_compiled(Executable& exe, const testing::RandomGraph& rg) {
  for (const auto& [name, data] : rg.inputs) {
    Status s = exe.set_input(name, data);
    if (!s) throw std::runtime_error(s.to_string());
  }
  Status s = exe.run();
  if (!s) throw std::runtime_error(s.to_string());
  return testing::collect_outputs(exe);
}

testing::RunResult run_once(Runtime& rt, const testing::RandomGraph& rg, ExecutionMode mode) {
  auto exe = rt.compile(*rg.graph, CompileOptions::for_mode(mode));
  if (!exe) throw std::runtime_error(exe.status().to_string());
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

TEST(ModesProperty, RandomGraphsAreBitIdenticalAcrossModesAndCoreCounts) {
  std::vector<std::shared_ptr<Runtime>> runtimes = {testing::make_runtime(1), testing::make_runtime(2),
                                                    testing::make_runtime(3)};
  std::vector<int> recomputed(runtimes.size(), 0);
  for (uint32_t seed = 1; seed <= 90; ++seed) {
    testing::RandomGraphOptions opt;
    opt.host_ops = seed % 3 != 0;
    opt.scopes = seed % 2 == 0;  // odd seeds fuse the whole graph in superkernel mode
    testing::RandomGraph rg = testing::make_random_graph(seed, opt);
    ASSERT_TRUE(rg.graph->verify().is_ok()) << "seed " << seed << ": " << rg.graph->verify().to_string();
    testing::RunResult reference = run_once(*runtimes[0], rg, ExecutionMode::kEager);
    // Guard against a vacuous comparison: the graph must have computed something.
    bool any_nonzero = false;
    for (const auto& bytes : reference.bytes)
      for (uint8_t b : bytes) any_nonzero |= b != 0;
    ASSERT_TRUE(any_nonzero) << "seed " << seed;
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
    }
  }
  // Guard against a vacuous property: recompute rewrote some plans on more than one core.
  EXPECT_EQ(recomputed[0], 0);
  EXPECT_GT(recomputed[1], 0);
  EXPECT_GT(recomputed[2], 0);
}

// Property: random graphs over 2 or 3 streams with events and core limits, fused with stream
// fusion into multi-stream super kernels, finish (the watchdog turns a deadlock into an error)
// and match eager bit for bit at 1, 2 and 3 cores. Core limits the machine cannot hold must be
// reported as such; without stream fusion a multi-stream segment must name the option.
TEST(ModesProperty, RandomMultiStreamGraphsFuseDeadlockFreeAndBitIdentical) {
  std::vector<std::shared_ptr<Runtime>> runtimes = {testing::make_runtime(1, 20.0), testing::make_runtime(2, 20.0),
                                                    testing::make_runtime(3, 20.0)};
  std::vector<int> fused_multi_stream(runtimes.size(), 0);
  for (uint32_t seed = 1; seed <= 60; ++seed) {
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
    }
  }
  // Guard against a vacuous property: multi-stream segments were built at every core count.
  for (size_t r = 0; r < runtimes.size(); ++r) EXPECT_GT(fused_multi_stream[r], 0) << "cores " << r + 1;
}

}  // namespace
}  // namespace sk
