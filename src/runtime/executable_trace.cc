// Executable::write_trace: the last run's trace as Chrome/Perfetto JSON, labelled by its mode.
#include "runtime/runtime_impl.h"

namespace sk {

Status Executable::write_trace(const std::string& path) const {
  // Scopes with profiling=1 trace their launches even when tracing is off for the graph.
  if (!impl_->trace_enabled && impl_->trace.empty())
    return Status::invalid_argument(
        "write_trace('" + path +
        "'): tracing is off; compile with option 'trace' or "
        "'super_kernel_debug_options.debug_op_exec_trace' (or the scope option profiling=1)");
  return write_chrome_trace(path, {{execution_mode_name(impl_->mode), impl_->trace}});
}

}  // namespace sk
