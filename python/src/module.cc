// The extension module superkernel._superkernel: bindings over the public C++ API only
// (include/superkernel/). The pure-Python package (python/superkernel/) re-exports it.
#include <nanobind/nanobind.h>

#include "bindings.h"
#include "py_support.h"
#include "superkernel/kernel_abi.h"

NB_MODULE(_superkernel, m) {
  m.doc() = "superkernel: fuse already-compiled kernels into super kernels (C++ bindings)";
  // Objects kept alive by torch's compile caches until exit are not leaks of the bindings.
  nanobind::set_leak_warnings(false);
  skpy::register_status_translator();
  skpy::bind_graph(m);
  skpy::bind_ops(m);
  skpy::bind_tensor_ops(m);
  skpy::bind_runtime(m);
  skpy::bind_models(m);
  m.attr("KERNEL_ABI_VERSION") = SK_KERNEL_ABI_VERSION;
  m.attr("MAX_RANK") = SK_MAX_RANK;
}
