// `superkernel bench`: the three execution modes side by side on one model, its weights and its
// inputs. Checks that their outputs are bitwise identical, then times the decode step of every mode
// in interleaved rounds (so drift on a busy machine hits all modes alike) and reports two shares
// measured in the same run:
//   outside kernels     1 - (sum over the step's launches of the busiest core's kernel time, host
//                       ops included) / step, both from the fastest of a few traced steps: the
//                       share of the step that dispatch, syncs, barriers and idle cores take on
//                       the critical core. Never negative: the kernel times are intervals inside
//                       that step, with the cache state of the step itself;
//   % bound             bytes the step must read / step time / the memory-bandwidth bound on the
//                       cores the runtime uses (bench/bandwidth.h: the best of a read-only sweep
//                       and a STREAM triad, one pinned thread per core).
// With --contend the same interleaved rounds are timed again beside one busy process (bench/
// busy_load.h), unpinned and then pinned to the last CPU the runtime uses, and every mode's step is
// printed with its ratio to its quiet step and to graph mode under the same load.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "bandwidth.h"
#include "bench_common.h"
#include "busy_load.h"
#include "commands.h"

namespace sk::cli {
namespace {

constexpr ExecutionMode kModes[] = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};

struct ModeRun {
  ExecutionMode mode;
  std::unique_ptr<Generator> gen;
  std::vector<float> outputs;  // logits of every step, concatenated
  std::vector<int32_t> ids;    // sampled ids of every step
  std::vector<double> step_s;
};

// Median absolute deviation: the spread of a sample that a few preempted runs (on a busy
// machine) do not blow up, unlike the standard deviation.
double mad(const std::vector<double>& v) {
  const double median = bench::stats_of(v).median;
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::abs(x - median));
  return bench::stats_of(dev).median;
}

// Decode steps after the prefill: decode.new_tokens ids per sequence take one fewer (the first id
// comes from the prefill); the FFN-only model steps decode.new_tokens times.
int decode_steps(const config::Config& cfg, const Model& model) {
  return model.arch == Architecture::kLongCatFlashAfd ? cfg.decode.new_tokens : cfg.decode.new_tokens - 1;
}

// Prefill and the decode steps, keeping every step's outputs for the comparison.
Status generate(const config::Config& cfg, const Model& model, ModeRun& run, Progress& progress) {
  const std::string mode = execution_mode_name(run.mode);
  auto record = [&] {
    run.outputs.insert(run.outputs.end(), run.gen->logits().begin(), run.gen->logits().end());
    run.ids.insert(run.ids.end(), run.gen->ids().begin(), run.gen->ids().end());
  };
  progress.update(mode + ": prefill");
  SK_RETURN_IF_ERROR(run.gen->prefill(make_prompts(cfg, model, {})).with_context(mode + " prefill"));
  record();
  const int steps = decode_steps(cfg, model);
  for (int i = 0; i < steps; ++i) {
    progress.update(mode + ": decode step " + std::to_string(i + 1) + "/" + std::to_string(steps));
    SK_RETURN_IF_ERROR(run.gen->decode_step().with_context(mode + " decode step " + std::to_string(i + 1)));
    record();
  }
  return Status::ok();
}

// Empty when `run` matches `ref` bit for bit; otherwise where they first differ.
std::string difference(const ModeRun& ref, const ModeRun& run, size_t values_per_step) {
  if (run.ids != ref.ids) {
    for (size_t i = 0; i < ref.ids.size(); ++i) {
      if (run.ids[i] != ref.ids[i]) {
        return "sampled id " + std::to_string(i) + ": " + std::to_string(run.ids[i]) + " vs " +
               std::to_string(ref.ids[i]);
      }
    }
  }
  if (run.outputs.size() != ref.outputs.size()) return "output sizes differ";
  for (size_t i = 0; i < ref.outputs.size(); ++i) {
    if (std::memcmp(&run.outputs[i], &ref.outputs[i], sizeof(float)) != 0) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "step %zu, value %zu: %.9g vs %.9g", i / values_per_step, i % values_per_step,
                    run.outputs[i], ref.outputs[i]);
      return buf;
    }
  }
  return "";
}

