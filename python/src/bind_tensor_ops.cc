// The general tensor ops (include/superkernel/tensor_ops.h) in the `tensor_ops` submodule: the
// builders the torch backend's ATen lowering calls, usable on any Graph.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "py_support.h"
#include "superkernel/tensor_ops.h"

namespace skpy {

void bind_tensor_ops(nb::module_& m) {
  using nb::arg;
  nb::module_ t = m.def_submodule("tensor_ops", "General tensor ops with torch semantics (tensor_ops.h).");

  nb::enum_<sk::UnaryOp>(t, "UnaryOp")
      .value("neg", sk::UnaryOp::kNeg)
      .value("exp", sk::UnaryOp::kExp)
      .value("log", sk::UnaryOp::kLog)
      .value("sqrt", sk::UnaryOp::kSqrt)
      .value("rsqrt", sk::UnaryOp::kRsqrt)
      .value("sin", sk::UnaryOp::kSin)
      .value("cos", sk::UnaryOp::kCos)
      .value("tanh", sk::UnaryOp::kTanh)
      .value("sigmoid", sk::UnaryOp::kSigmoid)
      .value("silu", sk::UnaryOp::kSilu)
      .value("gelu", sk::UnaryOp::kGelu)
      .value("gelu_tanh", sk::UnaryOp::kGeluTanh)
      .value("relu", sk::UnaryOp::kRelu)
      .value("abs", sk::UnaryOp::kAbs)
      .value("reciprocal", sk::UnaryOp::kReciprocal)
      .value("logical_not", sk::UnaryOp::kLogicalNot);
  nb::enum_<sk::BinaryOp>(t, "BinaryOp")
      .value("add", sk::BinaryOp::kAdd)
      .value("sub", sk::BinaryOp::kSub)
      .value("mul", sk::BinaryOp::kMul)
      .value("div", sk::BinaryOp::kDiv)
      .value("pow", sk::BinaryOp::kPow)
      .value("maximum", sk::BinaryOp::kMaximum)
      .value("minimum", sk::BinaryOp::kMinimum)
      .value("eq", sk::BinaryOp::kEq)
      .value("ne", sk::BinaryOp::kNe)
      .value("lt", sk::BinaryOp::kLt)
      .value("le", sk::BinaryOp::kLe)
      .value("gt", sk::BinaryOp::kGt)
      .value("ge", sk::BinaryOp::kGe)
      .value("logical_and", sk::BinaryOp::kLogicalAnd)
      .value("logical_or", sk::BinaryOp::kLogicalOr);
  nb::enum_<sk::ReduceOp>(t, "ReduceOp")
      .value("sum", sk::ReduceOp::kSum)
      .value("mean", sk::ReduceOp::kMean)
      .value("max", sk::ReduceOp::kMax)
      .value("min", sk::ReduceOp::kMin)
      .value("argmax", sk::ReduceOp::kArgmax)
      .value("argmin", sk::ReduceOp::kArgmin);
  nb::class_<sk::TopK>(t, "TopK").def_ro("values", &sk::TopK::values).def_ro("indices", &sk::TopK::indices);

  t.def("unary", &sk::unary, arg("graph"), arg("x"), arg("op"), arg("name") = "");
  t.def("binary", &sk::binary, arg("graph"), arg("a"), arg("b"), arg("op"), arg("name") = "",
        "op(a, b) with torch broadcasting and promotion.");
  t.def("binary_scalar", &sk::binary_scalar, arg("graph"), arg("a"), arg("scalar"), arg("op"),
        arg("scalar_first") = false, arg("name") = "");
  t.def("where", &sk::where, arg("graph"), arg("cond"), arg("a"), arg("b"), arg("name") = "");
  t.def("cast", &sk::cast, arg("graph"), arg("x"), arg("to"), arg("name") = "");
  t.def("reduce", &sk::reduce, arg("graph"), arg("x"), arg("op"), arg("dims"), arg("keepdim"), arg("name") = "");
  t.def("cumsum", &sk::cumsum, arg("graph"), arg("x"), arg("dim"), arg("name") = "");
  t.def("topk", &sk::topk, arg("graph"), arg("x"), arg("k"), arg("dim") = -1, arg("largest") = true,
        arg("sorted") = true, arg("name") = "");
  t.def("index_select", &sk::index_select, arg("graph"), arg("x"), arg("dim"), arg("index"), arg("name") = "");
  t.def("gather", &sk::gather, arg("graph"), arg("x"), arg("dim"), arg("index"), arg("name") = "");
  t.def("index_copy", &sk::index_copy, arg("graph"), arg("dst"), arg("dim"), arg("index"), arg("src"), arg("name") = "",
        "dst.index_copy_(dim, index, src) in place.");
  t.def("index_put", &sk::index_put, arg("graph"), arg("dst"), arg("indices"), arg("values"), arg("accumulate"),
        arg("name") = "", "dst.index_put_(indices, values, accumulate) in place (indices on the leading dims).");
  t.def("cat", &sk::cat, arg("graph"), arg("xs"), arg("dim"), arg("name") = "");
  t.def("batched_mm", &sk::batched_mm, arg("graph"), arg("a"), arg("b"), arg("name") = "",
        "torch.matmul for ranks >= 2 (batch dims broadcast).");
  t.def("sdpa", &sk::sdpa, arg("graph"), arg("q"), arg("k"), arg("v"), arg("attn_mask") = sk::Tensor{},
        arg("is_causal") = false, arg("scale") = 0.0, arg("name") = "",
        "scaled_dot_product_attention with GQA; attn_mask bool (true = attend) or additive.");
}

}  // namespace skpy
