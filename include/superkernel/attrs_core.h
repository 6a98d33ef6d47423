/* Attribute blobs of the built-in kernels. Shared by the graph builders (src/ir) that fill them
 * and the built-in kernel package (src/kernels) that reads them; plain C so the layout is the
 * one the kernel ABI passes through `sk_kernel_args::attrs`. */
#ifndef SUPERKERNEL_ATTRS_CORE_H_
#define SUPERKERNEL_ATTRS_CORE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rms_norm(x[..., D], weight[D]) -> y[..., D] */
typedef struct sk_rms_norm_attrs {
  float eps;
} sk_rms_norm_attrs;

/* prefetch(tensor, depend_on): warms bytes [offset, offset + bytes) of tensor, relative to its
 * data pointer. bytes == 0 is a no-op. */
typedef struct sk_prefetch_attrs {
  int64_t offset;
  int64_t bytes;
} sk_prefetch_attrs;

/* No attributes: add, mul, softmax, silu_mul, matmul, embedding, copy. */

#ifdef __cplusplus
}
#endif

#endif /* SUPERKERNEL_ATTRS_CORE_H_ */
