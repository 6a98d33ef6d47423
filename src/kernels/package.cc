// The built-in kernel package ("builtin"): the table the runtime finds through dlopen.
//
// Names are part of the contract with the graph layer, which binds ops to them. All kernels
// are fusible and describe their per-core accesses. The element-wise kernels have a host tiling
// (their validated operand walk) that static modes compute once at compile time.
#include <superkernel/kernel_abi.h>

#include "kernels/kernels.h"

namespace sk::kernels {
namespace {

// Fusible kernels without tiling, workspace or sync_all (the common case); families that need
// more spell their descriptor out in full.
constexpr sk_kernel_desc kernel(const char* name, int32_t type, sk_run_fn run, sk_access_fn access,
                                sk_prologue_fn prologue = nullptr, sk_tiling_fn tiling = nullptr) {
  return sk_kernel_desc{SK_KERNEL_ABI_VERSION,      name,   type, SK_FUSIBLE, run, prologue, tiling,
                        /*workspace_size=*/nullptr, access,
                        /*sync_all_count=*/0};
}

constexpr sk_kernel_desc kKernels[] = {
    kernel("add.f32", SK_KERNEL_VECTOR, add_f32_run, add_f32_access, nullptr, add_f32_tiling),
    kernel("mul.f32", SK_KERNEL_VECTOR, mul_f32_run, mul_f32_access, nullptr, mul_f32_tiling),
    kernel("silu_mul.f32", SK_KERNEL_VECTOR, silu_mul_f32_run, silu_mul_f32_access, nullptr, silu_mul_f32_tiling),
    kernel("rms_norm.f32", SK_KERNEL_VECTOR, rms_norm_f32_run, rms_norm_f32_access),
    kernel("softmax.f32", SK_KERNEL_VECTOR, softmax_f32_run, softmax_f32_access),
    kernel("matmul.f32", SK_KERNEL_CUBE, matmul_f32_run, matmul_f32_access, matmul_f32_prologue),
    kernel("embedding.f32", SK_KERNEL_VECTOR, embedding_f32_run, embedding_f32_access),
    kernel("copy", SK_KERNEL_VECTOR, copy_run, copy_access),
    // ---- matmul family (bf16 / W8A8 GEMV-GEMM, activation quantisation, grouped GEMM) ----
    // ---- attention family (layer_norm, RoPE, KV cache, paged decode attention, MLA) ----
    // ---- MoE and sampling family (router, dispatch, combine, argmax, top-k/top-p) ----
};

constexpr sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "builtin", sizeof(kKernels) / sizeof(kKernels[0]),
                                        kKernels};

}  // namespace
}  // namespace sk::kernels

extern "C" SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &sk::kernels::kPackage; }
