#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <new>
#include <numeric>

#include "ir/graph_impl.h"
#include "ir/op_table.h"

namespace sk {

// ---- Small value helpers -------------------------------------------------------------------------

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI8:
      return "i8";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

size_t dtype_size(DType dtype) { return static_cast<size_t>(sk_dtype_size(static_cast<int32_t>(dtype))); }

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const char* tensor_kind_name(TensorKind kind) {
  switch (kind) {
    case TensorKind::kInput:
      return "input";
    case TensorKind::kConstant:
      return "constant";
    case TensorKind::kVariable:
      return "variable";
    case TensorKind::kIntermediate:
      return "intermediate";
    case TensorKind::kView:
      return "view";
  }
  return "?";
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
#define SK_OP_NAME_(e, name) \
  case OpKind::e:            \
    return name;
    SK_BUILTIN_OP_LIST(SK_OP_NAME_)
#undef SK_OP_NAME_
    case OpKind::kCustom:
      return "custom";
    case OpKind::kHost:
      return "host";
    case OpKind::kRecordEvent:
      return "record_event";
    case OpKind::kWaitEvent:
      return "wait_event";
  }
  return "?";
}

size_t HostTensor::bytes() const { return static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype); }

Shape dense_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

bool checked_numel(const Shape& shape, int64_t* numel) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  }
  *numel = n;
  return true;
}

bool checked_storage_bytes(const Shape& shape, DType dtype, int64_t* bytes) {
  int64_t n = 0;
  int64_t b = 0;
  if (!checked_numel(shape, &n) || __builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &b) ||
      b > kMaxTensorBytes)
    return false;
  *bytes = b;
  return true;
}

bool is_dense(const TensorInfo& info) {
  int64_t expect = 1;
  for (int i = static_cast<int>(info.shape.size()) - 1; i >= 0; --i) {
    if (info.shape[i] != 1 && info.strides[i] != expect) return false;
    expect *= info.shape[i];
  }
  return true;
}

// ---- Graph::Impl ---------------------------------------------------------------------------------

namespace {
std::atomic<uint32_t> g_next_graph_uid{1};

bool shape_is_static(const Shape& shape) {
  return std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 0; });
}
}  // namespace

bool Graph::Impl::check_handle(Tensor t, const std::string& what) {
  if (t.graph_uid != uid || t.id < 0 || static_cast<size_t>(t.id) >= tensors.size()) {
    error(Status::invalid_argument(what + ": tensor handle is invalid or belongs to another graph"));
    return false;
  }
  return true;
}

int32_t Graph::Impl::add_tensor(TensorInfo info, const std::string& owner) {
  if (info.kind != TensorKind::kView && shape_is_static(info.shape) &&
      !checked_storage_bytes(info.shape, info.dtype, &info.storage_bytes)) {
    // A zero-sized placeholder keeps later size arithmetic safe; the error fails verification.
    error(Status::invalid_argument((owner.empty() ? std::string(tensor_kind_name(info.kind)) : owner + " output") +
                                   " '" + info.name + "': shape " + shape_to_string(info.shape) + " of " +
                                   dtype_name(info.dtype) + " needs more than " + std::to_string(kMaxTensorBytes) +
                                   " bytes (2^47, the address space), or its element count overflows"));
    info.shape.assign(info.shape.size(), 0);
    info.storage_bytes = 0;
  }
  if (info.strides.empty() && !info.shape.empty()) info.strides = dense_strides(info.shape);
  tensors.push_back(std::move(info));
  return static_cast<int32_t>(tensors.size() - 1);
}

std::string Graph::Impl::default_op_name(OpKind kind) const {
  return std::string(op_kind_name(kind)) + "_" + std::to_string(ops.size());
}

// ---- Graph ---------------------------------------------------------------------------------------

Graph::Graph(std::string name) : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(name);
  impl_->uid = g_next_graph_uid.fetch_add(1, std::memory_order_relaxed);
  impl_->scopes.push_back({"", ""});  // id 0: the "do not fuse" marker
}
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

const std::string& Graph::name() const { return impl_->name; }
uint32_t Graph::uid() const { return impl_->uid; }

namespace {
Tensor make_handle(const Graph::Impl& impl, int32_t id) { return Tensor{id, impl.uid}; }
}  // namespace

