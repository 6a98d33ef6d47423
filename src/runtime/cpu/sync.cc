#include "runtime/cpu/sync.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace sk::cpu {
namespace {

// The futex word is the low half of the 64-bit counter (x86-64 and aarch64 are little-endian).
uint32_t* futex_word(Counter& c) { return reinterpret_cast<uint32_t*>(&c.value); }

// Sleep slices are short so that a value change in the high (epoch) half only, which the futex
// cannot see, or a missed abort costs at most one slice.
constexpr int64_t kSleepSliceUs = 2000;

}  // namespace

void futex_wake_all(Counter& c) { syscall(SYS_futex, futex_word(c), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0); }

void futex_wait(Counter& c, uint32_t expected_low, int64_t timeout_us) {
  struct timespec ts;
  ts.tv_sec = timeout_us / 1'000'000;
  ts.tv_nsec = (timeout_us % 1'000'000) * 1000;
  syscall(SYS_futex, futex_word(c), FUTEX_WAIT_PRIVATE, expected_low, &ts, nullptr, 0);
}

WaitResult wait_at_least_slow(Counter& c, uint64_t target, const WaitControl& ctl) {
  // Phase 0: most waits inside a launch end within a cache-line transfer or two, so spin a
  // little before paying for the clock read that bounds the longer spin below.
  for (int i = 0; i < 64; ++i) {
    if (c.value.load(std::memory_order_acquire) >= target) return WaitResult::kReached;
    cpu_relax();
  }
  const int64_t start = now_ns();
  // Phase 1: spin. Reads are acquire so that success publishes the producer's writes.
  for (uint32_t i = 1;; ++i) {
    if (c.value.load(std::memory_order_acquire) >= target) return WaitResult::kReached;
    cpu_relax();
    if ((i & 63) == 0) {
      if (ctl.abort && ctl.abort->load(std::memory_order_relaxed)) return WaitResult::kAborted;
      if (now_ns() - start >= ctl.spin_ns) break;
    }
  }
  // Phase 2: sleep on the futex in slices, checking abort and the watchdog between slices.
  for (;;) {
    // seq_cst increment and re-read: the waiter half of the handshake described in publish().
    c.sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint64_t v = c.value.load(std::memory_order_seq_cst);
    if (v < target) futex_wait(c, static_cast<uint32_t>(v), kSleepSliceUs);
    c.sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (c.value.load(std::memory_order_acquire) >= target) return WaitResult::kReached;
    if (ctl.abort && ctl.abort->load(std::memory_order_relaxed)) return WaitResult::kAborted;
    if (ctl.watchdog_ns > 0 && now_ns() - start >= ctl.watchdog_ns) return WaitResult::kTimedOut;
  }
}

}  // namespace sk::cpu
