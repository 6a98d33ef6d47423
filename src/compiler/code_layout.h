// Pass: code_layout (superkernel mode, after schedule). Decides where sub-kernel code is warmed
// and how generated code is aligned:
//  - preload_code (scope preload-code) = per-func | max: each core's program gets a PRELOAD of its
//    first sub-kernel at its start, and, before every RUN, a PRELOAD of the next sub-kernel the core
//    runs after it (when that is another kernel), so the next code is fetched while the current
//    sub-kernel computes. Both backends execute PRELOAD (runtime/cpu/code_preload.h says how much).
//  - func_align (scope func-align): recorded on the launch, for backends that generate code.
//
//   SK_RETURN_IF_ERROR(layout_code(ctx));   // ctx.program then shows the PRELOADs
#ifndef SUPERKERNEL_COMPILER_CODE_LAYOUT_H_
#define SUPERKERNEL_COMPILER_CODE_LAYOUT_H_

#include "compiler/compile_context.h"

namespace sk {

Status layout_code(CompileContext& ctx);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_CODE_LAYOUT_H_
