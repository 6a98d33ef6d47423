"""The backend option ``weight_dtype``: frozen linear weights converted or quantised once, at
compile time, into the formats the C++ models' ``weight_dtype`` (the CLI's ``--dtype``) uses, and
multiplied by the same kernels.

    compiled = torch.compile(model, backend="superkernel", options={
        "frozen_parameter": True, "weight_dtype": "w8a8", "weight_dtype_exclude": ["lm_head"]})

Each ``mm(x, permute(w, [1, 0]))`` (and ``addmm``, and the packed experts [E, N, K] of
transformers' "batched_mm" MoE blocks) whose ``w`` is a frozen parameter selected by
``weight_dtype_include`` / ``weight_dtype_exclude`` (regular expressions searched in the
parameter's name; by default every linear weight) becomes, with x widened to f32 when it is
16-bit and the result rounded back to x's dtype once:

| weight_dtype | weight | kernel |
|---|---|---|
| f32, bf16, f16 | w in that dtype | matmul.f32 / matmul.bf16 / matmul.f16 |
| w8a8 | i8 per output channel, f32 scales (sk::quantize_w8a8_rows) | matmul.w8a8_dyn (per-token int8 x) |
| w4a8 | 4-bit groups of int4_group (sk::nn::quantize_int4, tiled) | matmul.w4a8_dyn (per-token int8 x) |
| w4 | the same 4-bit weights | matmul.w4 (f32 x) |

Packed experts run on grouped_matmul.{f32,bf16,f16,w8a8_dyn} (each expert's rows quantised as a
linear weight's are); there is no grouped 4-bit kernel, so w4a8 and w4 refuse them with an error
naming the parameter (exclude them to keep them in their dtype). A bias is added in f32 before the
rounding. The torch parameter itself is left as it is (the model
still runs eagerly with it); the converted copy lives in the compiled graph.
"""

from __future__ import annotations

import re

import torch
import torch.fx as fx

from . import _superkernel
from ._errors import InvalidArgumentError, UnimplementedError
from ._lowering import Capabilities, dtype, shape
from ._patterns import _add, _is, _to, constant_buffer, expert_linear, match_expert_linear

aten = torch.ops.aten
sk_ops = torch.ops.superkernel

WEIGHT_DTYPES = ("f32", "bf16", "f16", "w8a8", "w4a8", "w4")
GROUPED_KERNELS = {"f32": "grouped_matmul.f32", "bf16": "grouped_matmul.bf16", "f16": "grouped_matmul.f16",
                   "w8a8": "grouped_matmul.w8a8_dyn"}
KERNELS = {"f32": "matmul.f32", "bf16": "matmul.bf16", "f16": "matmul.f16", "w8a8": "matmul.w8a8_dyn",
           "w4a8": "matmul.w4a8_dyn", "w4": "matmul.w4"}
FLOAT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def _linear(node: fx.Node, params: dict):
    """(x, w, bias or None) of mm(x, permute(w, [1, 0])) / addmm(bias, x, permute(w, [1, 0])) with w a
    frozen parameter."""
    if _is(node, aten.mm.default):
        bias, x, wt = None, *node.args[:2]
    elif _is(node, aten.addmm.default) and node.kwargs.get("beta", 1) == 1 and node.kwargs.get("alpha", 1) == 1:
        bias, x, wt = node.args[:3]
    else:
        return None
    if not _is(wt, aten.permute.default) or list(wt.args[1]) != [1, 0]:
        return None
    w = wt.args[0]
    if w not in params or dtype(x) not in (torch.float32, torch.bfloat16, torch.float16):
        return None
    return x, w, bias


def _constant(gm: fx.GraphModule, like: fx.Node, name: str, value: torch.Tensor) -> fx.Node:
    return constant_buffer(gm, re.sub(r"\W", "_", f"_sk_weight_{name}"), value.contiguous(), like)


def _bytes_tensor(data: bytes, torch_dtype: torch.dtype, shp) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch_dtype).reshape(list(shp)).clone()


