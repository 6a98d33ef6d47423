// Shared benchmark harness (sk_bench_* and `superkernel bench`): repeated timing with medians,
// the STREAM triad bound, a side-by-side table on stdout and
// the project's JSON format (--json PATH):
//   {"machine": {"cores": N, "isa": "..."}, "results": [{"bench", "mode", "cores", "metric",
//    "median", "min", "max", "runs", "unit"}]}
// A result may also carry "settings" (the options of its configuration), "ratios" ({"<mode>":
// median / that mode's median}) and "unsupported" (why the configuration did not run: its
// median, min and max are then null and runs is 0).
#ifndef SUPERKERNEL_BENCH_BENCH_COMMON_H_
#define SUPERKERNEL_BENCH_BENCH_COMMON_H_

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "superkernel/output_file.h"
#include "superkernel/runtime.h"

namespace sk::bench {

struct Result {
  Result() = default;
  Result(std::string bench_, std::string mode_, int cores_, std::string metric_, double median_, double min_,
         double max_, int runs_, std::string unit_)
      : bench(std::move(bench_)),
        mode(std::move(mode_)),
        cores(cores_),
        metric(std::move(metric_)),
        median(median_),
        min(min_),
        max(max_),
        runs(runs_),
        unit(std::move(unit_)) {}

  std::string bench;
  std::string mode;
  int cores = 0;
  std::string metric;
  double median = 0, min = 0, max = 0;
  int runs = 0;
  std::string unit;
  std::string settings;                  // the configuration's options, "key=value,..."
  std::map<std::string, double> ratios;  // median / the named mode's median
  std::string unsupported;               // non-empty: the configuration did not run, and why
};

struct Stats {
  double median = 0, min = 0, max = 0;
};

inline Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs `fn` `warmup` times, then `runs` times, returning seconds per call.
inline std::vector<double> time_runs(const std::function<void()>& fn, int warmup, int runs) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  t.reserve(runs);
  for (int i = 0; i < runs; ++i) {
    double t0 = now_seconds();
    fn();
    t.push_back(now_seconds() - t0);
  }
  return t;
}

// Times every call in interleaved rounds (each round runs every call once, in rotating order) so
// that slow drifts of a shared machine hit all of them alike. Each sample is the second of two
// back-to-back calls: the first brings the call's own data back into the caches, where the
// previous call left its own. Returns seconds per sample, per call, or the first failure.
// `min_seconds`: keep adding rounds past `runs` until the timed rounds lasted this long (so that
// a median under a co-located load spans many scheduler slices).
inline Expected<std::vector<std::vector<double>>> time_interleaved(const std::vector<std::function<Status()>>& calls,
                                                                   int warmup, int runs, double min_seconds = 0) {
  std::vector<std::vector<double>> seconds(calls.size());
  double timed_from = 0;
  for (int round = 0; round < warmup + runs || now_seconds() - timed_from < min_seconds; ++round) {
    if (round == warmup) timed_from = now_seconds();
    for (size_t i = 0; i < calls.size(); ++i) {
      const size_t c = (i + static_cast<size_t>(round)) % calls.size();
      double t = 0;
      for (int rep = 0; rep < 2; ++rep) {
        const double t0 = now_seconds();
        SK_RETURN_IF_ERROR(calls[c]());
        t = now_seconds() - t0;
      }
      if (round >= warmup) seconds[c].push_back(t);
    }
  }
  return seconds;
}

// Runs `calls` round-robin for at least `seconds` (untimed): lets the scheduler and the runtime's
// load policy see a load that just started or stopped before timed rounds begin.
inline Status settle(const std::vector<std::function<Status()>>& calls, double seconds) {
  const double end = now_seconds() + seconds;
  while (now_seconds() < end)
    for (const auto& call : calls) SK_RETURN_IF_ERROR(call());
  return Status::ok();
}

struct Args {
  std::string json;
  int runs = 15;
  bool quick = false;
  std::vector<std::string> only;         // bench names to run (empty: all)
  std::vector<std::string> modes;        // modes to run (empty: all)
  int cores = 0;                         // run only this core count (0: 1 and 2)
  bool dump = false;                     // also measure the data dump's cost
  bool trace = false;                    // also measure tracing's cost (debug_op_exec_trace)
  bool recompute = false;                // also measure superkernel mode with recompute on
  bool jit = false;                      // also the JIT backend (super_kernel_optimize_options.jit)
  bool preload = false;                  // also code preload (preload_code per-func and max)
  int replicas = 0;                      // also kernel replication with this many copies (0: not measured)
  bool contend = false;                  // also time every configuration beside a busy process (busy_load.h)
  std::string load_policy = "adaptive";  // RuntimeOptions::load_policy (with --contend's programs)
};

