// sk_bench_kernels cases of the MoE and sampling family, decode-shaped with LongCat-Flash's
// numbers: 512 routed + 256 zero-computation experts, top-12, hidden size 6144, 16 tokens; and a
// 128k vocabulary for argmax / sampling at batch 1 and 8.
//
// Bytes are what each kernel must move at least: dispatch reads x once and writes every row of
// x_sorted (rows past sum(counts) are zero-filled by contract); combine reads only the y rows
// the routing references. Sampling logits are uniform in [-12, 4], so the nucleus over the whole
// vocabulary holds ~19k tokens: a flatter (slower) distribution than a trained model's; the
// `_peaked` rows add 40 strong candidates in [8, 14] over that tail, which then hold ~97% of
// the mass, as a trained model's top tokens do. The grouped-matmul rows beside the matmul
// family's (kernels_matmul.cc) route all 32 rows to one expert, the worst skew.
#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include "kernel_bench.h"
#include "superkernel/attrs_moe.h"

namespace sk::bench {
namespace {

constexpr int64_t kTokens = 16;
constexpr int64_t kHidden = 6144;
constexpr int32_t kRouted = 512;
constexpr int32_t kZero = 256;
constexpr int32_t kTopK = 12;
constexpr int64_t kVocab = 131072;

// A router's output for kTokens tokens: distinct experts per token, about a third of them
// zero-computation experts.
std::vector<double> routed_ids() {
  std::mt19937 rng(2024);
  std::vector<int64_t> all(kRouted + kZero);
  std::vector<double> ids;
  for (int64_t t = 0; t < kTokens; ++t) {
    std::iota(all.begin(), all.end(), int64_t{0});
    std::shuffle(all.begin(), all.end(), rng);
    for (int32_t s = 0; s < kTopK; ++s) ids.push_back(static_cast<double>(all[static_cast<size_t>(s)]));
  }
  return ids;
}

// The row_map moe_dispatch produces for `ids`, and how many rows it references.
std::vector<double> row_map_of(const std::vector<double>& ids, int64_t* used) {
  std::vector<double> rm(ids.size(), -1.0);
  int64_t row = 0;
  for (int32_t e = 0; e < kRouted; ++e) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == e) rm[i] = static_cast<double>(row++);
    }
  }
  *used = row;
  return rm;
}

BenchInput Values(DType d, Shape s, std::vector<double> v) { return {d, std::move(s), 0, 0, false, std::move(v)}; }

// b rows of kVocab logits: uniform in [-12, 4], plus 40 tokens per row in [8, 14].
std::vector<double> peaked_logits(int64_t b) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> tail(-12.0, 4.0);
  std::uniform_real_distribution<double> top(8.0, 14.0);
  std::vector<double> l(static_cast<size_t>(b * kVocab));
  for (double& x : l) x = tail(rng);
  for (int64_t r = 0; r < b; ++r) {
    for (int j = 0; j < 40; ++j) l[static_cast<size_t>(r * kVocab + static_cast<int64_t>(rng() % kVocab))] = top(rng);
  }
  return l;
}

}  // namespace

