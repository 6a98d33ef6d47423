// `superkernel bench` with --dtype, --threads, --pp, --batch or --format llama-bench: one execution
// mode over a grid of weight types, core counts and tests, one row per point, in a Markdown table
// or in llama-bench's column layout (model | size | params | backend | threads | test | t/s) so
// that the two tables can be pasted side by side. Tests:
//   pp N            prefill of one N-token prompt from an empty cache: t/s = N / prefill time
//                   (llama-bench's ppN);
//   tg @ dD         one decode step of batch 1 at depth D (tokens already cached): t/s = 1 / step;
//   tg bB @ dD      one decode step of B sequences at depth D: t/s = B / step (batched decode).
// Every point builds its model afresh (weights mapped, converted or quantised once per point) and
// times its runs back to back; the points run one after another. With --contend each point is
// timed again beside one busy process, unpinned and then pinned to the last CPU the point's
// runtime uses (bench/busy_load.h), and a second table gives those times and their ratio to the
// quiet one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_common.h"
#include "busy_load.h"
#include "commands.h"

namespace sk::cli {
namespace {

struct Test {
  enum class Kind { kPrefill, kDecode };
  Kind kind = Kind::kDecode;
  int tokens = 0;  // prefill: prompt tokens; decode: batch
};

struct Row {
  std::string model, dtype, test;
  int64_t weight_bytes = 0;
  double params = 0;
  int threads = 0;
  std::vector<double> tokens_per_s;
  double step_ms = 0;  // median time of one timed run
  // --contend: the median beside the busy process, unpinned and pinned (ms).
  double unpinned_ms = 0, pinned_ms = 0;
};

// Bytes of the weights as a model file holds them: the constants less the RoPE table (which
// depends on the cache length, not on the model).
int64_t weight_file_bytes(const Graph& g) {
  int64_t bytes = 0;
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& t = g.tensor(static_cast<int32_t>(i));
    if (t.kind == TensorKind::kConstant && t.name != "rope_cos_sin") bytes += t.storage_bytes;
  }
  return bytes;
}

// Parameters the weights stand for, as llama-bench counts them (every weight element, a 4-bit
// value counting as one): constants except the RoPE table and the 4-bit scales and zero points.
// Tiled 4-bit weights count the padding of a last partial 128-input step too (none when the
// input size is a multiple of 128, as in every model measured here).
double count_params(const Graph& g) {
  double n = 0;
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& t = g.tensor(static_cast<int32_t>(i));
    if (t.kind != TensorKind::kConstant || t.name == "rope_cos_sin") continue;
    auto ends = [&](const std::string& suffix) {
      return t.name.size() >= suffix.size() &&
             t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends(".scales") || ends(".qzeros") || ends(".scale")) continue;
    n += static_cast<double>(shape_numel(t.shape)) * (ends(".qweight") ? 2.0 : 1.0);
  }
  return n;
}

std::string size_text(int64_t bytes) {
  char buf[32];
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  if (mib < 1024) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", mib);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", mib / 1024.0);
  }
  return buf;
}

std::string params_text(double n) {
  char buf[32];
  if (n < 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2f M", n / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f B", n / 1e9);
  }
  return buf;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double stdev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// Measures one point, or returns the exit code after printing the error.
