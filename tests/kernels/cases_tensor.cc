// Direct-test cases of the general tensor kernels (tensor.*): every op and dtype class, NumPy
// broadcasting, strided / transposed / reversed operands, expanded (stride 0) inputs, in-place
// outputs, 0-d and empty tensors, odd sizes (vector tails) and special values (NaN, infinities,
// signed zeros, subnormals).
#include <cmath>
#include <limits>
#include <utility>

#include "kernel_cases.h"
#include "superkernel/attrs_tensor.h"

namespace sk::kernel_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

TensorDesc bf16(std::vector<int64_t> s) {
  return tensor(SK_DTYPE_BF16, std::move(s)).range(-1, 1).with_fill(Fill::kUniform);
}
TensorDesc f16(std::vector<int64_t> s) {
  return tensor(SK_DTYPE_F16, std::move(s)).range(-1, 1).with_fill(Fill::kUniform);
}
// Integers drawn from [lo, hi].
TensorDesc ints(int32_t dtype, std::vector<int64_t> s, double lo, double hi) {
  return tensor(dtype, std::move(s)).range(lo, hi).with_fill(Fill::kUniform);
}
TensorDesc boolean(std::vector<int64_t> s) { return tensor(SK_DTYPE_BOOL, std::move(s)); }

Case op_case(std::string name, std::string kernel, std::vector<TensorDesc> in, std::vector<TensorDesc> out,
             std::vector<unsigned char> attrs) {
  return Case{std::move(name), std::move(kernel), std::move(in), std::move(out), std::move(attrs), -1};
}

Case unary(std::string name, int32_t op, TensorDesc x, TensorDesc out) {
  return op_case(std::move(name), "tensor.unary", {std::move(x)}, {std::move(out)}, attrs_bytes(sk_unary_attrs{op}));
}
Case binary(std::string name, int32_t op, TensorDesc a, TensorDesc b, TensorDesc out) {
  return op_case(std::move(name), "tensor.binary", {std::move(a), std::move(b)}, {std::move(out)},
                 attrs_bytes(sk_binary_attrs{op}));
}
Case scalar(std::string name, int32_t op, double s, bool first, TensorDesc a, TensorDesc out) {
  return op_case(std::move(name), "tensor.binary_scalar", {std::move(a)}, {std::move(out)},
                 attrs_bytes(sk_binary_scalar_attrs{op, first ? 1 : 0, s}));
}
Case reduce(std::string name, int32_t op, uint32_t mask, bool keepdim, TensorDesc x, TensorDesc out) {
  return op_case(std::move(name), "tensor.reduce", {std::move(x)}, {std::move(out)},
                 attrs_bytes(sk_reduce_attrs{op, mask, keepdim ? 1 : 0}));
}

}  // namespace

