#include "superkernel/ops.h"

#include <cstring>

#include "superkernel/attrs_core.h"

namespace sk {
namespace {

template <typename Attrs>
std::vector<uint8_t> attr_bytes(const Attrs& a) {
  std::vector<uint8_t> bytes(sizeof(Attrs));
  std::memcpy(bytes.data(), &a, sizeof(Attrs));
  return bytes;
}

Tensor one_output(Graph& g, OpKind kind, std::vector<Tensor> inputs, std::string name,
                  std::vector<uint8_t> attrs = {}) {
  OpSpec spec;
  spec.kind = kind;
  spec.name = std::move(name);
  spec.inputs = std::move(inputs);
  spec.attrs = std::move(attrs);
  std::vector<Tensor> out = g.add_op(std::move(spec));
  return out.empty() ? Tensor{} : out[0];
}

}  // namespace

Tensor add(Graph& g, Tensor a, Tensor b, std::string name) {
  return one_output(g, OpKind::kAdd, {a, b}, std::move(name));
}
Tensor mul(Graph& g, Tensor a, Tensor b, std::string name) {
  return one_output(g, OpKind::kMul, {a, b}, std::move(name));
}
Tensor silu_mul(Graph& g, Tensor gate, Tensor up, std::string name) {
  return one_output(g, OpKind::kSiluMul, {gate, up}, std::move(name));
}
Tensor rms_norm(Graph& g, Tensor x, Tensor weight, float eps, std::string name) {
  sk_rms_norm_attrs attrs{eps};
  return one_output(g, OpKind::kRmsNorm, {x, weight}, std::move(name), attr_bytes(attrs));
}
Tensor softmax(Graph& g, Tensor x, std::string name) { return one_output(g, OpKind::kSoftmax, {x}, std::move(name)); }
Tensor matmul(Graph& g, Tensor x, Tensor w, std::string name) {
  return one_output(g, OpKind::kMatmul, {x, w}, std::move(name));
}
Tensor embedding(Graph& g, Tensor ids, Tensor table, std::string name) {
  return one_output(g, OpKind::kEmbedding, {ids, table}, std::move(name));
}
Tensor copy(Graph& g, Tensor x, std::string name) { return one_output(g, OpKind::kCopy, {x}, std::move(name)); }

void prefetch(Graph& g, Tensor tensor, Tensor depend_on, int64_t bytes, int64_t offset, std::string name) {
  if (name.empty()) name = "prefetch_" + std::to_string(g.num_ops());
  if (!tensor.valid()) {
    g.record_error(Status::invalid_argument("op '" + name + "' (prefetch): operand 0 ('tensor') is not a tensor"));
    return;
  }
  const TensorInfo& t = g.tensor(tensor);
  int64_t span = 0;  // bytes from the data pointer to the end of the last element
  if (shape_numel(t.shape) > 0) {
    span = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) span += (t.shape[d] - 1) * t.strides[d];
    span *= static_cast<int64_t>(dtype_size(t.dtype));
  }
  if (bytes < 0 || offset < 0 || offset > span || bytes > span - offset) {
    g.record_error(Status::invalid_argument(
        "op '" + name + "' (prefetch): byte range [" + std::to_string(offset) + ", " + std::to_string(offset) + " + " +
        std::to_string(bytes) + ") is outside tensor '" + t.name + "' (" + std::to_string(span) + " bytes)"));
    return;
  }
  // No ordering wanted: depend on the tensor itself (weights are ready before any op runs).
  const Tensor after = depend_on.valid() ? depend_on : tensor;
  sk_prefetch_attrs attrs{offset, bytes};
  call_kernel(g, "prefetch", {tensor, after}, {}, attr_bytes(attrs), std::move(name));
}

std::vector<Tensor> call_kernel(Graph& g, std::string kernel, std::vector<Tensor> inputs,
                                std::vector<TensorSpec> outputs, std::vector<uint8_t> attrs, std::string name) {
  OpSpec spec;
  spec.kind = OpKind::kCustom;
  spec.kernel = std::move(kernel);
  spec.name = std::move(name);
  spec.inputs = std::move(inputs);
  spec.outputs = std::move(outputs);
  spec.attrs = std::move(attrs);
  return g.add_op(std::move(spec));
}

}  // namespace sk
