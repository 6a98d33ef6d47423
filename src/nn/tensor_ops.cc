// Builders of include/superkernel/tensor_ops.h: shape and dtype inference plus operand checks,
// then one call_kernel (cat: copies into slices of one declared tensor). Errors are recorded on
// the graph as "op '<name>' (<kernel>): ..." naming the operand; the op is still added with the
// best output shape, so building goes on and verify() reports the first error.
#include "superkernel/tensor_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>

#include "superkernel/ops.h"

namespace sk {
namespace {

template <typename Attrs>
std::vector<uint8_t> blob(const Attrs& attrs) {
  std::vector<uint8_t> bytes(sizeof(Attrs));
  std::memcpy(bytes.data(), &attrs, sizeof(Attrs));
  return bytes;
}

bool is_float(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }
bool is_integer(DType d) { return d == DType::kI8 || d == DType::kI32 || d == DType::kI64; }
bool is_index(DType d) { return d == DType::kI32 || d == DType::kI64; }
// torch's categories for type promotion: bool < integer < float.
int category(DType d) { return is_float(d) ? 2 : is_integer(d) ? 1 : 0; }

bool is_comparison(BinaryOp op) { return op >= BinaryOp::kEq && op <= BinaryOp::kGe; }
bool is_logical(BinaryOp op) { return op == BinaryOp::kLogicalAnd || op == BinaryOp::kLogicalOr; }
bool is_arithmetic(BinaryOp op) { return op <= BinaryOp::kMinimum; }

// What the checks need of an operand, copied: creating views (expand, slice) adds tensors to the
// graph, which may move its TensorInfo records.
struct Operand {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  Shape strides;
};

// The ops of one builder call: names the op and kernel in errors, records the first error only
// (later checks of a failed op would repeat it in other words).
class OpCheck {
 public:
  OpCheck(Graph& g, const char* builder, const char* kernel, std::string name)
      : g_(g), kernel_(kernel), name_(name.empty() ? std::string(builder) + "_" + std::to_string(g.num_ops()) : name) {}

  const std::string& name() const { return name_; }
  bool ok() const { return ok_; }

  // The operand's info, or null for a handle add_op will reject itself (it names the operand).
  const Operand* operand(Tensor t) {
    if (!t.valid() || t.graph_uid != g_.uid() || static_cast<size_t>(t.id) >= g_.num_tensors()) {
      ok_ = false;
      return nullptr;
    }
    const TensorInfo& info = g_.tensor(t);
    return &operands_.emplace_back(Operand{info.name, info.dtype, info.shape, info.strides});
  }

  void fail(const std::string& message) {
    if (ok_) g_.record_error(Status::invalid_argument("op '" + name_ + "' (" + kernel_ + "): " + message));
    ok_ = false;
  }

  // "operand 1 'b' f32[2, 3]"
  static std::string describe(int index, const char* role, const Operand& t) {
    return "operand " + std::to_string(index) + " ('" + role + "', tensor '" + t.name + "') " + dtype_name(t.dtype) +
           shape_to_string(t.shape);
  }

  // Normalises a possibly negative dim of a rank-`rank` operand; false (and an error) when out of range.
  bool dim(int& d, int rank, const std::string& what) {
    const int lo = -std::max(rank, 1);
    const int hi = std::max(rank, 1) - 1;
    if (d < lo || d > hi) {
      fail(what + " " + std::to_string(d) + " is out of range for rank " + std::to_string(rank));
      return false;
    }
    if (d < 0) d += std::max(rank, 1);
    return true;
  }

 private:
  Graph& g_;
  const char* kernel_;
  std::string name_;
  bool ok_ = true;
  std::deque<Operand> operands_;  // stable addresses
};

// numpy/torch broadcasting of several shapes; false with the first offending pair.
bool broadcast_shapes(const std::vector<const Shape*>& shapes, Shape& out, size_t& bad_a, size_t& bad_b, int& bad_dim) {
  size_t rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->size());
  out.assign(rank, 1);
  std::vector<int> owner(rank, -1);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = *shapes[i];
    const size_t lead = rank - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      const int64_t n = s[d];
      int64_t& o = out[lead + d];
      if (n == 1) continue;
      if (o == 1 || owner[lead + d] < 0) {
        o = n;
        owner[lead + d] = static_cast<int>(i);
      } else if (o != n) {
        bad_a = static_cast<size_t>(owner[lead + d]);
        bad_b = i;
        bad_dim = static_cast<int>(lead + d);
        return false;
      }
    }
  }
  return true;
}

