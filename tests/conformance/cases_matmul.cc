// Conformance cases of the matmul family: decode (GEMV) and small-M GEMM shapes with K and N off
// the vector widths, activation quantisation, and grouped (mixture-of-experts) matmuls whose
// tiling reads the routed counts at run time.
#include "conformance.h"

namespace sk::conformance {
namespace {

std::vector<TensorSpec> f32_out(Shape s) { return {TensorSpec(DType::kF32, std::move(s))}; }

std::string dims(int64_t m, int64_t n, int64_t k) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

}  // namespace

SK_CONFORMANCE_CASES(matmul_family_cases) {
  std::vector<Case> cases;
  struct Mm {
    int64_t m, n, k;
  };
  for (Mm mm :
       {Mm{1, 256, 256}, Mm{1, 1000, 77}, Mm{4, 96, 130}, Mm{16, 64, 512}, Mm{1, 1, 1}, Mm{3, 7, 1}, Mm{5, 40, 1000}}) {
    const std::string d = dims(mm.m, mm.n, mm.k);
    cases.push_back({"matmul_bf16_" + d,
                     "matmul.bf16",
                     {F32({mm.m, mm.k}), Of(DType::kBF16, {mm.n, mm.k}, -1, 1, true)},
                     f32_out({mm.m, mm.n}),
                     {},
                     {}});
    cases.push_back({"matmul_f16_" + d,
                     "matmul.f16",
                     {F32({mm.m, mm.k}), Of(DType::kF16, {mm.n, mm.k}, -1, 1, true)},
                     f32_out({mm.m, mm.n}),
                     {},
                     {}});
    cases.push_back({"matmul_w8a8_" + d,
                     "matmul.w8a8",
                     {Of(DType::kI8, {mm.m, mm.k}, -127, 127), F32({mm.m}, 0.001, 0.05),
                      Of(DType::kI8, {mm.n, mm.k}, -128, 127, true), W32({mm.n}, 0.001, 0.02)},
                     f32_out({mm.m, mm.n}),
                     {},
                     {}});
    cases.push_back(
        {"matmul_w8a8_dyn_" + d,
         "matmul.w8a8_dyn",
         {F32({mm.m, mm.k}, -4, 4), Of(DType::kI8, {mm.n, mm.k}, -128, 127, true), W32({mm.n}, 0.001, 0.02)},
         f32_out({mm.m, mm.n}),
         {},
         {}});
  }
  for (Shape s : {Shape{1, 4096}, Shape{5, 13}, Shape{16, 512}, Shape{1, 1}, Shape{3, 2, 70}}) {
    std::string name = "quantize_i8";
    for (int64_t v : s) name += "_" + std::to_string(v);
    Shape lead = s;
    lead.pop_back();
    cases.push_back(
        {name, "quantize.i8", {F32(s, -6, 6)}, {TensorSpec(DType::kI8, s), TensorSpec(DType::kF32, lead)}, {}, {}});
  }
  // 4-bit weights: symmetric with f32 scales, asymmetric with f16 scales and zero points.
  for (Mm mm : {Mm{1, 256, 256}, Mm{4, 96, 96}, Mm{16, 64, 512}, Mm{3, 7, 64}}) {
    const std::string d = dims(mm.m, mm.n, mm.k);
    const int64_t g = mm.k % 64 == 0 ? 64 : 32;
    const Input w4 = Of(DType::kI8, {mm.n, mm.k / 2}, -128, 127, true);
    for (const char* kernel : {"matmul.w4a8_dyn", "matmul.w4"}) {
      const std::string base = std::string(kernel) == "matmul.w4" ? "matmul_w4_" : "matmul_w4a8_dyn_";
      cases.push_back({base + d,
                       kernel,
                       {F32({mm.m, mm.k}, -4, 4), w4, W32({mm.k / g, mm.n}, 0.001, 0.05)},
                       f32_out({mm.m, mm.n}),
                       {},
                       {}});
      cases.push_back({base + "zeros_" + d,
                       kernel,
                       {F32({mm.m, mm.k}, -4, 4), w4, Of(DType::kF16, {mm.k / g, mm.n}, 0.001, 0.05, true),
                        Of(DType::kI8, {mm.k / g, mm.n}, 0, 15, true)},
                       f32_out({mm.m, mm.n}),
                       {},
                       {}});
    }
  }
  struct Group {
    const char* name;
    int64_t r, k, n;
    std::vector<double> counts;
  };
  for (const Group& g :
       {Group{"decode_8_experts", 32, 128, 96, {4, 4, 0, 8, 2, 6, 3, 5}}, Group{"one_expert", 6, 64, 40, {0, 6, 0}},
        Group{"idle_rows", 12, 33, 20, {3, 0, 5}}, Group{"nothing_routed", 4, 16, 17, {0, 0, 0, 0}}}) {
    const auto e = static_cast<int64_t>(g.counts.size());
    const Input counts = Values(DType::kI32, {e}, g.counts);
    cases.push_back({std::string("grouped_matmul_f32_") + g.name,
                     "grouped_matmul.f32",
                     {F32({g.r, g.k}), counts, W32({e, g.n, g.k})},
                     f32_out({g.r, g.n}),
                     {},
                     {}});
    cases.push_back({std::string("grouped_matmul_bf16_") + g.name,
                     "grouped_matmul.bf16",
                     {F32({g.r, g.k}), counts, Of(DType::kBF16, {e, g.n, g.k}, -1, 1, true)},
                     f32_out({g.r, g.n}),
                     {},
                     {}});
    cases.push_back({std::string("grouped_matmul_f16_") + g.name,
                     "grouped_matmul.f16",
                     {F32({g.r, g.k}), counts, Of(DType::kF16, {e, g.n, g.k}, -1, 1, true)},
                     f32_out({g.r, g.n}),
                     {},
                     {}});
    cases.push_back(
        {std::string("grouped_matmul_w8a8_dyn_") + g.name,
         "grouped_matmul.w8a8_dyn",
         {F32({g.r, g.k}, -3, 3), counts, Of(DType::kI8, {e, g.n, g.k}, -128, 127, true), W32({e, g.n}, 0.001, 0.02)},
         f32_out({g.r, g.n}),
         {},
         {}});
  }
  return cases;
}

}  // namespace sk::conformance
