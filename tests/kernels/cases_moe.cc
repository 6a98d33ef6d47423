// Direct-test cases of the MoE and sampling family (moe_router, moe_dispatch, moe_combine,
// moe_combine_shared, argmax, sample), plus what the case table cannot express: error paths,
// Philox known answers, and a statistical check of the sampler's distribution.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernel_cases.h"
#include "kernels/reference/reference.h"
#include "kernels/sampling_exp2.h"
#include "manual_args.h"
#include "superkernel/attrs_moe.h"
#include "util/half.h"

namespace sk::kernel_test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TensorDesc i32(std::vector<int64_t> shape, std::vector<double> values) {
  return tensor(SK_DTYPE_I32, std::move(shape)).with_values(std::move(values));
}
TensorDesc i32_out(std::vector<int64_t> shape) { return tensor(SK_DTYPE_I32, std::move(shape)); }
TensorDesc step_of(int64_t step) { return tensor(SK_DTYPE_I64, {1}).with_values({static_cast<double>(step)}); }

// Deterministic expert ids for T x k slots in [0, n), distinct within a token (as a router gives).
std::vector<double> routed_ids(int64_t t, int64_t k, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> out;
  for (int64_t i = 0; i < t; ++i) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), int64_t{0});
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int64_t s = 0; s < k; ++s) out.push_back(static_cast<double>(ids[static_cast<size_t>(s)]));
  }
  return out;
}

// A valid row_map for y with `rows` rows: about a third of the slots -1 (zero experts).
std::vector<double> row_map_values(int64_t t, int64_t k, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> out;
  for (int64_t i = 0; i < t * k; ++i) {
    out.push_back(rng() % 3 == 0 ? -1.0 : static_cast<double>(rng() % static_cast<uint32_t>(rows)));
  }
  return out;
}

sk_moe_router_attrs router_attrs(int32_t k, int32_t e, int32_t scoring, int32_t normalize, float scale) {
  return sk_moe_router_attrs{k, e, scoring, normalize, scale};
}

sk_moe_router_group_attrs grouped(sk_moe_router_attrs a, int32_t n_group, int32_t topk_group) {
  return sk_moe_router_group_attrs{a, n_group, topk_group};
}

template <class A>
Case router_case(std::string name, TensorDesc logits, TensorDesc bias, const A& a, int32_t k, TensorDesc ids_out,
                 TensorDesc w_out) {
  const int64_t t = logits.shape[0];
  if (ids_out.shape.empty()) ids_out = i32_out({t, k});
  if (w_out.shape.empty()) w_out = f32({t, k});
  return Case{std::move(name),
              "moe_router.f32",
              {std::move(logits), std::move(bias)},
              {std::move(ids_out), std::move(w_out)},
              attrs_bytes(a),
              -1};
}

Case router(std::string name, TensorDesc logits, TensorDesc bias, sk_moe_router_attrs a, TensorDesc ids_out = {},
            TensorDesc w_out = {}) {
  return router_case(std::move(name), std::move(logits), std::move(bias), a, a.top_k, std::move(ids_out),
                     std::move(w_out));
}

Case router(std::string name, TensorDesc logits, TensorDesc bias, sk_moe_router_group_attrs a) {
  return router_case(std::move(name), std::move(logits), std::move(bias), a, a.base.top_k, {}, {});
}

Case dispatch(std::string name, int64_t t, int64_t d, int64_t k, int32_t e, int32_t z, std::vector<double> ids,
              TensorDesc x = {}, TensorDesc sorted = {}) {
  if (x.shape.empty()) x = f32({t, d});
  if (sorted.shape.empty()) sorted = f32({t * k, d});
  return Case{std::move(name),
              "moe_dispatch.f32",
              {std::move(x), i32({t, k}, std::move(ids))},
              {std::move(sorted), i32_out({e}), i32_out({t, k})},
              attrs_bytes(sk_moe_dispatch_attrs{e, z}),
              -1};
}

Case combine(std::string name, int64_t t, int64_t d, int64_t k, int64_t rows, bool shared, uint32_t seed,
             std::vector<double> row_map = {}) {
  if (row_map.empty()) row_map = row_map_values(t, k, rows, seed);
  std::vector<TensorDesc> in = {f32({rows, d}), i32({t, k}, std::move(row_map)), f32({t, k}).range(0, 1), f32({t, d})};
  if (shared) in.push_back(f32({t, d}));
  return Case{
      std::move(name), shared ? "moe_combine_shared.f32" : "moe_combine.f32", std::move(in), {f32({t, d})}, {}, -1};
}

Case argmax(std::string name, TensorDesc logits) {
  const int64_t b = logits.shape[0];
  return Case{std::move(name), "argmax.f32", {std::move(logits)}, {i32_out({b})}, {}, -1};
}

Case sample(std::string name, TensorDesc logits, sk_sample_attrs a, int64_t step = 7) {
  const int64_t b = logits.shape[0];
  return Case{std::move(name), "sample.f32", {std::move(logits), step_of(step)}, {i32_out({b})}, attrs_bytes(a), -1};
}

sk_sample_attrs sampling(float temperature, int32_t top_k, float top_p, uint64_t seed = 0x5EED'0000'0000'0042ull) {
  return sk_sample_attrs{seed, temperature, top_p, top_k, 0};
}

}  // namespace