bool one_element(const Operand& t) { return shape_numel(t.shape) == 1; }

// torch's result_type for two tensors, where a one-element tensor counts as a "scalar" tensor.
// False when the dtypes differ and neither side may be promoted.
bool promote(const Operand& a, const Operand& b, DType& out) {
  if (a.dtype == b.dtype) {
    out = a.dtype;
    return true;
  }
  const bool a_scalar = one_element(a) && !one_element(b);
  const bool b_scalar = one_element(b) && !one_element(a);
  const bool both = one_element(a) && one_element(b);
  if (!a_scalar && !b_scalar && !both) return false;
  // Dimensioned side (or, both one-element, the one of the higher category, else a).
  const Operand& dimensioned = b_scalar ? a : a_scalar ? b : (category(b.dtype) > category(a.dtype) ? b : a);
  const Operand& scalar = &dimensioned == &a ? b : a;
  out = category(scalar.dtype) > category(dimensioned.dtype) ? scalar.dtype : dimensioned.dtype;
  return true;
}

Shape strip_dims(const Shape& s, uint32_t mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (mask & (1u << d)) {
      if (keepdim) out.push_back(1);
    } else {
      out.push_back(s[d]);
    }
  }
  return out;
}

Tensor one_output(Graph& g, const OpCheck& c, const char* kernel, std::vector<Tensor> inputs, TensorSpec out,
                  std::vector<uint8_t> attrs) {
  std::vector<Tensor> outs = call_kernel(g, kernel, std::move(inputs), {std::move(out)}, std::move(attrs), c.name());
  return outs.empty() ? Tensor{} : outs[0];
}

}  // namespace

