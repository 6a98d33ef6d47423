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
#include "superkernel/weights.h"

namespace skpy {
namespace {

using RoArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using RwArray = nb::ndarray<nb::c_contig, nb::device::cpu>;

sk::nn::Linear linear_weight(sk::Tensor weight, std::optional<sk::Tensor> scale) {
  return sk::nn::Linear{weight, scale.value_or(sk::Tensor{})};
}

// w [out, in] of f32, bf16 or f16, contiguous: (dtype, out, in).
std::tuple<sk::DType, int64_t, int64_t> float_matrix(const RoArray& w, const char* what) {
  const sk::DType dtype = from_dlpack(w.dtype(), what);
  if (w.ndim() != 2)
    throw StatusError(sk::Status::invalid_argument(std::string(what) + ": w must be 2-D [out, in], got " +
                                                   std::to_string(w.ndim()) + " dimensions"));
  return {dtype, static_cast<int64_t>(w.shape(0)), static_cast<int64_t>(w.shape(1))};
}

nb::bytes bytes_of(const void* data, size_t n) { return nb::bytes(static_cast<const char*>(data), n); }

void quantize_w8a8(RoArray w, RwArray q, RwArray scale) {
  const auto [dtype, out, in] = float_matrix(w, "quantize_w8a8");
  if (from_dlpack(q.dtype(), "quantize_w8a8 q") != sk::DType::kI8 || q.ndim() != 2 ||
      static_cast<int64_t>(q.shape(0)) != out || static_cast<int64_t>(q.shape(1)) != in)
    throw StatusError(sk::Status::invalid_argument("quantize_w8a8: q must be i8 of w's shape"));
  if (from_dlpack(scale.dtype(), "quantize_w8a8 scale") != sk::DType::kF32 || scale.ndim() != 1 ||
      static_cast<int64_t>(scale.shape(0)) != out)
    throw StatusError(sk::Status::invalid_argument("quantize_w8a8: scale must be f32 [out]"));
  check(sk::quantize_w8a8_rows(w.data(), dtype, out, in, static_cast<int8_t*>(q.data()),
                               static_cast<float*>(scale.data())));
}

nb::dict quantize_int4(RoArray w, int64_t group, bool zero_points) {
  const auto [dtype, out, in] = float_matrix(w, "quantize_int4");
  sk::nn::Int4Options o;
  o.group = group;
  o.zero_points = zero_points;
  sk::nn::Int4Weights q = unwrap(sk::nn::quantize_int4(w.data(), dtype, out, in, o));
  if (q.out % 16 == 0) q = unwrap(sk::nn::tile_int4(q));  // as the C++ models lay them out
  nb::dict d;
  d["weight"] = bytes_of(q.packed.data(), q.packed.size());
  d["weight_shape"] = sk::nn::int4_weight_shape(q);
  d["scale"] = bytes_of(q.scale.data(), q.scale.size());
  d["scale_dtype"] = q.scale_dtype;
  d["group_shape"] = sk::nn::int4_group_shape(q);
  if (q.zero.empty())
    d["zero"] = nb::none();
  else
    d["zero"] = bytes_of(q.zero.data(), q.zero.size());
  return d;
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
  nn.def("quantize_w8a8", &quantize_w8a8, arg("w"), arg("q"), arg("scale"),
         "Per-row int8 quantisation of w [out, in] (f32, bf16 or f16; NumPy array or torch tensor) into q "
         "(i8 [out, in]) and scale (f32 [out]), written in place: the weights matmul.w8a8_dyn takes, the bits of "
         "the C++ models' w8a8 weights (sk::quantize_w8a8_rows).");
  nn.def("quantize_int4", &quantize_int4, arg("w"), arg("group") = 128, arg("zero_points") = true,
         "Group-wise 4-bit quantisation of w [out, in] (f32, bf16 or f16) as the C++ models do it "
         "(sk::nn::quantize_int4, then the tiled layout when out is a multiple of 16): a dict with weight (bytes), "
         "weight_shape, scale (bytes), scale_dtype, group_shape and zero (bytes, or None when symmetric), the "
         "operands of matmul.w4a8_dyn and matmul.w4.");
}

}  // namespace skpy
