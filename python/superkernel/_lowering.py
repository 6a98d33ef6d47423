"""Core-ATen FX nodes -> superkernel graph ops, through ONE table (``ATEN_LOWERINGS``).

Each row maps an ATen overload to a ``Row``: ``check(node)`` says, from the node's fake values
(dtypes, shapes, arguments) alone, whether a kernel can run it (None) or why not (the reason
`explain` prints for the host step that runs it in torch instead); ``lower(ctx, node)`` appends
the graph ops and returns the node's value (a graph Tensor, or a tuple of them). Kernel ops
(``torch.ops.superkernel.*``) lower through their KernelSignature; markers, graph inputs,
mutations and host steps are the lowering context's own business (_compiled.py).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from . import _superkernel
from ._kernel_ops import signature_of
from ._torch_types import has_sk_dtype, result_type, to_sk

aten = torch.ops.aten
_sk = _superkernel

try:
    from torch._higher_order_ops.auto_functionalize import auto_functionalized, auto_functionalized_v2

    AUTO_FUNCTIONALIZED = (auto_functionalized, auto_functionalized_v2)
except ImportError:  # pragma: no cover - older torch
    AUTO_FUNCTIONALIZED = ()


# ---- what the loaded kernels and the extension offer --------------------------------------


class Capabilities:
    """Kernels of the runtime, and tensor-op builders of the extension."""

    def __init__(self, kernel_names: list[str]):
        self.kernels = set(kernel_names)
        self.tensor_ops = getattr(_sk, "tensor_ops", None)
        self.has_expand = hasattr(_sk.Graph, "expand")
        self.has_bool = hasattr(_sk.DType, "bool")

    def kernel(self, name: str) -> bool:
        return name in self.kernels

    def tensor(self, family: str) -> bool:
        """The general tensor kernel `family` (tensor.<family>) and its builder are there."""
        return self.tensor_ops is not None and hasattr(self.tensor_ops, family) and f"tensor.{family}" in self.kernels


# ---- node helpers --------------------------------------------------------------------------


def val(node: Any):
    return node.meta.get("val") if isinstance(node, fx.Node) else node


def tensors_of(v) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in tensors_of(x)]
    return []


def node_tensors(node: fx.Node) -> list[torch.Tensor]:
    """Fake values of the node's tensor inputs and outputs."""
    ins = []
    for a in node.all_input_nodes:
        ins += tensors_of(val(a))
    return ins + tensors_of(val(node))


def dtype_reason(node: fx.Node, caps: Capabilities) -> str | None:
    for t in node_tensors(node):
        if not has_sk_dtype(t.dtype):
            return f"dtype {t.dtype} has no superkernel dtype"
    return None


def shape(node) -> list[int]:
    return list(val(node).shape)


def dtype(node) -> torch.dtype:
    return val(node).dtype


def is_float(node) -> bool:
    return dtype(node).is_floating_point


def norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


# ---- the lowering context's interface the rows use ------------------------------------------


class Ctx:
    """What rows see: the graph, the values of earlier nodes, capabilities, helpers."""

    g: _sk.Graph
    caps: Capabilities

    def value(self, node) -> Any:  # pragma: no cover - implemented by _compiled.Lowerer
        raise NotImplementedError

    def name(self, node: fx.Node) -> str:  # pragma: no cover
        raise NotImplementedError

    def info(self, t: _sk.Tensor) -> _sk.TensorInfo:
        return self.g.tensor(t)

    def dense(self, t: _sk.Tensor, name: str) -> _sk.Tensor:
        """t, or a dense copy of it when it is a strided view."""
        i = self.g.tensor(t)
        if is_dense(list(i.shape), list(i.strides)):
            return t
        return _sk.copy(self.g, t, name + "_dense")

    def lower_index_update(self, node: fx.Node):  # pragma: no cover - _compiled.Lowerer
        raise NotImplementedError


def is_dense(shape: list[int], strides: list[int]) -> bool:
    expect = 1
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1 and st != expect:
            return False
        expect *= s
    return True


@dataclass(frozen=True)
class Row:
    """One row of the table: check(node, caps) -> None or a reason; lower(ctx, node) -> value."""

    check: Callable[[fx.Node, Capabilities], str | None]
    lower: Callable[[Ctx, fx.Node], Any]


def _all(*checks):
    def check(node, caps):
        for c in checks:
            r = c(node, caps)
            if r:
                return r
        return None

    return check


def _ok(node, caps):
    return None


def _needs(family: str):
    def check(node, caps):
        if not caps.tensor(family):
            return f"no tensor.{family} kernel in the loaded packages"
        return None

    return check


# ---- views --------------------------------------------------------------------------------


def _lower_reshape(ctx: Ctx, node: fx.Node):
    x = ctx.value(node.args[0])
    return ctx.g.reshape(ctx.dense(x, ctx.name(node)), shape(node), ctx.name(node))


def _lower_alias(ctx: Ctx, node: fx.Node):
    return ctx.value(node.args[0])


def _lower_permute(ctx: Ctx, node: fx.Node):
    x = ctx.value(node.args[0])
    rank = len(shape(node.args[0]))
    perm = [norm_dim(d, rank) for d in node.args[1]]
    if perm == list(range(rank)):
        return x
    return ctx.g.transpose(x, perm, ctx.name(node))


def _slice_bounds(node: fx.Node):
    src = shape(node.args[0])
    dim = norm_dim(node.args[1] if len(node.args) > 1 else 0, len(src))
    start = node.args[2] if len(node.args) > 2 and node.args[2] is not None else 0
    end = node.args[3] if len(node.args) > 3 and node.args[3] is not None else src[dim]
    step = node.args[4] if len(node.args) > 4 else 1
    return (dim, *_clamp_range(start, end, src[dim]), step)


