// Builders for the built-in ops. Each appends one op to the graph in program order and returns
// its output; bad operands are recorded as graph errors naming the op and operand (see graph.h).
//
//   sk::Tensor h = sk::matmul(g, x, w);            // x [M, K], w [N, K] -> [M, N]
//   sk::Tensor y = sk::rms_norm(g, h, gamma, 1e-6f);
//   sk::Tensor z = sk::add(g, y, residual, "residual_add");
#ifndef SUPERKERNEL_OPS_H_
#define SUPERKERNEL_OPS_H_

#include <string>

#include "superkernel/graph.h"

namespace sk {

// Element-wise; `b` has a's shape or a suffix of it (broadcast over leading dims).
Tensor add(Graph& g, Tensor a, Tensor b, std::string name = "");
Tensor mul(Graph& g, Tensor a, Tensor b, std::string name = "");
// silu(gate) * up, same shapes.
Tensor silu_mul(Graph& g, Tensor gate, Tensor up, std::string name = "");
// Normalises over the last dim: x / sqrt(mean(x^2) + eps) * weight, weight [D].
Tensor rms_norm(Graph& g, Tensor x, Tensor weight, float eps, std::string name = "");
// Softmax over the last dim.
Tensor softmax(Graph& g, Tensor x, std::string name = "");
// x [..., K] times w [N, K] transposed (PyTorch Linear layout) -> [..., N].
Tensor matmul(Graph& g, Tensor x, Tensor w, std::string name = "");
// ids (i32, any shape) rows of table [V, D] -> [ids..., D].
Tensor embedding(Graph& g, Tensor ids, Tensor table, std::string name = "");
// Dense copy of any tensor (materialises views).
Tensor copy(Graph& g, Tensor x, std::string name = "");

// Warms bytes [offset, offset + bytes) of `tensor` (typically the next layer's weights) in the
// shared cache while compute runs; writes nothing and has no outputs, so no op ever waits for it.
// It runs after `depend_on` is produced (pass any tensor; an invalid Tensor{} means "no
// ordering"). Put it on its own stream (with stream_fusion) so it runs on cores the compute
// streams leave idle. A range outside the tensor is a graph error naming the op and the tensor.
// The compile option `prefetch=false` turns every prefetch into a no-op (same results).
//
//   sk::prefetch(g, next_w, h, /*bytes=*/next_w_bytes, /*offset=*/0);
void prefetch(Graph& g, Tensor tensor, Tensor depend_on, int64_t bytes, int64_t offset = 0, std::string name = "");

// Calls a kernel by name from any loaded package. `outputs` gives dtypes and shapes.
std::vector<Tensor> call_kernel(Graph& g, std::string kernel, std::vector<Tensor> inputs,
                                std::vector<TensorSpec> outputs, std::vector<uint8_t> attrs = {},
                                std::string name = "");

}  // namespace sk

#endif  // SUPERKERNEL_OPS_H_
