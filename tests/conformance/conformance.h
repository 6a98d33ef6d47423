// The conformance harness: every kernel with a reference implementation, in every execution
// mode and at several core counts, against its reference (within the reference's documented
// tolerance) and against itself (bit-identical across modes and core counts).
//
// Kernel families register their cases in a cases_<family>.cc file:
//
//   SK_CONFORMANCE_CASES(norm_cases) {
//     return {sk::conformance::Case{"rms_norm_1x13", "rms_norm.f32",
//                                   {F32({1, 13}), F32({13}, 0.5f, 1.5f)},
//                                   {{sk::DType::kF32, {1, 13}}}, attrs_of(sk_rms_norm_attrs{1e-6f})}};
//   }
#ifndef SUPERKERNEL_TESTS_CONFORMANCE_CONFORMANCE_H_
#define SUPERKERNEL_TESTS_CONFORMANCE_CONFORMANCE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "superkernel/graph.h"

namespace sk::conformance {

// How an input is filled. Floats are drawn uniformly from [lo, hi] and rounded to the dtype
// (bf16, f16, i8 are rounded/saturated; i32/i64 get integers in [lo, hi]); `values` overrides.
struct Input {
  DType dtype = DType::kF32;
  Shape shape;
  double lo = -1.0;
  double hi = 1.0;
  std::vector<double> values;  // explicit contents (converted to dtype), when non-empty
  bool weight = false;         // a graph constant rather than a graph input
};

struct Case {
  std::string name;
  std::string kernel;
  std::vector<Input> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<uint8_t> attrs;
  // (output, input) pairs the kernel updates in place (e.g. a KV cache): the input becomes a
  // graph variable and the op writes it.
  std::vector<std::pair<int, int>> in_place;
};

inline Input F32(Shape s, double lo = -1.0, double hi = 1.0) {
  return Input{DType::kF32, std::move(s), lo, hi, {}, false};
}
inline Input W32(Shape s, double lo = -1.0, double hi = 1.0) {
  return Input{DType::kF32, std::move(s), lo, hi, {}, true};
}
inline Input Of(DType d, Shape s, double lo, double hi, bool weight = false) {
  return Input{d, std::move(s), lo, hi, {}, weight};
}
inline Input Values(DType d, Shape s, std::vector<double> v) {
  return Input{d, std::move(s), 0, 0, std::move(v), false};
}

template <typename T>
std::vector<uint8_t> attrs_of(const T& a) {
  std::vector<uint8_t> b(sizeof(T));
  std::memcpy(b.data(), &a, sizeof(T));
  return b;
}

std::vector<Case>& registry();

struct Registrar {
  explicit Registrar(std::vector<Case> (*make)()) {
    for (Case& c : make()) registry().push_back(std::move(c));
  }
};

#define SK_CONFORMANCE_CASES(fn)                            \
  static std::vector<::sk::conformance::Case> fn();         \
  static ::sk::conformance::Registrar fn##_registrar_{&fn}; \
  static std::vector<::sk::conformance::Case> fn()

}  // namespace sk::conformance

#endif  // SUPERKERNEL_TESTS_CONFORMANCE_CONFORMANCE_H_
