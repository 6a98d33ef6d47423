// Test cases of the direct kernel-package test (kernel_package_test.cc): tensor descriptions
// (a logical shape plus how the view sits in its storage) and cases (kernel, operands,
// attributes). Kernel families register their cases in cases_<family>.cc:
//
//   SK_KERNEL_CASES(norm_cases) {
//     return {Case{"rms_norm_5x37", "rms_norm.f32", {f32({5, 37}), f32({37})}, {f32({5, 37})},
//                  attrs_bytes(sk_rms_norm_attrs{1e-5f}), -1}};
//   }
#ifndef SUPERKERNEL_TESTS_KERNELS_KERNEL_CASES_H_
#define SUPERKERNEL_TESTS_KERNELS_KERNEL_CASES_H_

#include <superkernel/kernel_abi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "superkernel/attrs_core.h"

namespace sk::kernel_test {

// ---------------------------------------------------------------------------------------------
// Tensor descriptions: a logical shape plus how the view sits in its storage.

// kUniform: values from [lo, hi] converted to the dtype (any dtype); kMaskedLogits: uniform with
// every fifth element -inf; kIds: integer ids in [0, hi) (i32 or i64); kBytes: random bytes;
// kValues: `values` repeated in logical order; kBool: random 0 / 1 (the default for bool).
enum class Fill { kUniform, kMaskedLogits, kIds, kBytes, kValues, kBool };

struct TensorDesc {
  int32_t dtype = SK_DTYPE_F32;
  std::vector<int64_t> shape;
  std::vector<int> perm;      // memory order of the logical dims, outermost first
  std::vector<int64_t> step;  // the view takes every step-th storage element
  std::vector<int64_t> pad;   // storage elements beyond the view, per dim
  std::vector<bool> reverse;  // negative stride
  std::vector<bool> expand;   // stride 0: every index of the dim reads the same elements
  Fill fill = Fill::kUniform;
  double lo = -1.0;
  double hi = 1.0;             // uniform range; ids are drawn from [0, hi)
  std::vector<double> values;  // Fill::kValues
  int view_of = -1;            // outputs only: the output is the very view of input `view_of` (in-place)

  TensorDesc& transposed(std::vector<int> p) {
    perm = std::move(p);
    return *this;
  }
  TensorDesc& stepped(int d, int64_t s) {
    step[static_cast<size_t>(d)] = s;
    return *this;
  }
  TensorDesc& padded(int d, int64_t p) {
    pad[static_cast<size_t>(d)] = p;
    return *this;
  }
  TensorDesc& reversed(int d) {
    reverse[static_cast<size_t>(d)] = true;
    return *this;
  }
  // A broadcast view (torch's expand): the dim has stride 0 and one element of storage.
  TensorDesc& expanded(int d) {
    expand[static_cast<size_t>(d)] = true;
    return *this;
  }
  TensorDesc& range(double l, double h) {
    lo = l;
    hi = h;
    return *this;
  }
  TensorDesc& with_values(std::vector<double> v) {
    fill = Fill::kValues;
    values = std::move(v);
    return *this;
  }
  TensorDesc& with_fill(Fill f) {
    fill = f;
    return *this;
  }
  TensorDesc& masked_logits(double l, double h) {
    fill = Fill::kMaskedLogits;
    return range(l, h);
  }
};

inline TensorDesc tensor(int32_t dtype, std::vector<int64_t> shape) {
  TensorDesc d;
  d.dtype = dtype;
  const size_t r = shape.size();
  d.shape = std::move(shape);
  d.step.assign(r, 1);
  d.pad.assign(r, 0);
  d.reverse.assign(r, false);
  d.expand.assign(r, false);
  d.fill = dtype == SK_DTYPE_F32 ? Fill::kUniform : dtype == SK_DTYPE_BOOL ? Fill::kBool : Fill::kBytes;
  return d;
}

inline TensorDesc f32(std::vector<int64_t> shape) { return tensor(SK_DTYPE_F32, std::move(shape)); }

inline TensorDesc ids(std::vector<int64_t> shape, int64_t vocab) {
  TensorDesc d = tensor(SK_DTYPE_I32, std::move(shape));
  d.fill = Fill::kIds;
  d.lo = 0;
  d.hi = static_cast<double>(vocab);
  return d;
}

// ---------------------------------------------------------------------------------------------
// Cases

struct Case {
  std::string name;
  std::string kernel;
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::vector<unsigned char> attrs;
  int alias = -1;  // output 0 is the very view of input `alias` (in-place)
};

inline std::vector<unsigned char> rms_attrs(float eps) {
  sk_rms_norm_attrs a{eps};
  std::vector<unsigned char> bytes(sizeof a);
  std::memcpy(bytes.data(), &a, sizeof a);
  return bytes;
}

inline Case binary_case(std::string name, std::string kernel, TensorDesc a, TensorDesc b, TensorDesc out) {
  return Case{std::move(name), std::move(kernel), {std::move(a), std::move(b)}, {std::move(out)}, {}, -1};
}

inline Case rms_case(std::string name, TensorDesc x, TensorDesc out, float eps = 1e-5f) {
  const int64_t d = x.shape.back();
  TensorDesc w = f32({d}).range(0.5, 1.5);
  return Case{std::move(name), "rms_norm.f32", {std::move(x), std::move(w)}, {std::move(out)}, rms_attrs(eps), -1};
}

inline Case unary_case(std::string name, std::string kernel, TensorDesc x, TensorDesc out) {
  return Case{std::move(name), std::move(kernel), {std::move(x)}, {std::move(out)}, {}, -1};
}

inline Case matmul_case(std::string name, TensorDesc x, TensorDesc w, TensorDesc out) {
  return Case{std::move(name), "matmul.f32", {std::move(x), std::move(w)}, {std::move(out)}, {}, -1};
}

inline Case in_place(Case c, int input) {
  c.alias = input;
  c.outputs[0] = c.inputs[static_cast<size_t>(input)];
  return c;
}

// Any output updated in place (a KV-cache append writes both caches); in_place() is the
// shorthand for output 0.
inline Case in_place_output(Case c, int output, int input) {
  TensorDesc& d = c.outputs[static_cast<size_t>(output)];
  d = c.inputs[static_cast<size_t>(input)];
  d.view_of = input;
  return c;
}

template <typename T>
std::vector<unsigned char> attrs_bytes(const T& a) {
  std::vector<unsigned char> bytes(sizeof a);
  std::memcpy(bytes.data(), &a, sizeof a);
  return bytes;
}

// Every registered case, in registration order.
std::vector<Case>& case_registry();
inline const std::vector<Case>& all_cases() { return case_registry(); }

struct CaseRegistrar {
  explicit CaseRegistrar(std::vector<Case> (*make)()) {
    for (Case& c : make()) case_registry().push_back(std::move(c));
  }
};

#define SK_KERNEL_CASES(fn)                                     \
  static std::vector<::sk::kernel_test::Case> fn();             \
  static ::sk::kernel_test::CaseRegistrar fn##_registrar_{&fn}; \
  static std::vector<::sk::kernel_test::Case> fn()

}  // namespace sk::kernel_test

#endif  // SUPERKERNEL_TESTS_KERNELS_KERNEL_CASES_H_
