// Pass: build_plan. Turns graph ops into plan ops: binds each op to its kernel (by name, across
// every loaded package), builds the argument descriptors, and runs each kernel's host tiling and
// workspace-size functions once (shapes are static).
#ifndef SUPERKERNEL_COMPILER_BUILD_PLAN_H_
#define SUPERKERNEL_COMPILER_BUILD_PLAN_H_

#include "compiler/compile_context.h"

namespace sk {

// The built-in kernel behind sk::prefetch (ops.h). With CompileOptions::prefetch false,
// build_plan zeroes its byte count so that it touches nothing.
inline constexpr std::string_view kPrefetchKernel = "prefetch";

inline constexpr uint32_t kMaxHostTilingBytes = 1u << 20;

Status build_plan(CompileContext& ctx);

// Runs a kernel's host tiling for `op` (args must describe shapes; data may be null), in buffers
// of 512 bytes, 64 KiB, then 1 MiB, up to `max_bytes`. Tiling sinks get kTilingSinkCapacity in
// every mode, the buffer their TILING step has in graph and superkernel modes.
Status run_tiling(PlanOp& op, uint32_t max_bytes = kMaxHostTilingBytes);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_BUILD_PLAN_H_
