// Direct-test cases of the v0 kernels: contiguous, broadcast, strided, transposed, reversed,
// in-place and edge shapes.
#include "kernel_cases.h"
#include "superkernel/attrs_core.h"

namespace sk::kernel_test {

SK_KERNEL_CASES(core_cases) {
  std::vector<Case> cs;
  // add / mul: contiguous, broadcast, strided, transposed, reversed, in-place, edge sizes.
  cs.push_back(binary_case("add_1d_37", "add.f32", f32({37}), f32({37}), f32({37})));
  cs.push_back(binary_case("add_1000", "add.f32", f32({1000}), f32({1000}), f32({1000})));
  cs.push_back(binary_case("add_one_element", "add.f32", f32({1}), f32({1}), f32({1})));
  cs.push_back(binary_case("add_empty", "add.f32", f32({0, 5}), f32({5}), f32({0, 5})));
  cs.push_back(binary_case("add_rank0", "add.f32", f32({}), f32({}), f32({})));
  cs.push_back(binary_case("add_bcast_row", "add.f32", f32({5, 19}), f32({19}), f32({5, 19})));
  cs.push_back(binary_case("add_bcast_scalar", "add.f32", f32({7, 9}), f32({1}), f32({7, 9})));
  cs.push_back(binary_case("add_bcast_column", "add.f32", f32({3, 4, 21}), f32({4, 1}), f32({3, 4, 21})));
  cs.push_back(
      binary_case("add_transposed_a", "add.f32", f32({13, 17}).transposed({1, 0}), f32({13, 17}), f32({13, 17})));
  cs.push_back(binary_case("add_strided_out", "add.f32", f32({6, 11}).reversed(0), f32({11}).stepped(0, 3),
                           f32({6, 11}).stepped(1, 2).padded(1, 5)));
  cs.push_back(binary_case("add_transposed_out", "add.f32", f32({9, 40}), f32({40}), f32({9, 40}).transposed({1, 0})));
  cs.push_back(
      binary_case("add_reversed_out", "add.f32", f32({4, 10}), f32({4, 10}), f32({4, 10}).reversed(1).reversed(0)));
  cs.push_back(in_place(binary_case("add_in_place", "add.f32", f32({64, 33}), f32({33}), f32({64, 33})), 0));
  cs.push_back(in_place(binary_case("add_in_place_strided", "add.f32", f32({8, 12}).transposed({1, 0}).padded(0, 3),
                                    f32({8, 12}), f32({8, 12})),
                        0));
  cs.push_back(binary_case("mul_3x50", "mul.f32", f32({3, 50}), f32({3, 50}), f32({3, 50})));
  cs.push_back(
      binary_case("mul_bcast_transposed_out", "mul.f32", f32({6, 35}), f32({35}), f32({6, 35}).transposed({1, 0})));
  cs.push_back(binary_case("mul_rank4_bcast", "mul.f32", f32({2, 3, 4, 5}), f32({3, 1, 5}), f32({2, 3, 4, 5})));
  // silu_mul
  cs.push_back(binary_case("silu_mul_4x67", "silu_mul.f32", f32({4, 67}).range(-10, 10), f32({4, 67}), f32({4, 67})));
  cs.push_back(binary_case("silu_mul_wide_range", "silu_mul.f32", f32({300}).range(-120, 120), f32({300}).range(-2, 2),
                           f32({300})));
  cs.push_back(binary_case("silu_mul_strided", "silu_mul.f32", f32({10, 23}).transposed({1, 0}).range(-6, 6),
                           f32({10, 23}).stepped(1, 2), f32({10, 23}).padded(1, 9)));
  // Rows of 13 with padded output: every row ends in a vector tail.
  cs.push_back(binary_case("silu_mul_short_rows", "silu_mul.f32", f32({200, 13}).range(-6, 6), f32({200, 13}),
                           f32({200, 13}).padded(1, 3)));
  cs.push_back(in_place(
      binary_case("silu_mul_in_place", "silu_mul.f32", f32({5, 33}).range(-8, 8), f32({5, 33}), f32({5, 33})), 0));
  cs.push_back(binary_case("silu_mul_one", "silu_mul.f32", f32({1}), f32({1}), f32({1})));
  // rms_norm
  cs.push_back(rms_case("rms_norm_one_row", f32({1, 64}), f32({1, 64})));
  cs.push_back(rms_case("rms_norm_5x37", f32({5, 37}), f32({5, 37})));
  cs.push_back(rms_case("rms_norm_3x4x16", f32({3, 4, 16}), f32({3, 4, 16})));
  cs.push_back(rms_case("rms_norm_d1", f32({7, 1}), f32({7, 1})));
  cs.push_back(rms_case("rms_norm_1d", f32({100}), f32({100})));
  cs.push_back(rms_case("rms_norm_long_rows", f32({3, 1031}).range(-4, 4), f32({3, 1031})));
  cs.push_back(rms_case("rms_norm_padded_rows", f32({9, 130}).padded(1, 6), f32({9, 130}).padded(1, 3), 1e-6f));
  cs.push_back(rms_case("rms_norm_permuted_rows", f32({4, 3, 24}).transposed({1, 0, 2}),
                        f32({4, 3, 24}).transposed({1, 0, 2}).reversed(1)));
  {
    Case c = rms_case("rms_norm_in_place", f32({6, 40}), f32({6, 40}));
    cs.push_back(in_place(std::move(c), 0));
  }
  // softmax
  cs.push_back(unary_case("softmax_one_row", "softmax.f32", f32({1, 10}), f32({1, 10})));
  cs.push_back(unary_case("softmax_6x129", "softmax.f32", f32({6, 129}).range(-5, 5), f32({6, 129})));
  cs.push_back(unary_case("softmax_masked", "softmax.f32", f32({4, 3, 17}).masked_logits(-3, 3), f32({4, 3, 17})));
  cs.push_back(unary_case("softmax_large_logits", "softmax.f32", f32({3, 70}).range(-60, 60), f32({3, 70})));
  cs.push_back(unary_case("softmax_d1", "softmax.f32", f32({5, 1}), f32({5, 1})));
  cs.push_back(
      unary_case("softmax_padded", "softmax.f32", f32({8, 33}).padded(1, 7), f32({8, 33}).padded(1, 1).reversed(0)));
  cs.push_back(in_place(unary_case("softmax_in_place", "softmax.f32", f32({7, 48}).range(-4, 4), f32({7, 48})), 0));
  // matmul
  cs.push_back(matmul_case("matmul_gemv_vector_x", f32({37}), f32({19, 37}), f32({19})));
  cs.push_back(matmul_case("matmul_gemv_256x64", f32({1, 256}), f32({64, 256}), f32({1, 64})));
  cs.push_back(matmul_case("matmul_k1", f32({3, 1}), f32({13, 1}), f32({3, 13})));
  cs.push_back(matmul_case("matmul_n1", f32({5, 33}), f32({1, 33}), f32({5, 1})));
  cs.push_back(matmul_case("matmul_m4", f32({4, 70}), f32({24, 70}), f32({4, 24})));
  cs.push_back(matmul_case("matmul_m16_k300", f32({16, 300}), f32({40, 300}), f32({16, 40})));
  cs.push_back(matmul_case("matmul_m17_n70", f32({17, 24}), f32({70, 24}), f32({17, 70})));
  cs.push_back(matmul_case("matmul_rank3_x", f32({2, 3, 20}), f32({9, 20}), f32({2, 3, 9})));
  cs.push_back(
      matmul_case("matmul_padded", f32({6, 45}).padded(1, 3), f32({21, 45}).padded(1, 5), f32({6, 21}).padded(1, 2)));
  cs.push_back(
      matmul_case("matmul_permuted_rows", f32({4, 3, 24}).transposed({1, 0, 2}), f32({11, 24}), f32({4, 3, 11})));
  cs.push_back(matmul_case("matmul_k0", f32({2, 0}), f32({5, 0}), f32({2, 5})));
  // embedding: T >= cores splits tokens, T < cores splits columns.
  cs.push_back(Case{"embedding_one_token", "embedding.f32", {ids({1}, 50), f32({50, 37})}, {f32({1, 37})}, {}, -1});
  cs.push_back(
      Case{"embedding_three_tokens", "embedding.f32", {ids({3}, 11), f32({11, 100})}, {f32({3, 100})}, {}, -1});
  cs.push_back(Case{"embedding_nine_tokens", "embedding.f32", {ids({9}, 20), f32({20, 64})}, {f32({9, 64})}, {}, -1});
  cs.push_back(Case{"embedding_2d_ids", "embedding.f32", {ids({2, 5}, 30), f32({30, 16})}, {f32({2, 5, 16})}, {}, -1});
  cs.push_back(Case{"embedding_narrow_rows", "embedding.f32", {ids({2}, 7), f32({7, 5})}, {f32({2, 5})}, {}, -1});
  cs.push_back(Case{"embedding_strided",
                    "embedding.f32",
                    {ids({6}, 12).stepped(0, 2), f32({12, 20}).padded(1, 4)},
                    {f32({6, 20}).padded(1, 3)},
                    {},
                    -1});
  cs.push_back(Case{"embedding_scalar_id", "embedding.f32", {ids({}, 9), f32({9, 24})}, {f32({24})}, {}, -1});
  // copy: every element size, any strides on either side.
  cs.push_back(unary_case("copy_f32_transpose", "copy", f32({7, 9}).transposed({1, 0}), f32({7, 9})));
  cs.push_back(unary_case("copy_i8_permute", "copy", tensor(SK_DTYPE_I8, {3, 5, 7}).transposed({2, 0, 1}),
                          tensor(SK_DTYPE_I8, {3, 5, 7})));
  cs.push_back(unary_case("copy_bf16_slice", "copy", tensor(SK_DTYPE_BF16, {6, 10}).stepped(1, 2),
                          tensor(SK_DTYPE_BF16, {6, 10})));
  cs.push_back(unary_case("copy_f16_padded", "copy", tensor(SK_DTYPE_F16, {4, 9}).padded(1, 3),
                          tensor(SK_DTYPE_F16, {4, 9}).padded(0, 1)));
  cs.push_back(
      unary_case("copy_i64_reversed", "copy", tensor(SK_DTYPE_I64, {11}).reversed(0), tensor(SK_DTYPE_I64, {11})));
  cs.push_back(unary_case("copy_i32_to_transposed", "copy", tensor(SK_DTYPE_I32, {5, 13}),
                          tensor(SK_DTYPE_I32, {5, 13}).transposed({1, 0})));
  cs.push_back(unary_case("copy_f32_1000", "copy", f32({1000}), f32({1000})));
  cs.push_back(unary_case("copy_rank0", "copy", f32({}), f32({})));
  // prefetch: no outputs; a byte range of a dense tensor and of a strided view.
  auto prefetch_attrs = [](int64_t offset, int64_t bytes) {
    sk_prefetch_attrs a{offset, bytes};
    std::vector<unsigned char> b(sizeof a);
    std::memcpy(b.data(), &a, sizeof a);
    return b;
  };
  cs.push_back(Case{"prefetch_middle", "prefetch", {f32({64, 64}), f32({4})}, {}, prefetch_attrs(1000, 8000), -1});
  cs.push_back(Case{"prefetch_view", "prefetch", {f32({6, 10}).stepped(1, 2), f32({3})}, {}, prefetch_attrs(0, 4), -1});
  cs.push_back(in_place(unary_case("copy_in_place", "copy", f32({3, 17}), f32({3, 17})), 0));
  return cs;
}

}  // namespace sk::kernel_test
