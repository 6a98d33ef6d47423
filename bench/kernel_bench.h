// Registry of sk_bench_kernels cases. A case is a one-op graph (kernel, inputs, outputs,
// attributes) plus the bytes it must move and the flops it performs, so the runner can report
// GB/s and GFLOP/s. Families register cases in kernels_<family>.cc:
//
//   SK_KERNEL_BENCH(core_cases) {
//     return {{"gemv_f32_4096", "matmul.f32", {Act({1, 4096}), Weight(sk::DType::kF32, {4096, 4096})},
//              {{sk::DType::kF32, {1, 4096}}}, {}, gemv_bytes, 2.0 * 4096 * 4096}};
//   }
#ifndef SUPERKERNEL_BENCH_KERNEL_BENCH_H_
#define SUPERKERNEL_BENCH_KERNEL_BENCH_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "superkernel/graph.h"

namespace sk::bench {

struct BenchInput {
  DType dtype = DType::kF32;
  Shape shape;
  double lo = -1.0, hi = 1.0;  // uniform values (integers for integer dtypes)
  bool weight = false;         // graph constant (weights) rather than a fed input
  std::vector<double> values;  // explicit contents, repeated, when non-empty
};

inline BenchInput Act(Shape s, double lo = -1.0, double hi = 1.0) {
  return {DType::kF32, std::move(s), lo, hi, false, {}};
}
inline BenchInput Weight(DType d, Shape s, double lo = -1.0, double hi = 1.0) {
  return {d, std::move(s), lo, hi, true, {}};
}

// A oneDNN matmul on the same shape, for the comparison column (when the build has oneDNN).
struct OneDnnShape {
  int64_t m = 0, n = 0, k = 0;
  std::string weights;  // "f32", "bf16", "f16" or "s8" (s8 weights with u8 activations, s32 accumulate)
};

struct KernelBenchCase {
  std::string name;
  std::string kernel;
  std::vector<BenchInput> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<uint8_t> attrs;
  double bytes = 0;  // bytes the kernel must move at least (weights + activations + outputs)
  double flops = 0;
  OneDnnShape onednn;                         // m == 0: no comparison
  std::vector<std::pair<int, int>> in_place;  // (output, input) updated in place
};

template <typename T>
std::vector<uint8_t> bench_attrs(const T& a) {
  std::vector<uint8_t> b(sizeof(T));
  std::memcpy(b.data(), &a, sizeof(T));
  return b;
}

std::vector<KernelBenchCase>& kernel_bench_registry();

struct KernelBenchRegistrar {
  explicit KernelBenchRegistrar(std::vector<KernelBenchCase> (*make)()) {
    for (KernelBenchCase& c : make()) kernel_bench_registry().push_back(std::move(c));
  }
};

#define SK_KERNEL_BENCH(fn)                                      \
  static std::vector<::sk::bench::KernelBenchCase> fn();         \
  static ::sk::bench::KernelBenchRegistrar fn##_registrar_{&fn}; \
  static std::vector<::sk::bench::KernelBenchCase> fn()

// oneDNN comparison (onednn_matmul.cc when oneDNN is found, onednn_absent.cc otherwise):
// seconds per matmul of the given shape on `threads` threads, or a negative value with `why`.
double onednn_matmul_seconds(const OneDnnShape& shape, int threads, int runs, std::string* why);

}  // namespace sk::bench

#endif  // SUPERKERNEL_BENCH_KERNEL_BENCH_H_