static Tensor new_leaf(Graph::Impl& impl, std::string name, DType dtype, Shape shape, TensorKind kind) {
  if (!shape_is_static(shape))
    impl.error(Status::invalid_argument(std::string(tensor_kind_name(kind)) + " '" + name + "': shape " +
                                        shape_to_string(shape) + " is dynamic; only static shapes are supported"));
  if (shape.size() > SK_MAX_RANK)
    impl.error(Status::invalid_argument(std::string(tensor_kind_name(kind)) + " '" + name + "': rank " +
                                        std::to_string(shape.size()) + " exceeds " + std::to_string(SK_MAX_RANK)));
  TensorInfo info;
  info.name = std::move(name);
  info.dtype = dtype;
  info.shape = std::move(shape);
  info.kind = kind;
  return make_handle(impl, impl.add_tensor(std::move(info)));
}

Tensor Graph::input(std::string name, DType dtype, Shape shape) {
  return new_leaf(*impl_, std::move(name), dtype, std::move(shape), TensorKind::kInput);
}

Tensor Graph::constant(std::string name, DType dtype, Shape shape, const void* data, size_t bytes) {
  std::string n = name;
  Tensor t = new_leaf(*impl_, std::move(name), dtype, std::move(shape), TensorKind::kConstant);
  TensorInfo& info = impl_->tensors[t.id];
  const size_t expect = static_cast<size_t>(std::max<int64_t>(info.storage_bytes, 0));
  const size_t errors_before = impl_->build_errors.size();
  if (bytes != expect || (data == nullptr && bytes != 0)) {
    impl_->error(Status::invalid_argument("constant '" + n + "': got " + std::to_string(bytes) + " bytes of data" +
                                          (data == nullptr && bytes != 0 ? " at nullptr" : "") + ", shape " +
                                          shape_to_string(info.shape) + " of " + dtype_name(dtype) + " needs " +
                                          std::to_string(expect)));
  }
  // A rejected constant keeps no data (the graph cannot compile), so a wrong size never turns
  // into a huge placeholder allocation.
  if (impl_->build_errors.size() != errors_before) return t;
  try {
    info.data.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
  } catch (const std::bad_alloc&) {
    impl_->error(Status::invalid_argument("constant '" + n + "': out of memory copying its " + std::to_string(bytes) +
                                          " bytes"));
  }
  return t;
}

Tensor Graph::constant_external(std::string name, DType dtype, Shape shape, const void* data, size_t bytes,
                                std::shared_ptr<const void> keep_alive) {
  std::string n = name;
  Tensor t = new_leaf(*impl_, std::move(name), dtype, std::move(shape), TensorKind::kConstant);
  TensorInfo& info = impl_->tensors[t.id];
  const size_t expect = static_cast<size_t>(std::max<int64_t>(info.storage_bytes, 0));
  const auto address = reinterpret_cast<uintptr_t>(data);
  if (bytes != expect || (data == nullptr && bytes != 0)) {
    impl_->error(Status::invalid_argument("external constant '" + n + "': got " + std::to_string(bytes) + " bytes at " +
                                          (data ? "an address" : "a null address") + ", shape " +
                                          shape_to_string(info.shape) + " of " + dtype_name(dtype) + " needs " +
                                          std::to_string(expect)));
  } else if (address % dtype_size(dtype) != 0) {
    impl_->error(Status::invalid_argument("external constant '" + n + "': data at address " + std::to_string(address) +
                                          " is not aligned to its " + std::to_string(dtype_size(dtype)) + "-byte " +
                                          dtype_name(dtype) + " elements"));
  } else {
    info.external_data = data;
    info.keep_alive = std::move(keep_alive);
    return t;
  }
  // Verification fails on the recorded error; the placeholder keeps the graph well-formed.
  info.data.assign(expect, 0);
  return t;
}

Tensor Graph::constant_f32(std::string name, Shape shape, std::span<const float> values) {
  return constant(std::move(name), DType::kF32, std::move(shape), values.data(), values.size_bytes());
}

Tensor Graph::variable(std::string name, DType dtype, Shape shape) {
  return new_leaf(*impl_, std::move(name), dtype, std::move(shape), TensorKind::kVariable);
}

Tensor Graph::declare(std::string name, DType dtype, Shape shape) {
  return new_leaf(*impl_, std::move(name), dtype, std::move(shape), TensorKind::kIntermediate);
}

