// Entry points of the built-in kernels, one group per op family (one .cc each). package.cc
// turns them into the package table; nothing else calls them directly.
#ifndef SUPERKERNEL_KERNELS_KERNELS_H_
#define SUPERKERNEL_KERNELS_KERNELS_H_

#include <superkernel/kernel_abi.h>

#include <cstdint>

#define SK_DECLARE_KERNEL(prefix)                                                                                  \
  int32_t prefix##_run(const sk_kernel_args* args, const sk_core_ctx* core);                                       \
  int32_t prefix##_access(const sk_kernel_args* args, int32_t core_id, int32_t num_cores, sk_access_range* ranges, \
                          int32_t capacity)

namespace sk::kernels {

// elementwise.cc (tiling: the validated operand walk, cached by static modes)
SK_DECLARE_KERNEL(add_f32);
SK_DECLARE_KERNEL(mul_f32);
SK_DECLARE_KERNEL(silu_mul_f32);
int32_t add_f32_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
int32_t mul_f32_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
int32_t silu_mul_f32_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
// norm.cc
SK_DECLARE_KERNEL(rms_norm_f32);
int32_t rms_norm_f32_prologue(const sk_kernel_args* args, const sk_core_ctx* core);
// softmax.cc
SK_DECLARE_KERNEL(softmax_f32);
// matmul.cc
SK_DECLARE_KERNEL(matmul_f32);
int32_t matmul_f32_prologue(const sk_kernel_args* args, const sk_core_ctx* core);
// embedding.cc
SK_DECLARE_KERNEL(embedding_f32);
// copy.cc
SK_DECLARE_KERNEL(copy);
// prefetch.cc
SK_DECLARE_KERNEL(prefetch);

// ---- matmul family ----
// matmul_bf16.cc, matmul_f16.cc, quantize.cc, matmul_w8a8.cc, grouped_matmul.cc
SK_DECLARE_KERNEL(matmul_bf16);
int32_t matmul_bf16_prologue(const sk_kernel_args* args, const sk_core_ctx* core);
SK_DECLARE_KERNEL(matmul_f16);
int32_t matmul_f16_prologue(const sk_kernel_args* args, const sk_core_ctx* core);
SK_DECLARE_KERNEL(quantize_i8);
SK_DECLARE_KERNEL(matmul_w8a8);
int32_t matmul_w8a8_prologue(const sk_kernel_args* args, const sk_core_ctx* core);
SK_DECLARE_KERNEL(matmul_w8a8_dyn);
int32_t matmul_w8a8_dyn_prologue(const sk_kernel_args* args, const sk_core_ctx* core);
// matmul_w4.cc
SK_DECLARE_KERNEL(matmul_w4);
int32_t matmul_w4_prologue(const sk_kernel_args* args, const sk_core_ctx* core);
SK_DECLARE_KERNEL(matmul_w4a8_dyn);
int32_t matmul_w4a8_dyn_prologue(const sk_kernel_args* args, const sk_core_ctx* core);
SK_DECLARE_KERNEL(grouped_matmul_f32);
int32_t grouped_matmul_f32_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
SK_DECLARE_KERNEL(grouped_matmul_bf16);
int32_t grouped_matmul_bf16_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
SK_DECLARE_KERNEL(grouped_matmul_f16);
int32_t grouped_matmul_f16_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
SK_DECLARE_KERNEL(grouped_matmul_w8a8_dyn);
int32_t grouped_matmul_w8a8_dyn_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
// ---- attention family ----
// layer_norm.cc
SK_DECLARE_KERNEL(layer_norm_f32);
// rope.cc
SK_DECLARE_KERNEL(rope_f32);
// kv_cache.cc
SK_DECLARE_KERNEL(kv_append_f32);
SK_DECLARE_KERNEL(kv_append_bf16);
SK_DECLARE_KERNEL(mla_cache_append_f32);
SK_DECLARE_KERNEL(mla_cache_append_bf16);
// attention_paged.cc
SK_DECLARE_KERNEL(paged_attention_f32);
SK_DECLARE_KERNEL(paged_attention_bf16);
SK_DECLARE_KERNEL(paged_attention_prefill_f32);
SK_DECLARE_KERNEL(paged_attention_prefill_bf16);
// mla.cc
SK_DECLARE_KERNEL(mla_attention_f32);
SK_DECLARE_KERNEL(mla_attention_bf16);
SK_DECLARE_KERNEL(mla_attention_prefill_f32);
SK_DECLARE_KERNEL(mla_attention_prefill_bf16);
// attention_batched_matmul.cc
SK_DECLARE_KERNEL(batched_matmul_f32);
// ---- MoE and sampling family ----
// moe_router.cc
SK_DECLARE_KERNEL(moe_router_f32);
uint64_t moe_router_f32_workspace(const sk_kernel_args* args);
// moe_dispatch.cc
SK_DECLARE_KERNEL(moe_dispatch_f32);
uint64_t moe_dispatch_f32_workspace(const sk_kernel_args* args);
SK_DECLARE_KERNEL(moe_combine_f32);
SK_DECLARE_KERNEL(moe_combine_shared_f32);
// sampling.cc
SK_DECLARE_KERNEL(argmax_f32);
SK_DECLARE_KERNEL(sample_f32);
uint64_t sample_f32_workspace(const sk_kernel_args* args);

// ---- general tensor family (tensor.*, docs/kernels_tensor.md; tiling: the validated plan) ----
// tensor_unary.cc
SK_DECLARE_KERNEL(tensor_unary);
int32_t tensor_unary_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
SK_DECLARE_KERNEL(tensor_cast);
int32_t tensor_cast_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
// tensor_binary.cc
SK_DECLARE_KERNEL(tensor_binary);
int32_t tensor_binary_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
SK_DECLARE_KERNEL(tensor_binary_scalar);
int32_t tensor_binary_scalar_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
SK_DECLARE_KERNEL(tensor_where);
int32_t tensor_where_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
// tensor_reduce.cc
SK_DECLARE_KERNEL(tensor_reduce);
int32_t tensor_reduce_tiling(const sk_kernel_args* args, void* tiling, uint32_t capacity, uint32_t* size);
SK_DECLARE_KERNEL(tensor_cumsum);
// tensor_index.cc
SK_DECLARE_KERNEL(tensor_index_select);
SK_DECLARE_KERNEL(tensor_gather);
SK_DECLARE_KERNEL(tensor_index_copy);
SK_DECLARE_KERNEL(tensor_index_put);
// tensor_topk.cc
SK_DECLARE_KERNEL(tensor_topk);
uint64_t tensor_topk_workspace(const sk_kernel_args* args);
// tensor_mm.cc
SK_DECLARE_KERNEL(tensor_batched_mm);
uint64_t tensor_batched_mm_workspace(const sk_kernel_args* args);
// tensor_sdpa.cc
SK_DECLARE_KERNEL(tensor_sdpa);
uint64_t tensor_sdpa_workspace(const sk_kernel_args* args);

}  // namespace sk::kernels

#undef SK_DECLARE_KERNEL

#endif  // SUPERKERNEL_KERNELS_KERNELS_H_
