// One traced decode step of a config's model in each execution mode, for `superkernel trace` and
// `superkernel report`.
#ifndef SUPERKERNEL_TOOLS_TRACE_CAPTURE_H_
#define SUPERKERNEL_TOOLS_TRACE_CAPTURE_H_

#include <vector>

#include "commands.h"
#include "superkernel/trace.h"

namespace sk::cli {

struct TracedMode {
  ExecutionMode mode = ExecutionMode::kGraph;
  CompileReport report;
  std::vector<TraceEvent> trace;  // the fastest timed decode step
  std::vector<double> step_s;     // decode steps timed with tracing on
};

// Prefill, one decode step, then `timed_runs` (>= 1) reruns of it, every mode (or only `mode`
// when not empty).
Expected<std::vector<TracedMode>> trace_modes(const Session& s, const std::string& mode, int timed_runs,
                                              Progress& progress);

}  // namespace sk::cli

#endif  // SUPERKERNEL_TOOLS_TRACE_CAPTURE_H_
