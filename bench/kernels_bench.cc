// sk_bench_kernels: throughput of each built-in kernel at 1 and 2 cores, beside the memory
// bandwidth bound measured in the same run (bandwidth.h: the best of a read-only sweep and a
// STREAM triad on the runtime's CPUs; "%bound") and, for matmuls, oneDNN's matmul on
// the same shape. Kernels run as one-op graphs in graph mode, so one launch is included in
// every time (a few hundred ns, negligible for the large shapes that measure bandwidth).
//
//   build/bench/sk_bench_kernels [--json PATH] [--runs N] [--quick] [--only CASE]...
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>

#include "bandwidth.h"
#include "bench_common.h"
#include "kernel_bench.h"
#include "superkernel/ops.h"
#include "util/element.h"

namespace sk::bench {

std::vector<KernelBenchCase>& kernel_bench_registry() {
  static std::vector<KernelBenchCase> cases;
  return cases;
}

namespace {

std::vector<uint8_t> make_data(const BenchInput& in, uint32_t seed) {
  const size_t n = static_cast<size_t>(shape_numel(in.shape)), elem = dtype_size(in.dtype);
  std::vector<uint8_t> b(n * elem);
  std::mt19937 rng(seed);
  const bool integer = in.dtype == DType::kI8 || in.dtype == DType::kI32 || in.dtype == DType::kI64;
  for (size_t i = 0; i < n; ++i) {
    double v = !in.values.empty() ? in.values[i % in.values.size()]
               : integer ? static_cast<double>(std::uniform_int_distribution<int64_t>(static_cast<int64_t>(in.lo),
                                                                                      static_cast<int64_t>(in.hi))(rng))
                         : std::uniform_real_distribution<double>(in.lo, in.hi)(rng);
    store_element(static_cast<int32_t>(in.dtype), b.data() + i * elem, v);
  }
  return b;
}

const char* kUsage = "usage: sk_bench_kernels [--json PATH] [--runs N] [--quick] [--only CASE]... [--cores N]\n";

}  // namespace
}  // namespace sk::bench

