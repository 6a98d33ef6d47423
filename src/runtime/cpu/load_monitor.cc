#include "runtime/cpu/load_monitor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace sk::cpu {

namespace {

// The share of the time a thread wanted to run that it spent waiting for its CPU; -1 when it
// wanted too little of the window for the figure to mean anything.
double waited_share(const SchedSample& s) {
  if (s.cpu_ns < 0 || s.delay_ns < 0) return -1;
  const int64_t wanted = s.cpu_ns + s.delay_ns;
  return wanted < kMinBusyNs ? -1 : static_cast<double>(s.delay_ns) / static_cast<double>(wanted);
}

}  // namespace

int judge_load(const LoadWindow& w, int solo) {
  const int n = static_cast<int>(w.threads.size());
  if (solo >= 0) {
    // The chunk helper (another core's thread, on another CPU) waited for its CPU: the load is
    // still there. Stay.
    for (int t = 1; t < n; ++t)
      if (waited_share(w.threads[static_cast<size_t>(t)]) >= kLoadedShare) return solo;
    // The other CPUs had no CPU's worth of time idle or running the helper: the load is still
    // there. Stay.
    if (!(w.idle_cpus >= 0 && w.idle_cpus + w.helper_cpus >= kIdleShare)) return solo;
    // They had, while the launching thread (core 0's) waited for its CPU: the load sits on that
    // CPU (pinned there, or the scheduler left it there). Move to the next CPU.
    if (n > 0 && waited_share(w.threads[0]) >= kLoadedShare) return (solo + 1) % n;
    // They had, and the launching thread's CPU was its own: the load is gone.
    return -1;
  }
  int least = 0;
  double least_share = 2;
  bool loaded = false;
  for (int t = 0; t < n; ++t) {
    const double share = waited_share(w.threads[static_cast<size_t>(t)]);
    loaded = loaded || share >= kLoadedShare;
    // A thread that hardly ran is as good a home as one that never waited: its CPU's state is
    // unknown, while the loaded thread's is known to be bad.
    const double rank = share < 0 ? 0 : share;
    if (rank < least_share) {
      least_share = rank;
      least = t;
    }
  }
  return loaded ? least : -1;
}

ProcLoadCounters::ProcLoadCounters(std::vector<int> cpus) : cpus_(std::move(cpus)), fds_(cpus_.size(), -1) {
  stat_fd_ = open("/proc/stat", O_RDONLY | O_CLOEXEC);
}

ProcLoadCounters::~ProcLoadCounters() {
  for (int fd : fds_)
    if (fd >= 0) close(fd);
  for (const std::vector<int>& fds : cpuidle_fds_)
    for (int fd : fds) close(fd);
  if (stat_fd_ >= 0) close(stat_fd_);
}

void ProcLoadCounters::set_thread(int core, pid_t tid) {
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/schedstat";
  int& slot = fds_[static_cast<size_t>(core)];
  if (slot >= 0) close(slot);
  slot = open(path.c_str(), O_RDONLY | O_CLOEXEC);  // -1 (no schedstat in this kernel): never seen loaded
}

SchedSample ProcLoadCounters::thread(int t) {
  SchedSample s;
  const int fd = fds_[static_cast<size_t>(t)];
  if (fd < 0) return s;
  char buf[128];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return s;
  buf[n] = '\0';
  // "<cpu ns> <run delay ns> <timeslices>"
  char* end = nullptr;
  const long long cpu = std::strtoll(buf, &end, 10);
  if (end == buf) return s;
  char* end2 = nullptr;
  const long long delay = std::strtoll(end, &end2, 10);
  if (end2 == end) return s;
  s.cpu_ns = cpu;
  s.delay_ns = delay;
  return s;
}

int64_t ProcLoadCounters::idle_ns(int except) {
  if (cpuidle_ < 0) {
    // Every idle state's time file of every CPU; a CPU without any means no cpuidle here.
    cpuidle_ = 1;
    for (int cpu : cpus_) {
      std::vector<int>& fds = cpuidle_fds_.emplace_back();
      for (int st = 0;; ++st) {
        const std::string path =
            "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpuidle/state" + std::to_string(st) + "/time";
        const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) break;
        fds.push_back(fd);
      }
      if (fds.empty()) cpuidle_ = 0;
    }
  }
  if (cpuidle_ == 1) {
    const int64_t ns = read_cpuidle_ns(except);
    if (ns >= 0) return ns;
    cpuidle_ = 0;
  }
  return read_stat_idle_ns(except);
}

