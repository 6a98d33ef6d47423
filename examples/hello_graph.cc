// The README example: build a small graph, run it in all three modes, compare.
#include <cstdio>
#include <vector>

#include "superkernel/ops.h"
#include "superkernel/runtime.h"

int main() {
  sk::Graph g("hello");
  sk::Tensor x = g.input("x", sk::DType::kF32, {1, 256});
  std::vector<float> w(256 * 256, 0.01f), gamma(256, 1.0f);
  sk::Tensor wt = g.constant_f32("w", {256, 256}, w);
  sk::Tensor gt = g.constant_f32("gamma", {256}, gamma);
  {
    sk::SuperKernelScope scope(g, "block");  // these ops may fuse into one super kernel
    sk::Tensor h = sk::rms_norm(g, sk::matmul(g, x, wt), gt, 1e-6f);
    g.output(sk::add(g, h, x), "y");
  }
  auto rt = sk::Runtime::create();
  if (!rt) return std::fprintf(stderr, "%s\n", rt.status().to_string().c_str()), 1;
  std::vector<float> input(256, 0.5f);
  for (auto mode : {sk::ExecutionMode::kEager, sk::ExecutionMode::kGraph, sk::ExecutionMode::kSuperKernel}) {
    auto exe = (*rt)->compile(g, sk::CompileOptions::for_mode(mode));
    if (!exe) return std::fprintf(stderr, "%s\n", exe.status().to_string().c_str()), 1;
    (void)(*exe)->set_input("x", input);
    if (sk::Status s = (*exe)->run(); !s) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
    std::printf("%-12s y[0] = %.6f  (%zu launches)\n", sk::execution_mode_name(mode), (*exe)->output_f32("y")[0],
                (*exe)->report().num_launches);
  }
  return 0;
}
