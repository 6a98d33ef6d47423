// What every binding file shares: sk::Status -> Python exceptions, dtype conversions between
// sk::DType and DLPack (NumPy, PyTorch), and Python objects held from C++ without the GIL.
#ifndef SUPERKERNEL_PYTHON_PY_SUPPORT_H_
#define SUPERKERNEL_PYTHON_PY_SUPPORT_H_

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "superkernel/graph.h"
#include "superkernel/status.h"

namespace skpy {

namespace nb = nanobind;

// A failed sk::Status travelling to Python; the translator registered in module.cc raises the
// exception class superkernel._errors maps its code to, with the C++ message.
class StatusError : public std::exception {
 public:
  explicit StatusError(sk::Status status) : status_(std::move(status)) {}
  const sk::Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  sk::Status status_;
};

inline void check(const sk::Status& status) {
  if (!status.is_ok()) throw StatusError(status);
}
template <typename T>
T unwrap(sk::Expected<T>&& value) {
  if (!value) throw StatusError(value.status());
  return std::move(*value);
}

void register_status_translator();

// sk::DType <-> DLPack element type (the bool dtype, once the graph has it, maps to kBool).
nb::dlpack::dtype to_dlpack(sk::DType dtype);
sk::DType from_dlpack(nb::dlpack::dtype dtype, const char* what);

// A Python object owned from C++ code that may run, copy or drop it without the GIL (a compiled
// executable keeps external constants and host callbacks alive from worker-free C++ code): the
// last reference takes the GIL to release it, unless the interpreter is already gone.
class PyRef {
 public:
  explicit PyRef(nb::handle object);
  ~PyRef();
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  nb::handle get() const { return object_; }

 private:
  PyObject* object_;
};
std::shared_ptr<const void> keep_alive(nb::handle object);

// How a host callback sees its tensors: NumPy arrays or PyTorch tensors (bf16 needs PyTorch).
enum class Framework { kNumPy, kTorch };
// A zero-copy array over `t` (valid only while the host op runs).
nb::object host_tensor_to_python(const sk::HostTensor& t, Framework framework);

// A Python callable as an sk::HostCallback: called with (inputs, outputs) lists of arrays under
// the GIL; a Python exception becomes a KERNEL_ERROR status carrying its text.
sk::HostCallback python_host_callback(nb::handle callable, Framework framework, std::string op_name);

}  // namespace skpy

#endif  // SUPERKERNEL_PYTHON_PY_SUPPORT_H_
