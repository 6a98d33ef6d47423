// Turns the interpreter's raw per-core records of one launch into the public TraceEvents: op and
// kernel names, run-relative times, and for each wait the producer op whose signal released it.
#ifndef SUPERKERNEL_RUNTIME_TRACE_RECORD_H_
#define SUPERKERNEL_RUNTIME_TRACE_RECORD_H_

#include <cstdint>
#include <vector>

#include "program/plan.h"
#include "program/program.h"
#include "runtime/cpu/interpreter.h"
#include "superkernel/trace.h"

namespace sk {

// `eager_op` >= 0: the launch is eager mode's one-op launch, whose op operand 0 stands for plan op
// `eager_op`; -1: op operands are plan op indices.
void append_launch_trace(const Plan& plan, const Launch& launch, int32_t launch_index,
                         const std::vector<std::vector<cpu::RawTraceEvent>>& raw, int64_t run_start, int32_t eager_op,
                         std::vector<TraceEvent>& out);

// A host op on the calling thread (core -1).
void append_host_trace(const PlanOp& op, int32_t step, int64_t start_ns, int64_t end_ns, std::vector<TraceEvent>& out);

}  // namespace sk

#endif  // SUPERKERNEL_RUNTIME_TRACE_RECORD_H_
