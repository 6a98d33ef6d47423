// Op builders: the built-in ops (ops.h) at module level, the typed library-kernel builders
// (nn.h) in the `nn` submodule. Each takes the graph first, as in C++.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>

#include "bindings.h"
#include "py_support.h"
#include "superkernel/nn.h"
#include "superkernel/ops.h"

namespace skpy {
namespace {

sk::nn::Linear linear_weight(sk::Tensor weight, std::optional<sk::Tensor> scale) {
  return sk::nn::Linear{weight, scale.value_or(sk::Tensor{})};
}

}  // namespace

void bind_ops(nb::module_& m) {
  using nb::arg;
  m.def("add", &sk::add, arg("graph"), arg("a"), arg("b"), arg("name") = "",
        "a + b; b has a's shape or a suffix of it (f32).");
  m.def("mul", &sk::mul, arg("graph"), arg("a"), arg("b"), arg("name") = "",
        "a * b; b has a's shape or a suffix of it (f32).");
  m.def("silu_mul", &sk::silu_mul, arg("graph"), arg("gate"), arg("up"), arg("name") = "", "silu(gate) * up.");
  m.def("rms_norm", &sk::rms_norm, arg("graph"), arg("x"), arg("weight"), arg("eps"), arg("name") = "",
        "x / sqrt(mean(x^2, -1) + eps) * weight.");
  m.def("softmax", &sk::softmax, arg("graph"), arg("x"), arg("name") = "", "Softmax over the last dim.");
  m.def("matmul", &sk::matmul, arg("graph"), arg("x"), arg("w"), arg("name") = "",
        "x [..., K] times w [N, K] transposed -> [..., N] (torch Linear layout).");
  m.def("embedding", &sk::embedding, arg("graph"), arg("ids"), arg("table"), arg("name") = "",
        "Rows of table [V, D] at ids (i32) -> [ids..., D].");
  m.def("copy", &sk::copy, arg("graph"), arg("x"), arg("name") = "", "Dense copy (materialises views).");
  m.def(
      "prefetch",
      [](sk::Graph& g, sk::Tensor tensor, std::optional<sk::Tensor> depend_on, int64_t bytes, int64_t offset,
         std::string name) { sk::prefetch(g, tensor, depend_on.value_or(sk::Tensor{}), bytes, offset, name); },
      arg("graph"), arg("tensor"), arg("depend_on").none(), arg("bytes"), arg("offset") = 0, arg("name") = "",
      "Warms bytes [offset, offset + bytes) of `tensor` in the shared cache after `depend_on` is produced.");

  nb::module_ nn = m.def_submodule("nn", "Typed builders of the library kernels (include/superkernel/nn.h).");
  nn.def(
      "linear",
      [](sk::Graph& g, sk::Tensor x, sk::Tensor weight, std::optional<sk::Tensor> scale, std::string name) {
        return sk::nn::linear(g, x, linear_weight(weight, scale), name);
      },
      arg("graph"), arg("x"), arg("weight"), arg("scale") = nb::none(), arg("name") = "",
      "x [..., in] times weight [out, in] (f32, bf16, or i8 with per-channel scale).");
  nn.def(
      "rope",
      [](sk::Graph& g, sk::Tensor x, sk::Tensor positions, sk::Tensor cos_sin, int32_t head_dim, int32_t rotary_dim,
         bool neox_style, std::string name) {
        return sk::nn::rope(g, x, positions, cos_sin, sk_rope_attrs{head_dim, rotary_dim, neox_style ? 1 : 0}, name);
      },
      arg("graph"), arg("x"), arg("positions"), arg("cos_sin"), arg("head_dim"), arg("rotary_dim"),
      arg("neox_style") = true, arg("name") = "");
  // The plain-theta overload (nn.h also has one taking a RopeScaling).
  nn.def("rope_cos_sin_table",
         static_cast<sk::Tensor (*)(sk::Graph&, std::string, int64_t, int64_t, double)>(&sk::nn::rope_cos_sin_table),
         arg("graph"), arg("name"), arg("max_positions"), arg("rotary_dim"), arg("theta"));
  nn.def("kv_append", &sk::nn::kv_append, arg("graph"), arg("k_new"), arg("v_new"), arg("slot_mapping"), arg("k_cache"),
         arg("v_cache"), arg("name") = "");
  nn.def("mla_cache_append", &sk::nn::mla_cache_append, arg("graph"), arg("c_kv"), arg("k_pe"), arg("slot_mapping"),
         arg("latent_cache"), arg("name") = "");
  nn.def("paged_attention", &sk::nn::paged_attention, arg("graph"), arg("q"), arg("k_cache"), arg("v_cache"),
         arg("block_tables"), arg("context_lens"), arg("scale"), arg("name") = "");
  nn.def("paged_attention_prefill", &sk::nn::paged_attention_prefill, arg("graph"), arg("q"), arg("k_cache"),
         arg("v_cache"), arg("block_tables"), arg("seq_ids"), arg("positions"), arg("scale"), arg("name") = "");
  nn.def("mla_attention", &sk::nn::mla_attention, arg("graph"), arg("q_latent"), arg("q_pe"), arg("latent_cache"),
         arg("block_tables"), arg("context_lens"), arg("scale"), arg("name") = "");
  nn.def("mla_attention_prefill", &sk::nn::mla_attention_prefill, arg("graph"), arg("q_latent"), arg("q_pe"),
         arg("latent_cache"), arg("block_tables"), arg("seq_ids"), arg("positions"), arg("scale"), arg("name") = "");
  nn.def("batched_matmul", &sk::nn::batched_matmul, arg("graph"), arg("x"), arg("w"), arg("name") = "");
  nn.def(
      "moe_router",
      [](sk::Graph& g, sk::Tensor logits, sk::Tensor bias, int32_t top_k, int32_t num_real_experts, bool sigmoid,
         bool normalize, float routed_scaling_factor, std::string name) {
        sk_moe_router_attrs a{top_k, num_real_experts, sigmoid ? SK_MOE_SCORING_SIGMOID : SK_MOE_SCORING_SOFTMAX,
                              normalize ? 1 : 0, routed_scaling_factor};
        sk::nn::RouterOutput r = sk::nn::moe_router(g, logits, bias, a, name);
        return std::make_pair(r.topk_ids, r.topk_weights);
      },
      arg("graph"), arg("logits"), arg("bias"), arg("top_k"), arg("num_real_experts"), arg("sigmoid") = false,
      arg("normalize") = true, arg("routed_scaling_factor") = 1.0f, arg("name") = "",
      "-> (topk_ids i32 [T, k], topk_weights f32 [T, k]).");
  nn.def(
      "moe_dispatch",
      [](sk::Graph& g, sk::Tensor x, sk::Tensor topk_ids, int32_t num_real_experts, int32_t num_zero_experts,
         std::string name) {
        sk::nn::DispatchOutput d =
            sk::nn::moe_dispatch(g, x, topk_ids, sk_moe_dispatch_attrs{num_real_experts, num_zero_experts}, name);
        return std::make_tuple(d.x_sorted, d.counts, d.row_map);
      },
      arg("graph"), arg("x"), arg("topk_ids"), arg("num_real_experts"), arg("num_zero_experts") = 0, arg("name") = "",
      "-> (x_sorted, counts, row_map).");
  nn.def(
      "grouped_matmul",
      [](sk::Graph& g, sk::Tensor x, sk::Tensor counts, sk::Tensor weight, std::optional<sk::Tensor> scale,
         std::string name) { return sk::nn::grouped_matmul(g, x, counts, linear_weight(weight, scale), name); },
      arg("graph"), arg("x"), arg("counts"), arg("weight"), arg("scale") = nb::none(), arg("name") = "");
  nn.def("moe_combine", &sk::nn::moe_combine, arg("graph"), arg("y"), arg("row_map"), arg("topk_weights"), arg("x"),
         arg("name") = "");
  nn.def("argmax", &sk::nn::argmax, arg("graph"), arg("logits"), arg("name") = "");
}

}  // namespace skpy
