// Pass: recompute (superkernel mode, after segment and partition_streams, before schedule).
// Turns "cheap op between two all-to-all boundaries" into "every core computes it whole":
//
//   matvec (rows split) -> rms_norm (1 row) -> matvec (rows split)
//     before: core 1 sends its matvec rows to the norm's core, which sends the norm back: two
//             cross-core hops in a row per matvec.
//     after:  every core waits for the other cores' matvec rows, runs the norm whole into its own
//             copy and runs its matvec slice from that copy: one hop per matvec.
//
// A recomputed op X becomes one plan op per core of its consumers, each running X whole (local 0
// of 1) on that core: the first core's writes X's own output tensor (so readers outside the
// segment and graph outputs see it), the others write copies of their own. Each consumer C in
// the segment becomes one plan op per core of C, computing C's slice (PlanOp::split_local of
// split_count) from that core's copy. No two cores write the same bytes. Results stay bit-identical
// because kernels give the same bits on any core count.
//
// X is recomputed only when it is a cheap row-wise kernel (kCheapRowWiseKernels: their work is
// linear in their bytes), it and its consumers can be split into per-core plan ops (access
// callback, no workspace, no tiling sink, no sync_all), a consumer core reads bytes of X's output
// that another core wrote (the sync after X, which disappears), its inputs come from before the
// segment or X already waits for another core (else the sync would move, not vanish), and the
// critical path grows by less than the sync costs: the bytes the whole op touches beyond its
// busiest core's slice, at kRecomputeBytesPerNs, against kRecomputeSyncNs. Every decision on a
// cheap row-wise op of a multi-core segment is recorded in Segment::recompute, which explain
// prints. When ops were added, the memory plan is redone over the new execution order.
//
// On/off: super_kernel_optimize_options.recompute, overridden by the scope option recompute=0|1.
// Off with the data dump and the access checker, which compare or run the plan op by op.
#ifndef SUPERKERNEL_COMPILER_RECOMPUTE_H_
#define SUPERKERNEL_COMPILER_RECOMPUTE_H_

#include <string_view>

#include "compiler/compile_context.h"

namespace sk {

// Kernels whose cost is linear in the bytes they touch and whose rows are independent: built-in
// kernel names. (Kernels declare no FLOPs; a package flag would need an ABI addition.)
inline constexpr std::string_view kCheapRowWiseKernels[] = {
    "add.f32", "mul.f32", "silu_mul.f32", "rms_norm.f32", "layer_norm.f32", "rope.f32", "softmax.f32",
};

// What one cross-core sync on the critical path costs: a cache-line round trip between two cores
// (sk_bench_dispatch measures 250-330 ns on a 2-vCPU Zen 4 VM).
inline constexpr double kRecomputeSyncNs = 300;
// How fast one core runs a cheap row-wise kernel over data that other cores just wrote (part of
// it crosses caches): a conservative 16 bytes per ns.
inline constexpr double kRecomputeBytesPerNs = 16;

Status recompute_ops(CompileContext& ctx);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_RECOMPUTE_H_