def _clamp_range(start: int, end: int, n: int) -> tuple[int, int]:
    """A slice's [start, end) of a dim of n as torch clamps it (negative: from the end)."""
    start = max(0, min(n, start + n if start < 0 else start))
    return start, max(start, min(n, end + n if end < 0 else end))


def _lower_slice(ctx: Ctx, node: fx.Node):
    """x[start:end:step] along a dim: a view (the dim's stride times the step)."""
    dim, start, end, step = _slice_bounds(node)
    x = ctx.value(node.args[0])
    if start == 0 and end == shape(node.args[0])[dim] and step == 1:
        return x
    return ctx.g.slice(x, dim, start, end, step, name=ctx.name(node))


def _lower_select(ctx: Ctx, node: fx.Node):
    src = shape(node.args[0])
    dim = norm_dim(node.args[1], len(src))
    index = node.args[2] + src[dim] if node.args[2] < 0 else node.args[2]
    x = ctx.g.slice(ctx.value(node.args[0]), dim, index, index + 1, name=ctx.name(node) + "_slice")
    return ctx.g.reshape(ctx.dense(x, ctx.name(node)), shape(node), ctx.name(node))


def _lower_split(ctx: Ctx, node: fx.Node):
    """split / split_with_sizes: one slice view per piece."""
    src = shape(node.args[0])
    dim = norm_dim(node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0), len(src))
    sizes = node.args[1]
    if isinstance(sizes, int):
        sizes = [min(sizes, src[dim] - b) for b in range(0, src[dim], sizes)]
    x = ctx.value(node.args[0])
    pieces, begin = [], 0
    for i, n in enumerate(sizes):
        pieces.append(ctx.g.slice(x, dim, begin, begin + n, name=f"{ctx.name(node)}_{i}"))
        begin += n
    return tuple(pieces)


def _check_expand(node, caps):
    return None if caps.has_expand else "no expand view in this build"


def _lower_expand(ctx: Ctx, node: fx.Node):
    x = ctx.value(node.args[0])
    if shape(node) == shape(node.args[0]):
        return x
    return ctx.g.expand(x, shape(node), ctx.name(node))


# ---- copies and casts -----------------------------------------------------------------------


def _lower_clone(ctx: Ctx, node: fx.Node):
    return _sk.copy(ctx.g, ctx.value(node.args[0]), ctx.name(node))


def _check_to_copy(node, caps):
    src, dst = dtype(node.args[0]), dtype(node)
    if src == dst:
        return None
    return None if caps.tensor("cast") else f"cast {src} -> {dst}: no tensor.cast kernel in the loaded packages"


def _lower_to_copy(ctx: Ctx, node: fx.Node):
    x = ctx.value(node.args[0])
    if dtype(node.args[0]) == dtype(node):
        return x  # functional graph: nobody writes the copy, so the value itself serves
    return ctx.caps.tensor_ops.cast(ctx.g, x, to_sk(dtype(node)), ctx.name(node))


def _check_copy(node, caps):
    dst, src = node.args[0], node.args[1]
    if dtype(dst) != dtype(src) and not caps.tensor("cast"):
        return f"copy {dtype(src)} -> {dtype(dst)}: no tensor.cast kernel in the loaded packages"
    if shape(dst) != shape(src) and not caps.has_expand:
        return "copy with broadcasting: no expand view in this build"
    return None


def _lower_copy(ctx: Ctx, node: fx.Node):
    """aten.copy(dst, src), functionalisation's form of dst.copy_(src) (and what dynamo leaves of
    a synchronous dist.all_reduce(t)): src in dst's dtype, broadcast to dst's shape."""
    dst, src = node.args[0], node.args[1]
    x = _as_dtype(ctx, node, src, dtype(dst), "src")
    want, have = shape(dst), shape(src)
    if want == have:
        return x
    if len(have) < len(want):
        x = ctx.g.reshape(ctx.dense(x, ctx.name(node) + "_src"), [1] * (len(want) - len(have)) + have,
                          ctx.name(node) + "_ranked")
    return ctx.dense(ctx.g.expand(x, want, ctx.name(node) + "_expand"), ctx.name(node))


# ---- element-wise ---------------------------------------------------------------------------

# ATen overload -> BinaryOp name
_BINARY = {
    aten.add.Tensor: "add",
    aten.sub.Tensor: "sub",
    aten.mul.Tensor: "mul",
    aten.div.Tensor: "div",
    aten.pow.Tensor_Tensor: "pow",
    aten.pow.Tensor_Scalar: "pow",
    aten.maximum.default: "maximum",
    aten.minimum.default: "minimum",
    aten.eq.Tensor: "eq",
    aten.eq.Scalar: "eq",
    aten.ne.Tensor: "ne",
    aten.ne.Scalar: "ne",
    aten.lt.Tensor: "lt",
    aten.lt.Scalar: "lt",
    aten.le.Tensor: "le",
    aten.le.Scalar: "le",
    aten.gt.Tensor: "gt",
    aten.gt.Scalar: "gt",
    aten.ge.Tensor: "ge",
    aten.ge.Scalar: "ge",
    aten.logical_and.default: "logical_and",
    aten.logical_or.default: "logical_or",
    aten.add.Scalar: "add",
    aten.sub.Scalar: "sub",
    aten.mul.Scalar: "mul",
    aten.div.Scalar: "div",
}
# Bitwise ops of bool tensors are the logical ones.
_BITWISE_BOOL = {aten.bitwise_and.Tensor: "logical_and", aten.bitwise_or.Tensor: "logical_or"}