// Feeds the decode executable `exe` the inputs of `gen`'s last step.
Status feed_last_step(const Model& model, Generator& gen, Executable& exe) {
  if (model.arch == Architecture::kLongCatFlashAfd) {
    HostTensor h = *gen.decode_executable().tensor(models::kHiddenStates);
    return exe.set_input(models::kHiddenStates, h.data, h.bytes());
  }
  SK_RETURN_IF_ERROR(gen.bind_caches(exe));
  return models::set_step_inputs(exe, gen.last_inputs());
}

// The decode step run once more in eager mode with the data dump on: every op's outputs, which
// the byte count and the isolated kernels read.
Expected<std::unique_ptr<Executable>> dumped_step(const config::Config& cfg, const Model& model, Runtime& rt,
                                                  Generator& gen) {
  CompileOptions opts = cfg.compile_options(ExecutionMode::kEager);
  opts.dump = true;
  auto exe = rt.compile(model.decode, opts);
  if (!exe) return exe.status();
  SK_RETURN_IF_ERROR(feed_last_step(model, gen, **exe));
  SK_RETURN_IF_ERROR((*exe)->run());
  return exe;
}

// Bytes one decode step must read: every constant once, except that an embedding table counts
// only the rows looked up and expert weights only the experts that received tokens (read from a
// data dump of the step), plus the cached context the attention reads.
Expected<double> step_bytes(const Model& model, const Executable& exe, Generator& gen) {
  std::map<std::string, const DumpRecord*> dumped;
  for (const DumpRecord& r : exe.dump()) dumped[r.tensor] = &r;

  const Graph& g = model.decode;
  const std::vector<int32_t>& context = gen.last_inputs().context_lens;
  std::map<int32_t, double> read;  // tensor -> bytes
  for (size_t i = 0; i < g.num_ops(); ++i) {
    const OpInfo& op = g.op(i);
    const bool grouped = op.kernel.rfind("grouped_matmul", 0) == 0;
    const bool embedding = op.kernel.rfind("embedding", 0) == 0;
    const bool attention = op.kernel.find("attention") != std::string::npos;
    double expert_share = 1.0;
    int64_t experts = 0;
    if (grouped && op.inputs.size() > 1) {
      auto it = dumped.find(g.tensor(op.inputs[1]).name);
      if (it != dumped.end() && it->second->dtype == DType::kI32) {
        const auto* counts = reinterpret_cast<const int32_t*>(it->second->data.data());
        experts = static_cast<int64_t>(it->second->data.size() / sizeof(int32_t));
        const int64_t used = std::count_if(counts, counts + experts, [](int32_t c) { return c > 0; });
        expert_share = experts ? static_cast<double>(used) / static_cast<double>(experts) : 1.0;
      }
    }
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const int32_t id = op.inputs[k];
      const TensorInfo& t = g.tensor(id);
      const TensorInfo& base = t.base >= 0 ? g.tensor(t.base) : t;
      const int32_t key = t.base >= 0 ? t.base : id;
      double bytes = 0;
      if (base.kind == TensorKind::kConstant) {
        bytes = static_cast<double>(base.storage_bytes);
        if (embedding && k == 1 && !base.shape.empty() && base.shape[0] > 0) {
          bytes *= static_cast<double>(shape_numel(g.tensor(op.inputs[0]).shape)) / static_cast<double>(base.shape[0]);
        } else if (grouped && !base.shape.empty() && base.shape[0] == experts) {
          bytes *= expert_share;
        }
      } else if (base.kind == TensorKind::kVariable && attention && base.shape.size() >= 2 && !context.empty()) {
        // Paged cache [num_blocks, block_size, ...]: each sequence reads its context's rows.
        const double row = static_cast<double>(base.storage_bytes) / static_cast<double>(base.shape[0] * base.shape[1]);
        for (int32_t len : context) bytes += row * len;
      }
      read[key] = std::max(read[key], bytes);
    }
  }
  double total = 0;
  for (const auto& [id, bytes] : read) total += bytes;
  return total;
}

// The decode step traced in one mode: the fastest of a few runs, with its wall time.
struct TracedStep {
  std::vector<TraceEvent> events;
  double step_s = 0;
  double kernel_s = 0;  // sum over launches of the busiest core's kernel time, plus host ops
};

