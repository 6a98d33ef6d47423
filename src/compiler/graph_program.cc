#include "compiler/graph_program.h"

#include <algorithm>

namespace sk {

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
