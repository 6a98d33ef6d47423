#include "ir/op_table.h"

#include <array>
#include <cstring>

#include "superkernel/attrs_core.h"

namespace sk {
namespace {

std::string dtype_suffix(DType d) { return dtype_name(d); }

Status operand_error(const char* role, int index, const std::string& what) {
  return Status::invalid_argument("operand " + std::to_string(index) + " ('" + role + "'): " + what);
}

// `b` must have a's shape or a suffix of it.
bool is_suffix_shape(const Shape& a, const Shape& b) {
  if (b.size() > a.size()) return false;
  return std::equal(b.rbegin(), b.rend(), a.rbegin());
}

Status infer_binary(const std::vector<const TensorInfo*>& in, const std::vector<uint8_t>&,
                    std::vector<TensorSpec>& out) {
  out = {{in[0]->dtype, in[0]->shape, ""}};
  if (in[0]->dtype != DType::kF32)
    return operand_error("a", 0, std::string("dtype ") + dtype_name(in[0]->dtype) + " is not supported (f32 only)");
  if (in[1]->dtype != in[0]->dtype)
    return operand_error(
        "b", 1, std::string("dtype ") + dtype_name(in[1]->dtype) + " does not match a's " + dtype_name(in[0]->dtype));
  if (!is_suffix_shape(in[0]->shape, in[1]->shape))
    return operand_error("b", 1,
                         "shape " + shape_to_string(in[1]->shape) + " is neither a's shape " +
                             shape_to_string(in[0]->shape) + " nor a suffix of it");
  return Status::ok();
}

Status infer_silu_mul(const std::vector<const TensorInfo*>& in, const std::vector<uint8_t>&,
                      std::vector<TensorSpec>& out) {
  out = {{in[0]->dtype, in[0]->shape, ""}};
  if (in[0]->dtype != DType::kF32)
    return operand_error("gate", 0, std::string("dtype ") + dtype_name(in[0]->dtype) + " is not supported (f32 only)");
  if (in[1]->dtype != in[0]->dtype) return operand_error("up", 1, "dtype does not match gate's");
  if (in[1]->shape != in[0]->shape)
    return operand_error(
        "up", 1, "shape " + shape_to_string(in[1]->shape) + " differs from gate's " + shape_to_string(in[0]->shape));
  return Status::ok();
}

Status infer_rms_norm(const std::vector<const TensorInfo*>& in, const std::vector<uint8_t>& attrs,
                      std::vector<TensorSpec>& out) {
  out = {{in[0]->dtype, in[0]->shape, ""}};
  if (attrs.size() != sizeof(sk_rms_norm_attrs)) return Status::invalid_argument("bad attribute blob");
  if (in[0]->dtype != DType::kF32) return operand_error("x", 0, "dtype must be f32");
  if (in[0]->shape.empty()) return operand_error("x", 0, "must have at least one dim");
  if (in[1]->dtype != DType::kF32) return operand_error("weight", 1, "dtype must be f32");
  if (in[1]->shape != Shape{in[0]->shape.back()})
    return operand_error("weight", 1,
                         "shape " + shape_to_string(in[1]->shape) + " must be [" + std::to_string(in[0]->shape.back()) +
                             "] (x's last dim)");
  return Status::ok();
}

Status infer_softmax(const std::vector<const TensorInfo*>& in, const std::vector<uint8_t>&,
                     std::vector<TensorSpec>& out) {
  out = {{in[0]->dtype, in[0]->shape, ""}};
  if (in[0]->dtype != DType::kF32) return operand_error("x", 0, "dtype must be f32");
  if (in[0]->shape.empty()) return operand_error("x", 0, "must have at least one dim");
  return Status::ok();
}

Status infer_matmul(const std::vector<const TensorInfo*>& in, const std::vector<uint8_t>&,
                    std::vector<TensorSpec>& out) {
  const Shape& xs = in[0]->shape;
  const Shape& ws = in[1]->shape;
  Shape ys = xs.empty() ? Shape{1} : xs;
  if (ws.size() == 2) ys.back() = ws[0];
  out = {{DType::kF32, ys, ""}};
  if (in[0]->dtype != DType::kF32) return operand_error("x", 0, "dtype must be f32");
  if (xs.empty()) return operand_error("x", 0, "must have at least one dim");
  if (ws.size() != 2) return operand_error("w", 1, "must be 2-D [N, K], got " + shape_to_string(ws));
  if (in[1]->dtype != DType::kF32)
    return operand_error("w", 1, std::string("weight dtype ") + dtype_name(in[1]->dtype) + " has no matmul kernel");
  if (ws[1] != xs.back())
    return operand_error("w", 1,
                         "K mismatch: x " + shape_to_string(xs) + " vs w " + shape_to_string(ws) + " (w is [N, K])");
  return Status::ok();
}

Status infer_embedding(const std::vector<const TensorInfo*>& in, const std::vector<uint8_t>&,
                       std::vector<TensorSpec>& out) {
  Shape ys = in[0]->shape;
  ys.push_back(in[1]->shape.size() == 2 ? in[1]->shape[1] : 1);
  out = {{in[1]->dtype, ys, ""}};
  if (in[0]->dtype != DType::kI32) return operand_error("ids", 0, "dtype must be i32");
  if (in[1]->shape.size() != 2) return operand_error("table", 1, "must be 2-D [V, D]");
  if (in[1]->dtype != DType::kF32) return operand_error("table", 1, "dtype must be f32");
  return Status::ok();
}

Status infer_copy(const std::vector<const TensorInfo*>& in, const std::vector<uint8_t>&, std::vector<TensorSpec>& out) {
  out = {{in[0]->dtype, in[0]->shape, ""}};
  return Status::ok();
}

std::string bind_by_first_dtype_impl(const char* op, const std::vector<const TensorInfo*>& in) {
  return std::string(op) + "." + dtype_suffix(in[0]->dtype);
}

#define SK_BIND_FIRST_(fn, op) \
  std::string fn(const std::vector<const TensorInfo*>& in) { return bind_by_first_dtype_impl(op, in); }
SK_BIND_FIRST_(bind_add, "add")
SK_BIND_FIRST_(bind_mul, "mul")
SK_BIND_FIRST_(bind_silu_mul, "silu_mul")
SK_BIND_FIRST_(bind_rms_norm, "rms_norm")
SK_BIND_FIRST_(bind_softmax, "softmax")
#undef SK_BIND_FIRST_

std::string bind_matmul(const std::vector<const TensorInfo*>& in) {
  return std::string("matmul.") + dtype_suffix(in[1]->dtype);
}
std::string bind_embedding(const std::vector<const TensorInfo*>& in) {
  return std::string("embedding.") + dtype_suffix(in[1]->dtype);
}
std::string bind_copy(const std::vector<const TensorInfo*>&) { return "copy"; }

constexpr const char* kRolesAB[] = {"a", "b"};
constexpr const char* kRolesGateUp[] = {"gate", "up"};
constexpr const char* kRolesNorm[] = {"x", "weight"};
constexpr const char* kRolesX[] = {"x"};
constexpr const char* kRolesMatmul[] = {"x", "w"};
constexpr const char* kRolesEmbedding[] = {"ids", "table"};

constexpr std::array<OpTypeInfo, kNumBuiltinOps> kOpTable = {{
    {OpKind::kAdd, "add", 2, kRolesAB, infer_binary, bind_add},
    {OpKind::kMul, "mul", 2, kRolesAB, infer_binary, bind_mul},
    {OpKind::kSiluMul, "silu_mul", 2, kRolesGateUp, infer_silu_mul, bind_silu_mul},
    {OpKind::kRmsNorm, "rms_norm", 2, kRolesNorm, infer_rms_norm, bind_rms_norm},
    {OpKind::kSoftmax, "softmax", 1, kRolesX, infer_softmax, bind_softmax},
    {OpKind::kMatmul, "matmul", 2, kRolesMatmul, infer_matmul, bind_matmul},
    {OpKind::kEmbedding, "embedding", 2, kRolesEmbedding, infer_embedding, bind_embedding},
    {OpKind::kCopy, "copy", 1, kRolesX, infer_copy, bind_copy},
}};

constexpr bool table_matches_enum() {
  for (size_t i = 0; i < kOpTable.size(); ++i)
    if (static_cast<size_t>(kOpTable[i].kind) != i) return false;
  return true;
}
static_assert(table_matches_enum(), "kOpTable rows must follow SK_BUILTIN_OP_LIST order");

}  // namespace

bool is_builtin_op(OpKind kind) { return static_cast<int>(kind) < kNumBuiltinOps; }

const OpTypeInfo& builtin_op_info(OpKind kind) {
  SK_CHECK(is_builtin_op(kind)) << "not a built-in op kind: " << static_cast<int>(kind);
  return kOpTable[static_cast<size_t>(kind)];
}

}  // namespace sk
