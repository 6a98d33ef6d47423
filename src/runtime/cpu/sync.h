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
#ifndef SUPERKERNEL_RUNTIME_CPU_SYNC_H_
#define SUPERKERNEL_RUNTIME_CPU_SYNC_H_

#include <atomic>
#include <chrono>
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
  int64_t spin_ns = 200'000;                     // spin this long before sleeping
  int64_t watchdog_ns = 0;                       // 0 = wait forever
};

enum class WaitResult { kReached, kAborted, kTimedOut };

// Waits until `c.value >= target`.
WaitResult wait_at_least_slow(Counter& c, uint64_t target, const WaitControl& ctl);

inline WaitResult wait_at_least(Counter& c, uint64_t target, const WaitControl& ctl) {
  // acquire: pairs with publish()'s release, so the producer's writes are visible after this.
  if (c.value.load(std::memory_order_acquire) >= target) return WaitResult::kReached;
  return wait_at_least_slow(c, target, ctl);
}

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_SYNC_H_
