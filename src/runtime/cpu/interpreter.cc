#include "runtime/cpu/interpreter.h"

#include "runtime/cpu/code_preload.h"
#include "runtime/cpu/launch_state.h"

#include <cstdio>
#include <string>

namespace sk::cpu {

void LaunchState::bind(CpuDevice& device, PlanOp* plan_ops, const Launch& l) {
  dev = &device;
  ops = plan_ops;
  launch = &l;
  wait = device.wait_control(&abort);
  cores.resize(l.num_cores);
  for (int c = 0; c < l.num_cores; ++c) {
    cores[c].ls = this;
    cores[c].core = c;
  }
}

void LaunchState::reset_for_run() {
  abort.store(0, std::memory_order_relaxed);
  error_claimed.store(0, std::memory_order_relaxed);
  error = Status::ok();
  for (CoreState& cs : cores)
    for (uint32_t& count : cs.barrier_count) count = 0;
}

namespace {

std::string describe(const LaunchState& ls, int core, size_t pc) {
  const auto& instrs = ls.launch->cores[core].instrs;
  std::string s = "core " + std::to_string(core) + " instruction #" + std::to_string(pc);
  if (pc < instrs.size()) {
    const Instr& in = instrs[pc];
    s += std::string(" (") + opcode_name(in.op);
    if (in.op == Opcode::kWait) s += " core " + std::to_string(in.a) + " >= " + std::to_string(in.b);
    if (in.op == Opcode::kBarrier) s += " group " + std::to_string(in.a);
    if (in.op == Opcode::kRun || in.op == Opcode::kPrologue || in.op == Opcode::kTiling)
      s += " op '" + ls.ops[in.a].name + "'";
    s += ")";
  }
  return s + " of launch '" + ls.launch->label + "'";
}

// First failure wins; every core then stops at its next instruction or wait.
void fail(LaunchState& ls, Status status) {
  if (ls.error_claimed.exchange(1, std::memory_order_acq_rel) == 0) ls.error = std::move(status);
  // release: the error written above is visible to whoever observes abort (the launcher reads it
  // only after the join, which orders it anyway).
  ls.abort.store(1, std::memory_order_release);
  for (int c = 0; c < ls.launch->num_cores; ++c) {
    futex_wake_all(ls.dev->progress(c));
    for (size_t g = 0; g < ls.launch->groups.size(); ++g) futex_wake_all(ls.dev->barrier(static_cast<int>(g), c));
  }
}

// Called only when a wait did not reach its target (the message is built off the hot path).
void wait_failed(LaunchState& ls, CoreState& cs, WaitResult r, const std::string& what) {
  if (r == WaitResult::kTimedOut) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f", ls.dev->options().watchdog_seconds);
    fail(ls, Status::deadlock(std::string("watchdog: ") + describe(ls, cs.core, cs.pc) + " waited " + buf + " s on " +
                              what + " without progress (deadlock)"));
  }
}

}  // namespace

bool barrier(LaunchState& ls, CoreState& cs, int group) {
  const uint32_t count = ++cs.barrier_count[group];
  const uint64_t target = tag(cs.epoch, count);
  publish(ls.dev->barrier(group, cs.core), target);
  for (int32_t m : ls.launch->groups[group].cores) {
    if (m == cs.core) continue;
    WaitResult r = wait_at_least(ls.dev->barrier(group, m), target, ls.wait);
    if (r != WaitResult::kReached) {
      wait_failed(ls, cs, r,
                  "barrier group " + std::to_string(group) + " (core " + std::to_string(m) + " has not arrived)");
      return false;
    }
  }
  return true;
}

int32_t sync_all_entry(const sk_core_ctx* ctx) {
  auto* cs = static_cast<CoreState*>(ctx->runtime);
  return barrier(*cs->ls, *cs, 0) ? SK_OK : SK_ERR_ABORTED;
}

bool wait_slow(LaunchState& ls, CoreState& cs, const Instr& in) {
  WaitResult r = wait_at_least_slow(ls.dev->progress(in.a), tag(cs.epoch, static_cast<uint32_t>(in.b)), ls.wait);
  if (r == WaitResult::kReached) return true;
  wait_failed(ls, cs, r, "core " + std::to_string(in.a) + "'s signal " + std::to_string(in.b));
  return false;
}

void instruction_failed(LaunchState& ls, CoreState& cs, const Instr& in, int32_t rc) {
  const PlanOp& op = ls.ops[in.a];
  if (in.op == Opcode::kTiling) {
    std::string why = "with code " + std::to_string(rc);
    if (rc == SK_ERR_CAPACITY)
      why = "needing more than " + std::to_string(kTilingSinkCapacity) + " bytes (the tiling-sink limit)";
    fail(ls, Status::kernel_error(std::string("tiling of kernel '") + op.kernel->desc->name + "' (op '" + op.name +
                                  "') failed on core " + std::to_string(cs.core) + " " + why));
    return;
  }
  if (rc == SK_ERR_ABORTED && ls.abort.load(std::memory_order_relaxed)) return;
  std::string msg = std::string("kernel '") + op.kernel->desc->name + "' (op '" + op.name + "') failed on core " +
                    std::to_string(cs.core) + " with code " + std::to_string(rc);
  if (cs.error[0]) msg += ": " + std::string(cs.error);
  fail(ls, Status::kernel_error(msg));
}

void preload_code(const LaunchState& ls, const Instr& in, int core) {
  const CodeSpan span = preload_span(ls.ops[in.a], in.b, core);
  for (const uint8_t* p = span.begin; p < span.end; p += kCacheLine) prefetch_code_line(p);
}

namespace {

// One instantiation per tracing state, so an untraced launch runs a loop without a single trace
// check or clock read in it (tracing off costs nothing per instruction).
struct TracedLaunch {
  LaunchState ls;
  std::vector<std::vector<RawTraceEvent>>* trace = nullptr;
};

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
        sk_core_ctx ctx{};
        ctx.core_id = in.b;
        ctx.num_cores = in.c;
        ctx.sync_all = sync_all_entry;
        ctx.runtime = &cs;
        ctx.error_message = cs.error;
        ctx.error_capacity = kErrorBytes;
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