SK_KERNEL_CASES(tensor_elementwise_cases) {
  std::vector<Case> cs;
  // ---- tensor.unary: every op on f32 with a ragged size, then dtypes, layouts, special values.
  struct U {
    const char* name;
    int32_t op;
    double lo, hi;
  };
  const U ops[] = {{"neg", SK_UNARY_NEG, -3, 3},
                   {"exp", SK_UNARY_EXP, -20, 20},
                   {"log", SK_UNARY_LOG, 0.001, 50},
                   {"sqrt", SK_UNARY_SQRT, 0, 9},
                   {"rsqrt", SK_UNARY_RSQRT, 0.01, 9},
                   {"sin", SK_UNARY_SIN, -7, 7},
                   {"cos", SK_UNARY_COS, -7, 7},
                   {"tanh", SK_UNARY_TANH, -6, 6},
                   {"sigmoid", SK_UNARY_SIGMOID, -20, 20},
                   {"silu", SK_UNARY_SILU, -20, 20},
                   {"gelu", SK_UNARY_GELU, -6, 6},
                   {"gelu_tanh", SK_UNARY_GELU_TANH, -6, 6},
                   {"relu", SK_UNARY_RELU, -2, 2},
                   {"abs", SK_UNARY_ABS, -2, 2},
                   {"reciprocal", SK_UNARY_RECIPROCAL, 0.1, 4},
                   {"logical_not", SK_UNARY_LOGICAL_NOT, -1, 1}};
  for (const U& u : ops) {
    const TensorDesc out = u.op == SK_UNARY_LOGICAL_NOT ? boolean({3, 37}) : f32({3, 37});
    cs.push_back(unary(std::string("unary_") + u.name, u.op, f32({3, 37}).range(u.lo, u.hi), out));
  }
  // Small arguments: tanh's polynomial branch, gelu's cancellation.
  cs.push_back(unary("unary_tanh_small", SK_UNARY_TANH, f32({40}).range(-0.7, 0.7), f32({40})));
  const std::vector<double> specials = {0.0,  -0.0, kInf,  -kInf,  kNan, 1e-40,  -1e-40, 1.0, -1.0,
                                        88.7, 89.0, -87.0, -104.0, 1e-3, 3.0e38, -5.5,   0.5};
  for (const U& u : ops) {
    const TensorDesc out = u.op == SK_UNARY_LOGICAL_NOT ? boolean({17}) : f32({17});
    cs.push_back(unary(std::string("unary_special_") + u.name, u.op, f32({17}).with_values(specials), out));
  }
  cs.push_back(unary("unary_exp_bf16", SK_UNARY_EXP, bf16({5, 21}).range(-4, 4), bf16({5, 21})));
  cs.push_back(unary("unary_silu_f16", SK_UNARY_SILU, f16({70}).range(-8, 8), f16({70})));
  cs.push_back(unary("unary_neg_i32", SK_UNARY_NEG, tensor(SK_DTYPE_I32, {33}), tensor(SK_DTYPE_I32, {33})));
  cs.push_back(unary("unary_abs_i64_extremes", SK_UNARY_ABS,
                     tensor(SK_DTYPE_I64, {5}).with_values({-9.2e18, -1, 0, 7, 9.2e18}), tensor(SK_DTYPE_I64, {5})));
  cs.push_back(unary("unary_relu_i8", SK_UNARY_RELU, tensor(SK_DTYPE_I8, {29}), tensor(SK_DTYPE_I8, {29})));
  cs.push_back(unary("unary_exp_of_i32_is_f32", SK_UNARY_EXP, ints(SK_DTYPE_I32, {9}, -5, 5), f32({9})));
  cs.push_back(unary("unary_not_bool", SK_UNARY_LOGICAL_NOT, boolean({4, 9}), boolean({4, 9})));
  cs.push_back(unary("unary_not_i64", SK_UNARY_LOGICAL_NOT, ints(SK_DTYPE_I64, {19}, -1, 1), boolean({19})));
  cs.push_back(unary("unary_rank0", SK_UNARY_SIGMOID, f32({}), f32({})));
  cs.push_back(unary("unary_empty", SK_UNARY_EXP, f32({0, 7}), f32({0, 7})));
  cs.push_back(unary("unary_long_strided", SK_UNARY_GELU, f32({20, 71}).transposed({1, 0}).range(-5, 5),
                     f32({20, 71}).stepped(1, 2).reversed(0)));
  cs.push_back(unary("unary_expanded_in", SK_UNARY_EXP, f32({6, 1, 33}).expanded(1).range(-3, 3), f32({6, 1, 33})));
  {
    TensorDesc x = f32({12, 5, 8}).expanded(1);
    x.shape[1] = 5;
    cs.push_back(unary("unary_stride0_middle", SK_UNARY_TANH, x.range(-2, 2), f32({12, 5, 8}).transposed({2, 0, 1})));
  }
  cs.push_back(in_place(unary("unary_in_place", SK_UNARY_SILU, f32({9, 50}).range(-6, 6), f32({9, 50})), 0));
  cs.push_back(in_place(unary("unary_in_place_bf16", SK_UNARY_RSQRT, bf16({300}).range(0.5, 3), bf16({300})), 0));

  // ---- tensor.cast
  const std::vector<double> casts = {3.7,  -3.7,  0.5,          -0.5, kNan,  kInf, -kInf,
                                     1e20, -1e20, 2147483520.0, -0.0, 127.9, 300.2};
  for (int32_t to : {SK_DTYPE_BF16, SK_DTYPE_F16, SK_DTYPE_I8, SK_DTYPE_I32, SK_DTYPE_I64, SK_DTYPE_BOOL}) {
    cs.push_back(op_case(std::string("cast_f32_to_") + std::to_string(to), "tensor.cast",
                         {f32({13}).with_values(casts)}, {tensor(to, {13})}, {}));
  }
  cs.push_back(op_case("cast_f32_to_bf16_rounding", "tensor.cast", {f32({8, 33}).range(-100, 100)},
                       {tensor(SK_DTYPE_BF16, {8, 33})}, {}));
  cs.push_back(op_case("cast_i64_to_f32", "tensor.cast",
                       {tensor(SK_DTYPE_I64, {6}).with_values({16777217, -16777217, 1, 0, 9e15, -3})}, {f32({6})}, {}));
  cs.push_back(
      op_case("cast_i64_to_i32_wraps", "tensor.cast", {tensor(SK_DTYPE_I64, {40})}, {tensor(SK_DTYPE_I32, {40})}, {}));
  cs.push_back(op_case("cast_i32_to_i64", "tensor.cast", {tensor(SK_DTYPE_I32, {40}).transposed({0})},
                       {tensor(SK_DTYPE_I64, {40})}, {}));
  cs.push_back(op_case("cast_i32_to_bf16", "tensor.cast", {ints(SK_DTYPE_I32, {20}, -70000, 70000)},
                       {tensor(SK_DTYPE_BF16, {20})}, {}));
  cs.push_back(op_case("cast_bool_to_f32", "tensor.cast", {boolean({3, 11})}, {f32({3, 11})}, {}));
  cs.push_back(op_case("cast_i32_to_bool", "tensor.cast", {ints(SK_DTYPE_I32, {25}, -2, 2)}, {boolean({25})}, {}));
  cs.push_back(op_case("cast_bf16_to_f16", "tensor.cast", {bf16({9, 9}).range(-70000, 70000).transposed({1, 0})},
                       {f16({9, 9})}, {}));
  cs.push_back(op_case("cast_f16_to_f32_expanded", "tensor.cast",
                       {f16({4, 1}).expanded(1).with_values({1.5, -2, 65504, 6e-8})}, {f32({4, 1})}, {}));

  // ---- tensor.binary
  struct B {
    const char* name;
    int32_t op;
  };
  const B bops[] = {{"add", SK_BINARY_ADD},
                    {"sub", SK_BINARY_SUB},
                    {"mul", SK_BINARY_MUL},
                    {"div", SK_BINARY_DIV},
                    {"pow", SK_BINARY_POW},
                    {"maximum", SK_BINARY_MAXIMUM},
                    {"minimum", SK_BINARY_MINIMUM},
                    {"eq", SK_BINARY_EQ},
                    {"ne", SK_BINARY_NE},
                    {"lt", SK_BINARY_LT},
                    {"le", SK_BINARY_LE},
                    {"gt", SK_BINARY_GT},
                    {"ge", SK_BINARY_GE},
                    {"logical_and", SK_BINARY_LOGICAL_AND},
                    {"logical_or", SK_BINARY_LOGICAL_OR}};
  for (const B& b : bops) {
    const bool to_bool = b.op >= SK_BINARY_EQ;
    const TensorDesc a = b.op == SK_BINARY_POW ? f32({4, 1, 37}).range(0.1, 3) : f32({4, 1, 37}).range(-2, 2);
    // A few repeated values so that equality comparisons see both outcomes.
    const TensorDesc c = b.op >= SK_BINARY_EQ && b.op <= SK_BINARY_GE
                             ? f32({5, 37}).with_values({0.5, -1, 0, 1, -0.0, 0.5, 2})
                             : f32({5, 37}).range(-2, 2);
    cs.push_back(
        binary(std::string("binary_bcast_") + b.name, b.op, a, c, to_bool ? boolean({4, 5, 37}) : f32({4, 5, 37})));
    cs.push_back(binary(std::string("binary_special_") + b.name, b.op,
                        f32({9}).with_values({0, -0.0, kInf, -kInf, kNan, 1, -2, 3, kNan}),
                        f32({9}).with_values({-0.0, 0, kInf, 2, 1, kNan, -kInf, 3, kNan}),
                        to_bool ? boolean({9}) : f32({9})));
  }
  cs.push_back(binary("binary_add_strided", SK_BINARY_ADD, f32({7, 23}).transposed({1, 0}), f32({23}).reversed(0),
                      f32({7, 23}).padded(1, 4)));
  cs.push_back(binary("binary_mul_expanded", SK_BINARY_MUL, f32({3, 1, 40}).expanded(1), f32({5, 1}).expanded(1),
                      f32({3, 5, 40})));
  {
    TensorDesc a = f32({6, 1}).expanded(1);
    a.shape[1] = 20;  // an expand view [6, 20] with stride 0 along dim 1
    cs.push_back(binary("binary_sub_stride0_view", SK_BINARY_SUB, a, f32({6, 20}), f32({6, 20})));
  }
  cs.push_back(in_place(binary("binary_add_in_place", SK_BINARY_ADD, f32({16, 65}), f32({65}), f32({16, 65})), 0));
  cs.push_back(
      in_place(binary("binary_div_in_place_b", SK_BINARY_DIV, f32({33}), f32({33}).range(0.5, 2), f32({33})), 1));
  cs.push_back(binary("binary_add_bf16", SK_BINARY_ADD, bf16({4, 30}), bf16({30}), bf16({4, 30})));
  cs.push_back(binary("binary_mul_f16", SK_BINARY_MUL, f16({50}), f16({50}), f16({50})));
  cs.push_back(binary("binary_add_i32_wraps", SK_BINARY_ADD, tensor(SK_DTYPE_I32, {40}), tensor(SK_DTYPE_I32, {40}),
                      tensor(SK_DTYPE_I32, {40})));
  cs.push_back(binary("binary_mul_i64_wraps", SK_BINARY_MUL, tensor(SK_DTYPE_I64, {3, 11}), tensor(SK_DTYPE_I64, {11}),
                      tensor(SK_DTYPE_I64, {3, 11})));
  cs.push_back(binary("binary_pow_i32", SK_BINARY_POW, ints(SK_DTYPE_I32, {30}, -7, 7), ints(SK_DTYPE_I32, {30}, 0, 12),
                      tensor(SK_DTYPE_I32, {30})));
  cs.push_back(binary("binary_max_i8", SK_BINARY_MAXIMUM, tensor(SK_DTYPE_I8, {50}), tensor(SK_DTYPE_I8, {50}),
                      tensor(SK_DTYPE_I8, {50})));
  cs.push_back(binary("binary_div_i32_is_f32", SK_BINARY_DIV, ints(SK_DTYPE_I32, {20}, -9, 9),
                      ints(SK_DTYPE_I32, {20}, 1, 4), f32({20})));
  cs.push_back(binary("binary_lt_i64", SK_BINARY_LT, ints(SK_DTYPE_I64, {2, 17}, -3, 3),
                      ints(SK_DTYPE_I64, {17}, -3, 3), boolean({2, 17})));
  cs.push_back(binary("binary_and_bool", SK_BINARY_LOGICAL_AND, boolean({24}), boolean({24}), boolean({24})));
  // One-element operands promote as torch's scalars: bf16 tensor + f32 0-d -> bf16; i32 tensor
  // + f32 0-d -> f32; i64 tensor < bool [1] -> i64 compare; bool tensor + i32 0-d -> i32.
  cs.push_back(binary("binary_promote_bf16_f32_scalar", SK_BINARY_MUL, bf16({3, 19}), f32({}), bf16({3, 19})));
  cs.push_back(binary("binary_promote_i32_f32_scalar", SK_BINARY_ADD, ints(SK_DTYPE_I32, {21}, -100, 100),
                      f32({}).with_values({0.25}), f32({21})));
  cs.push_back(binary("binary_promote_f32_scalar_first", SK_BINARY_SUB, f32({1}), ints(SK_DTYPE_I64, {2, 8}, -5, 5),
                      f32({2, 8})));
  cs.push_back(binary("binary_promote_bool_i32", SK_BINARY_ADD, boolean({12}), ints(SK_DTYPE_I32, {}, -4, 4),
                      tensor(SK_DTYPE_I32, {12})));
  cs.push_back(binary("binary_rank0", SK_BINARY_MAXIMUM, f32({}), f32({}), f32({})));
  cs.push_back(binary("binary_empty", SK_BINARY_ADD, f32({0, 3}), f32({3}), f32({0, 3})));

  // ---- tensor.binary_scalar
  const std::pair<const char*, double> exponents[] = {{"2", 2.0},   {"3", 3.0},   {"half", 0.5}, {"m_half", -0.5},
                                                      {"m1", -1.0}, {"m2", -2.0}, {"1_7", 1.7}};
  for (const auto& [tag, e] : exponents) {
    cs.push_back(
        scalar(std::string("scalar_pow_") + tag, SK_BINARY_POW, e, false, f32({5, 19}).range(0.05, 3), f32({5, 19})));
  }
  cs.push_back(scalar("scalar_pow_special", SK_BINARY_POW, 2.0, false, f32({8}).with_values(specials), f32({8})));
  cs.push_back(scalar("scalar_rsub", SK_BINARY_SUB, 2.0, true, f32({3, 33}).transposed({1, 0}), f32({3, 33})));
  cs.push_back(scalar("scalar_rdiv", SK_BINARY_DIV, 1.0, true, f32({40}).range(0.5, 2), f32({40})));
  cs.push_back(scalar("scalar_rpow", SK_BINARY_POW, 10000.0, true, f32({64}).range(-1, 0), f32({64})));
  cs.push_back(scalar("scalar_mul_bf16", SK_BINARY_MUL, 0.125, false, bf16({6, 10}), bf16({6, 10})));
  cs.push_back(
      scalar("scalar_max_expanded", SK_BINARY_MAXIMUM, 0.0, false, f32({4, 1, 9}).expanded(1), f32({4, 1, 9})));
  cs.push_back(
      scalar("scalar_add_i64", SK_BINARY_ADD, -7.0, false, tensor(SK_DTYPE_I64, {31}), tensor(SK_DTYPE_I64, {31})));
  cs.push_back(scalar("scalar_pow_i32", SK_BINARY_POW, 3.0, false, ints(SK_DTYPE_I32, {21}, -20, 20),
                      tensor(SK_DTYPE_I32, {21})));
  cs.push_back(
      scalar("scalar_rpow_i32", SK_BINARY_POW, 2.0, true, ints(SK_DTYPE_I32, {21}, 0, 40), tensor(SK_DTYPE_I32, {21})));
  cs.push_back(scalar("scalar_div_i32", SK_BINARY_DIV, 4.0, false, ints(SK_DTYPE_I32, {16}, -50, 50), f32({16})));
  cs.push_back(
      scalar("scalar_lt_i64_fraction", SK_BINARY_LT, 2.5, false, ints(SK_DTYPE_I64, {15}, 0, 5), boolean({15})));
  cs.push_back(scalar("scalar_eq_i32", SK_BINARY_EQ, 3.0, false, ints(SK_DTYPE_I32, {15}, 0, 5), boolean({15})));
  cs.push_back(scalar("scalar_or_bool", SK_BINARY_LOGICAL_OR, 0.0, false, boolean({15}), boolean({15})));
  cs.push_back(in_place(scalar("scalar_in_place", SK_BINARY_MUL, 0.5, false, f32({70}), f32({70})), 0));

  // ---- tensor.where
  cs.push_back(
      op_case("where_bcast", "tensor.where", {boolean({4, 1, 23}), f32({5, 23}), f32({})}, {f32({4, 5, 23})}, {}));
  cs.push_back(op_case("where_strided", "tensor.where",
                       {boolean({9, 12}).transposed({1, 0}), f32({9, 12}).reversed(1), f32({12}).expanded(0)},
                       {f32({9, 12})}, {}));
  cs.push_back(op_case("where_i64", "tensor.where",
                       {boolean({30}), tensor(SK_DTYPE_I64, {30}), ints(SK_DTYPE_I64, {}, -1, -1)},
                       {tensor(SK_DTYPE_I64, {30})}, {}));
  cs.push_back(op_case("where_bf16_promotes_scalar", "tensor.where", {boolean({2, 20}), bf16({2, 20}), f32({1})},
                       {bf16({2, 20})}, {}));
  cs.push_back(
      op_case("where_nan_passes", "tensor.where",
              {boolean({4}), f32({4}).with_values({kNan, -0.0, kInf, 1}), f32({4}).with_values({kNan, 0, 1, 2})},
              {f32({4})}, {}));
  return cs;
}

