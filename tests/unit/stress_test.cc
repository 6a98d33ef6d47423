// Load: many launches of multi-segment super kernels on devices of different core counts, all
// under the watchdog, and executables compiled and destroyed while another thread runs.
//
// SK_STRESS_LAUNCHES sets the number of launches of the first test (default 100000); sanitizer
// builds lower it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/test_runtime.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using testing::make_runtime;

int64_t stress_launches() {
  const char* env = std::getenv("SK_STRESS_LAUNCHES");
  if (env == nullptr || *env == '\0') return 100000;
  char* end = nullptr;
  const long long n = std::strtoll(env, &end, 10);
  return end != env && *end == '\0' && n > 0 ? n : 100000;
}

constexpr int kSegments = 4;
constexpr int kOpsPerSegment = 3;
constexpr int64_t kElems = 64;

// kSegments scopes, each its own launch on a different number of cores (LimitCoreNum), each a
// chain of add1 ending in a reversal that needs every core's part (sync_all). The reversals
// cancel, so y = x + kSegments * kOpsPerSegment.
Graph multi_segment_graph() {
  Graph g("stress");
  Tensor t = g.input("x", DType::kF32, {kElems});
  for (int s = 0; s < kSegments; ++s) {
    LimitCoreNum limit(g, 0, s % 3);  // 0: every core
    SuperKernelScope scope(g, "segment_" + std::to_string(s));
    for (int i = 0; i < kOpsPerSegment; ++i)
      t = call_kernel(g, "test.add1.f32", {t}, {{DType::kF32, {kElems}, ""}}, {})[0];
    t = call_kernel(g, "test.reverse_sync.f32", {t}, {{DType::kF32, {kElems}, ""}}, {})[0];
  }
  g.output(t, "y");
  return g;
}

std::vector<float> ramp(float start) {
  std::vector<float> v(kElems);
  for (int64_t i = 0; i < kElems; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

TEST(Stress, MultiSegmentSuperKernelLaunchesOnVariedCoreCounts) {
  const int64_t target = stress_launches();
  const Graph g = multi_segment_graph();
  std::vector<std::shared_ptr<Runtime>> runtimes;
  std::vector<std::unique_ptr<Executable>> exes;
  for (int cores : {1, 2, 3, 4}) {
    runtimes.push_back(make_runtime(cores, /*watchdog_seconds=*/20.0));
    auto exe = runtimes.back()->compile(g, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
    ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
    ASSERT_EQ((*exe)->report().num_launches, static_cast<size_t>(kSegments));
    exes.push_back(std::move(*exe));
  }
  int64_t launches = 0;
  for (int64_t run = 0; launches < target; ++run) {
    Executable& exe = *exes[run % exes.size()];
    const std::vector<float> x = ramp(static_cast<float>(run % 1000));
    ASSERT_TRUE(exe.set_input("x", x).is_ok());
    Status s = exe.run();
    ASSERT_TRUE(s.is_ok()) << "run " << run << ": " << s.to_string();
    launches += kSegments;
    const std::vector<float> y = exe.output_f32("y");
    for (int64_t i = 0; i < kElems; ++i)
      ASSERT_EQ(y[i], x[i] + static_cast<float>(kSegments * kOpsPerSegment)) << "run " << run << " element " << i;
  }
  RecordProperty("launches", std::to_string(launches));
}

// One thread keeps running a super kernel while the main thread compiles, runs and destroys
// executables of every mode on the same runtime.
TEST(Stress, ExecutablesCompiledAndDestroyedWhileAnotherRuns) {
  auto rt = make_runtime(2, /*watchdog_seconds=*/20.0);
  const Graph g = multi_segment_graph();
  auto busy = rt->compile(g, CompileOptions::for_mode(ExecutionMode::kSuperKernel));
  ASSERT_TRUE(busy.has_value()) << busy.status().to_string();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> background_runs{0};
  std::atomic<bool> background_failed{false};
  Status background;  // read after join
  std::thread runner([&] {
    Executable& exe = **busy;
    for (int64_t run = 0; !stop.load(std::memory_order_relaxed); ++run) {
      const std::vector<float> x = ramp(static_cast<float>(run % 100));
      Status s = exe.set_input("x", x);
      if (s) s = exe.run();
      if (s && exe.output_f32("y")[kElems - 1] != x[kElems - 1] + kSegments * kOpsPerSegment)
        s = Status::internal("wrong result in background run " + std::to_string(run));
      if (!s) {
        background = s;
        background_failed = true;
        return;
      }
      background_runs.fetch_add(1, std::memory_order_relaxed);
    }
  });
  const ExecutionMode modes[] = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};
  for (int i = 0; i < 150; ++i) {
    Graph small("short_lived_" + std::to_string(i));
    Tensor t = small.input("x", DType::kF32, {kElems});
    {
      SuperKernelScope scope(small, "s");
      for (int k = 0; k <= i % 4; ++k)
        t = call_kernel(small, "test.add1.f32", {t}, {{DType::kF32, {kElems}, ""}}, {})[0];
    }
    small.output(t, "y");
    auto exe = rt->compile(small, CompileOptions::for_mode(modes[i % 3]));
    ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
    ASSERT_TRUE((*exe)->set_input("x", ramp(0.0f)).is_ok());
    ASSERT_TRUE((*exe)->run().is_ok());
    ASSERT_EQ((*exe)->output_f32("y")[0], static_cast<float>(i % 4 + 1));
  }
  // The background thread must have overlapped with the compiles above at least once.
  while (background_runs.load() == 0 && !background_failed.load()) std::this_thread::yield();
  stop = true;
  runner.join();
  EXPECT_TRUE(background.is_ok()) << background.to_string();
  EXPECT_GT(background_runs.load(), 0);
}

// Two threads hammering run() on one executable: each call either runs or is refused with
// FAILED_PRECONDITION, and the result afterwards is exact.
TEST(Stress, TwoThreadsRunningOneExecutableGetRunsOrClearRefusals) {
  auto rt = make_runtime(2, /*watchdog_seconds=*/20.0);
  auto exe = rt->compile(multi_segment_graph(), CompileOptions::for_mode(ExecutionMode::kSuperKernel));
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  const std::vector<float> x = ramp(1.0f);
  ASSERT_TRUE((*exe)->set_input("x", x).is_ok());
  std::atomic<int64_t> ran{0}, refused{0}, other{0};
  auto hammer = [&] {
    for (int i = 0; i < 1000; ++i) {
      Status s = (*exe)->run();
      if (s.is_ok()) {
        ran.fetch_add(1);
      } else if (s.code() == StatusCode::kFailedPrecondition) {
        refused.fetch_add(1);
      } else {
        other.fetch_add(1);
      }
    }
  };
  std::thread a(hammer), b(hammer);
  a.join();
  b.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ran.load() + refused.load(), 2000);
  EXPECT_GT(ran.load(), 0);
  const std::vector<float> y = (*exe)->output_f32("y");
  for (int64_t i = 0; i < kElems; ++i) ASSERT_EQ(y[i], x[i] + kSegments * kOpsPerSegment) << i;
}

}  // namespace
}  // namespace sk