SK_KERNEL_CASES(moe_cases) {
  std::vector<Case> cs;
  constexpr int32_t kSoftmax = SK_MOE_SCORING_SOFTMAX;
  constexpr int32_t kSigmoid = SK_MOE_SCORING_SIGMOID;

  // ---- moe_router ----
  cs.push_back(router("router_softmax_5x24_k4", f32({5, 24}).range(-3, 3), f32({24}).range(-0.05, 0.05),
                      router_attrs(4, 16, kSoftmax, 1, 2.5f)));
  cs.push_back(router("router_sigmoid_7x70_k6", f32({7, 70}).range(-4, 4), f32({70}).range(-0.2, 0.2),
                      router_attrs(6, 70, kSigmoid, 0, 1.0f)));
  cs.push_back(router("router_sigmoid_normalized", f32({3, 33}).range(-4, 4), f32({33}).range(-0.2, 0.2),
                      router_attrs(8, 30, kSigmoid, 1, 1.5f)));
  cs.push_back(router("router_one_token_k1", f32({1, 9}), f32({9}), router_attrs(1, 9, kSoftmax, 0, 1.0f)));
  cs.push_back(router("router_k_equals_experts", f32({3, 12}), f32({12}).with_values({0.0}),
                      router_attrs(12, 8, kSoftmax, 1, 1.0f)));
  cs.push_back(router("router_longcat_4x768_k12", f32({4, 768}).range(-2, 2), f32({768}).range(-1e-3, 1e-3),
                      router_attrs(12, 512, kSoftmax, 0, 6.0f)));
  // Equal logits and biases: the lower expert id wins every tie.
  cs.push_back(router("router_ties_lower_id_wins", f32({2, 10}).with_values({0.5}), f32({10}).with_values({0.0}),
                      router_attrs(4, 6, kSoftmax, 1, 1.0f)));
  // Equal scores, biases in two levels: experts with the larger bias first, each level by id.
  cs.push_back(router("router_ties_broken_by_bias", f32({3, 11}).with_values({0.25}),
                      f32({11}).with_values({0.0, 0.125}), router_attrs(7, 11, kSigmoid, 0, 1.0f)));
  cs.push_back(router("router_masked_logits", f32({4, 40}).masked_logits(-3, 3), f32({40}).range(-0.01, 0.01),
                      router_attrs(5, 32, kSoftmax, 1, 1.0f)));
  // NaN scores rank below every number (sigmoid keeps them to their own expert).
  cs.push_back(router("router_sigmoid_nan_ranks_last",
                      f32({2, 9}).with_values({kNaN, 1.0, kNaN, -2.0, 0.5, kNaN, 3.0, kInf, -kInf}),
                      f32({9}).with_values({0.0}), router_attrs(9, 9, kSigmoid, 0, 1.0f)));
  cs.push_back(router("router_strided_views", f32({6, 40}).padded(1, 5).range(-2, 2), f32({40}).stepped(0, 2),
                      router_attrs(3, 20, kSoftmax, 1, 1.0f), i32_out({6, 3}).padded(1, 2), f32({6, 3}).padded(1, 1)));
  cs.push_back(router("router_reversed_rows_and_bias", f32({5, 19}).reversed(0), f32({19}).reversed(0),
                      router_attrs(2, 19, kSigmoid, 1, 1.0f)));
  cs.push_back(router("router_no_tokens", f32({0, 16}), f32({16}), router_attrs(2, 8, kSoftmax, 1, 1.0f)));
  // Group-limited selection (DeepSeek-V3: 256 experts, 8 groups, 4 of them, top-8, sigmoid).
  cs.push_back(router("router_grouped_deepseek_6x256_k8", f32({6, 256}).range(-4, 4), f32({256}).range(-0.1, 0.1),
                      grouped(router_attrs(8, 256, kSigmoid, 1, 2.5f), 8, 4)));
  cs.push_back(router("router_grouped_one_group_chosen", f32({5, 64}).range(-3, 3), f32({64}).range(-0.1, 0.1),
                      grouped(router_attrs(8, 64, kSigmoid, 1, 1.0f), 8, 1)));
  cs.push_back(router("router_grouped_softmax_zero_experts", f32({4, 96}).range(-2, 2), f32({96}).range(-0.01, 0.01),
                      grouped(router_attrs(6, 64, kSoftmax, 0, 6.0f), 12, 5)));
  cs.push_back(router("router_grouped_groups_of_one", f32({3, 12}).range(-2, 2), f32({12}).range(-0.1, 0.1),
                      grouped(router_attrs(3, 12, kSigmoid, 1, 1.0f), 12, 5)));
  cs.push_back(router("router_grouped_every_group", f32({3, 40}).range(-2, 2), f32({40}).range(-0.1, 0.1),
                      grouped(router_attrs(5, 40, kSigmoid, 1, 1.0f), 4, 4)));
  // top_k = all the experts of the chosen groups.
  cs.push_back(router("router_grouped_k_fills_groups", f32({3, 32}).range(-2, 2), f32({32}).range(-0.1, 0.1),
                      grouped(router_attrs(12, 32, kSigmoid, 1, 1.0f), 8, 3)));
  // Equal keys everywhere: the lower group ids win, then the lower expert ids.
  cs.push_back(router("router_grouped_ties_lower_group_wins", f32({2, 24}).with_values({0.5}),
                      f32({24}).with_values({0.0}), grouped(router_attrs(4, 24, kSigmoid, 1, 1.0f), 6, 2)));
  cs.push_back(router("router_grouped_nan_groups_rank_last",
                      f32({2, 16}).with_values({kNaN, 1.0, 0.5, -2.0, kNaN, kNaN, 3.0, kInf, -kInf}),
                      f32({16}).with_values({0.0}), grouped(router_attrs(4, 16, kSigmoid, 0, 1.0f), 8, 3)));

  // ---- moe_dispatch ----
  cs.push_back(dispatch("dispatch_5tok_d37_k3", 5, 37, 3, 6, 2, routed_ids(5, 3, 8, 1)));
  cs.push_back(dispatch("dispatch_one_token_k1", 1, 8, 1, 4, 0, {2}));
  cs.push_back(dispatch("dispatch_all_to_one_expert", 6, 19, 1, 5, 1, {3}));
  cs.push_back(dispatch("dispatch_duplicate_slots", 4, 16, 2, 5, 1, {3, 3, 5, 3}));
  cs.push_back(dispatch("dispatch_mostly_empty_experts", 3, 24, 2, 16, 4, {15, 2, 2, 19, 15, 0}));
  cs.push_back(dispatch("dispatch_every_slot_zero_expert", 4, 21, 3, 4, 3, {4, 5, 6}));
  cs.push_back(dispatch("dispatch_no_real_experts", 2, 9, 2, 0, 2, {0, 1}));
  cs.push_back(dispatch("dispatch_d1", 7, 1, 2, 3, 1, routed_ids(7, 2, 4, 2)));
  cs.push_back(dispatch("dispatch_decode_16x12", 16, 67, 12, 48, 24, routed_ids(16, 12, 72, 3)));
  cs.push_back(dispatch("dispatch_strided", 5, 30, 2, 4, 2, routed_ids(5, 2, 6, 4), f32({5, 30}).padded(1, 3),
                        f32({10, 30}).padded(1, 7)));
  cs.push_back(dispatch("dispatch_no_tokens", 0, 8, 2, 3, 0, {0}));
  {
    // Ids read through a transposed view.
    Case c = dispatch("dispatch_transposed_ids", 6, 12, 3, 5, 2, routed_ids(6, 3, 7, 5));
    c.inputs[1].transposed({1, 0});
    cs.push_back(std::move(c));
  }

  // ---- moe_combine / moe_combine_shared ----
  cs.push_back(combine("combine_5tok_d37_k3", 5, 37, 3, 15, false, 1));
  cs.push_back(combine("combine_one_token_d100", 1, 100, 4, 4, false, 2));
  cs.push_back(combine("combine_two_tokens_d70", 2, 70, 3, 6, false, 3));
  cs.push_back(combine("combine_every_slot_zero_expert", 3, 19, 2, 6, false, 0, {-1}));
  cs.push_back(combine("combine_d1", 6, 1, 2, 12, false, 4));
  cs.push_back(combine("combine_y_has_extra_rows", 4, 24, 2, 20, false, 5));
  cs.push_back(combine("combine_decode_16x12_d64", 16, 64, 12, 192, false, 6));
  cs.push_back(combine("combine_shared_5tok_d33", 5, 33, 3, 15, true, 7));
  cs.push_back(combine("combine_shared_one_token", 1, 50, 2, 2, true, 8));
  cs.push_back(combine("combine_no_tokens", 0, 8, 2, 4, false, 9, {0}));
  {
    Case c = combine("combine_strided", 4, 29, 2, 8, true, 10);
    c.inputs[0].padded(1, 3);
    c.inputs[2].transposed({1, 0});
    c.inputs[3].padded(1, 5);
    c.inputs[4].reversed(0);
    c.outputs[0].padded(1, 2).reversed(0);
    cs.push_back(std::move(c));
  }

  // ---- argmax ----
  cs.push_back(argmax("argmax_3x1000", f32({3, 1000})));
  cs.push_back(argmax("argmax_v1", f32({4, 1})));
  cs.push_back(argmax("argmax_v13", f32({5, 13})));
  cs.push_back(argmax("argmax_v131072", f32({2, 131072}).range(-10, 10)));
  cs.push_back(argmax("argmax_all_equal_first_wins", f32({2, 37}).with_values({1.5})));
  cs.push_back(argmax("argmax_repeated_max_first_wins", f32({1, 40}).with_values({0, 3, 1, 3})));
  cs.push_back(argmax("argmax_signed_zeros_equal", f32({1, 20}).with_values({-0.0, 0.0, -1.0})));
  // NaN ranks below -inf; +inf is an ordinary largest value.
  cs.push_back(argmax("argmax_nan_and_inf", f32({1, 21}).with_values({kNaN, -kInf, 1, kInf, kInf, kNaN, 2})));
  cs.push_back(argmax("argmax_all_nan", f32({2, 17}).with_values({kNaN})));
  cs.push_back(argmax("argmax_nan_then_neg_inf", f32({1, 18}).with_values({kNaN, -kInf})));
  cs.push_back(argmax("argmax_all_neg_inf", f32({1, 9}).with_values({-kInf})));
  cs.push_back(argmax("argmax_masked", f32({6, 333}).masked_logits(-5, 5)));
  cs.push_back(argmax("argmax_strided_rows", f32({5, 70}).padded(1, 9).reversed(0)));

  // ---- sample ----
  cs.push_back(sample("sample_topk50_topp09", f32({3, 1000}).range(-4, 4), sampling(0.8f, 50, 0.9f)));
  cs.push_back(sample("sample_full_vocab", f32({4, 1037}).range(-3, 3), sampling(1.0f, 0, 1.0f)));
  cs.push_back(sample("sample_nucleus_over_all", f32({3, 777}).range(-6, 6), sampling(0.7f, 0, 0.9f)));
  cs.push_back(sample("sample_top_p_tiny_is_argmax", f32({3, 500}), sampling(1.0f, 0, 1e-6f)));
  cs.push_back(sample("sample_top_p_tiny_with_top_k", f32({3, 500}), sampling(1.0f, 20, 1e-6f)));
  cs.push_back(sample("sample_top_k_equals_v", f32({2, 64}).range(-2, 2), sampling(1.3f, 64, 1.0f)));
  cs.push_back(sample("sample_top_k_above_v", f32({2, 64}).range(-2, 2), sampling(1.3f, 1000, 0.95f)));
  cs.push_back(sample("sample_top_k1", f32({3, 300}), sampling(1.0f, 1, 1.0f)));
  cs.push_back(sample("sample_temperature_zero", f32({3, 300}), sampling(0.0f, 10, 0.5f)));
  cs.push_back(sample("sample_cold", f32({4, 256}).range(-1, 1), sampling(0.05f, 0, 1.0f)));
  cs.push_back(sample("sample_hot", f32({4, 256}).range(-1, 1), sampling(5.0f, 0, 0.97f)));
  cs.push_back(sample("sample_flat_ties", f32({5, 100}).with_values({0.25}), sampling(1.0f, 0, 1.0f)));
  cs.push_back(sample("sample_flat_ties_top_k", f32({5, 100}).with_values({0.25}), sampling(1.0f, 7, 0.6f)));
  cs.push_back(sample("sample_masked_logits", f32({4, 203}).masked_logits(-4, 4), sampling(0.9f, 0, 0.8f)));
  cs.push_back(sample("sample_masked_logits_top_k", f32({4, 203}).masked_logits(-4, 4), sampling(0.9f, 40, 1.0f)));
  cs.push_back(sample("sample_nan_never_sampled", f32({3, 10}).with_values({kNaN, 0.5, kNaN, 0.25, 1.0}),
                      sampling(2.0f, 0, 1.0f)));
  cs.push_back(
      sample("sample_pos_inf_share_the_mass", f32({4, 12}).with_values({1, kInf, 2, kInf}), sampling(1.0f, 0, 1.0f)));
  cs.push_back(sample("sample_pos_inf_top_k", f32({4, 12}).with_values({1, kInf, 2, kInf}), sampling(1.0f, 3, 0.9f)));
  cs.push_back(sample("sample_all_neg_inf", f32({2, 30}).with_values({-kInf}), sampling(1.0f, 0, 0.9f)));
  cs.push_back(sample("sample_all_nan_top_k", f32({2, 30}).with_values({kNaN}), sampling(1.0f, 4, 1.0f)));
  cs.push_back(sample("sample_v1", f32({1, 1}), sampling(1.0f, 0, 1.0f)));
  cs.push_back(sample("sample_v13_both_filters", f32({6, 13}).range(-2, 2), sampling(0.6f, 5, 0.5f)));
  cs.push_back(sample("sample_big_step", f32({2, 100}), sampling(1.0f, 0, 1.0f), int64_t{1} << 40));
  cs.push_back(sample("sample_negative_step", f32({2, 100}), sampling(1.0f, 0, 1.0f), -3));
  cs.push_back(sample("sample_strided_rows", f32({5, 90}).padded(1, 6).reversed(0), sampling(1.0f, 0, 0.9f)));
  cs.push_back(sample("sample_v131072_topk50", f32({2, 131072}).range(-12, 4), sampling(0.8f, 50, 0.95f)));
  cs.push_back(sample("sample_v131072_full", f32({2, 131072}).range(-12, 4), sampling(1.0f, 0, 1.0f)));
  cs.push_back(sample("sample_v131072_nucleus", f32({1, 131072}).range(-12, 4), sampling(1.0f, 0, 0.9f)));
  // The nucleus over a whole large vocabulary (the AVX-512 bounded-total path) where the nucleus
  // ends inside a run of exact ties (a pattern of 6 levels repeated over V), with masked logits,
  // and with top_p near 0 and near 1 (almost every token gathered).
  cs.push_back(sample("sample_v131072_nucleus_ties",
                      f32({2, 131072}).with_values({1.5, -2.0, 0.25, 3.0, -7.5, 0.25, 1.5, -2.0, 2.75, 0.25, 3.0}),
                      sampling(0.9f, 0, 0.9f)));
  cs.push_back(
      sample("sample_v131072_nucleus_masked", f32({1, 131072}).masked_logits(-12, 4), sampling(0.7f, 0, 0.9f)));
  cs.push_back(sample("sample_v131072_nucleus_p001", f32({1, 131072}).range(-12, 4), sampling(1.0f, 0, 0.001f)));
  cs.push_back(sample("sample_v131072_nucleus_p0999", f32({1, 131072}).range(-12, 4), sampling(1.3f, 0, 0.999f)));
  {
    // Two strong candidates per 3000 logits over a flat tail, with V = 5000 (a partial last block
    // of 1024): the AVX-512 path's gather skips the blocks without one, and the NaNs and -inf of
    // the pattern never enter a block's maximum.
    std::vector<double> pattern(3000);
    for (size_t j = 0; j < pattern.size(); ++j) pattern[j] = -4.0 + 4.0 * static_cast<double>((j * 37) % 2999) / 2999.0;
    pattern[0] = 9.0;
    pattern[100] = 8.5;
    pattern[1500] = kNaN;
    pattern[2500] = -kInf;
    cs.push_back(sample("sample_nucleus_peaked_blocks", f32({3, 5000}).with_values(pattern), sampling(1.0f, 0, 0.9f)));
  }
  return cs;
}

