#include "compiler/build_plan.h"

#include <algorithm>
#include <cstring>

#include "superkernel/attrs_core.h"

namespace sk {

Status build_plan(CompileContext& ctx) {
  const Graph& g = ctx.graph;
  auto plan = std::make_unique<Plan>();
  plan->tensors.reserve(g.num_tensors());
  plan->constants.resize(g.num_tensors());
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    TensorInfo t = g.tensor(static_cast<int32_t>(i));
    if (t.kind == TensorKind::kConstant) {
      if (Status s = plan->store_constant(static_cast<int32_t>(i), t); !s) return s;
    }
    plan->tensors.push_back(std::move(t));
  }

  plan->ops.reserve(g.num_ops());  // PlanOp args point into the ops; never reallocate
  for (size_t i = 0; i < g.num_ops(); ++i) {
    const OpInfo& info = g.op(i);
    PlanOp& op = plan->ops.emplace_back();
    op.graph_op = static_cast<int32_t>(i);
    op.name = info.name;
    op.kind = info.kind;
    op.kernel_name = info.kernel;
    op.input_ids = info.inputs;
    op.output_ids = info.outputs;
    op.attrs = info.attrs;
    op.host = info.host;
    for (int32_t id : info.inputs) {
      op.inputs.push_back(make_tensor_arg(plan->tensors[id]));
      const TensorInfo& t = plan->tensors[id];
      const TensorKind kind = t.kind == TensorKind::kView && t.base >= 0 ? plan->tensors[t.base].kind : t.kind;
      op.constant_inputs.push_back(kind == TensorKind::kConstant ? 1 : 0);
    }
    for (int32_t id : info.outputs) op.outputs.push_back(make_tensor_arg(plan->tensors[id]));
    if (info.kind == OpKind::kHost || info.kind == OpKind::kRecordEvent || info.kind == OpKind::kWaitEvent) continue;

    const KernelEntry* k = ctx.registry.find(info.kernel);
    if (!k) {
      std::string loaded;
      for (const std::string& p : ctx.registry.package_paths()) loaded += (loaded.empty() ? "" : ", ") + p;
      return Status::not_found("op '" + info.name + "' (" + op_kind_name(info.kind) + "): kernel '" + info.kernel +
                               "' is not in any loaded kernel package (loaded: " + (loaded.empty() ? "none" : loaded) +
                               ")");
    }
    op.kernel = k;
    if (!ctx.options.prefetch && info.kernel == kPrefetchKernel) {
      sk_prefetch_attrs off{};  // bytes == 0: the kernel touches nothing
      std::memcpy(op.attrs.data(), &off, std::min(op.attrs.size(), sizeof off));
    }
    op.bind_args();  // workspace_size below reads the shapes
    if (k->desc->flags & SK_TILING_SINK) {
      // The tiling reads input data, so it runs on the device side once the inputs are ready.
      op.tiling_sink = true;
      op.tiling.assign(kTilingSinkCapacity, 0);
    } else {
      SK_RETURN_IF_ERROR(run_tiling(op));
    }
    if (k->desc->workspace_size) {
      op.workspace_bytes = k->desc->workspace_size(&op.args);
      // Per-core slices start on their own cache lines (kernel_abi.h promises it).
      if (op.workspace_per_core()) op.workspace_bytes = (op.workspace_bytes + 63) / 64 * 64;
    }
    op.bind_args();
  }
  ctx.plan = std::move(plan);
  return Status::ok();
}

}  // namespace sk