def _weight_operands(gm, like, name: str, real: torch.Tensor, weight_dtype: str, int4_group: int,
                     int4_symmetric: bool) -> tuple:
    """The graph constants that replace the weight `real` [N, K] in the matmul op's operands."""
    w = real.detach()
    if weight_dtype in FLOAT:
        return (_constant(gm, like, name, w.to(FLOAT[weight_dtype])),)
    if weight_dtype == "w8a8":
        q = torch.empty(w.shape, dtype=torch.int8)
        scale = torch.empty(w.shape[0], dtype=torch.float32)
        _superkernel.nn.quantize_w8a8(w.contiguous(), q, scale)
        return _constant(gm, like, name, q), _constant(gm, like, name + ".scale", scale)
    k = w.shape[1]
    if k % int4_group:
        raise InvalidArgumentError(
            f"weight_dtype '{weight_dtype}': parameter '{name}' {list(w.shape)}: its input size {k} is not a "
            f"multiple of int4_group {int4_group} (set option 'int4_group', or exclude it with "
            "'weight_dtype_exclude')"
        )
    d = _superkernel.nn.quantize_int4(w.contiguous(), group=int4_group, zero_points=not int4_symmetric)
    scale_dtype = torch.float16 if d["scale_dtype"] == _superkernel.DType.f16 else torch.float32
    ops = [_constant(gm, like, name + ".qweight", _bytes_tensor(d["weight"], torch.int8, d["weight_shape"])),
           _constant(gm, like, name + ".scales", _bytes_tensor(d["scale"], scale_dtype, d["group_shape"]))]
    ops.append(None if d["zero"] is None else
               _constant(gm, like, name + ".qzeros", _bytes_tensor(d["zero"], torch.int8, d["group_shape"])))
    return tuple(ops)


def _expert_operands(gm, like, name: str, real: torch.Tensor, weight_dtype: str) -> tuple:
    """The graph constants that replace packed experts `real` [E, N, K]: converted, or each expert's
    rows quantised as a linear weight's are (sk::quantize_w8a8_rows), scales [E, N]."""
    w = real.detach()
    if weight_dtype in FLOAT:
        return (_constant(gm, like, name, w.to(FLOAT[weight_dtype])),)
    if weight_dtype != "w8a8":
        raise UnimplementedError(
            f"weight_dtype '{weight_dtype}': parameter '{name}' {list(w.shape)} holds packed experts, and there is "
            "no grouped 4-bit matmul kernel (grouped_matmul takes f32, bf16, f16 and w8a8 experts); keep them in "
            "their dtype with 'weight_dtype_exclude' (e.g. [\"experts\"])")
    e, n, k = w.shape
    q = torch.empty((e * n, k), dtype=torch.int8)
    scale = torch.empty(e * n, dtype=torch.float32)
    _superkernel.nn.quantize_w8a8(w.reshape(e * n, k).contiguous(), q, scale)
    return (_constant(gm, like, name, q.reshape(e, n, k)), _constant(gm, like, name + ".scale", scale.reshape(e, n)))


def selected(name: str, include: tuple, exclude: tuple) -> bool:
    if include and not any(re.search(p, name) for p in include):
        return False
    return not any(re.search(p, name) for p in exclude)


