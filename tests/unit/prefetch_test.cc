// Weight prefetch (sk::prefetch): operand validation, results that do not depend on prefetches
// (on or off, every mode, 1 to 3 cores), the option that turns them off, and random multi-stream
// graphs with prefetches that finish (the watchdog turns a deadlock into an error).
#include <gtest/gtest.h>

#include <string>

#include "common/random_graph.h"
#include "common/test_runtime.h"
#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Prefetch, RangeOutsideTheTensorIsAnErrorNamingOpAndTensor) {
  struct Case {
    int64_t bytes, offset;
  };
  for (Case c : {Case{257, 0}, Case{1, 256}, Case{16, -4}, Case{-1, 0}}) {
    Graph g("bad_prefetch");
    Tensor x = g.input("x", DType::kF32, {64});
    Tensor w = g.constant_f32("w_next", {64}, testing::random_floats(64, 1));
    prefetch(g, w, x, c.bytes, c.offset, "warm_w");
    g.output(add(g, x, x), "y");
    Status s = g.verify();
    ASSERT_FALSE(s.is_ok()) << c.bytes << " at " << c.offset;
    EXPECT_TRUE(contains(s.message(), "op 'warm_w' (prefetch)")) << s.to_string();
    EXPECT_TRUE(contains(s.message(), "tensor 'w_next' (256 bytes)")) << s.to_string();
  }
  Graph g("good_prefetch");
  Tensor x = g.input("x", DType::kF32, {64});
  Tensor w = g.constant_f32("w", {64}, testing::random_floats(64, 1));
  prefetch(g, w, x, 256, 0);
  prefetch(g, g.slice(w, 0, 16, 32), Tensor{}, 64, 0);  // a whole view, no ordering
  prefetch(g, w, x, 0, 256);                            // empty range at the end
  g.output(add(g, x, x), "y");
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().to_string();
}

// Two layers: y = (x w0) w1, with w1 prefetched from stream "prefetch" once h is ready.
struct TwoLayers {
  Graph g{"two_layers"};
  TwoLayers() {
    Stream side = g.create_stream("prefetch");
    Tensor x = g.input("x", DType::kF32, {2, 64});
    Tensor w0 = g.constant_f32("w0", {64, 64}, testing::random_floats(64 * 64, 2, -0.2f, 0.2f));
    Tensor w1 = g.constant_f32("w1", {64, 64}, testing::random_floats(64 * 64, 3, -0.2f, 0.2f));
    SuperKernelScope scope(g, "layers");
    Tensor h = matmul(g, x, w0, "layer0");
    {
      StreamScope on(g, side);
      prefetch(g, w1, h, 64 * 64 * 4, 0, "warm_w1");
      prefetch(g, w1, x, 1024, 512, "warm_w1_part");
    }
    g.output(matmul(g, h, w1, "layer1"), "y");
  }
};

testing::RunResult run(Runtime& rt, const Graph& g, const CompileOptions& o, std::string* warnings = nullptr) {
  auto exe = rt.compile(g, o);
  if (!exe) throw std::runtime_error(exe.status().to_string());
  if (warnings)
    for (const std::string& w : (*exe)->report().warnings) *warnings += w + "\n";
  Status s = (*exe)->set_input("x", testing::random_floats(128, 7));
  if (s) s = (*exe)->run();
  if (!s) throw std::runtime_error(s.to_string());
  return testing::collect_outputs(**exe);
}

TEST(Prefetch, ResultsAreBitIdenticalOnAndOffInEveryModeAt1To3Cores) {
  TwoLayers t;
  auto reference_rt = testing::make_runtime(1);
  CompileOptions eager_off = CompileOptions::for_mode(ExecutionMode::kEager);
  eager_off.prefetch = false;
  const testing::RunResult reference = run(*reference_rt, t.g, eager_off);
  for (int cores = 1; cores <= 3; ++cores) {
    auto rt = testing::make_runtime(cores, 20.0);
    for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
      for (bool on : {true, false}) {
        CompileOptions o = CompileOptions::for_mode(m);
        o.super_kernel_optimize_options.stream_fusion = true;
        o.prefetch = on;
        std::string why;
        EXPECT_TRUE(testing::bitwise_equal(reference, run(*rt, t.g, o), &why))
            << execution_mode_name(m) << " prefetch " << on << " cores " << cores << ": " << why;
      }
    }
  }
}