SK_KERNEL_CASES(tensor_reduce_cases) {
  std::vector<Case> cs;
  for (int32_t op : {SK_REDUCE_SUM, SK_REDUCE_MEAN, SK_REDUCE_MAX, SK_REDUCE_MIN}) {
    const std::string n = std::to_string(op);
    cs.push_back(reduce("reduce_last_" + n, op, 0x2, false, f32({5, 301}), f32({5})));
    cs.push_back(reduce("reduce_first_" + n, op, 0x1, true, f32({67, 9}), f32({1, 9})));
    cs.push_back(reduce("reduce_outer_inner_" + n, op, 0x5, false, f32({3, 4, 5}), f32({4})));
    cs.push_back(reduce("reduce_all_" + n, op, 0x7, false, f32({6, 7, 8}).transposed({2, 0, 1}), f32({})));
    cs.push_back(reduce("reduce_bf16_" + n, op, 0x2, true, bf16({4, 50}), bf16({4, 1})));
  }
  cs.push_back(reduce("reduce_sum_expanded", SK_REDUCE_SUM, 0x2, false, f32({6, 1}).expanded(1), f32({6})));
  {
    TensorDesc x = f32({3, 1, 25}).expanded(1);
    x.shape[1] = 40;  // stride 0 along the reduced dim: 40 copies of each value
    cs.push_back(reduce("reduce_mean_stride0_reduced", SK_REDUCE_MEAN, 0x2, false, x, f32({3, 25})));
  }
  cs.push_back(
      reduce("reduce_sum_reversed", SK_REDUCE_SUM, 0x1, false, f32({29, 6}).reversed(0).stepped(1, 2), f32({6})));
  cs.push_back(reduce("reduce_sum_strided_out", SK_REDUCE_SUM, 0x1, false, f32({10, 20}), f32({20}).stepped(0, 3)));
  cs.push_back(reduce("reduce_max_nan", SK_REDUCE_MAX, 0x2, false,
                      f32({3, 10}).with_values({1,  2,  kNan, 3,  4,   5, 6, 7, 8, 9, -1,   -2, -3, -4, -5,
                                                -6, -7, -8,   -9, -10, 0, 0, 0, 0, 0, -0.0, 0,  0,  0,  kInf}),
                      f32({3})));
  cs.push_back(reduce("reduce_min_inf", SK_REDUCE_MIN, 0x1, false,
                      f32({4, 3}).with_values({kInf, -kInf, kNan, 1, 2, 3}), f32({3})));
  cs.push_back(reduce("reduce_sum_i32_to_i64", SK_REDUCE_SUM, 0x2, false, tensor(SK_DTYPE_I32, {4, 77}),
                      tensor(SK_DTYPE_I64, {4})));
  cs.push_back(reduce("reduce_sum_bool", SK_REDUCE_SUM, 0x3, false, boolean({9, 13}), tensor(SK_DTYPE_I64, {})));
  cs.push_back(
      reduce("reduce_max_i64", SK_REDUCE_MAX, 0x1, false, tensor(SK_DTYPE_I64, {7, 5}), tensor(SK_DTYPE_I64, {5})));
  cs.push_back(reduce("reduce_min_i8_keepdim", SK_REDUCE_MIN, 0x2, true, tensor(SK_DTYPE_I8, {5, 6}),
                      tensor(SK_DTYPE_I8, {5, 1})));
  cs.push_back(reduce("reduce_sum_empty", SK_REDUCE_SUM, 0x2, false, f32({4, 0}), f32({4})));
  cs.push_back(reduce("reduce_mean_empty_is_nan", SK_REDUCE_MEAN, 0x2, false, f32({3, 0}), f32({3})));
  cs.push_back(reduce("reduce_rank0", SK_REDUCE_SUM, 0x0, false, f32({}), f32({})));
  // argmax / argmin: ties (repeated values), NaN, vocabulary-sized rows (vector path), strided.
  for (int32_t op : {SK_REDUCE_ARGMAX, SK_REDUCE_ARGMIN}) {
    const std::string n = op == SK_REDUCE_ARGMAX ? "argmax" : "argmin";
    cs.push_back(reduce(n + "_vocab", op, 0x2, false, f32({3, 1000}), tensor(SK_DTYPE_I64, {3})));
    cs.push_back(reduce(n + "_ties", op, 0x2, false, f32({4, 37}).with_values({1, 3, 3, -2, 0, 3, -2}),
                        tensor(SK_DTYPE_I64, {4})));
    cs.push_back(
        reduce(n + "_nan", op, 0x2, true,
               f32({2, 20}).with_values({1, 2, 3, kNan, 5, 6, 7, kNan, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                                         1, 1, 1, 1,    1, 1, 1, 1,    1, 1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1}),
               tensor(SK_DTYPE_I64, {2, 1})));
    cs.push_back(reduce(n + "_dim0", op, 0x1, false, f32({50, 7}).transposed({1, 0}), tensor(SK_DTYPE_I64, {7})));
    cs.push_back(reduce(n + "_flat", op, 0x3, false, f32({6, 11}), tensor(SK_DTYPE_I64, {})));
    cs.push_back(reduce(n + "_i32", op, 0x2, false, ints(SK_DTYPE_I32, {3, 40}, -5, 5), tensor(SK_DTYPE_I64, {3})));
  }
  // cumsum
  const auto cumsum = [](std::string name, int32_t dim, TensorDesc x, TensorDesc out) {
    return op_case(std::move(name), "tensor.cumsum", {std::move(x)}, {std::move(out)},
                   attrs_bytes(sk_cumsum_attrs{dim}));
  };
  cs.push_back(cumsum("cumsum_last", 1, f32({6, 70}), f32({6, 70})));
  cs.push_back(cumsum("cumsum_first", 0, f32({33, 5}), f32({33, 5})));
  cs.push_back(cumsum("cumsum_middle_strided", 1, f32({4, 9, 3}).transposed({2, 1, 0}), f32({4, 9, 3})));
  cs.push_back(cumsum("cumsum_i32_to_i64", 1, tensor(SK_DTYPE_I32, {3, 25}), tensor(SK_DTYPE_I64, {3, 25})));
  cs.push_back(cumsum("cumsum_bool", 0, boolean({40}), tensor(SK_DTYPE_I64, {40})));
  cs.push_back(cumsum("cumsum_bf16", 1, bf16({3, 30}), bf16({3, 30})));
  cs.push_back(cumsum("cumsum_expanded", 1, f32({5, 1}).expanded(1), f32({5, 1})));
  {
    TensorDesc x = ints(SK_DTYPE_I64, {8, 1}, 1, 1).expanded(1);
    x.shape[1] = 12;  // ones(8, 12) as an expand view: the positions 1 .. 12 of torch's idiom
    cs.push_back(cumsum("cumsum_positions_from_stride0", 1, x, tensor(SK_DTYPE_I64, {8, 12})));
  }
  return cs;
}

