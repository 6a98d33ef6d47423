#include "compiler/assign_cores.h"

#include <algorithm>

namespace sk {
namespace {

int32_t capped(int32_t available, int32_t limit) { return limit > 0 ? std::min(available, limit) : available; }

void append_range(std::vector<int32_t>& v, int32_t begin, int32_t count) {
  for (int32_t i = 0; i < count; ++i) v.push_back(begin + i);
}

}  // namespace

Expected<std::vector<int32_t>> cores_for_kernel(const CoreLayout& layout, int32_t kernel_type, int32_t limit_cube,
                                                int32_t limit_vector, int32_t max_cores, const std::string& op_name) {
  const int32_t n = layout.num_cores;
  std::vector<int32_t> cores;
  if (layout.cube_cores == 0) {
    int32_t count = n;
    switch (kernel_type) {
      case SK_KERNEL_CUBE:
        count = capped(n, limit_cube);
        break;
      case SK_KERNEL_VECTOR:
        count = capped(n, limit_vector);
        break;
      default:
        if (limit_cube > 0 && limit_vector > 0) count = std::min(n, limit_cube + limit_vector);
        break;
    }
    count = capped(count, max_cores);
    append_range(cores, 0, std::max(count, 1));
    return cores;
  }
  const int32_t cube = capped(layout.cube_cores, limit_cube);
  const int32_t vec = capped(n - layout.cube_cores, limit_vector);
  switch (kernel_type) {
    case SK_KERNEL_CUBE:
      append_range(cores, 0, std::max(capped(cube, max_cores), 1));
      break;
    case SK_KERNEL_VECTOR:
      append_range(cores, layout.cube_cores, std::max(capped(vec, max_cores), 1));
      break;
    case SK_KERNEL_MIX_1_1:
    case SK_KERNEL_MIX_1_2: {
      const int32_t per_cube = kernel_type == SK_KERNEL_MIX_1_1 ? 1 : 2;
      int32_t k = std::min(cube, vec / per_cube);
      if (max_cores > 0) k = std::min(k, max_cores / (1 + per_cube));
      if (k < 1)
        return Status::invalid_argument("op '" + op_name + "': a MIX_1_" + std::to_string(per_cube) +
                                        " kernel needs at least 1 cube and " + std::to_string(per_cube) +
                                        " vector core(s); the layout offers " + std::to_string(cube) + " cube and " +
                                        std::to_string(vec) + " vector core(s) within its limits");
      append_range(cores, 0, k);
      append_range(cores, layout.cube_cores, k * per_cube);
      break;
    }
    default:
      return Status::internal("unknown kernel type");
  }
  return cores;
}

Status assign_cores(CompileContext& ctx) {
  const int32_t cap = ctx.options.super_kernel_debug_options.debug_per_op_max_core_num;
  for (PlanOp& op : ctx.plan->ops) {
    if (!op.is_kernel()) continue;
    const OpInfo& info = ctx.graph.op(op.graph_op);
    auto cores =
        cores_for_kernel(ctx.layout, op.kernel->desc->type, info.core_limit_cube, info.core_limit_vector, cap, op.name);
    if (!cores) return cores.status();
    op.cores = std::move(*cores);
  }
  return Status::ok();
}

}  // namespace sk