def _check_bitwise(node, caps):
    if not all(isinstance(a, fx.Node) and dtype(a) == torch.bool for a in node.args[:2]):
        return "bitwise op of non-bool tensors"
    return None if caps.tensor("binary") else "no tensor.binary kernel in the loaded packages"


def _lower_bitwise(ctx: Ctx, node: fx.Node):
    T = ctx.caps.tensor_ops
    op = getattr(T.BinaryOp, _BITWISE_BOOL[node.target])
    return T.binary(ctx.g, ctx.value(node.args[0]), ctx.value(node.args[1]), op, ctx.name(node))


def _check_bitwise_not(node, caps):
    if dtype(node.args[0]) != torch.bool:
        return "bitwise_not of a non-bool tensor"
    return None if caps.tensor("unary") else "no tensor.unary kernel in the loaded packages"


def _lower_bitwise_not(ctx: Ctx, node: fx.Node):
    T = ctx.caps.tensor_ops
    return T.unary(ctx.g, ctx.value(node.args[0]), T.UnaryOp.logical_not, ctx.name(node))


def _alpha(node: fx.Node):
    return node.kwargs.get("alpha", 1)


def _legacy_binary_kernel(node: fx.Node) -> str | None:
    """add.f32 / mul.f32 (b of a's shape or a suffix of it), used before tensor.binary exists."""
    op = _BINARY.get(node.target)
    if op not in ("add", "mul") or _alpha(node) != 1:
        return None
    a, b = node.args[0], node.args[1]
    if not (isinstance(a, fx.Node) and isinstance(b, fx.Node)):
        return None
    if dtype(a) != torch.float32 or dtype(b) != torch.float32 or dtype(node) != torch.float32:
        return None
    sa, sb = shape(a), shape(b)
    out = shape(node)
    if sa == out and sb == sa[len(sa) - len(sb):]:
        return "ab"
    if sb == out and sa == sb[len(sb) - len(sa):]:
        return "ba"
    return None


def _scalar_ok(x) -> bool:
    return isinstance(x, (bool, int, float))


# Ops torch computes on bool operands as the logical ones (True + True is True).
_BOOL_AS_LOGICAL = {"add": "logical_or", "mul": "logical_and", "maximum": "logical_or", "minimum": "logical_and"}


def _binary_compute(node: fx.Node) -> torch.dtype:
    """The dtype torch computes a binary op in: its type promotion of the two operands (tensors
    and Python scalars, 0-d tensors ranking below dimensioned ones), true division of integers
    in the default float dtype, the logical ops on bools."""
    op = _BINARY[node.target]
    if op in ("logical_and", "logical_or"):
        return torch.bool
    compute = result_type(val(node.args[0]), val(node.args[1]))
    if op == "div" and not compute.is_floating_point:
        compute = torch.get_default_dtype()
    return compute


def _casts_needed(node: fx.Node, compute: torch.dtype, operands) -> bool:
    return any(isinstance(x, fx.Node) and dtype(x) != compute for x in operands)


def _check_binary(node, caps):
    if _alpha(node) != 1:
        return "add/sub with alpha"
    if node.target is aten.div.Tensor and node.kwargs.get("rounding_mode") is not None:
        return "div with a rounding mode"
    if caps.tensor("binary") and caps.tensor("binary_scalar"):
        a, b = node.args[0], node.args[1]
        if not isinstance(a, fx.Node) and not isinstance(b, fx.Node):
            return "two scalar operands"
        for x in (a, b):
            if not isinstance(x, fx.Node) and not _scalar_ok(x):
                return f"scalar operand {x!r}"
        if _casts_needed(node, _binary_compute(node), (a, b)) and not caps.tensor("cast"):
            return "mixed dtypes: no tensor.cast kernel in the loaded packages"
        return None
    if _legacy_binary_kernel(node):
        return None
    return "no tensor.binary kernel in the loaded packages (add.f32/mul.f32 need b to be a suffix of a)"


def _as_dtype(ctx: Ctx, node: fx.Node, x, want: torch.dtype, role: str):
    """The graph value of operand x (a node) in dtype `want`: itself, or a cast of it."""
    v = ctx.value(x)
    if dtype(x) == want:
        return v
    return ctx.caps.tensor_ops.cast(ctx.g, v, to_sk(want), f"{ctx.name(node)}_{role}_{str(want)[6:]}")


def _lower_binary(ctx: Ctx, node: fx.Node):
    op = _BINARY[node.target]
    a, b = node.args[0], node.args[1]
    if not ctx.caps.tensor("binary"):
        order = _legacy_binary_kernel(node)
        x, y = (ctx.value(a), ctx.value(b)) if order == "ab" else (ctx.value(b), ctx.value(a))
        builder = _sk.add if op == "add" else _sk.mul
        return builder(ctx.g, x, y, ctx.name(node))
    T = ctx.caps.tensor_ops
    compute = _binary_compute(node)
    if compute == torch.bool:
        op = _BOOL_AS_LOGICAL.get(op, op)
    bop = getattr(T.BinaryOp, op)
    if isinstance(a, fx.Node) and isinstance(b, fx.Node):
        if _opmath_scalar(op, compute) and len(shape(b)) == 0 and dtype(b) != compute:
            # x * s / x / s for a 0-d s of another dtype: torch takes s's own value in f32.
            x, y = _as_dtype(ctx, node, a, torch.float32, "a"), _as_dtype(ctx, node, b, torch.float32, "b")
            r = T.binary(ctx.g, x, y, bop, ctx.name(node) + "_f32")
            return T.cast(ctx.g, r, to_sk(compute), ctx.name(node))
        x, y = _as_dtype(ctx, node, a, compute, "a"), _as_dtype(ctx, node, b, compute, "b")
        return T.binary(ctx.g, x, y, bop, ctx.name(node))
    if isinstance(a, fx.Node):
        s = _scalar_value(b, compute, _opmath_scalar(op, compute))
        return T.binary_scalar(ctx.g, _as_dtype(ctx, node, a, compute, "a"), s, bop, False, ctx.name(node))
    s = _scalar_value(a, compute, False)
    return T.binary_scalar(ctx.g, _as_dtype(ctx, node, b, compute, "b"), s, bop, True, ctx.name(node))


