// Pass: schedule. Builds the superkernel-mode Program: one launch per fusion segment, whose
// per-core instruction lists call the sub-kernels and synchronise only where data flows.
//
// For every op of a segment and every core running it, the pass asks the kernel's access
// callback which byte ranges that core reads and writes (whole operands without a callback,
// plus the workspace), then finds, per other core, the newest earlier op that conflicts with
// them (read-after-write, write-after-read, write-after-write; buffer reuse by the memory plan
// is visible here because ranges are addresses). The core waits for that op's signal unless its
// vector clock shows it already knows the op finished through an earlier wait (transitive
// reduction). Producers signal only after ops someone waits on. A core that wrote what it now
// reads needs no sync at all. Kernels calling sync_all get feed barriers on idle cores when
// feed-sync-all is on; debug-sync-all puts a full barrier after every op. Ops outside segments
// run in graph-mode launches (op, full barrier, op, ...), host ops on the calling thread.
// In a stream-fused segment the same analysis orders the streams' partitions against each other:
// a core waits for another stream only where data flows or where its stream waited for an event
// (every core of the op recorded before the event), and each such wait is reported as a
// cross-stream sync point.
#ifndef SUPERKERNEL_COMPILER_SCHEDULE_H_
#define SUPERKERNEL_COMPILER_SCHEDULE_H_

#include "compiler/compile_context.h"

namespace sk {

Status schedule_segments(CompileContext& ctx);

}  // namespace sk

#endif  // SUPERKERNEL_COMPILER_SCHEDULE_H_
