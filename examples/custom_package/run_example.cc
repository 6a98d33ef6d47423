// A host program that runs this package's kernels through the superkernel runtime. It links the
// runtime as the imported target superkernel::superkernel from find_package(superkernel):
//
//   ./sk_example_run [path/to/libsk_example_kernels.so]
//
// Prints y = 2 * x and a * x + b for a small input in every execution mode and exits non-zero
// when a mode disagrees with the exact result.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "example_kernels.h"
#include "superkernel/ops.h"
#include "superkernel/runtime.h"

int main(int argc, char** argv) {
  const std::string package = argc > 1 ? argv[1] : SK_EXAMPLE_PACKAGE_FILE;
  sk::RuntimeOptions options;
  options.load_builtin_kernels = false;
  options.kernel_packages = {package};
  auto rt = sk::Runtime::create(options);
  if (!rt) return std::fprintf(stderr, "%s\n", rt.status().to_string().c_str()), 1;

  constexpr int64_t kN = 100;
  sk::Graph g("example");
  sk::Tensor x = g.input("x", sk::DType::kF32, {kN});
  const sk_example_axpb_attrs attrs{0.5f, 0.75f};
  std::vector<uint8_t> blob(sizeof(attrs));
  std::memcpy(blob.data(), &attrs, sizeof(attrs));
  {
    sk::SuperKernelScope scope(g, "example");
    sk::Tensor y = sk::call_kernel(g, SK_EXAMPLE_SCALE2_F32, {x}, {{sk::DType::kF32, {kN}, ""}}, {}, "scale2")[0];
    g.output(sk::call_kernel(g, SK_EXAMPLE_AXPB_F32, {y}, {{sk::DType::kF32, {kN}, ""}}, blob, "axpb")[0], "z");
  }
  std::vector<float> xs(kN);
  for (int64_t i = 0; i < kN; ++i) xs[i] = static_cast<float>(i) * 0.25f;

  for (auto mode : {sk::ExecutionMode::kEager, sk::ExecutionMode::kGraph, sk::ExecutionMode::kSuperKernel}) {
    auto exe = (*rt)->compile(g, sk::CompileOptions::for_mode(mode));
    if (!exe) return std::fprintf(stderr, "%s\n", exe.status().to_string().c_str()), 1;
    if (sk::Status s = (*exe)->set_input("x", xs); !s) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
    if (sk::Status s = (*exe)->run(); !s) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
    const std::vector<float> z = (*exe)->output_f32("z");
    for (int64_t i = 0; i < kN; ++i) {
      if (z[i] != 0.5f * (2.0f * xs[i]) + 0.75f) {
        std::fprintf(stderr, "%s: z[%lld] = %g, expected %g\n", sk::execution_mode_name(mode),
                     static_cast<long long>(i), z[i], 0.5f * (2.0f * xs[i]) + 0.75f);
        return 1;
      }
    }
    std::printf("%s: z[%lld] = %g\n", sk::execution_mode_name(mode), static_cast<long long>(kN - 1), z[kN - 1]);
  }
  return 0;
}