// ---------------------------------------------------------------------------------------------
// Tests beyond the case table

namespace {

// Every core of 1-, 2- and 3-core calls fails with a message naming the kernel and containing
// every `details` string. The access callback refuses too, unless the error is in input data
// (ids), which access callbacks do not read.
void expect_invalid(const char* kernel, ManualArgs& ops, std::vector<std::string> details, bool bad_data = false) {
  SCOPED_TRACE(kernel);
  const sk_kernel_desc* k = builtin_kernel(kernel);
  ASSERT_NE(k, nullptr);
  const sk_kernel_args& args = ops.args();
  for (int n : {1, 2, 3}) {
    for (int core = 0; core < n; ++core) {
      char msg[512] = {};
      sk_core_ctx ctx{};
      ctx.core_id = core;
      ctx.num_cores = n;
      ctx.error_message = msg;
      ctx.error_capacity = sizeof msg;
      EXPECT_EQ(k->run(&args, &ctx), SK_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::strstr(msg, kernel), nullptr) << msg;
      for (const std::string& d : details) EXPECT_NE(std::strstr(msg, d.c_str()), nullptr) << msg << " / " << d;
    }
  }
  sk_access_range r[8];
  if (!bad_data) {
    EXPECT_LT(k->access(&args, 0, 1, r, 8), 0);
  }
  sk_core_ctx quiet{};
  quiet.num_cores = 1;
  EXPECT_EQ(k->run(&args, &quiet), SK_ERR_INVALID_ARGUMENT);
}

bool all_bytes(const void* p, size_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  return std::all_of(b, b + n, [&](unsigned char c) { return c == v; });
}

}  // namespace

// The sampler's weights rest on the f32 polynomial for 2^f; its documented maximum error (2.21e-7,
// found over every float of [-0.5, 0.5]) is checked here on every 251st float of the interval,
// both signs, and at its ends.
TEST(SampleApproxExp2, PolynomialIsWithinItsDocumentedErrorOnTheReducedRange) {
  double worst = 0.0;
  float worst_at = 0.0f;
  const auto check = [&](float f) {
    const double want = std::exp2(static_cast<double>(f));
    const double err = std::fabs(static_cast<double>(kernels::approx_exp2_poly(f)) - want) / want;
    if (err > worst) {
      worst = err;
      worst_at = f;
    }
  };
  for (uint32_t bits = 0; bits <= 0x3F000000u; bits += 251) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    check(f);
    check(-f);
  }
  check(0.5f);
  check(-0.5f);
  EXPECT_LE(worst, kernels::kApproxExp2MaxRelError) << "at f = " << worst_at;
  EXPECT_LE(kernels::kApproxExp2MaxRelError, 3e-7);  // what SamplingSpec.WeightIsAccurate allows
  // The sample reaches close to the maximum: it is a real measurement, not a loose bound.
  EXPECT_GT(worst, 1.5e-7) << "worst " << worst;
}

TEST(MoeErrors, DispatchNamesTheTokenAndSlotOfABadIdAndWritesNothing) {
  for (int32_t bad : {9, -1}) {
    ManualArgs ops(0xCD);
    ops.in_ptr<float>(SK_DTYPE_F32, {3, 8});
    int32_t* ids = ops.in_ptr<int32_t>(SK_DTYPE_I32, {3, 4});
    float* sorted = ops.out_ptr<float>(SK_DTYPE_F32, {12, 8});
    int32_t* counts = ops.out_ptr<int32_t>(SK_DTYPE_I32, {5});
    int32_t* row_map = ops.out_ptr<int32_t>(SK_DTYPE_I32, {3, 4});
    for (int i = 0; i < 12; ++i) ids[i] = i % 9;
    ids[1 * 4 + 2] = bad;
    ops.attrs(sk_moe_dispatch_attrs{5, 4});
    // With the scratch it needs, so that only the id check stands between the call and writes.
    ops.workspace_for(builtin_kernel("moe_dispatch.f32"), 3);
    expect_invalid("moe_dispatch.f32", ops,
                   {"topk_ids[1, 2]", "token 1, slot 2", "= " + std::to_string(bad), "5 real + 4 zero"}, true);
    EXPECT_TRUE(all_bytes(sorted, 12 * 8 * 4, 0xCD));
    EXPECT_TRUE(all_bytes(counts, 5 * 4, 0xCD));
    EXPECT_TRUE(all_bytes(row_map, 12 * 4, 0xCD));
  }
}