// Kernel time of a traced step as the critical core saw it: per launch the core that ran kernels
// (runs, prologues, tilings) longest, plus the host ops between launches. Launches of one
// executable run one after another, so this never exceeds the step.
double critical_kernel_seconds(const std::vector<TraceEvent>& events) {
  int64_t ns = 0;
  for (const LaunchTime& launch : account_waits(events).launches) {
    int64_t busiest = 0;
    for (const CoreTime& core : launch.cores) busiest = std::max(busiest, core.compute_ns);
    ns += busiest;
  }
  for (const TraceEvent& e : events)
    if (e.kind == TraceKind::kHost) ns += e.end_ns - e.start_ns;
  return static_cast<double>(ns) * 1e-9;
}

constexpr int kTracedRuns = 5;

Expected<TracedStep> traced_step(const config::Config& cfg, const Model& model, Runtime& rt, ModeRun& run) {
  CompileOptions opts = cfg.compile_options(run.mode);
  opts.super_kernel_debug_options.debug_op_exec_trace = true;
  auto exe = rt.compile(model.decode, opts);
  if (!exe) return exe.status();
  SK_RETURN_IF_ERROR(feed_last_step(model, *run.gen, **exe));
  TracedStep best;
  for (int r = 0; r <= kTracedRuns; ++r) {
    const double t0 = bench::now_seconds();
    SK_RETURN_IF_ERROR((*exe)->run());
    const double step = bench::now_seconds() - t0;
    if (r == 0) continue;  // warms the new executable's arena
    if (best.events.empty() || step < best.step_s) {
      best.step_s = step;
      best.events = (*exe)->trace();
    }
  }
  best.kernel_s = critical_kernel_seconds(best.events);
  return best;
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

int bench_command(const BenchArgs& args) {
  Progress progress(args.common.quiet);
  auto opened = open_session(
      args.common, progress,
      [&](config::Config& cfg) -> Status {
        if (args.runs > 0) cfg.bench.runs = args.runs;
        return Status::ok();
      },
      /*cache_copies=*/3);
  if (auto* code = std::get_if<int>(&opened)) return *code;
  Session& s = *std::get<std::unique_ptr<Session>>(opened);
  const config::Config& cfg = s.cfg;
  const Model& model = *s.model;
  const int cores = s.runtime->num_cores();
  if (decode_steps(cfg, model) < 1) {
    progress.done();
    return fail(Status::invalid_argument(cfg.where("decode.new_tokens").to_string() +
                                         ": key 'decode.new_tokens': bench times a decode step: expected at least 2 "
                                         "new tokens (the first comes from the prefill), got " +
                                         std::to_string(cfg.decode.new_tokens)),
                kExitBadConfig);
  }

  std::vector<ModeRun> runs;
  for (ExecutionMode mode : kModes) {
    progress.update(std::string("compiling ") + execution_mode_name(mode));
    auto gen = Generator::create(cfg, model, *s.runtime, cfg.compile_options(mode));
    if (!gen) {
      progress.done();
      const int code = failure_code(cfg, gen.status());
      // A config error is the same whichever mode met it first; other failures say which mode.
      return fail(code == kExitBadConfig ? gen.status()
                                         : gen.status().with_context(std::string("mode ") + execution_mode_name(mode)),
                  code);
    }
    runs.push_back({mode, std::move(*gen), {}, {}, {}});
    if (Status st = generate(cfg, model, runs.back(), progress); !st) {
      progress.done();
      return fail(st, kExitFailed);
    }
  }
  const size_t per_step = runs.front().gen->logits().size();
  for (size_t m = 1; m < runs.size(); ++m) {
    const std::string diff = difference(runs.front(), runs[m], std::max<size_t>(per_step, 1));
    if (!diff.empty()) {
      progress.done();
      return fail(
          Status::internal(std::string("outputs differ between eager and ") + execution_mode_name(runs[m].mode) + " (" +
                           diff + "); the modes must be bitwise identical"),
          kExitMismatch);
    }
  }

  // Interleaved rounds, every mode once per round, so drift on a busy machine hits all alike.
  // With --contend every load's rounds also last at least bench::kContendSeconds, so that the medians
  // span many of the scheduler's slices (milliseconds) rather than a few.
  const double min_seconds = args.contend ? bench::kContendSeconds : 0.0;
  auto time_rounds = [&](int warmup, const std::string& what, std::vector<std::vector<double>>& step_s) -> Status {
    step_s.assign(runs.size(), {});
    double timed_from = 0;
    for (int r = -warmup; r < cfg.bench.runs || bench::now_seconds() - timed_from < min_seconds; ++r) {
      if (r == 0) timed_from = bench::now_seconds();
      if (r >= 0 && r % 5 == 0 && r < cfg.bench.runs)
        progress.update(what + "timing round " + std::to_string(r + 1) + "/" + std::to_string(cfg.bench.runs));
      for (size_t m = 0; m < runs.size(); ++m) {
        const double t0 = bench::now_seconds();
        SK_RETURN_IF_ERROR(runs[m].gen->rerun_step());
        if (r >= 0) step_s[m].push_back(bench::now_seconds() - t0);
      }
    }
    return Status::ok();
  };
  {
    std::vector<std::vector<double>> step_s;
    if (Status st = time_rounds(cfg.bench.warmup, "", step_s); !st) {
      progress.done();
      return fail(st, kExitFailed);
    }
    for (size_t m = 0; m < runs.size(); ++m) runs[m].step_s = std::move(step_s[m]);
  }
  // --contend: the same rounds beside one busy process, unpinned (the scheduler places it) and then
  // pinned to the last CPU the runtime uses (a worker's, not the launching thread's), then quiet
  // again once it stopped ("after").
  struct LoadedRounds {
    bench::LoadPlacement load;
    std::vector<std::vector<double>> step_s;  // per mode
    int64_t one_thread_launches = 0;          // the load policy's, over the load's rounds
    int64_t shared_calls = 0;                 // calls shared with the chunk helper, the same
  };
  std::vector<LoadedRounds> loaded;
  if (args.contend) {
    const std::vector<int>& cpus = bench::kProcessCpus;
    std::vector<std::function<Status()>> steps;
    for (ModeRun& run : runs) steps.push_back([&run] { return run.gen->rerun_step(); });
    for (bench::LoadPlacement load :
         {bench::LoadPlacement::kUnpinned, bench::LoadPlacement::kPinned, bench::LoadPlacement::kAfter}) {
      const std::string name = bench::load_placement_name(load);
      bench::BusyLoad busy(load, cpus[static_cast<size_t>(std::min<int>(cores, static_cast<int>(cpus.size())) - 1)],
                           cpus);
      const bool busy_load = load != bench::LoadPlacement::kAfter;
      if (busy_load && !busy.running()) {
        progress.done();
        return fail(Status::internal("--contend: cannot start the " + name + " load: " + busy.error()), kExitFailed);
      }
      LoadedRounds lr{load, {}};
      // 50 ms of untimed steps first: the scheduler and the runtime's load policy take a few
      // milliseconds to see a load start or stop.
      Status st = bench::settle(steps, bench::kSettleSeconds);
      const int64_t one_thread_before = s.runtime->one_thread_launches();
      const int64_t shared_before = s.runtime->shared_calls();
      if (st) st = time_rounds(cfg.bench.warmup, name + " load: ", lr.step_s);
      lr.one_thread_launches = s.runtime->one_thread_launches() - one_thread_before;
      lr.shared_calls = s.runtime->shared_calls() - shared_before;
      const bool alive = busy.stop();
      if (st && busy_load && !alive)
        st = Status::internal("--contend: the " + name + " load stopped during the rounds");
      if (!st) {
        progress.done();
        return fail(st, kExitFailed);
      }
      loaded.push_back(std::move(lr));
    }
  }
  progress.update("counting the bytes a step reads");
  auto dumped = dumped_step(cfg, model, *s.runtime, *runs.front().gen);
  if (!dumped) return fail(dumped.status().with_context("dumping a decode step"), kExitFailed);
  auto bytes = step_bytes(model, **dumped, *runs.front().gen);
  if (!bytes) return fail(bytes.status().with_context("step bytes"), kExitFailed);
  dumped->reset();
  std::vector<TracedStep> traced;
  for (ModeRun& run : runs) {
    progress.update(std::string("tracing ") + execution_mode_name(run.mode));
    auto t = traced_step(cfg, model, *s.runtime, run);
    if (!t) return fail(t.status().with_context("tracing the decode step"), kExitFailed);
    traced.push_back(std::move(*t));
  }
  progress.update("bandwidth bound (read-only sweep and triad) on " + std::to_string(cores) + " cores");
  const bench::BandwidthBound bound = bench::measure_bandwidth_bound(cores, 5);
  const double triad = bound.triad_gb_per_s;
  progress.done();

  const std::string name = std::filesystem::path(cfg.file).stem().string();
  // The timed step is the last decode step: it attends to the prompt and every token appended.
  const int context = cfg.decode.prompt_tokens + decode_steps(cfg, model);
  const std::string test = "decode b" + std::to_string(cfg.decode.batch) + " ctx" + std::to_string(context);
  std::printf("machine: %d cores, isa %s, load policy %s (chunk helper %s); config %s", cores,
              Runtime::cpu_isa().c_str(), cfg.runtime.load_policy.c_str(),
              cfg.runtime.chunk_bytes == 0 ? "off" : (std::to_string(cfg.runtime.chunk_bytes >> 10) + " KiB").c_str(),
              cfg.file.c_str());
  // Under MPI every figure is rank 0's: its cores, its share of the weights, its step time.
  if (s.comm)
    std::printf("; rank 0 of %d (tp %d, ep %d), cores and size per rank", s.comm->size(), cfg.parallel.tp,
                cfg.parallel.ep);
  std::printf("\n\n");
  std::printf(
      "| model | size | mode | cores | test | step ms | t/s | vs eager | vs graph | outside kernels | %% bound |\n");
  std::printf("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  std::vector<bench::Result> results;
  const double eager_s = bench::stats_of(runs[0].step_s).median, graph_s = bench::stats_of(runs[1].step_s).median;
  for (size_t i = 0; i < runs.size(); ++i) {
    const ModeRun& run = runs[i];
    const TracedStep& t = traced[i];
    const bench::Stats st = bench::stats_of(run.step_s);
    std::vector<double> tps;
    for (double x : run.step_s) tps.push_back(cfg.decode.batch / x);
    const bench::Stats tp = bench::stats_of(tps);
    const double outside = t.step_s > 0 ? (t.step_s - t.kernel_s) / t.step_s : 0;
    const double share = *bytes / st.median / (bound.gb_per_s * 1e9);
    const char* mode = execution_mode_name(run.mode);
    std::printf("| %s | %s | %s | %d | %s | %.3f ± %.3f | %.1f ± %.1f | %.2f | %.2f | %.1f%% | %.1f%% |\n",
                model.name.c_str(), mib(static_cast<double>(model.weight_bytes)).c_str(), mode, cores, test.c_str(),
                st.median * 1e3, mad(run.step_s) * 1e3, tp.median, mad(tps), st.median / eager_s, st.median / graph_s,
                outside * 100, share * 100);
    const int n = static_cast<int>(run.step_s.size());
    results.push_back(
        {name + "/" + test, mode, cores, "step_latency", st.median * 1e3, st.min * 1e3, st.max * 1e3, n, "ms"});
    results.push_back({name + "/" + test, mode, cores, "tokens_per_s", tp.median, tp.min, tp.max, n, "tokens/s"});
    results.push_back(
        {name + "/" + test, mode, cores, "outside_kernels_fraction", outside, outside, outside, kTracedRuns, "1"});
    results.push_back({name + "/" + test, mode, cores, "traced_step_latency", t.step_s * 1e3, t.step_s * 1e3,
                       t.step_s * 1e3, kTracedRuns, "ms"});
    results.push_back({name + "/" + test, mode, cores, "traced_kernel_time", t.kernel_s * 1e3, t.kernel_s * 1e3,
                       t.kernel_s * 1e3, kTracedRuns, "ms"});
    results.push_back({name + "/" + test, mode, cores, "bound_fraction", share, share, share, n, "1"});
  }
  results.push_back({"stream_triad", "stream", cores, "gb_per_s", triad, triad, triad, 5, "GB/s"});
  results.push_back({"stream_read", "stream", cores, "gb_per_s", bound.read_gb_per_s, bound.read_gb_per_s,
                     bound.read_gb_per_s, 5, "GB/s"});
  results.push_back(
      {"bandwidth_bound", "stream", cores, "gb_per_s", bound.gb_per_s, bound.gb_per_s, bound.gb_per_s, 5, "GB/s"});
  results.push_back({name + "/" + test, "bytes", cores, "step_bytes", *bytes, *bytes, *bytes, 1, "bytes"});

  std::printf(
      "\nmedian ± median absolute deviation of %d interleaved steps per mode (after %d warm-up rounds); "
      "vs = step time ratio\n",
      static_cast<int>(runs.front().step_s.size()), cfg.bench.warmup);
  std::printf("outside kernels = 1 - kernel time / step, both from the fastest of %d traced steps per mode:",
              kTracedRuns);
  for (size_t i = 0; i < runs.size(); ++i)
    std::printf(" %s %.3f of %.3f ms%s", execution_mode_name(runs[i].mode), traced[i].kernel_s * 1e3,
                traced[i].step_s * 1e3, i + 1 < runs.size() ? "," : "\n");
  std::printf(
      "  (kernel time: per launch the core that ran sub-kernels longest, plus host ops; the rest of the step is "
      "dispatch, syncs, barriers and cores waiting; tracing adds a clock read per instruction, counted outside)\n");
  std::printf("step reads %s; %s (the runtime's CPUs, one pinned thread each); %% bound = bytes / step / bound\n",
              mib(*bytes).c_str(), bench::describe(bound).c_str());
  std::printf("outputs: prefill and %d decode steps bitwise identical in eager, graph and superkernel\n",
              decode_steps(cfg, model));
  if (!loaded.empty()) {
    std::printf(
        "\nbeside one busy process (step ms, median of at least %d interleaved steps per mode and %.2f s per load; "
        "x quiet = step under the load / quiet step; vs graph = step / graph mode's step under the same load):\n",
        cfg.bench.runs, bench::kContendSeconds);
    std::printf("| load | mode | step ms | x quiet | vs graph |\n|---|---|---:|---:|---:|\n");
    for (size_t m = 0; m < runs.size(); ++m)
      std::printf("| quiet | %s | %.3f | 1.00 | %.2f |\n", execution_mode_name(runs[m].mode),
                  bench::stats_of(runs[m].step_s).median * 1e3, bench::stats_of(runs[m].step_s).median / graph_s);
    for (const LoadedRounds& lr : loaded) {
      const char* load = bench::load_placement_name(lr.load);
      const double graph_loaded = bench::stats_of(lr.step_s[1]).median;
      for (size_t m = 0; m < runs.size(); ++m) {
        const bench::Stats st = bench::stats_of(lr.step_s[m]);
        const double quiet = bench::stats_of(runs[m].step_s).median;
        const char* mode = execution_mode_name(runs[m].mode);
        std::printf("| %s | %s | %.3f | %.2f | %.2f |\n", load, mode, st.median * 1e3, st.median / quiet,
                    st.median / graph_loaded);
        bench::Result r(name + "/" + test, std::string(mode) + "@" + load, cores, "step_latency", st.median * 1e3,
                        st.min * 1e3, st.max * 1e3, static_cast<int>(lr.step_s[m].size()), "ms");
        r.settings = std::string("load=") + load;
        r.ratios["quiet"] = st.median / quiet;
        r.ratios["graph"] = st.median / graph_loaded;
        results.push_back(r);
      }
    }
    std::printf(
        "  (unpinned: the busy process may run on any CPU of this process; pinned: on CPU %d, the last "
        "the runtime uses; after: quiet again, once it stopped; docs/PERFORMANCE.md, \"Under a co-located "
        "load\")\n",
        bench::kProcessCpus[static_cast<size_t>(std::min<int>(cores, static_cast<int>(bench::kProcessCpus.size())) -
                                                1)]);
    // What the load policy did meanwhile (docs/OPTIONS.md, load_policy and chunk_bytes).
    std::printf("  (launches on one thread / calls shared with the chunk helper, over each load's timed rounds:");
    for (const LoadedRounds& lr : loaded)
      std::printf(" %s %lld / %lld%s", bench::load_placement_name(lr.load),
                  static_cast<long long>(lr.one_thread_launches), static_cast<long long>(lr.shared_calls),
                  &lr == &loaded.back() ? ")\n" : ";");
  }
  std::printf("\ntop waits of the traced decode step per mode (docs/TRACING.md):\n");
  for (size_t i = 0; i < runs.size(); ++i)
    std::printf("%s: %s", execution_mode_name(runs[i].mode), format_waits(account_waits(traced[i].events), 5).c_str());
  if (!args.json.empty()) {
    if (Status w = bench::write_json(args.json, results); !w) return fail(w.with_context("--json"), kExitFailed);
  }
  return kExitOk;
}

}  // namespace sk::cli
