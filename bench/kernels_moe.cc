// sk_bench_kernels cases of the MoE and sampling family, decode-shaped with LongCat-Flash's
// numbers: 512 routed + 256 zero-computation experts, top-12, hidden size 6144, 16 tokens; and a
// 128k vocabulary for argmax / sampling at batch 1 and 8.
//
// Bytes are what each kernel must move at least: dispatch reads x once and writes every row of
// x_sorted (rows past sum(counts) are zero-filled by contract); combine reads only the y rows
// the routing references. Sampling logits are uniform in [-12, 4], so the nucleus over the whole
// vocabulary holds ~19k tokens: a flatter (slower) distribution than a trained model's.
#include <algorithm>
#include <numeric>
#include <random>

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
  }
  return cases;
}

}  // namespace sk::bench
