// Structural checks of a Graph. Build-time errors (operand shapes and dtypes, handles, use
// before definition) were recorded while building; this adds the checks that need the whole
// program: events, open scopes, names, and the aliasing rule between an op's operands.
#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>

#include "ir/graph_impl.h"

namespace sk {
namespace {

// A strided view as a set of byte intervals [offset + sum(i_d * stride_d), ... + elem), with
// dims of one element dropped and negative strides flipped, outermost (largest stride) first.
struct ByteView {
  int64_t offset = 0;
  int64_t elem = 1;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (count, stride in bytes), stride descending

  int64_t span_end(size_t from) const {  // end of the span of the sub-view without dims [0, from)
    int64_t e = offset + elem;
    for (size_t d = from; d < dims.size(); ++d) e += (dims[d].first - 1) * dims[d].second;
    return e;
  }
  // Exactly one contiguous interval: strides are the dense strides of the counts.
  bool dense(size_t from) const {
    int64_t expect = elem;
    for (size_t d = dims.size(); d-- > from;) {
      if (dims[d].second != expect) return false;
      expect *= dims[d].first;
    }
    return true;
  }
};

ByteView byte_view(const TensorInfo& t) {
  ByteView v;
  v.elem = static_cast<int64_t>(dtype_size(t.dtype));
  v.offset = t.kind == TensorKind::kView ? t.byte_offset : 0;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    int64_t n = t.shape[d];
    int64_t s = t.strides[d] * v.elem;
    if (n <= 1 || s == 0) continue;  // a repeated address adds no byte
    if (s < 0) {
      v.offset += (n - 1) * s;
      s = -s;
    }
    v.dims.push_back({n, s});
  }
  std::stable_sort(v.dims.begin(), v.dims.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// Whether sub-views a (dims [ad..]) and b (dims [bd..]) share a byte. Splits the wider view along
// its outermost dim, visiting only the indices whose span meets the other view's span, so the
// work follows the boundary between the views rather than their size. Answers "overlap" when
// `budget` runs out (the caller then reports that the views could not be shown disjoint).
bool views_meet(ByteView a, size_t ad, ByteView b, size_t bd, int64_t& budget) {
  if (--budget < 0) return true;
  const int64_t a_end = a.span_end(ad);
  const int64_t b_end = b.span_end(bd);
  if (a_end <= b.offset || b_end <= a.offset) return false;
  // Every element of both views starts at its view's offset plus a multiple of the strides' gcd,
  // so the views are disjoint when the offsets' difference keeps elements apart modulo it (the
  // even and odd columns of a matrix, say).
  int64_t step = 0;
  for (size_t d = ad; d < a.dims.size(); ++d) step = std::gcd(step, a.dims[d].second);
  for (size_t d = bd; d < b.dims.size(); ++d) step = std::gcd(step, b.dims[d].second);
  if (step > 0 && a.elem == b.elem) {
    const int64_t apart = ((b.offset - a.offset) % step + step) % step;
    if (apart >= a.elem && apart <= step - a.elem) return false;
  }
  const bool a_dense = a.dense(ad);
  const bool b_dense = b.dense(bd);
  if (a_dense && b_dense) return true;
  const bool split_a = !a_dense && (b_dense || a_end - a.offset >= b_end - b.offset);
  ByteView& v = split_a ? a : b;
  size_t& vd = split_a ? ad : bd;
  const ByteView& other = split_a ? b : a;
  const int64_t lo = other.offset;
  const int64_t hi = split_a ? b_end : a_end;
  const auto [count, stride] = v.dims[vd];
  const int64_t inner = v.span_end(vd + 1) - v.offset;
  // Sub-view j spans [offset + j*stride, offset + j*stride + inner).
  const int64_t j_begin = std::max<int64_t>(0, floor_div(lo - v.offset - inner, stride) + 1);
  const int64_t j_end = std::min<int64_t>(count, floor_div(hi - v.offset - 1, stride) + 1);
  const int64_t base = v.offset;
  ++vd;
  for (int64_t j = j_begin; j < j_end; ++j) {
    v.offset = base + j * stride;
    if (split_a ? views_meet(v, vd, b, bd, budget) : views_meet(a, ad, v, vd, budget)) return true;
  }
  return false;
}

bool same_view(const TensorInfo& a, const TensorInfo& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.strides == b.strides &&
         (a.kind == TensorKind::kView ? a.byte_offset : 0) == (b.kind == TensorKind::kView ? b.byte_offset : 0);
}

// The aliasing rule: an output shares no byte with any input or other output of its op, or it
// is exactly the same view as an input (the op works in place; the kernel may still refuse).
// Anything in between would make the result depend on how cores split and order the work.
Status check_operand_aliasing(const Graph::Impl& g, const OpInfo& op) {
  auto root = [&](int32_t id) { return g.tensors[id].kind == TensorKind::kView ? g.tensors[id].base : id; };
  // Overlap, or "" when the views share no byte; views too intricate to decide within the
  // budget count as overlapping.
  auto overlap = [&](const TensorInfo& a, const TensorInfo& b) -> std::string {
    int64_t budget = int64_t{1} << 22;
    if (!views_meet(byte_view(a), 0, byte_view(b), 0, budget)) return "";
    return budget < 0 ? " may overlap (too intricate to prove disjoint)" : " overlaps";
  };
  auto describe = [&](const char* role, size_t index, const TensorInfo& t) {
    return std::string(role) + " " + std::to_string(index) + " '" + t.name + "' " + shape_to_string(t.shape);
  };
  const std::string where = "op '" + op.name + "' (" + op_kind_name(op.kind) + ")";
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    const TensorInfo& out = g.tensors[op.outputs[o]];
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const TensorInfo& in = g.tensors[op.inputs[i]];
      if (root(op.outputs[o]) != root(op.inputs[i]) || same_view(out, in)) continue;
      const std::string relation = overlap(out, in);
      if (relation.empty()) continue;
      return Status::invalid_argument(where + ": " + describe("output", o, out) + relation + " " +
                                      describe("input", i, in) + " (not the same view) in the storage of '" +
                                      g.tensors[root(op.inputs[i])].name +
                                      "'; an output must be disjoint from every input or exactly the same view");
    }
    for (size_t p = 0; p < o; ++p) {
      const TensorInfo& other = g.tensors[op.outputs[p]];
      if (root(op.outputs[o]) != root(op.outputs[p])) continue;
      const std::string relation = overlap(out, other);
      if (relation.empty()) continue;
      return Status::invalid_argument(where + ": " + describe("output", o, out) + relation + " " +
                                      describe("output", p, other) + "; outputs of one op must be disjoint");
    }
  }
  return Status::ok();
}

}  // namespace

