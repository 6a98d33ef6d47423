// Private state of sk::Graph, shared by the files of src/ir.
#ifndef SUPERKERNEL_IR_GRAPH_IMPL_H_
#define SUPERKERNEL_IR_GRAPH_IMPL_H_

#include <string>
#include <unordered_map>
#include <vector>

#include "superkernel/graph.h"

namespace sk {

// Limits mirrored from the original scope API.
inline constexpr size_t kMaxScopeNameBytes = 255;
inline constexpr size_t kMaxScopes = 1024;

struct Graph::Impl {
  std::string name;
  uint32_t uid = 0;
  std::vector<TensorInfo> tensors;
  std::vector<OpInfo> ops;
  std::vector<ScopeInfo> scopes;  // id 0 is the "do not fuse" marker (empty name)
  std::unordered_map<std::string, int32_t> scope_ids;
  std::vector<std::string> streams{"default"};
  std::vector<std::string> events;

  // Attribute context.
  std::vector<int32_t> scope_stack;
  int32_t current_stream = 0;
  std::pair<int32_t, int32_t> core_limit{0, 0};

  // Errors found while building, reported by verify() in order.
  std::vector<Status> build_errors;

  void error(Status s) { build_errors.push_back(std::move(s)); }
  // Checks that `t` is a tensor of this graph; records an error naming `what` when not.
  bool check_handle(Tensor t, const std::string& what);
  int32_t add_tensor(TensorInfo info);
  std::string default_op_name(OpKind kind) const;
};

// Dense row-major strides of `shape`, in elements.
Shape dense_strides(const Shape& shape);
// True when `info` views its storage densely in row-major order.
bool is_dense(const TensorInfo& info);

}  // namespace sk

#endif  // SUPERKERNEL_IR_GRAPH_IMPL_H_