void Graph::output(Tensor t, std::string name) {
  if (!impl_->check_handle(t, "output '" + name + "'")) return;
  TensorInfo& info = impl_->tensors[t.id];
  if (name.empty()) name = info.name;
  if (info.is_output) {
    impl_->error(Status::invalid_argument("tensor '" + info.name + "' is marked as output twice ('" + info.output_name +
                                          "' and '" + name + "')"));
    return;
  }
  info.is_output = true;
  info.output_name = std::move(name);
}

// ---- Views ---------------------------------------------------------------------------------------

namespace {
Tensor add_view(Graph::Impl& impl, const TensorInfo& src, std::string name, Shape shape, Shape strides,
                int64_t extra_offset_elems) {
  TensorInfo v;
  v.name = std::move(name);
  v.dtype = src.dtype;
  v.shape = std::move(shape);
  v.strides = std::move(strides);
  v.kind = TensorKind::kView;
  bool src_is_view = src.kind == TensorKind::kView;
  v.byte_offset =
      (src_is_view ? src.byte_offset : 0) + extra_offset_elems * static_cast<int64_t>(dtype_size(src.dtype));
  // Views always point at their root storage so planners see one buffer.
  v.base = src_is_view ? src.base : static_cast<int32_t>(&src - impl.tensors.data());
  v.definer = src.definer;
  return Tensor{impl.add_tensor(std::move(v)), impl.uid};
}
}  // namespace

Tensor Graph::reshape(Tensor t, Shape shape, std::string name) {
  if (name.empty()) name = "reshape_" + std::to_string(impl_->tensors.size());
  if (!impl_->check_handle(t, "reshape '" + name + "'")) return input(name, DType::kF32, shape);
  const TensorInfo src = impl_->tensors[t.id];
  int64_t numel = 0;
  if (!checked_numel(shape, &numel) || numel != shape_numel(src.shape)) {
    impl_->error(Status::invalid_argument("reshape '" + name + "': cannot reshape '" + src.name + "' " +
                                          shape_to_string(src.shape) + " to " + shape_to_string(shape)));
  } else if (!is_dense(src)) {
    impl_->error(Status::invalid_argument("reshape '" + name + "': source '" + src.name +
                                          "' is not dense; copy it first (sk::copy)"));
  }
  Shape strides = dense_strides(shape);
  return add_view(*impl_, impl_->tensors[t.id], std::move(name), std::move(shape), std::move(strides), 0);
}

Tensor Graph::transpose(Tensor t, std::vector<int> perm, std::string name) {
  if (name.empty()) name = "transpose_" + std::to_string(impl_->tensors.size());
  if (!impl_->check_handle(t, "transpose '" + name + "'")) return input(name, DType::kF32, {});
  const TensorInfo& src = impl_->tensors[t.id];
  std::vector<int> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> iota(src.shape.size());
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota) {
    impl_->error(Status::invalid_argument("transpose '" + name + "': permutation is not a permutation of the " +
                                          std::to_string(src.shape.size()) + " dims of '" + src.name + "'"));
    return add_view(*impl_, src, std::move(name), src.shape, src.strides, 0);
  }
  Shape shape(perm.size()), strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    shape[i] = src.shape[perm[i]];
    strides[i] = src.strides[perm[i]];
  }
  return add_view(*impl_, src, std::move(name), std::move(shape), std::move(strides), 0);
}

Tensor Graph::slice(Tensor t, int dim, int64_t begin, int64_t end, std::string name) {
  return slice(t, dim, begin, end, 1, std::move(name));
}

Tensor Graph::slice(Tensor t, int dim, int64_t begin, int64_t end, int64_t step, std::string name) {
  if (name.empty()) name = "slice_" + std::to_string(impl_->tensors.size());
  if (!impl_->check_handle(t, "slice '" + name + "'")) return input(name, DType::kF32, {});
  const TensorInfo& src = impl_->tensors[t.id];
  int rank = static_cast<int>(src.shape.size());
  if (dim < 0 || dim >= rank || begin < 0 || end < begin || end > src.shape[dim]) {
    impl_->error(Status::invalid_argument("slice '" + name + "': range [" + std::to_string(begin) + ", " +
                                          std::to_string(end) + ") of dim " + std::to_string(dim) +
                                          " is out of bounds for '" + src.name + "' " + shape_to_string(src.shape)));
    return add_view(*impl_, src, std::move(name), src.shape, src.strides, 0);
  }
  if (step < 1) {
    impl_->error(
        Status::invalid_argument("slice '" + name + "': step " + std::to_string(step) + " must be at least 1"));
    return add_view(*impl_, src, std::move(name), src.shape, src.strides, 0);
  }
  Shape shape = src.shape;
  shape[dim] = (end - begin + step - 1) / step;
  Shape strides = src.strides;
  strides[dim] *= step;
  return add_view(*impl_, src, std::move(name), std::move(shape), std::move(strides), begin * src.strides[dim]);
}