def _opmath_scalar(op: str, compute: torch.dtype) -> bool:
    """torch's CPU mul and div of a bf16/f16 tensor by a scalar second operand (a Python number or
    a 0-d tensor) use the scalar's own value in f32; every other op, and the scalar first, round
    it to the bf16/f16 dtype first."""
    return op in ("mul", "div") and compute in (torch.bfloat16, torch.float16)


def _scalar_value(s, compute: torch.dtype, opmath: bool) -> float:
    """A Python scalar as torch's kernel sees it: rounded to the compute dtype (f32 for opmath)."""
    if not compute.is_floating_point:
        return float(s)
    return float(torch.tensor(float(s), dtype=torch.float32 if opmath else compute))


def _check_rsub(node, caps):
    if not caps.tensor("binary_scalar"):
        return "no tensor.binary_scalar kernel in the loaded packages"
    if _alpha(node) != 1 or isinstance(node.args[1], fx.Node) or not _scalar_ok(node.args[1]):
        return "rsub with alpha or a tensor"
    if result_type(val(node.args[0]), node.args[1]) != dtype(node.args[0]) and not caps.tensor("cast"):
        return "rsub with a promoting scalar: no tensor.cast kernel in the loaded packages"
    return None


def _lower_rsub(ctx: Ctx, node: fx.Node):
    T = ctx.caps.tensor_ops
    compute = result_type(val(node.args[0]), node.args[1])
    x = _as_dtype(ctx, node, node.args[0], compute, "a")
    s = _scalar_value(node.args[1], compute, False)
    return T.binary_scalar(ctx.g, x, s, T.BinaryOp.sub, True, ctx.name(node))


_UNARY = {
    aten.neg.default: "neg",
    aten.exp.default: "exp",
    aten.log.default: "log",
    aten.sqrt.default: "sqrt",
    aten.rsqrt.default: "rsqrt",
    aten.sin.default: "sin",
    aten.cos.default: "cos",
    aten.tanh.default: "tanh",
    aten.sigmoid.default: "sigmoid",
    aten.silu.default: "silu",
    aten.relu.default: "relu",
    aten.abs.default: "abs",
    aten.reciprocal.default: "reciprocal",
    aten.logical_not.default: "logical_not",
    aten.gelu.default: "gelu",
}


def _unary_op_name(node: fx.Node) -> str:
    name = _UNARY[node.target]
    if name == "gelu" and node.kwargs.get("approximate", "none") == "tanh":
        return "gelu_tanh"
    return name


def _check_unary(node, caps):
    if not caps.tensor("unary"):
        return "no tensor.unary kernel in the loaded packages"
    if dtype(node.args[0]) != dtype(node) and not caps.tensor("cast"):
        return f"unary op of {dtype(node.args[0])} giving {dtype(node)}: no tensor.cast kernel in the loaded packages"
    return None


def _lower_unary(ctx: Ctx, node: fx.Node):
    """torch computes a float op of an integer tensor (exp, sin, ...) in its float result dtype,
    and logical_not of any tensor on its truth values: the operand is cast to that dtype first."""
    T = ctx.caps.tensor_ops
    x = _as_dtype(ctx, node, node.args[0], dtype(node), "x")
    return T.unary(ctx.g, x, getattr(T.UnaryOp, _unary_op_name(node)), ctx.name(node))


def _check_where(node, caps):
    if not caps.tensor("where"):
        return "no tensor.where kernel in the loaded packages"
    if not all(isinstance(a, fx.Node) for a in node.args[:3]):
        return "where with scalar operands"
    if dtype(node.args[0]) != torch.bool:
        return f"where with a {dtype(node.args[0])} condition"
    if _casts_needed(node, dtype(node), node.args[1:3]) and not caps.tensor("cast"):
        return "where of mixed dtypes: no tensor.cast kernel in the loaded packages"
    return None


def _lower_where(ctx: Ctx, node: fx.Node):
    """a and b in torch's promotion of the two (the node's dtype)."""
    c = ctx.value(node.args[0])
    a = _as_dtype(ctx, node, node.args[1], dtype(node), "a")
    b = _as_dtype(ctx, node, node.args[2], dtype(node), "b")
    return ctx.caps.tensor_ops.where(ctx.g, c, a, b, ctx.name(node))


# ---- reductions -----------------------------------------------------------------------------


def _reduce_dims(node: fx.Node) -> list[int]:
    rank = len(shape(node.args[0]))
    dims = node.args[1] if len(node.args) > 1 and node.args[1] is not None else []
    if isinstance(dims, int):
        dims = [dims]
    return [norm_dim(d, rank) for d in dims] or list(range(rank))


def _keepdim(node: fx.Node) -> bool:
    return bool(node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False))


def _check_reduce(node, caps):
    if not caps.tensor("reduce"):
        return "no tensor.reduce kernel in the loaded packages"
    if node.kwargs.get("dtype") is not None:
        return "reduction with a dtype argument"
    if dtype(node.args[0]) == torch.bool and node.target in (aten.amax.default, aten.amin.default):
        return None if caps.tensor("cast") else "amax/amin of bools: no tensor.cast kernel in the loaded packages"
    return None


