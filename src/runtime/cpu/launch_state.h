// State of one launch on the CPU device, shared by the two backends that execute a Program (the
// interpreter and the JIT): the abort flag, the first error, per-core barrier counts, and the
// slow paths both take where an instruction does not complete (a failing kernel or tiling, a wait
// that times out, a barrier). Keeping these in one place is what makes both backends report the
// same Status text for the same failure.
#ifndef SUPERKERNEL_RUNTIME_CPU_LAUNCH_STATE_H_
#define SUPERKERNEL_RUNTIME_CPU_LAUNCH_STATE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "program/plan.h"
#include "program/program.h"
#include "runtime/cpu/device.h"

namespace sk::cpu {

inline constexpr int kErrorBytes = 512;

struct LaunchState;

struct alignas(kSyncAlign) CoreState {
  LaunchState* ls = nullptr;
  int core = 0;
  uint32_t barrier_count[CpuDevice::kMaxBarrierGroups] = {};
  uint64_t epoch = 0;  // this launch's tag, read from the device when the core starts
  size_t pc = 0;       // instruction being executed, for error messages
  int32_t rc = 0;      // JIT: return code of the kernel or tiling that stopped the core
  // run_interleaved (interpreter.h): where this core stopped when it had to let another run.
  uint64_t parked_barrier = 0;  // the target of the BARRIER it arrived at, 0 when none
  int64_t parked_since = 0;     // traced runs: when its current WAIT or BARRIER began
  bool finished = false;        // it ran its last instruction
  bool interleaved = false;     // this run shares its thread with the launch's other cores
  char error[kErrorBytes] = {};
};

// The barrier of one op's cores (sk_core_ctx.sync_cores, kernels with SK_SYNCS_CORES): one
// arrival counter per core running the op, written by that core only, tag(epoch, k) at its k-th
// call in the launch's run. Only the op's cores take part, so no other core is fed.
struct OpSync {
  int32_t op_index = -1;
  std::vector<int> cores;             // the launch core of each local core id
  std::unique_ptr<Counter[]> arrive;  // one per local core id
};

struct LaunchState {
  CpuDevice* dev = nullptr;
  PlanOp* ops = nullptr;
  const Launch* launch = nullptr;
  WaitControl wait;
  alignas(kSyncAlign) std::atomic<uint32_t> abort{0};
  alignas(kSyncAlign) std::atomic<uint32_t> error_claimed{0};
  Status error;
  std::vector<CoreState> cores;
  std::vector<OpSync> op_syncs;  // for the launch's ops that sync their cores
  // No kernel of the launch waits for the launch's cores inside a call (SK_USES_SYNC_ALL), so one
  // thread may run all its cores, switching between them at WAIT and BARRIER (run_interleaved);
  // kernels that sync only their own cores (SK_SYNCS_CORES) then run without sync_cores.
  bool interleavable = true;

  // Binds the state to one launch (the JIT keeps it, and the addresses of its fields, for every
  // run of the launch).
  void bind(CpuDevice& device, PlanOp* plan_ops, const Launch& l);
  // Clears what a previous run left: the abort flag, the error and the barrier counts.
  void reset_for_run();
};

// The kernel a core runs for `op`: its own copy when the kernel is replicated (core c runs copy
// c % replicas), else the registry's.
inline const sk_kernel_desc* kernel_for_core(const PlanOp& op, int core) {
  return op.replicas.empty() ? op.kernel->desc : op.replicas[static_cast<size_t>(core) % op.replicas.size()];
}

// sync_all of the kernels' core context: a barrier over group 0 of the launch.
int32_t sync_all_entry(const sk_core_ctx* ctx);
// sync_cores of the kernels' core context: a barrier over the cores of the op being run.
int32_t sync_cores_entry(const sk_core_ctx* ctx);
// poll of the kernels' core context: the launch's abort flag and watchdog for a kernel waiting on
// something outside the launch, and the back-off between its rounds.
int32_t poll_entry(const sk_core_ctx* ctx, int64_t idle_ns);

// The context a RUN or PROLOGUE instruction hands its kernel on the core whose state is `cs`
// (both backends build it the same way; the JIT once per instruction, at code generation).
inline sk_core_ctx core_ctx_for(const Instr& in, CoreState& cs) {
  sk_core_ctx ctx{};
  ctx.core_id = in.b;
  ctx.num_cores = in.c;
  ctx.sync_all = sync_all_entry;
  ctx.runtime = &cs;
  ctx.error_message = cs.error;
  ctx.error_capacity = kErrorBytes;
  ctx.flags = (in.flags & kInstrAhead) ? SK_CORE_AHEAD : 0;
  ctx.poll = poll_entry;
  ctx.sync_cores = sync_cores_entry;
  // A core interleaved with the others on one thread cannot wait for them inside a call: a kernel
  // that may sync its cores gets no sync_cores there, as the ABI allows ("cores run one at a
  // time"), and does without. A kernel without the flag keeps the entry, which refuses the call.
  if (cs.interleaved && in.op == Opcode::kRun && (cs.ls->ops[in.a].kernel->desc->flags & SK_SYNCS_CORES))
    ctx.sync_cores = nullptr;
  return ctx;
}
// BARRIER `group` on core `cs`; false when the launch aborted or the watchdog fired (recorded).
bool barrier(LaunchState& ls, CoreState& cs, int group);
// The two halves of a barrier for a thread that must not block: arrive (returns the target every
// member's counter must reach), then test, as often as needed.
uint64_t barrier_arrive(LaunchState& ls, CoreState& cs, int group);
bool barrier_complete(const LaunchState& ls, const CoreState& cs, int group, uint64_t target);
// Blocks until barrier_complete (false, recorded, when the launch aborted or the watchdog fired).
bool barrier_wait(LaunchState& ls, CoreState& cs, int group, uint64_t target);
// The slow half of WAIT `in` at `cs.pc`; false when it did not complete (a timeout is recorded).
bool wait_slow(LaunchState& ls, CoreState& cs, const Instr& in);
// A RUN, PROLOGUE or TILING at `cs.pc` returned `rc` != SK_OK: records the error (unless it is
// another core's abort passed on).
void instruction_failed(LaunchState& ls, CoreState& cs, const Instr& in, int32_t rc);
// Touches the code of the kernel `in` (a PRELOAD) names, for core `core`.
void preload_code(const LaunchState& ls, const Instr& in, int core);

}  // namespace sk::cpu

#endif  // SUPERKERNEL_RUNTIME_CPU_LAUNCH_STATE_H_
