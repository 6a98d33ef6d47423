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
// Streams and events a graph may create (each costs per-core state in the scheduler).
inline constexpr size_t kMaxStreams = 1024;
inline constexpr size_t kMaxEvents = 65536;
// The most bytes one tensor may take: 2^47 (128 TiB), the user address space of x86-64 and
// AArch64 with 48-bit virtual addresses. Anything larger can never be allocated, and keeping sizes
// below it means byte offsets and sums of a few sizes never overflow int64_t.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 47;

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
  // Appends a tensor; for non-views, computes its storage size and records an error (naming
  // `owner`, e.g. "op 'mm' (matmul)", or else the tensor) when it overflows kMaxTensorBytes.
  int32_t add_tensor(TensorInfo info, const std::string& owner = "");
  std::string default_op_name(OpKind kind) const;
};

// Dense row-major strides of `shape`, in elements.
Shape dense_strides(const Shape& shape);
// Element count of `shape`, false when it overflows int64_t (or a dim is negative).
bool checked_numel(const Shape& shape, int64_t* numel);
// Bytes of dense storage of `shape`, false when they exceed kMaxTensorBytes.
bool checked_storage_bytes(const Shape& shape, DType dtype, int64_t* bytes);
// True when `info` views its storage densely in row-major order.
bool is_dense(const TensorInfo& info);

}  // namespace sk

#endif  // SUPERKERNEL_IR_GRAPH_IMPL_H_
