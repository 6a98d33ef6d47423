#include "runtime/cpu/sync.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace sk::cpu {
namespace {

// The futex word is the low half of the 64-bit counter (x86-64 and aarch64 are little-endian).
uint32_t* futex_word(Counter& c) { return reinterpret_cast<uint32_t*>(&c.value); }

// Sleep slices are short so that a value change in the high (epoch) half only, which the futex
// cannot see, or a missed abort costs at most one slice.
constexpr int64_t kSleepSliceUs = 2000;

// The first clock reading of a spin comes this long after it starts, so the short waits that make
// up most of a launch read no clock at all.
constexpr int64_t kFirstProbeNs = 5'000;

int64_t to_ns(const struct timespec& ts) { return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec; }

// Until when (wall ns) the calling thread counts its CPU as shared; see the policy in sync.h.
thread_local int64_t t_shared_until_ns = INT64_MIN;

}  // namespace

void ThreadClock::set_to_current_thread() {
  clockid_t id;
  id_.store(pthread_getcpuclockid(pthread_self(), &id) == 0 ? static_cast<int64_t>(id) : kUnset,
            std::memory_order_relaxed);
}

int64_t ThreadClock::cpu_ns() const {
  const int64_t id = id_.load(std::memory_order_relaxed);
  struct timespec ts;
  // Fails (EINVAL) once the thread has exited: unknown, and the policy then ignores the producer.
  if (id == kUnset || clock_gettime(static_cast<clockid_t>(id), &ts) != 0) return -1;
  return to_ns(ts);
}

int64_t current_thread_cpu_ns() {
  struct timespec ts;
  return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? to_ns(ts) : -1;
}

SpinVerdict judge_spin(const SpinProbe& from, const SpinProbe& to) {
  const int64_t wall = to.wall_ns - from.wall_ns;
  if (wall <= 0) return SpinVerdict::kKeepSpinning;
  auto ran_less_than_half = [wall](int64_t a, int64_t b) { return a >= 0 && b >= 0 && (b - a) * 2 < wall; };
  // The waiter first: when it was off its CPU the sharing is what the caller must remember, and
  // the producer's figure says nothing new (it may have run while the waiter did not).
  if (ran_less_than_half(from.waiter_cpu_ns, to.waiter_cpu_ns)) return SpinVerdict::kWaiterPreempted;
  if (ran_less_than_half(from.producer_cpu_ns, to.producer_cpu_ns)) return SpinVerdict::kProducerOff;
  return SpinVerdict::kKeepSpinning;
}

int64_t spin_budget_ns(const WaitControl& ctl, int64_t now) {
  if (now < t_shared_until_ns) return std::min(ctl.spin_ns, kFirstProbeNs + kProbeIntervalNs);
  return ctl.spin_ns;
}

void reset_shared_core_state() { t_shared_until_ns = INT64_MIN; }

void futex_wake_all(Counter& c) { syscall(SYS_futex, futex_word(c), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0); }

void futex_wait(Counter& c, uint32_t expected_low, int64_t timeout_us) {
  struct timespec ts;
  ts.tv_sec = timeout_us / 1'000'000;
  ts.tv_nsec = (timeout_us % 1'000'000) * 1000;
  syscall(SYS_futex, futex_word(c), FUTEX_WAIT_PRIVATE, expected_low, &ts, nullptr, 0);
}

WaitResult wait_at_least_slow(Counter& c, uint64_t target, const WaitControl& ctl, const ThreadClock* producer) {
  // Phase 0: most waits inside a launch end within a cache-line transfer or two, so spin a
  // little before paying for the clock read that bounds the longer spin below.
  for (int i = 0; i < 64; ++i) {
    if (c.value.load(std::memory_order_acquire) >= target) return WaitResult::kReached;
    cpu_relax();
  }
  const int64_t start = now_ns();
  const int64_t budget = spin_budget_ns(ctl, start);
  // Phase 1: spin, within the budget and while the policy in sync.h says spinning pays. Reads are
  // acquire so that success publishes the producer's writes.
  int64_t next_probe = start + kFirstProbeNs;
  SpinProbe last;
  bool have_last = false;
  for (uint32_t i = 1;; ++i) {
    if (c.value.load(std::memory_order_acquire) >= target) return WaitResult::kReached;
    cpu_relax();
    if ((i & 63) != 0) continue;
    if (ctl.abort && ctl.abort->load(std::memory_order_relaxed)) return WaitResult::kAborted;
    const int64_t t = now_ns();
    if (t - start >= budget) break;
    if (t < next_probe) continue;
    const SpinProbe probe{t, producer ? producer->cpu_ns() : -1, current_thread_cpu_ns()};
    if (have_last) {
      const SpinVerdict verdict = judge_spin(last, probe);
      if (verdict == SpinVerdict::kWaiterPreempted) t_shared_until_ns = t + kSharedCoreHoldNs;
      if (verdict != SpinVerdict::kKeepSpinning) break;
    }
    last = probe;
    have_last = true;
    next_probe = t + kProbeIntervalNs;
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
