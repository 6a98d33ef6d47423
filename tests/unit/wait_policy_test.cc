// The wait policy (sync.h): a spinning waiter stops spinning when its producer is off its CPU or
// when its own CPU is shared, and neither rule can lose a value, an abort or the watchdog.
//
// No timing assertions: the spin budgets here are an hour, so "the waiter went to sleep" (seen as
// the counter's sleepers field) can only come from the policy, never from the budget running out.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/cpu/device.h"
#include "runtime/cpu/sync.h"

namespace sk::cpu {
namespace {

constexpr int64_t kHourNs = 3600LL * 1'000'000'000;

// A thread that sets its clock and then blocks (off its CPU) until released.
class BlockedProducer {
 public:
  BlockedProducer() {
    thread_ = std::thread([this] {
      clock_.set_to_current_thread();
      std::unique_lock<std::mutex> lock(mu_);
      ready_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_; });
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return ready_; });
  }
  ~BlockedProducer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  const ThreadClock* clock() const { return &clock_; }

 private:
  ThreadClock clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  bool released_ = false;
  std::thread thread_;
};

// Waits (without a deadline: a policy that spins out its hour-long budget hangs the test, which
// the test's timeout reports) until someone sleeps on `c`.
void wait_for_a_sleeper(const Counter& c) {
  while (c.sleepers.load(std::memory_order_seq_cst) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(WaitPolicy, JudgeSpinRules) {
  const SpinProbe from{1'000'000, 500'000, 700'000};
  // Both ran the whole 20 us interval: keep spinning.
  EXPECT_EQ(judge_spin(from, {1'020'000, 520'000, 720'000}), SpinVerdict::kKeepSpinning);
  // Exactly half counts as running.
  EXPECT_EQ(judge_spin(from, {1'020'000, 510'000, 710'000}), SpinVerdict::kKeepSpinning);
  // The producer ran 2 us of 20: off its CPU.
  EXPECT_EQ(judge_spin(from, {1'020'000, 502'000, 720'000}), SpinVerdict::kProducerOff);
  // The waiter ran 2 us of 20: its CPU is shared, whatever the producer did.
  EXPECT_EQ(judge_spin(from, {1'020'000, 520'000, 702'000}), SpinVerdict::kWaiterPreempted);
  EXPECT_EQ(judge_spin(from, {1'020'000, 500'000, 700'000}), SpinVerdict::kWaiterPreempted);
  // Unknown clocks (-1) decide nothing.
  EXPECT_EQ(judge_spin({1'000'000, -1, -1}, {1'020'000, -1, -1}), SpinVerdict::kKeepSpinning);
  EXPECT_EQ(judge_spin({1'000'000, -1, 700'000}, {1'020'000, 500'000, 720'000}), SpinVerdict::kKeepSpinning);
  EXPECT_EQ(judge_spin({1'000'000, 500'000, 700'000}, {1'020'000, -1, 720'000}), SpinVerdict::kKeepSpinning);
  // No wall time passed: nothing to judge.
  EXPECT_EQ(judge_spin(from, from), SpinVerdict::kKeepSpinning);
}

TEST(WaitPolicy, ThreadClockKnowsOnlyLiveThreads) {
  ThreadClock never_set;
  EXPECT_EQ(never_set.cpu_ns(), -1);
  ThreadClock clock;
  int64_t used = -1;
  std::thread t([&] {
    clock.set_to_current_thread();
    used = clock.cpu_ns();
  });
  t.join();
  EXPECT_GE(used, 0);
  // The thread has exited: its clock is gone, and the policy ignores it.
  EXPECT_EQ(clock.cpu_ns(), -1);
  EXPECT_GE(current_thread_cpu_ns(), 0);
}

TEST(WaitPolicy, WaiterWhoseProducerIsOffCpuSleepsInsteadOfSpinningItsBudget) {
  BlockedProducer producer;
  Counter c;
  WaitControl ctl;
  ctl.spin_ns = kHourNs;
  WaitResult result = WaitResult::kAborted;
  std::thread waiter([&] { result = wait_at_least(c, tag(1, 1), ctl, producer.clock()); });
  wait_for_a_sleeper(c);
  publish(c, tag(1, 1));  // the sleeper is woken by the publish, as from a real producer
  waiter.join();
  EXPECT_EQ(result, WaitResult::kReached);
}

TEST(WaitPolicy, WatchdogAndAbortStillEndAWaitOnAnOffCpuProducer) {
  BlockedProducer producer;
  Counter c;
  std::atomic<uint32_t> abort{0};
  WaitControl ctl;
  ctl.abort = &abort;
  ctl.spin_ns = kHourNs;
  ctl.watchdog_ns = 20'000'000;  // 20 ms
  EXPECT_EQ(wait_at_least(c, tag(1, 1), ctl, producer.clock()), WaitResult::kTimedOut);
  ctl.watchdog_ns = 0;
  WaitResult result = WaitResult::kReached;
  std::thread waiter([&] { result = wait_at_least(c, tag(1, 1), ctl, producer.clock()); });
  wait_for_a_sleeper(c);
  abort.store(1);
  futex_wake_all(c);
  waiter.join();
  EXPECT_EQ(result, WaitResult::kAborted);
}

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

int first_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) return i;
  return -1;
}

TEST(WaitPolicy, WaiterOnASharedCpuSleepsAndThenSpinsLess) {
  // A busy thread and the waiter pinned to the same CPU: the scheduler takes the CPU from the
  // spinning waiter for a time slice, which its own clock shows. No producer clock: only the
  // waiter's own rule can put it to sleep.
  const int cpu = first_allowed_cpu();
  if (cpu < 0) GTEST_SKIP() << "cannot read the CPU affinity";
  std::atomic<bool> stop{false};
  std::atomic<bool> hog_pinned{false};
  std::atomic<bool> hog_ok{true};
  std::thread hog([&] {
    hog_ok = pin_to(cpu);
    hog_pinned = true;
    volatile uint64_t x = 1;
    while (!stop.load(std::memory_order_relaxed)) x = x * 6364136223846793005ull + 1;
  });
  while (!hog_pinned) std::this_thread::yield();
  if (!hog_ok) {
    stop = true;
    hog.join();
    GTEST_SKIP() << "cannot pin to CPU " << cpu;
  }
  Counter c;
  WaitControl ctl;
  ctl.spin_ns = kHourNs;
  WaitResult result = WaitResult::kAborted;
  int64_t budget_before = -1, budget_after = -1;
  std::thread waiter([&] {
    if (!pin_to(cpu)) return;
    reset_shared_core_state();
    const int64_t start = now_ns();
    budget_before = spin_budget_ns(ctl, start);
    result = wait_at_least(c, tag(1, 1), ctl);
    // Asked for the same instant: the wait marked the CPU shared from some time after `start` for
    // the hold, so the budget at `start` is now the short one, however long the wait lasted.
    budget_after = spin_budget_ns(ctl, start);
    reset_shared_core_state();
  });
  wait_for_a_sleeper(c);
  publish(c, tag(1, 1));
  waiter.join();
  stop = true;
  hog.join();
  EXPECT_EQ(result, WaitResult::kReached);
  EXPECT_EQ(budget_before, kHourNs);
  EXPECT_LT(budget_after, kHourNs) << "the wait did not mark its CPU as shared";
}

TEST(WaitPolicy, PingPongWithBlockingProducersNeverLosesAValue) {
  // Two threads hand a token back and forth; each sometimes blocks before answering, so the other
  // sees its producer off the CPU and sleeps. Every value arrives (no lost wake-up, no deadlock).
  Counter ping, pong;
  ThreadClock ping_clock, pong_clock;
  WaitControl ctl;
  ctl.spin_ns = kHourNs;
  ctl.watchdog_ns = 0;
  constexpr uint32_t kRounds = 300;
  std::atomic<int> failures{0};
  std::thread other([&] {
    pong_clock.set_to_current_thread();
    for (uint32_t i = 1; i <= kRounds; ++i) {
      if (wait_at_least(ping, tag(2, i), ctl, &ping_clock) != WaitResult::kReached) failures++;
      if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      publish(pong, tag(2, i));
    }
  });
  ping_clock.set_to_current_thread();
  for (uint32_t i = 1; i <= kRounds; ++i) {
    if (i % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    publish(ping, tag(2, i));
    if (wait_at_least(pong, tag(2, i), ctl, &pong_clock) != WaitResult::kReached) failures++;
  }
  other.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(WaitPolicy, DeviceLaunchesFinishWhenCoresShareOneCpu) {
  // Three cores on one CPU: the launching thread is confined to one CPU and the pool's unpinned
  // workers inherit that, so every wait's producer is often off the CPU.
  const int cpu = first_allowed_cpu();
  if (cpu < 0) GTEST_SKIP() << "cannot read the CPU affinity";
  std::atomic<int> ran{0};
  bool pinned = false, created = false;
  std::thread caller([&] {
    if (!(pinned = pin_to(cpu))) return;
    CpuDeviceOptions o;
    o.num_cores = 3;
    o.allow_oversubscribe = true;
    o.pin_threads = false;
    o.spin_us = 3'600'000'000LL;  // an hour: only the policy can make these waits sleep early
    auto dev = CpuDevice::create(o);
    if (!(created = dev.has_value())) return;
    for (int rep = 0; rep < 200; ++rep)
      (*dev)->launch(
          3, [](void* raw, int) { static_cast<std::atomic<int>*>(raw)->fetch_add(1); }, &ran);
  });
  caller.join();
  if (!pinned) GTEST_SKIP() << "cannot pin to CPU " << cpu;
  ASSERT_TRUE(created);
  EXPECT_EQ(ran.load(), 600);
}

}  // namespace
}  // namespace sk::cpu
