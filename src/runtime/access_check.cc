#include "runtime/access_check.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "runtime/cpu/interpreter.h"

namespace sk {
namespace {

using Interval = std::pair<uintptr_t, uintptr_t>;  // [begin, end) addresses

// Bytes from an operand's data pointer to the end of its last element (views may be strided).
size_t extent_bytes(const sk_tensor_arg& t) {
  int64_t last = 0;
  for (int32_t d = 0; d < t.rank; ++d) {
    if (t.shape[d] == 0) return 0;
    last += (t.shape[d] - 1) * t.stride[d];
  }
  return static_cast<size_t>((last + 1) * sk_dtype_size(t.dtype));
}

struct Operand {
  const sk_tensor_arg* arg;
  std::string name;
  size_t bytes;
  std::vector<uint8_t> before;
};

// The ranges core `local` of `n` declares as written, as absolute addresses. A kernel without an
// access callback writes every output.
Expected<std::vector<Interval>> declared_writes(const PlanOp& op, int32_t local, int32_t n,
                                                const std::vector<Operand>& operands) {
  std::vector<Interval> out;
  const sk_kernel_desc* d = op.kernel->desc;
  const size_t num_in = op.inputs.size();
  if (!d->access) {
    for (size_t i = num_in; i < operands.size(); ++i) {
      const auto b = reinterpret_cast<uintptr_t>(operands[i].arg->data);
      out.push_back({b, b + operands[i].bytes});
    }
    return out;
  }
  std::vector<sk_access_range> ranges(16);
  int32_t count = d->access(&op.args, local, n, ranges.data(), static_cast<int32_t>(ranges.size()));
  if (count > static_cast<int32_t>(ranges.size())) {
    ranges.resize(static_cast<size_t>(count));
    count = d->access(&op.args, local, n, ranges.data(), count);
  }
  if (count < 0)
    return Status::kernel_error("access checker: access callback of kernel '" + std::string(d->name) + "' (op '" +
                                op.name + "') failed with code " + std::to_string(count));
  for (int32_t i = 0; i < count; ++i) {
    const sk_access_range& r = ranges[i];
    if (!(r.mode & SK_ACCESS_WRITE) || r.operand < 0 || static_cast<size_t>(r.operand) >= operands.size()) continue;
    const auto b = reinterpret_cast<uintptr_t>(operands[r.operand].arg->data);
    out.push_back({b + static_cast<uintptr_t>(r.begin), b + static_cast<uintptr_t>(r.end)});
  }
  return out;
}

bool covered(const std::vector<Interval>& allowed, uintptr_t addr) {
  return std::any_of(allowed.begin(), allowed.end(),
                     [&](const Interval& r) { return addr >= r.first && addr < r.second; });
}

void snapshot(std::vector<Operand>& operands) {
  // An empty operand may have no data pointer at all, and memcpy wants one even for 0 bytes.
  for (Operand& o : operands)
    if (o.bytes > 0) std::memcpy(o.before.data(), o.arg->data, o.bytes);
}

// The changed bytes outside `allowed` (first to last) of the first operand that has any, as an
// error; ok when there are none.
Status compare(const PlanOp& op, const std::string& who, const std::vector<Operand>& operands,
               const std::vector<Interval>& allowed) {
  for (const Operand& o : operands) {
    const auto* now = static_cast<const uint8_t*>(o.arg->data);
    const auto base = reinterpret_cast<uintptr_t>(now);
    size_t i = 0;
    while (i < o.bytes && (now[i] == o.before[i] || covered(allowed, base + i))) ++i;
    if (i == o.bytes) continue;
    size_t end = o.bytes;  // one past the last stray byte
    while (now[end - 1] == o.before[end - 1] || covered(allowed, base + end - 1)) --end;
    return Status::kernel_error("access checker: kernel '" + std::string(op.kernel->desc->name) + "' (op '" + op.name +
                                "') on " + who + " wrote bytes [" + std::to_string(i) + ", " + std::to_string(end) +
                                ") of " + o.name + ", outside the ranges its access callback declared for that core");
  }
  return Status::ok();
}

}  // namespace

Status run_access_checked(cpu::CpuDevice& device, const Plan& plan, PlanOp& op, const Launch& launch) {
  std::vector<Operand> operands;
  for (size_t i = 0; i < op.inputs.size() + op.outputs.size(); ++i) {
    const bool in = i < op.inputs.size();
    const sk_tensor_arg* arg = in ? &op.inputs[i] : &op.outputs[i - op.inputs.size()];
    const size_t bytes = arg->data ? extent_bytes(*arg) : 0;
    const size_t k = in ? i : i - op.inputs.size();
    const int32_t id = in ? op.input_ids[k] : op.output_ids[k];
    const std::string name =
        std::string(in ? "input " : "output ") + std::to_string(k) + " ('" + plan.tensors[id].name + "')";
    operands.push_back({arg, name, bytes, std::vector<uint8_t>(bytes)});
  }
  const int32_t n = static_cast<int32_t>(op.cores.size());
  if (op.kernel->desc->flags & (SK_USES_SYNC_ALL | SK_SYNCS_CORES)) {
    std::vector<Interval> allowed;
    for (int32_t local = 0; local < n; ++local) {
      auto w = declared_writes(op, local, n, operands);
      if (!w) return w.status();
      allowed.insert(allowed.end(), w->begin(), w->end());
    }
    snapshot(operands);
    SK_RETURN_IF_ERROR(cpu::run_launch(device, &op, launch));
    return compare(op, "its " + std::to_string(n) + " cores together (they sync)", operands, allowed);
  }
  for (int32_t local = 0; local < n; ++local) {
    auto allowed = declared_writes(op, local, n, operands);
    if (!allowed) return allowed.status();
    Launch single = launch;
    for (int32_t c = 0; c < single.num_cores; ++c)
      if (c != op.cores[local]) single.cores[c].instrs.clear();
    snapshot(operands);
    SK_RETURN_IF_ERROR(cpu::run_launch(device, &op, single));
    SK_RETURN_IF_ERROR(compare(op, "core " + std::to_string(local) + " of " + std::to_string(n), operands, *allowed));
  }
  return Status::ok();
}

}  // namespace sk
