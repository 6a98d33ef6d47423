#include "compiler/partition_streams.h"

#include <algorithm>

#include "compiler/assign_cores.h"

namespace sk {
namespace {

// The cores an op's LimitCoreNum allows, as cores_for_kernel reads it; 0 when unlimited.
int32_t op_core_limit(int32_t kernel_type, const OpInfo& info) {
  switch (kernel_type) {
    case SK_KERNEL_CUBE:
      return info.core_limit_cube;
    case SK_KERNEL_VECTOR:
      return info.core_limit_vector;
    default:
      return info.core_limit_cube > 0 && info.core_limit_vector > 0 ? info.core_limit_cube + info.core_limit_vector : 0;
  }
}

Status partition_segment(CompileContext& ctx, Segment& seg) {
  const Graph& g = ctx.graph;
  Plan& plan = *ctx.plan;
  const int32_t n = ctx.layout.num_cores;
  auto stream_label = [&](int32_t stream) { return "stream '" + g.stream_name(stream) + "'"; };
  if (ctx.layout.cube_cores > 0)
    return Status::unimplemented("scope '" + seg.scope_label +
                                 "': stream fusion on a device with a cube/vector core split is not supported yet; "
                                 "turn stream-fusion off for the scope");

  std::vector<StreamPartition> parts;
  for (int32_t stream : seg.streams) parts.push_back({stream, 0, 0, 0});
  auto part_of = [&](int32_t stream) -> StreamPartition& {
    return *std::find_if(parts.begin(), parts.end(), [&](const StreamPartition& p) { return p.stream == stream; });
  };
  for (int32_t i : seg.ops) {
    const PlanOp& op = plan.ops[i];
    const OpInfo& info = g.op(op.graph_op);
    const int32_t limit = op_core_limit(op.kernel->desc->type, info);
    if (limit > n)
      return Status::invalid_argument("scope '" + seg.scope_label + "': op '" + op.name + "' on " +
                                      stream_label(info.stream) + " has LimitCoreNum " + std::to_string(limit) +
                                      ", more than the machine's " + std::to_string(n) + " cores");
    StreamPartition& p = part_of(info.stream);
    p.core_limit = std::max(p.core_limit, limit);
  }

  int32_t limited_cores = 0, unlimited = 0;
  std::string limited_list;
  for (const StreamPartition& p : parts) {
    if (p.core_limit == 0) {
      ++unlimited;
      continue;
    }
    limited_cores += p.core_limit;
    limited_list += (limited_list.empty() ? "" : " + ") + stream_label(p.stream) + " " + std::to_string(p.core_limit);
  }
  if (limited_cores > n)
    return Status::invalid_argument("scope '" + seg.scope_label + "': the core limits of " + limited_list +
                                    " add up to " + std::to_string(limited_cores) + ", more than the machine's " +
                                    std::to_string(n) + " cores; lower a LimitCoreNum or turn stream fusion off");
  const int32_t left = n - limited_cores;
  if (unlimited > 0 && left == 0) {
    const auto free_stream = std::find_if(parts.begin(), parts.end(), [](const auto& p) { return p.core_limit == 0; });
    return Status::invalid_argument("scope '" + seg.scope_label + "': the core limits of " + limited_list +
                                    " take all " + std::to_string(n) + " cores and leave none for " +
                                    stream_label(free_stream->stream) +
                                    ", which has no limit; lower a LimitCoreNum or give that stream one");
  }

  int32_t next_limited = left, j = 0;
  for (StreamPartition& p : parts) {
    if (p.core_limit > 0) {
      p.first_core = next_limited;
      p.num_cores = p.core_limit;
      next_limited += p.core_limit;
    } else if (left >= unlimited) {
      p.first_core = left / unlimited * j + std::min(j, left % unlimited);
      p.num_cores = left / unlimited + (j < left % unlimited ? 1 : 0);
      ++j;
    } else {
      p.first_core = j++ % left;
      p.num_cores = 1;
    }
  }

  const int32_t cap = ctx.options.super_kernel_debug_options.debug_per_op_max_core_num;
  for (int32_t i : seg.ops) {
    PlanOp& op = plan.ops[i];
    const OpInfo& info = g.op(op.graph_op);
    const StreamPartition& p = part_of(info.stream);
    auto cores = cores_for_kernel(CoreLayout{p.num_cores, 0}, op.kernel->desc->type, info.core_limit_cube,
                                  info.core_limit_vector, cap, op.name);
    if (!cores) return cores.status();
    for (int32_t& c : *cores) c += p.first_core;
    op.cores = std::move(*cores);
  }
  seg.partitions = std::move(parts);
  return Status::ok();
}

}  // namespace

Status partition_streams(CompileContext& ctx) {
  for (Segment& seg : ctx.segments)
    if (seg.streams.size() > 1) SK_RETURN_IF_ERROR(partition_segment(ctx, seg));
  return Status::ok();
}

}  // namespace sk
