// The load policy (RuntimeOptions::load_policy, src/runtime/cpu/load_monitor.h): the monitor's
// rules; a launch run on one thread, its cores interleaved, gives the same outputs and errors as
// one thread per core in every mode and backend; what keeps a launch off one thread; and the
// adaptive policy leaving a CPU another thread keeps busy, then coming back once it is free.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "common/chain_graph.h"
#include "common/test_runtime.h"
#include "runtime/cpu/load_monitor.h"
#include "superkernel/attrs_moe.h"
#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace sk {
namespace {

using cpu::judge_load;
using cpu::kIdleShare;
using cpu::kLoadedShare;
using cpu::kMinBusyNs;
using cpu::LoadWindow;
using cpu::SchedSample;

// A thread that wanted `busy_ns` of the window and waited `share` of it for its CPU.
SchedSample wanted(int64_t busy_ns, double share) {
  const auto delay = static_cast<int64_t>(static_cast<double>(busy_ns) * share);
  return {busy_ns - delay, delay};
}

TEST(LoadMonitor, SpreadMovesToTheCpuOfTheThreadThatWaitedLeast) {
  LoadWindow w;
  w.threads = {wanted(4'000'000, 0.0), wanted(4'000'000, 0.0)};
  EXPECT_EQ(judge_load(w, -1), -1) << "nobody waited";
  w.threads = {wanted(4'000'000, kLoadedShare / 2), wanted(4'000'000, kLoadedShare / 2)};
  EXPECT_EQ(judge_load(w, -1), -1) << "short waits of a busy machine are not a load";
  w.threads = {wanted(4'000'000, 0.01), wanted(4'000'000, 0.5)};
  EXPECT_EQ(judge_load(w, -1), 0) << "core 1's CPU is held: everything to CPU 0";
  w.threads = {wanted(4'000'000, 0.5), wanted(4'000'000, 0.0)};
  EXPECT_EQ(judge_load(w, -1), 1) << "core 0's CPU is held: everything to CPU 1";
  w.threads = {wanted(4'000'000, 0.5), wanted(kMinBusyNs / 2, 0.0)};
  EXPECT_EQ(judge_load(w, -1), 1) << "a thread that hardly ran is a better home than a loaded one";
  w.threads = {wanted(kMinBusyNs / 2, 0.9), wanted(kMinBusyNs / 2, 0.9)};
  EXPECT_EQ(judge_load(w, -1), -1) << "too little running to tell";
  w.threads = {SchedSample{}, SchedSample{}};
  EXPECT_EQ(judge_load(w, -1), -1) << "no counters (no schedstat): never moves";
}

TEST(LoadMonitor, SoloStaysWhileTheOtherCpuIsBusyAndLeavesOnceItIsIdle) {
  LoadWindow w;
  w.threads = {wanted(16'000'000, 0.0), SchedSample{0, 0}};
  w.idle_cpus = 0.05;
  EXPECT_EQ(judge_load(w, 0), 0) << "the other CPU is still busy";
  EXPECT_EQ(judge_load(w, 1), 1);
  w.idle_cpus = -1;
  EXPECT_EQ(judge_load(w, 0), 0) << "idle time unknown: stay";
  w.idle_cpus = kIdleShare + 0.1;
  EXPECT_EQ(judge_load(w, 0), -1) << "the load is gone: every core its thread again";
  w.threads = {wanted(16'000'000, 0.5), SchedSample{0, 0}};
  EXPECT_EQ(judge_load(w, 0), 1) << "the load sits on the launching thread's CPU: move on";
  EXPECT_EQ(judge_load(w, 1), 0);
}

TEST(LoadMonitor, SoloCountsTheChunkHelpersTimeAsFreeUnlessTheHelperWaitedForItsCpu) {
  LoadWindow w;
  w.threads = {wanted(16'000'000, 0.0), wanted(4'000'000, 0.0)};
  w.idle_cpus = 0.2;
  w.helper_cpus = 0.25;
  EXPECT_EQ(judge_load(w, 0), 0) << "idle and helping: less than half the other CPU";
  w.helper_cpus = 0.4;
  EXPECT_EQ(judge_load(w, 0), -1) << "the other CPU was idle or ours for most of the window";
  w.threads[1] = wanted(4'000'000, 0.5);
  EXPECT_EQ(judge_load(w, 0), 0) << "the helper waited for its CPU: the load is still there";
  w.threads[1] = wanted(kMinBusyNs / 2, 0.9);
  EXPECT_EQ(judge_load(w, 0), -1) << "a helper that hardly ran says nothing";
}

TEST(LoadPolicy, NamesRoundTripAndAnUnknownNameIsAnErrorListingThem) {
  for (LoadPolicy p : {LoadPolicy::kAdaptive, LoadPolicy::kStatic, LoadPolicy::kOneThread}) {
    auto back = parse_load_policy(load_policy_name(p));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, p);
  }
  auto bad = parse_load_policy("solo");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("'solo'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("adaptive, static, one_thread"), std::string::npos);
}

Tensor add1(Graph& g, Tensor x, const std::string& name = "") {
  return call_kernel(g, "test.add1.f32", {x}, {{DType::kF32, g.tensor(x).shape, ""}}, {}, name)[0];
}

std::unique_ptr<Graph> chain(bool scoped) { return testing::decode_chain(scoped); }

CompileOptions options(ExecutionMode mode, bool jit, bool trace = false) {
  CompileOptions o = CompileOptions::for_mode(mode);
  o.super_kernel_optimize_options.jit = jit;
  o.super_kernel_debug_options.debug_op_exec_trace = trace;
  return o;
}

// Runs `g` three times; its output and the run's status (ok or the first failure).
std::pair<std::vector<float>, Status> run(Runtime& rt, const Graph& g, const CompileOptions& o,
                                          const std::vector<float>& x) {
  auto exe = rt.compile(g, o);
  if (!exe) return {{}, exe.status()};
  if (Status s = (*exe)->set_input("x", x); !s) return {{}, s};
  for (int i = 0; i < 3; ++i)
    if (Status s = (*exe)->run(); !s) return {{}, s};
  return {(*exe)->output_f32("y"), Status::ok()};
}

TEST(LoadPolicy, OneThreadGivesTheSameBitsInEveryModeAndBackend) {
  for (int cores : {2, 3}) {
    auto spread = testing::make_runtime(cores, 60.0, 0, LoadPolicy::kStatic);
    auto one = testing::make_runtime(cores, 60.0, 0, LoadPolicy::kOneThread);
    for (bool scoped : {false, true}) {
      auto g = chain(scoped);
      const std::vector<float> x = testing::random_floats(testing::kChainWidth, 4);
      for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel})
        for (bool jit : {false, true})
          for (bool trace : {false, true}) {
            if (jit && m == ExecutionMode::kEager) continue;
            const auto want = run(*spread, *g, options(m, jit, trace), x);
            ASSERT_TRUE(want.second.is_ok()) << want.second.to_string();
            const int64_t before = one->one_thread_launches();
            const auto got = run(*one, *g, options(m, jit, trace), x);
            ASSERT_TRUE(got.second.is_ok()) << got.second.to_string();
            EXPECT_EQ(got.first, want.first) << execution_mode_name(m) << " jit=" << jit << " trace=" << trace
                                             << " cores=" << cores << " scoped=" << scoped;
            EXPECT_GT(one->one_thread_launches(), before) << "the launches did not run on one thread";
          }
    }
    EXPECT_EQ(spread->one_thread_launches(), 0);
  }
}