TEST(MoeErrors, DispatchShapesAndAttributes) {
  const auto base = [](ManualArgs& ops, int64_t sorted_rows, int64_t counts, int64_t d_sorted) {
    ops.in_ptr<float>(SK_DTYPE_F32, {3, 8});
    std::memset(ops.in_ptr<int32_t>(SK_DTYPE_I32, {3, 2}), 0, 24);
    ops.out_ptr<float>(SK_DTYPE_F32, {sorted_rows, d_sorted});
    ops.out_ptr<int32_t>(SK_DTYPE_I32, {counts});
    ops.out_ptr<int32_t>(SK_DTYPE_I32, {3, 2});
  };
  {
    ManualArgs ops(0xCD);
    base(ops, 5, 4, 8);
    ops.attrs(sk_moe_dispatch_attrs{4, 0});
    expect_invalid("moe_dispatch.f32", ops, {"x_sorted shape [5, 8]", "[6, 8]"});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, 6, 3, 8);
    ops.attrs(sk_moe_dispatch_attrs{4, 0});
    expect_invalid("moe_dispatch.f32", ops, {"counts shape [3]"});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, 6, 4, 8);
    expect_invalid("moe_dispatch.f32", ops, {"sk_moe_dispatch_attrs"});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, 6, 4, 8);
    ops.attrs(sk_moe_dispatch_attrs{4, -1});
    expect_invalid("moe_dispatch.f32", ops, {"negative"});
  }
}

TEST(MoeErrors, CombineRejectsRowsOutsideY) {
  for (int32_t bad : {6, -2}) {
    ManualArgs ops(0xCD);
    ops.in_ptr<float>(SK_DTYPE_F32, {6, 8});
    int32_t* rm = ops.in_ptr<int32_t>(SK_DTYPE_I32, {2, 3});
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 3});
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 8});
    float* out = ops.out_ptr<float>(SK_DTYPE_F32, {2, 8});
    for (int i = 0; i < 6; ++i) rm[i] = i - 1;
    rm[4] = bad;
    expect_invalid("moe_combine.f32", ops, {"row_map[1, 1]", "token 1, slot 1", std::to_string(bad), "[-1, 6)"}, true);
    EXPECT_TRUE(all_bytes(out, 2 * 8 * 4, 0xCD));
  }
  {
    ManualArgs ops(0xCD);
    ops.in_ptr<float>(SK_DTYPE_F32, {6, 7});
    std::memset(ops.in_ptr<int32_t>(SK_DTYPE_I32, {2, 3}), 0, 24);
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 3});
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 8});
    ops.out_ptr<float>(SK_DTYPE_F32, {2, 8});
    expect_invalid("moe_combine.f32", ops, {"y shape [6, 7]"});
  }
  {
    ManualArgs ops(0xCD);
    ops.in_ptr<float>(SK_DTYPE_F32, {6, 8});
    std::memset(ops.in_ptr<int32_t>(SK_DTYPE_I32, {2, 3}), 0, 24);
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 3});
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 8});
    ops.in_ptr<float>(SK_DTYPE_F32, {3, 8});
    ops.out_ptr<float>(SK_DTYPE_F32, {2, 8});
    expect_invalid("moe_combine_shared.f32", ops, {"shared shape [3, 8]"});
  }
}

TEST(MoeErrors, RouterAttributesAndShapes) {
  const auto base = [](ManualArgs& ops, int64_t n, int64_t bias_n, int64_t k) {
    ops.in_ptr<float>(SK_DTYPE_F32, {2, n});
    ops.in_ptr<float>(SK_DTYPE_F32, {bias_n});
    ops.out_ptr<int32_t>(SK_DTYPE_I32, {2, k});
    ops.out_ptr<float>(SK_DTYPE_F32, {2, k});
  };
  {
    ManualArgs ops(0xCD);
    base(ops, 8, 8, 9);
    ops.attrs(router_attrs(9, 8, SK_MOE_SCORING_SOFTMAX, 1, 1.0f));
    expect_invalid("moe_router.f32", ops, {"top_k = 9", "[1, 8]"});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, 8, 8, 2);
    ops.attrs(router_attrs(2, 8, 2, 1, 1.0f));
    expect_invalid("moe_router.f32", ops, {"scoring = 2"});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, 8, 8, 2);
    ops.attrs(router_attrs(2, 9, SK_MOE_SCORING_SOFTMAX, 1, 1.0f));
    expect_invalid("moe_router.f32", ops, {"num_real_experts = 9"});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, 8, 8, 2);
    ops.attrs(router_attrs(2, 8, SK_MOE_SCORING_SOFTMAX, 1, std::numeric_limits<float>::infinity()));
    expect_invalid("moe_router.f32", ops, {"routed_scaling_factor"});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, 8, 7, 2);
    ops.attrs(router_attrs(2, 8, SK_MOE_SCORING_SOFTMAX, 1, 1.0f));
    expect_invalid("moe_router.f32", ops, {"bias shape [7]"});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, 8, 8, 3);
    ops.attrs(router_attrs(2, 8, SK_MOE_SCORING_SOFTMAX, 1, 1.0f));
    expect_invalid("moe_router.f32", ops, {"topk_ids shape [2, 3]"});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, 8, 8, 2);
    expect_invalid("moe_router.f32", ops, {"sk_moe_router_attrs", "sk_moe_router_group_attrs"});
  }
  const std::pair<sk_moe_router_group_attrs, std::vector<std::string>> bad_groups[] = {
      {grouped(router_attrs(2, 8, SK_MOE_SCORING_SIGMOID, 1, 1.0f), 3, 1), {"n_group = 3", "8 experts"}},
      {grouped(router_attrs(2, 8, SK_MOE_SCORING_SIGMOID, 1, 1.0f), 0, 1), {"n_group = 0"}},
      {grouped(router_attrs(2, 8, SK_MOE_SCORING_SIGMOID, 1, 1.0f), 4, 5), {"topk_group = 5", "[1, 4]"}},
      {grouped(router_attrs(2, 8, SK_MOE_SCORING_SIGMOID, 1, 1.0f), 4, 0), {"topk_group = 0"}},
      {grouped(router_attrs(2, 8, SK_MOE_SCORING_SIGMOID, 1, 1.0f), 8, 1), {"top_k = 2", "1 experts"}},
  };
  for (const auto& [a, details] : bad_groups) {
    ManualArgs ops(0xCD);
    base(ops, 8, 8, 2);
    ops.attrs(a);
    expect_invalid("moe_router.f32", ops, details);
  }
}

namespace {

// Runs moe_router.f32 on one core over `logits` [t, n] (bias 0) with attributes `a`.
template <class A>
std::pair<std::vector<int32_t>, std::vector<float>> route(const std::vector<float>& logits, int64_t t, int64_t n,
                                                          int64_t k, const A& a) {
  const sk_kernel_desc* kd = builtin_kernel("moe_router.f32");
  ManualArgs ops(0xCD);
  std::copy(logits.begin(), logits.end(), ops.in_ptr<float>(SK_DTYPE_F32, {t, n}));
  float* bias = ops.in_ptr<float>(SK_DTYPE_F32, {n});
  std::fill(bias, bias + n, 0.0f);
  int32_t* ids = ops.out_ptr<int32_t>(SK_DTYPE_I32, {t, k});
  float* w = ops.out_ptr<float>(SK_DTYPE_F32, {t, k});
  ops.attrs(a);
  ops.workspace_for(kd, 1);
  sk_core_ctx ctx{};
  ctx.num_cores = 1;
  EXPECT_EQ(kd->run(&ops.args(), &ctx), SK_OK);
  return {std::vector<int32_t>(ids, ids + t * k), std::vector<float>(w, w + t * k)};
}

}  // namespace

