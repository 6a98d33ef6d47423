"""Element types between torch and superkernel."""

from __future__ import annotations

import torch

from . import _superkernel
from ._errors import UnimplementedError

DType = _superkernel.DType

_TO_SK = {
    torch.float32: DType.f32,
    torch.bfloat16: DType.bf16,
    torch.float16: DType.f16,
    torch.int8: DType.i8,
    torch.int32: DType.i32,
    torch.int64: DType.i64,
}
if hasattr(DType, "bool"):
    _TO_SK[torch.bool] = getattr(DType, "bool")
_TO_TORCH = {v: k for k, v in _TO_SK.items()}


def has_sk_dtype(dtype: torch.dtype) -> bool:
    return dtype in _TO_SK


def to_sk(dtype: torch.dtype, what: str = "tensor") -> DType:
    try:
        return _TO_SK[dtype]
    except KeyError:
        names = ", ".join(str(d).replace("torch.", "") for d in _TO_SK)
        raise UnimplementedError(f"{what}: dtype {dtype} has no superkernel dtype ({names})") from None


def to_torch(dtype: DType) -> torch.dtype:
    return _TO_TORCH[dtype]


def result_type(a, b) -> torch.dtype:
    """torch's type promotion (``torch.result_type``) of two operands: tensors, real or fake (their
    dtype and whether they are 0-d is what counts), or Python scalars."""

    def proxy(x):
        if isinstance(x, torch.Tensor):
            return torch.empty(() if x.dim() == 0 else (1,), dtype=x.dtype)
        return x

    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        return torch.result_type(torch.tensor(a), b)
    return torch.result_type(proxy(a), proxy(b))
