// Property: for random graphs of built-in ops, every execution mode and every core count gives
// bit-identical outputs.
#include <gtest/gtest.h>

#include "common/random_graph.h"
#include "common/test_runtime.h"

namespace sk {
namespace {

testing::RunResult run_once(Runtime& rt, const testing::RandomGraph& rg, ExecutionMode mode) {
  auto exe = rt.compile(*rg.graph, CompileOptions::for_mode(mode));
  if (!exe) throw std::runtime_error(exe.status().to_string());
  for (const auto& [name, data] : rg.inputs) {
    Status s = (*exe)->set_input(name, data);
    if (!s) throw std::runtime_error(s.to_string());
  }
  Status s = (*exe)->run();
  if (!s) throw std::runtime_error(s.to_string());
  return testing::collect_outputs(**exe);
}

TEST(ModesProperty, RandomGraphsAreBitIdenticalAcrossModesAndCoreCounts) {
  std::vector<std::shared_ptr<Runtime>> runtimes = {testing::make_runtime(1), testing::make_runtime(2),
                                                    testing::make_runtime(3)};
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
    for (auto& rt : runtimes) {
      for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel}) {
        std::string why;
        ASSERT_TRUE(testing::bitwise_equal(reference, run_once(*rt, rg, m), &why))
            << "seed " << seed << " mode " << execution_mode_name(m) << " cores " << rt->num_cores() << ": " << why;
      }
    }
  }
}

}  // namespace
}  // namespace sk
