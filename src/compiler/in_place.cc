#include "compiler/in_place.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "compiler/access_ranges.h"

namespace sk {
namespace {

bool same_view(const sk_tensor_arg& a, const sk_tensor_arg& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.rank != b.rank) return false;
  const size_t dims = static_cast<size_t>(std::clamp(a.rank, 0, SK_MAX_RANK));
  return std::memcmp(a.shape, b.shape, dims * sizeof(int64_t)) == 0 &&
         std::memcmp(a.stride, b.stride, dims * sizeof(int64_t)) == 0;
}

// (output, input) index pairs of `op` that are the same view of non-empty storage.
std::vector<std::pair<int32_t, int32_t>> in_place_pairs(const PlanOp& op) {
  std::vector<std::pair<int32_t, int32_t>> pairs;
  if (!op.is_kernel()) return pairs;
  for (size_t o = 0; o < op.outputs.size(); ++o)
    for (size_t i = 0; i < op.inputs.size(); ++i)
      if (sk_tensor_numel(&op.outputs[o]) > 0 && same_view(op.outputs[o], op.inputs[i]))
        pairs.emplace_back(static_cast<int32_t>(o), static_cast<int32_t>(i));
  return pairs;
}

using ByteRanges = std::vector<std::pair<int64_t, int64_t>>;

// Per core of `n`, the bytes of operand `operand` that core reads (`mode` SK_ACCESS_READ) or
// writes; the whole operand on every core without an access callback.
Status ranges_per_core(const PlanOp& op, int32_t n, int32_t operand, int32_t mode, std::vector<ByteRanges>& out) {
  out.assign(n, {});
  const sk_tensor_arg& t = operand < op.args.num_inputs ? op.inputs[operand] : op.outputs[operand - op.args.num_inputs];
  int64_t lo = 0, hi = 0;
  for (int32_t d = 0; d < t.rank; ++d) {
    const int64_t span = (t.shape[d] - 1) * t.stride[d] * sk_dtype_size(t.dtype);
    (span < 0 ? lo : hi) += span;
  }
  hi += sk_dtype_size(t.dtype);
  std::vector<sk_access_range> ranges;
  for (int32_t c = 0; c < n; ++c) {
    if (!op.kernel->desc->access) {
      out[c].push_back({lo, hi});
      continue;
    }
    SK_RETURN_IF_ERROR(query_access_ranges(op, c, n, ranges));
    for (const sk_access_range& r : ranges)
      if (r.operand == operand && (r.mode & mode)) out[c].push_back({r.begin, r.end});
  }
  return Status::ok();
}

Status check_op(const PlanOp& op, int32_t output, int32_t input, int32_t n) {
  std::vector<ByteRanges> writes, reads;
  SK_RETURN_IF_ERROR(ranges_per_core(op, n, op.args.num_inputs + output, SK_ACCESS_WRITE, writes));
  SK_RETURN_IF_ERROR(ranges_per_core(op, n, input, SK_ACCESS_READ, reads));
  for (int32_t w = 0; w < n; ++w)
    for (int32_t r = 0; r < n; ++r) {
      if (w == r) continue;
      for (const auto& [wb, we] : writes[w])
        for (const auto& [rb, re] : reads[r]) {
          if (wb >= re || rb >= we) continue;
          return Status::invalid_argument(
              "op '" + op.name + "' (" + op_kind_name(op.kind) + "): output " + std::to_string(output) + " is input " +
              std::to_string(input) + " itself (in place), which kernel '" + op.kernel_name +
              "' does not support: on " + std::to_string(n) + " cores, core " + std::to_string(w) + " writes bytes [" +
              std::to_string(std::max(wb, rb)) + ", " + std::to_string(std::min(we, re)) + ") that core " +
              std::to_string(r) + " reads" +
              (op.kernel->desc->access ? " (per its access callback)" : " (it has no access callback)") +
              "; write the result to a separate tensor");
        }
    }
  return Status::ok();
}

}  // namespace

Status check_in_place(CompileContext& ctx) {
  for (const PlanOp& op : ctx.plan->ops) {
    for (const auto& [output, input] : in_place_pairs(op)) {
      const int32_t own = static_cast<int32_t>(op.cores.size());
      SK_RETURN_IF_ERROR(check_op(op, output, input, 2));
      if (own > 2) SK_RETURN_IF_ERROR(check_op(op, output, input, own));
    }
  }
  return Status::ok();
}

std::string describe_in_place(const CompileContext& ctx) {
  std::string out;
  for (const PlanOp& op : ctx.plan->ops)
    for (const auto& [output, input] : in_place_pairs(op))
      out += "  " + op.name + ": output " + std::to_string(output) + " in place over input " + std::to_string(input) +
             "\n";
  return out;
}

}  // namespace sk