SK_KERNEL_CASES(tensor_index_cases) {
  std::vector<Case> cs;
  const auto index_attrs = [](int32_t dim) { return attrs_bytes(sk_index_attrs{dim}); };
  TensorDesc rows_i64 = ids({9}, 40);
  rows_i64.dtype = SK_DTYPE_I64;
  cs.push_back(op_case("index_select_rows_i64", "tensor.index_select", {f32({40, 24}), rows_i64}, {f32({9, 24})},
                       index_attrs(0)));
  cs.push_back(op_case("index_select_cols_i32", "tensor.index_select",
                       {f32({5, 30, 3}).transposed({2, 0, 1}), ids({7}, 30)}, {f32({5, 7, 3})}, index_attrs(1)));
  cs.push_back(op_case("index_select_last_dim_repeats", "tensor.index_select",
                       {tensor(SK_DTYPE_BF16, {6, 10}), tensor(SK_DTYPE_I32, {12}).with_values({9, 0, 9, 3, 3, 1})},
                       {tensor(SK_DTYPE_BF16, {6, 12})}, index_attrs(1)));
  cs.push_back(op_case("index_select_bool_expanded", "tensor.index_select", {boolean({8, 1}).expanded(1), ids({5}, 8)},
                       {boolean({5, 1})}, index_attrs(0)));
  cs.push_back(op_case("index_select_empty_index", "tensor.index_select", {f32({6, 4}), ids({0}, 6)}, {f32({0, 4})},
                       index_attrs(0)));
  cs.push_back(op_case("index_select_rank0_index", "tensor.index_select",
                       {f32({6, 4}), tensor(SK_DTYPE_I64, {}).with_values({5})}, {f32({1, 4})}, index_attrs(0)));

  TensorDesc g_idx = ids({4, 3, 6}, 11);
  g_idx.dtype = SK_DTYPE_I64;
  cs.push_back(op_case("gather_dim1", "tensor.gather", {f32({5, 11, 7}), g_idx}, {f32({4, 3, 6})}, index_attrs(1)));
  cs.push_back(op_case("gather_last_i32", "tensor.gather", {tensor(SK_DTYPE_I64, {8, 50}), ids({8, 5}, 50)},
                       {tensor(SK_DTYPE_I64, {8, 5})}, index_attrs(1)));
  cs.push_back(op_case("gather_strided_index", "tensor.gather",
                       {f32({9, 4}).reversed(0), ids({9, 4}, 9).transposed({1, 0})}, {f32({9, 4})}, index_attrs(0)));

  // index_copy: a static KV cache [B, H, S, D] updated at positions along dim 2, in place.
  TensorDesc pos = tensor(SK_DTYPE_I64, {3}).with_values({5, 0, 13});
  cs.push_back(
      in_place_output(op_case("index_copy_kv_cache", "tensor.index_copy", {f32({2, 3, 16, 8}), pos, f32({2, 3, 3, 8})},
                              {f32({2, 3, 16, 8})}, index_attrs(2)),
                      0, 0));
  cs.push_back(in_place_output(
      op_case("index_copy_rows_duplicates", "tensor.index_copy",
              {tensor(SK_DTYPE_BF16, {10, 6}), ids({4}, 10).with_values({2, 7, 2, 9}), tensor(SK_DTYPE_BF16, {4, 6})},
              {tensor(SK_DTYPE_BF16, {10, 6})}, index_attrs(0)),
      0, 0));
  cs.push_back(in_place_output(
      op_case("index_copy_strided_src", "tensor.index_copy",
              {f32({4, 12, 5}), ids({2}, 12).with_values({11, 3}), f32({4, 2, 5}).transposed({2, 1, 0})},
              {f32({4, 12, 5})}, index_attrs(1)),
      0, 0));
  {
    Case c = op_case("index_copy_expanded_src_rows", "tensor.index_copy",
                     {f32({3, 9, 4}), ids({1}, 9).with_values({2}), f32({1, 1, 4}).expanded(0)}, {f32({3, 9, 4})},
                     index_attrs(1));
    c.inputs[2].shape[0] = 3;  // a [3, 1, 4] view of one row
    cs.push_back(in_place_output(std::move(c), 0, 0));
  }

  const auto put = [](int32_t acc) { return attrs_bytes(sk_index_put_attrs{acc}); };
  cs.push_back(in_place_output(
      op_case("index_put_rows", "tensor.index_put",
              {f32({10, 4}), f32({5, 4}), ids({5}, 10).with_values({1, 8, 3, 8, 0})}, {f32({10, 4})}, put(0)),
      0, 0));
  cs.push_back(in_place_output(
      op_case("index_put_accumulate", "tensor.index_put",
              {f32({10, 4}), f32({5, 4}), ids({5}, 10).with_values({1, 8, 3, 8, 1})}, {f32({10, 4})}, put(1)),
      0, 0));
  TensorDesc i0 = ids({7}, 6);
  i0.dtype = SK_DTYPE_I64;
  cs.push_back(in_place_output(op_case("index_put_two_dims_i32", "tensor.index_put",
                                       {tensor(SK_DTYPE_I32, {6, 5, 3}), tensor(SK_DTYPE_I32, {7, 3}), i0, ids({7}, 5)},
                                       {tensor(SK_DTYPE_I32, {6, 5, 3})}, put(1)),
                               0, 0));
  {
    Case c = op_case("index_put_expanded_values", "tensor.index_put",
                     {f32({8, 6}), f32({1, 6}).expanded(0), ids({3}, 8)}, {f32({8, 6})}, put(0));
    c.inputs[1].shape[0] = 3;  // one row of values for every index
    cs.push_back(in_place_output(std::move(c), 0, 0));
  }
  return cs;
}

