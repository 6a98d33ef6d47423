// The graph API: typed tensors, ops in program order, streams, events and the scope and
// core-limit attributes the compiler reads.
//
//   sk::Graph g("mlp");
//   sk::Tensor x = g.input("x", sk::DType::kF32, {1, 512});
//   sk::Tensor w = g.constant("w", sk::DType::kF32, {512, 512}, weights.data(), weights.size() * 4);
//   {
//     sk::SuperKernelScope scope(g, "layer0");          // ops created here may fuse
//     sk::Tensor h = sk::matmul(g, x, w);
//     g.output(sk::rms_norm(g, h, norm_w, 1e-6f), "y");
//   }
//   if (sk::Status s = g.verify(); !s) std::cerr << s.to_string() << "\n";
//
// Building never fails loudly: a builder that gets bad operands records the error (naming the op
// and operand) and returns a tensor with the best shape it can infer; `verify()` and every
// compile report the recorded errors.
#ifndef SUPERKERNEL_GRAPH_H_
#define SUPERKERNEL_GRAPH_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "superkernel/kernel_abi.h"
#include "superkernel/status.h"

namespace sk {

enum class DType : int32_t {
  kF32 = SK_DTYPE_F32,
  kBF16 = SK_DTYPE_BF16,
  kF16 = SK_DTYPE_F16,
  kI8 = SK_DTYPE_I8,
  kI32 = SK_DTYPE_I32,
  kI64 = SK_DTYPE_I64,
  kBool = SK_DTYPE_BOOL,  // one byte, 0 or 1
};
const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);

using Shape = std::vector<int64_t>;
std::string shape_to_string(const Shape& shape);
int64_t shape_numel(const Shape& shape);

// Handles into one Graph. Cheap to copy; meaningless without their graph.
struct Tensor {
  int32_t id = -1;
  uint32_t graph_uid = 0;
  bool valid() const { return id >= 0; }
};
struct Stream {
  int32_t id = 0;  // 0 is the default stream
};
struct Event {
  int32_t id = -1;
};

enum class TensorKind {
  kInput,         // fed by the caller before each run
  kConstant,      // weights: data owned by the graph
  kVariable,      // persistent state (e.g. a KV cache): zero-initialised, survives runs
  kIntermediate,  // produced by an op
  kView,          // zero-copy alias of another tensor (reshape / transpose / slice / expand)
};
const char* tensor_kind_name(TensorKind kind);

// The built-in op set, one row per op: X(enum, "name").
#define SK_BUILTIN_OP_LIST(X) \
  X(kAdd, "add")              \
  X(kMul, "mul")              \
  X(kSiluMul, "silu_mul")     \
  X(kRmsNorm, "rms_norm")     \
  X(kSoftmax, "softmax")      \
  X(kMatmul, "matmul")        \
  X(kEmbedding, "embedding")  \
  X(kCopy, "copy")

enum class OpKind : int32_t {
#define SK_OP_ENUM_(e, name) e,
  SK_BUILTIN_OP_LIST(SK_OP_ENUM_)
#undef SK_OP_ENUM_
      kCustom,   // a kernel named by the user (from any loaded package)
  kHost,         // a C++ callback run on the host between kernels; never fusible
  kRecordEvent,  // records an event on the op's stream
  kWaitEvent,    // makes the op's stream wait for an event
};
const char* op_kind_name(OpKind kind);

// A tensor as a host callback sees it.
struct HostTensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Shape strides;  // elements
  size_t bytes() const;
};
struct HostOpContext {
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> outputs;
};
using HostCallback = std::function<Status(HostOpContext&)>;

struct TensorSpec {
  TensorSpec() = default;
  TensorSpec(DType dtype_, Shape shape_, std::string name_ = "")
      : dtype(dtype_), shape(std::move(shape_)), name(std::move(name_)) {}
  DType dtype = DType::kF32;
  Shape shape;
  std::string name;  // empty: derived from the op's name
};