// A hand-worked case where the group limit changes the choice: 4 groups of 2, 2 groups kept.
// Expert 0 has the best score, but its group {3, -3} sums to sigmoid(3) + sigmoid(-3) = 1, below
// groups 1 (2 sigmoid(1) = 1.46) and 2 (2 sigmoid(0.9) = 1.42); so the top-2 is {2, 3} (equal
// keys, lower id first), where plain top-2 gives {0, 2}.
TEST(MoeRouterGroups, TheGroupLimitKeepsOnlyTheBestGroups) {
  const std::vector<float> logits = {3.0f, -3.0f, 1.0f, 1.0f, 0.9f, 0.9f, -1.0f, -1.0f};
  const sk_moe_router_attrs plain = router_attrs(2, 8, SK_MOE_SCORING_SIGMOID, 0, 1.0f);
  EXPECT_EQ(route(logits, 1, 8, 2, plain).first, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(route(logits, 1, 8, 2, grouped(plain, 4, 2)).first, (std::vector<int32_t>{2, 3}));
  // The weights are still the chosen experts' scores.
  const float s1 = 1.0f / (1.0f + std::exp(-1.0f));
  const std::vector<float> w = route(logits, 1, 8, 2, grouped(plain, 4, 2)).second;
  EXPECT_NEAR(w[0], s1, 1e-6);
  EXPECT_NEAR(w[1], s1, 1e-6);
}

// Keeping every group (or one group of all experts) is plain top-k, bit for bit; every expert
// chosen under a limit belongs to one of the topk_group best groups, on many random tokens.
TEST(MoeRouterGroups, LimitsAreConsistentWithPlainTopK) {
  constexpr int64_t t = 64;
  constexpr int64_t n = 64;
  constexpr int64_t k = 6;
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> logits(t * n);
  for (float& v : logits) v = dist(rng);
  const sk_moe_router_attrs plain = router_attrs(k, n, SK_MOE_SCORING_SIGMOID, 1, 2.5f);
  const auto base = route(logits, t, n, k, plain);
  EXPECT_EQ(route(logits, t, n, k, grouped(plain, 8, 8)), base);
  EXPECT_EQ(route(logits, t, n, k, grouped(plain, 1, 1)), base);
  const auto limited = route(logits, t, n, k, grouped(plain, 8, 3));
  int differs = 0;
  for (int64_t tok = 0; tok < t; ++tok) {
    const float* row = logits.data() + tok * n;
    // Group scores (sigmoid is monotone, so the two largest logits give the two largest keys).
    std::vector<std::pair<float, int64_t>> groups;
    for (int64_t g = 0; g < 8; ++g) {
      std::vector<float> m(row + g * 8, row + g * 8 + 8);
      std::sort(m.begin(), m.end(), std::greater<>());
      const auto sig = [](float v) { return 1.0f / (1.0f + std::exp(-v)); };
      groups.push_back({sig(m[0]) + sig(m[1]), g});
    }
    std::sort(groups.begin(), groups.end(), [](auto a, auto b) { return a.first > b.first; });
    if (groups[2].first - groups[3].first < 1e-4f) continue;  // a near-tie the vector exp may order either way
    std::set<int64_t> kept = {groups[0].second, groups[1].second, groups[2].second};
    for (int64_t s = 0; s < k; ++s) {
      EXPECT_EQ(kept.count(limited.first[tok * k + s] / 8), 1u) << "token " << tok << " slot " << s;
    }
    differs +=
        std::equal(limited.first.begin() + tok * k, limited.first.begin() + (tok + 1) * k, base.first.begin() + tok * k)
            ? 0
            : 1;
  }
  EXPECT_GT(differs, 0) << "the limit never changed a choice: the test data do not exercise it";
}

TEST(MoeErrors, SamplingAttributesAndShapes) {
  const auto base = [](ManualArgs& ops, int32_t step_dtype) {
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 50});
    std::memset(ops.in_ptr<unsigned char>(step_dtype, {1}), 0, static_cast<size_t>(sk_dtype_size(step_dtype)));
    ops.out_ptr<int32_t>(SK_DTYPE_I32, {2});
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::pair<sk_sample_attrs, const char*> bad[] = {
      {sampling(nan, 0, 1.0f), "temperature"},
      {sampling(-1.0f, 0, 1.0f), "temperature"},
      {sampling(1.0f, 0, 0.0f), "top_p = 0"},
      {sampling(1.0f, 0, 1.5f), "top_p = 1.5"},
      {sampling(1.0f, 0, nan), "top_p"},
      {sampling(1.0f, -2, 1.0f), "top_k = -2"},
      {sk_sample_attrs{1, 1.0f, 1.0f, 0, 3}, "reserved"},
  };
  for (const auto& [a, detail] : bad) {
    ManualArgs ops(0xCD);
    base(ops, SK_DTYPE_I64);
    ops.attrs(a);
    expect_invalid("sample.f32", ops, {detail});
  }
  {
    ManualArgs ops(0xCD);
    base(ops, SK_DTYPE_I32);
    ops.attrs(sampling(1.0f, 0, 1.0f));
    expect_invalid("sample.f32", ops, {"step", "dtype"});
  }
  {
    ManualArgs ops(0xCD);
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 0});
    ops.out_ptr<int32_t>(SK_DTYPE_I32, {2});
    expect_invalid("argmax.f32", ops, {"V = 0"});
  }
  {
    ManualArgs ops(0xCD);
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 10});
    ops.out_ptr<int32_t>(SK_DTYPE_I32, {3});
    expect_invalid("argmax.f32", ops, {"ids shape [3]"});
  }
  {
    ManualArgs ops(0xCD);
    ops.in_ptr<float>(SK_DTYPE_F32, {2, 10});
    ops.out_ptr<int32_t>(SK_DTYPE_I32, {2});
    ops.input(0).stride[1] = 2;
    ops.input(0).stride[0] = 20;
    expect_invalid("argmax.f32", ops, {"stride 1"});
  }
}

// Random123's known answers (kat_vectors) for the generator sample.f32 is specified with.
TEST(SamplingSpec, PhiloxKnownAnswers) {
  struct Kat {
    uint32_t ctr[4];
    uint32_t key[2];
    uint32_t want[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    uint32_t c[4] = {k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]};
    sk::ref::philox4x32_10(c, k.key);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(c[i], k.want[i]) << "word " << i;
  }
}

// The specified weight is round(2^30 e^((l - lmax) / T)) up to f32 roundings: within 4e-7 plus
// 2.5e-7 |t| relative (t = (l - lmax) log2(e) / T: its own roundings grow with it) and the
// final rounding to an integer; 2^30 at lmax, 0 for NaN, -inf and weights below 2^-31.
TEST(SamplingSpec, WeightIsAccurate) {
  for (const float temperature : {0.3f, 1.0f, 2.5f}) {
    const float a = static_cast<float>(1.4426950408889634 / static_cast<double>(temperature));
    for (const float lmax : {0.0f, 7.25f, -3.5f}) {
      for (double d = 0.0; d <= 25.0 * temperature; d += 0.00731 * temperature) {
        const auto l = static_cast<float>(lmax - d);
        const double x = (static_cast<double>(l) - lmax) / temperature;
        const double want = std::ldexp(std::exp(x), 30);
        const double t = std::fabs(x) * 1.4426950408889634;
        ASSERT_NEAR(sk::ref::sample_weight(l, lmax, a), want, want * (4e-7 + 2.5e-7 * t) + 0.5) << l << " " << lmax;
      }
      EXPECT_EQ(sk::ref::sample_weight(lmax, lmax, a), 1u << 30);
      EXPECT_EQ(sk::ref::sample_weight(lmax - 23.0f * temperature, lmax, a), 0u);
      EXPECT_EQ(sk::ref::sample_weight(-std::numeric_limits<float>::infinity(), lmax, a), 0u);
      EXPECT_EQ(sk::ref::sample_weight(std::numeric_limits<float>::quiet_NaN(), lmax, a), 0u);
    }
  }
}

namespace {

// The built-in package's ISA override: force(level) selects a level (returning the best the CPU
// has), force(-1) restores the detected one.
using ForceIsa = int32_t (*)(int32_t);
ForceIsa builtin_force_isa() {
  return reinterpret_cast<ForceIsa>(
      dlsym(dlopen(SK_BUILTIN_PACKAGE_PATH, RTLD_NOW | RTLD_LOCAL), "sk_kernels_builtin_force_isa"));
}

// Samples one logits row `draws` times (rows of one call, over several steps) and returns the
// count per token.
std::vector<int64_t> draw(const std::vector<float>& row, sk_sample_attrs a, int64_t batch, int64_t steps) {
  const sk_kernel_desc* k = builtin_kernel("sample.f32");
  const auto v = static_cast<int64_t>(row.size());
  std::vector<int64_t> counts(row.size(), 0);
  ManualArgs ops(0xCD);
  float* logits = ops.in_ptr<float>(SK_DTYPE_F32, {batch, v});
  auto* step = ops.in_ptr<int64_t>(SK_DTYPE_I64, {1});
  int32_t* ids = ops.out_ptr<int32_t>(SK_DTYPE_I32, {batch});
  for (int64_t b = 0; b < batch; ++b) std::copy(row.begin(), row.end(), logits + b * v);
  ops.attrs(a);
  ops.workspace_for(k, 1);
  for (int64_t s = 0; s < steps; ++s) {
    *step = s;
    char msg[256] = {};
    sk_core_ctx ctx{};
    ctx.num_cores = 1;
    ctx.error_message = msg;
    ctx.error_capacity = sizeof msg;
    const int32_t rc = k->run(&ops.args(), &ctx);
    EXPECT_EQ(rc, SK_OK) << msg;
    if (rc != SK_OK) break;
    for (int64_t b = 0; b < batch; ++b) ++counts[static_cast<size_t>(ids[b])];
  }
  return counts;
}

// softmax(l / T) restricted to top_k (0: all), then to the shortest prefix holding top_p of the
// remaining mass, renormalised: what vLLM-style top-k/top-p sampling draws from.
std::vector<double> filtered_softmax(const std::vector<float>& l, double t, int top_k, double top_p) {
  std::vector<int> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  const size_t k = top_k > 0 ? std::min<size_t>(static_cast<size_t>(top_k), l.size()) : l.size();
  std::vector<double> p(l.size(), 0.0);
  double sum = 0.0;
  for (size_t j = 0; j < k; ++j) sum += std::exp((l[order[j]] - l[order[0]]) / t);
  double cum = 0.0;
  for (size_t j = 0; j < k; ++j) {
    const double pj = std::exp((l[order[j]] - l[order[0]]) / t) / sum;
    p[order[j]] = pj;
    cum += pj;
    if (cum >= top_p) break;
  }
  const double kept = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& v : p) v /= kept;
  return p;
}

