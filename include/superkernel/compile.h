// What compilation produced: the report every executable carries, and `explain`, which shows
// segments, cut reasons and per-core programs as text without running anything.
//
//   auto text = sk::explain(*runtime, graph, opts);
//   if (text) std::cout << *text;
#ifndef SUPERKERNEL_COMPILE_H_
#define SUPERKERNEL_COMPILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "superkernel/graph.h"
#include "superkernel/options.h"
#include "superkernel/status.h"
#include "superkernel/trace.h"

namespace sk {

class Runtime;

// Why a fusion segment ended where it did.
enum class CutReason {
  kGraphEnd,       // the last op
  kOpUnsupported,  // a kernel without SK_FUSIBLE
  kHostOp,         // a host callback
  kScopeBoundary,  // the next op belongs to another scope (or none)
  kNotFused,       // the op is outside every scope / in a "do not fuse" scope
  kStreamLimit,    // the next op is on another stream and stream fusion is off
  kScopeBypassed,  // strict-scope-check=bypass turned the scope off
  kSplitMode,      // split-mode divided the segment
  kTilingSink,     // a tiling-sink kernel with tiling-sink off: it runs unfused, tiled in its own launch
  kCommunication,  // communication other than the collectives that fuse (comm.broadcast, ...): its own launch
};
const char* cut_reason_name(CutReason reason);

struct SegmentReport {
  int32_t id = 0;
  std::string scope;         // scope name, or "<graph>" when the whole graph fuses
  std::vector<int32_t> ops;  // graph op indices, execution order
  int32_t num_cores = 0;
  CutReason cut = CutReason::kGraphEnd;
  int32_t cut_op = -1;  // the op that caused the cut (-1 at the graph end)
  std::string cut_detail;
  // Stream fusion: each stream's cores ("stream 'moe' cores 2-2 (LimitCoreNum 1)") and every
  // point where an op waits for an op of another stream ("op 'a' (stream 'moe') waits for op 'b'
  // (stream 'default'): data" or ": event 'e'").
  std::vector<std::string> partitions;
  std::vector<std::string> sync_points;
  // How the launch synchronises, with the settings that shaped it: "early-start=1
  // sync-choice=cost: 0 waits, 0 signals, 5 barriers, 2 prologues before their waits, 1 prologue
  // in the launch before".
  std::string schedule;
  // super_kernel_optimize_options.recompute: per cheap row-wise op, whether it runs whole on
  // every core instead of split plus a sync, and why ("op 'n' (rms_norm.f32): recomputed on
  // cores 0,1, ..." / "...: not recomputed: too costly (...)"), or "off: <why>".
  std::vector<std::string> recompute;
  // Each collective (a fusible `comm.*` kernel, include/superkernel/comm.h) inside the segment:
  // "op 'o_proj.all_reduce' (comm.all_reduce.f32) on core 0 (stream 'default')". The op's other
  // cores go on with what does not depend on it; its consumers wait for that core.
  std::vector<std::string> collectives;
};

// An op that runs outside every super kernel, and why.
struct UnfusedOp {
  int32_t op = -1;
  CutReason reason = CutReason::kNotFused;
};

struct CompileReport {
  ExecutionMode mode = ExecutionMode::kGraph;
  size_t num_ops = 0;
  size_t num_launches = 0;      // launches per run
  int64_t arena_bytes = 0;      // planned memory: inputs, outputs, intermediates, workspaces
  int64_t peak_live_bytes = 0;  // most bytes live at once (lower bound for any plan)
  int64_t unplanned_bytes = 0;  // what every arena tensor in its own buffer would take
  // Variables (KV caches), outside the arena: each in zero pages of its own, which take memory
  // only once written and are released when the variable is bound to caller memory
  // (Executable::bind_variable), so a cache several executables share is paid once.
  int64_t variable_bytes = 0;
  std::vector<SegmentReport> segments;
  std::vector<UnfusedOp> unfused;  // superkernel mode: kernel and host ops outside segments
  std::vector<std::string> warnings;
  std::string program_text;   // per-core programs (graph and superkernel modes)
  std::string pass_timings;   // "verify 0.1 ms, memory_plan 0.3 ms, ..."
  std::string pass_dumps;     // CompileOptions::print_after: state after the named pass(es)
  size_t jit_code_bytes = 0;  // code the JIT generated for the launches (0: they run on the interpreter)
};

// Segments, cut reasons and per-core programs for `graph` under `options`, as text that is the
// same for the same graph, options and core count (pass timings appear only with print_after).
Expected<std::string> explain(Runtime& runtime, const Graph& graph, const CompileOptions& options);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILE_H_
