// The CPU device: launches, the caller as core 0, epoch-tagged sync, sleeping waits.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/cpu/device.h"

namespace sk::cpu {
namespace {

CpuDeviceOptions test_options(int cores) {
  CpuDeviceOptions o;
  o.num_cores = cores;
  o.allow_oversubscribe = true;  // tests use more cores than CI has CPUs
  o.pin_threads = false;
  o.spin_us = 50;
  return o;
}

TEST(CpuDevice, RejectsBadOptions) {
  CpuDeviceOptions o;
  o.num_cores = 1 << 20;
  auto d = CpuDevice::create(o);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.status().message().find("num_cores"), std::string::npos);
  o = test_options(2);
  o.cube_cores = 2;
  auto split = CpuDevice::create(o);
  ASSERT_FALSE(split.has_value());
  EXPECT_NE(split.status().message().find("cube_cores"), std::string::npos);
}

TEST(CpuDevice, CallerIsCoreZeroAndEveryCoreRuns) {
  auto dev = CpuDevice::create(test_options(4));
  ASSERT_TRUE(dev.has_value()) << dev.status().to_string();
  struct Ctx {
    std::thread::id caller;
    std::atomic<int> ran[4];
    std::atomic<bool> core0_on_caller{false};
  } ctx;
  ctx.caller = std::this_thread::get_id();
  for (auto& r : ctx.ran) r = 0;
  for (int rep = 0; rep < 100; ++rep) {
    (*dev)->launch(
        4,
        [](void* raw, int core) {
          auto* c = static_cast<Ctx*>(raw);
          c->ran[core].fetch_add(1);
          if (core == 0) c->core0_on_caller = std::this_thread::get_id() == c->caller;
        },
        &ctx);
  }
  for (auto& r : ctx.ran) EXPECT_EQ(r.load(), 100);
  EXPECT_TRUE(ctx.core0_on_caller.load());
}

TEST(CpuDevice, PartialLaunchesLeaveOtherWorkersIdle) {
  auto dev = CpuDevice::create(test_options(3));
  ASSERT_TRUE(dev.has_value());
  std::atomic<int> ran[3] = {0, 0, 0};
  for (int rep = 0; rep < 50; ++rep) {
    int n = 1 + rep % 3;
    (*dev)->launch(
        n, [](void* raw, int core) { static_cast<std::atomic<int>*>(raw)[core].fetch_add(1); }, ran);
  }
  // n cycles 1,2,3: core 0 runs every launch, core 1 in two of three, core 2 in one of three.
  EXPECT_EQ(ran[0].load(), 50);
  EXPECT_EQ(ran[1].load(), 33);
  EXPECT_EQ(ran[2].load(), 16);
}

TEST(Sync, PublishAndWaitAcrossThreadsWithSleeping) {
  Counter c;
  WaitControl ctl;
  ctl.spin_ns = 1000;  // force the futex path
  std::atomic<uint32_t> abort{0};
  ctl.abort = &abort;
  std::thread producer([&] {
    for (uint32_t i = 1; i <= 200; ++i) {
      if (i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      publish(c, tag(7, i));
    }
  });
  for (uint32_t i = 1; i <= 200; ++i) ASSERT_EQ(wait_at_least(c, tag(7, i), ctl), WaitResult::kReached);
  producer.join();
}

TEST(Sync, AbortAndWatchdogEndAWait) {
  Counter c;
  std::atomic<uint32_t> abort{0};
  WaitControl ctl;
  ctl.abort = &abort;
  ctl.spin_ns = 1000;
  ctl.watchdog_ns = 50'000'000;  // 50 ms
  EXPECT_EQ(wait_at_least(c, tag(1, 1), ctl), WaitResult::kTimedOut);
  ctl.watchdog_ns = 0;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    abort.store(1);
    futex_wake_all(c);
  });
  EXPECT_EQ(wait_at_least(c, tag(1, 1), ctl), WaitResult::kAborted);
  aborter.join();
}

TEST(Sync, OlderEpochsNeverSatisfyNewerTargets) {
  Counter c;
  publish(c, tag(3, 1000));
  WaitControl ctl;
  ctl.spin_ns = 1000;
  ctl.watchdog_ns = 5'000'000;
  EXPECT_EQ(wait_at_least(c, tag(4, 1), ctl), WaitResult::kTimedOut);
  publish(c, tag(4, 1));
  EXPECT_EQ(wait_at_least(c, tag(4, 1), ctl), WaitResult::kReached);
}

}  // namespace
}  // namespace sk::cpu
