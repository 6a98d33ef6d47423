// Conformance cases of the MoE and sampling family: decode- and prefill-shaped routers,
// dispatch/combine around LongCat-Flash-like expert counts (routed plus zero-computation
// experts), argmax and top-k/top-p sampling over a large vocabulary.
#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "conformance.h"
#include "superkernel/attrs_moe.h"

namespace sk::conformance {
namespace {

std::vector<TensorSpec> out_of(std::vector<std::pair<DType, Shape>> specs) {
  std::vector<TensorSpec> out;
  for (auto& [d, s] : specs) out.emplace_back(d, std::move(s));
  return out;
}

// Distinct expert ids per token in [0, n), as a router produces them.
std::vector<double> routed_ids(int64_t t, int64_t k, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> out;
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < t; ++i) {
    std::iota(ids.begin(), ids.end(), int64_t{0});
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int64_t s = 0; s < k; ++s) out.push_back(static_cast<double>(ids[static_cast<size_t>(s)]));
  }
  return out;
}

std::vector<double> row_map(int64_t t, int64_t k, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> out;
  for (int64_t i = 0; i < t * k; ++i) {
    out.push_back(rng() % 3 == 0 ? -1.0 : static_cast<double>(rng() % static_cast<uint32_t>(rows)));
  }
  return out;
}

template <class A>
Case router(std::string name, int64_t t, int64_t n, const A& a, int32_t k, double lo, double hi) {
  return {std::move(name),
          "moe_router.f32",
          {F32({t, n}, lo, hi), W32({n}, -0.01, 0.01)},
          out_of({{DType::kI32, {t, k}}, {DType::kF32, {t, k}}}),
          attrs_of(a),
          {}};
}

Case router(std::string name, int64_t t, int64_t n, sk_moe_router_attrs a, double lo = -2, double hi = 2) {
  return router(std::move(name), t, n, a, a.top_k, lo, hi);
}

// DeepSeek-V3's group-limited routing.
Case grouped_router(std::string name, int64_t t, int64_t n, sk_moe_router_group_attrs a, double lo = -4,
                    double hi = 4) {
  return router(std::move(name), t, n, a, a.base.top_k, lo, hi);
}

Case dispatch(std::string name, int64_t t, int64_t d, int64_t k, int32_t e, int32_t z, std::vector<double> ids) {
  return {std::move(name),
          "moe_dispatch.f32",
          {F32({t, d}), Values(DType::kI32, {t, k}, std::move(ids))},
          out_of({{DType::kF32, {t * k, d}}, {DType::kI32, {e}}, {DType::kI32, {t, k}}}),
          attrs_of(sk_moe_dispatch_attrs{e, z}),
          {}};
}

Case combine(std::string name, int64_t t, int64_t d, int64_t k, int64_t rows, bool shared, std::vector<double> rm) {
  std::vector<Input> in = {F32({rows, d}), Values(DType::kI32, {t, k}, std::move(rm)), F32({t, k}, 0, 1), F32({t, d})};
  if (shared) in.push_back(F32({t, d}));
  return {std::move(name),
          shared ? "moe_combine_shared.f32" : "moe_combine.f32",
          std::move(in),
          out_of({{DType::kF32, {t, d}}}),
          {},
          {}};
}

Case sample(std::string name, int64_t b, int64_t v, sk_sample_attrs a, double lo, double hi, int64_t step = 3) {
  return {std::move(name),
          "sample.f32",
          {F32({b, v}, lo, hi), Values(DType::kI64, {1}, {static_cast<double>(step)})},
          out_of({{DType::kI32, {b}}}),
          attrs_of(a),
          {}};
}

sk_sample_attrs sampling(float temperature, int32_t top_k, float top_p) {
  return sk_sample_attrs{0x1234'5678'9abc'def0ull, temperature, top_p, top_k, 0};
}

}  // namespace

