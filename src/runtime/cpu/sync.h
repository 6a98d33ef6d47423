// Synchronisation primitives of the CPU backend.
//
// Algorithm: monotonic, epoch-tagged counters. Every counter is written by exactly one core (its
// owner) and read by any number of waiters; a value is `(epoch << 32) | count`, where the epoch is
// the launch number. Because values only grow, nothing is ever reset between launches and a
// waiter can never confuse an old launch's value with the one it waits for.
//
// Waiting spins with a pause instruction for a bounded time, then sleeps on a futex (the low 32
// bits of the counter) so that an oversubscribed machine does not livelock. A publisher wakes
// sleepers only when the counter's `sleepers` field says there are some (Dekker-style handshake,
// see publish()).
//
// Wait policy (what a spin may cost; see judge_spin()). A spin only pays off while the producer
// is running and the waiter has its CPU to itself. So a spin that lasts longer than one probe
// interval reads two CPU-time clocks every interval: the producer thread's and its own.
//   - The producer got less than half of the interval's CPU time (descheduled, or blocked): the
//     value cannot come soon, so the waiter sleeps now instead of spinning out its budget. Its
//     CPU is then free for whatever the scheduler wants to run there (an unpinned co-runner moves
//     off the producer's CPU).
//   - The waiter got less than half (its CPU is shared with another runnable thread): spinning
//     spends the share the core's own work needs, and keeps the waiter from being the sleeper the
//     scheduler favours on wake-up. It sleeps now, and for the next kSharedCoreHoldNs its waits
//     spin at most one probe interval (renewed each time the sharing is seen again).
// Neither rule can end a wait: abort and the watchdog are checked in both phases, and a sleeper is
// woken by the producer's publish() or by the end of its sleep slice.
#ifndef SUPERKERNEL_RUNTIME_CPU_SYNC_H_
#define SUPERKERNEL_RUNTIME_CPU_SYNC_H_

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

namespace sk::cpu {

// 128 bytes: a cache line plus its adjacent-line prefetch partner, so two counters never share
// what the hardware moves between cores together.
inline constexpr size_t kSyncAlign = 128;

struct alignas(kSyncAlign) Counter {
  std::atomic<uint64_t> value{0};
  std::atomic<uint32_t> sleepers{0};
};
static_assert(sizeof(Counter) == kSyncAlign);

inline uint64_t tag(uint64_t epoch, uint32_t count) { return (epoch << 32) | count; }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Wakes every thread sleeping on `c`.
void futex_wake_all(Counter& c);
// Sleeps while the low 32 bits of `c.value` equal `expected_low`, at most `timeout_us`.
void futex_wait(Counter& c, uint32_t expected_low, int64_t timeout_us);

// Stores `v` (greater than the current value) and wakes sleepers.
inline void publish(Counter& c, uint64_t v) {
  // seq_cst exchange: a release for everything this core wrote before (its kernel's outputs),
  // and, together with the seq_cst load of `sleepers` below, the publisher half of a Dekker
  // handshake. A waiter increments `sleepers` and then re-reads `value` (both seq_cst), so in the
  // single total order either it sees v and never sleeps, or we see its increment and wake it.
  // (An exchange rather than store + fence: same cost on x86, and ThreadSanitizer models it.)
  c.value.exchange(v, std::memory_order_seq_cst);
  if (c.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(c);
}

// What a waiter needs to give up: the launch's abort flag and the watchdog deadline.
struct WaitControl {
  const std::atomic<uint32_t>* abort = nullptr;  // non-zero: give up
  int64_t spin_ns = 200'000;                     // spin at most this long before sleeping
  int64_t watchdog_ns = 0;                       // 0 = wait forever
};

enum class WaitResult { kReached, kAborted, kTimedOut };

// The CPU-time clock of the thread that runs a core, so that its waiters can tell whether it is
// running. The thread sets it; any thread reads it.
//
//   ThreadClock clock;
//   clock.set_to_current_thread();        // in the producer
//   wait_at_least(c, target, ctl, &clock);  // in a waiter
class ThreadClock {
 public:
  void set_to_current_thread();
  // CPU time the thread has used, in ns; -1 when unknown (never set, or the thread has exited).
  int64_t cpu_ns() const;

 private:
  static constexpr int64_t kUnset = INT64_MIN;
  std::atomic<int64_t> id_{kUnset};  // a clockid_t, or kUnset
};

// CPU time the calling thread has used, in ns; -1 when unknown.
int64_t current_thread_cpu_ns();

// Spinning reads the clocks every kProbeIntervalNs (waits shorter than that read none).
inline constexpr int64_t kProbeIntervalNs = 20'000;
// How long a waiter that saw its CPU shared keeps spinning at most one probe interval.
inline constexpr int64_t kSharedCoreHoldNs = 50'000'000;

// One probe of a spinning wait: the wall clock and both threads' CPU time (-1: unknown).
struct SpinProbe {
  int64_t wall_ns = 0;
  int64_t producer_cpu_ns = -1;
  int64_t waiter_cpu_ns = -1;
};

enum class SpinVerdict {
  kKeepSpinning,     // both ran for most of the interval (or nothing is known): spinning pays
  kProducerOff,      // the producer was off its CPU for most of the interval: sleep
  kWaiterPreempted,  // the waiter was off its CPU for most of the interval (shared CPU): sleep
};

// The policy's rule for the interval between two probes (see the header comment).
SpinVerdict judge_spin(const SpinProbe& from, const SpinProbe& to);

// Waits until `c.value >= target`. `producer`: the clock of the thread that will publish the
// value, when known (nullptr: the spin is bounded by the budget and the waiter's own CPU only).
WaitResult wait_at_least_slow(Counter& c, uint64_t target, const WaitControl& ctl,
                              const ThreadClock* producer = nullptr);

inline WaitResult wait_at_least(Counter& c, uint64_t target, const WaitControl& ctl,
                                const ThreadClock* producer = nullptr) {
  // acquire: pairs with publish()'s release, so the producer's writes are visible after this.
  if (c.value.load(std::memory_order_acquire) >= target) return WaitResult::kReached;
  return wait_at_least_slow(c, target, ctl, producer);
}

// The spin budget the calling thread's next wait gets at wall time `now_ns` (ctl.spin_ns, or at
// most one probe interval while its CPU was recently seen shared). Exposed for tests.
int64_t spin_budget_ns(const WaitControl& ctl, int64_t now_ns);
// Forgets that the calling thread's CPU was seen shared (tests start from a known state).
void reset_shared_core_state();

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_SYNC_H_
