#include "compiler/replicate_kernels.h"

namespace sk {

Status replicate_kernels(CompileContext& ctx) {
  const int copies = ctx.options.super_kernel_optimize_options.kernel_replicas;
  if (copies <= 1) return Status::ok();
  for (PlanOp& op : ctx.plan->ops) {
    if (!op.is_kernel()) continue;
    auto replicas = ctx.registry.replicas(*op.kernel, copies);
    if (!replicas) return replicas.status().with_context("op '" + op.name + "'");
    op.replicas = std::move(*replicas);
  }
  return Status::ok();
}

}  // namespace sk
