#include "runtime/cpu/device.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <string>

namespace sk::cpu {

namespace {

// The CPUs the process may use, read once: a device pins its launching thread, and a later
// device created from that thread must still see every CPU, not the one it was pinned to.
const std::vector<int>& process_cpus() {
  static const std::vector<int> cpus = [] {
    std::vector<int> v;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int i = 0; i < CPU_SETSIZE; ++i)
        if (CPU_ISSET(i, &set)) v.push_back(i);
    }
    if (v.empty()) v.push_back(0);
    return v;
  }();
  return cpus;
}

}  // namespace

Expected<std::unique_ptr<CpuDevice>> CpuDevice::create(const CpuDeviceOptions& options) {
  std::vector<int> cpus = process_cpus();
  int n = options.num_cores == 0 ? static_cast<int>(cpus.size()) : options.num_cores;
  if (n < 1)
    return Status::invalid_argument("device option 'num_cores' = " + std::to_string(options.num_cores) +
                                    ": must be >= 1 (or 0 for every available CPU)");
  if (n > static_cast<int>(cpus.size()) && !options.allow_oversubscribe)
    return Status::invalid_argument("device option 'num_cores' = " + std::to_string(n) + " exceeds the " +
                                    std::to_string(cpus.size()) +
                                    " CPUs available to this process; the pool never oversubscribes the machine");
  if (options.cube_cores < 0 || options.cube_cores >= n) {
    if (options.cube_cores != 0)
      return Status::invalid_argument("device option 'cube_cores' = " + std::to_string(options.cube_cores) +
                                      ": must be 0 (no split) or in [1, " + std::to_string(n - 1) +
                                      "] so both groups have a core");
  }
  if (options.spin_us < 0) return Status::invalid_argument("device option 'spin_us' must be >= 0");
  if (options.watchdog_seconds < 0) return Status::invalid_argument("device option 'watchdog_seconds' must be >= 0");
  CpuDeviceOptions resolved = options;
  resolved.num_cores = n;
  std::unique_ptr<CpuDevice> dev(new CpuDevice(resolved));
  dev->cpus_ = std::move(cpus);
  // The adaptive policy moves the launching thread between the cores' CPUs: it needs them pinned,
  // and two of them (load_monitor.h).
  if (resolved.load_policy == LoadPolicy::kAdaptive && resolved.pin_threads && resolved.pin_caller && n == 2) {
    std::vector<int> core_cpus;
    for (int c = 0; c < n; ++c) core_cpus.push_back(dev->cpus_[static_cast<size_t>(c) % dev->cpus_.size()]);
    std::unique_ptr<LoadCounters> counters = resolved.load_counters ? resolved.load_counters(core_cpus) : nullptr;
    dev->monitor_ = std::make_unique<LoadMonitor>(std::move(core_cpus), std::move(counters));
  }
  for (int c = 1; c < n; ++c) dev->workers_.emplace_back([d = dev.get(), c] { d->worker_main(c); });
  return dev;
}

CpuDevice::CpuDevice(const CpuDeviceOptions& options)
    : options_(options),
      num_cores_(options.num_cores),
      mailbox_(new Counter[options.num_cores]),
      done_(new Counter[options.num_cores]),
      slots_(new Slot[options.num_cores]),
      progress_(new Counter[options.num_cores]),
      barriers_(new Counter[static_cast<size_t>(kMaxBarrierGroups) * options.num_cores]),
      thread_clocks_(new ThreadClock[options.num_cores]) {}

CpuDevice::~CpuDevice() {
  {
    // First, while the worker still runs what its mailbox says: a helper started by the last
    // launch may not have begun yet, and must begin (and end at once) to report done.
    std::lock_guard<std::mutex> lock(launch_mu_);
    stop_helper();
  }
  stopping_.store(true, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(launch_mu_);
    ++seq_;
    // The sequence bump is published with release ordering, which also publishes `stopping_`.
    for (int c = 1; c < num_cores_; ++c) publish(mailbox_[c], seq_);
  }
  for (std::thread& t : workers_) t.join();
  // Give the launching thread its CPUs back when it is the one tearing the device down.
  if (caller_pinned_ && pinned_caller_ == std::this_thread::get_id())
    (void)pthread_setaffinity_np(pthread_self(), sizeof(caller_mask_), &caller_mask_);
}

