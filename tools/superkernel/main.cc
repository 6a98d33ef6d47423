// superkernel: run, benchmark and explain a model described by a YAML config.
//
//   superkernel run configs/longcat-mini.yaml --tokens 8
//   superkernel bench configs/longcat-mini.yaml --json bench.json
//   superkernel explain configs/longcat-mini.yaml
//
// Results go to stdout; progress and errors to stderr; the exit code says what failed.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "config/suggest.h"
#include "superkernel/output_file.h"

namespace {

using sk::cli::kExitUsage;

constexpr const char* kExitCodes =
    "Exit codes: 0 success, 1 compiling or running failed, 2 bad arguments, 3 invalid or unsupported config "
    "(file:line in the message), 4 bench: the execution modes' outputs differ.\n"
    "Config keys: docs/CONFIG.md.";

const std::vector<std::string> kCommands = {"run", "bench", "explain", "trace", "report"};
const std::vector<std::string> kModes = {"eager", "graph", "superkernel"};

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "superkernel: error: %s\nRun with --help for more information.\n", message.c_str());
  return kExitUsage;
}

// One of `choices`, with a "did you mean" for a slip (CLI11's IsMember names none).
CLI::Validator one_of(const std::vector<std::string>& choices) {
  return CLI::Validator(
      [choices](std::string& value) -> std::string {
        if (std::find(choices.begin(), choices.end(), value) != choices.end()) return "";
        return "expected one of " + joined(choices) + ", got '" + value + "'" +
               sk::config::did_you_mean(value, choices);
      },
      "{" + joined(choices) + "}");
}

void add_common(CLI::App& cmd, sk::cli::CommonArgs& args) {
  cmd.add_option("CONFIG", args.config, "YAML config file (docs/CONFIG.md)")->required();
  cmd.add_flag("-q,--quiet", args.quiet, "no progress line on stderr");
  cmd.add_flag("-v,--verbose", args.verbose,
               "list on stderr the checkpoint's config.json keys that do not change the logits and the tensors "
               "not read");
  cmd.add_flag("--allow-unused-tensors", args.allow_unused_tensors,
               "run a checkpoint holding tensors the model does not read (an error otherwise; -v lists them)");
  cmd.footer(kExitCodes);
  // Unknown arguments are collected (not rejected by CLI11), so that the error can suggest the
  // option that was meant.
  cmd.allow_extras();
}

// Before CLI11 sees them: the arguments up to the command must be a known command or a global
// flag, so that `superkernel rnu` says which command was meant.
int check_command(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (std::find(kCommands.begin(), kCommands.end(), a) != kCommands.end()) return 0;
    if (a == "-h" || a == "--help" || a == "--version") return 0;
    if (!a.empty() && a[0] == '-') {
      return usage_error("unknown option '" + a + "'" + sk::config::did_you_mean(a, {"--help", "--version"}) +
                         "; expected a command: " + joined(kCommands));
    }
    return usage_error("unknown command '" + a + "'" + sk::config::did_you_mean(a, kCommands) +
                       " (commands: " + joined(kCommands) + ")");
  }
  return 0;
}

// What CLI11 collected as extras for `cmd`: an error naming the first, with the option that
// was probably meant.
int check_extras(const CLI::App& cmd) {
  const std::vector<std::string> extras = cmd.remaining();
  if (extras.empty()) return 0;
  std::vector<std::string> names;
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : opt->get_snames()) names.push_back("-" + n);
  }
  const std::string where = "superkernel " + cmd.get_name();
  for (const std::string& e : extras) {
    if (e.size() > 1 && e[0] == '-') {
      const std::string flag = e.substr(0, e.find('='));
      return usage_error("unknown option '" + flag + "' for '" + where + "'" + sk::config::did_you_mean(flag, names) +
                         " (options: " + joined(names) + ")");
    }
  }
  return usage_error("unexpected argument '" + extras.front() + "': '" + where + "' takes one CONFIG file");
}

