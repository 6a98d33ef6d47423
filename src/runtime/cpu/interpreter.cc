#include "runtime/cpu/interpreter.h"

#include "runtime/cpu/launch_state.h"

namespace sk::cpu {

namespace {

struct TracedLaunch {
  LaunchState ls;
  std::vector<std::vector<RawTraceEvent>>* trace = nullptr;
};

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
    switch (in.op) {
      case Opcode::kRun:
      case Opcode::kPrologue: {
        if (ls.abort.load(std::memory_order_relaxed)) return;
        PlanOp& op = ls.ops[in.a];
        const sk_core_ctx ctx = core_ctx_for(in, cs);
        cs.error[0] = '\0';
        const int64_t t0 = kTraced ? now_ns() : 0;
        const sk_kernel_desc* d = kernel_for_core(op, core);
        int32_t rc = in.op == Opcode::kRun ? d->run(&op.args, &ctx) : d->prologue(&op.args, &ctx);
        if constexpr (kTraced) trace->push_back({in.a, t0, now_ns(), in.op});
        if (rc != SK_OK) {
          instruction_failed(ls, cs, in, rc);
          return;
        }
        break;
      }
      case Opcode::kWait: {
        const int64_t t0 = kTraced ? now_ns() : 0;
        // acquire: pairs with the producer's publish(); the slow path spins, sleeps and checks.
        if (ls.dev->progress(in.a).value.load(std::memory_order_acquire) < tag(cs.epoch, static_cast<uint32_t>(in.b)) &&
            !wait_slow(ls, cs, in))
          return;
        if constexpr (kTraced) trace->push_back({in.a, t0, now_ns(), in.op, in.b});
        break;
      }
      case Opcode::kSignal:
        if constexpr (kTraced) {
          const int64_t t = now_ns();
          trace->push_back({in.a, t, t, in.op, in.b});
        }
        publish(ls.dev->progress(core), tag(cs.epoch, static_cast<uint32_t>(in.b)));
        break;
      case Opcode::kBarrier: {
        const int64_t t0 = kTraced ? now_ns() : 0;
        if (!barrier(ls, cs, in.a)) return;
        if constexpr (kTraced) trace->push_back({in.a, t0, now_ns(), in.op});
        break;
      }
      case Opcode::kTiling: {
        if (ls.abort.load(std::memory_order_relaxed)) return;
        PlanOp& op = ls.ops[in.a];
        const int64_t t0 = kTraced ? now_ns() : 0;
        const int32_t rc = run_sink_tiling(op);
        if constexpr (kTraced) trace->push_back({in.a, t0, now_ns(), in.op});
        if (rc != SK_OK) {
          instruction_failed(ls, cs, in, rc);
          return;
        }
        break;
      }
      case Opcode::kPreload:
        preload_code(ls, in, core);
        break;
    }
  }
}

}  // namespace

Status run_launch(CpuDevice& device, PlanOp* ops, const Launch& launch, const LaunchOptions& options) {
  SK_CHECK(launch.num_cores >= 1 && launch.num_cores <= device.num_cores())
      << "launch '" << launch.label << "' needs " << launch.num_cores << " cores";
  SK_CHECK(!launch.groups.empty() && launch.groups.size() <= CpuDevice::kMaxBarrierGroups)
      << "launch '" << launch.label << "' has " << launch.groups.size() << " barrier groups";
  TracedLaunch tl;
  tl.ls.bind(device, ops, launch);
  tl.trace = options.trace;
  device.launch(launch.num_cores, options.trace ? run_core<true> : run_core<false>, &tl);
  return tl.ls.error;
}

}  // namespace sk::cpu