_REDUCE = {
    aten.sum.dim_IntList: "sum",
    aten.mean.dim: "mean",
    aten.amax.default: "max",
    aten.amin.default: "min",
}


def _lower_reduce(ctx: Ctx, node: fx.Node):
    T = ctx.caps.tensor_ops
    op = getattr(T.ReduceOp, _REDUCE[node.target])
    x = node.args[0]
    if dtype(x) == torch.bool and _REDUCE[node.target] in ("max", "min"):
        # amax/amin of bools (any/all): over 0/1 integers, back to bool.
        wide = _as_dtype(ctx, node, x, torch.int32, "x")
        r = T.reduce(ctx.g, wide, op, _reduce_dims(node), _keepdim(node), ctx.name(node) + "_i32")
        return T.cast(ctx.g, r, to_sk(torch.bool), ctx.name(node))
    return T.reduce(ctx.g, ctx.value(x), op, _reduce_dims(node), _keepdim(node), ctx.name(node))


def _check_var(node, caps):
    if not (caps.tensor("reduce") and caps.tensor("binary") and caps.tensor("binary_scalar")):
        return "no tensor.reduce / tensor.binary kernels in the loaded packages"
    if not is_float(node.args[0]):
        return "var of a non-float tensor"
    if dtype(node.args[0]) != torch.float32 and not caps.tensor("cast"):
        return f"var of {dtype(node.args[0])}: no tensor.cast kernel in the loaded packages"
    return None


def _lower_var(ctx: Ctx, node: fx.Node):
    """var(x, dims, correction) = sum((x - mean(x))^2) / (n - correction), as torch defines it."""
    T = ctx.caps.tensor_ops
    x = node.args[0]
    rank = len(shape(x))
    dims = node.args[1] if len(node.args) > 1 and node.args[1] is not None else list(range(rank))
    dims = [norm_dim(d, rank) for d in ([dims] if isinstance(dims, int) else dims)]
    correction = node.kwargs.get("correction", 1)
    correction = 1 if correction is None else correction
    keep = node.kwargs.get("keepdim", False)
    n = math.prod(shape(x)[d] for d in dims)
    name = ctx.name(node)
    # torch accumulates a bf16/f16 variance in f32 and rounds once, at the end.
    wide = _as_dtype(ctx, node, x, torch.float32, "x")
    mean = T.reduce(ctx.g, wide, T.ReduceOp.mean, dims, True, name + "_mean")
    d = T.binary(ctx.g, wide, mean, T.BinaryOp.sub, name + "_centered")
    sq = T.binary(ctx.g, d, d, T.BinaryOp.mul, name + "_squared")
    total = T.reduce(ctx.g, sq, T.ReduceOp.sum, dims, bool(keep), name + "_sum")
    narrow = dtype(node) != torch.float32
    var = T.binary_scalar(ctx.g, total, float(max(0, n - correction)), T.BinaryOp.div, False,
                          name + "_f32" if narrow else name)
    return T.cast(ctx.g, var, to_sk(dtype(node)), name) if narrow else var


def _lower_arg_reduce(ctx: Ctx, node: fx.Node):
    T = ctx.caps.tensor_ops
    op = T.ReduceOp.argmax if node.target is aten.argmax.default else T.ReduceOp.argmin
    dim = node.args[1] if len(node.args) > 1 else None
    dims = [] if dim is None else [norm_dim(dim, len(shape(node.args[0])))]
    return T.reduce(ctx.g, ctx.value(node.args[0]), op, dims, _keepdim(node), ctx.name(node))


def _lower_max_dim(ctx: Ctx, node: fx.Node):
    T = ctx.caps.tensor_ops
    x = ctx.value(node.args[0])
    dim = [norm_dim(node.args[1], len(shape(node.args[0])))]
    keep = _keepdim(node)
    is_max = node.target is aten.max.dim
    values = T.reduce(ctx.g, x, T.ReduceOp.max if is_max else T.ReduceOp.min, dim, keep, ctx.name(node) + "_values")
    idx = T.reduce(ctx.g, x, T.ReduceOp.argmax if is_max else T.ReduceOp.argmin, dim, keep, ctx.name(node) + "_idx")
    return (values, idx)


def _check_softmax(node, caps):
    x = node.args[0]
    rank = len(shape(x))
    if norm_dim(node.args[1], rank) != rank - 1:
        return "softmax over a dim other than the last"
    if dtype(x) != torch.float32:
        return f"softmax of {dtype(x)} (softmax.f32 only)"
    return None if caps.kernel("softmax.f32") else "no softmax.f32 kernel"


def _lower_softmax(ctx: Ctx, node: fx.Node):
    return _sk.softmax(ctx.g, ctx.value(node.args[0]), ctx.name(node))


def _check_cumsum(node, caps):
    if not caps.tensor("cumsum"):
        return "no tensor.cumsum kernel in the loaded packages"
    if node.kwargs.get("dtype") is not None and not caps.tensor("cast"):
        return "cumsum with a dtype argument and no tensor.cast kernel"
    return None


def _lower_cumsum(ctx: Ctx, node: fx.Node):
    T = ctx.caps.tensor_ops
    x = ctx.value(node.args[0])
    y = T.cumsum(ctx.g, x, norm_dim(node.args[1], len(shape(node.args[0]))), ctx.name(node))
    if ctx.info(y).dtype != to_sk(dtype(node)):
        y = T.cast(ctx.g, y, to_sk(dtype(node)), ctx.name(node) + "_cast")
    return y


# ---- top-k, indexing, cat -------------------------------------------------------------------


