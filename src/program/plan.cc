#include "program/plan.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include "util/large_alloc.h"

namespace sk {

void AlignedBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

Expected<AlignedBuffer> AlignedBuffer::allocate(size_t bytes, const std::string& what) {
  // Large buffers (weights, the arena) get transparent huge pages where the system has them.
  void* p = large_alloc(bytes);
  if (p == nullptr)
    return Status::failed_precondition("out of memory allocating " + std::to_string(bytes) + " bytes for " + what);
  AlignedBuffer b;
  b.data.reset(static_cast<uint8_t*>(p));
  b.bytes = bytes;
  return b;
}

void PageUnmap::operator()(uint8_t* p) const { munmap(p, bytes); }

Expected<ZeroPages> ZeroPages::allocate(size_t bytes, const std::string& what) {
  const size_t mapped = std::max<size_t>(bytes, 1);
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return Status::failed_precondition("out of memory mapping " + std::to_string(bytes) + " bytes for " + what);
  ZeroPages z;
  z.data = std::unique_ptr<uint8_t, PageUnmap>(static_cast<uint8_t*>(p), PageUnmap{mapped});
  return z;
}

void PlanOp::bind_args() {
  args = sk_kernel_args{};
  args.inputs = inputs.data();
  args.outputs = outputs.data();
  args.num_inputs = static_cast<int32_t>(inputs.size());
  args.num_outputs = static_cast<int32_t>(outputs.size());
  args.attrs = attrs.empty() ? nullptr : attrs.data();
  args.attrs_size = static_cast<uint32_t>(attrs.size());
  args.tiling = tiling.empty() ? nullptr : tiling.data();
  // A sink op's tiling is empty until a TILING step has computed it.
  args.tiling_size = tiling_sink ? 0 : static_cast<uint32_t>(tiling.size());
  args.workspace_size = workspace_bytes;
  args.workspace = nullptr;
}

Status run_tiling(PlanOp& op, uint32_t max_bytes) {
  const sk_kernel_desc* d = op.kernel->desc;
  op.tiling.clear();
  if (!d->tiling) return Status::ok();
  op.bind_args();
  for (uint32_t capacity : {512u, 64u * 1024u, kMaxHostTilingBytes}) {
    capacity = std::min(capacity, max_bytes);
    op.tiling.assign(capacity, 0);
    uint32_t size = 0;
    int32_t rc = d->tiling(&op.args, op.tiling.data(), capacity, &size);
    if (rc == SK_ERR_CAPACITY && capacity < max_bytes) continue;
    if (rc == SK_ERR_CAPACITY) break;
    if (rc != SK_OK)
      return Status::kernel_error("op '" + op.name + "': tiling of kernel '" + d->name + "' failed with code " +
                                  std::to_string(rc));
    if (size > capacity)
      return Status::kernel_error("op '" + op.name + "': tiling of kernel '" + d->name + "' reported " +
                                  std::to_string(size) + " bytes for a " + std::to_string(capacity) + "-byte buffer");
    op.tiling.resize(size);
    op.bind_args();
    return Status::ok();
  }
  return Status::kernel_error("op '" + op.name + "': tiling of kernel '" + d->name + "' needs more than " +
                              std::to_string(max_bytes) + " bytes (the limit for " +
                              (op.tiling_sink ? "tiling-sink kernels" : "host tiling") + ")");
}

int32_t run_sink_tiling(PlanOp& op) {
  uint32_t size = 0;
  int32_t rc = op.kernel->desc->tiling(&op.args, op.tiling.data(), static_cast<uint32_t>(op.tiling.size()), &size);
  if (rc == SK_OK && size > op.tiling.size()) rc = SK_ERR_CAPACITY;
  if (rc == SK_OK) op.args.tiling_size = size;
  return rc;
}

sk_tensor_arg make_tensor_arg(const TensorInfo& info) {
  sk_tensor_arg a{};
  a.dtype = static_cast<int32_t>(info.dtype);
  a.rank = static_cast<int32_t>(info.shape.size());
  for (size_t i = 0; i < info.shape.size() && i < SK_MAX_RANK; ++i) {
    a.shape[i] = info.shape[i];
    a.stride[i] = info.strides[i];
  }
  return a;
}

Status Plan::store_constant(int32_t id, TensorInfo& t) {
  if (constants.size() <= static_cast<size_t>(id)) constants.resize(static_cast<size_t>(id) + 1);
  if (t.external_data) return Status::ok();
  auto buffer = AlignedBuffer::allocate(t.data.size(), "constant '" + t.name + "'");
  if (!buffer) return buffer.status();
  constants[id] = std::move(*buffer);
  std::copy(t.data.begin(), t.data.end(), constants[id].data.get());
  t.data.clear();
  t.data.shrink_to_fit();
  return Status::ok();
}

Status Plan::allocate_variables() {
  variables.resize(tensors.size());
  bound.resize(tensors.size(), nullptr);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    if (t.kind != TensorKind::kVariable || bound[i] || variables[i].data) continue;
    auto pages = ZeroPages::allocate(static_cast<size_t>(t.storage_bytes), "variable '" + t.name + "'");
    if (!pages) return pages.status();
    variables[i] = std::move(*pages);
  }
  return Status::ok();
}

