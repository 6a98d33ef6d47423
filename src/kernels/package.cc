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

// Fusible kernels with private per-core scratch from the memory plan.
constexpr sk_kernel_desc scratch_kernel(const char* name, int32_t type, sk_run_fn run, sk_access_fn access,
                                        sk_workspace_fn workspace) {
  return sk_kernel_desc{
      SK_KERNEL_ABI_VERSION, name, type, SK_FUSIBLE | SK_WORKSPACE_PER_CORE, run, nullptr, nullptr, workspace, access,
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
    kernel("matmul.bf16", SK_KERNEL_CUBE, matmul_bf16_run, matmul_bf16_access, matmul_bf16_prologue),
    kernel("quantize.i8", SK_KERNEL_VECTOR, quantize_i8_run, quantize_i8_access),
    kernel("matmul.w8a8", SK_KERNEL_CUBE, matmul_w8a8_run, matmul_w8a8_access, matmul_w8a8_prologue),
    kernel("matmul.w8a8_dyn", SK_KERNEL_CUBE, matmul_w8a8_dyn_run, matmul_w8a8_dyn_access, matmul_w8a8_dyn_prologue),
    // Tiling sinks: the tiling reads `counts` (see grouped_matmul.cc).
    sk_kernel_desc{SK_KERNEL_ABI_VERSION, "grouped_matmul.f32", SK_KERNEL_CUBE, SK_FUSIBLE | SK_TILING_SINK,
                   grouped_matmul_f32_run, nullptr, grouped_matmul_f32_tiling, nullptr, grouped_matmul_f32_access, 0},
    sk_kernel_desc{SK_KERNEL_ABI_VERSION, "grouped_matmul.bf16", SK_KERNEL_CUBE, SK_FUSIBLE | SK_TILING_SINK,
                   grouped_matmul_bf16_run, nullptr, grouped_matmul_bf16_tiling, nullptr, grouped_matmul_bf16_access,
                   0},
    sk_kernel_desc{SK_KERNEL_ABI_VERSION, "grouped_matmul.w8a8_dyn", SK_KERNEL_CUBE, SK_FUSIBLE | SK_TILING_SINK,
                   grouped_matmul_w8a8_dyn_run, nullptr, grouped_matmul_w8a8_dyn_tiling, nullptr,
                   grouped_matmul_w8a8_dyn_access, 0},
    // ---- attention family (layer_norm, RoPE, KV cache, paged decode attention, MLA) ----
    kernel("layer_norm.f32", SK_KERNEL_VECTOR, layer_norm_f32_run, layer_norm_f32_access),
    kernel("rope.f32", SK_KERNEL_VECTOR, rope_f32_run, rope_f32_access),
    kernel("kv_append.f32", SK_KERNEL_VECTOR, kv_append_f32_run, kv_append_f32_access),
    kernel("kv_append.bf16", SK_KERNEL_VECTOR, kv_append_bf16_run, kv_append_bf16_access),
    kernel("paged_attention.f32", SK_KERNEL_VECTOR, paged_attention_f32_run, paged_attention_f32_access),
    kernel("paged_attention.bf16", SK_KERNEL_VECTOR, paged_attention_bf16_run, paged_attention_bf16_access),
    kernel("mla_cache_append.f32", SK_KERNEL_VECTOR, mla_cache_append_f32_run, mla_cache_append_f32_access),
    kernel("mla_cache_append.bf16", SK_KERNEL_VECTOR, mla_cache_append_bf16_run, mla_cache_append_bf16_access),
    kernel("mla_attention.f32", SK_KERNEL_VECTOR, mla_attention_f32_run, mla_attention_f32_access),
    kernel("mla_attention.bf16", SK_KERNEL_VECTOR, mla_attention_bf16_run, mla_attention_bf16_access),
    kernel("batched_matmul.f32", SK_KERNEL_CUBE, batched_matmul_f32_run, batched_matmul_f32_access),
    // ---- MoE and sampling family (router, dispatch, combine, argmax, top-k/top-p) ----
    scratch_kernel("moe_router.f32", SK_KERNEL_VECTOR, moe_router_f32_run, moe_router_f32_access,
                   moe_router_f32_workspace),
    scratch_kernel("moe_dispatch.f32", SK_KERNEL_VECTOR, moe_dispatch_f32_run, moe_dispatch_f32_access,
                   moe_dispatch_f32_workspace),
    kernel("moe_combine.f32", SK_KERNEL_VECTOR, moe_combine_f32_run, moe_combine_f32_access),
    kernel("moe_combine_shared.f32", SK_KERNEL_VECTOR, moe_combine_shared_f32_run, moe_combine_shared_f32_access),
    kernel("argmax.f32", SK_KERNEL_VECTOR, argmax_f32_run, argmax_f32_access),
    scratch_kernel("sample.f32", SK_KERNEL_VECTOR, sample_f32_run, sample_f32_access, sample_f32_workspace),
};

constexpr sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "builtin", sizeof(kKernels) / sizeof(kKernels[0]),
                                        kKernels};

}  // namespace
}  // namespace sk::kernels

extern "C" SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &sk::kernels::kPackage; }