def _lower_topk(ctx: Ctx, node: fx.Node):
    T = ctx.caps.tensor_ops
    x = node.args[0]
    k = node.args[1]
    dim = norm_dim(node.args[2] if len(node.args) > 2 else -1, len(shape(x)))
    largest = node.args[3] if len(node.args) > 3 else True
    r = T.topk(ctx.g, ctx.value(x), k, dim, largest, True, ctx.name(node))
    return (r.values, r.indices)


def _lower_index_select(ctx: Ctx, node: fx.Node):
    x, dim, index = node.args[:3]
    return ctx.caps.tensor_ops.index_select(ctx.g, ctx.value(x), norm_dim(dim, len(shape(x))), ctx.value(index),
                                            ctx.name(node))


def _lower_gather(ctx: Ctx, node: fx.Node):
    x, dim, index = node.args[:3]
    return ctx.caps.tensor_ops.gather(ctx.g, ctx.value(x), norm_dim(dim, len(shape(x))), ctx.value(index),
                                      ctx.name(node))


def _check_index(node, caps):
    if not caps.tensor("index_select"):
        return "no tensor.index_select kernel in the loaded packages"
    idx = node.args[1]
    if len(idx) != 1 or idx[0] is None or len(shape(idx[0])) != 1 or dtype(idx[0]) not in (torch.int32, torch.int64):
        return "advanced indexing other than one 1-D integer index on dim 0"
    return None


def _lower_index(ctx: Ctx, node: fx.Node):
    x, idx = node.args[0], node.args[1][0]
    return ctx.caps.tensor_ops.index_select(ctx.g, ctx.value(x), 0, ctx.value(idx), ctx.name(node))


def _check_embedding(node, caps):
    weight, ids = node.args[0], node.args[1]
    if dtype(weight) == torch.float32 and dtype(ids) == torch.int32 and caps.kernel("embedding.f32"):
        return None
    if caps.tensor("index_select"):
        return None
    return f"embedding with {dtype(ids)} ids: no tensor.index_select kernel in the loaded packages"


def _lower_embedding(ctx: Ctx, node: fx.Node):
    weight, ids = node.args[0], node.args[1]
    if dtype(weight) == torch.float32 and dtype(ids) == torch.int32 and ctx.caps.kernel("embedding.f32"):
        return _sk.embedding(ctx.g, ctx.value(ids), ctx.value(weight), ctx.name(node))
    flat = ctx.g.reshape(ctx.dense(ctx.value(ids), ctx.name(node) + "_ids"), [max(1, math.prod(shape(ids)))],
                         ctx.name(node) + "_flat_ids")
    rows = ctx.caps.tensor_ops.index_select(ctx.g, ctx.value(weight), 0, flat, ctx.name(node) + "_rows")
    return ctx.g.reshape(rows, shape(node), ctx.name(node))


def _has_cat(caps) -> bool:
    # cat is copies into slices of one tensor: it needs the builder and the copy kernel only.
    return caps.tensor_ops is not None and hasattr(caps.tensor_ops, "cat") and caps.kernel("copy")


def _check_cat(node, caps):
    if not _has_cat(caps):
        return "no cat builder in this build"
    if _casts_needed(node, dtype(node), node.args[0]) and not caps.tensor("cast"):
        return "cat of mixed dtypes: no tensor.cast kernel in the loaded packages"
    return None


def _lower_cat(ctx: Ctx, node: fx.Node):
    xs = [x for x in node.args[0] if math.prod(shape(x)) > 0 or len(node.args[0]) == 1]
    dim = norm_dim(node.args[1] if len(node.args) > 1 else 0, len(shape(node)))
    parts = [_as_dtype(ctx, node, x, dtype(node), f"part{i}") for i, x in enumerate(xs)]  # torch promotes them
    return ctx.caps.tensor_ops.cat(ctx.g, parts, dim, ctx.name(node))


def _slice_scatter_bounds(node: fx.Node):
    """(dim, start, end, step) of slice_scatter(input, src, dim=0, start=None, end=None, step=1)."""
    names = ["input", "src", "dim", "start", "end", "step"]
    a = {"dim": 0, "start": None, "end": None, "step": 1, **dict(zip(names, node.args)), **node.kwargs}
    n_dims = len(shape(node.args[0]))
    dim = norm_dim(a["dim"], n_dims)
    n = shape(node.args[0])[dim]
    start, end = _clamp_range(0 if a["start"] is None else a["start"], n if a["end"] is None else a["end"], n)
    return dim, start, end, a["step"]


def _check_slice_scatter(node, caps):
    if _slice_scatter_bounds(node)[3] != 1:
        return "slice_scatter with a step other than 1"
    if not _has_cat(caps):
        return "no cat builder in this build"
    if dtype(node.args[1]) != dtype(node) and not caps.tensor("cast"):
        return "slice_scatter of mixed dtypes: no tensor.cast kernel in the loaded packages"
    return None


def _lower_slice_scatter(ctx: Ctx, node: fx.Node):
    """out = input with out[start:end] = src along dim (functionalisation's form of
    x[..., a:b].copy_(src)): one dense tensor made of input's head, src and input's tail, the cat
    kernel's copies."""
    dim, start, end, _ = _slice_scatter_bounds(node)
    x = ctx.value(node.args[0])
    n = shape(node.args[0])[dim]
    name = ctx.name(node)
    parts = []
    if start > 0:
        parts.append(ctx.g.slice(x, dim, 0, start, name=name + "_head"))
    parts.append(_as_dtype(ctx, node, node.args[1], dtype(node), "src"))
    if end < n:
        parts.append(ctx.g.slice(x, dim, end, n, name=name + "_tail"))
    return ctx.caps.tensor_ops.cat(ctx.g, parts, dim, name)


