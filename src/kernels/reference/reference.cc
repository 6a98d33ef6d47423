#include "kernels/reference/reference.h"

namespace sk::ref {
namespace {

// Tolerances are explained in reference.h.
constexpr Reference kReferences[] = {
    {"add.f32", add_f32, 0.0, 0.0},
    {"mul.f32", mul_f32, 0.0, 0.0},
    {"silu_mul.f32", silu_mul_f32, 1e-6, 1e-5},
    {"rms_norm.f32", rms_norm_f32, 1e-6, 1e-5},
    {"softmax.f32", softmax_f32, 1e-7, 1e-5},
    {"matmul.f32", matmul_f32, 1e-4, 1e-4},
    {"embedding.f32", embedding_f32, 0.0, 0.0},
    {"copy", copy, 0.0, 0.0},
    // ---- matmul family ----
    // ---- attention family ----
    // ---- MoE and sampling family ----
};

}  // namespace

const Reference* find_reference(std::string_view kernel_name) {
  for (const Reference& r : kReferences) {
    if (kernel_name == r.kernel) return &r;
  }
  return nullptr;
}

std::span<const Reference> all_references() { return kReferences; }

}  // namespace sk::ref