// Everything needed to create an op. Built-in ops infer their outputs; custom kernels and host
// ops list them in `outputs`. `write_into` (one entry per output; an invalid Tensor{} entry
// means "new tensor") makes the op write existing tensors — variables, declared tensors, or
// views of them — instead of creating new ones.
//
// Aliasing rule (verify() and every compile enforce it, for every op and kernel): each output
// shares no byte with any input or other output of its op, or it is exactly the same view as an
// input (same storage, offset, dtype, shape and strides: the op works in place). An in-place op
// compiles only if its kernel allows it: no core may write bytes of the view that another core
// reads (per the kernel's access callback). A partial overlap is an error naming the op and both
// tensors, because its result would depend on how cores split and order the work.
//
//   sk::Tensor v = g.variable("v", sk::DType::kF32, {64});
//   spec.inputs = {g.slice(v, 0, 0, 32)};
//   spec.write_into = {g.slice(v, 0, 32, 64)};  // fine: disjoint halves
//   spec.write_into = {g.slice(v, 0, 1, 33)};   // error: overlaps the input by 31 elements
struct OpSpec {
  OpKind kind = OpKind::kCustom;
  std::string name;    // default: "<kind>_<index>"
  std::string kernel;  // kCustom: kernel name; built-ins: optional override
  std::vector<Tensor> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<Tensor> write_into;
  std::vector<uint8_t> attrs;
  HostCallback host;
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  Shape strides;  // elements
  TensorKind kind = TensorKind::kIntermediate;
  int32_t base = -1;          // views: the tensor whose storage this aliases (never a view)
  int64_t byte_offset = 0;    // views: offset into the base's storage
  int64_t storage_bytes = 0;  // non-views: bytes of dense storage
  int32_t definer = -1;       // first op writing it (intermediates and declared tensors)
  bool is_output = false;
  std::string output_name;
  std::vector<uint8_t> data;  // constants (empty for external ones)
  // External constants (Graph::constant_external): the bytes stay where the caller keeps them;
  // `keep_alive` holds that memory for as long as the graph or any executable needs it.
  const void* external_data = nullptr;
  std::shared_ptr<const void> keep_alive;
};

struct ScopeInfo {
  std::string name;     // empty: "do not fuse" marker
  std::string options;  // "key=value:key=value"
};

struct OpInfo {
  std::string name;
  OpKind kind = OpKind::kCustom;
  std::string kernel;  // bound kernel name (empty for host and event ops)
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<uint8_t> attrs;
  HostCallback host;
  int32_t stream = 0;
  int32_t event = -1;           // kRecordEvent / kWaitEvent
  std::vector<int32_t> scopes;  // enclosing fusion scopes, outermost first
  int32_t core_limit_cube = 0;  // 0 = no limit (LimitCoreNum)
  int32_t core_limit_vector = 0;
};

class Graph {
 public:
  explicit Graph(std::string name = "graph");
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const;

  // ---- Tensors -------------------------------------------------------------------------------
  Tensor input(std::string name, DType dtype, Shape shape);
  // Copies `bytes` bytes of weights (must equal numel * dtype size; a mismatch or a null `data`
  // is recorded as an error and nothing is copied).
  Tensor constant(std::string name, DType dtype, Shape shape, const void* data, size_t bytes);
  Tensor constant_f32(std::string name, Shape shape, std::span<const float> values);
  // A constant whose bytes stay at `data` (e.g. in a memory-mapped file): every executable
  // compiled from the graph reads them in place, without a copy. `keep_alive` owns that memory
  // (may be null when the caller guarantees it outlives the graph and its executables); the graph
  // and each executable hold it. `data` must be aligned to the dtype's size.
  Tensor constant_external(std::string name, DType dtype, Shape shape, const void* data, size_t bytes,
                           std::shared_ptr<const void> keep_alive);
  Tensor variable(std::string name, DType dtype, Shape shape);
  // An intermediate whose defining op comes later (OpSpec::write_into).
  Tensor declare(std::string name, DType dtype, Shape shape);
  void output(Tensor t, std::string name = "");

  // Zero-copy views. They never cut a fusion segment.
  Tensor reshape(Tensor t, Shape shape, std::string name = "");  // needs a dense source
  Tensor transpose(Tensor t, std::vector<int> perm, std::string name = "");
  Tensor slice(Tensor t, int dim, int64_t begin, int64_t end, std::string name = "");
  // torch's t[begin:end:step] along `dim` (step >= 1): ceil((end - begin) / step) elements,
  // the dim's stride times `step`. A view like any other: read in place by every kernel.
  Tensor slice(Tensor t, int dim, int64_t begin, int64_t end, int64_t step, std::string name = "");
  // torch's t.expand(shape): dims of size 1 repeat with stride 0, new leading dims may be added
  // (also with stride 0), and -1 keeps a dim's size. Readable everywhere a view is (kernels get
  // the 0 strides); an op cannot write an expanded view (its elements share memory), and
  // reshape needs a copy of it first.
  Tensor expand(Tensor t, Shape shape, std::string name = "");