int64_t ProcLoadCounters::read_cpuidle_ns(int except) {
  int64_t total_us = 0;
  for (size_t c = 0; c < cpuidle_fds_.size(); ++c) {
    if (static_cast<int>(c) == except) continue;
    for (int fd : cpuidle_fds_[c]) {
      char buf[32];
      const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
      if (n <= 0) return -1;
      buf[n] = '\0';
      total_us += std::strtoll(buf, nullptr, 10);
    }
  }
  return total_us * 1000;
}

int64_t ProcLoadCounters::read_stat_idle_ns(int except) {
  if (stat_fd_ < 0) return -1;
  if (stat_buf_.empty()) stat_buf_.resize(64 * 1024);
  const ssize_t n = pread(stat_fd_, stat_buf_.data(), stat_buf_.size() - 1, 0);
  if (n <= 0) return -1;
  stat_buf_[static_cast<size_t>(n)] = '\0';
  int64_t total = 0;
  size_t found = 0;
  // Lines "cpuN user nice system idle iowait irq softirq steal ...", after the "cpu " total.
  for (const char* line = stat_buf_.data(); line && *line; line = std::strchr(line, '\n')) {
    if (*line == '\n') ++line;
    if (std::strncmp(line, "cpu", 3) != 0) {
      if (found > 0) break;  // past the CPU lines
      continue;
    }
    char* p = nullptr;
    const long id = std::strtol(line + 3, &p, 10);
    if (p == line + 3) continue;  // the "cpu " total
    int index = -1;
    for (size_t c = 0; c < cpus_.size(); ++c)
      if (cpus_[c] == id) index = static_cast<int>(c);
    if (index < 0) continue;
    ++found;
    if (index == except) continue;
    long long field[5] = {};
    for (long long& f : field) f = std::strtoll(p, &p, 10);
    total += field[3] + field[4];  // idle + iowait
  }
  static const double tick_ns = 1e9 / static_cast<double>(sysconf(_SC_CLK_TCK));
  return found == cpus_.size() ? static_cast<int64_t>(static_cast<double>(total) * tick_ns) : -1;
}

LoadMonitor::LoadMonitor(std::vector<int> cpus, std::unique_ptr<LoadCounters> counters)
    : num_threads_(cpus.size()),
      counters_(counters ? std::move(counters) : std::make_unique<ProcLoadCounters>(std::move(cpus))) {}

void LoadMonitor::set_thread(int core, pid_t tid) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_->set_thread(core, tid);
  window_start_ = -1;  // the counters now belong to another thread: start a fresh window
  next_check_ns_.store(INT64_MIN, std::memory_order_relaxed);
}

int LoadMonitor::advise(int64_t now_ns) {
  if (now_ns < next_check_ns_.load(std::memory_order_relaxed)) return advice_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = num_threads_;
  std::vector<SchedSample> now(n);
  for (size_t t = 0; t < n; ++t) now[t] = counters_->thread(static_cast<int>(t));
  const int before = solo_;
  const int64_t idle = before >= 0 ? counters_->idle_ns(before) : -1;
  if (window_start_ >= 0) {
    LoadWindow w;
    w.threads.resize(n);
    for (size_t t = 0; t < n; ++t) {
      if (now[t].cpu_ns < 0 || at_start_[t].cpu_ns < 0) continue;
      w.threads[t] = {now[t].cpu_ns - at_start_[t].cpu_ns, now[t].delay_ns - at_start_[t].delay_ns};
    }
    const double span = static_cast<double>(now_ns - window_start_);
    if (idle >= 0 && idle_at_start_ >= 0) w.idle_cpus = static_cast<double>(idle - idle_at_start_) / span;
    if (before >= 0)
      for (size_t t = 1; t < n; ++t)
        if (w.threads[t].cpu_ns > 0) w.helper_cpus += static_cast<double>(w.threads[t].cpu_ns) / span;
    const int verdict = judge_load(w, before);
    // Leaving every core its thread takes kLoadedWindows loaded windows in a row: a burst of
    // another task shorter than that costs less to wait out than a window on one thread.
    loaded_windows_ = before < 0 && verdict >= 0 ? loaded_windows_ + 1 : 0;
    solo_ = before < 0 && loaded_windows_ < kLoadedWindows ? -1 : verdict;
    if (solo_ >= 0) loaded_windows_ = 0;
  }
  window_start_ = now_ns;
  at_start_ = std::move(now);
  idle_at_start_ = solo_ < 0 ? -1 : solo_ == before ? idle : counters_->idle_ns(solo_);
  const int64_t window = solo_ < 0 ? kSpreadWindowNs : counters_->fine_idle() ? kSoloWindowNs : kSoloWindowTicksNs;
  advice_.store(solo_, std::memory_order_relaxed);
  next_check_ns_.store(now_ns + window, std::memory_order_relaxed);
  return solo_;
}

}  // namespace sk::cpu
