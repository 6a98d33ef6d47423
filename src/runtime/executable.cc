#include <algorithm>
#include <atomic>
#include <cstring>

#include "runtime/runtime_impl.h"
#include "superkernel/output_file.h"

namespace sk {

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::~Executable() = default;

ExecutionMode Executable::mode() const { return impl_->mode; }
const CompileReport& Executable::report() const { return impl_->report; }
const std::vector<DumpRecord>& Executable::dump() const { return impl_->dump; }
const std::vector<TraceEvent>& Executable::trace() const { return impl_->trace; }
std::vector<std::string> Executable::output_names() const { return impl_->output_names; }

namespace {

// Claims the executable for one call. A second thread calling in meanwhile gets an error instead
// of racing on the arena (an executable's buffers belong to one call at a time).
class CallClaim {
 public:
  // `call` and `name` only build the message, so that the common path allocates nothing.
  CallClaim(std::atomic<bool>& busy, const char* call, std::string_view name = {}) : busy_(busy) {
    if (busy_.exchange(true, std::memory_order_acquire))
      status_ = Status::failed_precondition(std::string(call) + (name.empty() ? "" : "('" + std::string(name) + "')") +
                                            ": the executable is in use by another thread; an executable serves "
                                            "one call at a time (compile one executable per thread)");
  }
  ~CallClaim() {
    if (status_) busy_.store(false, std::memory_order_release);
  }
  CallClaim(const CallClaim&) = delete;
  CallClaim& operator=(const CallClaim&) = delete;
  const Status& status() const { return status_; }

