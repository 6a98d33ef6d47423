#include "program/emit.h"

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
  const int32_t n = op.local_count();
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
      const int32_t local = op.local_id(static_cast<int32_t>(it - op.cores.begin()));
      if (d->prologue) out.push_back({Opcode::kPrologue, op_index, local, n});
      out.push_back({Opcode::kRun, op_index, local, n});
    } else {
      for (uint32_t i = 0; i < feeds; ++i) out.push_back({Opcode::kBarrier, 0, 0, 0});
    }
  }
}

}  // namespace sk
