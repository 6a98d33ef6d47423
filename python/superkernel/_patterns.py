"""FX rewrites run before the table: core-ATen subgraphs that one library kernel computes become
a call of that kernel's op (``torch.ops.superkernel.*``), which then lowers like any kernel op.

- linear: ``mm(x, permute(w, [1, 0]))`` with w a dense f32 [N, K] graph input or parameter
  -> ``matmul(x, w)`` (the weight-streaming GEMV/GEMM); ``addmm`` -> ``matmul`` then the bias add.
- RMS norm: ``w * (x * rsqrt(mean(x^2, -1, keepdim) + eps))`` in f32 -> ``rms_norm(x, w, eps)``.
- SwiGLU: ``(g * sigmoid(g)) * up`` (silu as core ATen decomposes it) or ``silu(g) * up`` ->
  ``silu_mul(g, up)``.
- MoE experts: ``squeeze(bmm(index(w, [ids]), unsqueeze(x, -1)), -1)`` (transformers' "batched_mm"
  experts, w [E, N, K] f32, bf16 or f16) -> ``moe_dispatch`` of x by ids, ``grouped_matmul`` with
  w read in place, ``index_select`` back to row order: no per-step copy of the chosen experts'
  matrices (torch's index would copy S x N x K weights for S rows).
- GQA: ``view(clone(expand(unsqueeze(k, 2))))`` feeding attention (transformers' repeat_kv)
  -> k itself, as the sdpa kernel reads each kv head for its group of query heads.
- RoPE: ``x * cos + cat([-x[..., D/2:], x[..., :D/2]], -1) * sin`` (transformers'
  apply_rotary_pos_emb with rotate_half; x [B, H, T, D] laid out as the projection's
  [B, T, H, D]; cos and sin the cos and sin of ``cat([f, f], -1)``, so both halves of a row
  hold the same values) -> ``rope`` (neox style) over x viewed as [B*T, H, D], its table the
  first halves of cos and sin side by side and positions 0..B*T-1: one op instead of about six.

bf16 and f16 models (the forms transformers' modules take in those dtypes) use the same kernels,
which compute in f32: a 16-bit operand is widened (exact) and the result rounded back once.

- linear: ``mm(x, permute(w))`` with x and w both bf16 (or f16) -> ``to(matmul(to(x, f32), w),
  bf16)``, the 16-bit-weight GEMV/GEMM (f32 accumulation, as torch's CPU mm); ``addmm`` adds the
  bias in f32 before the one rounding.
- RMS norm: ``x * rsqrt(mean(x^2, -1, keepdim) + eps)`` with x f32 (the upcast inside
  transformers' norms), not already part of a weighted norm -> ``rms_norm(x, ones, eps)``; the
  cast back and the 16-bit weight product that follow stay as torch wrote them.
- SwiGLU: ``to(silu(to(g, f32)), bf16) * up`` -> ``to(silu_mul(to(g, f32), to(up, f32)), bf16)``.
- RoPE: x, cos and sin of one 16-bit dtype -> ``rope`` over x widened to f32, rounded back.

torch rounds each 16-bit intermediate (``silu(g)`` before the product, ``x * cos`` before the
sum); these kernels round once, so their results may differ from eager torch's by an ulp of the
16-bit dtype at each such step (docs/PYTHON.md states the tolerance). All three modes run the same
kernels, so they agree bit for bit.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ._lowering import Capabilities, dtype, shape, val

aten = torch.ops.aten
sk_ops = torch.ops.superkernel
HALF = (torch.bfloat16, torch.float16)
HALF_KERNELS = {torch.bfloat16: "matmul.bf16", torch.float16: "matmul.f16"}
GROUPED_KERNELS = {torch.float32: "grouped_matmul.f32", torch.bfloat16: "grouped_matmul.bf16",
                   torch.float16: "grouped_matmul.f16"}


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


def _rms_core(node) -> tuple | None:
    """x * rsqrt(mean(pow(x, 2), [-1], True) + eps), either operand order -> (x, eps)."""
    if not _is(node, aten.mul.Tensor):
        return None
    for x, r in (node.args, node.args[::-1]):
        if not (isinstance(x, fx.Node) and _is(r, aten.rsqrt.default)):
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
        if _is(pw, aten.pow.Tensor_Scalar) and pw.args[0] is x and pw.args[1] == 2:
            return x, float(add.args[1])
    return None


def _match_rms(node: fx.Node):
    """w * (x * rsqrt(mean(pow(x, 2), [-1], True) + eps)) -> (x, w, eps)."""
    if not _is(node, aten.mul.Tensor):
        return None
    for w, inner in (node.args, node.args[::-1]):
        core = _rms_core(inner) if isinstance(w, fx.Node) else None
        if core is None:
            continue
        x, eps = core
        if len(shape(w)) != 1 or shape(w)[0] != shape(x)[-1]:
            continue
        if dtype(x) != torch.float32 or dtype(w) != torch.float32 or shape(node) != shape(x):
            continue
        return x, w, eps
    return None


def _match_rms_unweighted(node: fx.Node):
    """x * rsqrt(mean(pow(x, 2), [-1], True) + eps) with x f32 -> (x, eps), unless a weighted
    norm (_match_rms) takes this product in."""
    core = _rms_core(node)
    if core is None or dtype(core[0]) != torch.float32 or shape(node) != shape(core[0]):
        return None
    if any(_match_rms(user) for user in node.users):
        return None
    return core


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


def _match_silu_mul_half(node: fx.Node):
    """to(silu(xf), bf16) * up with xf = to(g, f32), g and up bf16 (or both f16) -> (xf, up);
    silu as silu(xf) or xf * sigmoid(xf)."""
    if not _is(node, aten.mul.Tensor):
        return None
    for down, up in (node.args, node.args[::-1]):
        if not (_is(down, aten._to_copy.default) and isinstance(up, fx.Node)):
            continue
        if dtype(up) not in HALF or dtype(down) != dtype(up) or shape(down) != shape(up) or shape(node) != shape(up):
            continue
        if set(down.kwargs) - {"dtype"} or len(down.args) != 1:
            continue
        s = down.args[0]
        xf = None
        if _is(s, aten.silu.default):
            xf = s.args[0]
        elif _is(s, aten.mul.Tensor):
            a, b = s.args
            if _is(b, aten.sigmoid.default) and b.args[0] is a:
                xf = a
            elif _is(a, aten.sigmoid.default) and a.args[0] is b:
                xf = b
        if not isinstance(xf, fx.Node) or dtype(xf) != torch.float32 or shape(xf) != shape(up):
            continue
        return xf, up
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


def _match_linear_half(node: fx.Node, weights: set):
    """mm(x, permute(w, [1, 0])) with x and w both bf16 (or both f16), w a dense [N, K] input -> (x, w)."""
    if not _is(node, aten.mm.default):
        return None
    return _match_half_operands(node.args[0], node.args[1], weights)


def _match_half_operands(x, wt, weights: set):
    if not _is(wt, aten.permute.default) or list(wt.args[1]) != [1, 0]:
        return None
    w = wt.args[0]
    if not _is_weight(w, weights) or dtype(w) not in HALF or dtype(x) != dtype(w):
        return None
    return x, w


def _match_addmm_half(node: fx.Node, weights: set):
    """addmm(bias, x, permute(w, [1, 0])) in one 16-bit dtype -> (x, w, bias)."""
    if not _is(node, aten.addmm.default) or node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        return None
    bias, x, wt = node.args[:3]
    m = _match_half_operands(x, wt, weights)
    if not m or not isinstance(bias, fx.Node) or dtype(bias) != dtype(x):
        return None
    return m[0], m[1], bias


def match_expert_linear(node: fx.Node, weights) -> tuple | None:
    """squeeze(bmm(index(w, [ids]), unsqueeze(x, -1)), -1), transformers' "batched_mm" experts
    (integrations/moe.py: each (token, slot) row times its expert's matrix), with w a weight
    [E, N, K] in `weights`, ids [S] integer and x [S, K] of w's dtype -> (x, w, ids)."""
    if not (_is(node, aten.squeeze.dims) and list(node.args[1]) in ([-1], [2])) and not (
            _is(node, aten.squeeze.dim) and node.args[1] in (-1, 2)):
        return None
    bmm = node.args[0]
    if not _is(bmm, aten.bmm.default) or len(bmm.users) != 1:
        return None
    chosen, xu = bmm.args
    if not _is(chosen, aten.index.Tensor) or len(chosen.args[1]) != 1 or len(chosen.users) != 1:
        return None
    w, ids = chosen.args[0], chosen.args[1][0]
    if not isinstance(w, fx.Node) or w not in weights or len(shape(w)) != 3:
        return None
    if not _is(xu, aten.unsqueeze.default) or xu.args[1] not in (-1, 2):
        return None
    x = xu.args[0]
    if not isinstance(ids, fx.Node) or dtype(ids) not in (torch.int32, torch.int64) or len(shape(ids)) != 1:
        return None
    if len(shape(x)) != 2 or dtype(x) != dtype(w) or shape(x)[1] != shape(w)[2] or shape(x)[0] != shape(ids)[0]:
        return None
    return x, w, ids


def expert_linear(graph: fx.Graph, node: fx.Node, x: fx.Node, ids: fx.Node, num_experts: int,
                  weight_ops: tuple, casts: dict) -> fx.Node:
    """The rows x [S, K] times their experts' weights, read in place: moe_dispatch groups the rows
    by expert, grouped_matmul multiplies each group by its expert's [N, K] (weight_ops: the weight,
    and its scales when int8), index_select puts the products back in row order (exact), rounded
    to x's dtype once. Replaces `node`; returns the result."""
    rows = shape(x)[0]
    xf = x if dtype(x) == torch.float32 else _to(graph, node, x, torch.float32, casts)
    if (ids, "expert_ids") not in casts:
        ids32 = ids if dtype(ids) == torch.int32 else _to(graph, node, ids, torch.int32)
        casts[(ids, "expert_ids")] = _add(graph, node, aten.view.default, (ids32, [rows, 1]))
    dispatched = _add(graph, node, sk_ops.moe_dispatch.default, (xf, casts[(ids, "expert_ids")], num_experts))
    x_sorted, counts, row_map = (_add(graph, node, operator.getitem, (dispatched, i)) for i in range(3))
    y_sorted = _add(graph, node, sk_ops.grouped_matmul.default, (x_sorted, counts, *weight_ops))
    y = _add(graph, node, aten.index_select.default,
             (y_sorted, 0, _add(graph, node, aten.view.default, (row_map, [rows]))))
    if dtype(node) != torch.float32:
        y = _to(graph, node, y, dtype(node))
    node.replace_all_uses_with(y)
    return y


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


def _last_dim(node, dim) -> bool:
    return isinstance(dim, int) and dim in (-1, len(shape(node)) - 1)


def _is_slice_of(node, x, start: int, stop: int) -> bool:
    """slice(x, last dim, start, >= stop) with step 1, of [.., stop - start] elements."""
    if not _is(node, aten.slice.Tensor) or node.args[0] is not x:
        return False
    args = list(node.args) + [None] * (5 - len(node.args))
    dim, lo, hi, step = args[1], args[2] or 0, args[3], args[4] or 1
    return (_last_dim(x, dim) and lo == start and step == 1 and hi is not None and hi >= stop
            and shape(node)[-1] == stop - start)


def _doubled_trig(node, fn):
    """node = fn(cat([f, f], -1)), through unsqueeze, views, dtype copies and products with
    numbers (transformers' attention scaling): both halves of each row are equal. The cat node."""
    while True:
        if _is(node, aten.unsqueeze.default) or _is(node, aten._to_copy.default) or _is(node, aten.view.default):
            node = node.args[0]
        elif _is(node, aten.mul.Tensor) and isinstance(node.args[1], (int, float)):
            node = node.args[0]
        else:
            break
    if not _is(node, fn):
        return None
    cat = node.args[0]
    if not _is(cat, aten.cat.default) or len(cat.args[0]) != 2 or cat.args[0][0] is not cat.args[0][1]:
        return None
    if not _last_dim(cat, cat.args[1] if len(cat.args) > 1 else 0):
        return None
    return cat


def _match_rope(node: fx.Node):
    """x * C + cat([neg(x[..., h:]), x[..., :h]], -1) * S -> (x, C, S), as the module docstring says."""
    if not _is(node, aten.add.Tensor) or len(node.args) != 2 or node.kwargs:
        return None
    for m1, m2 in (node.args, node.args[::-1]):
        if not (_is(m1, aten.mul.Tensor) and _is(m2, aten.mul.Tensor)):
            continue
        for x, c in (m1.args, m1.args[::-1]):
            for rot, s in (m2.args, m2.args[::-1]):
                if not (isinstance(x, fx.Node) and isinstance(c, fx.Node) and isinstance(s, fx.Node)):
                    continue
                if not _is(rot, aten.cat.default) or len(rot.args[0]) != 2:
                    continue
                if not _last_dim(rot, rot.args[1] if len(rot.args) > 1 else 0):
                    continue
                neg, x1 = rot.args[0]
                if len(shape(x)) != 4 or dtype(x) not in (torch.float32, *HALF) or shape(node) != shape(x):
                    continue
                b, h, t, d = shape(x)
                if d % 2 or not _is(neg, aten.neg.default):
                    continue
                if not (_is_slice_of(neg.args[0], x, d // 2, d) and _is_slice_of(x1, x, 0, d // 2)):
                    continue
                cos_cat, sin_cat = _doubled_trig(c, aten.cos.default), _doubled_trig(s, aten.sin.default)
                if cos_cat is None or cos_cat is not sin_cat:
                    continue
                if shape(c) != [b, 1, t, d] or shape(s) != [b, 1, t, d]:
                    continue
                if dtype(c) != dtype(x) or dtype(s) != dtype(x):
                    continue
                # x viewed as [B*T, H, D] without a copy: the projection's [B, T, H, D] permuted.
                xv = val(x)
                if xv.stride() != (t * h * d, d, h * d, 1):
                    continue
                return x, c, s
    return None


def _add(graph: fx.Graph, before: fx.Node, target, args: tuple, kwargs: dict | None = None) -> fx.Node:
    """A node computing target(*args, **kwargs) inserted before `before`, its meta value from the
    inputs'."""
    kwargs = kwargs or {}
    with graph.inserting_before(before):
        new = graph.call_function(target, args, kwargs)
    new.meta["val"] = target(*torch.fx.node.map_arg(args, lambda n: n.meta["val"]), **kwargs)
    return new


def _to(graph: fx.Graph, before: fx.Node, x: fx.Node, to: torch.dtype, casts: dict | None = None) -> fx.Node:
    """x cast to `to`, inserted before `before`; with `casts`, one cast of x for all its users (the
    q, k and v projections of one normed input)."""
    if casts is None:
        return _add(graph, before, aten._to_copy.default, (x,), {"dtype": to})
    if (x, to) not in casts:
        casts[(x, to)] = _add(graph, before, aten._to_copy.default, (x,), {"dtype": to})
    return casts[(x, to)]


def constant_buffer(gm: fx.GraphModule, name: str, value: torch.Tensor, like: fx.Node) -> fx.Node:
    """A get_attr node over a new buffer `name` of gm holding `value`, after the graph's inputs
    (so that every node can read it); its meta from `like`'s."""
    gm.register_buffer(name, value)
    first = next(n for n in gm.graph.nodes if n.op != "placeholder")
    with gm.graph.inserting_before(first):
        node = gm.graph.get_attr(name)
    node.meta["val"] = like.meta["val"].new_empty(tuple(value.shape), dtype=value.dtype)
    return node


def _ones(gm: fx.GraphModule, like: fx.Node, n: int, constants: dict, value: float = 1.0) -> fx.Node:
    """A constant f32 [n] of ones (the weight of an unweighted RMS or layer norm), or of `value`
    (zeros: a layer norm's missing bias), one per length and value."""
    if (n, value) not in constants:
        name = f"_sk_ones_{n}" if value == 1.0 else f"_sk_fill_{n}_{len(constants)}"
        constants[(n, value)] = constant_buffer(gm, name, torch.full((n,), value, dtype=torch.float32), like)
    return constants[(n, value)]


def _match_layer_norm(node: fx.Node):
    """getitem(native_layer_norm(x, [D], weight, bias, eps), 0), mean and rstd unused, x f32 or
    16-bit with weight and bias (or None) of x's dtype or f32 -> (x, weight, bias, eps)."""
    if not (_is(node, operator.getitem) and node.args[1] == 0):
        return None
    ln = node.args[0]
    if not _is(ln, aten.native_layer_norm.default):
        return None
    x, normalized, weight, bias, eps = ln.args
    if list(normalized) != [shape(x)[-1]] or dtype(x) not in (torch.float32, *HALF):
        return None
    if any(u is not node and u.users for u in ln.users):
        return None
    for p in (weight, bias):
        if p is not None and (dtype(p) not in (torch.float32, dtype(x)) or list(shape(p)) != [shape(x)[-1]]):
            return None
    return x, weight, bias, float(eps)


def _rewrite_rope(gm: fx.GraphModule, node: fx.Node, x: fx.Node, c: fx.Node, s: fx.Node, tables: dict) -> None:
    graph = gm.graph
    b, h, t, d = shape(x)
    # Every layer unsqueezes the same cos and sin: one table for all of them.
    key = tuple(n.args[0] if _is(n, aten.unsqueeze.default) else n for n in (c, s))
    if key not in tables:
        # The table [B*T, D]: each row's cos(f) then sin(f); positions 0..B*T-1 (a constant).
        # Built right after the later of cos and sin, so that every layer's rope can read it.
        order = {n: i for i, n in enumerate(graph.nodes)}
        anchor = max((c, s), key=order.__getitem__).next
        halves = [_add(graph, anchor, aten.slice.Tensor, (n, 3, 0, d // 2)) for n in (c, s)]
        table = _add(graph, anchor, aten.cat.default, (halves, -1))
        table = _add(graph, anchor, aten.view.default, (table, [b * t, d]))
        if dtype(x) != torch.float32:  # a 16-bit table widened: exact
            table = _add(graph, anchor, aten._to_copy.default, (table,), {"dtype": torch.float32})
        name = f"_sk_rope_positions_{len(tables)}"
        gm.register_buffer(name, torch.arange(b * t, dtype=torch.int32))
        with graph.inserting_before(anchor):
            positions = graph.get_attr(name)
        positions.meta["val"] = table.meta["val"].new_empty((b * t,), dtype=torch.int32)
        tables[key] = (table, positions)
    table, positions = tables[key]
    rows = _add(graph, node, aten.permute.default, (x, [0, 2, 1, 3]))
    rows = _add(graph, node, aten.view.default, (rows, [b * t, h, d]))
    if dtype(x) != torch.float32:
        rows = _add(graph, node, aten._to_copy.default, (rows,), {"dtype": torch.float32})
    out = _add(graph, node, sk_ops.rope.default, (rows, positions, table, d, d, True))
    if dtype(x) != torch.float32:
        out = _add(graph, node, aten._to_copy.default, (out,), {"dtype": dtype(x)})
    out = _add(graph, node, aten.view.default, (out, [b, t, h, d]))
    out = _add(graph, node, aten.permute.default, (out, [0, 2, 1, 3]))
    node.replace_all_uses_with(out)


SDPA_TARGETS = (aten._scaled_dot_product_flash_attention_for_cpu.default, aten.scaled_dot_product_attention.default)


def rewrite(gm: fx.GraphModule, caps: Capabilities, dense_weights: set) -> list[str]:
    """Applies the rewrites in place; returns one line per rewrite kind with its count."""
    graph = gm.graph
    counts = {"matmul": 0, "experts": 0, "rms_norm": 0, "layer_norm": 0, "silu_mul": 0, "gqa": 0, "rope": 0}
    grouped = caps.kernel("moe_dispatch.f32") and caps.tensor("index_select")
    rope_tables: dict = {}
    ones: dict = {}
    casts: dict = {}
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
        m = _match_linear_half(node, dense_weights) or _match_addmm_half(node, dense_weights)
        if m and caps.kernel(HALF_KERNELS[dtype(m[1])]):
            x, w = m[0], m[1]
            y = _add(graph, node, sk_ops.matmul.default, (_to(graph, node, x, torch.float32, casts), w))
            if len(m) == 3:  # the bias added in f32, before the one rounding
                y = _add(graph, node, aten.add.Tensor, (y, _to(graph, node, m[2], torch.float32)))
            node.replace_all_uses_with(_to(graph, node, y, dtype(x)))
            counts["matmul"] += 1
            continue
        m = match_expert_linear(node, dense_weights) if grouped else None
        if m and dtype(m[1]) in GROUPED_KERNELS and caps.kernel(GROUPED_KERNELS[dtype(m[1])]):
            x, w, ids = m
            expert_linear(graph, node, x, ids, shape(w)[0], (w,), casts)
            counts["experts"] += 1
            continue
        if caps.kernel("rms_norm.f32"):
            m = _match_rms(node)
            if m:
                _replace(graph, node, sk_ops.rms_norm.default, m)
                counts["rms_norm"] += 1
                continue
            m = _match_rms_unweighted(node)
            if m:
                x, eps = m
                _replace(graph, node, sk_ops.rms_norm.default, (x, _ones(gm, x, shape(x)[-1], ones), eps))
                counts["rms_norm"] += 1
                continue
        if caps.kernel("layer_norm.f32"):
            m = _match_layer_norm(node)
            if m:
                x, weight, bias, eps = m
                d = shape(x)[-1]
                xf = _to(graph, node, x, torch.float32, casts) if dtype(x) != torch.float32 else x
                params = [_ones(gm, x, d, ones, fill) if p is None else
                          p if dtype(p) == torch.float32 else _to(graph, node, p, torch.float32)
                          for p, fill in ((weight, 1.0), (bias, 0.0))]
                y = _add(graph, node, sk_ops.layer_norm.default, (xf, *params, eps))
                node.replace_all_uses_with(y if dtype(x) == torch.float32 else _to(graph, node, y, dtype(x)))
                counts["layer_norm"] += 1
                continue
        if caps.kernel("silu_mul.f32"):
            m = _match_silu_mul(node)
            if m:
                _replace(graph, node, sk_ops.silu_mul.default, m)
                counts["silu_mul"] += 1
                continue
            m = _match_silu_mul_half(node)
            if m:
                xf, up = m
                y = _add(graph, node, sk_ops.silu_mul.default, (xf, _to(graph, node, up, torch.float32)))
                node.replace_all_uses_with(_to(graph, node, y, dtype(up)))
                counts["silu_mul"] += 1
                continue
        if caps.kernel("rope.f32"):
            m = _match_rope(node)
            if m:
                _rewrite_rope(gm, node, *m, rope_tables)
                counts["rope"] += 1
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
