// The load policy (RuntimeOptions::load_policy, src/runtime/cpu/load_monitor.h): the monitor's
// rules; a launch run on one thread, its cores interleaved, gives the same outputs and errors as
// one thread per core in every mode and backend; what keeps a launch off one thread; and the
// adaptive policy following a scripted load from CPU to CPU and spreading again once it is gone.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "common/chain_graph.h"
#include "common/test_runtime.h"
#include "runtime/cpu/device.h"
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

// The adaptive policy end to end on a device whose monitor reads a script instead of the kernel's
// counters, so that what the test checks holds whatever else the machine runs. The script plays,
// as rates per unit of wall time, what the kernel shows when another process holds a CPU:
//   quiet       both threads run all the time they want;
//   cpu1_held   core 1's thread waits half the time for its CPU;
//   cpu0_held   the launching thread (on one thread, on CPU 0) waits half the time; CPU 1 is free
//               but for the chunk helper;
//   gone        nobody waits, and both CPUs are free but for what we run.
// The launches must stay spread, move to one thread on the CPU of the thread that waited least,
// move on to the other CPU when the load follows them there, and spread again once it is gone.
enum class Scene { kQuiet, kCpu1Held, kCpu0Held, kGone };

struct Rates {
  double cpu[2], delay[2], idle[2];  // per thread (core), per CPU (index into the device's)
};

Rates rates_of(Scene s) {
  switch (s) {
    case Scene::kQuiet:
      return {{1, 1}, {0, 0}, {0, 0}};
    case Scene::kCpu1Held:
      return {{1, 0.5}, {0, 0.5}, {0, 0}};
    case Scene::kCpu0Held:
      return {{0.5, 0.05}, {0.5, 0}, {0, 0.9}};
    case Scene::kGone:
      return {{1, 0.05}, {0, 0}, {0.9, 0.9}};
  }
  return {};
}

class ScriptedCounters final : public cpu::LoadCounters {
 public:
  explicit ScriptedCounters(const std::atomic<Scene>* scene) : scene_(scene), last_(now()) {}
  void set_thread(int, pid_t) override {}
  cpu::SchedSample thread(int core) override {
    advance();
    return {static_cast<int64_t>(cpu_[core]), static_cast<int64_t>(delay_[core])};
  }
  int64_t idle_ns(int except) override {
    advance();
    return static_cast<int64_t>(idle_[1 - except]);
  }
  bool fine_idle() const override { return true; }

 private:
  static double now() {
    return static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }
  // The counters grow by the scene's rates over the wall time since the last read.
  void advance() {
    const double t = now(), dt = t - last_;
    last_ = t;
    const Rates r = rates_of(scene_->load(std::memory_order_relaxed));
    for (int i = 0; i < 2; ++i) {
      cpu_[i] += r.cpu[i] * dt;
      delay_[i] += r.delay[i] * dt;
      idle_[i] += r.idle[i] * dt;
    }
  }

  const std::atomic<Scene>* scene_;
  double last_;
  double cpu_[2] = {}, delay_[2] = {}, idle_[2] = {};
};

bool pin_self_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

struct Launches {
  std::atomic<int> ran[2] = {0, 0};
  std::atomic<int> solo_cpu{-1};  // the CPU the last one-thread launch ran on
};

TEST(LoadPolicy, AdaptiveFollowsTheLoadOnEitherCpuAndSpreadsOnceItIsGone) {
  std::atomic<Scene> scene{Scene::kQuiet};
  cpu::CpuDeviceOptions o;
  o.num_cores = 2;
  o.load_policy = LoadPolicy::kAdaptive;
  o.chunk_bytes = 0;  // no helper: the launches here have no calls to share
  o.load_counters = [&scene](const std::vector<int>&) { return std::make_unique<ScriptedCounters>(&scene); };
  auto dev = cpu::CpuDevice::create(o);
  if (!dev) GTEST_SKIP() << "needs 2 CPUs: " << dev.status().to_string();
  cpu::CpuDevice& d = **dev;
  const std::vector<int>& cpus = d.cpus();
  ASSERT_GE(cpus.size(), 2u);
  // Whether the device can pin threads here (a container may forbid it): only then does the CPU a
  // launch ran on say anything.
  cpu_set_t mine;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine), 0);
  const bool can_pin = pin_self_to(cpus[0]);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine), 0);

  Launches l;
  auto launch = [&] {
    d.launch(
        2, [](void* p, int core) { static_cast<Launches*>(p)->ran[core].fetch_add(1); }, &l,
        [](void* p, int) {
          auto* s = static_cast<Launches*>(p);
          s->ran[0].fetch_add(1);
          s->ran[1].fetch_add(1);
          s->solo_cpu.store(sched_getcpu());
        });
  };
  // Launches until done() (at most 60 s of wall time: a broken monitor fails the test instead of
  // hanging it; the windows are milliseconds).
  auto launch_until = [&](auto done) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done() && std::chrono::steady_clock::now() < end) {
      launch();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return done();
  };
  // Quiet: several windows (4 ms each) and no move.
  const auto quiet_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(40);
  launch_until([&] { return std::chrono::steady_clock::now() >= quiet_until; });
  EXPECT_EQ(d.one_thread_launches(), 0) << "moved without a load";

  scene = Scene::kCpu1Held;
  ASSERT_TRUE(launch_until([&] { return d.one_thread_launches() > 0; }))
      << "the launches never left the CPU the other process held";
  if (can_pin) {
    EXPECT_EQ(l.solo_cpu.load(), cpus[0]) << "one thread, but not on the free CPU";
  }

  scene = Scene::kCpu0Held;
  if (can_pin) {
    EXPECT_TRUE(launch_until([&] { return l.solo_cpu.load() == cpus[1]; }))
        << "the launches stayed on the CPU the load moved to";
  }

  scene = Scene::kGone;
  int64_t last = -1;
  int calm = 0;
  EXPECT_TRUE(launch_until([&] {
    const int64_t now = d.one_thread_launches();
    calm = now == last ? calm + 1 : 0;
    last = now;
    return calm >= 200;
  })) << "the launches stayed on one thread after the load was gone";
  EXPECT_EQ(l.ran[0].load(), l.ran[1].load()) << "every launch ran both cores";
}

}  // namespace
}  // namespace sk