TEST(Prefetch, FusesIntoTheComputeSuperKernel) {
  TwoLayers t;
  auto rt = testing::make_runtime(2, 20.0);
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
  o.super_kernel_optimize_options.stream_fusion = true;
  auto exe = rt->compile(t.g, o);
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  EXPECT_EQ((*exe)->report().num_launches, 1u);
  EXPECT_EQ((*exe)->report().segments.size(), 1u);
}

TEST(Prefetch, OptionTurnsEveryPrefetchIntoANoOp) {
  CompileOptions o = CompileOptions::for_mode(ExecutionMode::kGraph);
  ASSERT_TRUE(o.prefetch);
  ASSERT_TRUE(o.set("prefetch", "false").is_ok());
  EXPECT_FALSE(o.prefetch);
  EXPECT_TRUE(contains(o.set("prefetch", "sometimes").to_string(), "prefetch"));
  TwoLayers t;
  auto rt = testing::make_runtime(2, 20.0);
  std::string off_warnings, on_warnings;
  (void)run(*rt, t.g, o, &off_warnings);
  EXPECT_TRUE(contains(off_warnings, "prefetch=false: 2 prefetch op(s) run as no-ops")) << off_warnings;
  (void)run(*rt, t.g, CompileOptions::for_mode(ExecutionMode::kGraph), &on_warnings);
  EXPECT_FALSE(contains(on_warnings, "prefetch")) << on_warnings;
}

testing::RunResult run_random(Runtime& rt, const testing::RandomGraph& rg, const CompileOptions& o) {
  auto exe = rt.compile(*rg.graph, o);
  if (!exe) throw std::runtime_error(exe.status().to_string());
  for (const testing::InputBytes& in : rg.inputs) {
    Status s = (*exe)->set_input(in.name, in.bytes.data(), in.bytes.size());
    if (!s) throw std::runtime_error(s.to_string());
  }
  Status s = (*exe)->run();
  if (!s) throw std::runtime_error(s.to_string());
  return testing::collect_outputs(**exe);
}

TEST(Prefetch, RandomMultiStreamGraphsWithPrefetchesAreDeadlockFreeAndBitIdentical) {
  std::vector<std::shared_ptr<Runtime>> runtimes = {testing::make_runtime(1, 20.0), testing::make_runtime(2, 20.0),
                                                    testing::make_runtime(3, 20.0)};
  int prefetch_ops = 0;
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    testing::RandomGraphOptions opt;
    opt.streams = 2 + static_cast<int>(seed % 2);
    opt.scopes = seed % 3 == 0;
    opt.prefetches = true;
    testing::RandomGraph rg = testing::make_random_graph(seed, opt);
    ASSERT_TRUE(rg.graph->verify().is_ok()) << "seed " << seed << ": " << rg.graph->verify().to_string();
    for (size_t i = 0; i < rg.graph->num_ops(); ++i) prefetch_ops += rg.graph->op(i).kernel == "prefetch" ? 1 : 0;
    const testing::RunResult reference = run_random(*runtimes[0], rg, CompileOptions::for_mode(ExecutionMode::kEager));
    for (auto& rt : runtimes) {
      for (bool on : {true, false}) {
        for (ExecutionMode m : {ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
          CompileOptions o = CompileOptions::for_mode(m);
          o.super_kernel_optimize_options.stream_fusion = true;
          o.prefetch = on;
          std::string why;
          ASSERT_TRUE(testing::bitwise_equal(reference, run_random(*rt, rg, o), &why))
              << "seed " << seed << " " << execution_mode_name(m) << " prefetch " << on << " cores " << rt->num_cores()
              << ": " << why;
        }
      }
    }
  }
  EXPECT_GT(prefetch_ops, 30);
}

}  // namespace
}  // namespace sk
