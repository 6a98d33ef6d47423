// Where a launch should run, given what other processes do to the device's CPUs.
//
// A launch's cores synchronise every few microseconds, and the scheduler hands a CPU shared with
// a busy process to that process for whole slices (milliseconds). A core whose CPU is shared
// therefore stalls every other core at its next wait, for a slice at a time: no wait policy can
// hide that. What can: not using that CPU. On the machines this runtime targets first (2 cores),
// every launch then runs on the launching thread, moved to the free CPU, its cores' instruction
// streams interleaved (interpreter.h, run_interleaved): the one-core speed of the same program,
// with the same results, and no hand-over to another thread per launch.
//
// The monitor decides from two counters the kernel keeps:
//   - each thread's run delay (/proc/self/task/<tid>/schedstat: time runnable but not running).
//     While every core has its own thread, a thread that spent at least kLoadedShare of the time
//     it wanted to run waiting for its CPU, in kLoadedWindows windows in a row, means another
//     process holds that CPU: the launches move to the CPU of the thread that waited least.
//   - the idle time of the device's other CPUs (/sys/devices/system/cpu/cpuN/cpuidle, in
//     microseconds, or /proc/stat's 10 ms ticks where the kernel has no cpuidle). While one thread
//     runs everything, the others sleep and their run delay says nothing. Once the other CPUs
//     were idle for kIdleShare of a CPU over a window, either the load is gone (the launching
//     thread did not wait for its CPU: every core gets its thread back) or it sits on the
//     launching thread's CPU (it did wait: the launches move to the next CPU).
// Only two-core devices with pinned threads move launches: beyond two, one thread running every
// core is slower than a loaded core at half speed (docs/PERFORMANCE.md says what the general form
// would take), and without pinning a thread's CPU is not known.
//
// The counters come through LoadCounters: the kernel's (ProcLoadCounters) or, in tests, a script
// that plays a load whatever the machine is doing (CpuDeviceOptions::load_counters).
//
//   LoadMonitor m(cpus);                 // the CPU each core's thread is pinned to
//   m.set_thread(core, gettid());         // by each thread, once
//   int cpu = m.advise(now_ns());         // -1: every core on its own thread; else the index of
//                                         // the CPU the launching thread runs everything on
#ifndef SUPERKERNEL_RUNTIME_CPU_LOAD_MONITOR_H_
#define SUPERKERNEL_RUNTIME_CPU_LOAD_MONITOR_H_

#include <sys/types.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace sk::cpu {

// A thread's scheduler counters, ns.
struct SchedSample {
  int64_t cpu_ns = -1;    // time on its CPU
  int64_t delay_ns = -1;  // time runnable but waiting for its CPU
};

// The monitor's rules as a pure function of what it read over one window, for tests. `solo`: the
// index of the CPU the launching thread ran everything on over the window, -1 when every core had
// its own thread. Returns the same for the next window.
struct LoadWindow {
  std::vector<SchedSample> threads;  // the change over the window, per core's thread (-1: unknown)
  double idle_cpus = -1;             // solo only: the other CPUs' idle time over the window, in CPUs
  // Solo only: the time the other cores' threads ran over the window, in CPUs. They run on the
  // other CPUs then (the chunk helper, chunk_helper.h), so it is time those CPUs had for us.
  double helper_cpus = 0;
};
int judge_load(const LoadWindow& w, int solo);

// A thread counts as loaded when it waited for its CPU this share of the time it wanted to run.
inline constexpr double kLoadedShare = 0.2;
// A CPU counts as free when it was idle this share of a window.
inline constexpr double kIdleShare = 0.5;
// Windows: short while spread (a stall costs a slice per launch); while one thread runs
// everything, long enough for the idle counter's resolution (cpuidle: microseconds; /proc/stat:
// 10 ms ticks).
inline constexpr int64_t kSpreadWindowNs = 4'000'000;
inline constexpr int64_t kSoloWindowNs = 8'000'000;
inline constexpr int64_t kSoloWindowTicksNs = 80'000'000;
// A window whose threads wanted to run less than this says nothing about their CPUs.
inline constexpr int64_t kMinBusyNs = 500'000;
// Spread windows in a row that must find a loaded thread before the launches move to one thread.
inline constexpr int kLoadedWindows = 2;

