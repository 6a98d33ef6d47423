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
  const sk_kernel_desc* d = op.kernel->desc;
  const uint32_t feeds = (d->flags & SK_USES_SYNC_ALL) ? d->sync_all_count : 0;
  if (op.tiling_sink) {
    // One core computes the tiling from the (ready) inputs; a barrier hands it to the rest.
    launch.cores[op.cores[0]].instrs.push_back({Opcode::kTiling, op_index, 0, 0});
    for (CoreProgram& cp : launch.cores) cp.instrs.push_back({Opcode::kBarrier, 0, 0, 0});
  }
  for (int32_t c = 0; c < launch.num_cores; ++c) {
    auto it = std::find(op.cores.begin(), op.cores.end(), c);
    std::vector<Instr>& out = launch.cores[c].instrs;
    if (it != op.cores.end()) {
      const int32_t local = static_cast<int32_t>(it - op.cores.begin());
      if (d->prologue) out.push_back({Opcode::kPrologue, op_index, local, n});
      out.push_back({Opcode::kRun, op_index, local, n});
    } else {
      for (uint32_t i = 0; i < feeds; ++i) out.push_back({Opcode::kBarrier, 0, 0, 0});
    }
  }
}

void GraphLaunchBuilder::add(const PlanOp& op, int32_t op_index) {
  if (open_ < 0) {
    program_.launches.push_back(make_launch("graph ops from '" + op.name + "'", num_cores_));
    open_ = static_cast<int32_t>(program_.launches.size() - 1);
    program_.steps.push_back({Step::Kind::kLaunch, open_});
  } else {
    // The full barrier that separates consecutive ops.
    for (CoreProgram& cp : program_.launches[open_].cores) cp.instrs.push_back({Opcode::kBarrier, 0, 0, 0});
  }
  emit_op_on_all_cores(program_.launches[open_], op, op_index);
  program_.launches[open_].ops.push_back(op_index);
}

Status build_graph_program(CompileContext& ctx) {
  Plan& plan = *ctx.plan;
  Program& prog = ctx.program;
  prog = Program{};
  prog.op_labels = op_labels(plan);
  GraphLaunchBuilder builder(prog, ctx.layout.num_cores);
  for (int32_t i = 0; i < static_cast<int32_t>(plan.ops.size()); ++i) {
    const PlanOp& op = plan.ops[i];
    if (op.kind == OpKind::kHost) {
      builder.close();
      prog.steps.push_back({Step::Kind::kHost, i});
    } else if (op.is_kernel()) {
      builder.add(op, i);
    }
    // Event ops order nothing beyond program order in graph mode.
  }
  return Status::ok();
}

}  // namespace sk
