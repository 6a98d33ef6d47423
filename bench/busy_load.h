// A co-located load for the benchmarks (sk_bench_dispatch --contend, superkernel bench --contend):
// one other busy process, a child that spins on integer arithmetic until it is stopped, either
// unpinned (free on every CPU this process may use, so the scheduler places it and moves it) or
// pinned to one CPU. A benchmark starts it, times its rounds, and stops it, so the load exists
// exactly while the loaded rounds run.
//
//   sk::bench::BusyLoad load(sk::bench::LoadPlacement::kPinned, /*pinned_cpu=*/1);
//   if (!load.running()) ... load.error() says why
//   ... time ...
//   load.stop();  // also done by the destructor
//
// The child stays in the benchmark's session, so under autogroup scheduling (the Linux default
// on desktop kernels) it is scheduled thread against thread with the benchmark's threads, as a
// busy process of the same session or of a server without autogroup is; docs/PERFORMANCE.md
// ("Under a co-located load") says what a busy process of another session does.
#ifndef SUPERKERNEL_BENCH_BUSY_LOAD_H_
#define SUPERKERNEL_BENCH_BUSY_LOAD_H_

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sk::bench {

// Under a load, timed rounds last at least this long, so that a median spans many of the
// scheduler's slices (milliseconds each), and start after kSettleSeconds of untimed rounds (the
// scheduler and the runtime's load policy take milliseconds to see a load come or go).
inline constexpr double kContendSeconds = 0.25;
inline constexpr double kSettleSeconds = 0.05;

// kAfter: quiet again, after the loads stopped (the runtime's load policy must notice they left).
enum class LoadPlacement { kNone, kUnpinned, kPinned, kAfter };

inline const char* load_placement_name(LoadPlacement p) {
  switch (p) {
    case LoadPlacement::kNone:
      return "quiet";
    case LoadPlacement::kUnpinned:
      return "unpinned";
    case LoadPlacement::kPinned:
      return "pinned";
    case LoadPlacement::kAfter:
      return "after";
  }
  return "?";
}

class BusyLoad {
 public:
  // kUnpinned: the child may run on any of `cpus` (normally every CPU the process may use);
  // kPinned: on `pinned_cpu` only. kNone starts nothing.
  BusyLoad(LoadPlacement placement, int pinned_cpu, const std::vector<int>& cpus = {}) {
    if (placement == LoadPlacement::kNone || placement == LoadPlacement::kAfter) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (placement == LoadPlacement::kPinned) {
      CPU_SET(pinned_cpu, &set);
    } else {
      for (int c : cpus) CPU_SET(c, &set);
      // The caller may be pinned (a runtime pins its launching thread): widen to the process's CPUs.
      if (cpus.empty() && sched_getaffinity(0, sizeof(set), &set) != 0) CPU_SET(0, &set);
    }
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      error_ = std::string("fork: ") + std::strerror(errno);
      pid_ = 0;
      return;
    }
    if (pid_ == 0) {
      // Only async-signal-safe calls here: the parent has other threads.
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
      if (getppid() != parent) _exit(0);
      if (sched_setaffinity(0, sizeof(set), &set) != 0) _exit(3);
      volatile uint64_t x = 1;
      for (;;) x = x * 6364136223846793005ull + 1442695040888963407ull;
    }
  }
  ~BusyLoad() { stop(); }
  BusyLoad(const BusyLoad&) = delete;
  BusyLoad& operator=(const BusyLoad&) = delete;

  bool running() const { return pid_ > 0; }
  const std::string& error() const { return error_; }

  // Stops the child; true when it was running until now (it did not die on its own, e.g. because
  // its affinity was refused).
  bool stop() {
    if (pid_ <= 0) return false;
    int status = 0;
    const bool alive = waitpid(pid_, &status, WNOHANG) == 0;
    if (alive) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = 0;
    return alive;
  }

 private:
  pid_t pid_ = 0;
  std::string error_;
};

}  // namespace sk::bench

#endif  // SUPERKERNEL_BENCH_BUSY_LOAD_H_