Tensor Graph::expand(Tensor t, Shape shape, std::string name) {
  if (name.empty()) name = "expand_" + std::to_string(impl_->tensors.size());
  if (!impl_->check_handle(t, "expand '" + name + "'")) return input(name, DType::kF32, {});
  const TensorInfo& src = impl_->tensors[t.id];
  const int rank = static_cast<int>(shape.size());
  const int src_rank = static_cast<int>(src.shape.size());
  const int lead = rank - src_rank;
  auto fail = [&](const std::string& why) {
    impl_->error(Status::invalid_argument("expand '" + name + "': cannot expand '" + src.name + "' " +
                                          shape_to_string(src.shape) + " to " + shape_to_string(shape) + ": " + why));
    return add_view(*impl_, src, std::move(name), src.shape, src.strides, 0);
  };
  if (lead < 0) return fail("the target has fewer dims than the tensor");
  if (rank > SK_MAX_RANK) return fail("rank " + std::to_string(rank) + " exceeds " + std::to_string(SK_MAX_RANK));
  Shape strides(shape.size(), 0);
  for (int d = 0; d < rank; ++d) {
    const int sd = d - lead;
    if (sd < 0) {
      // A new leading dim repeats the whole tensor.
      if (shape[d] < 0) return fail("dim " + std::to_string(d) + " is new, so its size cannot be -1 or negative");
      continue;
    }
    if (shape[d] == -1) shape[d] = src.shape[sd];
    if (shape[d] < 0) return fail("dim " + std::to_string(d) + " has negative size");
    if (shape[d] == src.shape[sd]) {
      strides[d] = src.strides[sd];
    } else if (src.shape[sd] != 1) {
      return fail("dim " + std::to_string(d) + " has size " + std::to_string(src.shape[sd]) +
                  ", which is neither 1 nor the target's " + std::to_string(shape[d]));
    }
  }
  return add_view(*impl_, src, std::move(name), std::move(shape), std::move(strides), 0);
}

// ---- Ops -----------------------------------------------------------------------------------------

