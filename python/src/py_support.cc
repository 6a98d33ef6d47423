#include "py_support.h"

#include <string>
#include <vector>

namespace skpy {

void register_status_translator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      // The classes live in Python (superkernel/_errors.py) so that they can derive from the
      // built-in exception each code resembles (ValueError, LookupError, NotImplementedError...).
      nb::object errors = nb::module_::import_("superkernel._errors");
      nb::object cls = errors.attr("error_class")(sk::status_code_name(e.status().code()));
      PyErr_SetString(cls.ptr(), e.status().message().c_str());
    }
  });
}

nb::dlpack::dtype to_dlpack(sk::DType dtype) {
  using nb::dlpack::dtype_code;
  switch (dtype) {
    case sk::DType::kF32:
      return {static_cast<uint8_t>(dtype_code::Float), 32, 1};
    case sk::DType::kBF16:
      return {static_cast<uint8_t>(dtype_code::Bfloat), 16, 1};
    case sk::DType::kF16:
      return {static_cast<uint8_t>(dtype_code::Float), 16, 1};
    case sk::DType::kI8:
      return {static_cast<uint8_t>(dtype_code::Int), 8, 1};
    case sk::DType::kI32:
      return {static_cast<uint8_t>(dtype_code::Int), 32, 1};
    case sk::DType::kI64:
      return {static_cast<uint8_t>(dtype_code::Int), 64, 1};
    case sk::DType::kBool:
      return {static_cast<uint8_t>(dtype_code::Bool), 8, 1};
  }
  throw StatusError(sk::Status::internal("unknown sk::DType " + std::to_string(static_cast<int>(dtype))));
}

sk::DType from_dlpack(nb::dlpack::dtype dtype, const char* what) {
  using nb::dlpack::dtype_code;
  const auto code = static_cast<dtype_code>(dtype.code);
  if (dtype.lanes == 1) {
    if (code == dtype_code::Float && dtype.bits == 32) return sk::DType::kF32;
    if (code == dtype_code::Float && dtype.bits == 16) return sk::DType::kF16;
    if (code == dtype_code::Bfloat && dtype.bits == 16) return sk::DType::kBF16;
    if (code == dtype_code::Int && dtype.bits == 8) return sk::DType::kI8;
    if (code == dtype_code::Int && dtype.bits == 32) return sk::DType::kI32;
    if (code == dtype_code::Int && dtype.bits == 64) return sk::DType::kI64;
    if (code == dtype_code::Bool && dtype.bits == 8) return sk::DType::kBool;
  }
  throw StatusError(sk::Status::invalid_argument(
      std::string(what) + ": element type (DLPack code " + std::to_string(dtype.code) + ", " +
      std::to_string(dtype.bits) + " bits) has no superkernel dtype (f32, bf16, f16, i8, i32, i64, bool)"));
}

namespace {
bool interpreter_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}
}  // namespace

PyRef::PyRef(nb::handle object) : object_(object.ptr()) { Py_XINCREF(object_); }

PyRef::~PyRef() {
  if (object_ == nullptr || !interpreter_alive()) return;
  PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF(object_);
  PyGILState_Release(state);
}

std::shared_ptr<const void> keep_alive(nb::handle object) { return std::make_shared<PyRef>(object); }

nb::object host_tensor_to_python(const sk::HostTensor& t, Framework framework) {
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  std::vector<int64_t> strides(t.strides.begin(), t.strides.end());
  const nb::dlpack::dtype dtype = to_dlpack(t.dtype);
  // rv_policy::reference: a view of the executable's memory, valid while the host op runs.
  if (framework == Framework::kTorch) {
    nb::ndarray<nb::pytorch, nb::device::cpu> a(t.data, shape.size(), shape.data(), nb::handle(), strides.data(),
                                                dtype);
    return a.cast(nb::rv_policy::reference);
  }
  if (t.dtype == sk::DType::kBF16)
    throw StatusError(sk::Status::invalid_argument(
        "a bf16 tensor cannot be a NumPy array (NumPy has no bfloat16): create the host op with framework='torch'"));
  nb::ndarray<nb::numpy, nb::device::cpu> a(t.data, shape.size(), shape.data(), nb::handle(), strides.data(), dtype);
  return a.cast(nb::rv_policy::reference);
}

namespace {
// The callable, shared by every copy of the std::function (graph, plan, executable) without
// touching Python reference counts.
struct HostCallable {
  std::shared_ptr<PyRef> callable;
  Framework framework;
  std::string op_name;

  sk::Status operator()(sk::HostOpContext& ctx) const {
    nb::gil_scoped_acquire gil;
    try {
      nb::list inputs, outputs;
      for (const sk::HostTensor& t : ctx.inputs) inputs.append(host_tensor_to_python(t, framework));
      for (const sk::HostTensor& t : ctx.outputs) outputs.append(host_tensor_to_python(t, framework));
      callable->get()(inputs, outputs);
      return sk::Status::ok();
    } catch (nb::python_error& e) {
      // The exception's type and message (the runtime names the op); not its traceback.
      std::string text = nb::borrow<nb::str>(nb::str(e.type().attr("__name__"))).c_str();
      text += ": ";
      text += nb::str(e.value()).c_str();
      return sk::Status::kernel_error("Python callback raised " + text);
    } catch (const StatusError& e) {
      return e.status();
    } catch (const std::exception& e) {
      return sk::Status::kernel_error(e.what());
    }
  }
};
}  // namespace

sk::HostCallback python_host_callback(nb::handle callable, Framework framework, std::string op_name) {
  return HostCallable{std::make_shared<PyRef>(callable), framework, std::move(op_name)};
}

}  // namespace skpy