 private:
  std::atomic<bool>& busy_;
  Status status_;
};

}  // namespace

Status Executable::set_input(std::string_view name, const void* data, size_t bytes) {
  CallClaim claim(impl_->busy, "set_input", name);
  SK_RETURN_IF_ERROR(claim.status());
  auto it = impl_->names.find(std::string(name));
  const Plan& plan = *impl_->plan;
  if (it == impl_->names.end() ||
      (plan.tensors[it->second].kind != TensorKind::kInput && plan.tensors[it->second].kind != TensorKind::kVariable))
    return Status::not_found("set_input: graph has no input or variable named '" + std::string(name) + "'");
  const TensorInfo& t = plan.tensors[it->second];
  if (bytes != static_cast<size_t>(t.storage_bytes))
    return Status::invalid_argument("set_input('" + std::string(name) + "'): got " + std::to_string(bytes) +
                                    " bytes, " + dtype_name(t.dtype) + shape_to_string(t.shape) + " needs " +
                                    std::to_string(t.storage_bytes));
  if (data == nullptr && bytes != 0)
    return Status::invalid_argument("set_input('" + std::string(name) + "'): data is nullptr for " +
                                    std::to_string(bytes) + " bytes");
  if (bytes) std::memcpy(plan.tensor_data[it->second], data, bytes);
  std::erase(impl_->unset_inputs, it->second);
  return Status::ok();
}

Status Executable::bind_variable(std::string_view name, void* data, size_t bytes) {
  Plan& plan = *impl_->plan;
  const std::string where = "bind_variable('" + std::string(name) + "')";
  auto it = impl_->names.find(std::string(name));
  if (it == impl_->names.end()) return Status::not_found(where + ": graph has no input or variable of that name");
  const int32_t id = it->second;
  const TensorInfo& t = plan.tensors[id];
  if (t.kind != TensorKind::kInput && t.kind != TensorKind::kVariable)
    return Status::invalid_argument(where + ": '" + t.name + "' is a tensor of kind " + tensor_kind_name(t.kind) +
                                    "; only inputs and variables can live in caller memory");
  if (bytes != static_cast<size_t>(t.storage_bytes))
    return Status::invalid_argument(where + ": got " + std::to_string(bytes) + " bytes, " + dtype_name(t.dtype) +
                                    shape_to_string(t.shape) + " needs " + std::to_string(t.storage_bytes));
  if (data == nullptr) return Status::invalid_argument(where + ": data is null");
  const auto begin = reinterpret_cast<uintptr_t>(data);
  if (begin % dtype_size(t.dtype) != 0)
    return Status::invalid_argument(where + ": data is not aligned to its " + std::to_string(dtype_size(t.dtype)) +
                                    "-byte " + dtype_name(t.dtype) + " elements");
  // The compiled schedule orders accesses by address: two tensors sharing bytes would race.
  const uintptr_t end = begin + bytes;
  auto overlaps = [&](const void* p, size_t n) {
    const auto b = reinterpret_cast<uintptr_t>(p);
    return n > 0 && bytes > 0 && begin < b + n && b < end;
  };
  if (overlaps(plan.arena.data.get(), plan.arena.bytes))
    return Status::invalid_argument(where + ": data overlaps the executable's own memory");
  for (size_t other = 0; other < plan.variables.size(); ++other) {
    if (static_cast<int32_t>(other) != id && plan.variables[other].data &&
        overlaps(plan.variables[other].data.get(), static_cast<size_t>(plan.tensors[other].storage_bytes)))
      return Status::invalid_argument(where + ": data overlaps the executable's own memory (variable '" +
                                      plan.tensors[other].name + "')");
  }
  for (size_t other = 0; other < plan.bound.size(); ++other) {
    if (static_cast<int32_t>(other) == id || !plan.bound[other]) continue;
    if (overlaps(plan.bound[other], static_cast<size_t>(plan.tensors[other].storage_bytes)))
      return Status::invalid_argument(where + ": data overlaps '" + plan.tensors[other].name +
                                      "', already bound to caller memory");
  }
  for (size_t c = 0; c < plan.tensors.size(); ++c) {
    const TensorInfo& k = plan.tensors[c];
    if (k.kind == TensorKind::kConstant && overlaps(plan.root_data(static_cast<int32_t>(c)), k.storage_bytes))
      return Status::invalid_argument(where + ": data overlaps constant '" + k.name + "'");
  }
  plan.bind(id, static_cast<uint8_t*>(data));
  // A bound input reads the caller's bytes from now on: that counts as having been set.
  std::erase(impl_->unset_inputs, id);
  return Status::ok();
}

Status Executable::run() {
  CallClaim claim(impl_->busy, "run");
  SK_RETURN_IF_ERROR(claim.status());
  if (!impl_->unset_inputs.empty()) {
    const size_t n = impl_->unset_inputs.size();
    return Status::failed_precondition("run: input '" + impl_->plan->tensors[impl_->unset_inputs.front()].name +
                                       "' was never set" +
                                       (n > 1 ? " (and " + std::to_string(n - 1) + " more input(s))" : "") +
                                       "; call set_input for every input before the first run");
  }
  impl_->dump.clear();
  impl_->trace.clear();
  const bool op_by_op = impl_->mode == ExecutionMode::kEager || impl_->access_check;
  Status s = op_by_op ? run_eager(*impl_) : run_program(*impl_);
  if (!s) return s;
  if (!impl_->trace_path.empty()) SK_RETURN_IF_ERROR(write_trace(impl_->trace_path).with_context("option 'trace'"));
  if (impl_->dump_enabled && !impl_->dump_dir.empty()) {
    // Each tensor's file, then the index that names them: a dump whose index is there is whole.
    std::string index;
    for (size_t i = 0; i < impl_->dump.size(); ++i) {
      const DumpRecord& r = impl_->dump[i];
      std::string file = std::to_string(i) + ".bin";
      SK_RETURN_IF_ERROR(write_file(impl_->dump_dir + "/" + file,
                                    std::string_view(reinterpret_cast<const char*>(r.data.data()), r.data.size()))
                             .with_context("option 'dump_dir'"));
      index += file + " op=" + r.op + " tensor=" + r.tensor + " dtype=" + dtype_name(r.dtype) +
               " shape=" + shape_to_string(r.shape) + " bytes=" + std::to_string(r.data.size()) + "\n";
    }
    SK_RETURN_IF_ERROR(write_file(impl_->dump_dir + "/index.txt", index).with_context("option 'dump_dir'"));
  }
  return Status::ok();
}

Expected<HostTensor> Executable::tensor(std::string_view name) const {
  auto it = impl_->names.find(std::string(name));
  if (it == impl_->names.end())
    return Status::not_found("graph has no output, input or variable named '" + std::string(name) + "'");
  const Plan& plan = *impl_->plan;
  const TensorInfo& t = plan.tensors[it->second];
  HostTensor h;
  h.data = plan.tensor_data[it->second];
  h.dtype = t.dtype;
  h.shape = t.shape;
  h.strides = t.strides;
  return h;
}

Status Executable::read(std::string_view name, void* dst, size_t bytes) const {
  auto t = tensor(name);
  if (!t) return t.status();
  const size_t elem = dtype_size(t->dtype);
  if (bytes != t->bytes())
    return Status::invalid_argument("read('" + std::string(name) + "'): buffer has " + std::to_string(bytes) +
                                    " bytes, tensor has " + std::to_string(t->bytes()));
  gather_dense(static_cast<const uint8_t*>(t->data), t->shape, t->strides, elem, static_cast<uint8_t*>(dst));
  return Status::ok();
}

std::vector<float> Executable::output_f32(std::string_view name) const {
  auto t = tensor(name);
  if (!t || t->dtype != DType::kF32) return {};
  std::vector<float> out(static_cast<size_t>(shape_numel(t->shape)));
  if (!read(name, out.data(), out.size() * sizeof(float))) return {};
  return out;
}

}  // namespace sk
