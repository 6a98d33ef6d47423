#include "runtime/cpu/launch_state.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
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
  // The cores of each op that syncs them, from the RUN instructions (local id b of c cores).
  op_syncs.clear();
  interleavable = true;
  for (int c = 0; c < l.num_cores; ++c) {
    for (const Instr& in : l.cores[c].instrs) {
      if (in.op != Opcode::kRun || !plan_ops[in.a].kernel) continue;
      const uint32_t flags = plan_ops[in.a].kernel->desc->flags;
      if (flags & SK_USES_SYNC_ALL) interleavable = false;
      if (!(flags & SK_SYNCS_CORES)) continue;
      auto it = std::find_if(op_syncs.begin(), op_syncs.end(), [&](const OpSync& s) { return s.op_index == in.a; });
      if (it == op_syncs.end()) {
        it = op_syncs.emplace(op_syncs.end());
        it->op_index = in.a;
        it->cores.assign(static_cast<size_t>(in.c), -1);
        it->arrive = std::make_unique<Counter[]>(static_cast<size_t>(in.c));
      }
      it->cores[static_cast<size_t>(in.b)] = c;
    }
  }
}

void LaunchState::reset_for_run() {
  abort.store(0, std::memory_order_relaxed);
  error_claimed.store(0, std::memory_order_relaxed);
  error = Status::ok();
  for (CoreState& cs : cores) {
    for (uint32_t& count : cs.barrier_count) count = 0;
    cs.interleaved = false;
  }
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
  for (OpSync& s : ls.op_syncs)
    for (size_t j = 0; j < s.cores.size(); ++j) futex_wake_all(s.arrive[j]);
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

uint64_t barrier_arrive(LaunchState& ls, CoreState& cs, int group) {
  const uint32_t count = ++cs.barrier_count[group];
  const uint64_t target = tag(cs.epoch, count);
  publish(ls.dev->barrier(group, cs.core), target);
  return target;
}

bool barrier_complete(const LaunchState& ls, const CoreState& cs, int group, uint64_t target) {
  for (int32_t m : ls.launch->groups[group].cores)
    if (m != cs.core && ls.dev->barrier(group, m).value.load(std::memory_order_acquire) < target) return false;
  return true;
}

bool barrier(LaunchState& ls, CoreState& cs, int group) {
  return barrier_wait(ls, cs, group, barrier_arrive(ls, cs, group));
}

bool barrier_wait(LaunchState& ls, CoreState& cs, int group, uint64_t target) {
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
  if (cs->interleaved) {
    // Only launches whose kernels declare no sync run interleaved: this one broke the contract,
    // and waiting here would wait for cores this very thread has to run.
    const Instr& in = cs->ls->launch->cores[cs->core].instrs[cs->pc];
    std::snprintf(cs->error, kErrorBytes,
                  "kernel '%s' called sync_all without declaring SK_USES_SYNC_ALL, so its cores may run on one "
                  "thread and cannot wait for each other",
                  cs->ls->ops[in.a].kernel_name.c_str());
    return SK_ERR_INVALID_ARGUMENT;
  }
  return barrier(*cs->ls, *cs, 0) ? SK_OK : SK_ERR_ABORTED;
}

int32_t sync_cores_entry(const sk_core_ctx* ctx) {
  auto* cs = static_cast<CoreState*>(ctx->runtime);
  LaunchState& ls = *cs->ls;
  const Instr& in = ls.launch->cores[cs->core].instrs[cs->pc];
  OpSync* s = nullptr;
  for (OpSync& candidate : ls.op_syncs)
    if (candidate.op_index == in.a) s = &candidate;
  if (s == nullptr || in.op != Opcode::kRun) {
    // A kernel without SK_SYNCS_CORES, or a prologue: its cores are not known to run together.
    std::snprintf(cs->error, kErrorBytes, "kernel '%s' called sync_cores %s", ls.ops[in.a].kernel_name.c_str(),
                  in.op != Opcode::kRun ? "from its prologue (only run may)" : "without the SK_SYNCS_CORES flag");
    return SK_ERR_INVALID_ARGUMENT;
  }
  Counter& mine = s->arrive[static_cast<size_t>(ctx->core_id)];
  // This core's calls in this run: its own counter holds the previous one's tag, if any.
  const uint64_t prev = mine.value.load(std::memory_order_relaxed);
  const uint32_t k = (prev >> 32) == cs->epoch ? static_cast<uint32_t>(prev) + 1 : 1;
  const uint64_t target = tag(cs->epoch, k);
  publish(mine, target);
  for (size_t j = 0; j < s->cores.size(); ++j) {
    if (static_cast<int32_t>(j) == ctx->core_id) continue;
    const int m = s->cores[j];
    WaitResult r = wait_at_least(s->arrive[j], target, ls.wait, m >= 0 ? ls.dev->thread_clock(m) : nullptr);
    if (r != WaitResult::kReached) {
      wait_failed(
          ls, *cs, r,
          "sync_cores of op '" + ls.ops[in.a].name + "' (local core " + std::to_string(j) + " has not arrived)");
      return SK_ERR_ABORTED;
    }
  }
  return SK_OK;
}

int32_t poll_entry(const sk_core_ctx* ctx, int64_t idle_ns) {
  const auto* cs = static_cast<const CoreState*>(ctx->runtime);
  const LaunchState& ls = *cs->ls;
  // relaxed: only the flag matters here; the error it stands for is read after the join.
  if (ls.abort.load(std::memory_order_relaxed)) return SK_ERR_ABORTED;
  if (ls.wait.watchdog_ns > 0 && idle_ns > ls.wait.watchdog_ns) return SK_ERR_TIMEOUT;
  // The same back-off as a WAIT: spin while a message is likely to arrive soon, then give the CPU
  // away, since what is awaited (another process) may need this very CPU on a busy machine. The
  // sleep is short because nothing can wake it: the other side only writes memory or a socket.
  if (idle_ns < ls.wait.spin_ns) {
    cpu_relax();
  } else if (idle_ns < ls.wait.spin_ns + 1'000'000) {
    sched_yield();
  } else {
    const timespec pause{0, 50'000};
    nanosleep(&pause, nullptr);
  }
  return SK_OK;
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
  if (rc == SK_ERR_TIMEOUT) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f", ls.dev->options().watchdog_seconds);
    std::string msg = std::string("watchdog: kernel '") + op.kernel->desc->name + "' (op '" + op.name + "') on " +
                      describe(ls, cs.core, cs.pc) + " waited " + buf + " s without progress";
    if (cs.error[0]) msg += ": " + std::string(cs.error);
    fail(ls, Status::deadlock(msg));
    return;
  }
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
