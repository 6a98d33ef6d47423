// Conformance cases of the general tensor kernels (tensor.*): each kernel in every mode on 1-3
// cores, f32 and at least one other dtype, broadcasting, in-place updates (index_copy,
// index_put), GQA and causal attention. Strided and expanded operands are covered through the
// graph in tests/unit/tensor_ops_test.cc (the harness feeds dense inputs).
#include <limits>

#include "conformance.h"
#include "superkernel/attrs_tensor.h"

namespace sk::conformance {
namespace {

std::vector<TensorSpec> out(DType d, Shape s) { return {TensorSpec(d, std::move(s))}; }
Input Bool(Shape s) { return Of(DType::kBool, std::move(s), 0, 1); }

}  // namespace

SK_CONFORMANCE_CASES(tensor_cases) {
  std::vector<Case> cs;
  const DType f32 = DType::kF32;
  const DType bf16 = DType::kBF16;
  const DType i32 = DType::kI32;
  const DType i64 = DType::kI64;
  const DType b = DType::kBool;
  // Element-wise.
  cs.push_back({"tensor_unary_exp",
                "tensor.unary",
                {F32({4, 100}, -10, 10)},
                out(f32, {4, 100}),
                attrs_of(sk_unary_attrs{SK_UNARY_EXP}),
                {}});
  cs.push_back({"tensor_unary_gelu_bf16",
                "tensor.unary",
                {Of(bf16, {3, 33}, -4, 4)},
                out(bf16, {3, 33}),
                attrs_of(sk_unary_attrs{SK_UNARY_GELU}),
                {}});
  cs.push_back({"tensor_unary_log",
                "tensor.unary",
                {F32({70}, 0.01, 100)},
                out(f32, {70}),
                attrs_of(sk_unary_attrs{SK_UNARY_LOG}),
                {}});
  cs.push_back({"tensor_unary_neg_i32",
                "tensor.unary",
                {Of(i32, {50}, -1000, 1000)},
                out(i32, {50}),
                attrs_of(sk_unary_attrs{SK_UNARY_NEG}),
                {}});
  cs.push_back({"tensor_unary_not",
                "tensor.unary",
                {Of(f32, {7, 9}, -1, 1)},
                out(b, {7, 9}),
                attrs_of(sk_unary_attrs{SK_UNARY_LOGICAL_NOT}),
                {}});
  cs.push_back({"tensor_cast_f32_bf16", "tensor.cast", {F32({5, 70}, -50, 50)}, out(bf16, {5, 70}), {}, {}});
  cs.push_back({"tensor_cast_f32_i32",
                "tensor.cast",
                {Values(f32, {6}, {3.7, -3.7, std::numeric_limits<double>::quiet_NaN(), 1e20, -0.5, 2e9})},
                out(i32, {6}),
                {},
                {}});
  cs.push_back({"tensor_cast_i64_f32", "tensor.cast", {Of(i64, {30}, -100000, 100000)}, out(f32, {30}), {}, {}});
  cs.push_back({"tensor_binary_add_bcast",
                "tensor.binary",
                {F32({3, 1, 40}), F32({5, 40})},
                out(f32, {3, 5, 40}),
                attrs_of(sk_binary_attrs{SK_BINARY_ADD}),
                {}});
  cs.push_back({"tensor_binary_mul_bf16",
                "tensor.binary",
                {Of(bf16, {4, 64}, -2, 2), Of(bf16, {64}, -2, 2)},
                out(bf16, {4, 64}),
                attrs_of(sk_binary_attrs{SK_BINARY_MUL}),
                {}});
  cs.push_back({"tensor_binary_lt_i64",
                "tensor.binary",
                {Of(i64, {6, 10}, -5, 5), Of(i64, {10}, -5, 5)},
                out(b, {6, 10}),
                attrs_of(sk_binary_attrs{SK_BINARY_LT}),
                {}});
  cs.push_back({"tensor_binary_div_i32",
                "tensor.binary",
                {Of(i32, {20}, -50, 50), Of(i32, {20}, 1, 9)},
                out(f32, {20}),
                attrs_of(sk_binary_attrs{SK_BINARY_DIV}),
                {}});
  cs.push_back({"tensor_binary_max_scalar_tensor",
                "tensor.binary",
                {F32({8, 33}), F32({})},
                out(f32, {8, 33}),
                attrs_of(sk_binary_attrs{SK_BINARY_MAXIMUM}),
                {}});
  cs.push_back({"tensor_binary_scalar_pow2",
                "tensor.binary_scalar",
                {F32({4, 200}, -3, 3)},
                out(f32, {4, 200}),
                attrs_of(sk_binary_scalar_attrs{SK_BINARY_POW, 0, 2.0}),
                {}});
  cs.push_back({"tensor_binary_scalar_rsub_i64",
                "tensor.binary_scalar",
                {Of(i64, {25}, -9, 9)},
                out(i64, {25}),
                attrs_of(sk_binary_scalar_attrs{SK_BINARY_SUB, 1, 100.0}),
                {}});
  cs.push_back(
      {"tensor_where", "tensor.where", {Bool({4, 1, 30}), F32({5, 30}), F32({})}, out(f32, {4, 5, 30}), {}, {}});
  // Reductions.
  cs.push_back({"tensor_reduce_sum_rows",
                "tensor.reduce",
                {F32({4, 300})},
                out(f32, {4}),
                attrs_of(sk_reduce_attrs{SK_REDUCE_SUM, 0x2, 0}),
                {}});
  cs.push_back({"tensor_reduce_mean_cols_keepdim",
                "tensor.reduce",
                {F32({50, 8})},
                out(f32, {1, 8}),
                attrs_of(sk_reduce_attrs{SK_REDUCE_MEAN, 0x1, 1}),
                {}});
  cs.push_back({"tensor_reduce_max_bf16",
                "tensor.reduce",
                {Of(bf16, {6, 40}, -3, 3)},
                out(bf16, {6}),
                attrs_of(sk_reduce_attrs{SK_REDUCE_MAX, 0x2, 0}),
                {}});
  cs.push_back({"tensor_reduce_argmax_vocab",
                "tensor.reduce",
                {F32({2, 1000})},
                out(i64, {2}),
                attrs_of(sk_reduce_attrs{SK_REDUCE_ARGMAX, 0x2, 0}),
                {}});
  cs.push_back({"tensor_reduce_sum_i32",
                "tensor.reduce",
                {Of(i32, {3, 4, 5}, -100, 100)},
                out(i64, {4}),
                attrs_of(sk_reduce_attrs{SK_REDUCE_SUM, 0x5, 0}),
                {}});
  cs.push_back({"tensor_cumsum_i32",
                "tensor.cumsum",
                {Of(i32, {3, 40}, -5, 5)},
                out(i64, {3, 40}),
                attrs_of(sk_cumsum_attrs{1}),
                {}});
  cs.push_back(
      {"tensor_cumsum_dim0", "tensor.cumsum", {F32({20, 6})}, out(f32, {20, 6}), attrs_of(sk_cumsum_attrs{0}), {}});
  // Indexing.
  cs.push_back({"tensor_index_select_rows",
                "tensor.index_select",
                {W32({40, 24}), Of(i64, {9}, 0, 39)},
                out(f32, {9, 24}),
                attrs_of(sk_index_attrs{0}),
                {}});
  cs.push_back({"tensor_gather_dim1",
                "tensor.gather",
                {F32({5, 11, 7}), Of(i64, {4, 3, 6}, 0, 10)},
                out(f32, {4, 3, 6}),
                attrs_of(sk_index_attrs{1}),
                {}});
  cs.push_back({"tensor_index_copy_kv_cache",
                "tensor.index_copy",
                {F32({2, 4, 16, 8}), Values(i64, {2}, {5, 11}), F32({2, 4, 2, 8})},
                out(f32, {2, 4, 16, 8}),
                attrs_of(sk_index_attrs{2}),
                {{0, 0}}});
  cs.push_back({"tensor_index_put_accumulate",
                "tensor.index_put",
                {F32({10, 4}), F32({6, 4}), Values(i32, {6}, {1, 8, 3, 8, 1, 0})},
                out(f32, {10, 4}),
                attrs_of(sk_index_put_attrs{1}),
                {{0, 0}}});
  cs.push_back({"tensor_topk_rows",
                "tensor.topk",
                {F32({3, 200})},
                {{f32, {3, 8}}, {i64, {3, 8}}},
                attrs_of(sk_topk_attrs{8, 1, 1}),
                {}});
  // Products and attention.
  cs.push_back({"tensor_batched_mm_4d",
                "tensor.batched_mm",
                {F32({2, 3, 5, 17}), F32({2, 3, 17, 9})},
                out(f32, {2, 3, 5, 9}),
                {},
                {}});
  cs.push_back(
      {"tensor_batched_mm_wide", "tensor.batched_mm", {F32({2, 64}), W32({64, 300})}, out(f32, {2, 300}), {}, {}});
  cs.push_back({"tensor_batched_mm_bf16",
                "tensor.batched_mm",
                {Of(bf16, {3, 40}, -1, 1), Of(bf16, {40, 20}, -1, 1)},
                out(bf16, {3, 20}),
                {},
                {}});
  cs.push_back({"tensor_sdpa_decode_gqa",
                "tensor.sdpa",
                {F32({1, 8, 1, 64}), F32({1, 2, 100, 64}), F32({1, 2, 100, 64})},
                out(f32, {1, 8, 1, 64}),
                attrs_of(sk_sdpa_attrs{0.125f, 0}),
                {}});
  cs.push_back({"tensor_sdpa_causal",
                "tensor.sdpa",
                {F32({1, 2, 8, 16}), F32({1, 2, 8, 16}), F32({1, 2, 8, 16})},
                out(f32, {1, 2, 8, 16}),
                attrs_of(sk_sdpa_attrs{0.25f, 1}),
                {}});
  cs.push_back({"tensor_sdpa_bool_mask",
                "tensor.sdpa",
                {F32({1, 2, 4, 16}), F32({1, 2, 10, 16}), F32({1, 2, 10, 16}), Bool({1, 2, 4, 10})},
                out(f32, {1, 2, 4, 16}),
                attrs_of(sk_sdpa_attrs{0.25f, 0}),
                {}});
  return cs;
}

}  // namespace sk::conformance