TEST(LoadPolicy, TracedRunOnOneThreadRecordsEveryCoresInstructions) {
  auto spread = testing::make_runtime(2, 60.0, 0, LoadPolicy::kStatic);
  auto one = testing::make_runtime(2, 60.0, 0, LoadPolicy::kOneThread);
  auto g = chain(true);
  auto count = [&](Runtime& rt) {
    auto exe = rt.compile(*g, options(ExecutionMode::kSuperKernel, false, true));
    EXPECT_TRUE(exe);
    EXPECT_TRUE((*exe)->set_input("x", testing::random_floats(testing::kChainWidth, 4)).is_ok());
    EXPECT_TRUE((*exe)->run().is_ok());
    std::map<std::pair<int, int>, int> per_core_kind;
    for (const TraceEvent& e : (*exe)->trace()) {
      ++per_core_kind[{e.core, static_cast<int>(e.kind)}];
      EXPECT_LE(e.start_ns, e.end_ns) << e.op;
    }
    return per_core_kind;
  };
  const auto want = count(*spread);
  EXPECT_EQ(count(*one), want) << "the same events per core and kind";
  EXPECT_GT(want.size(), 2u);
}

std::vector<uint8_t> fail_on(int32_t core) {
  std::vector<uint8_t> attrs(4);
  std::memcpy(attrs.data(), &core, 4);
  return attrs;
}

