// One function per binding file; module.cc calls them in order.
#ifndef SUPERKERNEL_PYTHON_BINDINGS_H_
#define SUPERKERNEL_PYTHON_BINDINGS_H_

#include <nanobind/nanobind.h>

namespace skpy {

void bind_graph(nanobind::module_& m);       // Graph, tensors, streams, events, scopes
void bind_ops(nanobind::module_& m);         // op builders (ops.h, nn.h)
void bind_tensor_ops(nanobind::module_& m);  // tensor_ops.h builders
void bind_runtime(nanobind::module_& m);
void bind_models(
    nanobind::module_& m);  // the C++ model builders (models.h)     // options, Runtime, Executable, reports, explain

}  // namespace skpy

#endif  // SUPERKERNEL_PYTHON_BINDINGS_H_
