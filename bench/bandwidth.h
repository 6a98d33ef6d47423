// The memory-bandwidth bound every weight-streaming figure of the benchmarks is reported against
// (sk_bench_kernels' and sk_bench_gemv_streams' "%bound", `superkernel bench`'s "% bound"):
// the best of a read-only sweep and a STREAM triad, each run with the placement the runtime's
// workers use (one thread per core, thread t pinned to the t-th CPU of the process) over buffers
// larger than the last-level cache.
//
//   const sk::bench::BandwidthBound b = sk::bench::measure_bandwidth_bound(cores, 5);
//   std::printf("%.0f%%\n", sk::bench::percent_of_bound(bytes, seconds, b));
//
// Why both: a GEMV only reads, and a read stream runs faster than a triad, a third of whose
// traffic is writes (and their write-allocate reads), so a triad alone is no ceiling for it; the
// triad stays in as the bound of kernels that write as much as they read. The read sweep takes
// the best of 4 KiB and transparent huge pages, of one or four streams per thread, and of two
// footprints (2x and 8x the LLC): on a
// non-inclusive victim LLC a stream twice its size still finds part of itself there, as a
// kernel's weights of that size do.
#ifndef SUPERKERNEL_BENCH_BANDWIDTH_H_
#define SUPERKERNEL_BENCH_BANDWIDTH_H_

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"

namespace sk::bench {

// One measurement of the read sweep.
struct ReadPoint {
  size_t footprint_bytes = 0;
  bool huge_pages = false;
  double gb_per_s = 0;
  int streams = 1;  // concurrent streams per thread (a GEMV tile reads 4 weight rows at once)
};

struct BandwidthBound {
  double triad_gb_per_s = 0;
  std::vector<ReadPoint> reads;
  double read_gb_per_s = 0;  // the best of `reads`
  double gb_per_s = 0;       // max(read_gb_per_s, triad_gb_per_s): the bound
  int threads = 0;
  // "read" or "triad": which measurement gave the bound.
  const char* source() const { return read_gb_per_s >= triad_gb_per_s ? "read" : "triad"; }
};

// The bound of a read sweep and a triad: the larger of the two (a kernel that streams reaches at
// most the faster pattern the memory system serves).
inline double bound_of(double read_gb_per_s, double triad_gb_per_s) { return std::max(read_gb_per_s, triad_gb_per_s); }
inline double best_read(const std::vector<ReadPoint>& reads) {
  double best = 0;
  for (const ReadPoint& r : reads) best = std::max(best, r.gb_per_s);
  return best;
}
// Bytes one pass moves: STREAM counts a triad over arrays of n floats as 3 arrays (2 read, 1
// written), a read pass as the buffer once.
inline double triad_bytes(size_t n_floats) { return 3.0 * static_cast<double>(n_floats) * sizeof(float); }
inline double read_bytes(size_t footprint_bytes) { return static_cast<double>(footprint_bytes); }
// GB/s of `bytes` moved in `seconds`.
inline double gb_per_s(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
// The share of the bound, in percent, of a figure that moves `bytes` in `seconds`.
inline double percent_of_bound(double bytes, double seconds, const BandwidthBound& b) {
  return b.gb_per_s > 0 ? 100.0 * gb_per_s(bytes, seconds) / b.gb_per_s : 0;
}

// The last-level cache's size in bytes, as the kernel's sysfs reports the highest cache level of
// CPU 0 (glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) reads CPUID, which some hypervisors fill in wrong:
// 320 MiB for a 32 MiB L3 on one Zen 4 VM); 32 MiB when neither says.
inline size_t llc_bytes() {
  size_t best = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    FILE* f = std::fopen((dir + "size").c_str(), "r");
    if (!f) break;
    unsigned long v = 0;
    char unit = 0;
    const int got = std::fscanf(f, "%lu%c", &v, &unit);
    std::fclose(f);
    if (got < 1) continue;
    size_t bytes = v;
    if (got == 2 && (unit == 'K' || unit == 'k')) bytes = v << 10;
    if (got == 2 && unit == 'M') bytes = v << 20;
    best = std::max(best, bytes);
  }
  if (best == 0) {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    best = l3 > 0 ? static_cast<size_t>(l3) : size_t{32} << 20;
  }
  return best;
}

// Runs part(t) on `threads` threads of their own, thread t pinned to the t-th CPU of the process
// (the runtime's placement), whatever the calling thread is pinned to. `affinity`, when given,
// receives each thread's CPU set as it ran.
inline void run_pinned(int threads, const std::function<void(int)>& part,
                       std::vector<std::vector<int>>* affinity = nullptr) {
  const std::vector<int> cpus = allowed_cpus();
  if (affinity) affinity->assign(static_cast<size_t>(threads), {});
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      pin_current_thread(cpus[static_cast<size_t>(t) % cpus.size()]);  // unpinned if refused
      if (affinity) {
        cpu_set_t set;
        CPU_ZERO(&set);
        auto& mine = (*affinity)[static_cast<size_t>(t)];
        if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0)
          for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
            if (CPU_ISSET(cpu, &set)) mine.push_back(cpu);
      }
      part(t);
    });
  for (auto& t : ts) t.join();
}

