// The subcommands of `superkernel` and what they share: exit codes, the arguments each takes and
// the session (config, runtime, model) every command starts from.
#ifndef SUPERKERNEL_TOOLS_COMMANDS_H_
#define SUPERKERNEL_TOOLS_COMMANDS_H_

#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "config/config.h"
#include "model_session.h"

namespace sk::cli {

// Exit codes (also in `superkernel --help`).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,     // compiling or running failed
  kExitUsage = 2,      // bad command-line arguments
  kExitBadConfig = 3,  // the config file, its model or its checkpoint is invalid or unsupported
  kExitMismatch = 4,   // bench: the execution modes' outputs differ
};

// Prints `s` on stderr ("superkernel: error: ...") and returns `code`.
int fail(const Status& s, int code);
// The exit code of a failure to compile or run: kExitBadConfig when the message points at a line
// of the config file (the config caused it), kExitFailed otherwise.
int failure_code(const config::Config& cfg, const Status& s);

struct CommonArgs {
  std::string config;
  bool quiet = false;
  bool verbose = false;               // also list what loading the model left aside (Model::notes)
  bool allow_unused_tensors = false;  // checkpoint tensors no graph reads: listed with -v, not an error
};

struct RunArgs {
  CommonArgs common;
  std::string prompt;         // comma-separated token ids
  bool prompt_given = false;  // --prompt was on the command line (an empty one is an error)
  int tokens = 0;             // new ids per sequence; 0: decode.new_tokens
  std::string mode;           // empty: model_config.exe_mode
};

struct BenchArgs {
  CommonArgs common;
  std::string json;
  int runs = 0;          // 0: bench.runs
  bool contend = false;  // also time every mode beside one busy process (unpinned, then pinned)
};

struct ExplainArgs {
  CommonArgs common;
  bool programs = false;  // also every per-core instruction (sk::explain's full text)
};

// A config loaded and turned into a runtime and model graphs.
struct Session {
  config::Config cfg;
  std::shared_ptr<Runtime> runtime;
  std::unique_ptr<Model> model;
};

// Loads the config, lets `adjust` override keys from the command line, then starts the runtime
// and builds the model. On failure returns the exit code (after printing the error).
// `cache_copies`: how many copies of the model's caches the command keeps at once (one per live
// Generator), for the memory check before the weights are made.
using AdjustConfig = std::function<Status(config::Config&)>;
std::variant<std::unique_ptr<Session>, int> open_session(const CommonArgs& args, Progress& progress,
                                                         const AdjustConfig& adjust = {}, int cache_copies = 1);

struct TraceArgs {
  CommonArgs common;
  std::string output;
  std::string mode;  // empty: every mode, side by side
};

// The cut reason of a segment in plain words (explain, report).
const char* plain_words(CutReason reason);

int run_command(const RunArgs& args);
int bench_command(const BenchArgs& args);
int explain_command(const ExplainArgs& args);
int trace_command(const TraceArgs& args);
int report_command(const TraceArgs& args);

}  // namespace sk::cli

#endif  // SUPERKERNEL_TOOLS_COMMANDS_H_
