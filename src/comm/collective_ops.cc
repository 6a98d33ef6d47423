// Graph builders of the communication kernels (include/superkernel/comm.h). They use the public
// graph API only, and no MPI: a graph with collectives can be built and compiled in any process.
#include <cstring>
#include <string>
#include <vector>

#include "superkernel/comm.h"
#include "superkernel/ops.h"

namespace sk::comm {
namespace {

bool dense(const TensorInfo& t) {
  int64_t expect = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expect) return false;
    expect *= t.shape[i];
  }
  return true;
}

// The op's name as call_kernel will give it, for messages recorded before the op exists.
std::string op_label(const Graph& g, const std::string& name, const char* kernel) {
  return "op '" + (name.empty() ? std::string(kernel) + "_" + std::to_string(g.num_ops()) : name) + "' (" + kernel +
         ")";
}

// Checks the group and the operand; records an error (naming the op) and returns false when bad.
bool check(Graph& g, const Group& group, Tensor x, const std::string& name, const char* kernel) {
  if (group.size < 1 || group.rank < 0 || group.rank >= group.size) {
    g.record_error(Status::invalid_argument(op_label(g, name, kernel) + ": rank " + std::to_string(group.rank) +
                                            " of " + std::to_string(group.size) + " ranks is not a rank"));
    return false;
  }
  if (!x.valid() || x.graph_uid != g.uid()) return true;  // call_kernel reports the bad operand
  const TensorInfo& t = g.tensor(x);
  if (!dense(t)) {
    g.record_error(Status::invalid_argument(op_label(g, name, kernel) + ": operand '" + t.name +
                                            "' must be dense; copy the strided view first (sk::copy)"));
    return false;
  }
  return true;
}

std::vector<uint8_t> attrs_blob(const Graph& g, const Group& group, int32_t groups = 1, int32_t in_layout = 0,
                                int32_t out_layout = 0, int32_t root = 0) {
  sk_comm_attrs a{};
  a.comm = group.handle;
  // The op's position in the graph: every rank builds the same graph, so the same op gets the
  // same tag on every rank, and no two ops of the graph share one.
  a.tag = static_cast<uint32_t>(g.num_ops());
  a.rank = group.rank;
  a.size = group.size;
  a.groups = groups;
  a.in_layout = in_layout;
  a.out_layout = out_layout;
  a.root = root;
  std::vector<uint8_t> blob(sizeof(a));
  std::memcpy(blob.data(), &a, sizeof(a));
  return blob;
}

// "comm.all_reduce.f32" for the reductions' dtypes; empty (and an error recorded) for others.
std::string reduction_kernel(Graph& g, const char* op, Tensor x, const std::string& name) {
  const std::string base = std::string("comm.") + op;
  if (!x.valid() || x.graph_uid != g.uid()) return base + ".f32";
  switch (g.tensor(x).dtype) {
    case DType::kF32:
      return base + ".f32";
    case DType::kBF16:
      return base + ".bf16";
    case DType::kF16:
      return base + ".f16";
    case DType::kI32:
      return base + ".i32";
    default:
      g.record_error(Status::invalid_argument(op_label(g, name, base.c_str()) + ": dtype " +
                                              dtype_name(g.tensor(x).dtype) +
                                              " cannot be summed (f32, bf16, f16 and i32 can)"));
      return "";
  }
}

// x's shape with dim 0 scaled by num / den; records an error when dim 0 does not divide.
Shape scaled_rows(Graph& g, Tensor x, int64_t num, int64_t den, const std::string& name, const char* kernel) {
  if (!x.valid() || x.graph_uid != g.uid()) return {1};
  Shape shape = g.tensor(x).shape;
  if (shape.empty()) {
    g.record_error(Status::invalid_argument(op_label(g, name, kernel) + ": operand '" + g.tensor(x).name +
                                            "' is a scalar; it needs a dimension 0 to split between the ranks"));
    return {1};
  }
  if ((shape[0] * num) % den != 0) {
    g.record_error(Status::invalid_argument(op_label(g, name, kernel) + ": dimension 0 of '" + g.tensor(x).name +
                                            "' (" + std::to_string(shape[0]) + ") is not a multiple of the " +
                                            std::to_string(den) + " ranks"));
    return shape;
  }
  shape[0] = shape[0] * num / den;
  return shape;
}

DType dtype_of(const Graph& g, Tensor x) {
  return x.valid() && x.graph_uid == g.uid() ? g.tensor(x).dtype : DType::kF32;
}
Shape shape_of(const Graph& g, Tensor x) { return x.valid() && x.graph_uid == g.uid() ? g.tensor(x).shape : Shape{1}; }

Tensor one_output(std::vector<Tensor> out) { return out.empty() ? Tensor{} : out[0]; }

}  // namespace