SK_KERNEL_CASES(tensor_topk_cases) {
  std::vector<Case> cs;
  const auto topk = [](std::string name, int64_t k, int32_t dim, bool largest, TensorDesc x,
                       std::vector<int64_t> shape) {
    TensorDesc values = x;
    values.shape = shape;
    values.perm.clear();
    values.step.assign(shape.size(), 1);
    values.pad.assign(shape.size(), 0);
    values.reverse.assign(shape.size(), false);
    values.expand.assign(shape.size(), false);
    return op_case(std::move(name), "tensor.topk", {std::move(x)}, {values, tensor(SK_DTYPE_I64, shape)},
                   attrs_bytes(sk_topk_attrs{k, dim, largest ? 1 : 0}));
  };
  cs.push_back(topk("topk_rows", 5, 1, true, f32({4, 50}), {4, 5}));
  cs.push_back(topk("topk_rows_smallest", 7, 1, false, f32({3, 33}), {3, 7}));
  cs.push_back(topk("topk_ties_and_nan", 6, 0, true,
                    f32({12}).with_values({3, kNan, 3, 1, 3, -0.0, 0, kNan, 2, 2, -kInf, kInf}), {6}));
  cs.push_back(topk("topk_smallest_nan_last", 12, 0, false,
                    f32({12}).with_values({3, kNan, 3, 1, 3, -0.0, 0, kNan, 2, 2, -kInf, kInf}), {12}));
  cs.push_back(topk("topk_dim0_strided", 3, 0, true, f32({20, 6}).transposed({1, 0}), {3, 6}));
  cs.push_back(topk("topk_middle_dim", 2, 1, true, f32({3, 9, 4}), {3, 2, 4}));
  cs.push_back(topk("topk_i64", 4, 1, true, ints(SK_DTYPE_I64, {5, 17}, -3, 3), {5, 4}));
  {
    TensorDesc x = bf16({6, 1}).expanded(1);
    x.shape[1] = 8;  // every line holds one repeated value: ties all the way
    cs.push_back(topk("topk_bf16_stride0_ties", 3, 1, true, x, {6, 3}));
  }
  cs.push_back(topk("topk_k0", 0, 1, true, f32({3, 8}), {3, 0}));
  cs.push_back(topk("topk_vocab", 40, 1, true, f32({2, 2000}), {2, 40}));
  return cs;
}

