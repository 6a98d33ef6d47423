/* Attribute blobs of the MoE and sampling kernels (moe_router, moe_dispatch, sample). Plain C
 * with fixed-size fields so the layout is the one `sk_kernel_args::attrs` carries; the kernels
 * check `attrs_size == sizeof(struct)` and memcpy the blob (it has no alignment guarantee).
 * moe_combine, moe_combine_shared and argmax take no attributes. Contracts: docs/kernels_moe.md.
 */
#ifndef SUPERKERNEL_ATTRS_MOE_H_
#define SUPERKERNEL_ATTRS_MOE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sk_moe_router_attrs::scoring */
enum { SK_MOE_SCORING_SOFTMAX = 0, SK_MOE_SCORING_SIGMOID = 1 };

/* moe_router.f32(logits [T, E+Z], bias [E+Z]) -> topk_ids i32 [T, top_k], topk_weights f32 [T, top_k] */
typedef struct sk_moe_router_attrs {
  int32_t top_k;               /* 1 .. E+Z */
  int32_t num_real_experts;    /* E (0 .. E+Z); ids >= E are zero-computation experts */
  int32_t scoring;             /* SK_MOE_SCORING_* */
  int32_t normalize;           /* 1: divide the chosen weights by their sum (+1e-20) */
  float routed_scaling_factor; /* multiplies the final weights (finite) */
} sk_moe_router_attrs;

/* moe_router.f32 with DeepSeek-V3's group-limited selection: pass this struct instead of
 * sk_moe_router_attrs (the kernel tells the two apart by attrs_size). The E+Z experts form
 * n_group groups of (E+Z)/n_group consecutive ids; a group's score is the sum of its two largest
 * selection keys; only experts of the topk_group best groups can be chosen.
 *
 *   sk_moe_router_group_attrs a = {{8, 256, SK_MOE_SCORING_SIGMOID, 1, 2.5f}, 8, 4};
 */
typedef struct sk_moe_router_group_attrs {
  sk_moe_router_attrs base;
  int32_t n_group;    /* >= 1, divides E+Z; 1 is plain top-k */
  int32_t topk_group; /* 1 .. n_group, with top_k <= topk_group * (E+Z)/n_group */
} sk_moe_router_group_attrs;

/* moe_dispatch.f32(x [T, D], topk_ids i32 [T, k]) -> x_sorted [T*k, D], counts i32 [E], row_map i32 [T, k] */
typedef struct sk_moe_dispatch_attrs {
  int32_t num_real_experts; /* E >= 0 */
  int32_t num_zero_experts; /* Z >= 0: valid ids are 0 .. E+Z-1 */
} sk_moe_dispatch_attrs;

/* sample.f32(logits [B, V], step i64 [1]) -> ids i32 [B] */
typedef struct sk_sample_attrs {
  uint64_t seed;     /* with `step` and the row, keys the counter-based generator */
  float temperature; /* >= 0, finite; 0 selects the argmax */
  float top_p;       /* (0, 1]; 1 is off */
  int32_t top_k;     /* >= 0; 0 (or >= V) is off */
  int32_t reserved;  /* must be 0 */
} sk_sample_attrs;

#ifdef __cplusplus
}
#endif

#endif /* SUPERKERNEL_ATTRS_MOE_H_ */
