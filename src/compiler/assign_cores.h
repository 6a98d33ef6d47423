// Pass: assign_cores. Chooses the device cores that run each kernel op, from its kernel type
// (cube / vector / mix), the device's cube/vector split, the op's LimitCoreNum attributes and
// super_kernel_debug_options.debug_per_op_max_core_num.
//
// Without a split every core serves both kinds and a kernel runs on cores [0, n). With a split
// of C cube cores: cube kernels run on [0, C), vector kernels on [C, N), MIX_1_1 on k cube plus
// k vector cores, MIX_1_2 on k cube plus 2k vector cores (cube cores first in kernel-local ids).
#ifndef SUPERKERNEL_COMPILER_ASSIGN_CORES_H_
#define SUPERKERNEL_COMPILER_ASSIGN_CORES_H_

#include "compiler/compile_context.h"

namespace sk {

Status assign_cores(CompileContext& ctx);

// The cores for one kernel; an error names the op when the layout cannot host it.
Expected<std::vector<int32_t>> cores_for_kernel(const CoreLayout& layout, int32_t kernel_type, int32_t limit_cube,
                                                int32_t limit_vector, int32_t max_cores, const std::string& op_name);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_ASSIGN_CORES_H_