Tensor all_reduce(Graph& g, const Group& group, Tensor x, std::string name) {
  const std::string kernel = reduction_kernel(g, "all_reduce", x, name);
  if (kernel.empty() || !check(g, group, x, name, kernel.c_str())) return Tensor{};
  return one_output(
      call_kernel(g, kernel, {x}, {TensorSpec(dtype_of(g, x), shape_of(g, x))}, attrs_blob(g, group), std::move(name)));
}

Tensor reduce_scatter(Graph& g, const Group& group, Tensor x, std::string name) {
  const std::string kernel = reduction_kernel(g, "reduce_scatter", x, name);
  if (kernel.empty() || !check(g, group, x, name, kernel.c_str())) return Tensor{};
  const Shape shape = scaled_rows(g, x, 1, group.size, name, kernel.c_str());
  return one_output(
      call_kernel(g, kernel, {x}, {TensorSpec(dtype_of(g, x), shape)}, attrs_blob(g, group), std::move(name)));
}

Tensor all_gather(Graph& g, const Group& group, Tensor x, std::string name) {
  if (!check(g, group, x, name, "comm.all_gather")) return Tensor{};
  const Shape shape = scaled_rows(g, x, group.size, 1, name, "comm.all_gather");
  return one_output(call_kernel(g, "comm.all_gather", {x}, {TensorSpec(dtype_of(g, x), shape)}, attrs_blob(g, group),
                                std::move(name)));
}

Tensor all_to_all(Graph& g, const Group& group, Tensor x, std::string name) {
  if (!check(g, group, x, name, "comm.all_to_all")) return Tensor{};
  const Shape shape = scaled_rows(g, x, 1, 1, name, "comm.all_to_all");
  if (!shape.empty() && shape[0] % group.size != 0)
    g.record_error(Status::invalid_argument(op_label(g, name, "comm.all_to_all") + ": dimension 0 (" +
                                            std::to_string(shape[0]) + ") is not a multiple of the " +
                                            std::to_string(group.size) + " ranks"));
  return one_output(call_kernel(g, "comm.all_to_all", {x}, {TensorSpec(dtype_of(g, x), shape)}, attrs_blob(g, group),
                                std::move(name)));
}

AllToAllV all_to_all_v(Graph& g, const Group& group, Tensor x, Tensor send_counts, int64_t out_rows, int32_t groups,
                       int32_t in_layout, int32_t out_layout, std::string name) {
  const char* kernel = "comm.all_to_all_v";
  if (!check(g, group, x, name, kernel) || !check(g, group, send_counts, name, kernel)) return {};
  auto bad = [&](const std::string& why) {
    g.record_error(Status::invalid_argument(op_label(g, name, kernel) + ": " + why));
    return AllToAllV{};
  };
  if (groups < 1) return bad("groups must be >= 1, got " + std::to_string(groups));
  if (out_rows < 0) return bad("out_rows must be >= 0, got " + std::to_string(out_rows));
  for (int32_t layout : {in_layout, out_layout})
    if (layout != SK_COMM_RANK_MAJOR && layout != SK_COMM_GROUP_MAJOR)
      return bad("layout " + std::to_string(layout) + " is neither SK_COMM_RANK_MAJOR nor SK_COMM_GROUP_MAJOR");
  if (send_counts.valid() && send_counts.graph_uid == g.uid()) {
    const TensorInfo& c = g.tensor(send_counts);
    if (c.dtype != DType::kI32 || shape_numel(c.shape) != static_cast<int64_t>(group.size) * groups)
      return bad("send counts '" + c.name + "' must be i32 with " + std::to_string(group.size) + " ranks x " +
                 std::to_string(groups) + " groups elements, got " + dtype_name(c.dtype) + " " +
                 shape_to_string(c.shape));
  }
  Shape y_shape = shape_of(g, x);
  if (y_shape.empty()) return bad("operand is a scalar; it needs rows");
  y_shape[0] = out_rows;
  std::vector<Tensor> out = call_kernel(
      g, kernel, {x, send_counts},
      {TensorSpec(dtype_of(g, x), y_shape), TensorSpec(DType::kI32, {static_cast<int64_t>(group.size) * groups}),
       TensorSpec(DType::kI32, {groups})},
      attrs_blob(g, group, groups, in_layout, out_layout), std::move(name));
  if (out.size() != 3) return {};
  return {out[0], out[1], out[2]};
}

Tensor broadcast(Graph& g, const Group& group, Tensor x, int32_t root, std::string name) {
  if (!check(g, group, x, name, "comm.broadcast")) return Tensor{};
  if (root < 0 || root >= group.size) {
    g.record_error(Status::invalid_argument(op_label(g, name, "comm.broadcast") + ": root " + std::to_string(root) +
                                            " is not a rank of " + std::to_string(group.size)));
    return Tensor{};
  }
  return one_output(call_kernel(g, "comm.broadcast", {x}, {TensorSpec(dtype_of(g, x), shape_of(g, x))},
                                attrs_blob(g, group, 1, 0, 0, root), std::move(name)));
}

}  // namespace sk::comm
