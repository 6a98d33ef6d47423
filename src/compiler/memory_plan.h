// Pass: memory_plan. Liveness-based buffer reuse over execution order.
//
// Every input, output, intermediate and op workspace gets an arena offset. Variables do not:
// each gets storage of its own (Plan::allocate_variables), which binding it to caller memory
// releases, so that a KV cache shared by several executables is paid once. Inputs live for the
// whole run; outputs from their definition to the end; intermediates from
// their first write to their last use through any view. Buffers are placed greedily, largest
// first, at the lowest offset that does not overlap a buffer whose lifetime intersects (the
// "greedy by size" strategy). Dependencies are later computed over these memory ranges, so reuse
// creates no hazards that the scheduler does not see. With op streams given (superkernel mode),
// buffers touched by different sets of streams never share bytes: stream-fused partitions run
// concurrently, and a shared byte would order them by a false dependency. Lifetimes are positions
// in the execution order, which may differ from the index order of the ops.
#ifndef SUPERKERNEL_COMPILER_MEMORY_PLAN_H_
#define SUPERKERNEL_COMPILER_MEMORY_PLAN_H_

#include <vector>

#include "program/plan.h"

namespace sk {

struct MemoryPlanOptions {
  bool reuse = true;  // false: every buffer gets its own bytes (eager mode, data dump)
  // Per plan op: its stream. Empty: streams play no part in reuse.
  std::vector<int32_t> op_stream;
  // Plan op indices in execution order (the recompute pass appends ops that run beside earlier
  // ones). Empty: index order.
  std::vector<int32_t> order;
  // Per plan op: -1, or a later plan op through which this op's inputs stay live (a recomputed
  // op's inputs are read on every core until its consumers end, so reusing their bytes sooner
  // would add a wait).
  std::vector<int32_t> inputs_live_until;
};

// Fills plan.memory and every op's workspace_offset.
void plan_memory(Plan& plan, const MemoryPlanOptions& options);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_MEMORY_PLAN_H_