std::vector<Tensor> Graph::add_op(OpSpec spec) {
  Impl& g = *impl_;
  OpInfo op;
  op.kind = spec.kind;
  op.name = spec.name.empty() ? g.default_op_name(spec.kind) : spec.name;
  op.attrs = std::move(spec.attrs);
  op.host = std::move(spec.host);
  op.stream = g.current_stream;
  op.scopes = g.scope_stack;
  op.core_limit_cube = g.core_limit.first;
  op.core_limit_vector = g.core_limit.second;
  const std::string where = "op '" + op.name + "' (" + op_kind_name(op.kind) + ")";
  const size_t errors_before = g.build_errors.size();

  // Inputs: valid handles, already defined.
  std::vector<const TensorInfo*> in_infos;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    Tensor t = spec.inputs[i];
    if (!g.check_handle(t, where + " operand " + std::to_string(i))) {
      op.inputs.push_back(-1);
      continue;
    }
    const TensorInfo& info = g.tensors[t.id];
    const TensorInfo& root = info.kind == TensorKind::kView ? g.tensors[info.base] : info;
    if (root.kind == TensorKind::kIntermediate && root.definer < 0)
      g.error(Status::invalid_argument(where + " operand " + std::to_string(i) + " reads tensor '" + info.name +
                                       "' before any op defines it (use before definition)"));
    op.inputs.push_back(t.id);
  }
  bool inputs_ok = g.build_errors.size() == errors_before;
  for (int32_t id : op.inputs) in_infos.push_back(id >= 0 ? &g.tensors[id] : nullptr);

  // Output specs: inferred for built-ins, given otherwise.
  std::vector<TensorSpec> outs = spec.outputs;
  if (is_builtin_op(op.kind)) {
    const OpTypeInfo& row = builtin_op_info(op.kind);
    if (static_cast<int>(spec.inputs.size()) != row.num_inputs) {
      g.error(Status::invalid_argument(where + ": expects " + std::to_string(row.num_inputs) + " inputs, got " +
                                       std::to_string(spec.inputs.size())));
      inputs_ok = false;
    }
    if (inputs_ok) {
      std::vector<TensorSpec> inferred;
      Status s = row.infer(in_infos, op.attrs, inferred);
      if (!s) g.error(s.with_context(where));
      outs = inferred;
      op.kernel = spec.kernel.empty() ? row.bind(in_infos) : spec.kernel;
    } else if (outs.empty()) {
      outs.push_back({DType::kF32, {1}, ""});
    }
  } else if (op.kind == OpKind::kCustom) {
    op.kernel = spec.kernel;
    if (op.kernel.empty()) g.error(Status::invalid_argument(where + ": custom op needs a kernel name"));
  } else if (op.kind == OpKind::kHost) {
    if (!op.host) g.error(Status::invalid_argument(where + ": host op needs a callback"));
  }

  // Outputs: new intermediates, or existing tensors written in place.
  std::vector<Tensor> result;
  if (!spec.write_into.empty() && spec.write_into.size() != outs.size()) {
    g.error(Status::invalid_argument(where + ": write_into lists " + std::to_string(spec.write_into.size()) +
                                     " tensors for " + std::to_string(outs.size()) + " outputs"));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const bool in_place = i < spec.write_into.size() && spec.write_into[i].valid();
    if (in_place) {
      Tensor t = spec.write_into[i];
      if (!g.check_handle(t, where + " output " + std::to_string(i))) continue;
      TensorInfo& info = g.tensors[t.id];
      TensorInfo& root = info.kind == TensorKind::kView ? g.tensors[info.base] : info;
      if (root.kind == TensorKind::kInput || root.kind == TensorKind::kConstant) {
        g.error(Status::invalid_argument(where + " output " + std::to_string(i) + " writes " +
                                         tensor_kind_name(root.kind) + " '" + root.name +
                                         "'; only variables and intermediates can be written"));
      }
      for (size_t d = 0; d < info.shape.size(); ++d) {
        if (info.shape[d] > 1 && info.strides[d] == 0) {
          g.error(Status::invalid_argument(where + " output " + std::to_string(i) + " writes '" + info.name +
                                           "', an expanded view whose elements share memory (dim " + std::to_string(d) +
                                           " has stride 0); write a dense tensor instead"));
          break;
        }
      }
      if (outs[i].dtype != info.dtype || outs[i].shape != info.shape) {
        g.error(Status::invalid_argument(where + " output " + std::to_string(i) + ": result " +
                                         dtype_name(outs[i].dtype) + shape_to_string(outs[i].shape) +
                                         " does not match target '" + info.name + "' " + dtype_name(info.dtype) +
                                         shape_to_string(info.shape)));
      }
      int32_t op_index = static_cast<int32_t>(g.ops.size());
      if (root.definer < 0) root.definer = op_index;
      if (info.definer < 0) info.definer = op_index;
      op.outputs.push_back(t.id);
      result.push_back(t);
    } else {
      TensorInfo info;
      info.name = outs[i].name.empty() ? op.name + (outs.size() > 1 ? ":" + std::to_string(i) : "") : outs[i].name;
      info.dtype = outs[i].dtype;
      info.shape = outs[i].shape;
      info.kind = TensorKind::kIntermediate;
      info.definer = static_cast<int32_t>(g.ops.size());
      if (!shape_is_static(info.shape))
        g.error(Status::invalid_argument(where + " output " + std::to_string(i) + ": shape " +
                                         shape_to_string(info.shape) +
                                         " is dynamic (data-dependent shapes "
                                         "are not supported)"));
      if (info.shape.size() > SK_MAX_RANK)
        g.error(Status::invalid_argument(where + " output " + std::to_string(i) + ": rank " +
                                         std::to_string(info.shape.size()) + " exceeds " +
                                         std::to_string(SK_MAX_RANK)));
      int32_t id = g.add_tensor(std::move(info), where);
      op.outputs.push_back(id);
      result.push_back(Tensor{id, g.uid});
    }
  }
  g.ops.push_back(std::move(op));
  return result;
}

std::vector<Tensor> Graph::host_op(std::string name, HostCallback callback, std::vector<Tensor> inputs,
                                   std::vector<TensorSpec> outputs) {
  OpSpec spec;
  spec.kind = OpKind::kHost;
  spec.name = std::move(name);
  spec.host = std::move(callback);
  spec.inputs = std::move(inputs);
  spec.outputs = std::move(outputs);
  return add_op(std::move(spec));
}

