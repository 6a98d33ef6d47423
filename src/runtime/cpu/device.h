// The CPU device: a pool of persistent worker threads, pinned one per core, plus the calling
// thread, which is core 0 of every launch.
//
//   auto dev = sk::cpu::CpuDevice::create({.num_cores = 2});
//   (*dev)->launch(2, [](void* ctx, int core) { ... }, &state);   // returns when both are done
#ifndef SUPERKERNEL_RUNTIME_CPU_DEVICE_H_
#define SUPERKERNEL_RUNTIME_CPU_DEVICE_H_

#include <sched.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "program/program.h"
#include "runtime/cpu/chunk_helper.h"
#include "runtime/cpu/load_monitor.h"
#include "runtime/cpu/sync.h"
#include "superkernel/load_policy.h"
#include "superkernel/status.h"

namespace sk::cpu {

struct CpuDeviceOptions {
  int num_cores = 0;   // 0: every CPU in the process's affinity mask
  int cube_cores = 0;  // size of the cube group (cores [0, cube_cores)); 0: no split
  bool pin_threads = true;
  bool pin_caller = true;                          // also pin the launching thread to the first CPU
  bool allow_oversubscribe = false;                // tests only: more cores than CPUs
  int64_t spin_us = 200;                           // longest spin before sleeping (wait policy: sync.h)
  double watchdog_seconds = 30.0;                  // a wait longer than this is reported as a deadlock
  LoadPolicy load_policy = LoadPolicy::kAdaptive;  // where launches run when CPUs are loaded
  // While launches run on one thread, the other core's thread takes chunks of about this many
  // bytes read of their large calls (chunk_helper.h); 0: that thread stays idle.
  int64_t chunk_bytes = 256 << 10;
  // Where the adaptive policy's monitor reads its counters; empty: the kernel's. Tests give a
  // script, so that what they check does not depend on what else the machine runs.
  LoadCountersFactory load_counters;
};

class CpuDevice {
 public:
  using CoreFn = void (*)(void* ctx, int core);
  static constexpr int kMaxBarrierGroups = sk::kMaxBarrierGroups;

  static Expected<std::unique_ptr<CpuDevice>> create(const CpuDeviceOptions& options);
  ~CpuDevice();
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  int num_cores() const { return num_cores_; }
  int cube_cores() const { return options_.cube_cores; }
  const CpuDeviceOptions& options() const { return options_; }
  const std::vector<int>& cpus() const { return cpus_; }

  // Runs fn(ctx, c) for every core c in [0, n): the caller runs core 0, workers 1..n-1. Returns
  // when all have returned. Launches are serialised; the returned epoch tags this launch's sync
  // values (see sync.h) and is passed to fn through `current_epoch()`. When `all_cores` is given
  // and the load policy (load_monitor.h) puts the launch on one thread, all_cores(ctx, 0) runs on
  // the calling thread instead and must run every core.
  void launch(int n, CoreFn fn, void* ctx, CoreFn all_cores = nullptr);
  // Launches that ran on one thread (read from any thread).
  int64_t one_thread_launches() const { return one_thread_launches_.load(std::memory_order_relaxed); }
  // The helper that takes chunks of the current launch's calls, while a launch runs on one thread
  // with one; null otherwise. Only for the thread running that launch.
  ChunkHelper* chunk_helper() { return helping_ ? &helper_ : nullptr; }
  // Calls shared with the helper (read from any thread).
  int64_t shared_calls() const { return helper_.shared_calls(); }
  // Blocks until the helper is in no chunk of a past launch: call before freeing what launches
  // read (a plan's arguments, attributes and weights).
  void wait_helper_idle() const { helper_.wait_idle(); }
  uint64_t current_epoch() const { return epoch_; }

  // Sync counters owned by the device so that epoch tagging carries across launches.
  Counter& progress(int core) { return progress_[core]; }
  Counter& barrier(int group, int core) { return barriers_[group * num_cores_ + core]; }
  WaitControl wait_control(const std::atomic<uint32_t>* abort) const;
  // The CPU-time clock of the thread that runs `core` (the launching thread for core 0), for the
  // wait policy in sync.h.
  const ThreadClock* thread_clock(int core) const { return &thread_clocks_[core]; }

 private:
  explicit CpuDevice(const CpuDeviceOptions& options);
  void worker_main(int core);
  // The helper on worker 1, pinned to CPU index `cpu_index`; started by the launching thread.
  void start_helper(int cpu_index);
  void stop_helper();
  void pin_current_thread(int cpu_index);

  struct alignas(kSyncAlign) Slot {
    CoreFn fn = nullptr;
    void* ctx = nullptr;
  };

  CpuDeviceOptions options_;
  int num_cores_ = 1;
  std::vector<int> cpus_;
  std::unique_ptr<Counter[]> mailbox_;  // launch sequence per worker (written by the launcher)
  std::unique_ptr<Counter[]> done_;     // last finished sequence per worker
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<Counter[]> progress_;           // point-to-point signals, one per core
  std::unique_ptr<Counter[]> barriers_;           // kMaxBarrierGroups x num_cores
  std::unique_ptr<ThreadClock[]> thread_clocks_;  // one per core
  std::unique_ptr<LoadMonitor> monitor_;          // LoadPolicy::kAdaptive only
  int caller_cpu_index_ = 0;                      // the CPU the launching thread is pinned to (index into cpus_)
  std::atomic<int64_t> one_thread_launches_{0};
  ChunkHelper helper_;
  bool helping_ = false;              // the current launch runs on one thread with the helper
  int helper_cpu_index_ = -1;         // the helper runs (on worker 1, this CPU); -1: it does not
  uint64_t helper_seq_ = 0;           // the mailbox sequence that started it
  std::thread::id clocked_caller_{};  // the thread whose clock is core 0's
  std::vector<std::thread> workers_;
  std::mutex launch_mu_;
  uint64_t seq_ = 0;
  uint64_t epoch_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread::id pinned_caller_{};
  bool caller_pinned_ = false;  // caller_mask_ holds the first pinned caller's original CPUs
  cpu_set_t caller_mask_{};
};

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_DEVICE_H_
