"""Builders of the built-in ops (include/superkernel/ops.h), graph first as in C++:

    y = superkernel.ops.rms_norm(g, superkernel.ops.matmul(g, x, w), gamma, 1e-6)

The library kernels' typed builders are in ``superkernel.nn`` (include/superkernel/nn.h).
"""

from ._superkernel import add, copy, embedding, matmul, mul, prefetch, rms_norm, silu_mul, softmax  # noqa: F401

__all__ = ["add", "mul", "silu_mul", "rms_norm", "softmax", "matmul", "embedding", "copy", "prefetch"]
