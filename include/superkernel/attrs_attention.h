/* Attribute blobs of the attention-family kernels (layer_norm, rope, KV cache, paged decode
 * attention, MLA). Plain C so the layout is the one the kernel ABI passes through
 * `sk_kernel_args::attrs`; docs/kernels_attention.md describes every kernel's contract.
 *
 * Kernels without attributes: kv_append.*, mla_cache_append.*, batched_matmul.f32. */
#ifndef SUPERKERNEL_ATTRS_ATTENTION_H_
#define SUPERKERNEL_ATTRS_ATTENTION_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* layer_norm.f32(x[..., D], gamma[D], beta[D]) -> y[..., D] */
typedef struct sk_layer_norm_attrs {
  float eps; /* finite, >= 0 */
} sk_layer_norm_attrs;

/* rope.f32(x[T, H, Dh] or x[T, H * Dh], positions i32[T], cos_sin_cache[max_pos, rotary_dim])
 * -> out (shape of x) */
typedef struct sk_rope_attrs {
  int32_t head_dim;   /* Dh; must equal x.shape[2] for a rank-3 x and divide x.shape[1] for rank 2 */
  int32_t rotary_dim; /* even, 0 < rotary_dim <= head_dim; dims [rotary_dim, head_dim) are copied */
  int32_t neox_style; /* 1: rotate halves (GPT-NeoX, Llama); 0: interleaved pairs (GPT-J) */
} sk_rope_attrs;

/* paged_attention.{f32,bf16}(q[B, Hq, Dh], k_cache, v_cache[num_blocks, block_size, Hkv, Dh],
 * block_tables i32[B, max_blocks], context_lens i32[B]) -> out[B, Hq, Dh]
 * paged_attention_prefill.{f32,bf16}(q[T, Hq, Dh], k_cache, v_cache, block_tables i32[B, max_blocks],
 * seq_ids i32[T], positions i32[T]) -> out[T, Hq, Dh] (token t attends to positions 0..positions[t]
 * of sequence seq_ids[t]) */
typedef struct sk_paged_attention_attrs {
  float scale; /* softmax scale, usually 1 / sqrt(Dh); finite */
} sk_paged_attention_attrs;

/* mla_attention.{f32,bf16}(q_latent[B, H, R], q_pe[B, H, P],
 * latent_cache[num_blocks, block_size, R + P], block_tables i32[B, max_blocks],
 * context_lens i32[B]) -> out[B, H, R]
 * mla_attention_prefill.{f32,bf16}(q_latent[T, H, R], q_pe[T, H, P], latent_cache, block_tables,
 * seq_ids i32[T], positions i32[T]) -> out[T, H, R] */
typedef struct sk_mla_attention_attrs {
  int32_t kv_lora_rank; /* R */
  int32_t rope_dim;     /* P (may be 0) */
  float scale;          /* softmax scale; finite */
} sk_mla_attention_attrs;

#ifdef __cplusplus
}
#endif

#endif /* SUPERKERNEL_ATTRS_ATTENTION_H_ */