SK_KERNEL_CASES(tensor_mm_cases) {
  std::vector<Case> cs;
  const auto mm = [](std::string name, TensorDesc a, TensorDesc b, TensorDesc out) {
    return op_case(std::move(name), "tensor.batched_mm", {std::move(a), std::move(b)}, {std::move(out)}, {});
  };
  cs.push_back(mm("batched_mm_4d", f32({2, 3, 5, 17}), f32({2, 3, 17, 9}), f32({2, 3, 5, 9})));
  cs.push_back(mm("batched_mm_2d_wide", f32({4, 40}), f32({40, 70}), f32({4, 70})));
  cs.push_back(mm("batched_mm_b_transposed", f32({3, 7, 33}), f32({3, 33, 13}).transposed({0, 2, 1}), f32({3, 7, 13})));
  cs.push_back(mm("batched_mm_broadcast_batch", f32({3, 5, 16}), f32({2, 1, 16, 6}), f32({2, 3, 5, 6})));
  cs.push_back(mm("batched_mm_expanded_b", f32({4, 2, 12}), f32({1, 12, 10}).expanded(0), f32({4, 2, 10})));
  {
    TensorDesc b = f32({1, 12, 10}).expanded(0);
    b.shape[0] = 4;  // one matrix repeated by a stride-0 batch dim
    cs.push_back(mm("batched_mm_stride0_batch", f32({4, 2, 12}), b, f32({4, 2, 10})));
  }
  cs.push_back(
      mm("batched_mm_strided_a", f32({2, 20, 9}).transposed({0, 2, 1}).reversed(1), f32({2, 9, 11}), f32({2, 20, 11})));
  cs.push_back(mm("batched_mm_b_strided_both", f32({6, 10}), f32({10, 15}).stepped(1, 2).stepped(0, 3), f32({6, 15})));
  cs.push_back(mm("batched_mm_bf16", bf16({2, 4, 24}), bf16({2, 24, 9}), bf16({2, 4, 9})));
  cs.push_back(mm("batched_mm_f16_transposed_out", f16({3, 18}), f16({18, 5}), f16({3, 5}).transposed({1, 0})));
  cs.push_back(mm("batched_mm_n1_k1", f32({5, 1}), f32({1, 1}), f32({5, 1})));
  cs.push_back(mm("batched_mm_k0", f32({3, 0}), f32({0, 4}), f32({3, 4})));
  cs.push_back(mm("batched_mm_decode_qk", f32({1, 4, 1, 64}), f32({1, 4, 64, 100}).transposed({0, 1, 3, 2}),
                  f32({1, 4, 1, 100})));
  return cs;
}