std::variant<Row, int> measure(const BenchArgs& args, const std::string& dtype, int threads, const Test& test,
                               ExecutionMode mode) {
  Progress progress(args.common.quiet);
  auto opened = open_session(
      args.common, progress,
      [&](config::Config& cfg) -> Status {
        if (args.runs > 0) cfg.bench.runs = args.runs;
        if (!dtype.empty()) {
          cfg.model.dtype = dtype;  // build_options parses every weight type, w8a8 included
          cfg.model.w8a8 = false;
        }
        if (threads > 0) cfg.runtime.cores = threads;
        if (test.kind == Test::Kind::kPrefill) {
          cfg.decode.batch = 1;
          cfg.decode.prompt_tokens = test.tokens;
          cfg.decode.new_tokens = 2;
        } else {
          cfg.decode.batch = test.tokens;
        }
        cfg.decode.sampling = {};
        return Status::ok();
      },
      /*cache_copies=*/1);
  if (auto* code = std::get_if<int>(&opened)) return *code;
  Session& s = *std::get<std::unique_ptr<Session>>(opened);
  const config::Config& cfg = s.cfg;
  const Model& model = *s.model;
  if (model.arch == Architecture::kLongCatFlashAfd) {
    progress.done();
    return fail(Status::unimplemented("bench --pp/--batch/--format: the FFN-only model has no prefill or decode step"),
                kExitUsage);
  }
  if (test.kind == Test::Kind::kDecode && cfg.decode.new_tokens < 2) {
    progress.done();
    return fail(Status::invalid_argument(cfg.where("decode.new_tokens").to_string() +
                                         ": key 'decode.new_tokens': bench times a decode step: expected at least 2"),
                kExitBadConfig);
  }
  progress.update(std::string("compiling ") + execution_mode_name(mode));
  auto gen = Generator::create(cfg, model, *s.runtime, cfg.compile_options(mode));
  if (!gen) {
    progress.done();
    return fail(gen.status(), failure_code(cfg, gen.status()));
  }
  Row row;
  row.model = model.name;
  row.dtype = cfg.model.w8a8 ? "w8a8" : cfg.model.dtype;
  row.weight_bytes = weight_file_bytes(model.decode);
  row.params = count_params(model.decode);
  row.threads = s.runtime->num_cores();
  auto run_failed = [&](const Status& st) {
    progress.done();
    return fail(st, kExitFailed);
  };
  if (Status st = (*gen)->prefill(make_prompts(cfg, model, {})); !st) return run_failed(st);
  std::vector<double> times;
  if (test.kind == Test::Kind::kPrefill) {
    row.test = "pp" + std::to_string(test.tokens);
    // A long prefill takes seconds: as llama-bench's default, at most 5 repetitions.
    const int runs = std::min(cfg.bench.runs, 5);
    for (int r = -1; r < runs; ++r) {
      progress.update(row.test + " run " + std::to_string(r + 2) + "/" + std::to_string(runs + 1));
      const double t0 = bench::now_seconds();
      if (Status st = (*gen)->rerun_prefill(); !st) return run_failed(st);
      if (r >= 0) times.push_back(bench::now_seconds() - t0);
    }
  } else {
    const int steps = cfg.decode.new_tokens - 1;
    for (int i = 0; i < steps; ++i)
      if (Status st = (*gen)->decode_step(); !st) return run_failed(st);
    const int depth = cfg.decode.prompt_tokens + steps - 1;  // tokens cached before the timed step
    row.test =
        (test.tokens == 1 ? std::string("tg") : "tg b" + std::to_string(test.tokens)) + " @ d" + std::to_string(depth);
    for (int r = -cfg.bench.warmup; r < cfg.bench.runs; ++r) {
      const double t0 = bench::now_seconds();
      if (Status st = (*gen)->rerun_step(); !st) return run_failed(st);
      if (r >= 0) times.push_back(bench::now_seconds() - t0);
    }
  }
  for (double t : times) row.tokens_per_s.push_back(test.tokens / t);
  row.step_ms = bench::stats_of(times).median * 1e3;
  if (args.contend) {
    // The same run beside one busy process: untimed runs while the scheduler and the load policy
    // see it, then at least as many runs as quiet, for at least bench::kContendSeconds.
    const std::vector<int>& cpus = bench::kProcessCpus;
    const int last_cpu = cpus[static_cast<size_t>(std::min<int>(row.threads, static_cast<int>(cpus.size())) - 1)];
    const std::vector<std::function<Status()>> run = {
        [&] { return test.kind == Test::Kind::kPrefill ? (*gen)->rerun_prefill() : (*gen)->rerun_step(); }};
    for (bench::LoadPlacement load : {bench::LoadPlacement::kUnpinned, bench::LoadPlacement::kPinned}) {
      const std::string name = bench::load_placement_name(load);
      progress.update(row.test + " beside a busy process (" + name + ")");
      bench::BusyLoad busy(load, last_cpu, cpus);
      if (!busy.running())
        return run_failed(Status::internal("--contend: cannot start the " + name + " load: " + busy.error()));
      Status st = bench::settle(run, bench::kSettleSeconds);
      std::vector<double> loaded;
      const double start = bench::now_seconds();
      while (st && (loaded.size() < times.size() || bench::now_seconds() - start < bench::kContendSeconds)) {
        const double t0 = bench::now_seconds();
        st = run[0]();
        loaded.push_back(bench::now_seconds() - t0);
      }
      if (!busy.stop() && st) st = Status::internal("--contend: the " + name + " load stopped during the runs");
      if (!st) return run_failed(st);
      (load == bench::LoadPlacement::kUnpinned ? row.unpinned_ms : row.pinned_ms) =
          bench::stats_of(loaded).median * 1e3;
    }
  }
  progress.done();
  return row;
}

