// sk::Graph and its handles: tensors, views, ops (kernel calls and Python host ops), streams,
// events, and the scope / stream / core-limit attribute context.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "py_support.h"
#include "superkernel/graph.h"

namespace skpy {
namespace {

using RoArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

sk::Shape array_shape(const RoArray& a) {
  sk::Shape s;
  for (size_t i = 0; i < a.ndim(); ++i) s.push_back(static_cast<int64_t>(a.shape(i)));
  return s;
}

// (dtype, shape) or (dtype, shape, name) -> TensorSpec.
sk::TensorSpec to_spec(nb::handle h) {
  nb::tuple t = nb::cast<nb::tuple>(h);
  if (t.size() != 2 && t.size() != 3)
    throw StatusError(sk::Status::invalid_argument("an output spec is (dtype, shape) or (dtype, shape, name)"));
  sk::TensorSpec spec(nb::cast<sk::DType>(t[0]), nb::cast<sk::Shape>(t[1]));
  if (t.size() == 3) spec.name = nb::cast<std::string>(t[2]);
  return spec;
}

std::vector<sk::TensorSpec> to_specs(const nb::list& specs) {
  std::vector<sk::TensorSpec> out;
  for (nb::handle h : specs) out.push_back(to_spec(h));
  return out;
}

std::vector<uint8_t> to_bytes(const std::optional<nb::bytes>& attrs) {
  if (!attrs) return {};
  const auto* p = static_cast<const uint8_t*>(attrs->data());
  return std::vector<uint8_t>(p, p + attrs->size());
}

const sk::TensorInfo& info(const sk::Graph& g, sk::Tensor t) {
  if (!t.valid() || t.graph_uid != g.uid() || static_cast<size_t>(t.id) >= g.num_tensors())
    throw StatusError(sk::Status::invalid_argument("tensor " + std::to_string(t.id) + " is not a tensor of graph '" +
                                                   g.name() + "'"));
  return g.tensor(t);
}

Framework parse_framework(const std::string& framework) {
  if (framework == "numpy") return Framework::kNumPy;
  if (framework == "torch") return Framework::kTorch;
  throw StatusError(sk::Status::invalid_argument("framework '" + framework + "': expected 'numpy' or 'torch'"));
}

// Context managers over the attribute context: `with g.scope("s"): ...`.
struct ScopeContext {
  sk::Graph* graph;
  std::string name, options;
  void enter() { check(graph->push_scope(name, options)); }
  void exit() { check(graph->pop_scope(name)); }
};
struct StreamContext {
  sk::Graph* graph;
  sk::Stream stream, previous;
  void enter() {
    previous = graph->current_stream();
    graph->set_stream(stream);
  }
  void exit() { graph->set_stream(previous); }
};
struct CoreLimitContext {
  sk::Graph* graph;
  int32_t cube, vector;
  std::pair<int32_t, int32_t> previous{0, 0};
  void enter() {
    previous = graph->core_limit();
    graph->set_core_limit(cube, vector);
  }
  void exit() { graph->set_core_limit(previous.first, previous.second); }
};

}  // namespace

void bind_graph(nb::module_& m) {
  nb::enum_<sk::DType>(m, "DType", "Element types of graph tensors.")
      .value("f32", sk::DType::kF32)
      .value("bf16", sk::DType::kBF16)
      .value("f16", sk::DType::kF16)
      .value("i8", sk::DType::kI8)
      .value("i32", sk::DType::kI32)
      .value("i64", sk::DType::kI64)
      .value("bool", sk::DType::kBool);
  m.def("dtype_size", &sk::dtype_size);

  nb::enum_<sk::TensorKind>(m, "TensorKind")
      .value("input", sk::TensorKind::kInput)
      .value("constant", sk::TensorKind::kConstant)
      .value("variable", sk::TensorKind::kVariable)
      .value("intermediate", sk::TensorKind::kIntermediate)
      .value("view", sk::TensorKind::kView);
  nb::enum_<sk::OpKind>(m, "OpKind")
      .value("add", sk::OpKind::kAdd)
      .value("mul", sk::OpKind::kMul)
      .value("silu_mul", sk::OpKind::kSiluMul)
      .value("rms_norm", sk::OpKind::kRmsNorm)
      .value("softmax", sk::OpKind::kSoftmax)
      .value("matmul", sk::OpKind::kMatmul)
      .value("embedding", sk::OpKind::kEmbedding)
      .value("copy", sk::OpKind::kCopy)
      .value("custom", sk::OpKind::kCustom)
      .value("host", sk::OpKind::kHost)
      .value("record_event", sk::OpKind::kRecordEvent)
      .value("wait_event", sk::OpKind::kWaitEvent);

  nb::class_<sk::Tensor>(m, "Tensor", "A handle to a tensor of one Graph (Tensor(): an invalid handle).")
      .def(nb::init<>())
      .def_ro("id", &sk::Tensor::id)
      .def_prop_ro("valid", &sk::Tensor::valid)
      .def("__repr__", [](const sk::Tensor& t) { return "<superkernel.Tensor " + std::to_string(t.id) + ">"; });
  nb::class_<sk::Stream>(m, "Stream").def_ro("id", &sk::Stream::id);
  nb::class_<sk::Event>(m, "Event").def_ro("id", &sk::Event::id);

  nb::class_<sk::TensorInfo>(m, "TensorInfo")
      .def_ro("name", &sk::TensorInfo::name)
      .def_ro("dtype", &sk::TensorInfo::dtype)
      .def_ro("shape", &sk::TensorInfo::shape)
      .def_ro("strides", &sk::TensorInfo::strides)
      .def_ro("kind", &sk::TensorInfo::kind)
      .def_ro("base", &sk::TensorInfo::base)
      .def_ro("byte_offset", &sk::TensorInfo::byte_offset)
      .def_ro("is_output", &sk::TensorInfo::is_output)
      .def_ro("output_name", &sk::TensorInfo::output_name);
  nb::class_<sk::OpInfo>(m, "OpInfo")
      .def_ro("name", &sk::OpInfo::name)
      .def_ro("kind", &sk::OpInfo::kind)
      .def_ro("kernel", &sk::OpInfo::kernel)
      .def_ro("inputs", &sk::OpInfo::inputs)
      .def_ro("outputs", &sk::OpInfo::outputs)
      .def_ro("stream", &sk::OpInfo::stream)
      .def_ro("event", &sk::OpInfo::event)
      .def_ro("scopes", &sk::OpInfo::scopes)
      .def_ro("core_limit_cube", &sk::OpInfo::core_limit_cube)
      .def_ro("core_limit_vector", &sk::OpInfo::core_limit_vector);
  nb::class_<sk::ScopeInfo>(m, "ScopeInfo")
      .def_ro("name", &sk::ScopeInfo::name)
      .def_ro("options", &sk::ScopeInfo::options);

  nb::class_<ScopeContext>(m, "_ScopeContext")
      .def("__enter__", &ScopeContext::enter)
      .def("__exit__", [](ScopeContext& c, nb::args) { c.exit(); });
  nb::class_<StreamContext>(m, "_StreamContext")
      .def("__enter__", &StreamContext::enter)
      .def("__exit__", [](StreamContext& c, nb::args) { c.exit(); });
  nb::class_<CoreLimitContext>(m, "_CoreLimitContext")
      .def("__enter__", &CoreLimitContext::enter)
      .def("__exit__", [](CoreLimitContext& c, nb::args) { c.exit(); });

  nb::class_<sk::Graph>(m, "Graph",
                        "An operator graph: tensors and ops in program order, streams, events, fusion scopes.\n\n"
                        "Builders record bad operands as errors; verify() and compilation report them.")
      .def(nb::init<std::string>(), nb::arg("name") = "graph")
      .def_prop_ro("name", &sk::Graph::name)
      // ---- tensors ----
      .def("input", &sk::Graph::input, nb::arg("name"), nb::arg("dtype"), nb::arg("shape"))
      .def(
          "constant",
          [](sk::Graph& g, std::string name, RoArray a) {
            const sk::DType dtype = from_dlpack(a.dtype(), ("constant '" + name + "'").c_str());
            return g.constant(name, dtype, array_shape(a), a.data(), a.nbytes());
          },
          nb::arg("name"), nb::arg("array"), "A constant holding a copy of `array` (NumPy array or torch tensor).")
      .def(
          "constant_external",
          [](sk::Graph& g, std::string name, nb::object array) {
            RoArray a = nb::cast<RoArray>(array);
            const sk::DType dtype = from_dlpack(a.dtype(), ("constant_external '" + name + "'").c_str());
            return g.constant_external(name, dtype, array_shape(a), a.data(), a.nbytes(), keep_alive(array));
          },
          nb::arg("name"), nb::arg("array"),
          "A constant read in place from `array`'s memory (no copy); the graph and every executable keep "
          "`array` alive. Its contents must not change while an executable may run.")
      .def(
          "_constant_external_ptr",
          [](sk::Graph& g, std::string name, sk::DType dtype, sk::Shape shape, uintptr_t data, size_t bytes,
             nb::object owner) {
            return g.constant_external(name, dtype, shape, reinterpret_cast<const void*>(data), bytes,
                                       keep_alive(owner));
          },
          nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), nb::arg("data"), nb::arg("bytes"), nb::arg("owner"))
      .def("variable", &sk::Graph::variable, nb::arg("name"), nb::arg("dtype"), nb::arg("shape"))
      .def("declare", &sk::Graph::declare, nb::arg("name"), nb::arg("dtype"), nb::arg("shape"))
      .def("output", &sk::Graph::output, nb::arg("tensor"), nb::arg("name") = "")
      // ---- views ----
      .def("reshape", &sk::Graph::reshape, nb::arg("tensor"), nb::arg("shape"), nb::arg("name") = "")
      .def("transpose", &sk::Graph::transpose, nb::arg("tensor"), nb::arg("perm"), nb::arg("name") = "")
      .def("slice", nb::overload_cast<sk::Tensor, int, int64_t, int64_t, int64_t, std::string>(&sk::Graph::slice),
           nb::arg("tensor"), nb::arg("dim"), nb::arg("begin"), nb::arg("end"), nb::arg("step") = 1,
           nb::arg("name") = "")
      .def("expand", &sk::Graph::expand, nb::arg("tensor"), nb::arg("shape"), nb::arg("name") = "")
      // ---- ops ----
      .def(
          "add_op",
          [](sk::Graph& g, std::string kernel, std::vector<sk::Tensor> inputs, nb::list outputs,
             std::optional<nb::bytes> attrs, std::vector<sk::Tensor> write_into, std::string name) {
            sk::OpSpec spec;
            spec.kind = sk::OpKind::kCustom;
            spec.kernel = std::move(kernel);
            spec.name = std::move(name);
            spec.inputs = std::move(inputs);
            spec.outputs = to_specs(outputs);
            spec.attrs = to_bytes(attrs);
            spec.write_into = std::move(write_into);
            return g.add_op(std::move(spec));
          },
          nb::arg("kernel"), nb::arg("inputs"), nb::arg("outputs"), nb::arg("attrs") = nb::none(),
          nb::arg("write_into") = std::vector<sk::Tensor>{}, nb::arg("name") = "",
          "Calls kernel `kernel` of any loaded package. `outputs`: (dtype, shape[, name]) per output; "
          "`write_into`: per output an existing tensor to write (an invalid Tensor: a new one).")
      .def(
          "host_op",
          [](sk::Graph& g, std::string name, nb::object callback, std::vector<sk::Tensor> inputs, nb::list outputs,
             std::vector<sk::Tensor> write_into, std::string framework) {
            sk::OpSpec spec;
            spec.kind = sk::OpKind::kHost;
            spec.name = name;
            spec.inputs = std::move(inputs);
            spec.outputs = to_specs(outputs);
            spec.write_into = std::move(write_into);
            spec.host = python_host_callback(callback, parse_framework(framework), name);
            return g.add_op(std::move(spec));
          },
          nb::arg("name"), nb::arg("callback"), nb::arg("inputs"), nb::arg("outputs"),
          nb::arg("write_into") = std::vector<sk::Tensor>{}, nb::arg("framework") = "numpy",
          "A Python callback run on the host between launches: callback(inputs, outputs) gets zero-copy "
          "arrays (NumPy, or torch tensors with framework='torch') valid during the call, and writes the "
          "outputs. Host ops never fuse.")
      // ---- streams, events, attribute context ----
      .def("create_stream", &sk::Graph::create_stream, nb::arg("name"))
      .def("create_event", &sk::Graph::create_event, nb::arg("name"))
      .def("record", &sk::Graph::record, nb::arg("event"))
      .def("wait", &sk::Graph::wait, nb::arg("event"))
      .def(
          "push_scope",
          [](sk::Graph& g, std::string_view name, std::string_view options) { check(g.push_scope(name, options)); },
          nb::arg("name"), nb::arg("options") = "")
      .def(
          "pop_scope", [](sk::Graph& g, std::string_view name) { check(g.pop_scope(name)); }, nb::arg("name"))
      .def("set_stream", &sk::Graph::set_stream, nb::arg("stream"))
      .def("current_stream", &sk::Graph::current_stream)
      .def("set_core_limit", &sk::Graph::set_core_limit, nb::arg("cube"), nb::arg("vector"))
      .def("core_limit", &sk::Graph::core_limit)
      .def(
          "scope",
          [](sk::Graph& g, std::optional<std::string> name, std::string options) {
            return ScopeContext{&g, name.value_or(""), std::move(options)};
          },
          nb::arg("name"), nb::arg("options") = "", nb::keep_alive<0, 1>(),
          "`with g.scope('layer0', 'early-start=1'):` ops created inside may fuse; None: do not fuse.")
      .def(
          "stream",
          [](sk::Graph& g, sk::Stream s) {
            return StreamContext{&g, s, {}};
          },
          nb::arg("stream"), nb::keep_alive<0, 1>(), "`with g.stream(s):` ops created inside run on stream s.")
      .def(
          "limit_core_num",
          [](sk::Graph& g, int32_t cube, int32_t vector) {
            return CoreLimitContext{&g, cube, vector};
          },
          nb::arg("cube"), nb::arg("vector"), nb::keep_alive<0, 1>(),
          "`with g.limit_core_num(cube, vector):` caps the cores of the ops created inside (0: no limit).")
      // ---- inspection ----
      .def_prop_ro("num_tensors", &sk::Graph::num_tensors)
      .def_prop_ro("num_ops", &sk::Graph::num_ops)
      .def_prop_ro("num_streams", &sk::Graph::num_streams)
      .def_prop_ro("num_events", &sk::Graph::num_events)
      .def_prop_ro("num_scopes", &sk::Graph::num_scopes)
      .def(
          "tensor", [](const sk::Graph& g, sk::Tensor t) { return info(g, t); }, nb::arg("tensor"))
      .def(
          "tensor_info",
          [](const sk::Graph& g, int32_t id) {
            if (id < 0 || static_cast<size_t>(id) >= g.num_tensors())
              throw StatusError(sk::Status::not_found("graph has no tensor " + std::to_string(id)));
            return g.tensor(id);
          },
          nb::arg("id"))
      .def(
          "op",
          [](const sk::Graph& g, size_t i) {
            if (i >= g.num_ops()) throw StatusError(sk::Status::not_found("graph has no op " + std::to_string(i)));
            return g.op(i);
          },
          nb::arg("index"))
      .def(
          "scope_info",
          [](const sk::Graph& g, int32_t id) {
            if (id < 0 || static_cast<size_t>(id) >= g.num_scopes())
              throw StatusError(sk::Status::not_found("graph has no scope " + std::to_string(id)));
            return g.scope(id);
          },
          nb::arg("id"))
      .def("stream_name", &sk::Graph::stream_name, nb::arg("id"))
      .def("event_name", &sk::Graph::event_name, nb::arg("id"))
      .def("find_tensor", &sk::Graph::find_tensor, nb::arg("name"))
      .def("shape", [](const sk::Graph& g, sk::Tensor t) { return info(g, t).shape; })
      .def(
          "shape",
          [](const sk::Graph& g, std::string_view name) {
            const int32_t id = g.find_tensor(name);
            if (id < 0) throw StatusError(sk::Status::not_found("the graph has no tensor '" + std::string(name) + "'"));
            return info(g, sk::Tensor{id, g.uid()}).shape;
          },
          nb::arg("name"), "The shape of the tensor named `name`.")
      .def("dtype", [](const sk::Graph& g, sk::Tensor t) { return info(g, t).dtype; })
      .def(
          "verify", [](const sk::Graph& g) { check(g.verify()); },
          "Raises the first error recorded while building, or a structural error.");
}

}  // namespace skpy
