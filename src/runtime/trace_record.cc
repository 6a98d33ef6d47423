#include "runtime/trace_record.h"

#include <map>

namespace sk {
namespace {

TraceKind kind_of(Opcode op) {
  switch (op) {
    case Opcode::kRun:
      return TraceKind::kRun;
    case Opcode::kPrologue:
      return TraceKind::kPrologue;
    case Opcode::kTiling:
      return TraceKind::kTiling;
    case Opcode::kWait:
      return TraceKind::kWait;
    case Opcode::kSignal:
      return TraceKind::kSignal;
    case Opcode::kBarrier:
      return TraceKind::kBarrier;
    case Opcode::kPreload:  // not traced: a few prefetches, folded into the time of what follows
      break;
  }
  return TraceKind::kRun;
}

bool names_op(Opcode op) { return op == Opcode::kRun || op == Opcode::kPrologue || op == Opcode::kTiling; }

// Per core: signal count -> the last op the core ran before publishing it (-1: none).
std::vector<std::map<int32_t, int32_t>> signalled_ops(const Launch& launch) {
  std::vector<std::map<int32_t, int32_t>> out(launch.cores.size());
  for (size_t c = 0; c < launch.cores.size(); ++c) {
    int32_t last = -1;
    for (const Instr& in : launch.cores[c].instrs) {
      if (in.op == Opcode::kRun) last = in.a;
      if (in.op == Opcode::kSignal) out[c][in.b] = last;
    }
  }
  return out;
}

}  // namespace

const char* trace_kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::kRun:
      return "run";
    case TraceKind::kPrologue:
      return "prologue";
    case TraceKind::kTiling:
      return "tiling";
    case TraceKind::kWait:
      return "wait";
    case TraceKind::kSignal:
      return "signal";
    case TraceKind::kBarrier:
      return "barrier";
    case TraceKind::kHost:
      return "host";
  }
  return "?";
}

void append_launch_trace(const Plan& plan, const Launch& launch, int32_t launch_index,
                         const std::vector<std::vector<cpu::RawTraceEvent>>& raw, int64_t run_start, int32_t eager_op,
                         std::vector<TraceEvent>& out) {
  const auto plan_op = [&](int32_t operand) { return eager_op >= 0 ? eager_op : operand; };
  const std::vector<std::map<int32_t, int32_t>> signals = signalled_ops(launch);
  for (size_t c = 0; c < raw.size(); ++c) {
    int32_t last_run = -1;
    for (const cpu::RawTraceEvent& e : raw[c]) {
      TraceEvent t;
      t.core = static_cast<int32_t>(c);
      t.launch = launch_index;
      t.segment = launch.segment;
      t.start_ns = e.start_ns - run_start;
      t.end_ns = e.end_ns - run_start;
      t.kind = kind_of(e.kind);
      t.count = e.count;
      int32_t op = -1;
      if (names_op(e.kind)) {
        op = plan_op(e.op);
        if (e.kind == Opcode::kRun) last_run = op;
      } else if (e.kind == Opcode::kSignal) {
        op = last_run;
      } else if (e.kind == Opcode::kWait) {
        t.peer = e.op;
        if (static_cast<size_t>(e.op) < signals.size()) {
          auto it = signals[e.op].find(e.count);
          if (it != signals[e.op].end() && it->second >= 0) op = plan_op(it->second);
        }
      } else {
        t.peer = e.op;  // barrier group
      }
      if (op >= 0) {
        t.op = plan.ops[op].name;
        t.kernel = plan.ops[op].kernel_name;
      }
      out.push_back(std::move(t));
    }
  }
}

void append_host_trace(const PlanOp& op, int32_t step, int64_t start_ns, int64_t end_ns, std::vector<TraceEvent>& out) {
  TraceEvent t;
  t.op = op.name;
  t.core = -1;
  t.launch = step;
  t.start_ns = start_ns;
  t.end_ns = end_ns;
  t.kind = TraceKind::kHost;
  out.push_back(std::move(t));
}

}  // namespace sk
