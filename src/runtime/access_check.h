// The access checker (super_kernel_debug_options.debug_cross_core_sync_check): runs one op's
// sub-kernels one core at a time and verifies that each changed only bytes its access callback
// declared as written by that core. Inputs and outputs are compared byte for byte before and after
// every core's call, so a write of the value already there goes unnoticed; everything else that
// lands outside the declared ranges is reported.
#ifndef SUPERKERNEL_RUNTIME_ACCESS_CHECK_H_
#define SUPERKERNEL_RUNTIME_ACCESS_CHECK_H_

#include <string>
#include <vector>

#include "program/plan.h"
#include "program/program.h"
#include "runtime/cpu/device.h"

namespace sk {

// `op` is bound and its tiling computed; `launch` runs it on all its cores (eager's one-op
// launch); `plan` names its operands. Kernels that call sync_all cannot run one
// core at a time: their cores run together and are checked against the union of their ranges.
// A violation is an error naming the kernel, op, core, operand and byte range.
Status run_access_checked(cpu::CpuDevice& device, const Plan& plan, PlanOp& op, const Launch& launch);

}  // namespace sk

#endif  // SUPERKERNEL_RUNTIME_ACCESS_CHECK_H_