// Reads a[lo, hi) (lo, hi multiples of 32 words) once: one stream, or four contiguous quarters
// side by side, a cache line of each per step. Returns an OR-XOR of what it read, so the reads
// cannot be dropped.
inline uint64_t read_words(const uint64_t* a, size_t lo, size_t hi, int streams) {
  uint64_t acc[32] = {};
  if (streams == 4) {
    const size_t q = ((hi - lo) / 4) & ~size_t{7};
    for (size_t i = lo; i < lo + q; i += 8)
      for (int j = 0; j < 8; ++j) {
        acc[j] |= a[i + j];
        acc[8 + j] |= a[i + q + j];
        acc[16 + j] |= a[i + 2 * q + j];
        acc[24 + j] |= a[i + 3 * q + j];
      }
  } else {
    for (size_t i = lo; i < hi; i += 32)
      for (int j = 0; j < 32; ++j) acc[j] |= a[i + j];
  }
  uint64_t s = 0;
  for (uint64_t v : acc) s ^= v;
  return s;
}

// Read-only sweep point: every byte of a `footprint` buffer read once per pass, split in
// contiguous parts over the threads. The reduction is an integer OR into 32 independent 64-bit
// accumulators (256 bytes per step), so no add latency chain limits it below the memory system
// (a float sum's chain did: 19 GB/s on 2 Zen 4 cores against a 25 GB/s triad).
inline double read_sweep_point(int threads, int runs, size_t footprint, bool huge,
                               std::vector<std::vector<int>>* affinity = nullptr, int streams = 1) {
  threads = std::max(threads, 1);
  footprint = (footprint + 4095) & ~size_t{4095};
  void* mem = nullptr;
  if (posix_memalign(&mem, size_t{2} << 20, footprint) != 0) return 0.0;
  std::unique_ptr<void, decltype(&std::free)> owner(mem, &std::free);
  madvise(mem, footprint, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  const size_t words = footprint / sizeof(uint64_t);
  auto* a = static_cast<uint64_t*>(mem);
  // Written by the threads that read it (first touch), each its own part.
  run_pinned(threads, [&](int t) {
    for (size_t i = words * t / threads; i < words * (t + 1) / threads; ++i) a[i] = i * 0x9e3779b97f4a7c15ull;
  });
  std::vector<uint64_t> sink(static_cast<size_t>(threads) * 8);
  auto part = [&](int t) {
    const size_t lo = (words * t / threads) & ~size_t{31}, hi = (words * (t + 1) / threads) & ~size_t{31};
    sink[static_cast<size_t>(t) * 8] = read_words(a, lo, hi, streams);
  };
  std::vector<double> times;
  for (int r = 0; r < runs + 1; ++r) {
    const double t0 = now_seconds();
    run_pinned(threads, part, r == 0 ? affinity : nullptr);
    if (r > 0) times.push_back(now_seconds() - t0);  // the first pass warms the TLB and the threads
  }
  // The fastest pass: a ceiling, and another process sharing the machine only ever slows a pass.
  return gb_per_s(read_bytes(footprint), stats_of(times).min);
}

// Read bandwidth of a footprint that fits the LLC, read again and again: the bound of a kernel
// whose weights stay in the caches between calls (a 16 MiB GEMV on a 48 MiB L3 reads them from
// there, past DRAM's bound). The threads start once (a thread's start would dominate a pass of a
// cached buffer), pinned as run_pinned pins them, each first touching and then reading its part
// `passes` times; each thread's fastest pass, summed over the threads: a ceiling, since the
// threads' passes need not overlap exactly.
inline double cached_read_gb_per_s(int threads, size_t footprint, int passes, int streams = 1) {
  threads = std::max(threads, 1);
  const size_t words = std::max<size_t>((footprint / sizeof(uint64_t) + 31) & ~size_t{31}, size_t{32} * threads);
  std::vector<uint64_t> a(words);
  std::vector<double> rate(static_cast<size_t>(threads), 0.0);
  std::vector<uint64_t> sink(static_cast<size_t>(threads) * 8);
  run_pinned(threads, [&](int t) {
    const size_t lo = (words * t / threads) & ~size_t{31}, hi = (words * (t + 1) / threads) & ~size_t{31};
    for (size_t i = lo; i < hi; ++i) a[i] = i * 0x9e3779b97f4a7c15ull;
    double best = 0.0;
    uint64_t s = 0;
    for (int r = 0; r < std::max(passes, 1); ++r) {
      const double t0 = now_seconds();
      s ^= read_words(a.data(), lo, hi, streams);
      best = std::max(best, static_cast<double>(hi - lo) * sizeof(uint64_t) / std::max(now_seconds() - t0, 1e-9));
    }
    rate[static_cast<size_t>(t)] = best;
    sink[static_cast<size_t>(t) * 8] = s;
  });
  double sum = 0.0;
  for (double r : rate) sum += r;
  return sum / 1e9;
}

// STREAM triad a[i] = b[i] + 3 * c[i] over arrays of 64 MiB (beyond the LLC), with the same
// placement and the fastest of `runs` passes, like the read sweep.
inline double triad_best_gb_per_s(int threads, int runs) {
  threads = std::max(threads, 1);
  const size_t n = size_t{1} << 24;
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  auto part = [&](int t) {
    float* pa = a.data();
    const float* pb = b.data();
    const float* pc = c.data();
    for (size_t i = n * t / threads; i < n * (t + 1) / threads; ++i) pa[i] = pb[i] + 3.0f * pc[i];
  };
  std::vector<double> times;
  for (int r = 0; r < runs + 1; ++r) {
    const double t0 = now_seconds();
    run_pinned(threads, part);
    if (r > 0) times.push_back(now_seconds() - t0);
  }
  return gb_per_s(triad_bytes(n), stats_of(times).min);
}

// The bound on `threads` cores: the triad and the read sweep, the fastest of `runs` passes each.
inline BandwidthBound measure_bandwidth_bound(int threads, int runs) {
  BandwidthBound b;
  b.threads = std::max(threads, 1);
  b.triad_gb_per_s = triad_best_gb_per_s(b.threads, runs);
  const size_t llc = llc_bytes();
  for (size_t times : {size_t{2}, size_t{8}})
    for (bool huge : {false, true})
      for (int streams : {1, 4})
        b.reads.push_back(
            {times * llc, huge, read_sweep_point(b.threads, runs, times * llc, huge, nullptr, streams), streams});
  b.read_gb_per_s = best_read(b.reads);
  b.gb_per_s = bound_of(b.read_gb_per_s, b.triad_gb_per_s);
  return b;
}

// Adds a read point, or keeps the faster of it and the point of the same footprint, pages and
// streams already there, and recomputes the bound.
inline void add_read_point(BandwidthBound& b, const ReadPoint& p) {
  bool merged = false;
  for (ReadPoint& r : b.reads)
    if (r.footprint_bytes == p.footprint_bytes && r.huge_pages == p.huge_pages && r.streams == p.streams) {
      r.gb_per_s = std::max(r.gb_per_s, p.gb_per_s);
      merged = true;
    }
  if (!merged) b.reads.push_back(p);
  b.read_gb_per_s = best_read(b.reads);
  b.gb_per_s = bound_of(b.read_gb_per_s, b.triad_gb_per_s);
}

// Measures every point again and keeps, per point, the faster of the two: a benchmark that times
// many kernels calls this between them, so that the bound spans the same minutes of a shared
// machine's drifting bandwidth as the figures it bounds (one sweep before them read 33 GB/s on 2
// cores where a bf16 GEMV a few seconds later streamed 58).
inline void refresh_bound(BandwidthBound& b, int runs) {
  b.triad_gb_per_s = std::max(b.triad_gb_per_s, triad_best_gb_per_s(b.threads, runs));
  for (ReadPoint& r : b.reads)
    r.gb_per_s =
        std::max(r.gb_per_s, read_sweep_point(b.threads, runs, r.footprint_bytes, r.huge_pages, nullptr, r.streams));
  b.read_gb_per_s = best_read(b.reads);
  b.gb_per_s = bound_of(b.read_gb_per_s, b.triad_gb_per_s);
}

// "bound 30.1 GB/s (read 30.1, triad 25.0) on 2 cores"
inline std::string describe(const BandwidthBound& b) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "bound %.1f GB/s (best of read-only sweep %.1f, triad %.1f) on %d cores", b.gb_per_s,
                b.read_gb_per_s, b.triad_gb_per_s, b.threads);
  return buf;
}

}  // namespace sk::bench

#endif  // SUPERKERNEL_BENCH_BANDWIDTH_H_
