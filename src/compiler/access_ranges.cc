#include "compiler/access_ranges.h"

namespace sk {

Status query_access_ranges(const PlanOp& op, int32_t local, int32_t n, std::vector<sk_access_range>& ranges) {
  const sk_kernel_desc* d = op.kernel->desc;
  ranges.resize(16);
  int32_t count = d->access(&op.args, local, n, ranges.data(), static_cast<int32_t>(ranges.size()));
  if (count > static_cast<int32_t>(ranges.size())) {
    ranges.resize(count);
    count = d->access(&op.args, local, n, ranges.data(), count);
  }
  if (count < 0 || count > static_cast<int32_t>(ranges.size()))
    return Status::kernel_error("op '" + op.name + "': access callback of kernel '" + d->name + "' failed (" +
                                std::to_string(count) + ") for core " + std::to_string(local) + "/" +
                                std::to_string(n));
  ranges.resize(count);
  const int32_t operands = op.args.num_inputs + op.args.num_outputs;
  for (const sk_access_range& r : ranges) {
    if (r.operand < 0 || r.operand >= operands || r.begin > r.end || (r.mode & ~3) || !r.mode)
      return Status::kernel_error("op '" + op.name + "': access callback of kernel '" + d->name +
                                  "' returned a bad range (operand " + std::to_string(r.operand) + ", mode " +
                                  std::to_string(r.mode) + ")");
  }
  return Status::ok();
}

ByteRange operand_extent(const sk_tensor_arg& t) {
  const auto base = reinterpret_cast<uint64_t>(t.data);
  const int64_t elem = sk_dtype_size(t.dtype);
  int64_t lo = 0, hi = 0;
  for (int32_t d = 0; d < t.rank; ++d) {
    if (t.shape[d] == 0) return {base, base};
    const int64_t span = (t.shape[d] - 1) * t.stride[d];
    (span < 0 ? lo : hi) += span;
  }
  return {base + static_cast<uint64_t>(lo * elem), base + static_cast<uint64_t>((hi + 1) * elem)};
}

namespace {

// The workspace may reuse another buffer's bytes. A shared one is touched by every core of the op;
// a per-core one only in this core's slice, unless the kernel syncs its cores (SK_SYNCS_CORES):
// those may read each other's slices after a sync_cores, so each core touches all of them.
void add_workspace_access(const PlanOp& op, int32_t local, CoreAccess& out) {
  if (!op.args.workspace || !op.workspace_bytes) return;
  uint64_t ws = reinterpret_cast<uint64_t>(op.args.workspace);
  uint64_t bytes = op.workspace_bytes;
  if (op.workspace_per_core()) {
    if (op.kernel->desc->flags & SK_SYNCS_CORES) {
      bytes *= op.cores.size();
    } else {
      ws += static_cast<uint64_t>(local) * op.workspace_bytes;
    }
  }
  out.reads.push_back({ws, ws + bytes});
  out.writes.push_back({ws, ws + bytes});
}

}  // namespace

Status collect_core_access(const PlanOp& op, int32_t local, int32_t n, CoreAccess& out) {
  const sk_kernel_desc* d = op.kernel->desc;
  if (op.tiling_sink) {
    const auto t = reinterpret_cast<uint64_t>(op.tiling.data());
    out.reads.push_back({t, t + op.tiling.size()});
  }
  const int32_t n_in = op.args.num_inputs;
  if (d->access) {
    std::vector<sk_access_range> ranges;
    SK_RETURN_IF_ERROR(query_access_ranges(op, local, n, ranges));
    for (const sk_access_range& r : ranges) {
      const sk_tensor_arg& t = r.operand < n_in ? op.inputs[r.operand] : op.outputs[r.operand - n_in];
      const auto base = reinterpret_cast<uint64_t>(t.data);
      const ByteRange range{base + static_cast<uint64_t>(r.begin), base + static_cast<uint64_t>(r.end)};
      if (r.mode & SK_ACCESS_READ) out.reads.push_back(range);
      if (r.mode & SK_ACCESS_WRITE) out.writes.push_back(range);
    }
  } else {
    for (const sk_tensor_arg& t : op.inputs) out.reads.push_back(operand_extent(t));
    for (const sk_tensor_arg& t : op.outputs) out.writes.push_back(operand_extent(t));
  }
  add_workspace_access(op, local, out);
  return Status::ok();
}

void collect_prologue_access(const PlanOp& op, int32_t local, CoreAccess& out) {
  if (op.tiling_sink) {
    const auto t = reinterpret_cast<uint64_t>(op.tiling.data());
    out.reads.push_back({t, t + op.tiling.size()});
  }
  add_workspace_access(op, local, out);
}

}  // namespace sk