// `accepts_contend`: the program implements --contend (a program that does not refuses it as an
// unknown argument rather than ignoring it).
inline Args parse_args(int argc, char** argv, const char* usage, bool accepts_contend = false) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto need = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n%s", flag, usage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (s == "--json") {
      a.json = need("--json");
    } else if (s == "--runs") {
      a.runs = std::max(1, std::atoi(need("--runs").c_str()));
    } else if (s == "--quick") {
      a.quick = true;
      a.runs = 5;
    } else if (s == "--only") {
      a.only.push_back(need("--only"));
    } else if (s == "--trace") {
      a.trace = true;
    } else if (s == "--dump") {
      a.dump = true;
    } else if (s == "--recompute") {
      a.recompute = true;
    } else if (s == "--jit") {
      a.jit = true;
    } else if (s == "--preload") {
      a.preload = true;
    } else if (s == "--replicas") {
      a.replicas = std::max(2, std::atoi(need("--replicas").c_str()));
    } else if (s == "--contend" && accepts_contend) {
      a.contend = true;
    } else if (s == "--load-policy" && accepts_contend) {
      a.load_policy = need("--load-policy");
    } else if (s == "--mode") {
      a.modes.push_back(need("--mode"));
    } else if (s == "--cores") {
      a.cores = std::max(1, std::atoi(need("--cores").c_str()));
    } else if (s == "-h" || s == "--help") {
      std::printf("%s", usage);
      std::exit(0);
    } else {
      std::fprintf(stderr, "unknown argument '%s'\n%s", s.c_str(), usage);
      std::exit(2);
    }
  }
  return a;
}

inline bool selected(const Args& a, const std::string& bench) {
  return a.only.empty() || std::find(a.only.begin(), a.only.end(), bench) != a.only.end();
}
inline bool mode_selected(const Args& a, const std::string& mode) {
  return a.modes.empty() || std::find(a.modes.begin(), a.modes.end(), mode) != a.modes.end();
}
inline bool cores_selected(const Args& a, int cores) { return a.cores == 0 || a.cores == cores; }

// The CPUs this process may use (taskset, cpusets), in order, as they were when the program
// started: the ones the runtime's workers use by default (core i on the i-th). Read before main()
// runs, because a runtime pins the thread that launches on it to its first CPU, after which that
// thread's own affinity says one CPU.
inline std::vector<int> read_allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    for (unsigned c = 0; c < std::thread::hardware_concurrency(); ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}
inline const std::vector<int> kProcessCpus = read_allowed_cpus();

inline std::vector<int> allowed_cpus() { return kProcessCpus; }

inline int machine_cores() { return static_cast<int>(allowed_cpus().size()); }

// Pins the calling thread to `cpu`; false when the OS refuses.
inline bool pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// STREAM triad a[i] = b[i] + s * c[i] over arrays well beyond the last-level cache, split over
// `threads` threads pinned one per CPU to the first `threads` CPUs of allowed_cpus(): the CPUs a
// runtime of that many cores runs on, whatever the calling thread is pinned to. Counts 3 arrays of
// traffic, as STREAM does. `affinity`, when given, receives each thread's CPU set as it ran.
inline double triad_gb_per_s(int threads, int runs, std::vector<std::vector<int>>* affinity = nullptr) {
  const size_t n = size_t{1} << 24;  // 64 MiB per array
  threads = std::max(threads, 1);
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const std::vector<int> cpus = allowed_cpus();
  if (affinity) affinity->assign(static_cast<size_t>(threads), {});
  auto pass = [&](int t) {
    pin_current_thread(cpus[static_cast<size_t>(t) % cpus.size()]);  // unpinned if refused: still a triad
    if (affinity) {
      cpu_set_t set;
      CPU_ZERO(&set);
      auto& mine = (*affinity)[static_cast<size_t>(t)];
      mine.clear();
      if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0)
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
          if (CPU_ISSET(cpu, &set)) mine.push_back(cpu);
    }
    const size_t lo = n * t / threads, hi = n * (t + 1) / threads;
    float* pa = a.data();
    const float* pb = b.data();
    const float* pc = c.data();
    for (size_t i = lo; i < hi; ++i) pa[i] = pb[i] + 3.0f * pc[i];
  };
  auto once = [&] {
    // Every part on a thread of its own: the calling thread may be pinned to one CPU.
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back(pass, t);
    for (auto& t : ts) t.join();
  };
  auto times = time_runs(once, 1, runs);
  return 3.0 * n * sizeof(float) / stats_of(times).median / 1e9;
}

inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      o += buf;
    } else {
      o += c;
    }
  }
  return o;
}

// Writes the results as JSON through sk::write_file (a temporary file renamed into place); the
// error names the path.
inline Status write_json(const std::string& path, const std::vector<Result>& results) {
  std::ostringstream f;
  f << "{\"machine\": {\"cores\": " << machine_cores() << ", \"isa\": \"" << Runtime::cpu_isa() << "\"},\n";
  f << " \"results\": [\n";
  auto number = [](double v, bool known) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.6g", v);
    return known ? std::string(buf) : std::string("null");
  };
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const bool ran = r.unsupported.empty();
    f << "  {\"bench\": \"" << json_escape(r.bench) << "\", \"mode\": \"" << json_escape(r.mode)
      << "\", \"cores\": " << r.cores << ", \"metric\": \"" << json_escape(r.metric)
      << "\", \"median\": " << number(r.median, ran) << ", \"min\": " << number(r.min, ran)
      << ", \"max\": " << number(r.max, ran) << ", \"runs\": " << (ran ? r.runs : 0) << ", \"unit\": \""
      << json_escape(r.unit) << "\"";
    if (!r.settings.empty()) f << ", \"settings\": \"" << json_escape(r.settings) << "\"";
    if (!r.ratios.empty()) {
      f << ", \"ratios\": {";
      const char* sep = "";
      for (const auto& [mode, ratio] : r.ratios) {
        f << sep << "\"" << json_escape(mode) << "\": " << number(ratio, true);
        sep = ", ";
      }
      f << "}";
    }
    if (!ran) f << ", \"unsupported\": \"" << json_escape(r.unsupported) << "\"";
    f << "}" << (i + 1 < results.size() ? "," : "") << "\n";
  }
  f << " ]}\n";
  return write_file(path, f.str());
}

// Prints one row per (bench, cores) with one column per mode and ratios against `baseline`.
inline void print_table(const std::vector<Result>& results, const std::vector<std::string>& modes,
                        const std::string& baseline) {
  std::printf("machine: %d cores, isa %s\n", machine_cores(), Runtime::cpu_isa().c_str());
  std::map<std::pair<std::string, int>, std::map<std::string, const Result*>> rows;
  std::vector<std::pair<std::string, int>> order;
  for (const Result& r : results) {
    auto key = std::make_pair(r.bench, r.cores);
    if (!rows.count(key)) order.push_back(key);
    rows[key][r.mode] = &r;
  }
  std::string unit = results.empty() ? "" : results.front().metric + " (" + results.front().unit + ", median)";
  std::printf("%-28s %5s", "bench", "cores");
  for (const std::string& m : modes) std::printf(" %14s", m.c_str());
  for (const std::string& m : modes)
    if (m != baseline) std::printf(" %16s", (m + "/" + baseline).c_str());
  std::printf("   %s\n", unit.c_str());
  for (const auto& key : order) {
    auto& row = rows[key];
    std::printf("%-28s %5d", key.first.c_str(), key.second);
    for (const std::string& m : modes) {
      if (row.count(m)) {
        std::printf(" %14.1f", row[m]->median);
      } else {
        std::printf(" %14s", "-");
      }
    }
    for (const std::string& m : modes) {
      if (m == baseline) continue;
      if (row.count(m) && row.count(baseline) && row[baseline]->median > 0) {
        std::printf(" %16.2f", row[m]->median / row[baseline]->median);
      } else {
        std::printf(" %16s", "-");
      }
    }
    std::printf("\n");
  }
}

}  // namespace sk::bench

#endif  // SUPERKERNEL_BENCH_BENCH_COMMON_H_