SK_KERNEL_BENCH(moe_cases) {
  std::vector<KernelBenchCase> cases;
  const int64_t experts = kRouted + kZero;
  const int64_t rows = kTokens * kTopK;
  {
    const sk_moe_router_attrs a{kTopK, kRouted, SK_MOE_SCORING_SOFTMAX, 0, 6.0f};
    cases.push_back({"moe_router_t16_e512z256_k12",
                     "moe_router.f32",
                     {Act({kTokens, experts}, -2, 2), Weight(DType::kF32, {experts}, -1e-3, 1e-3)},
                     {TensorSpec(DType::kI32, {kTokens, kTopK}), TensorSpec(DType::kF32, {kTokens, kTopK})},
                     bench_attrs(a),
                     4.0 * (kTokens * experts + experts) + 8.0 * rows,
                     0,
                     {},
                     {}});
  }
  {
    // DeepSeek-V3's group-limited routing: 256 experts in 8 groups, 4 groups kept, top-8.
    const sk_moe_router_group_attrs a{{8, 256, SK_MOE_SCORING_SIGMOID, 1, 2.5f}, 8, 4};
    cases.push_back({"moe_router_t16_e256_k8_grouped",
                     "moe_router.f32",
                     {Act({kTokens, 256}, -4, 4), Weight(DType::kF32, {256}, -0.1, 0.1)},
                     {TensorSpec(DType::kI32, {kTokens, 8}), TensorSpec(DType::kF32, {kTokens, 8})},
                     bench_attrs(a),
                     4.0 * (kTokens * 256 + 256) + 8.0 * kTokens * 8,
                     0,
                     {},
                     {}});
  }
  {
    // grouped_matmul with every row on one expert (cf. grouped_*_e8_4096x1408_{even,skewed}).
    const int64_t e = 8, k = 4096, n = 1408, r = 32;
    const BenchInput counts{DType::kI32, {e}, 0, 0, false, {32, 0, 0, 0, 0, 0, 0, 0}};
    const double act = 4.0 * r * (k + n) + 4.0 * e;
    cases.push_back({"grouped_bf16_e8_4096x1408_one_hot",
                     "grouped_matmul.bf16",
                     {Act({r, k}), counts, Weight(DType::kBF16, {e, n, k})},
                     {TensorSpec(DType::kF32, {r, n})},
                     {},
                     2.0 * n * k + act,
                     2.0 * r * n * k,
                     {},
                     {}});
  }
  const std::vector<double> ids = routed_ids();
  {
    const sk_moe_dispatch_attrs a{kRouted, kZero};
    cases.push_back({"moe_dispatch_t16_d6144_k12",
                     "moe_dispatch.f32",
                     {Act({kTokens, kHidden}), Values(DType::kI32, {kTokens, kTopK}, ids)},
                     {TensorSpec(DType::kF32, {rows, kHidden}), TensorSpec(DType::kI32, {kRouted}),
                      TensorSpec(DType::kI32, {kTokens, kTopK})},
                     bench_attrs(a),
                     4.0 * (kTokens + rows) * kHidden + 4.0 * (2 * rows + kRouted),
                     0,
                     {},
                     {}});
  }
  {
    int64_t used = 0;
    std::vector<double> rm = row_map_of(ids, &used);
    const double bytes = 4.0 * (used + 2 * kTokens) * kHidden + 8.0 * rows;
    cases.push_back({"moe_combine_t16_d6144_k12",
                     "moe_combine.f32",
                     {Act({rows, kHidden}), Values(DType::kI32, {kTokens, kTopK}, std::move(rm)),
                      Act({kTokens, kTopK}, 0, 1), Act({kTokens, kHidden})},
                     {TensorSpec(DType::kF32, {kTokens, kHidden})},
                     {},
                     bytes,
                     2.0 * kTokens * kTopK * kHidden,
                     {},
                     {}});
  }
  for (int64_t b : {1, 8}) {
    const std::string tag = "_b" + std::to_string(b) + "_v131072";
    cases.push_back({"argmax" + tag,
                     "argmax.f32",
                     {Act({b, kVocab}, -12, 4)},
                     {TensorSpec(DType::kI32, {b})},
                     {},
                     4.0 * b * kVocab + 4.0 * b,
                     0,
                     {},
                     {}});
    struct Mode {
      const char* name;
      float temperature;
      int32_t top_k;
      float top_p;
    };
    for (Mode m : {Mode{"_k50_p0.9", 0.8f, 50, 0.9f}, Mode{"_full", 1.0f, 0, 1.0f}, Mode{"_p0.9", 1.0f, 0, 0.9f}}) {
      const sk_sample_attrs a{42, m.temperature, m.top_p, m.top_k, 0};
      cases.push_back({"sample" + tag + m.name,
                       "sample.f32",
                       {Act({b, kVocab}, -12, 4), Values(DType::kI64, {1}, {7})},
                       {TensorSpec(DType::kI32, {b})},
                       bench_attrs(a),
                       4.0 * b * kVocab + 4.0 * b + 8.0,
                       0,
                       {},
                       {}});
    }
    const sk_sample_attrs peaked{42, 1.0f, 0.9f, 0, 0};
    cases.push_back({"sample" + tag + "_p0.9_peaked",
                     "sample.f32",
                     {Values(DType::kF32, {b, kVocab}, peaked_logits(b)), Values(DType::kI64, {1}, {7})},
                     {TensorSpec(DType::kI32, {b})},
                     bench_attrs(peaked),
                     4.0 * b * kVocab + 4.0 * b + 8.0,
                     0,
                     {},
                     {}});
  }
  return cases;
}

}  // namespace sk::bench
