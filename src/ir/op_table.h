// The built-in op table: one row per op kind drives its name, arity, shape inference and kernel
// binding. Rows are indexed by OpKind; a static_assert in op_table.cc keeps the table and the
// SK_BUILTIN_OP_LIST of graph.h the same size.
#ifndef SUPERKERNEL_IR_OP_TABLE_H_
#define SUPERKERNEL_IR_OP_TABLE_H_

#include <string>
#include <vector>

#include "superkernel/graph.h"

namespace sk {

// Fills `outputs` with the inferred output specs. Always fills a best guess so that building can
// go on; returns an error naming the operand (by index and role) when the operands are bad.
using InferFn = Status (*)(const std::vector<const TensorInfo*>& inputs, const std::vector<uint8_t>& attrs,
                           std::vector<TensorSpec>& outputs);
// Kernel name for the given operands, e.g. "add.f32".
using BindFn = std::string (*)(const std::vector<const TensorInfo*>& inputs);

struct OpTypeInfo {
  OpKind kind;
  const char* name;
  int num_inputs;
  const char* const* input_roles;  // names used in error messages ("x", "weight", ...)
  InferFn infer;
  BindFn bind;
};

// Row for a built-in kind (kAdd .. kCopy).
const OpTypeInfo& builtin_op_info(OpKind kind);
bool is_builtin_op(OpKind kind);
constexpr int kNumBuiltinOps = 0
#define SK_OP_COUNT_(e, name) +1
    SK_BUILTIN_OP_LIST(SK_OP_COUNT_)
#undef SK_OP_COUNT_
    ;

}  // namespace sk

#endif  // SUPERKERNEL_IR_OP_TABLE_H_