int main(int argc, char** argv) {
  using namespace sk;
  using namespace sk::bench;
  Args args = parse_args(argc, argv, kUsage);
  // oneDNN's OpenMP threads must not spin on the CPUs the superkernel runtime's pinned workers
  // use between measurements (set before the OpenMP runtime starts).
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  const int max_cores = std::min(2, machine_cores());
  std::vector<Result> results;

  std::printf("machine: %d cores, isa %s\n", machine_cores(), Runtime::cpu_isa().c_str());
  // bound: "dram" (the case streams beyond the LLC: the bandwidth bound below) or "llc" (its bytes
  // fit the LLC: a cached read of its own footprint, measured in its rounds).
  std::printf("%-34s %5s %11s %9s %9s %8s %12s %9s %s\n", "case", "cores", "us/call", "GB/s", "GFLOP/s", "%bound",
              "oneDNN us", "ours/dnn", "bound");
  for (int cores = 1; cores <= max_cores; ++cores) {
    if (!cores_selected(args, cores)) continue;
    const int bw_runs = args.quick ? 3 : 7;
    BandwidthBound bound = measure_bandwidth_bound(cores, bw_runs);
    // The cases' rows wait for the bound: every case that streams beyond the LLC adds read-only
    // sweeps of its footprint, timed in its rounds, and the bound is the best of all sweeps.
    struct Row {
      std::string name;
      double us, gbs;
      std::string flops, dnn, ratio;
      double cached_bound;  // > 0: the case fits the LLC and this is its bound (cached reads)
    };
    std::vector<Row> rows;

    RuntimeOptions ro;
    ro.num_cores = cores;
    auto rt = Runtime::create(ro);
    if (!rt) {
      std::fprintf(stderr, "%s\n", rt.status().to_string().c_str());
      return 1;
    }
    for (const KernelBenchCase& c : kernel_bench_registry()) {
      if (!selected(args, c.name)) continue;
      Graph g(c.name);
      std::vector<Tensor> ins;
      std::vector<std::vector<uint8_t>> data;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        const BenchInput& in = c.inputs[i];
        data.push_back(make_data(in, static_cast<uint32_t>(i + 1)));
        bool state = false;
        for (auto [o, src] : c.in_place) state |= src == static_cast<int>(i);
        const std::string name = "in" + std::to_string(i);
        ins.push_back(state       ? g.variable(name, in.dtype, in.shape)
                      : in.weight ? g.constant(name, in.dtype, in.shape, data.back().data(), data.back().size())
                                  : g.input(name, in.dtype, in.shape));
      }
      OpSpec spec;
      spec.kind = OpKind::kCustom;
      spec.kernel = c.kernel;
      spec.name = c.name;
      spec.inputs = ins;
      spec.outputs = c.outputs;
      spec.attrs = c.attrs;
      if (!c.in_place.empty()) {
        spec.write_into.resize(c.outputs.size());
        for (auto [o, i] : c.in_place) spec.write_into[o] = ins[i];
      }
      auto outs = g.add_op(spec);
      for (size_t o = 0; o < outs.size(); ++o) g.output(outs[o], "out" + std::to_string(o));
      auto exe = (*rt)->compile(g, CompileOptions::for_mode(ExecutionMode::kGraph));
      if (!exe) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(), exe.status().to_string().c_str());
        return 1;
      }
      for (size_t i = 0; i < c.inputs.size(); ++i)
        if (!c.inputs[i].weight) (void)(*exe)->set_input("in" + std::to_string(i), data[i].data(), data[i].size());
      // Ours and oneDNN alternate in three rounds so the memory-bandwidth drift of a shared
      // machine hits both alike; each side's figure is the median of its samples.
      Status failed;
      std::vector<double> times, dnn_times;
      // A case whose bytes fit the LLC reads them from the caches on every call after the first, so
      // DRAM's bound bounds nothing: its bound is a cached read of its own footprint, in its rounds.
      const bool fits_llc = c.bytes > 0 && c.bytes <= static_cast<double>(llc_bytes());
      double cached_bound = 0.0;
      std::string dnn_why;
      const int rounds = c.onednn.m > 0 ? 3 : 1;
      const int per_round = std::max(1, args.runs / rounds);
      for (int round = 0; round < rounds; ++round) {
        auto t = time_runs(
            [&] {
              if (Status s = (*exe)->run(); !s) failed = s;
            },
            round == 0 ? 2 : 1, per_round);
        times.insert(times.end(), t.begin(), t.end());
        if (c.onednn.m > 0) {
          const double sec = onednn_matmul_seconds(c.onednn, cores, per_round, &dnn_why);
          if (sec > 0) dnn_times.push_back(sec);
        }
        // Each case's own footprint is read in its own rounds, cached if it fits the LLC, else as
        // read-only sweeps: this VM's bandwidth drifts by half within seconds, and a bound taken at
        // another moment bounded nothing (2 cores: sweep 34 GB/s, a GEMV seconds later 55).
        if (fits_llc)
          for (int streams : {1, 4})
            cached_bound = std::max(cached_bound,
                                    cached_read_gb_per_s(cores, static_cast<size_t>(c.bytes), per_round + 2, streams));
        else if (c.bytes > 0)
          for (bool huge : {false, true}) {
            const size_t footprint = static_cast<size_t>(c.bytes) >> 20 << 20;  // whole MiB: one row per size
            add_read_point(bound, {footprint, huge, read_sweep_point(cores, 2, footprint, huge), 1});
          }
      }
      if (!failed) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(), failed.to_string().c_str());
        return 1;
      }
      const Stats st = stats_of(times);
      const double gbs = c.bytes / st.median / 1e9, gflops = c.flops / st.median / 1e9;
      results.push_back({c.name, "graph", cores, "us_per_call", st.median * 1e6, st.min * 1e6, st.max * 1e6,
                         static_cast<int>(times.size()), "us"});
      results.push_back({c.name, "graph", cores, "gb_per_s", gbs, c.bytes / st.max / 1e9, c.bytes / st.min / 1e9,
                         static_cast<int>(times.size()), "GB/s"});
      if (c.flops > 0)
        results.push_back({c.name, "graph", cores, "gflop_per_s", gflops, c.flops / st.max / 1e9,
                           c.flops / st.min / 1e9, static_cast<int>(times.size()), "GFLOP/s"});
      char dnn[32] = "-", ratio[32] = "-";
      if (c.onednn.m > 0) {
        if (!dnn_times.empty()) {
          const Stats d = stats_of(dnn_times);
          results.push_back({c.name, "onednn", cores, "us_per_call", d.median * 1e6, d.min * 1e6, d.max * 1e6,
                             static_cast<int>(dnn_times.size()), "us"});
          std::snprintf(dnn, sizeof(dnn), "%.1f", d.median * 1e6);
          std::snprintf(ratio, sizeof(ratio), "%.2f", st.median / d.median);
        } else {
          std::snprintf(dnn, sizeof(dnn), "n/a");
          static bool told = false;
          if (!told) std::fprintf(stderr, "oneDNN comparison unavailable: %s\n", dnn_why.c_str());
          told = true;
        }
      }
      char flops_col[32] = "-";
      if (c.flops > 0) std::snprintf(flops_col, sizeof(flops_col), "%.1f", gflops);
      if (fits_llc)
        results.push_back(
            {c.name, "cached_read", cores, "bound_gb_per_s", cached_bound, cached_bound, cached_bound, rounds, "GB/s"});
      rows.push_back({c.name, st.median * 1e6, gbs, flops_col, dnn, ratio, cached_bound});
    }
    const double triad = bound.triad_gb_per_s;
    results.push_back({"stream_triad", "stream", cores, "gb_per_s", triad, triad, triad, bw_runs, "GB/s"});
    std::printf("%-34s %5d %11s %9.1f %9s %8.0f %12s %9s\n", "stream_triad", cores, "-", triad, "-",
                100.0 * triad / bound.gb_per_s, "-", "-");
    for (const ReadPoint& r : bound.reads) {
      const std::string name = "stream_read_" + std::to_string(r.footprint_bytes >> 20) + "m_" +
                               (r.huge_pages ? "2m_pages" : "4k_pages") + (r.streams > 1 ? "_4streams" : "");
      results.push_back({name, "stream", cores, "gb_per_s", r.gb_per_s, r.gb_per_s, r.gb_per_s, bw_runs, "GB/s"});
      std::printf("%-34s %5d %11s %9.1f %9s %8.0f %12s %9s\n", name.c_str(), cores, "-", r.gb_per_s, "-",
                  100.0 * r.gb_per_s / bound.gb_per_s, "-", "-");
    }
    results.push_back({"bandwidth_bound", "stream", cores, "gb_per_s", bound.gb_per_s, bound.gb_per_s, bound.gb_per_s,
                       bw_runs, "GB/s"});
    std::printf("%-34s %5d %11s %9.1f %9s %8s %12s %9s\n", "bandwidth_bound", cores, "-", bound.gb_per_s, "-", "100",
                "-", "-");
    for (const Row& r : rows)
      std::printf("%-34s %5d %11.2f %9.1f %9s %8.0f %12s %9s %s\n", r.name.c_str(), cores, r.us, r.gbs, r.flops.c_str(),
                  100.0 * r.gbs / (r.cached_bound > 0 ? r.cached_bound : bound.gb_per_s), r.dnn.c_str(),
                  r.ratio.c_str(), r.cached_bound > 0 ? "llc" : "dram");
    std::fflush(stdout);
  }
  if (!args.json.empty()) {
    if (sk::Status s = write_json(args.json, results); !s)
      return std::fprintf(stderr, "--json: %s\n", s.message().c_str()), 1;
    std::printf("wrote %s\n", args.json.c_str());
  }
  return 0;
}
