// Conformance cases of the v0 kernels (element-wise, norms, softmax, matmul, embedding, copy):
// ordinary shapes plus edges (one row, one token, dims that are not a multiple of the vector
// width, broadcasts).
#include "conformance.h"
#include "superkernel/attrs_core.h"

namespace sk::conformance {
namespace {

std::vector<TensorSpec> f32_out(Shape s) { return {TensorSpec(DType::kF32, std::move(s))}; }

}  // namespace

SK_CONFORMANCE_CASES(v0_cases) {
  std::vector<Case> cases;
  for (const char* op : {"add", "mul"}) {
    const std::string k = std::string(op) + ".f32";
    cases.push_back({std::string(op) + "_4x256", k, {F32({4, 256}), F32({4, 256})}, f32_out({4, 256}), {}, {}});
    cases.push_back({std::string(op) + "_1x13", k, {F32({1, 13}), F32({1, 13})}, f32_out({1, 13}), {}, {}});
    cases.push_back({std::string(op) + "_broadcast_3x37", k, {F32({3, 37}), F32({37})}, f32_out({3, 37}), {}, {}});
    cases.push_back({std::string(op) + "_1", k, {F32({1}), F32({1})}, f32_out({1}), {}, {}});
  }
  cases.push_back(
      {"silu_mul_2x1000", "silu_mul.f32", {F32({2, 1000}, -6, 6), F32({2, 1000})}, f32_out({2, 1000}), {}, {}});
  cases.push_back({"silu_mul_1x7", "silu_mul.f32", {F32({1, 7}, -6, 6), F32({1, 7})}, f32_out({1, 7}), {}, {}});
  const sk_rms_norm_attrs eps{1e-6f};
  for (Shape s : {Shape{1, 4096}, Shape{5, 13}, Shape{3, 64}, Shape{1, 1}}) {
    cases.push_back({"rms_norm_" + std::to_string(s[0]) + "x" + std::to_string(s[1]),
                     "rms_norm.f32",
                     {F32(s), W32({s[1]}, 0.5, 1.5)},
                     f32_out(s),
                     attrs_of(eps),
                     {}});
    cases.push_back({"softmax_" + std::to_string(s[0]) + "x" + std::to_string(s[1]),
                     "softmax.f32",
                     {F32(s, -8, 8)},
                     f32_out(s),
                     {},
                     {}});
  }
  struct Mm {
    int64_t m, n, k;
  };
  for (Mm mm : {Mm{1, 256, 256}, Mm{1, 1000, 77}, Mm{4, 96, 130}, Mm{16, 64, 512}, Mm{1, 1, 1}, Mm{3, 7, 1}}) {
    cases.push_back({"matmul_" + std::to_string(mm.m) + "x" + std::to_string(mm.n) + "x" + std::to_string(mm.k),
                     "matmul.f32",
                     {F32({mm.m, mm.k}), W32({mm.n, mm.k})},
                     f32_out({mm.m, mm.n}),
                     {},
                     {}});
  }
  cases.push_back(
      {"embedding_1tok", "embedding.f32", {Values(DType::kI32, {1}, {7}), W32({50, 200})}, f32_out({1, 200}), {}, {}});
  cases.push_back(
      {"embedding_5tok", "embedding.f32", {Of(DType::kI32, {5}, 0, 49), W32({50, 33})}, f32_out({5, 33}), {}, {}});
  // prefetch has no outputs: the case checks it compiles and runs in every mode next to nothing.
  const sk_prefetch_attrs warm{256, 8192};
  cases.push_back({"prefetch_weight", "prefetch", {W32({64, 64}), F32({4})}, {}, attrs_of(warm), {}});
  cases.push_back({"copy_f32", "copy", {F32({3, 70})}, f32_out({3, 70}), {}, {}});
  cases.push_back({"copy_bf16", "copy", {Of(DType::kBF16, {9, 5}, -2, 2)}, {TensorSpec(DType::kBF16, {9, 5})}, {}, {}});
  cases.push_back({"copy_i8", "copy", {Of(DType::kI8, {129}, -128, 127)}, {TensorSpec(DType::kI8, {129})}, {}, {}});
  cases.push_back(
      {"copy_i64", "copy", {Of(DType::kI64, {2, 3}, -1000, 1000)}, {TensorSpec(DType::kI64, {2, 3})}, {}, {}});
  return cases;
}

}  // namespace sk::conformance