SK_KERNEL_CASES(tensor_sdpa_cases) {
  std::vector<Case> cs;
  const auto sdpa = [](std::string name, std::vector<TensorDesc> in, TensorDesc out, float scale, int causal) {
    return op_case(std::move(name), "tensor.sdpa", std::move(in), {std::move(out)},
                   attrs_bytes(sk_sdpa_attrs{scale, causal}));
  };
  cs.push_back(
      sdpa("sdpa_gqa", {f32({1, 4, 3, 16}), f32({1, 2, 7, 16}), f32({1, 2, 7, 16})}, f32({1, 4, 3, 16}), 0.25f, 0));
  cs.push_back(
      sdpa("sdpa_causal", {f32({2, 2, 5, 8}), f32({2, 2, 5, 8}), f32({2, 2, 5, 12})}, f32({2, 2, 5, 12}), 0.35f, 1));
  cs.push_back(sdpa("sdpa_causal_short_keys", {f32({1, 2, 6, 8}), f32({1, 1, 3, 8}), f32({1, 1, 3, 8})},
                    f32({1, 2, 6, 8}), 0.35f, 1));
  cs.push_back(sdpa("sdpa_decode_long", {f32({1, 8, 1, 64}), f32({1, 2, 300, 64}), f32({1, 2, 300, 64})},
                    f32({1, 8, 1, 64}), 0.125f, 0));
  {
    // A bool mask broadcast over heads and queries (stride 0), a fully masked query row among
    // them; q laid out as [B, L, H, D] transposed (the usual projection output).
    TensorDesc mask = boolean({2, 1, 1, 9}).expanded(1).expanded(2);
    mask.shape = {2, 3, 4, 9};
    cs.push_back(sdpa("sdpa_bool_mask_broadcast",
                      {f32({2, 3, 4, 16}).transposed({0, 2, 1, 3}), f32({2, 3, 9, 16}), f32({2, 3, 9, 16}), mask},
                      f32({2, 3, 4, 16}), 0.25f, 0));
  }
  {
    TensorDesc mask =
        boolean({1, 1, 3, 6}).expanded(1).with_values({1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1});
    mask.shape = {1, 2, 3, 6};
    cs.push_back(sdpa("sdpa_fully_masked_row", {f32({1, 2, 3, 8}), f32({1, 2, 6, 8}), f32({1, 2, 6, 8}), mask},
                      f32({1, 2, 3, 8}), 0.3f, 0));
  }
  cs.push_back(sdpa("sdpa_float_mask",
                    {f32({1, 2, 4, 8}), f32({1, 2, 5, 8}), f32({1, 2, 5, 8}),
                     f32({1, 2, 4, 5}).with_values({0, -1, -kInf, 0.5, 0, -kInf, -kInf, -kInf, -kInf, -kInf})},
                    f32({1, 2, 4, 8}), 0.3f, 0));
  {
    // A decode step over a static cache of 128 positions, 11 written: the float mask (0, then
    // -inf, broadcast over the heads) ends the keys the kernel reads.
    std::vector<double> allowed(128, -kInf);
    std::fill(allowed.begin(), allowed.begin() + 11, 0.0);
    TensorDesc mask = f32({1, 1, 1, 128}).expanded(1).with_values(allowed);
    mask.shape = {1, 8, 1, 128};
    cs.push_back(sdpa("sdpa_static_cache_float_mask",
                      {f32({1, 8, 1, 64}), f32({1, 2, 128, 64}), f32({1, 2, 128, 64}), mask}, f32({1, 8, 1, 64}),
                      0.125f, 0));
  }
  cs.push_back(sdpa("sdpa_bf16", {bf16({1, 2, 3, 24}), bf16({1, 2, 10, 24}), bf16({1, 2, 10, 24})}, bf16({1, 2, 3, 24}),
                    0.2f, 0));
  cs.push_back(sdpa(
      "sdpa_strided_kv",
      {f32({1, 2, 2, 12}), f32({1, 2, 7, 12}).transposed({0, 2, 1, 3}).padded(3, 4), f32({1, 2, 7, 20}).stepped(3, 2)},
      f32({1, 2, 2, 20}), 0.3f, 0));
  cs.push_back(
      sdpa("sdpa_odd_dims", {f32({1, 3, 2, 5}), f32({1, 3, 9, 5}), f32({1, 3, 9, 37})}, f32({1, 3, 2, 37}), 0.5f, 0));
  return cs;
}

}  // namespace sk::kernel_test