Status Graph::verify() const {
  const Impl& g = *impl_;
  const std::string where = "graph '" + g.name + "'";
  if (!g.build_errors.empty()) {
    std::string msg = g.build_errors.front().message();
    if (g.build_errors.size() > 1)
      msg += " (and " + std::to_string(g.build_errors.size() - 1) + " more error(s); first shown)";
    return Status(g.build_errors.front().code(), where + ": " + msg);
  }
  if (!g.scope_stack.empty()) {
    return Status::invalid_argument(where + ": scope_begin('" + g.scopes[g.scope_stack.back()].name +
                                    "') is never closed by a matching scope_end");
  }

  // Events: every wait must follow a record of the same event in program order.
  std::vector<bool> recorded(g.events.size(), false);
  for (const OpInfo& op : g.ops) {
    if (op.kind == OpKind::kRecordEvent) recorded[op.event] = true;
    if (op.kind == OpKind::kWaitEvent && !recorded[op.event]) {
      bool later = false;
      for (const OpInfo& other : g.ops)
        if (other.kind == OpKind::kRecordEvent && other.event == op.event) later = true;
      return Status::invalid_argument(
          where + ": op '" + op.name + "' waits on event '" + g.events[op.event] + "'" +
          (later ? " before it is recorded (record it earlier in program order)" : " which is never recorded"));
    }
  }

  // Names the caller uses to feed and read tensors must be unique.
  std::set<std::string> names;
  for (const TensorInfo& t : g.tensors) {
    if (t.kind == TensorKind::kInput || t.kind == TensorKind::kVariable) {
      if (!names.insert(t.name).second)
        return Status::invalid_argument(where + ": two inputs/variables are named '" + t.name + "'");
    }
  }
  std::set<std::string> outputs;
  for (const TensorInfo& t : g.tensors) {
    if (t.is_output && !outputs.insert(t.output_name).second)
      return Status::invalid_argument(where + ": two outputs are named '" + t.output_name + "'");
  }
  for (const TensorInfo& t : g.tensors) {
    if (t.kind == TensorKind::kIntermediate && t.definer < 0 && t.is_output)
      return Status::invalid_argument(where + ": output '" + t.output_name + "' is declared but never written");
  }
  // An output named like an input or variable would hide it from set_input (unless it is that
  // very tensor).
  std::unordered_map<std::string, size_t> leaves;
  for (size_t i = 0; i < g.tensors.size(); ++i)
    if (g.tensors[i].kind == TensorKind::kInput || g.tensors[i].kind == TensorKind::kVariable)
      leaves.emplace(g.tensors[i].name, i);
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const TensorInfo& t = g.tensors[i];
    auto it = t.is_output ? leaves.find(t.output_name) : leaves.end();
    if (it == leaves.end() || it->second == i) continue;
    return Status::invalid_argument(where + ": output '" + t.output_name + "' (tensor '" + t.name +
                                    "') has the name of " + tensor_kind_name(g.tensors[it->second].kind) + " '" +
                                    t.output_name + "'; give the output another name");
  }
  for (const OpInfo& op : g.ops) SK_RETURN_IF_ERROR(check_operand_aliasing(g, op).with_context(where));
  return Status::ok();
}

}  // namespace sk
