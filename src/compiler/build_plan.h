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

Status build_plan(CompileContext& ctx);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_BUILD_PLAN_H_
