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
    {"prefetch", prefetch, 0.0, 0.0},
    // ---- matmul family ----
    {"matmul.bf16", matmul_bf16, 8e-2, 1e-4},
    {"matmul.f16", matmul_f16, 1e-4, 1e-4},
    {"quantize.i8", quantize_i8, 0.0, 0.0},
    {"matmul.w8a8", matmul_w8a8, 0.0, 0.0},
    {"matmul.w8a8_dyn", matmul_w8a8_dyn, 0.0, 0.0},
    {"matmul.w4", matmul_w4, 1e-4, 1e-4},
    {"matmul.w4a8_dyn", matmul_w4a8_dyn, 0.0, 0.0},
    {"grouped_matmul.f32", grouped_matmul_f32, 1e-4, 1e-4},
    {"grouped_matmul.bf16", grouped_matmul_bf16, 8e-2, 1e-4},
    {"grouped_matmul.f16", grouped_matmul_f16, 1e-4, 1e-4},
    {"grouped_matmul.w8a8_dyn", grouped_matmul_w8a8_dyn, 0.0, 0.0},
    // ---- attention family ----
    {"layer_norm.f32", layer_norm_f32, 1e-5, 1e-5},
    {"rope.f32", rope_f32, 1e-6, 1e-5},
    {"kv_append.f32", kv_append_f32, 0.0, 0.0},
    {"kv_append.bf16", kv_append_bf16, 0.0, 0.0},
    {"mla_cache_append.f32", mla_cache_append_f32, 0.0, 0.0},
    {"mla_cache_append.bf16", mla_cache_append_bf16, 0.0, 0.0},
    {"paged_attention.f32", paged_attention_f32, 1e-5, 1e-4},
    {"paged_attention.bf16", paged_attention_bf16, 1e-5, 1e-4},
    {"paged_attention_prefill.f32", paged_attention_prefill_f32, 1e-5, 1e-4},
    {"paged_attention_prefill.bf16", paged_attention_prefill_bf16, 1e-5, 1e-4},
    {"mla_attention.f32", mla_attention_f32, 1e-5, 1e-4},
    {"mla_attention.bf16", mla_attention_bf16, 1e-5, 1e-4},
    {"mla_attention_prefill.f32", mla_attention_prefill_f32, 1e-5, 1e-4},
    {"mla_attention_prefill.bf16", mla_attention_prefill_bf16, 1e-5, 1e-4},
    {"batched_matmul.f32", batched_matmul_f32, 1e-4, 1e-4},
    // ---- MoE and sampling family ----
    {"moe_router.f32", moe_router_f32, 1e-6, 2e-5},
    {"moe_dispatch.f32", moe_dispatch_f32, 0.0, 0.0},
    {"moe_combine.f32", moe_combine_f32, 1e-5, 1e-5},
    {"moe_combine_shared.f32", moe_combine_shared_f32, 1e-5, 1e-5},
    {"argmax.f32", argmax_f32, 0.0, 0.0},
    {"sample.f32", sample_f32, 0.0, 0.0},
    // ---- general tensor family ----
    {"tensor.unary", tensor_unary, 1e-6, 1e-5},
    {"tensor.cast", tensor_cast, 0.0, 0.0},
    {"tensor.binary", tensor_binary, 1e-37, 1e-6},
    {"tensor.binary_scalar", tensor_binary_scalar, 1e-37, 1e-6},
    {"tensor.where", tensor_where, 0.0, 0.0},
    {"tensor.reduce", tensor_reduce, 1e-5, 1e-5},
    {"tensor.cumsum", tensor_cumsum, 1e-5, 1e-5},
    {"tensor.index_select", tensor_index_select, 0.0, 0.0},
    {"tensor.gather", tensor_gather, 0.0, 0.0},
    {"tensor.index_copy", tensor_index_copy, 0.0, 0.0},
    {"tensor.index_put", tensor_index_put, 0.0, 0.0},
    {"tensor.topk", tensor_topk, 0.0, 0.0},
    {"tensor.batched_mm", tensor_batched_mm, 1e-4, 1e-4},
    {"tensor.sdpa", tensor_sdpa, 1e-5, 1e-4},
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
