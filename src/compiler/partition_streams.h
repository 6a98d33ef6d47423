// Pass: partition_streams. Gives each stream of a stream-fused segment its own cores.
//
// Rule: a stream whose ops carry a LimitCoreNum gets that many cores (the largest limit among its
// ops, counted as assign_cores counts it: the cube limit for cube kernels, the vector limit for
// vector kernels, their sum for mix kernels); such streams take the highest cores, in order of
// first appearance. Streams without a limit split the cores left over evenly (earlier streams
// get the remainder), from core 0; when fewer cores are left than such streams, they share them
// round-robin and interleave there in program order. Every op is then placed inside its stream's
// partition (its own limit and debug_per_op_max_core_num still apply). Errors name the op, the
// streams and the machine: a limit above the core count, limits that add up to more than the
// machine, limits that leave no core for a stream without one, and a cube/vector split layout
// (not supported yet with several streams).
//
//   segment "scope_0_part2_moe + scope_0_part2_main" on 3 cores, moe under LimitCoreNum(1, 1):
//     stream 'default' cores 0-1, stream 'moe' cores 2-2
#ifndef SUPERKERNEL_COMPILER_PARTITION_STREAMS_H_
#define SUPERKERNEL_COMPILER_PARTITION_STREAMS_H_

#include "compiler/compile_context.h"

namespace sk {

Status partition_streams(CompileContext& ctx);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_PARTITION_STREAMS_H_
