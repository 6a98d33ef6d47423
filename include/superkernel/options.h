// Compile options, with the names users of the original system know.
//
//   sk::CompileOptions opts = sk::CompileOptions::for_mode(sk::ExecutionMode::kSuperKernel);
//   // or, from text (CLI flags, config files): errors name the key.
//   if (sk::Status s = opts.set("super_kernel_debug_options.debug_sync_all", "1"); !s) ...
//
// The execution mode follows from two switches, so one flag A/Bs a model:
//   static_kernel_compile=false                              -> eager
//   static_kernel_compile=true,  super_kernel_optimize=false -> graph
//   static_kernel_compile=true,  super_kernel_optimize=true  -> superkernel
// (super_kernel_optimize without static_kernel_compile is an error.)
#ifndef SUPERKERNEL_OPTIONS_H_
#define SUPERKERNEL_OPTIONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "superkernel/status.h"

namespace sk {

enum class ExecutionMode { kEager, kGraph, kSuperKernel };
const char* execution_mode_name(ExecutionMode mode);
Expected<ExecutionMode> parse_execution_mode(std::string_view text);

// How much of the next sub-kernel's code a core touches before it needs it (preload_code).
enum class PreloadCode { kNone, kPerFunc, kMax };
const char* preload_code_name(PreloadCode mode);
// How the scheduler orders the cores of a super kernel where data flows between them (sync_choice).
enum class SyncChoice {
  kPointToPoint,  // a WAIT on every producer core that matters, wherever data flows
  kCost,          // per dependency the cheapest correct form: none, point-to-point, a group or full barrier
};
const char* sync_choice_name(SyncChoice choice);

// super_kernel_optimize_options (docs/OPTIONS.md says what each does; scopes override most)
struct SuperKernelOptimizeOptions {
  PreloadCode preload_code = PreloadCode::kNone;
  int split_mode = 0;  // 0: off; N > 0: see docs/OPTIONS.md
  bool stream_fusion = false;
  // 0: a kernel's prologue runs after the core's waits for its inputs; 1: before them; 2: also
  // before the previous sub-kernel's signal wait chain ends (docs/OPTIONS.md).
  int early_start = 0;
  // Cheap ops between two all-to-all boundaries run whole on every core (each writes its own
  // copy) instead of split plus a sync, where the cost model says it pays.
  bool recompute = false;
  SyncChoice sync_choice = SyncChoice::kPointToPoint;
  // Run graph and super kernel launches as generated native code (x86-64) instead of the
  // interpreter (traced and profiled launches still use the interpreter).
  bool jit = false;
  // Tiling-sink kernels (SK_TILING_SINK, e.g. grouped_matmul) fuse, their tiling computed inside
  // the super kernel once their inputs are ready. false: each one cuts the segment (TILING_SINK)
  // and runs unfused, tiled at the start of its own launch once the previous launch has joined.
  bool tiling_sink = true;
  int func_align = 0;  // bytes (a power of two, at most 4096) the JIT aligns each core's function to; 0 = 16
  // Kernel replication: load this many copies of each kernel package a sub-kernel comes from, at
  // distinct addresses; core c calls copy c % kernel_replicas. 0 or 1: off. At most 64.
  int kernel_replicas = 0;
  // Cache-maintenance regex lists: accepted and validated; no-ops on coherent CPUs.
  std::vector<std::string> dcci_before_kernel_start;
  std::vector<std::string> dcci_after_kernel_end;
  std::vector<std::string> dcci_disable_on_kernel;
};

// super_kernel_debug_options
struct SuperKernelDebugOptions {
  bool debug_sync_all = false;        // full barrier between every pair of sub-kernels
  bool debug_op_exec_trace = false;   // record per-core start/end of every sub-kernel
  int debug_per_op_max_core_num = 0;  // cap every sub-kernel's cores (0 = no cap)
  // Run op by op, each sub-kernel one core at a time, and fail when a core changed bytes outside
  // the ranges its access callback declared (slow; for testing kernel packages).
  bool debug_cross_core_sync_check = false;
};

struct CompileOptions {
  bool static_kernel_compile = true;
  bool super_kernel_optimize = false;
  SuperKernelOptimizeOptions super_kernel_optimize_options;
  SuperKernelDebugOptions super_kernel_debug_options;
  // false: every prefetch op (sk::prefetch) becomes a no-op, in every mode, to A/B its effect.
  bool prefetch = true;
  // Data dump: every op's outputs (name, shape, dtype, bytes) after each run, in every mode.
  bool dump = false;
  std::string dump_dir;  // empty: keep in memory only (Executable::dump())
  // Name of a compiler pass (or "all") whose result goes to CompileReport::pass_dumps.
  std::string print_after;
  // Most bytes the executable's arena (inputs, outputs, intermediates, workspaces) and its
  // variables (in storage of their own until bound to caller memory) may take together;
  // a graph that needs more fails to compile naming both figures. 0: the machine's physical
  // memory, so that no plan asks for memory the machine does not have.
  int64_t arena_limit_bytes = 0;
  // Path of a Chrome/Perfetto trace JSON written after every run (turns tracing on; docs/TRACING.md).
  std::string trace;

  static CompileOptions for_mode(ExecutionMode mode);
  ExecutionMode mode() const;

  // Sets one option from text. Keys: the field names above; nested ones as
  // "super_kernel_optimize_options.<name>" / "super_kernel_debug_options.<name>". Unknown keys,
  // values of the wrong type and bad regexes are errors naming the key.
  Status set(std::string_view key, std::string_view value);
  // Checks cross-option rules (e.g. super_kernel_optimize needs static_kernel_compile).
  Status validate() const;
  // Every key set() accepts, for help texts.
  static std::vector<std::string> keys();
};

// Checks a fusion-scope options string ("key=value:key=value", docs/OPTIONS.md, "Scope options")
// the way the compiler reads the options of scope `scope`, before any graph carries it: an
// unknown or repeated key and a bad value are errors naming the scope and the key (an unknown key
// also the known ones). Pairs without '=', which the compiler skips with a warning, are appended
// to `skipped` as such warnings.
//
//   if (sk::Status s = sk::check_scope_options("layer*", "feed-sync-all=1"); !s) ...
Status check_scope_options(std::string_view scope, std::string_view options,
                           std::vector<std::string>* skipped = nullptr);

}  // namespace sk

#endif  // SUPERKERNEL_OPTIONS_H_
