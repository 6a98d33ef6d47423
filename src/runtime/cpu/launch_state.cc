#include "runtime/cpu/launch_state.h"

#include <cstdio>
#include <string>

#include "runtime/cpu/code_preload.h"

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
    WaitResult r = wait_at_least(ls.dev->barrier(group, m), target, ls.wait, ls.dev->thread_clock(m));
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
  WaitResult r = wait_at_least_slow(ls.dev->progress(in.a), tag(cs.epoch, static_cast<uint32_t>(in.b)), ls.wait,
                                    ls.dev->thread_clock(in.a));
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

}  // namespace sk::cpu
