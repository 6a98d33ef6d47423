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

}  // namespace sk