def _check_scatter_value(node, caps):
    for family in ("binary", "reduce", "where"):
        if not caps.tensor(family):
            return f"no tensor.{family} kernel in the loaded packages"
    src, index = shape(node.args[0]), shape(node.args[2])
    dim = norm_dim(node.args[1], len(src))
    if len(index) != len(src) or any(a != b for d, (a, b) in enumerate(zip(index, src)) if d != dim):
        return "scatter whose index differs from the tensor in a dim other than the scattered one"
    if len(src) + 1 > _sk.MAX_RANK:
        return f"scatter of a rank-{len(src)} tensor (the mask needs rank {len(src) + 1})"
    return None


def _lower_scatter_value(ctx: Ctx, node: fx.Node):
    """x.scatter(dim, index, value): where(mask, value, x), mask[.., j, ..] = any over k of
    index[.., k, ..] == j (an equality against 0..n-1 in a dim after `dim`, counted over `dim`).
    Exact: every element is x's or the value in x's dtype. Unlike torch, an index out of range
    matches no position (torch raises)."""
    x_node, dim, index_node, value = node.args[:4]
    src = shape(x_node)
    dim = norm_dim(dim, len(src))
    name = ctx.name(node)
    T = ctx.caps.tensor_ops
    index_shape = shape(index_node)
    index = ctx.g.reshape(ctx.dense(ctx.value(index_node), name + "_index"),
                          index_shape[:dim + 1] + [1] + index_shape[dim + 1:], name + "_index_e")
    positions = torch.arange(src[dim], dtype=dtype(index_node)).reshape([1] * (dim + 1) + [src[dim]] +
                                                                        [1] * (len(src) - dim - 1))
    hits = T.binary(ctx.g, index, ctx.g.constant(name + "_positions", positions), T.BinaryOp.eq, name + "_hits")
    count = T.reduce(ctx.g, hits, T.ReduceOp.sum, [dim], False, name + "_count")  # i64
    mask = T.binary_scalar(ctx.g, count, 0, T.BinaryOp.gt, False, name + "_mask")
    fill = ctx.g.constant(name + "_value", torch.full([1] * len(src), value, dtype=dtype(node)))
    return T.where(ctx.g, mask, fill, ctx.value(x_node), name)


# ---- matrix products and attention ----------------------------------------------------------


def _check_mm(node, caps):
    if caps.tensor("batched_mm"):
        return None
    return "no tensor.batched_mm kernel in the loaded packages (a mm with a weight transpose lowers to matmul)"


def _lower_mm(ctx: Ctx, node: fx.Node):
    a, b = node.args[0], node.args[1]
    return ctx.caps.tensor_ops.batched_mm(ctx.g, ctx.value(a), ctx.value(b), ctx.name(node))


def _check_addmm(node, caps):
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        return "addmm with alpha/beta"
    if not caps.tensor("binary"):
        return "no tensor.binary kernel for addmm's bias"
    return _check_mm(node, caps)


def _lower_addmm(ctx: Ctx, node: fx.Node):
    bias, a, b = node.args[:3]
    T = ctx.caps.tensor_ops
    y = T.batched_mm(ctx.g, ctx.value(a), ctx.value(b), ctx.name(node) + "_mm")
    return T.binary(ctx.g, y, ctx.value(bias), T.BinaryOp.add, ctx.name(node))


def _sdpa_args(node: fx.Node) -> dict:
    names = ["query", "key", "value", "dropout_p", "is_causal", "return_debug_mask", "attn_mask", "scale"]
    if node.target is aten._scaled_dot_product_flash_attention_for_cpu.default:
        names = ["query", "key", "value", "dropout_p", "is_causal"]
    elif node.target is aten.scaled_dot_product_attention.default:
        names = ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
    args = dict(zip(names, node.args))
    args.update(node.kwargs)
    return args


def _check_sdpa(node, caps):
    if not caps.tensor("sdpa"):
        return "no tensor.sdpa kernel in the loaded packages"
    a = _sdpa_args(node)
    if a.get("dropout_p", 0.0) not in (0, 0.0):
        return "attention with dropout"
    if node.target is aten._scaled_dot_product_flash_attention_for_cpu.default:
        # (out, logsumexp): the log-sum-exp has no kernel; fine when nobody reads it.
        for user in node.users:
            if user.target is operator.getitem and user.args[1] != 0 and user.users:
                return "attention whose log-sum-exp output is used"
    return None


def _lower_sdpa(ctx: Ctx, node: fx.Node):
    a = _sdpa_args(node)
    mask = a.get("attn_mask")
    scale = a.get("scale") or 0.0
    out = ctx.caps.tensor_ops.sdpa(ctx.g, ctx.value(a["query"]), ctx.value(a["key"]), ctx.value(a["value"]),
                                   ctx.value(mask) if mask is not None else _sk.Tensor(), bool(a.get("is_causal")),
                                   float(scale), ctx.name(node))
    if node.target is aten._scaled_dot_product_flash_attention_for_cpu.default:
        return (out, None)
    return out


# ---- in-place index updates (static KV caches) -------------------------------------------