TEST(LoadPolicy, AFailingKernelGivesTheSameErrorOnOneThread) {
  auto spread = testing::make_runtime(2, 60.0, 0, LoadPolicy::kStatic);
  auto one = testing::make_runtime(2, 60.0, 0, LoadPolicy::kOneThread);
  for (int32_t failing_core : {0, 1}) {
    Graph g;
    Tensor t = g.input("x", DType::kF32, {512});
    {
      SuperKernelScope s(g, "s");
      t = add1(g, t);
      t = call_kernel(g, "test.fail.f32", {t}, {{DType::kF32, {512}, ""}}, fail_on(failing_core), "fails")[0];
      t = add1(g, t, "after");
    }
    g.output(t, "y");
    for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel})
      for (bool jit : {false, true}) {
        if (jit && m == ExecutionMode::kEager) continue;
        const Status want = run(*spread, g, options(m, jit), std::vector<float>(512, 0.0f)).second;
        const Status got = run(*one, g, options(m, jit), std::vector<float>(512, 0.0f)).second;
        ASSERT_FALSE(want.is_ok());
        EXPECT_EQ(got.code(), want.code()) << got.to_string();
        EXPECT_EQ(got.message(), want.message()) << execution_mode_name(m) << " jit=" << jit;
        EXPECT_NE(got.message().find("core " + std::to_string(failing_core)), std::string::npos) << got.message();
      }
  }
}

TEST(LoadPolicy, KernelsThatSyncTheirCoresRunWithoutSyncCoresOnOneThreadAndGiveTheSameBits) {
  // SK_SYNCS_CORES kernels get no sync_cores on one thread (the ABI's "cores run one at a time")
  // and do without: test.reverse_cores.f32 reads x directly, sample.f32 on rows shared by the
  // cores (batch 1 < 2 cores) lets core 0 sample them alone.
  auto one = testing::make_runtime(2, 60.0, 0, LoadPolicy::kOneThread);
  auto spread = testing::make_runtime(2, 60.0, 0, LoadPolicy::kStatic);
  const int64_t vocab = 5000;
  for (bool sample : {false, true}) {
    Graph g;
    Tensor x = g.input("x", DType::kF32, {1, vocab});
    Tensor t;
    {
      SuperKernelScope scope(g, "s");
      t = add1(g, x);
      if (sample) {
        const sk_sample_attrs a{42, 0.9f, 0.8f, 0, 0};
        std::vector<uint8_t> blob(sizeof a);
        std::memcpy(blob.data(), &a, sizeof a);
        const int64_t step_value = 3;
        Tensor step = g.constant("step", DType::kI64, {1}, &step_value, sizeof step_value);
        t = call_kernel(g, "sample.f32", {t, step}, {{DType::kI32, {1}, ""}}, blob, "sample")[0];
      } else {
        t = call_kernel(g, "test.reverse_cores.f32", {t}, {{DType::kF32, {1, vocab}, ""}}, {}, "reverse")[0];
      }
    }
    g.output(t, "y");
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const std::vector<float> xs = testing::random_floats(vocab, seed, -4.0f, 4.0f);
      for (ExecutionMode m : {ExecutionMode::kEager, ExecutionMode::kSuperKernel})
        for (bool jit : {false, true}) {
          if (jit && m == ExecutionMode::kEager) continue;
          auto bytes = [&](Runtime& rt) {
            auto exe = rt.compile(g, options(m, jit));
            EXPECT_TRUE(exe) << exe.status().to_string();
            EXPECT_TRUE((*exe)->set_input("x", xs).is_ok());
            const Status st = (*exe)->run();
            EXPECT_TRUE(st.is_ok()) << st.to_string();
            auto out = (*exe)->tensor("y");
            std::vector<uint8_t> b(out->bytes());
            EXPECT_TRUE((*exe)->read("y", b.data(), b.size()).is_ok());
            return b;
          };
          const int64_t before = one->one_thread_launches();
          EXPECT_EQ(bytes(*one), bytes(*spread))
              << "sample=" << sample << " seed " << seed << " " << execution_mode_name(m) << " jit=" << jit;
          EXPECT_GT(one->one_thread_launches(), before);
        }
    }
  }
}

