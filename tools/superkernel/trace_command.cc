// `superkernel trace`: one decode step of every execution mode traced per core and written as
// Chrome/Perfetto trace JSON (one process per mode, one thread per core, signal->wait arrows).
#include "bench_common.h"
#include "trace_capture.h"

namespace sk::cli {

Expected<std::vector<TracedMode>> trace_modes(const Session& s, const std::string& mode, int timed_runs,
                                              Progress& progress) {
  std::vector<ExecutionMode> modes = {ExecutionMode::kEager, ExecutionMode::kGraph, ExecutionMode::kSuperKernel};
  if (!mode.empty()) {
    auto m = parse_execution_mode(mode);
    if (!m) return m.status();
    modes = {*m};
  }
  std::vector<TracedMode> out;
  for (ExecutionMode m : modes) {
    const std::string name = execution_mode_name(m);
    progress.update("tracing " + name);
    CompileOptions opts = s.cfg.compile_options(m);
    opts.super_kernel_debug_options.debug_op_exec_trace = true;
    auto gen = Generator::create(s.cfg, *s.model, *s.runtime, opts);
    // A config error (file:line) reads the same whichever mode met it first.
    if (!gen)
      return failure_code(s.cfg, gen.status()) == kExitBadConfig ? gen.status()
                                                                 : gen.status().with_context("mode " + name);
    SK_RETURN_IF_ERROR((*gen)->prefill(make_prompts(s.cfg, *s.model, {})).with_context(name + " prefill"));
    SK_RETURN_IF_ERROR((*gen)->decode_step().with_context(name + " decode step"));
    TracedMode t;
    t.mode = m;
    // Keep the fastest step's trace: on a busy machine the others may hold a preemption.
    double fastest = 0;
    for (int r = 0; r < timed_runs; ++r) {
      const double t0 = bench::now_seconds();
      SK_RETURN_IF_ERROR((*gen)->rerun_step().with_context(name + " decode step"));
      t.step_s.push_back(bench::now_seconds() - t0);
      if (r == 0 || t.step_s.back() < fastest) {
        fastest = t.step_s.back();
        t.trace = (*gen)->decode_executable().trace();
      }
    }
    t.report = (*gen)->decode_executable().report();
    out.push_back(std::move(t));
  }
  return out;
}

int trace_command(const TraceArgs& args) {
  Progress progress(args.common.quiet);
  auto opened = open_session(args.common, progress);
  if (auto* code = std::get_if<int>(&opened)) return *code;
  const Session& s = *std::get<std::unique_ptr<Session>>(opened);
  auto traced = trace_modes(s, args.mode, 1, progress);
  progress.done();
  if (!traced) return fail(traced.status(), failure_code(s.cfg, traced.status()));
  std::vector<TraceRun> runs;
  for (TracedMode& t : *traced) runs.push_back({execution_mode_name(t.mode), std::move(t.trace)});
  if (Status st = write_chrome_trace(args.output, runs); !st) return fail(st, kExitFailed);
  size_t events = 0;
  for (const TraceRun& r : runs) events += r.events.size();
  std::printf("wrote %s: %zu events of one decode step in %zu mode(s); open it in ui.perfetto.dev\n",
              args.output.c_str(), events, runs.size());
  return kExitOk;
}

}  // namespace sk::cli