SK_CONFORMANCE_CASES(moe_cases) {
  std::vector<Case> cases;
  const double inf = std::numeric_limits<double>::infinity();
  // LongCat-Flash: 512 routed + 256 zero-computation experts, top-12, scores * 6 unnormalised.
  cases.push_back(router("router_longcat_t16", 16, 768, {12, 512, SK_MOE_SCORING_SOFTMAX, 0, 6.0f}));
  cases.push_back(router("router_deepseek_sigmoid_t5", 5, 64, {8, 64, SK_MOE_SCORING_SIGMOID, 1, 2.5f}, -4, 4));
  cases.push_back(router("router_one_token_k1", 1, 13, {1, 10, SK_MOE_SCORING_SOFTMAX, 1, 1.0f}));
  cases.push_back(grouped_router("router_deepseek_v3_grouped_t4", 4, 256,
                                 sk_moe_router_group_attrs{{8, 256, SK_MOE_SCORING_SIGMOID, 1, 2.5f}, 8, 4}));
  cases.push_back(grouped_router("router_grouped_zero_experts_t7", 7, 96,
                                 sk_moe_router_group_attrs{{6, 64, SK_MOE_SCORING_SOFTMAX, 0, 6.0f}, 12, 3}));
  cases.push_back({"router_ties",
                   "moe_router.f32",
                   {Values(DType::kF32, {3, 12}, {0.5}), Values(DType::kF32, {12}, {0.0, 0.0, 0.125})},
                   out_of({{DType::kI32, {3, 5}}, {DType::kF32, {3, 5}}}),
                   attrs_of(sk_moe_router_attrs{5, 8, SK_MOE_SCORING_SIGMOID, 1, 1.0f}),
                   {}});

  cases.push_back(dispatch("dispatch_decode_16x12", 16, 96, 12, 48, 24, routed_ids(16, 12, 72, 1)));
  cases.push_back(dispatch("dispatch_one_token", 1, 40, 3, 6, 2, {7, 1, 3}));
  cases.push_back(dispatch("dispatch_all_to_one_expert", 7, 33, 1, 4, 0, {2}));
  cases.push_back(dispatch("dispatch_every_slot_zero_expert", 3, 17, 2, 4, 4, {4, 7}));
  cases.push_back(dispatch("dispatch_prefill_40x4", 40, 24, 4, 8, 4, routed_ids(40, 4, 12, 2)));

  cases.push_back(combine("combine_decode_16x12", 16, 96, 12, 192, false, row_map(16, 12, 192, 1)));
  cases.push_back(combine("combine_one_token_d100", 1, 100, 4, 4, false, row_map(1, 4, 4, 2)));
  cases.push_back(combine("combine_every_slot_zero_expert", 2, 21, 3, 6, false, {-1}));
  cases.push_back(combine("combine_shared_5tok", 5, 37, 3, 15, true, row_map(5, 3, 15, 3)));
  cases.push_back(combine("combine_shared_one_token", 1, 64, 2, 2, true, row_map(1, 2, 2, 4)));

  cases.push_back({"argmax_b1_v131072", "argmax.f32", {F32({1, 131072}, -8, 8)}, out_of({{DType::kI32, {1}}}), {}, {}});
  cases.push_back({"argmax_b5_v1000", "argmax.f32", {F32({5, 1000})}, out_of({{DType::kI32, {5}}}), {}, {}});
  cases.push_back({"argmax_v13_ties",
                   "argmax.f32",
                   {Values(DType::kF32, {3, 13}, {1, 4, 4, -inf})},
                   out_of({{DType::kI32, {3}}}),
                   {},
                   {}});

  cases.push_back(sample("sample_b1_v131072_topk50_topp09", 1, 131072, sampling(0.8f, 50, 0.9f), -12, 4));
  cases.push_back(sample("sample_b3_v131072_full", 3, 131072, sampling(1.0f, 0, 1.0f), -12, 4));
  cases.push_back(sample("sample_b2_v50000_nucleus", 2, 50000, sampling(0.7f, 0, 0.9f), -12, 4));
  // One row on 2 and 3 cores: they share it (block maxima and the pass over V split by blocks,
  // core 0 finishing), with uneven block ranges and, at V = 1500, a core without blocks.
  cases.push_back(sample("sample_b1_v131072_nucleus", 1, 131072, sampling(1.0f, 0, 0.9f), -12, 4));
  cases.push_back(sample("sample_b1_v70001_full", 1, 70001, sampling(0.9f, 0, 1.0f), -12, 4));
  cases.push_back(sample("sample_b1_v1500_nucleus", 1, 1500, sampling(1.0f, 0, 0.5f), -3, 3));
  cases.push_back(sample("sample_b1_v4096_greedy", 1, 4096, sampling(0.0f, 0, 1.0f), -3, 3));
  cases.push_back(sample("sample_b5_v1000_both", 5, 1000, sampling(1.2f, 20, 0.7f), -3, 3));
  cases.push_back(sample("sample_b4_v257_greedy", 4, 257, sampling(0.0f, 0, 1.0f), -3, 3));
  cases.push_back(sample("sample_b4_v16_top_k_equals_v", 4, 16, sampling(1.0f, 16, 1.0f), -1, 1));
  return cases;
}

}  // namespace sk::conformance
