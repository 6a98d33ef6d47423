// The bound `superkernel bench` compares a step with: every kernel of the step timed in isolation,
// as a one-op graph of its own fed the values it saw in the step, prologue included.
//
//   auto t = isolated_kernel_seconds(runtime, graph, step_exe_with_dump, {.flush_bytes = 64 << 20});
//   // overhead fraction = (step - *t) / step
#ifndef SUPERKERNEL_TOOLS_ISOLATED_KERNELS_H_
#define SUPERKERNEL_TOOLS_ISOLATED_KERNELS_H_

#include <cstddef>

#include "superkernel/runtime.h"

namespace sk::cli {

struct IsolationOptions {
  int runs = 5;  // timed runs per kernel; the best counts
  // When > 0, read this many other bytes before every timed run, so that the kernel's weights
  // come from memory: right when the step reads more than the last-level cache holds (weights
  // may be repacked at compile time, so evicting their original bytes would not do).
  size_t flush_bytes = 0;
};

// Sum over the kernel ops of `graph` of each one's best run time minus the cost of launching an
// empty kernel. `dumped` ran the step once with CompileOptions::dump, so that every op's inputs can
// be fed the values they had in the step.
Expected<double> isolated_kernel_seconds(Runtime& runtime, const Graph& graph, const Executable& dumped,
                                         const IsolationOptions& options);

}  // namespace sk::cli

#endif  // SUPERKERNEL_TOOLS_ISOLATED_KERNELS_H_