void expect_distribution(const std::vector<float>& row, sk_sample_attrs a) {
  constexpr int64_t kBatch = 2000;
  constexpr int64_t kSteps = 50;
  const double n = static_cast<double>(kBatch * kSteps);
  const std::vector<int64_t> counts = draw(row, a, kBatch, kSteps);
  const std::vector<double> p = filtered_softmax(row, a.temperature, a.top_k, a.top_p);
  for (size_t i = 0; i < row.size(); ++i) {
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " is outside top-k/top-p but was sampled";
      continue;
    }
    // Five standard deviations of a binomial count (a false alarm about once in 3.5 million).
    const double sd = std::sqrt(n * p[i] * (1.0 - p[i]));
    EXPECT_NEAR(static_cast<double>(counts[i]), n * p[i], 5.0 * sd + 1.0) << "token " << i << " (p = " << p[i] << ")";
  }
}

std::vector<float> statistical_row(int64_t v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> row(static_cast<size_t>(v));
  for (float& x : row) x = u(rng);
  return row;
}

}  // namespace

// Over many (step, row) counters the sampler's frequencies match the filtered softmax, and
// filtered-out tokens never appear; every path (dense walk, nucleus over all, top-k) and ISA.
TEST(SamplingStatistics, FrequenciesMatchTheFilteredSoftmax) {
  const ForceIsa force = builtin_force_isa();
  ASSERT_NE(force, nullptr);
  const int best = force(2);
  for (int level = 0; level <= best; ++level) {
    force(level);
    SCOPED_TRACE("isa level " + std::to_string(level));
    const std::vector<float> row = statistical_row(40, 11);
    {
      SCOPED_TRACE("dense");
      expect_distribution(row, sampling(1.0f, 0, 1.0f, 1));
    }
    {
      SCOPED_TRACE("nucleus over all");
      expect_distribution(row, sampling(0.7f, 0, 0.8f, 2));
    }
    {
      SCOPED_TRACE("top-k");
      expect_distribution(row, sampling(1.5f, 10, 1.0f, 3));
    }
    {
      SCOPED_TRACE("top-k and top-p");
      expect_distribution(row, sampling(0.9f, 12, 0.6f, 4));
    }
  }
  force(-1);
}

namespace {

// Logit rows of many shapes for the identity test: flat, Gaussian, peaked (a few strong
// candidates over a flat tail, as trained models give), quantised (many exact ties), with -inf
// (masked) and NaN entries.
std::vector<float> identity_row(int64_t v, int kind, std::mt19937& rng) {
  std::uniform_real_distribution<float> flat(-12.0f, 4.0f);
  std::normal_distribution<float> gauss(0.0f, 3.0f);
  std::vector<float> row(static_cast<size_t>(v));
  for (float& x : row) x = kind == 1 ? gauss(rng) : flat(rng);
  switch (kind) {
    case 2:
      for (int j = 0; j < 40; ++j) row[rng() % v] = 8.0f + 6.0f * static_cast<float>(rng() % 1000) / 1000.0f;
      break;
    case 3:
      for (float& x : row) x = std::round(x * 4.0f) / 4.0f;
      break;
    case 4:
      for (int64_t i = 0; i < v; i += 3) row[i] = -std::numeric_limits<float>::infinity();
      row[rng() % v] = std::numeric_limits<float>::quiet_NaN();
      break;
    default:
      break;
  }
  return row;
}

// sample.f32 on `rows` (each of length v) at the current ISA level, one core.
// A barrier for a kernel run on threads by hand (ctx->runtime), which a core that returns gives
// up: its partners' sync_cores then return SK_ERR_ABORTED instead of waiting forever.
struct TestBarrier {
  explicit TestBarrier(int n) : cores(n) {}
  int cores;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  int64_t generation = 0;
  bool aborted = false;
  int32_t arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu);
    if (aborted) return SK_ERR_ABORTED;
    const int64_t gen = generation;
    if (++arrived == cores) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return SK_OK;
    }
    cv.wait(lock, [&] { return generation != gen || aborted; });
    return generation != gen ? SK_OK : SK_ERR_ABORTED;
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mu);
    aborted = true;
    cv.notify_all();
  }
};

int32_t barrier_sync_cores(const sk_core_ctx* ctx) {
  return static_cast<TestBarrier*>(ctx->runtime)->arrive_and_wait();
}

// The sample kernel's ids for `rows`, from the reference or from the kernel on `cores` threads
// that sync with barrier_sync_cores (more cores than rows: they share each row).
std::vector<int32_t> sample_rows(const std::vector<float>& rows, int64_t b, int64_t v, sk_sample_attrs a,
                                 bool reference, int cores = 1) {
  const sk_kernel_desc* k = builtin_kernel("sample.f32");
  ManualArgs ops(0xCD);
  std::copy(rows.begin(), rows.end(), ops.in_ptr<float>(SK_DTYPE_F32, {b, v}));
  *ops.in_ptr<int64_t>(SK_DTYPE_I64, {1}) = 11;
  int32_t* ids = ops.out_ptr<int32_t>(SK_DTYPE_I32, {b});
  ops.attrs(a);
  ops.workspace_for(k, cores);
  if (reference) {
    EXPECT_EQ(sk::ref::sample_f32(&ops.args()), SK_OK);
  } else {
    TestBarrier barrier(cores);
    const sk_kernel_args& args = ops.args();  // built once: args() rebuilds it
    std::vector<int32_t> rc(static_cast<size_t>(cores), -1);
    std::vector<std::string> msg(static_cast<size_t>(cores));
    std::vector<std::thread> threads;
    for (int c = 0; c < cores; ++c) {
      threads.emplace_back([&, c] {
        char buf[256] = {};
        sk_core_ctx ctx{};
        ctx.core_id = c;
        ctx.num_cores = cores;
        ctx.runtime = &barrier;
        ctx.sync_cores = cores > 1 ? barrier_sync_cores : nullptr;
        ctx.error_message = buf;
        ctx.error_capacity = sizeof buf;
        rc[static_cast<size_t>(c)] = k->run(&args, &ctx);
        msg[static_cast<size_t>(c)] = buf;
        // A core that returns never syncs again: a partner still syncing is a bug of the kernel
        // (its calls differ between cores) or follows another core's error.
        barrier.leave();
      });
    }
    for (std::thread& t : threads) t.join();
    for (int c = 0; c < cores; ++c) {
      EXPECT_EQ(rc[static_cast<size_t>(c)], SK_OK)
          << "core " << c << " of " << cores << ": " << msg[static_cast<size_t>(c)];
    }
  }
  return std::vector<int32_t>(ids, ids + b);
}

}  // namespace

// The nucleus over the whole vocabulary guesses a band from a sampled profile and falls back to
// wider passes when the exact sums show the guess missed; every ISA level must still give the
// reference's token bit for bit, on many rows, distributions, temperatures and top_p from nearly
// 0 to nearly 1, with and without top-k.
TEST(SamplingIdentity, EveryPathGivesTheReferenceTokenOnManyRows) {
  const ForceIsa force = builtin_force_isa();
  ASSERT_NE(force, nullptr);
  const int best = force(2);
  std::mt19937 rng(2026);
  struct Shape {
    int64_t b;
    int64_t v;
  };
  for (const Shape sh : {Shape{40, 4099}, Shape{6, 131072}}) {
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<float> rows;
      for (int64_t r = 0; r < sh.b; ++r) {
        const std::vector<float> row = identity_row(sh.v, kind, rng);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      for (const float top_p : {1e-6f, 0.3f, 0.9f, 0.99f, 0.999999f}) {
        for (const float temperature : {0.4f, 1.0f, 2.5f}) {
          for (const int32_t top_k : {0, 40}) {
            if (sh.v > 4099 && (top_k != 0 || temperature != 1.0f)) continue;  // keeps the reference's sorts few
            const sk_sample_attrs a = sampling(temperature, top_k, top_p, 77 + static_cast<uint64_t>(kind));
            SCOPED_TRACE("V " + std::to_string(sh.v) + " kind " + std::to_string(kind) + " top_p " +
                         std::to_string(top_p) + " T " + std::to_string(temperature) + " top_k " +
                         std::to_string(top_k));
            const std::vector<int32_t> want = sample_rows(rows, sh.b, sh.v, a, true);
            for (int level = 0; level <= best; ++level) {
              force(level);
              EXPECT_EQ(sample_rows(rows, sh.b, sh.v, a, false), want) << "isa level " << level;
            }
            force(-1);
          }
        }
      }
    }
  }
}

