// Compile options, the runtime, executables (NumPy/torch in and out without copies where the
// layout allows), compile reports, explain, and the one-call step the torch backend runs.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "py_support.h"
#include "superkernel/compile.h"
#include "superkernel/options.h"
#include "superkernel/runtime.h"
#include "superkernel/trace.h"

namespace skpy {
namespace {

using RoArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using RwArray = nb::ndarray<nb::c_contig, nb::device::cpu>;

// An executable and the Python objects whose memory it reads or writes in place.
struct PyExecutable {
  std::unique_ptr<sk::Executable> exe;
  std::map<std::string, std::shared_ptr<PyRef>, std::less<>> bound;

  sk::Executable& get() { return *exe; }
};

sk::HostTensor tensor_of(const PyExecutable& e, std::string_view name) { return unwrap(e.exe->tensor(name)); }

void check_array_dtype(const PyExecutable& e, std::string_view name, nb::dlpack::dtype dtype, const char* what) {
  const sk::HostTensor t = tensor_of(e, name);
  const std::string where = std::string(what) + "('" + std::string(name) + "')";
  const sk::DType got = from_dlpack(dtype, where.c_str());
  if (got != t.dtype)
    throw StatusError(sk::Status::invalid_argument(where + ": got " + sk::dtype_name(got) + " data, the tensor is " +
                                                   sk::dtype_name(t.dtype) + sk::shape_to_string(t.shape)));
}

nb::object array_view(PyExecutable& e, const sk::HostTensor& t) {
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  nb::ndarray<nb::numpy, nb::device::cpu> a(t.data, shape.size(), shape.data(), nb::find(&e), t.strides.data(),
                                            to_dlpack(t.dtype));
  return a.cast();
}

// Runs one step of a compiled torch graph in one call: copies or binds every input from the
// caller's pointers, runs, and copies every output into caller buffers, without the GIL (host
// ops take it back for their callbacks).
class StepRunner {
 public:
  struct Input {
    std::string name;
    size_t bytes = 0;
    bool bind = false;  // live in the caller's memory (variables; large inputs) instead of a copy
    uintptr_t bound = 0;
    std::vector<uint64_t> scratch;  // for untangling two inputs that swap addresses
  };
  struct Output {
    std::string name;
    size_t bytes = 0;
  };

  StepRunner(PyExecutable& exe, const std::vector<std::tuple<std::string, size_t, bool>>& inputs,
             const std::vector<std::pair<std::string, size_t>>& outputs)
      : exe_(exe) {
    for (const auto& [name, bytes, bind] : inputs) inputs_.push_back({name, bytes, bind, 0, {}});
    for (const auto& [name, bytes] : outputs) outputs_.push_back({name, bytes});
  }

  void step(const std::vector<uintptr_t>& in, const std::vector<uintptr_t>& out) {
    if (in.size() != inputs_.size() || out.size() != outputs_.size())
      throw StatusError(sk::Status::invalid_argument(
          "step: expected " + std::to_string(inputs_.size()) + " inputs and " + std::to_string(outputs_.size()) +
          " outputs, got " + std::to_string(in.size()) + " and " + std::to_string(out.size())));
    sk::Status status;
    {
      nb::gil_scoped_release release;
      status = run(in, out);
    }
    check(status);
  }

 private:
  sk::Status rebind(const std::vector<uintptr_t>& in) {
    std::vector<size_t> pending;
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (inputs_[i].bind && inputs_[i].bound != in[i]) pending.push_back(i);
    // A new address may still be held by another input bound last step that moves this step:
    // bind in rounds, and when no bind succeeds park the rest in scratch memory first.
    bool parked = false;
    while (!pending.empty()) {
      std::vector<size_t> left;
      sk::Status last;
      for (size_t i : pending) {
        Input& x = inputs_[i];
        sk::Status s = exe_.get().bind_variable(x.name, reinterpret_cast<void*>(in[i]), x.bytes);
        if (s) {
          x.bound = in[i];
        } else {
          last = s;
          left.push_back(i);
        }
      }
      if (left.size() == pending.size()) {
        if (parked) return last;
        for (size_t i : left) {
          Input& x = inputs_[i];
          x.scratch.resize((x.bytes + 7) / 8);
          SK_RETURN_IF_ERROR(exe_.get().bind_variable(x.name, x.scratch.data(), x.bytes));
          x.bound = reinterpret_cast<uintptr_t>(x.scratch.data());
        }
        parked = true;
      }
      pending = std::move(left);
    }
    return sk::Status::ok();
  }