// What the monitor reads: each core's thread's scheduler counters and the other CPUs' idle time.
// Called by one thread at a time (the monitor holds its lock).
class LoadCounters {
 public:
  virtual ~LoadCounters() = default;
  // `tid` now runs `core` (until the next call for that core).
  virtual void set_thread(int core, pid_t tid) = 0;
  // Core `core`'s thread's counters now; -1 fields when unknown.
  virtual SchedSample thread(int core) = 0;
  // Idle time so far of every CPU of the device but index `except`, ns; -1 when unknown.
  virtual int64_t idle_ns(int except) = 0;
  // Whether idle_ns() counts in microseconds (cpuidle) rather than 10 ms ticks: how long a window
  // on one thread must last for it to say anything.
  virtual bool fine_idle() const = 0;
};

// Makes the counters for a device whose cores' threads are pinned to `cpus`.
using LoadCountersFactory = std::function<std::unique_ptr<LoadCounters>(const std::vector<int>& cpus)>;

// The kernel's counters: /proc/self/task/<tid>/schedstat per thread; the idle time from
// /sys/devices/system/cpu/cpuN/cpuidle, or /proc/stat's ticks where the kernel has no cpuidle.
class ProcLoadCounters final : public LoadCounters {
 public:
  explicit ProcLoadCounters(std::vector<int> cpus);
  ~ProcLoadCounters() override;
  ProcLoadCounters(const ProcLoadCounters&) = delete;
  ProcLoadCounters& operator=(const ProcLoadCounters&) = delete;

  void set_thread(int core, pid_t tid) override;
  SchedSample thread(int core) override;
  int64_t idle_ns(int except) override;
  bool fine_idle() const override { return cpuidle_ == 1; }

 private:
  int64_t read_cpuidle_ns(int except);
  int64_t read_stat_idle_ns(int except);

  std::vector<int> cpus_;
  std::vector<int> fds_;  // /proc/self/task/<tid>/schedstat per thread, -1 when unknown
  int stat_fd_ = -1;      // /proc/stat
  std::vector<char> stat_buf_;
  int cpuidle_ = -1;                           // cpuidle readable: -1 not tried yet, 0 no, 1 yes
  std::vector<std::vector<int>> cpuidle_fds_;  // per CPU, every idle state's `time` file
};

class LoadMonitor {
 public:
  // `counters`: where the counters come from (null: the kernel's, ProcLoadCounters).
  explicit LoadMonitor(std::vector<int> cpus, std::unique_ptr<LoadCounters> counters = nullptr);
  LoadMonitor(const LoadMonitor&) = delete;
  LoadMonitor& operator=(const LoadMonitor&) = delete;

  // Called by the thread that runs `core` (again when another thread takes over core 0).
  void set_thread(int core, pid_t tid);
  // Where the next launch runs: -1, each core on its own thread; else the index (into `cpus`) of
  // the CPU the launching thread runs all of it on. Reads the counters at most once per window;
  // between windows it costs two relaxed loads. Called by one thread at a time (the device's
  // launches are serialised).
  int advise(int64_t now_ns);

 private:
  // advise() between windows reads only these two (no lock): the wall time of the next check
  // (INT64_MIN: at the next call, e.g. after set_thread) and the current advice.
  std::atomic<int64_t> next_check_ns_{INT64_MIN};
  std::atomic<int> advice_{-1};
  std::mutex mu_;  // the rest
  size_t num_threads_ = 0;
  std::unique_ptr<LoadCounters> counters_;
  int solo_ = -1;
  int loaded_windows_ = 0;  // spread windows in a row that judge_load found loaded
  int64_t window_start_ = -1;
  std::vector<SchedSample> at_start_;
  int64_t idle_at_start_ = -1;  // counters_->idle_ns() when the window started
};

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_LOAD_MONITOR_H_