// ---- Streams and events ----------------------------------------------------------------------------

Stream Graph::create_stream(std::string name) {
  if (impl_->streams.size() >= kMaxStreams) {
    impl_->error(Status::invalid_argument("stream '" + name + "': a graph may have at most " +
                                          std::to_string(kMaxStreams) + " streams"));
    return Stream{0};
  }
  impl_->streams.push_back(std::move(name));
  return Stream{static_cast<int32_t>(impl_->streams.size() - 1)};
}

Event Graph::create_event(std::string name) {
  if (impl_->events.size() >= kMaxEvents) {
    impl_->error(Status::invalid_argument("event '" + name + "': a graph may have at most " +
                                          std::to_string(kMaxEvents) + " events"));
    return Event{};
  }
  impl_->events.push_back(std::move(name));
  return Event{static_cast<int32_t>(impl_->events.size() - 1)};
}

static void add_event_op(Graph::Impl& g, OpKind kind, Event event) {
  OpInfo op;
  op.kind = kind;
  op.name = g.default_op_name(kind);
  op.event = event.id;
  op.stream = g.current_stream;
  op.scopes = g.scope_stack;
  op.core_limit_cube = g.core_limit.first;
  op.core_limit_vector = g.core_limit.second;
  if (event.id < 0 || static_cast<size_t>(event.id) >= g.events.size())
    g.error(Status::invalid_argument("op '" + op.name + "': unknown event handle " + std::to_string(event.id)));
  g.ops.push_back(std::move(op));
}

void Graph::record(Event event) { add_event_op(*impl_, OpKind::kRecordEvent, event); }
void Graph::wait(Event event) { add_event_op(*impl_, OpKind::kWaitEvent, event); }

// ---- Attribute context -----------------------------------------------------------------------------

Status Graph::push_scope(std::string_view name, std::string_view options) {
  Impl& g = *impl_;
  if (name.size() > kMaxScopeNameBytes) {
    return Status::invalid_argument("scope name '" + std::string(name.substr(0, 32)) + "...' is " +
                                    std::to_string(name.size()) + " bytes; the limit is " +
                                    std::to_string(kMaxScopeNameBytes));
  }
  std::string key(name);
  auto it = g.scope_ids.find(key);
  int32_t id;
  if (name.empty()) {
    id = 0;
  } else if (it != g.scope_ids.end()) {
    id = it->second;
    ScopeInfo& s = g.scopes[id];
    if (!options.empty() && s.options.empty()) {
      s.options = std::string(options);
    } else if (!options.empty() && s.options != options) {
      return Status::invalid_argument("scope '" + key + "' reopened with options \"" + std::string(options) +
                                      "\" that differ from its first options \"" + s.options + "\"");
    }
  } else {
    if (g.scope_ids.size() >= kMaxScopes) {
      return Status::invalid_argument("scope '" + key + "': a graph may have at most " + std::to_string(kMaxScopes) +
                                      " distinct scopes");
    }
    id = static_cast<int32_t>(g.scopes.size());
    g.scopes.push_back({key, std::string(options)});
    g.scope_ids.emplace(key, id);
  }
  g.scope_stack.push_back(id);
  return Status::ok();
}

Status Graph::pop_scope(std::string_view name) {
  Impl& g = *impl_;
  if (g.scope_stack.empty()) {
    return Status::invalid_argument("scope_end('" + std::string(name) + "') without a matching scope_begin");
  }
  const std::string& open = g.scopes[g.scope_stack.back()].name;
  if (open != name) {
    return Status::invalid_argument("scope_end('" + std::string(name) + "') does not match the open scope_begin('" +
                                    open + "')");
  }
  g.scope_stack.pop_back();
  return Status::ok();
}

void Graph::set_stream(Stream stream) {
  if (stream.id < 0 || static_cast<size_t>(stream.id) >= impl_->streams.size()) {
    impl_->error(Status::invalid_argument("unknown stream handle " + std::to_string(stream.id)));
    return;
  }
  impl_->current_stream = stream.id;
}
Stream Graph::current_stream() const { return Stream{impl_->current_stream}; }

