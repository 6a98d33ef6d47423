// Pass: segment. Splits the ops into fusion segments (DESIGN.md §3).
//
// Ops are taken in execution order. With scopes, consecutive fusible kernel ops with the same
// scope stack form a segment; without scopes (super_kernel_optimize on), the whole graph is one
// scope. A non-fusible kernel or a host op closes the open segment and fusion resumes after it;
// views and events never cut. Every cut records a reason (CutReason) and the op at fault.
// strict-scope-check decides what an unfusible op inside a scope does: by default a
// non-fusible kernel just cuts and a host op (a graph break) is an error; `bypass` runs the
// whole scope unfused with a warning; `abort` fails compilation. split-mode (scope option, or
// super_kernel_optimize_options.split_mode) divides each segment into at most N launches.
//
// Tiling-sink kernels (SK_TILING_SINK) fuse like any fusible kernel, their tiling a step inside
// the super kernel. With tiling-sink off (scope option tiling-sink=0, or
// super_kernel_optimize_options.tiling_sink=false) each one cuts the segment (TILING_SINK) and
// runs unfused, as graph mode runs it: once the launch before has joined, its own launch first
// computes the tiling on the op's first core (core 0, the calling thread, unless a cube/vector
// split puts the kernel elsewhere), then runs it. That is the A/B baseline of tiling inside the
// super kernel.
//
// Streams: ops of several streams share a segment only with stream fusion (scope option
// stream-fusion=1, or super_kernel_optimize_options.stream_fusion). Then a scope change that
// coincides with a stream switch joins the next scope to the open segment (concurrent branches
// live in scopes of their own), and the segment records, per event a stream waited for, which op
// of another stream each later op of the waiting stream must follow. Without stream fusion, a
// second stream inside one scope is an error naming both streams and the option; a stream
// switch at a scope change cuts (STREAM_LIMIT).
//
// Communication: a collective kernel fuses like any fusible kernel (it runs on its op's first
// core); a non-fusible communication kernel cuts with COMMUNICATION rather than OP_UNSUPPORTED,
// so explain tells the two apart.
#ifndef SUPERKERNEL_COMPILER_SEGMENT_H_
#define SUPERKERNEL_COMPILER_SEGMENT_H_

#include <string_view>

#include "compiler/compile_context.h"

namespace sk {

Status segment_graph(CompileContext& ctx);

// Communication kernels are named `comm.*` (include/superkernel/comm.h). The fusible ones are the
// collectives (AllReduce, ReduceScatter, AllGather, AlltoAll(v)); any other cuts (COMMUNICATION).
bool is_communication_kernel(std::string_view kernel_name);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_SEGMENT_H_
