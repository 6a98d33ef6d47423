#include "runtime/cpu/interpreter.h"

#include "runtime/cpu/chunk_layout.h"
#include "runtime/cpu/launch_state.h"

namespace sk::cpu {

namespace {

struct TracedLaunch {
  LaunchState ls;
  std::vector<std::vector<RawTraceEvent>>* trace = nullptr;
};

// Executes `in` when it is not a WAIT or BARRIER (those block, and the two ways of running a
// core treat them differently); false when the core must stop (a failure was recorded, or the
// launch aborted).
template <bool kTraced>
inline bool execute(LaunchState& ls, CoreState& cs, const Instr& in, std::vector<RawTraceEvent>* trace) {
  switch (in.op) {
    case Opcode::kRun:
    case Opcode::kPrologue: {
      if (ls.abort.load(std::memory_order_relaxed)) return false;
      PlanOp& op = ls.ops[in.a];
      const sk_core_ctx ctx = core_ctx_for(in, cs);
      cs.error[0] = '\0';
      const int64_t t0 = kTraced ? now_ns() : 0;
      const sk_kernel_desc* d = kernel_for_core(op, cs.core);
      int32_t rc;
      // On one thread with a helper, a large call of an SK_CHUNKABLE kernel is shared with it
      // (chunk_helper.h).
      ChunkHelper* helper = cs.interleaved && in.op == Opcode::kRun ? ls.dev->chunk_helper() : nullptr;
      const ChunkLayout* layout =
          helper ? chunk_layout_for(op, ctx.core_id, ctx.num_cores, ls.dev->options().chunk_bytes) : nullptr;
      if (layout)
        rc = helper->run(*d, op.args, *layout, ctx);
      else
        rc = in.op == Opcode::kRun ? d->run(&op.args, &ctx) : d->prologue(&op.args, &ctx);
      if constexpr (kTraced) trace->push_back({in.a, t0, now_ns(), in.op});
      if (rc != SK_OK) {
        instruction_failed(ls, cs, in, rc);
        return false;
      }
      return true;
    }
    case Opcode::kSignal:
      if constexpr (kTraced) {
        const int64_t t = now_ns();
        trace->push_back({in.a, t, t, in.op, in.b});
      }
      publish(ls.dev->progress(cs.core), tag(cs.epoch, static_cast<uint32_t>(in.b)));
      return true;
    case Opcode::kTiling: {
      if (ls.abort.load(std::memory_order_relaxed)) return false;
      PlanOp& op = ls.ops[in.a];
      const int64_t t0 = kTraced ? now_ns() : 0;
      const int32_t rc = run_sink_tiling(op);
      if constexpr (kTraced) trace->push_back({in.a, t0, now_ns(), in.op});
      if (rc != SK_OK) {
        instruction_failed(ls, cs, in, rc);
        return false;
      }
      return true;
    }
    case Opcode::kPreload:
      preload_code(ls, in, cs.core);
      return true;
    case Opcode::kWait:
    case Opcode::kBarrier:
      break;
  }
  return true;
}

// One instantiation per tracing state, so an untraced launch runs a loop without a single trace
// check or clock read in it (tracing off costs nothing per instruction).
template <bool kTraced>
void run_core(void* raw, int core) {
  auto& tl = *static_cast<TracedLaunch*>(raw);
  LaunchState& ls = tl.ls;
  CoreState& cs = ls.cores[core];
  const std::vector<Instr>& instrs = ls.launch->cores[core].instrs;
  // launch() assigned the epoch before starting any core and published it with the start signal.
  cs.epoch = ls.dev->current_epoch();
  std::vector<RawTraceEvent>* trace = kTraced ? &(*tl.trace)[core] : nullptr;
  for (cs.pc = 0; cs.pc < instrs.size(); ++cs.pc) {
    const Instr& in = instrs[cs.pc];
    if (in.op == Opcode::kWait) {
      const int64_t t0 = kTraced ? now_ns() : 0;
      // acquire: pairs with the producer's publish(); the slow path spins, sleeps and checks.
      if (ls.dev->progress(in.a).value.load(std::memory_order_acquire) < tag(cs.epoch, static_cast<uint32_t>(in.b)) &&
          !wait_slow(ls, cs, in))
        return;
      if constexpr (kTraced) trace->push_back({in.a, t0, now_ns(), in.op, in.b});
    } else if (in.op == Opcode::kBarrier) {
      const int64_t t0 = kTraced ? now_ns() : 0;
      if (!barrier(ls, cs, in.a)) return;
      if constexpr (kTraced) trace->push_back({in.a, t0, now_ns(), in.op});
    } else if (!execute<kTraced>(ls, cs, in, trace)) {
      return;
    }
  }
}

enum class Progress { kDone, kParked, kStopped };

// Runs core `cs` from where it stopped until it ends, fails, or reaches a WAIT or BARRIER that
// another core of the launch has yet to satisfy. Never blocks.
template <bool kTraced>
Progress run_until_parked(LaunchState& ls, CoreState& cs, std::vector<RawTraceEvent>* trace) {
  const std::vector<Instr>& instrs = ls.launch->cores[cs.core].instrs;
  for (; cs.pc < instrs.size(); ++cs.pc) {
    const Instr& in = instrs[cs.pc];
    if (in.op == Opcode::kWait) {
      if (ls.dev->progress(in.a).value.load(std::memory_order_acquire) < tag(cs.epoch, static_cast<uint32_t>(in.b))) {
        if (kTraced && cs.parked_since == 0) cs.parked_since = now_ns();
        return Progress::kParked;
      }
      if constexpr (kTraced) {
        const int64_t t = now_ns();
        trace->push_back({in.a, cs.parked_since ? cs.parked_since : t, t, in.op, in.b});
        cs.parked_since = 0;
      }
    } else if (in.op == Opcode::kBarrier) {
      if (cs.parked_barrier == 0) {
        if constexpr (kTraced) cs.parked_since = now_ns();
        cs.parked_barrier = barrier_arrive(ls, cs, in.a);
      }
      if (!barrier_complete(ls, cs, in.a, cs.parked_barrier)) return Progress::kParked;
      cs.parked_barrier = 0;
      if constexpr (kTraced) {
        trace->push_back({in.a, cs.parked_since, now_ns(), in.op});
        cs.parked_since = 0;
      }
    } else if (!execute<kTraced>(ls, cs, in, trace)) {
      return Progress::kStopped;
    }
  }
  return Progress::kDone;
}

// Every core of the launch on the calling thread: each runs until it must wait for another, then
// the next one that can go on does. The cores' instructions are the same, and the waits order
// them as when each has a thread, so the results are the same bits.
template <bool kTraced>
void run_interleaved_cores(LaunchState& ls, std::vector<std::vector<RawTraceEvent>>* trace) {
  const int n = ls.launch->num_cores;
  for (CoreState& cs : ls.cores) {
    cs.epoch = ls.dev->current_epoch();
    cs.pc = 0;
    cs.parked_barrier = 0;
    cs.parked_since = 0;
    cs.finished = false;
    cs.interleaved = true;
  }
  int running = n;
  // Visits in a row that moved no core on; once every running core had one, none can move.
  int idle_visits = 0;
  for (int c = 0; running > 0; c = c + 1 == n ? 0 : c + 1) {
    CoreState& cs = ls.cores[c];
    if (cs.finished) continue;
    const size_t pc = cs.pc;
    const uint64_t barrier_before = cs.parked_barrier;
    const Progress p = run_until_parked<kTraced>(ls, cs, kTraced ? &(*trace)[c] : nullptr);
    if (p == Progress::kStopped) return;
    if (p == Progress::kDone) {
      cs.finished = true;
      --running;
      idle_visits = 0;
      continue;
    }
    if (cs.pc != pc || cs.parked_barrier != barrier_before) {
      idle_visits = 0;
      continue;
    }
    if (++idle_visits < running) continue;
    // Every core waits for another: the program can never finish. Wait as a core with its own
    // thread would, so that the watchdog reports it the same way.
    const Instr& in = ls.launch->cores[c].instrs[cs.pc];
    const bool reached = in.op == Opcode::kWait ? wait_slow(ls, cs, in) : barrier_wait(ls, cs, in.a, cs.parked_barrier);
    if (!reached) return;
    idle_visits = 0;
  }
}

template <bool kTraced>
void run_all_cores(void* raw, int /*thread*/) {
  auto& tl = *static_cast<TracedLaunch*>(raw);
  run_interleaved_cores<kTraced>(tl.ls, tl.trace);
}

}  // namespace

void run_interleaved(LaunchState& ls) { run_interleaved_cores<false>(ls, nullptr); }

Status run_launch(CpuDevice& device, PlanOp* ops, const Launch& launch, const LaunchOptions& options) {
  SK_CHECK(launch.num_cores >= 1 && launch.num_cores <= device.num_cores())
      << "launch '" << launch.label << "' needs " << launch.num_cores << " cores";
  SK_CHECK(!launch.groups.empty() && launch.groups.size() <= CpuDevice::kMaxBarrierGroups)
      << "launch '" << launch.label << "' has " << launch.groups.size() << " barrier groups";
  TracedLaunch tl;
  tl.ls.bind(device, ops, launch);
  tl.trace = options.trace;
  CpuDevice::CoreFn all_cores = nullptr;
  if (tl.ls.interleavable) all_cores = options.trace ? run_all_cores<true> : run_all_cores<false>;
  device.launch(launch.num_cores, options.trace ? run_core<true> : run_core<false>, &tl, all_cores);
  return tl.ls.error;
}

}  // namespace sk::cpu