// Sizes around the vector widths, the profile's stride and the block size, vocabularies smaller
// than one profile run, temperatures from nearly greedy to nearly uniform (a subnormal one, whose
// log2(e) / T is +inf in float, and the largest float), logits spread over
// thousands of nats, rows of one value with one outlier: every ISA level gives the reference's
// token.
TEST(SamplingIdentity, OddSizesExtremeTemperaturesAndSpreads) {
  const ForceIsa force = builtin_force_isa();
  ASSERT_NE(force, nullptr);
  const int best = force(2);
  std::mt19937 rng(77);
  constexpr int64_t kRows = 6;
  for (const int64_t v : {1, 2, 15, 17, 511, 513, 1025, 3001}) {
    for (int kind = 0; kind < 7; ++kind) {
      std::vector<float> rows;
      for (int64_t r = 0; r < kRows; ++r) {
        std::vector<float> row = identity_row(v, kind % 5, rng);
        if (kind == 5) {
          std::fill(row.begin(), row.end(), 0.5f);
          row[rng() % v] = 0.5f + static_cast<float>(r);
        } else if (kind == 6) {
          for (float& x : row) x *= 300.0f;
        }
        rows.insert(rows.end(), row.begin(), row.end());
      }
      for (const float top_p : {1e-6f, 0.5f, 0.9f, 1.0f}) {
        for (const float temperature : {1e-39f, 1e-3f, 0.4f, 1.0f, 50.0f, 1e4f, 3e38f}) {
          for (const int32_t top_k : {0, 3}) {
            const sk_sample_attrs a = sampling(temperature, top_k, top_p, 5 + static_cast<uint64_t>(kind));
            SCOPED_TRACE("V " + std::to_string(v) + " kind " + std::to_string(kind) + " top_p " +
                         std::to_string(top_p) + " T " + std::to_string(temperature) + " top_k " +
                         std::to_string(top_k));
            const std::vector<int32_t> want = sample_rows(rows, kRows, v, a, true);
            for (int level = 0; level <= best; ++level) {
              force(level);
              EXPECT_EQ(sample_rows(rows, kRows, v, a, false), want) << "isa level " << level;
            }
            force(-1);
          }
        }
      }
    }
  }
}

