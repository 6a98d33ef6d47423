// A LongCat-Flash-style MoE block for tests, from the public nn builders:
//
//   logits = matmul(x, w_router); ids, weights = moe_router(logits, bias)
//   x_sorted, counts, row_map = moe_dispatch(x, ids)
//   h = silu_mul(grouped_matmul(x_sorted, counts, w_gate_up) split in halves)
//   out = moe_combine(grouped_matmul(h, counts, w_down), row_map, weights, x)
//
// Both grouped matmuls are tiling-sink kernels: their tiling reads `counts`.
//
//   sk::testing::MoeBlockWeights w = sk::testing::moe_block_weights(g, shape, 64, rng, bias);
//   sk::testing::MoeBlockOutput out = sk::testing::moe_block(g, x, shape, w, "moe.");
#ifndef SUPERKERNEL_TESTS_COMMON_MOE_BLOCK_H_
#define SUPERKERNEL_TESTS_COMMON_MOE_BLOCK_H_

#include <random>
#include <string>
#include <vector>

#include "superkernel/nn.h"
#include "superkernel/ops.h"

namespace sk::testing {

struct MoeBlockShape {
  int32_t experts = 4;       // E routed experts
  int32_t zero_experts = 2;  // Z identity experts
  int32_t top_k = 2;         // 1 .. E+Z
  int64_t ffn = 16;          // expert intermediate size F
};

struct MoeBlockWeights {
  Tensor router;   // [E+Z, D]
  Tensor bias;     // [E+Z]
  Tensor gate_up;  // [E, 2F, D]
  Tensor down;     // [E, D, F]
};

struct MoeBlockOutput {
  Tensor out;     // [T, D]
  Tensor counts;  // i32 [E]: rows per expert
};

// Random weights for hidden size `d`; `bias` (E+Z values) steers which experts are chosen: a
// large value draws every token, a very negative one leaves the expert empty.
inline MoeBlockWeights moe_block_weights(Graph& g, const MoeBlockShape& s, int64_t d, std::mt19937& rng,
                                         const std::vector<float>& bias) {
  auto random = [&](const std::string& name, Shape shape, float scale) {
    std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
    std::uniform_real_distribution<float> dist(-scale, scale);
    for (float& x : v) x = dist(rng);
    return g.constant_f32(name + std::to_string(g.num_tensors()), shape, v);
  };
  const int64_t n = s.experts + s.zero_experts;
  MoeBlockWeights w;
  w.router = random("w_router", {n, d}, 0.5f);
  w.bias = g.constant_f32("w_bias" + std::to_string(g.num_tensors()), {n}, bias);
  w.gate_up = random("w_gate_up", {s.experts, 2 * s.ffn, d}, 0.3f);
  w.down = random("w_down", {s.experts, d, s.ffn}, 0.3f);
  return w;
}

inline MoeBlockOutput moe_block(Graph& g, Tensor x, const MoeBlockShape& s, const MoeBlockWeights& w,
                                const std::string& prefix) {
  Tensor logits = matmul(g, x, w.router, prefix + "router_logits");
  const sk_moe_router_attrs router{s.top_k, s.experts, SK_MOE_SCORING_SOFTMAX, 0, 1.5f};
  nn::RouterOutput route = nn::moe_router(g, logits, w.bias, router, prefix + "router");
  nn::DispatchOutput sorted = nn::moe_dispatch(g, x, route.topk_ids, {s.experts, s.zero_experts}, prefix + "dispatch");
  Tensor gate_up = nn::grouped_matmul(g, sorted.x_sorted, sorted.counts, {w.gate_up, Tensor{}}, prefix + "gate_up");
  Tensor h = silu_mul(g, g.slice(gate_up, 1, 0, s.ffn), g.slice(gate_up, 1, s.ffn, 2 * s.ffn), prefix + "act");
  Tensor y = nn::grouped_matmul(g, h, sorted.counts, {w.down, Tensor{}}, prefix + "down");
  return {nn::moe_combine(g, y, sorted.row_map, route.topk_weights, x, prefix + "combine"), sorted.counts};
}

}  // namespace sk::testing

#endif  // SUPERKERNEL_TESTS_COMMON_MOE_BLOCK_H_
