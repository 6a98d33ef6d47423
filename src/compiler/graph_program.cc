#include "compiler/graph_program.h"

#include <algorithm>

namespace sk {

Launch make_launch(std::string label, int32_t num_cores) {
  Launch l;
  l.label = std::move(label);
  l.num_cores = num_cores;
  l.cores.resize(num_cores);
  BarrierGroup all{"all", {}};
  for (int32_t c = 0; c < num_cores; ++c) all.cores.push_back(c);
  l.groups.push_back(std::move(all));
  return l;
}

std::vector<std::string> op_labels(const Plan& plan) {
  std::vector<std::string> labels;
  for (const PlanOp& op : plan.ops)
    labels.push_back(op.name + " (" + (op.kernel ? op.kernel_name : std::string(op_kind_name(op.kind))) + ")");
  return labels;
}

void emit_op_on_all_cores(Launch& launch, const PlanOp& op, int32_t op_index) {
  const int32_t n = static_cast<int32_t>(op.cores.size());
  const uint32_t feeds = (op.kernel->desc->flags & SK_USES_SYNC_ALL) ? op.kernel->desc->sync_all_count : 0;
  for (int32_t c = 0; c < launch.num_cores; ++c) {
    auto it = std::find(op.cores.begin(), op.cores.end(), c);
    if (it != op.cores.end()) {
      launch.cores[c].instrs.push_back({Opcode::kRun, op_index, static_cast<int32_t>(it - op.cores.begin()), n});
    } else {
      for (uint32_t i = 0; i < feeds; ++i) launch.cores[c].instrs.push_back({Opcode::kBarrier, 0, 0, 0});
    }
  }
}

Status build_graph_program(CompileContext& ctx) {
  Plan& plan = *ctx.plan;
  Program& prog = ctx.program;
  prog = Program{};
  prog.op_labels = op_labels(plan);
  const int32_t n = ctx.layout.num_cores;
  int32_t open = -1;  // launch being filled
  auto close = [&] { open = -1; };
  for (int32_t i = 0; i < static_cast<int32_t>(plan.ops.size()); ++i) {
    const PlanOp& op = plan.ops[i];
    if (op.kind == OpKind::kHost) {
      close();
      prog.steps.push_back({Step::Kind::kHost, i});
      continue;
    }
    if (!op.is_kernel()) continue;  // events order nothing beyond program order here
    if (open < 0) {
      prog.launches.push_back(make_launch("graph ops from '" + op.name + "'", n));
      open = static_cast<int32_t>(prog.launches.size() - 1);
      prog.steps.push_back({Step::Kind::kLaunch, open});
    } else {
      // The full barrier that separates consecutive ops.
      for (CoreProgram& cp : prog.launches[open].cores) cp.instrs.push_back({Opcode::kBarrier, 0, 0, 0});
    }
    emit_op_on_all_cores(prog.launches[open], op, i);
    prog.launches[open].ops.push_back(i);
  }
  return Status::ok();
}

}  // namespace sk
