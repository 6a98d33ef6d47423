// The portable backend: executes one Launch of a Program on the CPU device. Each core walks its
// own flat instruction list; RUN calls the sub-kernel's entry point directly, WAIT/SIGNAL and
// BARRIER use the epoch-tagged counters of sync.h. A failing kernel or a watchdog timeout stops
// the launch on every core and comes back as the Status.
#ifndef SUPERKERNEL_RUNTIME_CPU_INTERPRETER_H_
#define SUPERKERNEL_RUNTIME_CPU_INTERPRETER_H_

#include <cstdint>
#include <vector>

#include "program/plan.h"
#include "program/program.h"
#include "runtime/cpu/device.h"

namespace sk::cpu {

// Per-core record of one executed instruction (raw, steady-clock nanoseconds).
struct RawTraceEvent {
  int32_t op = 0;  // the instruction's operand a: plan op (RUN, PROLOGUE, TILING), core (WAIT), group (BARRIER)
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  Opcode kind = Opcode::kRun;
  int32_t count = 0;  // WAIT, SIGNAL: operand b, the signal count
};

struct LaunchOptions {
  // When non-null, per core c, (*trace)[c] receives one event per instruction.
  std::vector<std::vector<RawTraceEvent>>* trace = nullptr;
};

// Runs `launch` on the device: one thread per core, or, when the device's load policy says so
// (load_monitor.h) and no kernel of the launch syncs cores inside a call, every core on one thread.
Status run_launch(CpuDevice& device, PlanOp* ops, const Launch& launch, const LaunchOptions& options = {});

struct LaunchState;
// Every core of the launch bound to `ls` on the calling thread: each runs until it must wait for
// another, then the next one that can go on does (the JIT's launches when the device puts them on
// one thread). Same results as one thread per core; errors recorded in `ls` as there.
void run_interleaved(LaunchState& ls);

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_INTERPRETER_H_