// Fewer rows than cores: the cores share each row (block maxima, profile and the pass over V
// split by blocks, core 0 combining the exact block sums and finishing). The token must be the
// reference's at every ISA level, for block ranges of every shape (V below one block per core,
// uneven splits, a last partial block) and every path (greedy, top-k, dense, nucleus, only the
// largest logits weighing).
TEST(SamplingIdentity, RowsSharedByCoresGiveTheReferenceToken) {
  const ForceIsa force = builtin_force_isa();
  ASSERT_NE(force, nullptr);
  const int best = force(2);
  std::mt19937 rng(31);
  for (const int64_t v : {1, 700, 1025, 2048, 3001, 9999, 131072}) {
    for (int kind = 0; kind < 6; ++kind) {
      const int64_t b = kind == 5 ? 2 : 1;  // two rows on three cores
      std::vector<float> rows;
      for (int64_t r = 0; r < b; ++r) {
        std::vector<float> row = identity_row(v, kind % 5, rng);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      for (const float top_p : {0.3f, 0.9f, 1.0f}) {
        for (const float temperature : {0.0f, 1e-39f, 0.7f, 1.0f, 1e4f}) {
          for (const int32_t top_k : {0, 5}) {
            if (v == 131072 && (top_k != 0 || temperature == 1e4f)) continue;  // keeps the reference's sorts few
            const sk_sample_attrs a = sampling(temperature, top_k, top_p, 21 + static_cast<uint64_t>(kind));
            SCOPED_TRACE("V " + std::to_string(v) + " kind " + std::to_string(kind) + " top_p " +
                         std::to_string(top_p) + " T " + std::to_string(temperature) + " top_k " +
                         std::to_string(top_k));
            const std::vector<int32_t> want = sample_rows(rows, b, v, a, true);
            for (int level = 0; level <= best; ++level) {
              force(level);
              for (int cores = b + 1; cores <= 3; ++cores) {
                EXPECT_EQ(sample_rows(rows, b, v, a, false, cores), want)
                    << "isa level " << level << ", " << cores << " cores";
              }
            }
            force(-1);
          }
        }
      }
    }
  }
}

// A band of hundreds of thousands of tokens near the largest weight (a very high temperature puts
// every token of a 300000-logit row in it): the exact sums of the boundary search must not
// overflow their 32-bit lanes.
TEST(SamplingIdentity, HugeBandsSumExactly) {
  const ForceIsa force = builtin_force_isa();
  ASSERT_NE(force, nullptr);
  const int best = force(2);
  constexpr int64_t kV = 300000;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> near(0.0f, 1.0f);
  std::vector<float> row(kV);
  for (float& x : row) x = near(rng);
  for (const float top_p : {0.3f, 0.5f, 0.97f}) {
    const sk_sample_attrs a = sampling(1e4f, 0, top_p, 11);
    SCOPED_TRACE("top_p " + std::to_string(top_p));
    const std::vector<int32_t> want = sample_rows(row, 1, kV, a, true);
    for (int level = 0; level <= best; ++level) {
      force(level);
      EXPECT_EQ(sample_rows(row, 1, kV, a, false), want) << "isa level " << level;
    }
    force(-1);
  }
}

// The same (seed, step, row) gives the same token whatever else is in the batch, and the
// counter really is keyed by each of the three.
TEST(SamplingStatistics, TokensDependOnlyOnSeedStepAndRow) {
  const std::vector<float> row = statistical_row(64, 5);
  const auto one = [&](uint64_t seed, int64_t step, int64_t batch) {
    const sk_kernel_desc* k = builtin_kernel("sample.f32");
    ManualArgs ops(0xCD);
    float* logits = ops.in_ptr<float>(SK_DTYPE_F32, {batch, 64});
    *ops.in_ptr<int64_t>(SK_DTYPE_I64, {1}) = step;
    int32_t* ids = ops.out_ptr<int32_t>(SK_DTYPE_I32, {batch});
    for (int64_t b = 0; b < batch; ++b) std::copy(row.begin(), row.end(), logits + b * 64);
    ops.attrs(sampling(2.0f, 0, 1.0f, seed));
    ops.workspace_for(k, 1);
    sk_core_ctx ctx{};
    ctx.num_cores = 1;
    EXPECT_EQ(k->run(&ops.args(), &ctx), SK_OK);
    return std::vector<int32_t>(ids, ids + batch);
  };
  const std::vector<int32_t> base = one(1, 3, 16);
  EXPECT_EQ(one(1, 3, 4), std::vector<int32_t>(base.begin(), base.begin() + 4));
  EXPECT_NE(one(2, 3, 16), base);
  EXPECT_NE(one(1, 4, 16), base);
  EXPECT_NE(std::set<int32_t>(base.begin(), base.end()).size(), 1u) << "rows drew the same token";
}

// Scratch comes from the runtime's per-core workspace, sized from shapes alone (no operand has
// an address when the runtime asks); a missing or short workspace is reported, never overrun.
TEST(MoeErrors, RouterSizesItsScratchFromShapesAndRefusesAShortWorkspace) {
  const sk_kernel_desc* k = builtin_kernel("moe_router.f32");
  ASSERT_NE(k, nullptr);
  ASSERT_NE(k->flags & SK_WORKSPACE_PER_CORE, 0u);
  ManualArgs ops(0xCD);
  ops.in_ptr<float>(SK_DTYPE_F32, {2, 8});
  ops.in_ptr<float>(SK_DTYPE_F32, {8});
  ops.out_ptr<int32_t>(SK_DTYPE_I32, {2, 2});
  ops.out_ptr<float>(SK_DTYPE_F32, {2, 2});
  ops.attrs(router_attrs(2, 8, SK_MOE_SCORING_SOFTMAX, 1, 1.0f));
  sk_kernel_args args = ops.args();
  std::vector<sk_tensor_arg> placeless(args.inputs, args.inputs + args.num_inputs);
  std::vector<sk_tensor_arg> placeless_out(args.outputs, args.outputs + args.num_outputs);
  for (sk_tensor_arg& t : placeless) t.data = nullptr;
  for (sk_tensor_arg& t : placeless_out) t.data = nullptr;
  sk_kernel_args sizing = args;
  sizing.inputs = placeless.data();
  sizing.outputs = placeless_out.data();
  const uint64_t need = k->workspace_size(&sizing);
  EXPECT_GT(need, 0u);
  EXPECT_EQ(need, k->workspace_size(&args));

  alignas(64) static unsigned char slice[4096];
  ASSERT_LE(need, sizeof slice);
  for (uint64_t given : {uint64_t{0}, need - 1}) {
    args.workspace = given == 0 ? nullptr : slice;
    args.workspace_size = given;
    char msg[256] = {};
    sk_core_ctx ctx{};
    ctx.num_cores = 1;
    ctx.error_message = msg;
    ctx.error_capacity = sizeof msg;
    EXPECT_EQ(k->run(&args, &ctx), SK_ERR_INTERNAL);
    EXPECT_NE(std::strstr(msg, "per-core workspace of"), nullptr) << msg;
    EXPECT_NE(std::strstr(msg, std::to_string(need).c_str()), nullptr) << msg;
  }
  args.workspace = slice;
  args.workspace_size = need;
  sk_core_ctx ctx{};
  ctx.num_cores = 1;
  EXPECT_EQ(k->run(&args, &ctx), SK_OK);
}

// A call that needs no scratch gets none (the runtime plans no zero-byte workspace) and must work
// without it: no tokens and no real experts.
TEST(MoeErrors, DispatchWithNothingToRouteNeedsNoWorkspace) {
  const sk_kernel_desc* k = builtin_kernel("moe_dispatch.f32");
  ASSERT_NE(k, nullptr);
  ManualArgs ops;
  ops.in(SK_DTYPE_F32, {0, 8}).in(SK_DTYPE_I32, {0, 2});
  ops.out(SK_DTYPE_F32, {0, 8}).out(SK_DTYPE_I32, {0}).out(SK_DTYPE_I32, {0, 2});
  ops.attrs(sk_moe_dispatch_attrs{0, 2});
  EXPECT_EQ(k->workspace_size(&ops.args()), 0u);
  for (int core = 0; core < 2; ++core) {
    char msg[256] = {};
    sk_core_ctx ctx{};
    ctx.core_id = core;
    ctx.num_cores = 2;
    ctx.error_message = msg;
    ctx.error_capacity = sizeof msg;
    EXPECT_EQ(k->run(&ops.args(), &ctx), SK_OK) << msg;
  }
}

// The sampler reserves scratch only for the path its attributes select: none for the argmax
// (temperature 0), k entries for top-k, and the V-long buffers only for top-p over everything.
TEST(MoeErrors, SamplerWorkspaceFollowsItsPath) {
  const sk_kernel_desc* k = builtin_kernel("sample.f32");
  ASSERT_NE(k, nullptr);
  const auto size = [&](sk_sample_attrs a) {
    ManualArgs ops;
    ops.in(SK_DTYPE_F32, {2, 4096}).in(SK_DTYPE_I64, {1}).out(SK_DTYPE_I32, {2});
    ops.attrs(a);
    return k->workspace_size(&ops.args());
  };
  const uint64_t argmax = size(sampling(0.0f, 0, 1.0f));
  const uint64_t top_k = size(sampling(1.0f, 50, 0.9f));
  const uint64_t dense = size(sampling(1.0f, 0, 1.0f));
  const uint64_t nucleus = size(sampling(1.0f, 0, 0.9f));
  EXPECT_EQ(argmax, 0u);
  EXPECT_LE(top_k, 50u * 40 + 4 * 64);
  // Dense: block sums and one block's weights, nothing V long. The nucleus: the band's index,
  // logit, weight and bucket (4 bytes each) and the sort's 16-byte entries, V long each.
  EXPECT_LE(dense, 4096u * 4 / 2);
  EXPECT_GE(nucleus, 4096u * 32);
}

// Combine clears or seeds out and accumulates into it while reading its inputs, so an out that
// overlaps an input anywhere (not only at the same address) is refused, naming the input.
TEST(MoeErrors, CombineRefusesAnOutputOverlappingAnInput) {
  ManualArgs ops;
  ops.in(SK_DTYPE_F32, {4, 8}).in(SK_DTYPE_I32, {2, 2}).in(SK_DTYPE_F32, {2, 2}).in(SK_DTYPE_F32, {2, 8});
  ops.out(SK_DTYPE_F32, {2, 8});
  ops.output(0).data = ops.in_data<float>(0) + 8;  // rows 1-2 of y: overlapping, not the same address
  expect_invalid("moe_combine.f32", ops, {"out overlaps y"});
}

// Skewed routing: experts with more rows than one 16-row GEMM block, on N split over 1-3 cores
// at every ISA level, give each row the plain matmul of its expert, bit for bit, whatever the
// core count.
TEST(GroupedMatmulSkew, BusyExpertsGiveThePlainMatmulBitsOnEveryCoreCount) {
  const ForceIsa force = builtin_force_isa();
  ASSERT_NE(force, nullptr);
  const int best = force(2);
  struct Variant {
    const char* grouped;
    const char* plain;
    int32_t w_dtype;
  };
  constexpr int64_t r = 48, k = 2048, n = 300;
  const std::vector<int32_t> counts = {21, 0, 3, 17};
  const auto e = static_cast<int64_t>(counts.size());
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Variant& vt : {Variant{"grouped_matmul.f32", "matmul.f32", SK_DTYPE_F32},
                            Variant{"grouped_matmul.bf16", "matmul.bf16", SK_DTYPE_BF16},
                            Variant{"grouped_matmul.f16", "matmul.f16", SK_DTYPE_F16},
                            Variant{"grouped_matmul.w8a8_dyn", "matmul.w8a8_dyn", SK_DTYPE_I8}}) {
    SCOPED_TRACE(vt.grouped);
    const bool w8 = vt.w_dtype == SK_DTYPE_I8;
    const int64_t wsize = sk_dtype_size(vt.w_dtype);
    std::vector<float> x(static_cast<size_t>(r * k));
    for (float& v : x) v = dist(rng);
    std::vector<unsigned char> w(static_cast<size_t>(e * n * k * wsize));
    for (size_t i = 0; i < w.size(); i += static_cast<size_t>(wsize)) {
      if (w8) {
        w[i] = static_cast<unsigned char>(rng() % 255);
      } else if (vt.w_dtype == SK_DTYPE_F16) {
        const uint16_t h = f32_to_f16(dist(rng));
        std::memcpy(&w[i], &h, 2);
      } else if (wsize == 2) {
        const float f = dist(rng);
        uint32_t b;
        std::memcpy(&b, &f, 4);
        const auto h = static_cast<uint16_t>(b >> 16);
        std::memcpy(&w[i], &h, 2);
      } else {
        const float f = dist(rng);
        std::memcpy(&w[i], &f, 4);
      }
    }
    std::vector<float> scales(static_cast<size_t>(e * n));
    for (float& s : scales) s = 0.001f + 0.01f * (dist(rng) + 1.0f);
    for (int level = 0; level <= best; ++level) {
      force(level);
      SCOPED_TRACE("isa level " + std::to_string(level));
      std::vector<std::vector<float>> results;
      for (int cores : {1, 2, 3}) {
        const sk_kernel_desc* kg = builtin_kernel(vt.grouped);
        ManualArgs ops(0xCD);
        std::copy(x.begin(), x.end(), ops.in_ptr<float>(SK_DTYPE_F32, {r, k}));
        std::copy(counts.begin(), counts.end(), ops.in_ptr<int32_t>(SK_DTYPE_I32, {e}));
        std::memcpy(ops.in_ptr<unsigned char>(vt.w_dtype, {e, n, k}), w.data(), w.size());
        if (w8) std::copy(scales.begin(), scales.end(), ops.in_ptr<float>(SK_DTYPE_F32, {e, n}));
        float* y = ops.out_ptr<float>(SK_DTYPE_F32, {r, n});
        ASSERT_TRUE(ops.tiling_from(kg));
        for (int c = 0; c < cores; ++c) {
          sk_core_ctx ctx{};
          ctx.core_id = c;
          ctx.num_cores = cores;
          ASSERT_EQ(kg->run(&ops.args(), &ctx), SK_OK);
        }
        results.emplace_back(y, y + r * n);
      }
      EXPECT_EQ(results[1], results[0]) << "2 cores";
      EXPECT_EQ(results[2], results[0]) << "3 cores";
      int64_t row = 0;
      for (int64_t ex = 0; ex < e; ++ex) {
        const int64_t rows = counts[static_cast<size_t>(ex)];
        if (rows == 0) continue;
        const sk_kernel_desc* kp = builtin_kernel(vt.plain);
        ManualArgs ops(0xCD);
        std::copy(x.begin() + row * k, x.begin() + (row + rows) * k, ops.in_ptr<float>(SK_DTYPE_F32, {rows, k}));
        std::memcpy(ops.in_ptr<unsigned char>(vt.w_dtype, {n, k}), w.data() + ex * n * k * wsize,
                    static_cast<size_t>(n * k * wsize));
        if (w8) std::copy(scales.begin() + ex * n, scales.begin() + (ex + 1) * n, ops.in_ptr<float>(SK_DTYPE_F32, {n}));
        float* y = ops.out_ptr<float>(SK_DTYPE_F32, {rows, n});
        if (kp->workspace_size != nullptr) ops.workspace_for(kp, 1);
        sk_core_ctx ctx{};
        ctx.num_cores = 1;
        ASSERT_EQ(kp->run(&ops.args(), &ctx), SK_OK);
        EXPECT_TRUE(std::equal(y, y + rows * n, results[0].begin() + row * n)) << "expert " << ex;
        row += rows;
      }
      for (int64_t i = row * n; i < r * n; ++i) ASSERT_EQ(results[0][static_cast<size_t>(i)], 0.0f);
    }
    force(-1);
  }
}

}  // namespace sk::kernel_test