const char* unary_op_name(UnaryOp op) {
  static constexpr const char* kNames[] = {"neg",  "exp",  "log",        "sqrt",       "rsqrt", "sin",
                                           "cos",  "tanh", "sigmoid",    "silu",       "gelu",  "gelu_tanh",
                                           "relu", "abs",  "reciprocal", "logical_not"};
  const auto i = static_cast<size_t>(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

const char* binary_op_name(BinaryOp op) {
  static constexpr const char* kNames[] = {"add", "sub", "mul", "div", "pow", "maximum",     "minimum",   "eq",
                                           "ne",  "lt",  "le",  "gt",  "ge",  "logical_and", "logical_or"};
  const auto i = static_cast<size_t>(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

const char* reduce_op_name(ReduceOp op) {
  static constexpr const char* kNames[] = {"sum", "mean", "max", "min", "argmax", "argmin"};
  const auto i = static_cast<size_t>(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

// ---- Element-wise ------------------------------------------------------------------------------

Tensor unary(Graph& g, Tensor x, UnaryOp op, std::string name) {
  OpCheck c(g, "unary", "tensor.unary", std::move(name));
  const Operand* xi = c.operand(x);
  DType out = xi ? xi->dtype : DType::kF32;
  const int code = static_cast<int>(op);
  if (code < 0 || code >= SK_UNARY_OP_COUNT) {
    c.fail("unknown unary op " + std::to_string(code));
  } else if (xi != nullptr) {
    const bool keeps_integers = op == UnaryOp::kNeg || op == UnaryOp::kRelu || op == UnaryOp::kAbs;
    if (op == UnaryOp::kLogicalNot) {
      out = DType::kBool;
    } else if (keeps_integers && xi->dtype == DType::kBool) {
      c.fail(std::string(unary_op_name(op)) + " of " + OpCheck::describe(0, "x", *xi) +
             " is not defined for bool (cast it first)");
    } else if (!keeps_integers && !is_float(xi->dtype)) {
      out = DType::kF32;  // torch promotes integer and bool inputs of float functions
    }
  }
  return one_output(g, c, "tensor.unary", {x}, {out, xi ? xi->shape : Shape{}}, blob(sk_unary_attrs{code}));
}

namespace {

// Output dtype of a binary op whose compute dtype is `compute`.
DType binary_result(BinaryOp op, DType compute) {
  if (is_comparison(op) || is_logical(op)) return DType::kBool;
  if (op == BinaryOp::kDiv && !is_float(compute)) return DType::kF32;
  return compute;
}

bool check_binary_op(OpCheck& c, BinaryOp op) {
  const int code = static_cast<int>(op);
  if (code < 0 || code >= SK_BINARY_OP_COUNT) {
    c.fail("unknown binary op " + std::to_string(code));
    return false;
  }
  return true;
}

// Broadcast shape of the operands (in order, with their roles), or an error naming the pair.
Shape broadcast_operands(OpCheck& c, const std::vector<const Operand*>& infos, const std::vector<const char*>& roles) {
  std::vector<const Shape*> shapes;
  for (const Operand* t : infos) shapes.push_back(&t->shape);
  Shape out;
  size_t a = 0;
  size_t b = 0;
  int d = 0;
  if (!broadcast_shapes(shapes, out, a, b, d)) {
    c.fail(OpCheck::describe(static_cast<int>(a), roles[a], *infos[a]) + " and " +
           OpCheck::describe(static_cast<int>(b), roles[b], *infos[b]) + " do not broadcast (dim " + std::to_string(d) +
           " of the result)");
  }
  return out;
}

}  // namespace

Tensor binary(Graph& g, Tensor a, Tensor b, BinaryOp op, std::string name) {
  OpCheck c(g, "binary", "tensor.binary", std::move(name));
  const Operand* ai = c.operand(a);
  const Operand* bi = c.operand(b);
  Shape shape = ai ? ai->shape : Shape{};
  DType out = ai ? ai->dtype : DType::kF32;
  if (check_binary_op(c, op) && ai != nullptr && bi != nullptr) {
    shape = broadcast_operands(c, {ai, bi}, {"a", "b"});
    DType compute = ai->dtype;
    if (!promote(*ai, *bi, compute)) {
      c.fail(OpCheck::describe(0, "a", *ai) + " and " + OpCheck::describe(1, "b", *bi) +
             " have different dtypes (cast one, or pass a one-element tensor for a scalar)");
    } else if (is_arithmetic(op) && compute == DType::kBool) {
      c.fail(std::string(binary_op_name(op)) + " of bool operands is not defined (cast them first)");
    }
    out = binary_result(op, compute);
  }
  return one_output(g, c, "tensor.binary", {a, b}, {out, shape}, blob(sk_binary_attrs{static_cast<int32_t>(op)}));
}

Tensor binary_scalar(Graph& g, Tensor a, double scalar, BinaryOp op, bool scalar_first, std::string name) {
  OpCheck c(g, "binary_scalar", "tensor.binary_scalar", std::move(name));
  const Operand* ai = c.operand(a);
  DType out = ai ? ai->dtype : DType::kF32;
  if (check_binary_op(c, op) && ai != nullptr) {
    out = binary_result(op, ai->dtype);
    const bool integral = std::isfinite(scalar) && std::nearbyint(scalar) == scalar && std::fabs(scalar) < 0x1p63;
    const bool integer_math =
        !is_float(ai->dtype) && op != BinaryOp::kDiv && !is_logical(op) && !(is_comparison(op) && !integral);
    if (is_arithmetic(op) && ai->dtype == DType::kBool) {
      c.fail(std::string(binary_op_name(op)) + " of " + OpCheck::describe(0, "a", *ai) +
             " is not defined for bool (cast it first)");
    } else if (integer_math && !integral) {
      c.fail("scalar " + std::to_string(scalar) + " is not an integer, but " + OpCheck::describe(0, "a", *ai) +
             " computes in integers (cast a to a float dtype first)");
    } else if (integer_math && op == BinaryOp::kPow && !scalar_first && scalar < 0) {
      c.fail("integer " + OpCheck::describe(0, "a", *ai) + " to the negative power " + std::to_string(scalar) +
             " is not defined (cast it to a float dtype first)");
    }
  }
  const sk_binary_scalar_attrs attrs{static_cast<int32_t>(op), scalar_first ? 1 : 0, scalar};
  return one_output(g, c, "tensor.binary_scalar", {a}, {out, ai ? ai->shape : Shape{}}, blob(attrs));
}

Tensor where(Graph& g, Tensor cond, Tensor a, Tensor b, std::string name) {
  OpCheck c(g, "where", "tensor.where", std::move(name));
  const Operand* ci = c.operand(cond);
  const Operand* ai = c.operand(a);
  const Operand* bi = c.operand(b);
  Shape shape = ai ? ai->shape : Shape{};
  DType out = ai ? ai->dtype : DType::kF32;
  if (ci != nullptr && ai != nullptr && bi != nullptr) {
    shape = broadcast_operands(c, {ci, ai, bi}, {"cond", "a", "b"});
    if (ci->dtype != DType::kBool) c.fail(OpCheck::describe(0, "cond", *ci) + " must be bool");
    if (!promote(*ai, *bi, out)) {
      c.fail(OpCheck::describe(1, "a", *ai) + " and " + OpCheck::describe(2, "b", *bi) +
             " have different dtypes (cast one, or pass a one-element tensor for a scalar)");
    }
  }
  return one_output(g, c, "tensor.where", {cond, a, b}, {out, shape}, {});
}

Tensor cast(Graph& g, Tensor x, DType to, std::string name) {
  OpCheck c(g, "cast", "tensor.cast", std::move(name));
  const Operand* xi = c.operand(x);
  if (sk_dtype_size(static_cast<int32_t>(to)) == 0)
    c.fail("unknown target dtype " + std::to_string(static_cast<int>(to)));
  return one_output(g, c, "tensor.cast", {x}, {to, xi ? xi->shape : Shape{}}, {});
}

// ---- Reductions --------------------------------------------------------------------------------

Tensor reduce(Graph& g, Tensor x, ReduceOp op, std::vector<int> dims, bool keepdim, std::string name) {
  OpCheck c(g, "reduce", "tensor.reduce", std::move(name));
  const Operand* xi = c.operand(x);
  const int code = static_cast<int>(op);
  uint32_t mask = 0;
  DType out = DType::kF32;
  Shape shape;
  const bool arg = op == ReduceOp::kArgmax || op == ReduceOp::kArgmin;
  if (code < 0 || code >= SK_REDUCE_OP_COUNT) {
    c.fail("unknown reduce op " + std::to_string(code));
  } else if (xi != nullptr) {
    const int rank = static_cast<int>(xi->shape.size());
    if (arg && dims.size() > 1)
      c.fail(std::string(reduce_op_name(op)) + " reduces one dim or all of them, not " + std::to_string(dims.size()));
    for (int d : dims) {
      if (!c.dim(d, rank, "dim")) break;
      if (rank == 0) continue;  // dim 0 / -1 of a 0-d tensor is the tensor itself
      if (mask & (1u << d)) c.fail("dim " + std::to_string(d) + " is listed twice");
      mask |= 1u << d;
    }
    if (dims.empty()) mask = rank == 0 ? 0u : (1u << rank) - 1u;
    int64_t count = 1;
    for (int d = 0; d < rank; ++d)
      if (mask & (1u << d)) count *= xi->shape[d];
    // argmax / argmin over all dims of a tensor give a 0-d result (keepdim: all ones).
    shape = strip_dims(xi->shape, mask, keepdim);
    out = xi->dtype;
    if (op == ReduceOp::kSum && !is_float(xi->dtype)) out = DType::kI64;
    if (arg) out = DType::kI64;
    if (op == ReduceOp::kMean && !is_float(xi->dtype)) {
      c.fail("mean of " + OpCheck::describe(0, "x", *xi) + " needs a float dtype (cast it first)");
    } else if (op != ReduceOp::kSum && op != ReduceOp::kMean && count == 0) {
      c.fail(std::string(reduce_op_name(op)) + " of an empty reduction of " + OpCheck::describe(0, "x", *xi) +
             " has no result");
    } else if ((op == ReduceOp::kMax || op == ReduceOp::kMin || arg) && xi->dtype == DType::kBool) {
      c.fail(std::string(reduce_op_name(op)) + " of bool " + OpCheck::describe(0, "x", *xi) +
             " is not supported (cast it first)");
    }
  }
  const sk_reduce_attrs attrs{code, mask, keepdim ? 1 : 0};
  return one_output(g, c, "tensor.reduce", {x}, {out, shape}, blob(attrs));
}

Tensor cumsum(Graph& g, Tensor x, int dim, std::string name) {
  OpCheck c(g, "cumsum", "tensor.cumsum", std::move(name));
  const Operand* xi = c.operand(x);
  DType out = DType::kF32;
  if (xi != nullptr) {
    out = is_float(xi->dtype) ? xi->dtype : DType::kI64;
    if (xi->shape.empty())
      c.fail(OpCheck::describe(0, "x", *xi) + " must have rank >= 1");
    else
      c.dim(dim, static_cast<int>(xi->shape.size()), "dim");
  }
  return one_output(g, c, "tensor.cumsum", {x}, {out, xi ? xi->shape : Shape{}}, blob(sk_cumsum_attrs{dim}));
}

TopK topk(Graph& g, Tensor x, int64_t k, int dim, bool largest, bool sorted, std::string name) {
  (void)sorted;  // always sorted: torch leaves the unsorted order unspecified
  OpCheck c(g, "topk", "tensor.topk", std::move(name));
  const Operand* xi = c.operand(x);
  Shape shape;
  DType dtype = DType::kF32;
  if (xi != nullptr) {
    shape = xi->shape;
    dtype = xi->dtype;
    if (xi->shape.empty()) {
      c.fail(OpCheck::describe(0, "x", *xi) + " must have rank >= 1");
    } else if (c.dim(dim, static_cast<int>(xi->shape.size()), "dim")) {
      if (k < 0 || k > xi->shape[dim])
        c.fail("k = " + std::to_string(k) + " is outside [0, " + std::to_string(xi->shape[dim]) + "] for dim " +
               std::to_string(dim) + " of " + OpCheck::describe(0, "x", *xi));
      if (xi->dtype == DType::kBool) c.fail("top-k of bool " + OpCheck::describe(0, "x", *xi) + " is not supported");
      shape[dim] = std::clamp<int64_t>(k, 0, xi->shape[dim]);
    }
  }
  const sk_topk_attrs attrs{k, dim, largest ? 1 : 0};
  std::vector<Tensor> outs =
      call_kernel(g, "tensor.topk", {x}, {{dtype, shape, ""}, {DType::kI64, shape, ""}}, blob(attrs), c.name());
  if (outs.size() != 2) return {};
  return {outs[0], outs[1]};
}

// ---- Indexing ----------------------------------------------------------------------------------

namespace {

bool check_index_vector(OpCheck& c, const Operand& index, int operand, const char* role) {
  if (!is_index(index.dtype)) {
    c.fail(OpCheck::describe(operand, role, index) + " must be i32 or i64");
    return false;
  }
  if (index.shape.size() > 1) {
    c.fail(OpCheck::describe(operand, role, index) + " must be 1-D");
    return false;
  }
  return true;
}

}  // namespace

Tensor index_select(Graph& g, Tensor x, int dim, Tensor index, std::string name) {
  OpCheck c(g, "index_select", "tensor.index_select", std::move(name));
  const Operand* xi = c.operand(x);
  const Operand* ii = c.operand(index);
  Shape shape = xi ? xi->shape : Shape{};
  if (xi != nullptr && ii != nullptr && check_index_vector(c, *ii, 1, "index")) {
    if (xi->shape.empty()) {
      c.fail(OpCheck::describe(0, "x", *xi) + " must have rank >= 1");
    } else if (c.dim(dim, static_cast<int>(xi->shape.size()), "dim")) {
      shape[dim] = shape_numel(ii->shape);
    }
  }
  return one_output(g, c, "tensor.index_select", {x, index}, {xi ? xi->dtype : DType::kF32, shape},
                    blob(sk_index_attrs{dim}));
}

Tensor gather(Graph& g, Tensor x, int dim, Tensor index, std::string name) {
  OpCheck c(g, "gather", "tensor.gather", std::move(name));
  const Operand* xi = c.operand(x);
  const Operand* ii = c.operand(index);
  Shape shape = ii ? ii->shape : Shape{};
  if (xi != nullptr && ii != nullptr) {
    const int rank = static_cast<int>(xi->shape.size());
    if (!is_index(ii->dtype)) {
      c.fail(OpCheck::describe(1, "index", *ii) + " must be i32 or i64");
    } else if (ii->shape.size() != xi->shape.size() || rank == 0) {
      c.fail(OpCheck::describe(1, "index", *ii) + " must have the rank of " + OpCheck::describe(0, "x", *xi) +
             " (>= 1)");
    } else if (c.dim(dim, rank, "dim")) {
      for (int d = 0; d < rank; ++d) {
        if (d != dim && ii->shape[d] > xi->shape[d]) {
          c.fail("dim " + std::to_string(d) + " of " + OpCheck::describe(1, "index", *ii) + " exceeds that of " +
                 OpCheck::describe(0, "x", *xi));
          break;
        }
      }
    }
  }
  return one_output(g, c, "tensor.gather", {x, index}, {xi ? xi->dtype : DType::kF32, shape},
                    blob(sk_index_attrs{dim}));
}

void index_copy(Graph& g, Tensor dst, int dim, Tensor index, Tensor src, std::string name) {
  OpCheck c(g, "index_copy", "tensor.index_copy", std::move(name));
  const Operand* di = c.operand(dst);
  const Operand* ii = c.operand(index);
  const Operand* si = c.operand(src);
  if (di != nullptr && ii != nullptr && si != nullptr && check_index_vector(c, *ii, 1, "index")) {
    if (di->shape.empty()) {
      c.fail(OpCheck::describe(0, "dst", *di) + " must have rank >= 1");
    } else if (c.dim(dim, static_cast<int>(di->shape.size()), "dim")) {
      Shape want = di->shape;
      want[dim] = shape_numel(ii->shape);
      if (si->shape != want || si->dtype != di->dtype)
        c.fail(OpCheck::describe(2, "src", *si) + " must be " + dtype_name(di->dtype) + shape_to_string(want) +
               " (dst's dtype and shape with dim " + std::to_string(dim) + " of the index's length)");
    }
  }
  OpSpec spec;
  spec.kind = OpKind::kCustom;
  spec.kernel = "tensor.index_copy";
  spec.name = c.name();
  spec.inputs = {dst, index, src};
  spec.outputs = {{di ? di->dtype : DType::kF32, di ? di->shape : Shape{}}};
  spec.write_into = {dst};
  spec.attrs = blob(sk_index_attrs{dim});
  g.add_op(std::move(spec));
}

Tensor index_put(Graph& g, Tensor dst, std::vector<Tensor> indices, Tensor values, bool accumulate, std::string name) {
  OpCheck c(g, "index_put", "tensor.index_put", std::move(name));
  const Operand* di = c.operand(dst);
  const Operand* vi = c.operand(values);
  std::vector<Tensor> inputs{dst, values};
  if (di != nullptr && vi != nullptr) {
    const size_t rank = di->shape.size();
    if (indices.empty() || indices.size() > rank) {
      c.fail(std::to_string(indices.size()) + " index tensors for " + OpCheck::describe(0, "dst", *di) +
             " (1 to its rank, indexing its leading dims)");
    }
    // The indices broadcast to one length N (1-element ones repeat).
    int64_t n = 1;
    std::vector<const Operand*> index_infos;
    for (size_t i = 0; c.ok() && i < indices.size(); ++i) {
      const Operand* ii = c.operand(indices[i]);
      if (ii == nullptr || !check_index_vector(c, *ii, static_cast<int>(2 + i), "indices")) break;
      index_infos.push_back(ii);
      const int64_t len = shape_numel(ii->shape);
      if (len != 1 && n != 1 && len != n) {
        c.fail(OpCheck::describe(static_cast<int>(2 + i), "indices", *ii) + " has length " + std::to_string(len) +
               ", the others " + std::to_string(n));
      }
      if (len != 1) n = len;
    }
    Shape want{n};
    for (size_t d = indices.size(); d < rank; ++d) want.push_back(di->shape[d]);
    if (c.ok()) {
      for (size_t i = 0; i < indices.size(); ++i) {
        const Operand& ii = *index_infos[i];
        const Tensor t = indices[i];
        inputs.push_back(shape_numel(ii.shape) == n && ii.shape.size() == 1 ? t : g.expand(g.reshape(t, {1}), {n}));
      }
      if (vi->dtype != di->dtype) {
        c.fail(OpCheck::describe(1, "values", *vi) + " must have the dtype of " + OpCheck::describe(0, "dst", *di));
      } else {
        Shape joined;
        size_t a = 0;
        size_t b = 0;
        int bad = 0;
        if (vi->shape.size() > want.size() || !broadcast_shapes({&want, &vi->shape}, joined, a, b, bad) ||
            joined != want) {
          c.fail(OpCheck::describe(1, "values", *vi) + " does not broadcast to " + shape_to_string(want) +
                 " (the index length, then dst's dims after the indexed ones)");
        } else if (vi->shape != want) {
          inputs[1] = g.expand(values, want);
        }
      }
    }
  }
  if (!c.ok()) {
    inputs.resize(2);
    for (Tensor t : indices) inputs.push_back(t);
  }
  OpSpec spec;
  spec.kind = OpKind::kCustom;
  spec.kernel = "tensor.index_put";
  spec.name = c.name();
  spec.inputs = std::move(inputs);
  spec.outputs = {{di ? di->dtype : DType::kF32, di ? di->shape : Shape{}}};
  spec.write_into = {dst};
  spec.attrs = blob(sk_index_put_attrs{accumulate ? 1 : 0});
  g.add_op(std::move(spec));
  return dst;
}

Tensor cat(Graph& g, std::vector<Tensor> xs, int dim, std::string name) {
  OpCheck c(g, "cat", "copy", std::move(name));
  if (xs.empty()) {
    c.fail("needs at least one tensor");
    return Tensor{};
  }
  std::vector<const Operand*> infos;
  for (Tensor t : xs) infos.push_back(c.operand(t));
  if (!c.ok()) {
    g.record_error(Status::invalid_argument("op '" + c.name() + "' (cat): an operand is not a tensor of this graph"));
    return Tensor{};
  }
  const Operand& first = *infos[0];
  const int rank = static_cast<int>(first.shape.size());
  if (rank == 0) c.fail(OpCheck::describe(0, "xs", first) + " must have rank >= 1");
  if (c.ok()) c.dim(dim, rank, "dim");
  Shape shape = first.shape;
  if (c.ok()) {
    shape[dim] = 0;
    for (size_t i = 0; i < infos.size(); ++i) {
      const Operand& t = *infos[i];
      bool fits = t.dtype == first.dtype && t.shape.size() == first.shape.size();
      for (int d = 0; fits && d < rank; ++d) fits = d == dim || t.shape[d] == first.shape[d];
      if (!fits) {
        c.fail(OpCheck::describe(static_cast<int>(i), "xs", t) + " does not match " +
               OpCheck::describe(0, "xs", first) + " outside dim " + std::to_string(dim));
        break;
      }
      shape[dim] += t.shape[dim];
    }
  }
  if (!c.ok()) return g.declare(c.name(), first.dtype, first.shape);
  Tensor out = g.declare(c.name(), first.dtype, shape);
  int64_t at = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t len = infos[i]->shape[dim];
    OpSpec spec;
    spec.kind = OpKind::kCopy;
    spec.name = c.name() + "_" + std::to_string(i);
    spec.inputs = {xs[i]};
    spec.write_into = {g.slice(out, dim, at, at + len)};
    g.add_op(std::move(spec));
    at += len;
  }
  return out;
}

// ---- Matrix products and attention -------------------------------------------------------------

namespace {

// b is the transpose of a dense [N, K] matrix: the fast matmul kernels read it as a weight.
bool is_transposed_dense(const Operand& b) {
  if (b.shape.size() != 2) return false;
  const int64_t k = b.shape[0];
  const int64_t n = b.shape[1];
  return (k <= 1 || b.strides[0] == 1) && (n <= 1 || b.strides[1] == k);
}

}  // namespace

Tensor batched_mm(Graph& g, Tensor a, Tensor b, std::string name) {
  OpCheck c(g, "batched_mm", "tensor.batched_mm", std::move(name));
  const Operand* ai = c.operand(a);
  const Operand* bi = c.operand(b);
  Shape shape;
  DType dtype = ai ? ai->dtype : DType::kF32;
  if (ai != nullptr && bi != nullptr) {
    const size_t ra = ai->shape.size();
    const size_t rb = bi->shape.size();
    if (ra < 2 || rb < 2) {
      c.fail(OpCheck::describe(ra < 2 ? 0 : 1, ra < 2 ? "a" : "b", ra < 2 ? *ai : *bi) + " must have rank >= 2");
    } else if (ai->dtype != bi->dtype || !is_float(ai->dtype)) {
      c.fail(OpCheck::describe(0, "a", *ai) + " and " + OpCheck::describe(1, "b", *bi) +
             " must have one float dtype (f32, bf16 or f16)");
    } else if (ai->shape[ra - 1] != bi->shape[rb - 2]) {
      c.fail("K differs: " + OpCheck::describe(0, "a", *ai) + " is [..., M, K], " + OpCheck::describe(1, "b", *bi) +
             " is [..., K, N]");
    } else {
      const Shape ab(ai->shape.begin(), ai->shape.end() - 2);
      const Shape bb(bi->shape.begin(), bi->shape.end() - 2);
      size_t x = 0;
      size_t y = 0;
      int d = 0;
      if (!broadcast_shapes({&ab, &bb}, shape, x, y, d)) {
        c.fail("the batch dims of " + OpCheck::describe(0, "a", *ai) + " and " + OpCheck::describe(1, "b", *bi) +
               " do not broadcast");
      }
      if (shape.size() + 2 > SK_MAX_RANK) c.fail("the result's rank exceeds " + std::to_string(SK_MAX_RANK));
      shape.push_back(ai->shape[ra - 2]);
      shape.push_back(bi->shape[rb - 1]);
      const int64_t k = ai->shape[ra - 1];
      if (c.ok() && ai->dtype == DType::kF32 && is_transposed_dense(*bi) && (k <= 1 || ai->strides[ra - 1] == 1)) {
        // x @ w.t(): matmul.f32 reads w [N, K] row by row, the Linear layout.
        return matmul(g, a, g.transpose(b, {1, 0}), c.name());
      }
    }
  }
  return one_output(g, c, "tensor.batched_mm", {a, b}, {dtype, shape}, {});
}

Tensor sdpa(Graph& g, Tensor q, Tensor k, Tensor v, Tensor attn_mask, bool is_causal, double scale, std::string name) {
  OpCheck c(g, "sdpa", "tensor.sdpa", std::move(name));
  const Operand* qi = c.operand(q);
  const Operand* ki = c.operand(k);
  const Operand* vi = c.operand(v);
  const Operand* mi = attn_mask.valid() ? c.operand(attn_mask) : nullptr;
  Shape shape;
  DType dtype = qi ? qi->dtype : DType::kF32;
  std::vector<Tensor> inputs{q, k, v};
  if (attn_mask.valid()) inputs.push_back(attn_mask);
  float attr_scale = 0.0f;
  if (qi != nullptr && ki != nullptr && vi != nullptr && (mi != nullptr || !attn_mask.valid())) {
    if (qi->shape.size() != 4 || ki->shape.size() != 4 || vi->shape.size() != 4) {
      c.fail(OpCheck::describe(0, "q", *qi) + ", " + OpCheck::describe(1, "k", *ki) + " and " +
             OpCheck::describe(2, "v", *vi) + " must be [B, H, Lq, D], [B, Hkv, Lk, D], [B, Hkv, Lk, Dv]");
    } else {
      const Shape& qs = qi->shape;
      const Shape& ks = ki->shape;
      const Shape& vs = vi->shape;
      shape = {qs[0], qs[1], qs[2], vs[3]};
      if (ks[0] != qs[0] || vs[0] != qs[0] || ks[1] != vs[1] || ks[2] != vs[2] || ks[3] != qs[3]) {
        c.fail(OpCheck::describe(0, "q", *qi) + ", " + OpCheck::describe(1, "k", *ki) + " and " +
               OpCheck::describe(2, "v", *vi) + " must be [B, H, Lq, D], [B, Hkv, Lk, D], [B, Hkv, Lk, Dv]");
      } else if (ks[1] == 0 ? qs[1] != 0 : qs[1] % ks[1] != 0) {
        c.fail("the query heads of " + OpCheck::describe(0, "q", *qi) + " are not a multiple of the kv heads of " +
               OpCheck::describe(1, "k", *ki));
      } else if (qi->dtype != ki->dtype || qi->dtype != vi->dtype || !is_float(qi->dtype)) {
        c.fail(OpCheck::describe(0, "q", *qi) + ", k and v must have one float dtype (f32, bf16 or f16)");
      } else if (mi != nullptr && is_causal) {
        c.fail("an attention mask and is_causal exclude each other (as in torch)");
      } else if (mi != nullptr && mi->dtype != DType::kBool && mi->dtype != qi->dtype) {
        c.fail(OpCheck::describe(3, "attn_mask", *mi) + " must be bool or q's dtype");
      } else if (mi != nullptr) {
        const Shape full{qs[0], qs[1], qs[2], ks[2]};
        Shape joined;
        size_t a = 0;
        size_t b = 0;
        int d = 0;
        if (mi->shape.size() > 4 || !broadcast_shapes({&full, &mi->shape}, joined, a, b, d) || joined != full) {
          c.fail(OpCheck::describe(3, "attn_mask", *mi) +
                 " does not broadcast to [B, H, Lq, Lk] = " + shape_to_string(full));
        } else if (mi->shape != full) {
          inputs[3] = g.expand(attn_mask, full);
        }
      }
      const double s = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(qs[3], 1)));
      if (!std::isfinite(s) || static_cast<float>(s) <= 0.0f || !std::isfinite(static_cast<float>(s)))
        c.fail("scale " + std::to_string(scale) + " is not a finite positive f32");
      attr_scale = static_cast<float>(s);
    }
  }
  if (!c.ok() && shape.empty()) shape = qi ? qi->shape : Shape{};
  const sk_sdpa_attrs attrs{attr_scale, is_causal ? 1 : 0};
  return one_output(g, c, "tensor.sdpa", std::move(inputs), {dtype, shape}, blob(attrs));
}

}  // namespace sk
