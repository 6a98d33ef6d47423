// sk_core_ctx::poll: a kernel waiting for something outside the launch (as a collective waits for
// another rank) learns from poll that another core failed, and the watchdog turns a wait that
// never ends into a DEADLOCK naming the kernel, in every mode and on both backends.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "superkernel/ops.h"
#include "superkernel/runtime.h"
#include "test_runtime.h"

namespace sk {
namespace {

struct ModeCase {
  const char* name;
  CompileOptions options;
};

std::vector<ModeCase> modes() {
  std::vector<ModeCase> out = {{"eager", CompileOptions::for_mode(ExecutionMode::kEager)},
                               {"graph", CompileOptions::for_mode(ExecutionMode::kGraph)},
                               {"superkernel", CompileOptions::for_mode(ExecutionMode::kSuperKernel)}};
#if defined(__x86_64__)
  CompileOptions jit = CompileOptions::for_mode(ExecutionMode::kSuperKernel);
  jit.super_kernel_optimize_options.jit = true;
  out.push_back({"superkernel+jit", jit});
#endif
  return out;
}

std::shared_ptr<Runtime> runtime_with_poll_kernels(int cores, double watchdog_seconds) {
  auto rt = testing::make_runtime(cores, watchdog_seconds);
  Status s = rt->load_kernel_package(SK_POLL_KERNELS_PATH);
  if (!s) throw std::runtime_error(s.to_string());
  return rt;
}

Graph poll_graph() {
  Graph g("poll");
  Tensor x = g.input("x", DType::kF32, {1});
  {
    SuperKernelScope scope(g, "wait");
    auto y = call_kernel(g, "test.poll_until_stopped", {x}, {TensorSpec(DType::kF32, {2})}, {}, "waiter");
    g.output(y.at(0), "y");
  }
  return g;
}

TEST(Poll, WatchdogEndsAWaitThatNeverEnds) {
  auto rt = runtime_with_poll_kernels(1, 0.3);
  Graph g = poll_graph();
  for (const ModeCase& m : modes()) {
    SCOPED_TRACE(m.name);
    auto exe = rt->compile(g, m.options);
    ASSERT_TRUE(exe) << exe.status().to_string();
    const float ms = 0;
    ASSERT_TRUE((*exe)->set_input("x", &ms, sizeof ms));
    Status s = (*exe)->run();
    EXPECT_EQ(s.code(), StatusCode::kDeadlock) << s.to_string();
    EXPECT_NE(s.message().find("watchdog"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("test.poll_until_stopped"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("op 'waiter'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("waited for a message that never comes"), std::string::npos) << s.message();
    EXPECT_EQ((*exe)->output_f32("y").at(0), float(SK_ERR_TIMEOUT));
  }
}

// Another core of the launch fails: poll says so at once (the watchdog is ten minutes away, and
// the test's timeout far shorter), the waiting kernel returns, and the run reports the failure.
TEST(Poll, AnotherCoreFailingStopsTheWait) {
  auto rt = runtime_with_poll_kernels(2, 600.0);
  Graph g = poll_graph();
  for (const ModeCase& m : modes()) {
    SCOPED_TRACE(m.name);
    auto exe = rt->compile(g, m.options);
    ASSERT_TRUE(exe) << exe.status().to_string();
    const float ms = 20;
    ASSERT_TRUE((*exe)->set_input("x", &ms, sizeof ms));
    Status s = (*exe)->run();
    EXPECT_EQ(s.code(), StatusCode::kKernelError) << s.to_string();
    EXPECT_NE(s.message().find("core 1 fails on purpose"), std::string::npos) << s.message();
    EXPECT_EQ((*exe)->output_f32("y").at(0), float(SK_ERR_ABORTED));
  }
}

}  // namespace
}  // namespace sk