def convert(gm: fx.GraphModule, caps: Capabilities, params: dict, options) -> tuple[list[str], set]:
    """Rewrites every selected linear in place. `params`: placeholder -> (name, the frozen tensor).
    Returns (the rewrite line for explain, the placeholders whose weights were replaced)."""
    weight_dtype = options.weight_dtype
    if weight_dtype is None:
        return [], set()
    kernel = KERNELS[weight_dtype]
    if not caps.kernel(kernel):
        raise UnimplementedError(f"option weight_dtype '{weight_dtype}': no {kernel} kernel in the loaded packages")
    graph = gm.graph
    converted: dict[fx.Node, tuple] = {}
    replaced: set = set()
    casts: dict = {}
    count = 0
    for node in list(graph.nodes):
        experts = match_expert_linear(node, params)
        if experts is not None:
            x, w, ids = experts
            name, real = params[w]
            if not selected(name, options.weight_dtype_include, options.weight_dtype_exclude):
                continue
            if not caps.kernel(GROUPED_KERNELS.get(weight_dtype, "")) and weight_dtype in GROUPED_KERNELS:
                raise UnimplementedError(f"option weight_dtype '{weight_dtype}': no {GROUPED_KERNELS[weight_dtype]} "
                                         "kernel in the loaded packages")
            if w not in converted:
                converted[w] = _expert_operands(gm, w, name, real, weight_dtype)
            expert_linear(graph, node, x, ids, shape(w)[0], converted[w], casts)
            replaced.add(w)
            count += 1
            continue
        m = _linear(node, params)
        if m is None:
            continue
        x, w, bias = m
        name, real = params[w]
        if not selected(name, options.weight_dtype_include, options.weight_dtype_exclude):
            continue
        if w not in converted:
            converted[w] = _weight_operands(gm, w, name, real, weight_dtype, options.int4_group,
                                            options.int4_symmetric)
        ops = converted[w]
        xf = x if dtype(x) == torch.float32 else _to(graph, node, x, torch.float32, casts)
        if weight_dtype in ("w4a8", "w4"):
            y = _add(graph, node, sk_ops.matmul_int4.default, (xf, *ops, weight_dtype == "w4"))
        else:
            y = _add(graph, node, sk_ops.matmul.default, (xf, *ops))
        if bias is not None:
            y = _add(graph, node, aten.add.Tensor, (y, bias if dtype(bias) == torch.float32 else
                                                    _to(graph, node, bias, torch.float32)))
        if dtype(node) != torch.float32:
            y = _to(graph, node, y, dtype(node))
        if shape(y) != shape(node):
            raise AssertionError(f"weight_dtype: {node.name} {shape(node)} became {shape(y)}")
        node.replace_all_uses_with(y)
        replaced.add(w)
        count += 1
    graph.eliminate_dead_code()
    return [f"weight_dtype {weight_dtype} x{count}"], replaced


def _first_float_tensor(out):
    """The logits of a transformers output, or the first floating tensor of a model's output."""
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(out, torch.Tensor):
        return out if out.is_floating_point() else None
    items = out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else ()
    for item in items:
        t = _first_float_tensor(item)
        if t is not None:
            return t
    return None


def quantization_error(model, *args, options: dict, **kwargs) -> dict:
    """Runs ``model(*args, **kwargs)`` eagerly and compiled by the superkernel backend with
    `options` (a ``weight_dtype``, say) and compares the two outputs' logits (``.logits``, or the
    first floating tensor): ``max_abs``, ``rel_l2`` (‖compiled − eager‖ / ‖eager‖) and
    ``argmax_agreement`` (the fraction of rows of the last dimension whose argmax agree).

        err = superkernel.quantization_error(model, ids, options={
            "frozen_parameter": True, "weight_dtype": "w8a8"})
        assert err["argmax_agreement"] > 0.9
    """
    if not isinstance(options, dict):
        raise InvalidArgumentError(f"quantization_error: options must be a dict, got {type(options).__name__}")
    with torch.no_grad():
        want = _first_float_tensor(model(*args, **kwargs))
        if want is None:
            raise InvalidArgumentError("quantization_error: the model's output holds no floating tensor")
        compiled = torch.compile(model, backend="superkernel", options=options, fullgraph=True, dynamic=False)
        got = _first_float_tensor(compiled(*args, **kwargs))
    if got is None or got.shape != want.shape:
        raise InvalidArgumentError(
            f"quantization_error: the compiled output {None if got is None else list(got.shape)} does not match "
            f"the eager one {list(want.shape)}")
    got, want = got.double(), want.double()
    norm = want.norm().item()
    return {
        "max_abs": (got - want).abs().max().item(),
        "rel_l2": (got - want).norm().item() / norm if norm else float("inf"),
        "argmax_agreement": (got.argmax(-1) == want.argmax(-1)).double().mean().item(),
    }