def _check_index_update(node, caps):
    if node.target is aten.index_copy.default:
        return None if caps.tensor("index_copy") else "no tensor.index_copy kernel in the loaded packages"
    indices = node.args[1]
    accumulate = node.args[3] if len(node.args) > 3 else False
    present = [i for i, x in enumerate(indices) if x is not None]
    if any(dtype(indices[i]) not in (torch.int32, torch.int64) or len(shape(indices[i])) != 1 for i in present):
        return "index_put with indices that are not 1-D integer tensors"
    if not accumulate and len(present) == 1:
        d = present[0]
        want = shape(node.args[0])
        want[d] = shape(indices[d])[0]
        try:
            torch.broadcast_shapes(shape(node.args[2]), want)
        except RuntimeError:
            return "index_put whose values do not broadcast to the indexed slice"
        if torch.broadcast_shapes(shape(node.args[2]), want) != torch.Size(want):
            return "index_put whose values do not broadcast to the indexed slice"
        return None if caps.tensor("index_copy") else "no tensor.index_copy kernel in the loaded packages"
    if present != list(range(len(present))):
        return "index_put with indices on other than the leading dims"
    return None if caps.tensor("index_put") else "no tensor.index_put kernel in the loaded packages"


def _lower_index_update(ctx: Ctx, node: fx.Node):
    return ctx.lower_index_update(node)


# ---- the table --------------------------------------------------------------------------------

_views = {
    aten.view.default: Row(_ok, _lower_reshape),
    aten._unsafe_view.default: Row(_ok, _lower_reshape),
    aten.reshape.default: Row(_ok, _lower_reshape),
    aten.unsqueeze.default: Row(_ok, _lower_reshape),
    aten.squeeze.dim: Row(_ok, _lower_reshape),
    aten.squeeze.dims: Row(_ok, _lower_reshape),
    aten.squeeze.default: Row(_ok, _lower_reshape),
    aten.alias.default: Row(_ok, _lower_alias),
    aten.permute.default: Row(_ok, _lower_permute),
    aten.slice.Tensor: Row(_ok, _lower_slice),
    aten.select.int: Row(_ok, _lower_select),
    aten.split_with_sizes.default: Row(_ok, _lower_split),
    aten.split.Tensor: Row(_ok, _lower_split),
    aten.expand.default: Row(_check_expand, _lower_expand),
    aten.clone.default: Row(_ok, _lower_clone),
    aten._to_copy.default: Row(_check_to_copy, _lower_to_copy),
    aten.copy.default: Row(_check_copy, _lower_copy),
}
_elementwise = {op: Row(_check_binary, _lower_binary) for op in _BINARY}
_elementwise.update({op: Row(_check_unary, _lower_unary) for op in _UNARY})
_elementwise[aten.rsub.Scalar] = Row(_check_rsub, _lower_rsub)
_elementwise[aten.where.self] = Row(_check_where, _lower_where)

ATEN_LOWERINGS: dict[Any, Row] = {
    **_views,
    **_elementwise,
    **{op: Row(_check_reduce, _lower_reduce) for op in _REDUCE},
    aten.var.correction: Row(_check_var, _lower_var),
    aten.bitwise_and.Tensor: Row(_check_bitwise, _lower_bitwise),
    aten.bitwise_or.Tensor: Row(_check_bitwise, _lower_bitwise),
    aten.bitwise_not.default: Row(_check_bitwise_not, _lower_bitwise_not),
    aten.argmax.default: Row(_needs("reduce"), _lower_arg_reduce),
    aten.argmin.default: Row(_needs("reduce"), _lower_arg_reduce),
    aten.max.dim: Row(_needs("reduce"), _lower_max_dim),
    aten.min.dim: Row(_needs("reduce"), _lower_max_dim),
    aten._softmax.default: Row(_check_softmax, _lower_softmax),
    aten.cumsum.default: Row(_check_cumsum, _lower_cumsum),
    aten.topk.default: Row(_needs("topk"), _lower_topk),
    aten.index_select.default: Row(_needs("index_select"), _lower_index_select),
    aten.gather.default: Row(_needs("gather"), _lower_gather),
    aten.index.Tensor: Row(_check_index, _lower_index),
    aten.embedding.default: Row(_check_embedding, _lower_embedding),
    aten.cat.default: Row(_check_cat, _lower_cat),
    aten.slice_scatter.default: Row(_check_slice_scatter, _lower_slice_scatter),
    aten.scatter.value: Row(_check_scatter_value, _lower_scatter_value),
    aten.index_copy.default: Row(_check_index_update, _lower_index_update),
    aten.index_put.default: Row(_check_index_update, _lower_index_update),
    aten.mm.default: Row(_check_mm, _lower_mm),
    aten.bmm.default: Row(_check_mm, _lower_mm),
    aten.addmm.default: Row(_check_addmm, _lower_addmm),
    aten._scaled_dot_product_flash_attention_for_cpu.default: Row(_check_sdpa, _lower_sdpa),
    aten.scaled_dot_product_attention.default: Row(_check_sdpa, _lower_sdpa),
}


# torch.distributed's functional collectives, lowered to the collective kernels over MPI.
from ._lower_comm import register as _register_collectives  # noqa: E402 (needs Row above)

_register_collectives(ATEN_LOWERINGS)


def row_of(node: fx.Node) -> Row | None:
    return ATEN_LOWERINGS.get(node.target)


def kernel_reason(node: fx.Node, caps: Capabilities) -> str | None:
    """None when a kernel runs the node; otherwise why it runs in torch (a host step)."""
    sig = signature_of(node.target)
    if sig is not None:
        return None  # kernel ops check their operands when the graph is built
    if node.target in AUTO_FUNCTIONALIZED:
        # A kernel op writing some of its operands in place, as functionalisation wraps it.
        if signature_of(node.args[0]) is not None:
            return None
        return f"{node.args[0]} writes its operands in place and is not a superkernel kernel op"
    row = row_of(node)
    if row is None:
        return f"no lowering for {node.target}"
    if getattr(row, "check_before_dtypes", False):  # collectives: unsupported forms raise
        return row.check(node, caps) or dtype_reason(node, caps)
    reason = dtype_reason(node, caps)
    if reason:
        return reason
    return row.check(node, caps)
