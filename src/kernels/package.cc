// The built-in kernel package ("builtin"): the table the runtime finds through dlopen.
//
// Names are part of the contract with the graph layer, which binds ops to them. All kernels
// are fusible and describe their per-core accesses. The element-wise kernels have a host tiling
// (their validated operand walk) that static modes compute once at compile time.
#include <superkernel/kernel_abi.h>

#include "kernels/kernels.h"

namespace sk::kernels {
namespace {

// What a kernel has beyond run and access; every built-in kernel is fusible and none calls
// sync_all (sample.f32 syncs its own cores with sync_cores, which needs no feeding). The float
// GEMVs (and the attention's per-head batched GEMV) split N with sk_split_range and write exactly
// their access ranges: SK_CHUNKABLE.
struct Extras {
  uint32_t flags = 0;  // added to SK_FUSIBLE
  sk_prologue_fn prologue = nullptr;
  sk_tiling_fn tiling = nullptr;
  sk_workspace_fn workspace = nullptr;
};

constexpr sk_kernel_desc kernel(const char* name, int32_t type, sk_run_fn run, sk_access_fn access, Extras e = {}) {
  return sk_kernel_desc{SK_KERNEL_ABI_VERSION, name,   type, SK_FUSIBLE | e.flags, run, e.prologue, e.tiling,
                        e.workspace,           access,
                        /*sync_all_count=*/0};
}

constexpr sk_kernel_desc kKernels[] = {
    kernel("add.f32", SK_KERNEL_VECTOR, add_f32_run, add_f32_access, {.tiling = add_f32_tiling}),
    kernel("mul.f32", SK_KERNEL_VECTOR, mul_f32_run, mul_f32_access, {.tiling = mul_f32_tiling}),
    kernel("silu_mul.f32", SK_KERNEL_VECTOR, silu_mul_f32_run, silu_mul_f32_access, {.tiling = silu_mul_f32_tiling}),
    kernel("rms_norm.f32", SK_KERNEL_VECTOR, rms_norm_f32_run, rms_norm_f32_access,
           {.prologue = rms_norm_f32_prologue}),
    kernel("softmax.f32", SK_KERNEL_VECTOR, softmax_f32_run, softmax_f32_access),
    kernel("matmul.f32", SK_KERNEL_CUBE, matmul_f32_run, matmul_f32_access,
           {.flags = SK_CHUNKABLE, .prologue = matmul_f32_prologue}),
    kernel("embedding.f32", SK_KERNEL_VECTOR, embedding_f32_run, embedding_f32_access),
    kernel("copy", SK_KERNEL_VECTOR, copy_run, copy_access),
    kernel("prefetch", SK_KERNEL_VECTOR, prefetch_run, prefetch_access),
    // ---- matmul family (bf16 / f16 / W8A8 GEMV-GEMM, activation quantisation, grouped GEMM) ----
    kernel("matmul.bf16", SK_KERNEL_CUBE, matmul_bf16_run, matmul_bf16_access,
           {.flags = SK_CHUNKABLE, .prologue = matmul_bf16_prologue}),
    kernel("matmul.f16", SK_KERNEL_CUBE, matmul_f16_run, matmul_f16_access,
           {.flags = SK_CHUNKABLE, .prologue = matmul_f16_prologue}),
    kernel("quantize.i8", SK_KERNEL_VECTOR, quantize_i8_run, quantize_i8_access),
    kernel("matmul.w8a8", SK_KERNEL_CUBE, matmul_w8a8_run, matmul_w8a8_access, {.prologue = matmul_w8a8_prologue}),
    kernel("matmul.w8a8_dyn", SK_KERNEL_CUBE, matmul_w8a8_dyn_run, matmul_w8a8_dyn_access,
           {.prologue = matmul_w8a8_dyn_prologue}),
    kernel("matmul.w4", SK_KERNEL_CUBE, matmul_w4_run, matmul_w4_access, {.prologue = matmul_w4_prologue}),
    kernel("matmul.w4a8_dyn", SK_KERNEL_CUBE, matmul_w4a8_dyn_run, matmul_w4a8_dyn_access,
           {.prologue = matmul_w4a8_dyn_prologue}),
    // Tiling sinks: the tiling reads `counts` (see grouped_matmul.cc).
    kernel("grouped_matmul.f32", SK_KERNEL_CUBE, grouped_matmul_f32_run, grouped_matmul_f32_access,
           {.flags = SK_TILING_SINK, .tiling = grouped_matmul_f32_tiling}),
    kernel("grouped_matmul.bf16", SK_KERNEL_CUBE, grouped_matmul_bf16_run, grouped_matmul_bf16_access,
           {.flags = SK_TILING_SINK, .tiling = grouped_matmul_bf16_tiling}),
    kernel("grouped_matmul.f16", SK_KERNEL_CUBE, grouped_matmul_f16_run, grouped_matmul_f16_access,
           {.flags = SK_TILING_SINK, .tiling = grouped_matmul_f16_tiling}),
    kernel("grouped_matmul.w8a8_dyn", SK_KERNEL_CUBE, grouped_matmul_w8a8_dyn_run, grouped_matmul_w8a8_dyn_access,
           {.flags = SK_TILING_SINK, .tiling = grouped_matmul_w8a8_dyn_tiling}),
    // ---- attention family (layer_norm, RoPE, KV cache, paged attention and MLA at decode and prefill) ----
    kernel("layer_norm.f32", SK_KERNEL_VECTOR, layer_norm_f32_run, layer_norm_f32_access),
    kernel("rope.f32", SK_KERNEL_VECTOR, rope_f32_run, rope_f32_access),
    kernel("kv_append.f32", SK_KERNEL_VECTOR, kv_append_f32_run, kv_append_f32_access),
    kernel("kv_append.bf16", SK_KERNEL_VECTOR, kv_append_bf16_run, kv_append_bf16_access),
    kernel("paged_attention.f32", SK_KERNEL_VECTOR, paged_attention_f32_run, paged_attention_f32_access),
    kernel("paged_attention.bf16", SK_KERNEL_VECTOR, paged_attention_bf16_run, paged_attention_bf16_access),
    kernel("paged_attention_prefill.f32", SK_KERNEL_VECTOR, paged_attention_prefill_f32_run,
           paged_attention_prefill_f32_access),
    kernel("paged_attention_prefill.bf16", SK_KERNEL_VECTOR, paged_attention_prefill_bf16_run,
           paged_attention_prefill_bf16_access),
    kernel("mla_cache_append.f32", SK_KERNEL_VECTOR, mla_cache_append_f32_run, mla_cache_append_f32_access),
    kernel("mla_cache_append.bf16", SK_KERNEL_VECTOR, mla_cache_append_bf16_run, mla_cache_append_bf16_access),
    kernel("mla_attention.f32", SK_KERNEL_VECTOR, mla_attention_f32_run, mla_attention_f32_access),
    kernel("mla_attention.bf16", SK_KERNEL_VECTOR, mla_attention_bf16_run, mla_attention_bf16_access),
    kernel("mla_attention_prefill.f32", SK_KERNEL_VECTOR, mla_attention_prefill_f32_run,
           mla_attention_prefill_f32_access),
    kernel("mla_attention_prefill.bf16", SK_KERNEL_VECTOR, mla_attention_prefill_bf16_run,
           mla_attention_prefill_bf16_access),
    kernel("batched_matmul.f32", SK_KERNEL_CUBE, batched_matmul_f32_run, batched_matmul_f32_access,
           {.flags = SK_CHUNKABLE}),
    // ---- MoE and sampling family (router, dispatch, combine, argmax, top-k/top-p) ----
    kernel("moe_router.f32", SK_KERNEL_VECTOR, moe_router_f32_run, moe_router_f32_access,
           {.flags = SK_WORKSPACE_PER_CORE, .workspace = moe_router_f32_workspace}),
    kernel("moe_dispatch.f32", SK_KERNEL_VECTOR, moe_dispatch_f32_run, moe_dispatch_f32_access,
           {.flags = SK_WORKSPACE_PER_CORE, .workspace = moe_dispatch_f32_workspace}),
    kernel("moe_combine.f32", SK_KERNEL_VECTOR, moe_combine_f32_run, moe_combine_f32_access),
    kernel("moe_combine_shared.f32", SK_KERNEL_VECTOR, moe_combine_shared_f32_run, moe_combine_shared_f32_access),
    kernel("argmax.f32", SK_KERNEL_VECTOR, argmax_f32_run, argmax_f32_access),
    kernel("sample.f32", SK_KERNEL_VECTOR, sample_f32_run, sample_f32_access,
           {.flags = SK_WORKSPACE_PER_CORE | SK_SYNCS_CORES, .workspace = sample_f32_workspace}),
    // ---- general tensor family (element-wise, reductions, indexing, batched matmul, sdpa) ----
    kernel("tensor.unary", SK_KERNEL_VECTOR, tensor_unary_run, tensor_unary_access, {.tiling = tensor_unary_tiling}),
    kernel("tensor.cast", SK_KERNEL_VECTOR, tensor_cast_run, tensor_cast_access, {.tiling = tensor_cast_tiling}),
    kernel("tensor.binary", SK_KERNEL_VECTOR, tensor_binary_run, tensor_binary_access,
           {.tiling = tensor_binary_tiling}),
    kernel("tensor.binary_scalar", SK_KERNEL_VECTOR, tensor_binary_scalar_run, tensor_binary_scalar_access,
           {.tiling = tensor_binary_scalar_tiling}),
    kernel("tensor.where", SK_KERNEL_VECTOR, tensor_where_run, tensor_where_access, {.tiling = tensor_where_tiling}),
    kernel("tensor.reduce", SK_KERNEL_VECTOR, tensor_reduce_run, tensor_reduce_access,
           {.tiling = tensor_reduce_tiling}),
    kernel("tensor.cumsum", SK_KERNEL_VECTOR, tensor_cumsum_run, tensor_cumsum_access),
    kernel("tensor.index_select", SK_KERNEL_VECTOR, tensor_index_select_run, tensor_index_select_access),
    kernel("tensor.gather", SK_KERNEL_VECTOR, tensor_gather_run, tensor_gather_access),
    kernel("tensor.index_copy", SK_KERNEL_VECTOR, tensor_index_copy_run, tensor_index_copy_access),
    kernel("tensor.index_put", SK_KERNEL_VECTOR, tensor_index_put_run, tensor_index_put_access),
    kernel("tensor.topk", SK_KERNEL_VECTOR, tensor_topk_run, tensor_topk_access,
           {.flags = SK_WORKSPACE_PER_CORE, .workspace = tensor_topk_workspace}),
    kernel("tensor.batched_mm", SK_KERNEL_CUBE, tensor_batched_mm_run, tensor_batched_mm_access,
           {.flags = SK_WORKSPACE_PER_CORE, .workspace = tensor_batched_mm_workspace}),
    kernel("tensor.sdpa", SK_KERNEL_VECTOR, tensor_sdpa_run, tensor_sdpa_access,
           {.flags = SK_WORKSPACE_PER_CORE, .workspace = tensor_sdpa_workspace}),
};

constexpr sk_kernel_package kPackage = {SK_KERNEL_ABI_VERSION, "builtin", sizeof(kKernels) / sizeof(kKernels[0]),
                                        kKernels};

}  // namespace
}  // namespace sk::kernels

extern "C" SK_EXPORT const sk_kernel_package* sk_kernel_package_table(void) { return &sk::kernels::kPackage; }
