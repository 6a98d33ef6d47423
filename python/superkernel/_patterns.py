"""FX rewrites run before the table: core-ATen subgraphs that one library kernel computes become
a call of that kernel's op (``torch.ops.superkernel.*``), which then lowers like any kernel op.

- linear: ``mm(x, permute(w, [1, 0]))`` with w a dense f32 [N, K] graph input or parameter
  -> ``matmul(x, w)`` (the weight-streaming GEMV/GEMM); ``addmm`` -> ``matmul`` then the bias add.
- RMS norm: ``w * (x * rsqrt(mean(x^2, -1, keepdim) + eps))`` in f32 -> ``rms_norm(x, w, eps)``.
- SwiGLU: ``(g * sigmoid(g)) * up`` (silu as core ATen decomposes it) or ``silu(g) * up`` ->
  ``silu_mul(g, up)``.
- GQA: ``view(clone(expand(unsqueeze(k, 2))))`` feeding attention (transformers' repeat_kv)
  -> k itself, as the sdpa kernel reads each kv head for its group of query heads.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ._lowering import Capabilities, dtype, shape

aten = torch.ops.aten
sk_ops = torch.ops.superkernel


def _is(node, target) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target is target


def _replace(graph: fx.Graph, root: fx.Node, target, args: tuple) -> fx.Node:
    with graph.inserting_before(root):
        new = graph.call_function(target, args)
    new.meta = dict(root.meta)
    root.replace_all_uses_with(new)
    return new


def _is_weight(node, placeholders_dense: set) -> bool:
    return isinstance(node, fx.Node) and node in placeholders_dense


def _match_rms(node: fx.Node):
    """w * (x * rsqrt(mean(pow(x, 2), [-1], True) + eps)) -> (x, w, eps)."""
    if not _is(node, aten.mul.Tensor):
        return None
    for w, inner in (node.args, node.args[::-1]):
        if not _is(inner, aten.mul.Tensor) or not isinstance(w, fx.Node):
            continue
        for x, r in (inner.args, inner.args[::-1]):
            if not _is(r, aten.rsqrt.default):
                continue
            add = r.args[0]
            if not _is(add, aten.add.Tensor) or not isinstance(add.args[1], (int, float)):
                continue
            mean = add.args[0]
            if not _is(mean, aten.mean.dim) or list(mean.args[1]) not in ([-1], [len(shape(x)) - 1]):
                continue
            if not (len(mean.args) > 2 and mean.args[2]):
                continue
            pw = mean.args[0]
            if not _is(pw, aten.pow.Tensor_Scalar) or pw.args[0] is not x or pw.args[1] != 2:
                continue
            if len(shape(w)) != 1 or shape(w)[0] != shape(x)[-1]:
                continue
            if dtype(x) != torch.float32 or dtype(w) != torch.float32 or shape(node) != shape(x):
                continue
            return x, w, float(add.args[1])
    return None


def _match_silu_mul(node: fx.Node):
    """(g * sigmoid(g)) * up, or silu(g) * up -> (g, up)."""
    if not _is(node, aten.mul.Tensor):
        return None
    for s, up in (node.args, node.args[::-1]):
        if not isinstance(up, fx.Node):
            continue
        gate = None
        if _is(s, aten.silu.default):
            gate = s.args[0]
        elif _is(s, aten.mul.Tensor):
            a, b = s.args
            if _is(b, aten.sigmoid.default) and b.args[0] is a:
                gate = a
            elif _is(a, aten.sigmoid.default) and a.args[0] is b:
                gate = b
        if gate is None or not isinstance(gate, fx.Node):
            continue
        if shape(gate) != shape(up) or shape(node) != shape(up):
            continue
        if dtype(gate) != torch.float32 or dtype(up) != torch.float32:
            continue
        return gate, up
    return None


def _match_linear(node: fx.Node, weights: set):
    """mm(x, permute(w, [1, 0])) with w a dense f32 [N, K] input -> (x, w)."""
    if not _is(node, aten.mm.default):
        return None
    return _match_linear_operands(node.args[0], node.args[1], weights)


def _match_linear_operands(x, wt, weights: set):
    if not _is(wt, aten.permute.default) or list(wt.args[1]) != [1, 0]:
        return None
    w = wt.args[0]
    if not _is_weight(w, weights) or dtype(w) != torch.float32 or dtype(x) != torch.float32:
        return None
    return x, w


def _match_addmm(node: fx.Node, weights: set):
    """addmm(bias, x, permute(w, [1, 0])) -> (x, w, bias): matmul then a bias add."""
    if not _is(node, aten.addmm.default) or node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        return None
    bias, x, wt = node.args[:3]
    m = _match_linear_operands(x, wt, weights)
    return (m[0], m[1], bias) if m else None


def _match_repeat_kv(node) -> fx.Node | None:
    """view(clone(expand(unsqueeze(k, 2), [B, Hkv, n, L, D])), [B, Hkv*n, L, D]) -> k."""
    if not (_is(node, aten.view.default) or _is(node, aten._unsafe_view.default)):
        return None
    c = node.args[0]
    if not _is(c, aten.clone.default):
        return None
    e = c.args[0]
    if not _is(e, aten.expand.default):
        return None
    u = e.args[0]
    if not _is(u, aten.unsqueeze.default) or u.args[1] != 2:
        return None
    k = u.args[0]
    ks = shape(k)
    if len(ks) != 4:
        return None
    b, hkv, seq, d = ks
    es = list(e.args[1])
    if len(es) != 5 or es[0] != b or es[1] != hkv or es[3] != seq or es[4] != d:
        return None
    if shape(node) != [b, hkv * es[2], seq, d]:
        return None
    return k


SDPA_TARGETS = (aten._scaled_dot_product_flash_attention_for_cpu.default, aten.scaled_dot_product_attention.default)


def rewrite(gm: fx.GraphModule, caps: Capabilities, dense_weights: set) -> list[str]:
    """Applies the rewrites in place; returns one line per rewrite kind with its count."""
    graph = gm.graph
    counts = {"matmul": 0, "rms_norm": 0, "silu_mul": 0, "gqa": 0}
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if caps.kernel("matmul.f32"):
            m = _match_linear(node, dense_weights)
            if m:
                _replace(graph, node, sk_ops.matmul.default, (m[0], m[1]))
                counts["matmul"] += 1
                continue
            m = _match_addmm(node, dense_weights)
            if m:
                with graph.inserting_before(node):
                    mm = graph.call_function(sk_ops.matmul.default, (m[0], m[1]))
                mm.meta = dict(node.meta)
                _replace(graph, node, aten.add.Tensor, (mm, m[2]))
                counts["matmul"] += 1
                continue
        if caps.kernel("rms_norm.f32"):
            m = _match_rms(node)
            if m:
                _replace(graph, node, sk_ops.rms_norm.default, m)
                counts["rms_norm"] += 1
                continue
        if caps.kernel("silu_mul.f32"):
            m = _match_silu_mul(node)
            if m:
                _replace(graph, node, sk_ops.silu_mul.default, m)
                counts["silu_mul"] += 1
                continue
        if node.target in SDPA_TARGETS and caps.tensor("sdpa"):
            args = list(node.args)
            changed = False
            for i in (1, 2):
                k = _match_repeat_kv(args[i]) if i < len(args) else None
                if k is not None:
                    args[i] = k
                    changed = True
            if changed:
                node.args = tuple(args)
                counts["gqa"] += 1
    graph.eliminate_dead_code()
    gm.recompile()
    return [f"{k} x{v}" for k, v in counts.items() if v]