void CpuDevice::pin_current_thread(int cpu_index) {
  if (!options_.pin_threads || cpus_.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus_[cpu_index % cpus_.size()], &set);
  // Pinning is best effort: a container may forbid it, and correctness does not depend on it.
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

WaitControl CpuDevice::wait_control(const std::atomic<uint32_t>* abort) const {
  WaitControl ctl;
  ctl.abort = abort;
  ctl.spin_ns = options_.spin_us * 1000;
  ctl.watchdog_ns = static_cast<int64_t>(options_.watchdog_seconds * 1e9);
  return ctl;
}

void CpuDevice::worker_main(int core) {
  pin_current_thread(core);
  thread_clocks_[core].set_to_current_thread();
  if (monitor_) monitor_->set_thread(core, gettid());
  WaitControl idle;  // idle workers wait forever, without a watchdog
  idle.spin_ns = options_.spin_us * 1000;
  uint64_t seen = 0;
  for (;;) {
    wait_at_least(mailbox_[core], seen + 1, idle, thread_clock(0));
    // acquire (inside wait_at_least): the slot and stopping_ written before the publish are visible.
    seen = mailbox_[core].value.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_relaxed)) return;
    const Slot& slot = slots_[core];
    slot.fn(slot.ctx, core);
    publish(done_[core], seen);
  }
}

void CpuDevice::start_helper(int cpu_index) {
  if (helper_cpu_index_ == cpu_index) return;
  stop_helper();
  helper_cpu_index_ = cpu_index;
  helper_.start();
  // Worker 1 is idle (stop_helper() and every launch wait for it), so its slot is ours to write.
  slots_[1].fn = [](void* raw, int /*core*/) {
    auto* dev = static_cast<CpuDevice*>(raw);
    dev->pin_current_thread(dev->helper_cpu_index_);
    dev->helper_.help();
    dev->pin_current_thread(1);
  };
  slots_[1].ctx = this;
  helper_seq_ = ++seq_;
  publish(mailbox_[1], helper_seq_);
}

void CpuDevice::stop_helper() {
  if (helper_cpu_index_ < 0) return;
  helper_.stop();
  WaitControl join;
  join.spin_ns = options_.spin_us * 1000;
  wait_at_least(done_[1], helper_seq_, join);
  helper_cpu_index_ = -1;
}

void CpuDevice::launch(int n, CoreFn fn, void* ctx, CoreFn all_cores) {
  SK_CHECK(n >= 1 && n <= num_cores_) << "launch of " << n << " cores on a " << num_cores_ << "-core device";
  std::lock_guard<std::mutex> lock(launch_mu_);
  if (options_.pin_caller && options_.pin_threads && pinned_caller_ != std::this_thread::get_id()) {
    if (!caller_pinned_)
      caller_pinned_ = pthread_getaffinity_np(pthread_self(), sizeof(caller_mask_), &caller_mask_) == 0;
    pin_current_thread(0);
    pinned_caller_ = std::this_thread::get_id();
    caller_cpu_index_ = 0;
  }
  // Core 0 is whichever thread launches; its workers' waits need that thread's clock.
  if (clocked_caller_ != std::this_thread::get_id()) {
    thread_clocks_[0].set_to_current_thread();
    clocked_caller_ = std::this_thread::get_id();
    if (monitor_) monitor_->set_thread(0, gettid());
  }
  const uint64_t seq = ++seq_;
  ++epoch_;
  // The load policy (load_monitor.h): the CPU the monitor names for running on one thread, if any.
  const int solo_cpu = monitor_ ? monitor_->advise(now_ns()) : -1;
  const bool on_one_thread = n > 1 && all_cores && (solo_cpu >= 0 || options_.load_policy == LoadPolicy::kOneThread);
  if (monitor_) {
    // The launching thread sits on the named CPU for whatever it runs alone (a one-core launch
    // too), and back on its own CPU for a launch that needs every core's thread.
    const int cpu_index = solo_cpu >= 0 && (n == 1 || on_one_thread) ? solo_cpu : 0;
    if (cpu_index != caller_cpu_index_) {
      pin_current_thread(cpu_index);
      caller_cpu_index_ = cpu_index;
    }
  }
  if (on_one_thread) {
    one_thread_launches_.fetch_add(1, std::memory_order_relaxed);
    // The other CPU's thread helps with chunks of large calls (chunk_helper.h): the one the
    // launching thread left, which the load shares.
    helping_ = options_.chunk_bytes > 0 && num_cores_ == 2;
    if (helping_) start_helper(1 - caller_cpu_index_);
    all_cores(ctx, 0);
    helping_ = false;
    return;
  }
  if (n > 1) stop_helper();  // worker 1 is needed back
  for (int c = 1; c < n; ++c) {
    // Plain writes: worker c is idle (it finished its previous launch, which we waited for), and
    // publish() below releases them to it.
    slots_[c].fn = fn;
    slots_[c].ctx = ctx;
    publish(mailbox_[c], seq);
  }
  fn(ctx, 0);
  WaitControl join;
  join.spin_ns = options_.spin_us * 1000;
  for (int c = 1; c < n; ++c) wait_at_least(done_[c], seq, join, thread_clock(c));
}

}  // namespace sk::cpu