void Plan::bind(int32_t id, uint8_t* data) {
  bound.resize(tensors.size(), nullptr);
  bound[id] = data;
  if (static_cast<size_t>(id) < variables.size()) variables[id] = ZeroPages{};
  resolve_pointers();
}

uint8_t* Plan::root_data(int32_t id) const {
  const TensorInfo& t = tensors[id];
  if (t.kind == TensorKind::kConstant) {
    // Kernels only read constants (the verifier rejects writes), so dropping const is safe.
    if (t.external_data) return static_cast<uint8_t*>(const_cast<void*>(t.external_data));
    return constants[id].data.get();
  }
  if (static_cast<size_t>(id) < bound.size() && bound[id]) return bound[id];
  if (t.kind == TensorKind::kVariable) {
    SK_CHECK(static_cast<size_t>(id) < variables.size() && variables[id].data)
        << "variable '" << t.name << "' has no storage";
    return variables[id].data.get();
  }
  SK_CHECK(memory.offset[id] >= 0) << "tensor '" << t.name << "' has no arena slot";
  return arena.data.get() + memory.offset[id];
}

void Plan::resolve_pointers() {
  tensor_data.assign(tensors.size(), nullptr);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    if (t.kind == TensorKind::kView) {
      tensor_data[i] = root_data(t.base) + t.byte_offset;
    } else {
      tensor_data[i] = root_data(static_cast<int32_t>(i));
    }
  }
  for (PlanOp& op : ops) {
    for (size_t i = 0; i < op.inputs.size(); ++i) op.inputs[i].data = tensor_data[op.input_ids[i]];
    for (size_t i = 0; i < op.outputs.size(); ++i) op.outputs[i].data = tensor_data[op.output_ids[i]];
    op.bind_args();
    if (op.workspace_offset >= 0) op.args.workspace = arena.data.get() + op.workspace_offset;
  }
}

// Dense copy of a strided tensor.
void gather_dense(const uint8_t* src, const Shape& shape, const Shape& strides, size_t elem, uint8_t* dst) {
  const int64_t n = shape_numel(shape);
  const int rank = static_cast<int>(shape.size());
  int64_t expect = 1;
  bool dense = true;
  for (int d = rank - 1; d >= 0; --d) {
    dense &= shape[d] == 1 || strides[d] == expect;
    expect *= shape[d];
  }
  if (dense) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * elem);
    return;
  }
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) off += idx[d] * strides[d];
    std::memcpy(dst + i * elem, src + off * static_cast<int64_t>(elem), elem);
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace sk