void Graph::set_core_limit(int32_t cube, int32_t vector) {
  if (cube < 0 || vector < 0) {
    impl_->error(Status::invalid_argument("LimitCoreNum(" + std::to_string(cube) + ", " + std::to_string(vector) +
                                          "): core limits must be >= 0 (0 = no limit)"));
    return;
  }
  impl_->core_limit = {cube, vector};
}
std::pair<int32_t, int32_t> Graph::core_limit() const { return impl_->core_limit; }

// ---- Inspection ------------------------------------------------------------------------------------

size_t Graph::num_tensors() const { return impl_->tensors.size(); }
size_t Graph::num_ops() const { return impl_->ops.size(); }
size_t Graph::num_streams() const { return impl_->streams.size(); }
size_t Graph::num_events() const { return impl_->events.size(); }
size_t Graph::num_scopes() const { return impl_->scopes.size(); }
const TensorInfo& Graph::tensor(Tensor t) const { return tensor(t.id); }
const TensorInfo& Graph::tensor(int32_t id) const {
  SK_CHECK(id >= 0 && static_cast<size_t>(id) < impl_->tensors.size()) << "tensor id " << id;
  return impl_->tensors[id];
}
const OpInfo& Graph::op(size_t index) const {
  SK_CHECK(index < impl_->ops.size()) << "op index " << index;
  return impl_->ops[index];
}
const ScopeInfo& Graph::scope(int32_t id) const {
  SK_CHECK(id >= 0 && static_cast<size_t>(id) < impl_->scopes.size()) << "scope id " << id;
  return impl_->scopes[id];
}
const std::string& Graph::stream_name(int32_t id) const { return impl_->streams.at(id); }
const std::string& Graph::event_name(int32_t id) const { return impl_->events.at(id); }

int32_t Graph::find_tensor(std::string_view name) const {
  for (size_t i = 0; i < impl_->tensors.size(); ++i) {
    const TensorInfo& t = impl_->tensors[i];
    if (t.is_output && t.output_name == name) return static_cast<int32_t>(i);
  }
  for (size_t i = 0; i < impl_->tensors.size(); ++i) {
    const TensorInfo& t = impl_->tensors[i];
    if ((t.kind == TensorKind::kInput || t.kind == TensorKind::kVariable) && t.name == name)
      return static_cast<int32_t>(i);
  }
  return -1;
}

// ---- Guards ----------------------------------------------------------------------------------------

namespace {
bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}
}  // namespace

SuperKernelScope::SuperKernelScope(Graph& graph, std::string_view scope, std::string_view options)
    : graph_(graph), name_(scope) {
  Status s = graph_.push_scope(name_, options);
  if (!s) {
    // Keep the stack balanced so the destructor's pop matches; the error fails verification.
    graph_.record_error(s);
    (void)graph_.push_scope("", "");
    name_.clear();
  }
}
SuperKernelScope::SuperKernelScope(Graph& graph, const char* scope, std::string_view options)
    : SuperKernelScope(graph, std::string_view(scope ? scope : ""), options) {}
SuperKernelScope::~SuperKernelScope() { (void)graph_.pop_scope(name_); }

Status super_kernel_scope_begin(Graph& graph, std::string_view scope, std::string_view options) {
  if (is_blank(scope)) {
    Status s = Status::invalid_argument("super_kernel_scope_begin: scope name is empty or whitespace only");
    graph.record_error(s);
    return s;
  }
  Status s = graph.push_scope(scope, options);
  if (!s) graph.record_error(s);
  return s;
}

Status super_kernel_scope_end(Graph& graph, std::string_view scope) {
  if (is_blank(scope)) {
    Status s = Status::invalid_argument("super_kernel_scope_end: scope name is empty or whitespace only");
    graph.record_error(s);
    return s;
  }
  Status s = graph.pop_scope(scope);
  if (!s) graph.record_error(s);
  return s;
}

StreamScope::StreamScope(Graph& graph, Stream stream) : graph_(graph), previous_(graph.current_stream()) {
  graph_.set_stream(stream);
}
StreamScope::~StreamScope() { graph_.set_stream(previous_); }

LimitCoreNum::LimitCoreNum(Graph& graph, int32_t cube, int32_t vector) : graph_(graph), previous_(graph.core_limit()) {
  graph_.set_core_limit(cube, vector);
}
LimitCoreNum::~LimitCoreNum() { graph_.set_core_limit(previous_.first, previous_.second); }

void Graph::record_error(Status status) { impl_->error(std::move(status)); }

}  // namespace sk
