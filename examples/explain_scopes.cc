// Prints what the compiler does with fusion scopes: segments, cut reasons and per-core
// programs, for a small decoder-like block with two scopes and a non-fusible host op between
// them. Then runs the block in every mode and checks the outputs are bit-identical.
//
//   build/examples/sk_example_explain_scopes [--cores N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "superkernel/compile.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

sk::Graph build_block() {
  constexpr int64_t kDim = 128, kHidden = 256;
  sk::Graph g("decoder_block");
  sk::Tensor x = g.input("x", sk::DType::kF32, {1, kDim});
  auto wq = random_values(kDim * kDim, 1, 0.1f), wg = random_values(kHidden * kDim, 2, 0.1f),
       wu = random_values(kHidden * kDim, 3, 0.1f), wd = random_values(kDim * kHidden, 4, 0.1f);
  std::vector<float> ones(kDim, 1.0f);
  sk::Tensor gamma = g.constant_f32("gamma", {kDim}, ones);
  sk::Tensor h;
  {
    sk::SuperKernelScope attn(g, "attention");
    sk::Tensor n = sk::rms_norm(g, x, gamma, 1e-6f, "attn_norm");
    sk::Tensor q = sk::matmul(g, n, g.constant_f32("wq", {kDim, kDim}, wq), "q_proj");
    h = sk::add(g, sk::softmax(g, q, "scores"), x, "attn_residual");
  }
  // A host callback (for example a logging or sampling hook) is never fusible.
  h = g.host_op("host_clamp",
                [](sk::HostOpContext& ctx) {
                  const float* in = static_cast<const float*>(ctx.inputs[0].data);
                  float* out = static_cast<float*>(ctx.outputs[0].data);
                  for (size_t i = 0; i < ctx.outputs[0].bytes() / sizeof(float); ++i)
                    out[i] = in[i] > 4.0f ? 4.0f : in[i];
                  return sk::Status::ok();
                },
                {h}, {{sk::DType::kF32, {1, kDim}, "clamped"}})[0];
  {
    sk::SuperKernelScope mlp(g, "mlp", "feed-sync-all=1");
    sk::Tensor n = sk::rms_norm(g, h, gamma, 1e-6f, "mlp_norm");
    sk::Tensor gate = sk::matmul(g, n, g.constant_f32("w_gate", {kHidden, kDim}, wg), "gate_proj");
    sk::Tensor up = sk::matmul(g, n, g.constant_f32("w_up", {kHidden, kDim}, wu), "up_proj");
    sk::Tensor act = sk::silu_mul(g, gate, up, "swiglu");
    sk::Tensor down = sk::matmul(g, act, g.constant_f32("w_down", {kDim, kHidden}, wd), "down_proj");
    g.output(sk::add(g, down, h, "mlp_residual"), "y");
  }
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  sk::RuntimeOptions ro;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cores") == 0 && i + 1 < argc) ro.num_cores = std::atoi(argv[++i]);
  auto rt = sk::Runtime::create(ro);
  if (!rt) return std::fprintf(stderr, "%s\n", rt.status().to_string().c_str()), 1;
  sk::Graph g = build_block();

  auto text = sk::explain(**rt, g, sk::CompileOptions::for_mode(sk::ExecutionMode::kSuperKernel));
  if (!text) return std::fprintf(stderr, "%s\n", text.status().to_string().c_str()), 1;
  std::printf("%s\n", text->c_str());

  auto input = random_values(128, 9, 1.0f);
  std::vector<float> reference;
  for (auto mode : {sk::ExecutionMode::kEager, sk::ExecutionMode::kGraph, sk::ExecutionMode::kSuperKernel}) {
    auto exe = (*rt)->compile(g, sk::CompileOptions::for_mode(mode));
    if (!exe) return std::fprintf(stderr, "%s\n", exe.status().to_string().c_str()), 1;
    (void)(*exe)->set_input("x", input);
    if (sk::Status s = (*exe)->run(); !s) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
    std::vector<float> y = (*exe)->output_f32("y");
    if (reference.empty()) reference = y;
    const bool same = std::memcmp(y.data(), reference.data(), y.size() * sizeof(float)) == 0;
    std::printf("%-12s %2zu launches  y[0..2] = %.6f %.6f %.6f  %s\n", sk::execution_mode_name(mode),
                (*exe)->report().num_launches, y[0], y[1], y[2], same ? "bit-identical to eager" : "DIFFERS");
    if (!same) return 1;
  }
  return 0;
}
