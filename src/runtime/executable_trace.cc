// Executable::write_trace: the last run's trace as Chrome/Perfetto JSON, labelled by its mode.
#include "runtime/runtime_impl.h"

namespace sk {

Status Executable::write_trace(const std::string& path) const {
  if (!impl_->trace_enabled)
    return Status::invalid_argument("write_trace('" + path +
                                    "'): tracing is off; compile with option 'trace' or "
                                    "'super_kernel_debug_options.debug_op_exec_trace'");
  return write_chrome_trace(path, {{execution_mode_name(impl_->mode), impl_->trace}});
}

}  // namespace sk