TEST(LoadPolicy, LaunchesWithAKernelThatSyncsAllCoresKeepOneThreadPerCore) {
  // test.reverse_sync.f32 declares SK_USES_SYNC_ALL: its launch never runs on one thread.
  auto one = testing::make_runtime(2, 60.0, 0, LoadPolicy::kOneThread);
  auto spread = testing::make_runtime(2, 60.0, 0, LoadPolicy::kStatic);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {512});
  t = call_kernel(g, "test.reverse_sync.f32", {t}, {{DType::kF32, {512}, ""}}, {}, "reverse")[0];
  g.output(t, "y");
  const std::vector<float> x = testing::random_floats(512, 7);
  for (bool jit : {false, true}) {
    const int64_t before = one->one_thread_launches();
    const auto got = run(*one, g, options(ExecutionMode::kGraph, jit), x);
    ASSERT_TRUE(got.second.is_ok()) << got.second.to_string();
    EXPECT_EQ(got.first, run(*spread, g, options(ExecutionMode::kGraph, jit), x).first);
    EXPECT_EQ(one->one_thread_launches(), before) << "jit=" << jit;
  }
}

TEST(LoadPolicy, AKernelCallingAnUndeclaredSyncAllOnOneThreadIsAnErrorNamingIt) {
  // test.hang.f32 calls sync_all on core 0 without declaring it: one thread per core, the
  // watchdog reports the deadlock; on one thread the call is refused at once, naming the kernel.
  auto one = testing::make_runtime(2, /*watchdog_seconds=*/60.0, 0, LoadPolicy::kOneThread);
  Graph g;
  Tensor t = g.input("x", DType::kF32, {64});
  {
    SuperKernelScope s(g, "s");
    t = call_kernel(g, "test.hang.f32", {add1(g, t)}, {{DType::kF32, {64}, ""}}, {}, "stuck")[0];
  }
  g.output(t, "y");
  for (bool jit : {false, true}) {
    const Status s = run(*one, g, options(ExecutionMode::kSuperKernel, jit), std::vector<float>(64, 0.0f)).second;
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::kKernelError) << s.to_string();
    EXPECT_NE(s.message().find("test.hang.f32"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("SK_USES_SYNC_ALL"), std::string::npos) << s.message();
  }
}

// The adaptive policy on a real scheduler: a thread of this process spinning on the CPU of core 1
// makes the launches move to one thread; once it stops, they spread again. The bounds are
// generous (10 s each way, against windows of 4 and 16-80 ms): the test checks what happens, not
// how fast.
bool pin_self_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

TEST(LoadPolicy, AdaptiveLeavesACpuAnotherThreadHoldsAndComesBackOnceItIsFree) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &allowed)) cpus.push_back(i);
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs";
  if (!std::ifstream("/proc/thread-self/schedstat")) GTEST_SKIP() << "no schedstat in this kernel";

  RuntimeOptions ro;
  ro.num_cores = 2;
  ro.load_policy = LoadPolicy::kAdaptive;
  ro.kernel_packages = {SK_TEST_KERNELS_PATH};
  auto rt = Runtime::create(ro);
  ASSERT_TRUE(rt) << rt.status().to_string();
  auto g = chain(true);
  auto exe = (*rt)->compile(*g, options(ExecutionMode::kSuperKernel, false));
  ASSERT_TRUE(exe) << exe.status().to_string();
  ASSERT_TRUE((*exe)->set_input("x", testing::random_floats(testing::kChainWidth, 4)).is_ok());
  ASSERT_TRUE((*exe)->run().is_ok());
  const std::vector<float> want = (*exe)->output_f32("y");
  ASSERT_EQ((*rt)->one_thread_launches(), 0) << "moved before any load";

  std::atomic<bool> stop{false}, pinned{false}, pin_ok{false};
  std::thread hog([&] {
    pin_ok = pin_self_to(cpus[1]);  // the CPU the runtime pinned core 1's worker to
    pinned = true;
    volatile uint64_t x = 1;
    while (!stop.load(std::memory_order_relaxed)) x = x * 6364136223846793005ull + 1;
  });
  while (!pinned) std::this_thread::yield();
  auto run_until = [&](auto done) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < end) {
      if (!(*exe)->run().is_ok() || (*exe)->output_f32("y") != want) return false;
    }
    return done();
  };
  const bool moved = pin_ok && run_until([&] { return (*rt)->one_thread_launches() > 0; });
  stop = true;
  hog.join();
  if (!pin_ok) GTEST_SKIP() << "cannot pin to CPU " << cpus[1];
  EXPECT_TRUE(moved) << "the launches never left the CPU the other thread held";
  // Back: 200 runs in a row without a launch on one thread.
  int64_t last = -1;
  int calm = 0;
  const bool back = run_until([&] {
    const int64_t now = (*rt)->one_thread_launches();
    calm = now == last ? calm + 1 : 0;
    last = now;
    return calm >= 200;
  });
  EXPECT_TRUE(back) << "the launches stayed on one thread after the load stopped";
  EXPECT_EQ((*exe)->output_f32("y"), want);
}

}  // namespace
}  // namespace sk