// An output file that cannot be written fails before the work starts, not after it: the file is
// opened as it will be written (a temporary name beside it, sk::OutputFile) and dropped again, so
// an existing file is left as it is. A write that fails later (a full disk) is the command's error.
int check_writable(const std::string& flag, const std::string& path) {
  auto f = sk::OutputFile::open(path);
  if (!f) return usage_error(flag + ": " + f.status().message());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sk::cli;
  CLI::App app{"superkernel: runs, benchmarks and explains models in the eager, graph and superkernel modes",
               "superkernel"};
  app.footer(kExitCodes);
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("superkernel ") + SK_VERSION);

  RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "prefill a prompt, decode tokens, print their ids and latencies");
  add_common(*run_cmd, run.common);
  CLI::Option* prompt = run_cmd->add_option(
      "--prompt", run.prompt, "prompt token ids, comma-separated (default: decode.prompt_tokens ids from the config)");
  run_cmd
      ->add_option("--tokens", run.tokens,
                   "new token ids to produce per sequence: the first is sampled from the prefill's logits, each "
                   "further one takes a decode step, so N ids take N-1 decode steps; FFN-only models: N FFN "
                   "steps (default: decode.new_tokens)")
      ->check(CLI::Range(1, 1 << 20));
  run_cmd->add_option("--mode", run.mode, "execution mode (default: model_config.exe_mode)")->check(one_of(kModes));

  BenchArgs bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench", "eager, graph and superkernel side by side on the same weights and inputs (outputs must match)");
  add_common(*bench_cmd, bench.common);
  bench_cmd->add_option("--json", bench.json, "also write the results as JSON to this path");
  bench_cmd->add_option("--runs", bench.runs, "timed decode steps per mode (default: bench.runs)")
      ->check(CLI::Range(1, 100000));
  bench_cmd
      ->add_option("--dtype", bench.dtypes,
                   "sweep: weight types, comma-separated (f32, bf16, f16, w8a8, w4a8, w4; default model.dtype)")
      ->delimiter(',')
      ->check(one_of({"f32", "bf16", "f16", "w8a8", "w4a8", "w4"}));
  bench_cmd->add_option("--threads", bench.threads, "sweep: runtime.cores values, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  bench_cmd->add_option("--pp", bench.prefill, "sweep: prefill tests of N prompt tokens, comma-separated (pp512)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  bench_cmd->add_option("--batch", bench.batches, "sweep: batched-decode tests, batch sizes comma-separated (1,8,32)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  bench_cmd->add_option("--format", bench.format, "sweep output: md (default) or llama-bench (its column layout)")
      ->check(one_of({"md", "llama-bench"}));
  bench_cmd->add_option("--mode", bench.mode, "sweep: execution mode (default superkernel)")->check(one_of(kModes));
  bench_cmd->add_flag("--contend", bench.contend,
                      "also time every mode (a sweep: every point) beside one busy process, unpinned and then pinned "
                      "to the last CPU the runtime uses, with the ratio to the quiet time (and to graph mode)");

  ExplainArgs explain;
  CLI::App* explain_cmd = app.add_subcommand("explain",
                                             "memory plan, segments per layer, cut reasons, streams, core limits and "
                                             "per-core programs");
  add_common(*explain_cmd, explain.common);
  explain_cmd->add_flag("--programs", explain.programs, "also print every per-core instruction");

  TraceArgs trace;
  CLI::App* trace_cmd = app.add_subcommand(
      "trace", "trace one decode step per core in every mode and write Chrome/Perfetto JSON (docs/TRACING.md)");
  add_common(*trace_cmd, trace.common);
  trace_cmd->add_option("-o,--output", trace.output, "trace JSON file to write")->required();
  trace_cmd->add_option("--mode", trace.mode, "trace only this mode (default: all three)")->check(one_of(kModes));

  TraceArgs report;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "self-contained HTML report: per-core timelines of every mode, segments, step times, waits");
  add_common(*report_cmd, report.common);
  report_cmd->add_option("-o,--output", report.output, "HTML file to write")->required();
  report_cmd->add_option("--mode", report.mode, "report only this mode (default: all three)")->check(one_of(kModes));

  if (int rc = check_command(argc, argv)) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help and --version print on stdout and succeed
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  for (const CLI::App* cmd : {run_cmd, bench_cmd, explain_cmd, trace_cmd, report_cmd})
    if (cmd->parsed())
      if (int rc = check_extras(*cmd)) return rc;

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
  if (run_cmd->parsed()) {
    run.prompt_given = prompt->count() > 0;
    return finish(run_command(run));
  }
  if (bench_cmd->parsed()) {
    if (sk::cli::is_sweep(bench)) {
      if (!bench.json.empty())
        return usage_error(
            "--json is not implemented for a sweep (--dtype, --threads, --pp, --batch, --format, "
            "--mode); it writes the three-mode comparison");
      return sk::cli::bench_sweep_command(bench);
    }
    if (!bench.json.empty())
      if (int rc = check_writable("--json", bench.json)) return rc;
    return finish(bench_command(bench));
  }
  if (trace_cmd->parsed()) {
    if (int rc = check_writable("-o", trace.output)) return rc;
    return finish(trace_command(trace));
  }
  if (report_cmd->parsed()) {
    if (int rc = check_writable("-o", report.output)) return rc;
    return finish(report_command(report));
  }
  return finish(explain_command(explain));
}
