/* Attribute blobs of the general tensor kernels (tensor.*), the kernels behind
 * include/superkernel/tensor_ops.h. Plain C with fixed-size fields so the layout is the one
 * `sk_kernel_args::attrs` carries; the kernels check `attrs_size == sizeof(struct)` and memcpy
 * the blob. Every kernel reads inputs of any strides (0 included: broadcast / expand views) and
 * writes a dense output; contracts (dtypes, shapes, numerics): docs/kernels_tensor.md.
 *
 * Kernels without attributes: tensor.where, tensor.cast, tensor.batched_mm. */
#ifndef SUPERKERNEL_ATTRS_TENSOR_H_
#define SUPERKERNEL_ATTRS_TENSOR_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sk_unary_attrs::op (sk::UnaryOp has the same values). */
enum {
  SK_UNARY_NEG = 0,
  SK_UNARY_EXP = 1,
  SK_UNARY_LOG = 2,
  SK_UNARY_SQRT = 3,
  SK_UNARY_RSQRT = 4,
  SK_UNARY_SIN = 5,
  SK_UNARY_COS = 6,
  SK_UNARY_TANH = 7,
  SK_UNARY_SIGMOID = 8,
  SK_UNARY_SILU = 9,
  SK_UNARY_GELU = 10,      /* erf form: x / 2 * (1 + erf(x / sqrt(2))) */
  SK_UNARY_GELU_TANH = 11, /* tanh form: x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) */
  SK_UNARY_RELU = 12,
  SK_UNARY_ABS = 13,
  SK_UNARY_RECIPROCAL = 14,
  SK_UNARY_LOGICAL_NOT = 15,
  SK_UNARY_OP_COUNT = 16
};

/* tensor.unary(x) -> out (x's shape) */
typedef struct sk_unary_attrs {
  int32_t op; /* SK_UNARY_* */
} sk_unary_attrs;

/* sk_binary_attrs::op and sk_binary_scalar_attrs::op (sk::BinaryOp has the same values). */
enum {
  SK_BINARY_ADD = 0,
  SK_BINARY_SUB = 1,
  SK_BINARY_MUL = 2,
  SK_BINARY_DIV = 3,
  SK_BINARY_POW = 4,
  SK_BINARY_MAXIMUM = 5,
  SK_BINARY_MINIMUM = 6,
  SK_BINARY_EQ = 7,
  SK_BINARY_NE = 8,
  SK_BINARY_LT = 9,
  SK_BINARY_LE = 10,
  SK_BINARY_GT = 11,
  SK_BINARY_GE = 12,
  SK_BINARY_LOGICAL_AND = 13,
  SK_BINARY_LOGICAL_OR = 14,
  SK_BINARY_OP_COUNT = 15
};

/* tensor.binary(a, b) -> out; a and b broadcast (numpy rules) to out's shape. */
typedef struct sk_binary_attrs {
  int32_t op; /* SK_BINARY_* */
} sk_binary_attrs;

/* tensor.binary_scalar(a) -> out (a's shape): op(a, scalar), or op(scalar, a) with scalar_first. */
typedef struct sk_binary_scalar_attrs {
  int32_t op;           /* SK_BINARY_* */
  int32_t scalar_first; /* 0 or 1 */
  double scalar;        /* integral when the op computes on integers (docs/kernels_tensor.md) */
} sk_binary_scalar_attrs;

/* sk_reduce_attrs::op (sk::ReduceOp has the same values). */
enum {
  SK_REDUCE_SUM = 0,
  SK_REDUCE_MEAN = 1,
  SK_REDUCE_MAX = 2,
  SK_REDUCE_MIN = 3,
  SK_REDUCE_ARGMAX = 4,
  SK_REDUCE_ARGMIN = 5,
  SK_REDUCE_OP_COUNT = 6
};

/* tensor.reduce(x) -> out: x's shape without the dims in dims_mask (kept as 1 with keepdim). */
typedef struct sk_reduce_attrs {
  int32_t op;         /* SK_REDUCE_* */
  uint32_t dims_mask; /* bit d: dim d of x is reduced (at least one bit, below x's rank) */
  int32_t keepdim;    /* 0 or 1 */
} sk_reduce_attrs;

/* tensor.cumsum(x) -> out (x's shape) */
typedef struct sk_cumsum_attrs {
  int32_t dim; /* 0 .. rank - 1 */
} sk_cumsum_attrs;

/* tensor.topk(x) -> values (x's dtype), indices i64; x's shape with k along dim */
typedef struct sk_topk_attrs {
  int64_t k;       /* 0 .. x.shape[dim] */
  int32_t dim;     /* 0 .. rank - 1 */
  int32_t largest; /* 1: the k largest, 0: the k smallest */
} sk_topk_attrs;

/* tensor.index_select(x, index) -> out, tensor.gather(x, index) -> out,
 * tensor.index_copy(dst, index, src) -> dst (in place) */
typedef struct sk_index_attrs {
  int32_t dim; /* 0 .. rank - 1 */
} sk_index_attrs;

/* tensor.index_put(dst, values, index_0, ..., index_{n-1}) -> dst (in place) */
typedef struct sk_index_put_attrs {
  int32_t accumulate; /* 0: dst[i...] = values, 1: dst[i...] += values */
} sk_index_put_attrs;

/* tensor.sdpa(q, k, v[, mask]) -> out */
typedef struct sk_sdpa_attrs {
  float scale;       /* finite, > 0 */
  int32_t is_causal; /* 0 or 1: query i attends to keys j <= i (top-left aligned) */
} sk_sdpa_attrs;

#ifdef __cplusplus
}
#endif

#endif /* SUPERKERNEL_ATTRS_TENSOR_H_ */