  sk::Status run(const std::vector<uintptr_t>& in, const std::vector<uintptr_t>& out) {
    SK_RETURN_IF_ERROR(rebind(in));
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (!inputs_[i].bind)
        SK_RETURN_IF_ERROR(
            exe_.get().set_input(inputs_[i].name, reinterpret_cast<const void*>(in[i]), inputs_[i].bytes));
    SK_RETURN_IF_ERROR(exe_.get().run());
    for (size_t i = 0; i < outputs_.size(); ++i)
      SK_RETURN_IF_ERROR(exe_.get().read(outputs_[i].name, reinterpret_cast<void*>(out[i]), outputs_[i].bytes));
    return sk::Status::ok();
  }

  PyExecutable& exe_;
  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
};

}  // namespace

void bind_runtime(nb::module_& m) {
  using nb::arg;

  nb::class_<sk::CompileOptions>(m, "CompileOptions",
                                 "The C++ CompileOptions (docs/OPTIONS.md). Build one from a dict with "
                                 "superkernel.compile_options(...); set() takes one key as text.")
      .def(nb::init<>())
      .def_static(
          "for_mode",
          [](std::string_view mode) { return sk::CompileOptions::for_mode(unwrap(sk::parse_execution_mode(mode))); },
          arg("mode"))
      .def(
          "set", [](sk::CompileOptions& o, std::string_view key, std::string_view value) { check(o.set(key, value)); },
          arg("key"), arg("value"), "Sets one option from text; an unknown key or bad value raises naming it.")
      .def("validate", [](const sk::CompileOptions& o) { check(o.validate()); })
      .def_static("keys", &sk::CompileOptions::keys)
      .def_prop_ro("mode", [](const sk::CompileOptions& o) { return std::string(sk::execution_mode_name(o.mode())); })
      .def_rw("static_kernel_compile", &sk::CompileOptions::static_kernel_compile)
      .def_rw("super_kernel_optimize", &sk::CompileOptions::super_kernel_optimize)
      .def_rw("prefetch", &sk::CompileOptions::prefetch)
      .def_rw("print_after", &sk::CompileOptions::print_after);

  nb::class_<sk::SegmentReport>(m, "SegmentReport")
      .def_ro("id", &sk::SegmentReport::id)
      .def_ro("scope", &sk::SegmentReport::scope)
      .def_ro("ops", &sk::SegmentReport::ops)
      .def_ro("num_cores", &sk::SegmentReport::num_cores)
      .def_prop_ro("cut", [](const sk::SegmentReport& s) { return std::string(sk::cut_reason_name(s.cut)); })
      .def_ro("cut_op", &sk::SegmentReport::cut_op)
      .def_ro("cut_detail", &sk::SegmentReport::cut_detail)
      .def_ro("partitions", &sk::SegmentReport::partitions)
      .def_ro("sync_points", &sk::SegmentReport::sync_points)
      .def_ro("schedule", &sk::SegmentReport::schedule)
      .def_ro("recompute", &sk::SegmentReport::recompute);
  nb::class_<sk::UnfusedOp>(m, "UnfusedOp")
      .def_ro("op", &sk::UnfusedOp::op)
      .def_prop_ro("reason", [](const sk::UnfusedOp& u) { return std::string(sk::cut_reason_name(u.reason)); });
  nb::class_<sk::CompileReport>(m, "CompileReport")
      .def_prop_ro("mode", [](const sk::CompileReport& r) { return std::string(sk::execution_mode_name(r.mode)); })
      .def_ro("num_ops", &sk::CompileReport::num_ops)
      .def_ro("num_launches", &sk::CompileReport::num_launches)
      .def_ro("arena_bytes", &sk::CompileReport::arena_bytes)
      .def_ro("peak_live_bytes", &sk::CompileReport::peak_live_bytes)
      .def_ro("unplanned_bytes", &sk::CompileReport::unplanned_bytes)
      .def_ro("segments", &sk::CompileReport::segments)
      .def_ro("unfused", &sk::CompileReport::unfused)
      .def_ro("warnings", &sk::CompileReport::warnings)
      .def_ro("program_text", &sk::CompileReport::program_text)
      .def_ro("pass_timings", &sk::CompileReport::pass_timings)
      .def_ro("pass_dumps", &sk::CompileReport::pass_dumps)
      .def_ro("jit_code_bytes", &sk::CompileReport::jit_code_bytes);

  nb::class_<sk::TraceEvent>(m, "TraceEvent")
      .def_ro("op", &sk::TraceEvent::op)
      .def_ro("kernel", &sk::TraceEvent::kernel)
      .def_ro("core", &sk::TraceEvent::core)
      .def_ro("launch", &sk::TraceEvent::launch)
      .def_ro("start_ns", &sk::TraceEvent::start_ns)
      .def_ro("end_ns", &sk::TraceEvent::end_ns)
      .def_prop_ro("kind", [](const sk::TraceEvent& e) { return std::string(sk::trace_kind_name(e.kind)); })
      .def_ro("segment", &sk::TraceEvent::segment);

  nb::class_<PyExecutable>(m, "Executable", "A compiled graph. Obtain one from Runtime.compile / superkernel.compile.")
      .def_prop_ro("mode", [](PyExecutable& e) { return std::string(sk::execution_mode_name(e.get().mode())); })
      .def_prop_ro(
          "report", [](PyExecutable& e) -> const sk::CompileReport& { return e.get().report(); },
          nb::rv_policy::reference_internal)
      .def(
          "set_input",
          [](PyExecutable& e, std::string_view name, RoArray a) {
            check_array_dtype(e, name, a.dtype(), "set_input");
            check(e.get().set_input(name, a.data(), a.nbytes()));
          },
          arg("name"), arg("array"), "Copies a C-contiguous array into an input or variable.")
      .def(
          "bind_variable",
          [](PyExecutable& e, std::string_view name, nb::object array) {
            RwArray a = nb::cast<RwArray>(array);
            check_array_dtype(e, name, a.dtype(), "bind_variable");
            check(e.get().bind_variable(name, a.data(), a.nbytes()));
            e.bound[std::string(name)] = std::make_shared<PyRef>(array);
          },
          arg("name"), arg("array"),
          "From now on the input or variable lives in `array`'s memory (no copy; the executable keeps "
          "`array` alive): runs read and write it in place.")
      .def(
          "run",
          [](PyExecutable& e) {
            sk::Status s;
            {
              nb::gil_scoped_release release;
              s = e.get().run();
            }
            check(s);
          },
          "Runs the whole graph once.")
      .def(
          "tensor", [](PyExecutable& e, std::string_view name) { return array_view(e, tensor_of(e, name)); },
          arg("name"), "A NumPy view of an output, input or variable (valid until the next run; may be strided).")
      .def(
          "read",
          [](PyExecutable& e, std::string_view name) {
            const sk::HostTensor t = tensor_of(e, name);
            if (t.dtype == sk::DType::kBF16)
              throw StatusError(sk::Status::invalid_argument("read('" + std::string(name) +
                                                             "'): bf16 has no NumPy dtype; use read_into"));
            auto* data = new uint8_t[t.bytes() > 0 ? t.bytes() : 1];
            nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
            check(e.get().read(name, data, t.bytes()));
            std::vector<size_t> shape(t.shape.begin(), t.shape.end());
            nb::ndarray<nb::numpy, nb::device::cpu> a(data, shape.size(), shape.data(), owner, nullptr,
                                                      to_dlpack(t.dtype));
            return a.cast();
          },
          arg("name"), "A dense NumPy copy of an output, input or variable.")
      .def(
          "read_into",
          [](PyExecutable& e, std::string_view name, nb::object array) {
            RwArray a = nb::cast<RwArray>(array);
            check_array_dtype(e, name, a.dtype(), "read_into");
            check(e.get().read(name, a.data(), a.nbytes()));
          },
          arg("name"), arg("array"), "Dense copy into a C-contiguous array (NumPy or torch) of the tensor's size.")
      .def("output_names", [](PyExecutable& e) { return e.get().output_names(); })
      .def(
          "dump",
          [](PyExecutable& e) {
            nb::list out;
            for (const sk::DumpRecord& r : e.get().dump())
              out.append(nb::make_tuple(r.op, r.tensor, r.dtype, r.shape,
                                        nb::bytes(reinterpret_cast<const char*>(r.data.data()), r.data.size())));
            return out;
          },
          "Data dump of the last run: (op, tensor, dtype, shape, bytes) per record.")
      .def(
          "trace", [](PyExecutable& e) { return e.get().trace(); }, "Per-core trace of the last run.")
      .def(
          "write_trace", [](PyExecutable& e, const std::string& path) { check(e.get().write_trace(path)); },
          arg("path"));

  nb::class_<StepRunner>(m, "_StepRunner")
      .def(nb::init<PyExecutable&, const std::vector<std::tuple<std::string, size_t, bool>>&,
                    const std::vector<std::pair<std::string, size_t>>&>(),
           arg("executable"), arg("inputs"), arg("outputs"), nb::keep_alive<1, 2>())
      .def("step", &StepRunner::step, arg("inputs"), arg("outputs"));

  nb::class_<sk::Runtime>(m, "Runtime", "A CPU device (persistent pinned workers) with its loaded kernel packages.")
      .def_static(
          "create",
          [](int num_cores, int cube_cores, bool pin_threads, bool allow_oversubscribe, int64_t spin_us,
             double watchdog_seconds, bool load_builtin_kernels, std::vector<std::string> kernel_packages,
             const std::string& load_policy, int64_t chunk_bytes) {
            sk::RuntimeOptions o;
            o.chunk_bytes = chunk_bytes;
            o.load_policy = unwrap(sk::parse_load_policy(load_policy));
            o.num_cores = num_cores;
            o.cube_cores = cube_cores;
            o.pin_threads = pin_threads;
            o.allow_oversubscribe = allow_oversubscribe;
            o.spin_us = spin_us;
            o.watchdog_seconds = watchdog_seconds;
            o.load_builtin_kernels = load_builtin_kernels;
            o.kernel_packages = std::move(kernel_packages);
            return unwrap(sk::Runtime::create(o));
          },
          arg("num_cores") = 0, arg("cube_cores") = 0, arg("pin_threads") = true, arg("allow_oversubscribe") = false,
          arg("spin_us") = 200, arg("watchdog_seconds") = 30.0, arg("load_builtin_kernels") = true,
          arg("kernel_packages") = std::vector<std::string>{}, arg("load_policy") = "adaptive",
          arg("chunk_bytes") = int64_t{256 << 10}, "Starts a runtime (RuntimeOptions, docs/OPTIONS.md).")
      .def(
          "load_kernel_package", [](sk::Runtime& r, const std::string& path) { check(r.load_kernel_package(path)); },
          arg("path"))
      .def("kernel_names", &sk::Runtime::kernel_names)
      .def_prop_ro("num_cores", &sk::Runtime::num_cores)
      .def_prop_ro("one_thread_launches", &sk::Runtime::one_thread_launches,
                   "Launches that ran every core on one thread (the load policy) since the runtime started.")
      .def_prop_ro("shared_calls", &sk::Runtime::shared_calls,
                   "Calls of those launches shared with the other CPU's thread in chunks (chunk_bytes).")
      .def_static("cpu_isa", &sk::Runtime::cpu_isa)
      .def(
          "compile",
          [](sk::Runtime& r, const sk::Graph& g, const sk::CompileOptions& o) {
            sk::Expected<std::unique_ptr<sk::Executable>> exe = sk::Status::internal("not compiled");
            {
              nb::gil_scoped_release release;
              exe = r.compile(g, o);
            }
            auto e = std::make_unique<PyExecutable>();
            e->exe = unwrap(std::move(exe));
            return e;
          },
          arg("graph"), arg("options"), "Compiles `graph` for the mode the options select.")
      .def(
          "explain",
          [](sk::Runtime& r, const sk::Graph& g, const sk::CompileOptions& o) {
            sk::Expected<std::string> text = sk::Status::internal("not explained");
            {
              nb::gil_scoped_release release;
              text = sk::explain(r, g, o);
            }
            return unwrap(std::move(text));
          },
          arg("graph"), arg("options"), "Segments, cut reasons and per-core programs as text, without running.");
}

}  // namespace skpy