void print_llama_bench(const std::vector<Row>& rows) {
  std::printf("| %-30s | %10s | %10s | %-11s | %7s | %15s | %20s |\n", "model", "size", "params", "backend", "threads",
              "test", "t/s");
  std::printf(
      "| ------------------------------ | ---------: | ---------: | ----------- | ------: | --------------: | "
      "-------------------: |\n");
  for (const Row& r : rows) {
    char tps[64];
    std::snprintf(tps, sizeof(tps), "%.2f ± %.2f", mean(r.tokens_per_s), stdev(r.tokens_per_s));
    const std::string model = r.model + " " + r.dtype;
    std::printf("| %-30s | %10s | %10s | %-11s | %7d | %15s | %20s |\n", model.c_str(),
                size_text(r.weight_bytes).c_str(), params_text(r.params).c_str(), "superkernel", r.threads,
                r.test.c_str(), tps);
  }
}

void print_markdown(const std::vector<Row>& rows, ExecutionMode mode) {
  std::printf("| model | weights | size | params | mode | cores | test | ms per run | t/s (median) |\n");
  std::printf("|---|---|---:|---:|---|---:|---|---:|---:|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s | %s | %s | %d | %s | %.3f | %.2f |\n", r.model.c_str(), r.dtype.c_str(),
                size_text(r.weight_bytes).c_str(), params_text(r.params).c_str(), execution_mode_name(mode), r.threads,
                r.test.c_str(), r.step_ms, bench::stats_of(r.tokens_per_s).median);
  }
}

// --contend: every point's quiet, unpinned and pinned times (ms) and the loaded ones' ratio to quiet.
void print_contended(const std::vector<Row>& rows) {
  std::printf("\nbeside one busy process (ms per run, median; x quiet = loaded / quiet):\n");
  std::printf("| model | weights | cores | test | quiet ms | unpinned ms | x quiet | pinned ms | x quiet |\n");
  std::printf("|---|---|---:|---|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %d | %s | %.3f | %.3f | %.2f | %.3f | %.2f |\n", r.model.c_str(), r.dtype.c_str(),
                r.threads, r.test.c_str(), r.step_ms, r.unpinned_ms, r.unpinned_ms / r.step_ms, r.pinned_ms,
                r.pinned_ms / r.step_ms);
  std::printf(
      "  (unpinned: the busy process may run on any CPU of this process; pinned: on the last CPU each point's "
      "runtime uses; docs/PERFORMANCE.md, \"Under a co-located load\")\n");
}

}  // namespace

bool is_sweep(const BenchArgs& args) {
  return !args.dtypes.empty() || !args.threads.empty() || !args.prefill.empty() || !args.batches.empty() ||
         args.format == "llama-bench" || !args.mode.empty();
}

int bench_sweep_command(const BenchArgs& args) {
  auto parsed_mode = parse_execution_mode(args.mode.empty() ? "superkernel" : args.mode);
  const ExecutionMode mode = parsed_mode ? *parsed_mode : ExecutionMode::kSuperKernel;
  const std::vector<std::string> dtypes = args.dtypes.empty() ? std::vector<std::string>{""} : args.dtypes;
  const std::vector<int> threads = args.threads.empty() ? std::vector<int>{0} : args.threads;
  std::vector<Test> tests;
  for (int n : args.prefill) tests.push_back({Test::Kind::kPrefill, n});
  for (int b : args.batches) tests.push_back({Test::Kind::kDecode, b});
  if (args.batches.empty()) tests.push_back({Test::Kind::kDecode, 0});  // 0: the config's decode.batch
  std::vector<Row> rows;
  for (const std::string& dtype : dtypes) {
    for (int t : threads) {
      for (Test test : tests) {
        if (test.kind == Test::Kind::kDecode && test.tokens == 0) {
          auto cfg = config::load_config(args.common.config);
          if (!cfg) return fail(cfg.status(), kExitBadConfig);
          test.tokens = cfg->decode.batch;
        }
        auto row = measure(args, dtype, t, test, mode);
        if (auto* code = std::get_if<int>(&row)) return *code;
        rows.push_back(std::move(std::get<Row>(row)));
      }
    }
  }
  if (args.format == "llama-bench") {
    print_llama_bench(rows);
  } else {
    print_markdown(rows, mode);
  }
  if (args.contend) print_contended(rows);
  std::printf(
      "\n%s mode; pp N: one N-token prompt from an empty cache, t/s = N / prefill (at most 5 runs after 1 warm-up); "
      "tg [bB] @ dD: one decode step of B sequences (1 when not shown) with D tokens cached, t/s = B / step "
      "(bench.runs runs after bench.warmup); t/s %s\n",
      execution_mode_name(mode), args.format == "llama-bench" ? "mean ± sample standard deviation" : "median");
  return kExitOk;
}

}  // namespace sk::cli