  // ---- Ops -----------------------------------------------------------------------------------
  // Appends an op in program order; returns its outputs (write_into tensors when given).
  std::vector<Tensor> add_op(OpSpec spec);
  std::vector<Tensor> host_op(std::string name, HostCallback callback, std::vector<Tensor> inputs,
                              std::vector<TensorSpec> outputs);

  // ---- Streams and events --------------------------------------------------------------------
  Stream create_stream(std::string name);
  Event create_event(std::string name);
  void record(Event event);  // on the current stream
  void wait(Event event);    // on the current stream

  // ---- Attribute context (normally driven by the RAII guards below) --------------------------
  Status push_scope(std::string_view name, std::string_view options);
  Status pop_scope(std::string_view name);
  void set_stream(Stream stream);
  Stream current_stream() const;
  void set_core_limit(int32_t cube, int32_t vector);
  std::pair<int32_t, int32_t> core_limit() const;

  // ---- Inspection ----------------------------------------------------------------------------
  size_t num_tensors() const;
  size_t num_ops() const;
  size_t num_streams() const;
  size_t num_events() const;
  const TensorInfo& tensor(Tensor t) const;
  const TensorInfo& tensor(int32_t id) const;
  const OpInfo& op(size_t index) const;
  const ScopeInfo& scope(int32_t id) const;
  size_t num_scopes() const;
  const std::string& stream_name(int32_t id) const;
  const std::string& event_name(int32_t id) const;
  uint32_t uid() const;
  // Finds an input, variable or output by name (-1 when absent).
  int32_t find_tensor(std::string_view name) const;

  // Errors recorded while building (in order), then structural checks: operand shapes and
  // dtypes, use before definition, events waited on but never recorded, unclosed scopes, output
  // names that hide an input or variable, and the aliasing rule of OpSpec. Limits: one tensor at
  // most 2^47 bytes (an element count or byte size beyond it is an error naming the tensor or
  // op), 1024 scopes, 1024 streams, 65536 events.
  Status verify() const;

  // Records a user error found while building; verify() and compilation report it.
  void record_error(Status status);

  struct Impl;  // private state (src/ir/graph_impl.h)
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Ops created while a SuperKernelScope is alive belong to `scope`. The same name in several
// blocks is one fusion range. An empty name marks the ops inside as "do not fuse" (that marker
// wins over enclosing scopes). `options` is "key=value:key=value" (see docs/OPTIONS.md).
class SuperKernelScope {
 public:
  SuperKernelScope(Graph& graph, std::string_view scope, std::string_view options = "");
  SuperKernelScope(Graph& graph, const char* scope, std::string_view options = "");
  ~SuperKernelScope();
  SuperKernelScope(const SuperKernelScope&) = delete;
  SuperKernelScope& operator=(const SuperKernelScope&) = delete;

 private:
  Graph& graph_;
  std::string name_;
};

// The begin/end front-end. An empty or whitespace-only name is an error; unpaired or mismatched
// calls are recorded and fail verification/compilation naming both scopes.
Status super_kernel_scope_begin(Graph& graph, std::string_view scope, std::string_view options = "");
Status super_kernel_scope_end(Graph& graph, std::string_view scope);

// Ops created while alive run on `stream`.
class StreamScope {
 public:
  StreamScope(Graph& graph, Stream stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  Graph& graph_;
  Stream previous_;
};

// Limits the cores used by ops created while alive (cube and vector group; 0 = no limit).
class LimitCoreNum {
 public:
  LimitCoreNum(Graph& graph, int32_t cube, int32_t vector);
  ~LimitCoreNum();
  LimitCoreNum(const LimitCoreNum&) = delete;
  LimitCoreNum& operator=(const LimitCoreNum&) = delete;

 private:
  Graph& graph_;
  std::pair<int32_t, int32_t> previous_;
};

}  // namespace sk

#endif  // SUPERKERNEL_GRAPH_H_
