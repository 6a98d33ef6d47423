// superkernel: run, benchmark and explain a model described by a YAML config.
//
//   superkernel run configs/longcat-mini.yaml --tokens 8
//   superkernel bench configs/longcat-mini.yaml --json bench.json
//   superkernel explain configs/longcat-mini.yaml
//
// Results go to stdout; progress and errors to stderr; the exit code says what failed.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <string>

#include "commands.h"

namespace {

constexpr const char* kExitCodes =
    "Exit codes: 0 success, 1 compiling or running failed, 2 bad arguments, 3 invalid or unsupported config "
    "(file:line in the message), 4 bench: the execution modes' outputs differ.\n"
    "Config keys: docs/CONFIG.md.";

void add_common(CLI::App& cmd, sk::cli::CommonArgs& args) {
  cmd.add_option("CONFIG", args.config, "YAML config file (docs/CONFIG.md)")->required();
  cmd.add_flag("-q,--quiet", args.quiet, "no progress line on stderr");
  cmd.add_flag("-v,--verbose", args.verbose,
               "list on stderr the checkpoint's config.json keys that do not change the logits and the tensors "
               "not read");
  cmd.add_flag("--allow-unused-tensors", args.allow_unused_tensors,
               "run a checkpoint holding tensors the model does not read (an error otherwise; -v lists them)");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sk::cli;
  CLI::App app{"superkernel: runs, benchmarks and explains models in the eager, graph and superkernel modes",
               "superkernel"};
  app.footer(kExitCodes);
  app.require_subcommand(1);

  RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "prefill a prompt, decode tokens, print their ids and latencies");
  add_common(*run_cmd, run.common);
  run_cmd->add_option("--prompt", run.prompt, "prompt token ids, comma-separated (default: from the config)");
  run_cmd->add_option("--tokens", run.tokens, "tokens to decode per sequence (default: decode.new_tokens)")
      ->check(CLI::Range(1, 1 << 20));
  run_cmd->add_option("--mode", run.mode, "execution mode (default: model_config.exe_mode)")
      ->check(CLI::IsMember({"eager", "graph", "superkernel"}));
  run_cmd->footer(kExitCodes);

  BenchArgs bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "eager, graph and superkernel side by side on the same weights and inputs (outputs must match)");
  add_common(*bench_cmd, bench.common);
  bench_cmd->add_option("--json", bench.json, "also write the results as JSON to this path");
  bench_cmd->add_option("--runs", bench.runs, "timed decode steps per mode (default: bench.runs)")
      ->check(CLI::Range(1, 100000));
  bench_cmd->footer(kExitCodes);

  ExplainArgs explain;
  CLI::App* explain_cmd =
      app.add_subcommand("explain", "segments per layer, cut reasons, streams, core limits and per-core programs");
  add_common(*explain_cmd, explain.common);
  explain_cmd->add_flag("--programs", explain.programs, "also print every per-core instruction");
  explain_cmd->footer(kExitCodes);

  TraceArgs trace;
  CLI::App* trace_cmd = app.add_subcommand(
      "trace", "trace one decode step per core in every mode and write Chrome/Perfetto JSON (docs/TRACING.md)");
  add_common(*trace_cmd, trace.common);
  trace_cmd->add_option("-o,--output", trace.output, "trace JSON file to write")->required();
  trace_cmd->add_option("--mode", trace.mode, "trace only this mode (default: all three)")
      ->check(CLI::IsMember({"eager", "graph", "superkernel"}));
  trace_cmd->footer(kExitCodes);

  TraceArgs report;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "self-contained HTML report: per-core timelines of every mode, segments, step times, waits");
  add_common(*report_cmd, report.common);
  report_cmd->add_option("-o,--output", report.output, "HTML file to write")->required();
  report_cmd->add_option("--mode", report.mode, "report only this mode (default: all three)")
      ->check(CLI::IsMember({"eager", "graph", "superkernel"}));
  report_cmd->footer(kExitCodes);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints on stdout and succeeds; every other parse error is a usage error.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  // Under mpirun only rank 0 shows progress (every rank still prints its errors), and the files
  // the other ranks write get their rank in the name (file.json -> file.rank1.json).
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    const char* rank = std::getenv(var);
    if (!rank || std::string(rank) == "0") continue;
    for (CommonArgs* c : {&run.common, &bench.common, &explain.common, &trace.common, &report.common}) c->quiet = true;
    for (std::string* path : {&bench.json, &trace.output, &report.output}) {
      if (path->empty()) continue;
      const size_t slash = path->rfind('/'), dot = path->rfind('.');
      const size_t at = dot != std::string::npos && (slash == std::string::npos || dot > slash) ? dot : path->size();
      path->insert(at, std::string(".rank") + rank);
    }
    break;
  }
  if (run_cmd->parsed()) return finish(run_command(run));
  if (bench_cmd->parsed()) return finish(bench_command(bench));
  if (trace_cmd->parsed()) return finish(trace_command(trace));
  if (report_cmd->parsed()) return finish(report_command(report));
  return finish(explain_command(explain));
}
