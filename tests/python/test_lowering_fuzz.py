"""Differential fuzz of the PyTorch front-end: seeded random torch programs built from the ops the
lowering table (``superkernel._lowering.ATEN_LOWERINGS``) covers, compiled with
``backend="superkernel"`` and compared with torch eager.

A program is an ``nn.Module`` whose ``forward`` is generated Python source: inputs of every dtype
the graph holds (f32, bf16, f16, int32, int64, bool) with broadcast-compatible shapes, a buffer,
then a random sequence of element-wise ops (mixed dtypes, Python scalars on either side),
casts, views (slice with and without a step, select, permute, transpose, unsqueeze, expand, reshape), reductions with and
without keepdim, arg-reductions, softmax, cumsum, cat, matmul, index_select and gather, in-place
updates of inputs and of the buffer, and fusion scopes around random sub-ranges of the lines. The
generator runs each line in eager torch as it writes it and keeps only lines torch accepts, so
every program is one the eager model runs.

Invariants, for every program:

- the compiled model (superkernel mode) returns what eager torch returns: the same dtypes and
  shapes, the same values exactly where every op on the value's path is exact (integer and bool
  arithmetic, comparisons, views, copies, casts, one IEEE operation per element: add, sub, mul,
  div, max/min; not sqrt, which torch's vector code does not always round correctly), within TOLERANCE of its dtype otherwise; mutated inputs and the buffer
  end equal too;
- the same lowered graph gives the same bits in the eager, graph and superkernel modes;
- a program the backend refuses is refused with the backend's own error naming the node, never
  with an error of the graph's verifier about operands the lowering built.

    SK_LOWERING_FUZZ_CASES=2000 SK_LOWERING_FUZZ_SEED=1000 pytest tests/python/test_lowering_fuzz.py

A failure prints the program's source. Seeds that once failed are kept in REGRESSION_SEEDS.
"""

from __future__ import annotations

import os
import random
import re
import types

import pytest
import torch

import superkernel as sk
from conftest import MODES, bits, compile_fn, run_recorded

CASES = int(os.environ.get("SK_LOWERING_FUZZ_CASES", "60"))
FIRST_SEED = int(os.environ.get("SK_LOWERING_FUZZ_SEED", "1"))
# 1540: torch rounds bf16 rsqrt through a bf16 sqrt; upcast to f32, that ulp needs bf16's tolerance.
REGRESSION_SEEDS: list[int] = [1540]

# Tolerance (relative and absolute, scaled by the output's magnitude) for values that went through
# an inexact op (a transcendental, a reduction's order, a matmul's): a few units of the dtype's
# last place, allowing for the ulp a bf16/f16 intermediate may round differently.
TOLERANCE = {torch.float32: 2e-4, torch.bfloat16: 4e-2, torch.float16: 8e-3}
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
DTYPES = [torch.float32, torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool]
DTYPE_SRC = {
    torch.float32: "torch.float32", torch.bfloat16: "torch.bfloat16", torch.float16: "torch.float16",
    torch.int32: "torch.int32", torch.int64: "torch.int64", torch.bool: "torch.bool",
}
OPERAND = re.compile(r"\b(?:x\d+|v\d+|self\.buf)\b")  # the values a line's expression reads
MAX_MAGNITUDE = 1e4  # lines whose values grow past this (or turn non-finite) are not kept


class Value:
    """A value of the program: its eager tensor, whether every op on its path is exact, and the
    float dtype of least precision on its path (whose TOLERANCE applies to it: a bf16 rounding
    torch does differently survives a later upcast to f32)."""

    def __init__(self, name: str, tensor: torch.Tensor, exact: bool, coarsest: torch.dtype | None = None):
        self.name, self.t, self.exact = name, tensor, exact
        self.coarsest = coarsest if coarsest is not None else _coarser(None, tensor.dtype)


def _coarser(a: torch.dtype | None, b: torch.dtype | None) -> torch.dtype | None:
    """The float dtype of the two with the larger tolerance (None: no float dtype yet)."""
    cands = [d for d in (a, b) if d in TOLERANCE]
    return max(cands, key=TOLERANCE.get) if cands else None


def make_input(rng: random.Random, dtype: torch.dtype, shape: tuple, gen: torch.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=gen, dtype=dtype)
    return (torch.randn(shape, generator=gen) * 2).to(dtype)


class Program:
    """A random program: its source, inputs and buffer, as the generator built and checked them."""

    def __init__(self, seed: int):
        self.seed = seed
        rng = random.Random(seed)
        self.rng = rng
        gen = torch.Generator().manual_seed(seed)
        dims = [rng.choice([1, 2, 3]), rng.choice([2, 4, 5]), rng.choice([3, 4, 8])]
        self.inputs: list[torch.Tensor] = []
        self.values: list[Value] = []
        for i in range(rng.randint(2, 4)):
            rank = rng.choice([0, 1, 2, 2, 3, 3])
            shape = tuple(d if rng.random() < 0.8 else 1 for d in dims[3 - rank:])
            t = make_input(rng, rng.choice(DTYPES), shape, gen)
            self.inputs.append(t)
            self.values.append(Value(f"x{i}", t.clone(), True))
        self.buffer = torch.randn(tuple(dims[1:]), generator=gen)
        self.values.append(Value("self.buf", self.buffer.clone(), True))
        self.lines: list[str] = []
        self.mutated_inputs: set[int] = set()
        n = 0
        attempts = 0
        want = rng.randint(4, 14)
        while n < want and attempts < 200:
            attempts += 1
            made = self._try_line(f"v{n}")
            if made:
                n += 1
        self._add_scopes()
        outs = [v for v in self.values if v.name.startswith("v")]
        picked = outs[-1:] + rng.sample(outs[:-1], min(len(outs) - 1, rng.randint(0, 2)))
        if not picked:
            picked = [self.values[0]]
        self.outputs = picked
        self.source = self._source()

    # ---- generation ----

    def pick(self, pred=lambda v: True) -> Value | None:
        cands = [v for v in self.values if pred(v)]
        return self.rng.choice(cands) if cands else None

    def _try_line(self, name: str) -> bool:
        rng = self.rng
        kind = rng.choices(
            ["binary", "scalar", "unary", "where", "cast", "view", "reduce", "argreduce", "softmax", "cumsum", "cat",
             "matmul", "index", "inplace"],
            weights=[14, 8, 8, 3, 5, 8, 5, 2, 2, 1, 2, 2, 2, 3],
        )[0]
        made = getattr(self, "_gen_" + kind)(name)
        if made is None:
            return False
        expr, exact = made[0], made[1]
        inplace = len(made) > 2 and made[2]
        env = {v.name: v.t for v in self.values if not v.name.startswith("self.")}
        env["torch"] = torch
        env["self"] = types.SimpleNamespace(buf=self.value("self.buf").t)
        # Only an in-place line can leave values half-written when torch refuses it.
        saved = {v.name: v.t.clone() for v in self.values} if inplace else None
        try:
            with torch.no_grad():
                out = eval(expr, env)
        except Exception:
            if inplace:
                self._restore(saved)
            return False
        coarsest = None
        for used in OPERAND.findall(expr):
            coarsest = _coarser(coarsest, self.value(used).coarsest)
        if inplace:
            return self._keep_inplace(expr, saved, made[3], exact, coarsest)
        if not isinstance(out, torch.Tensor) or out.dtype not in DTYPE_SRC or out.numel() == 0:
            return False
        if not _tame(out):
            return False
        self.lines.append(f"{name} = {expr}")
        self.values.append(Value(name, out, exact, _coarser(coarsest, out.dtype)))
        return True

    def _restore(self, saved):
        for v in self.values:
            v.t.copy_(saved[v.name])

    def _keep_inplace(self, expr, saved, target: Value, exact: bool, coarsest) -> bool:
        if not _tame(target.t):
            self._restore(saved)
            return False
        target.exact = target.exact and exact
        target.coarsest = _coarser(target.coarsest, coarsest)
        self.lines.append(expr)
        if target.name.startswith("x"):
            self.mutated_inputs.add(int(target.name[1:]))
        return True

    def _operand_or_scalar(self):
        return self.rng.choice([2, -3, 0.5, 1.5, -2.0, 3, True, 1.1, -0.3, 0.1])

    def _gen_binary(self, name):
        rng = self.rng
        op = rng.choice(["+", "-", "*", "/", "maximum", "minimum", "==", "<", ">=", "!=", "&", "|", "logical_and"])
        a = self.pick()
        b = self.pick(lambda v: _broadcasts(a.t, v.t))
        if a is None or b is None:
            return None
        if op in ("==", "<", ">=", "!=") and not (a.exact and b.exact):
            return None  # a comparison of rounded values could flip on a last-place difference
        exact = a.exact and b.exact
        if op == "/":
            # Division by a value away from zero: |b| + 1 (a float divisor keeps it one IEEE op).
            return f"{a.name} / ({b.name}.abs() + 1.0)", exact and b.t.dtype.is_floating_point
        if op in ("maximum", "minimum", "logical_and"):
            return f"torch.{op}({a.name}, {b.name})", exact
        return f"{a.name} {op} {b.name}", exact

    def _gen_scalar(self, name):
        rng = self.rng
        a = self.pick()
        s = self._operand_or_scalar()
        op = rng.choice(["+", "-", "*", "/", "**", "==", ">", "<="])
        if op == "**":
            s = rng.choice([2, 3, 0.5])
            if s == 0.5:
                return f"{a.name}.abs() ** 0.5", False
            return f"{a.name} ** {s}", a.exact and s == 2
        if op in ("==", ">", "<=") and not a.exact:
            return None
        if op == "/" and rng.random() < 0.5:
            return f"{s!r} / ({a.name}.abs() + 1)", a.exact and a.t.dtype.is_floating_point
        if rng.random() < 0.4:
            return f"{s!r} {op} {a.name}", a.exact
        return f"{a.name} {op} {s!r}", a.exact

    def _gen_unary(self, name):
        rng = self.rng
        a = self.pick(lambda v: v.t.dtype != torch.bool)
        if a is None:
            return None
        big = a.t.numel() and float(a.t.float().abs().max()) > 8
        choice = rng.choice(["neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
                             "silu", "gelu", "reciprocal"])
        x = a.name
        if choice in ("neg", "abs"):
            return f"torch.{choice}({x})", a.exact
        if choice == "relu":
            return f"torch.relu({x})", a.exact
        if choice == "exp":
            return (None if big else (f"torch.exp({x})", False))
        if choice == "log":
            return f"torch.log({x}.abs() + 1)", False
        if choice == "sqrt":
            return f"torch.sqrt({x}.abs())", False  # torch's vector sqrt is not always correctly rounded
        if choice == "rsqrt":
            return f"torch.rsqrt({x}.abs() + 1)", False
        if choice == "reciprocal":
            return f"torch.reciprocal({x}.abs() + 1)", False
        if choice in ("silu", "gelu"):
            if not a.t.dtype.is_floating_point:
                return None  # torch has no integer silu/gelu
            return f"torch.nn.functional.{choice}({x})", False
        return f"torch.{choice}({x})", False

    def _gen_where(self, name):
        c = self.pick(lambda v: v.t.dtype == torch.bool and v.exact)
        a = self.pick()
        if c is None or a is None:
            return None
        b = self.pick(lambda v: _broadcasts(a.t, v.t) and _broadcasts(c.t, v.t))
        if b is None or not _broadcasts(c.t, a.t):
            return None
        if self.rng.random() < 0.2:
            return f"torch.where({c.name}, {a.name}, {self._operand_or_scalar()!r})", a.exact
        return f"torch.where({c.name}, {a.name}, {b.name})", a.exact and b.exact

    def _gen_cast(self, name):
        a = self.pick()
        to = self.rng.choice(list(DTYPE_SRC))
        if not to.is_floating_point and a.t.dtype.is_floating_point and not a.exact:
            return None  # truncating a rounded value could land on the other integer
        if to == torch.bool and not a.exact:
            return None
        return f"{a.name}.to({DTYPE_SRC[to]})", a.exact  # one rounding of an exact value is exact

    def _gen_view(self, name):
        rng = self.rng
        a = self.pick(lambda v: v.t.dim() > 0)
        if a is None:
            return None
        r = a.t.dim()
        x = a.name
        kind = rng.choice(["slice", "select", "permute", "transpose", "unsqueeze", "expand", "reshape"])
        if kind == "slice":
            d = rng.randrange(r)
            n = a.t.shape[d]
            if n < 2:
                return None
            start = rng.randrange(n - 1)
            step = rng.choice([1, 1, 2, 3])  # a stepped slice is a strided view
            index = ", ".join([":"] * d + [f"{start}:{rng.randint(start + 1, n)}" + (f":{step}" if step > 1 else "")])
            expr = f"{x}[{index}]"
        elif kind == "select":
            d = rng.randrange(r)
            expr = f"{x}.select({d}, {rng.randrange(a.t.shape[d]) - (a.t.shape[d] if rng.random() < 0.3 else 0)})"
        elif kind == "permute":
            perm = list(range(r))
            rng.shuffle(perm)
            expr = f"{x}.permute({', '.join(map(str, perm))})"
        elif kind == "transpose":
            if r < 2:
                return None
            expr = f"{x}.transpose({-1}, {-2})"
        elif kind == "unsqueeze":
            expr = f"{x}.unsqueeze({rng.randint(-r - 1, r)})"
        elif kind == "expand":
            shape = [s if s != 1 else rng.choice([1, 3]) for s in a.t.shape]
            expr = f"{x}.expand({', '.join(map(str, shape))})"
        else:
            expr = f"{x}.reshape(-1)" if rng.random() < 0.6 else f"{x}.reshape({a.t.numel()}, 1)"
        # A view feeds an op so that it is not an alias of an input left for the output.
        return f"({expr}) * 1" if a.t.dtype != torch.bool else f"({expr}).clone()", a.exact

    def _gen_reduce(self, name):
        rng = self.rng
        a = self.pick(lambda v: v.t.dim() > 0)
        if a is None:
            return None
        r = a.t.dim()
        op = rng.choice(["sum", "mean", "amax", "amin", "var"])
        dims = sorted(rng.sample(range(r), rng.randint(1, r)))
        dims = [d - r if rng.random() < 0.3 else d for d in dims]
        keep = rng.random() < 0.5
        dim_src = str(dims[0]) if len(dims) == 1 and rng.random() < 0.5 else f"[{', '.join(map(str, dims))}]"
        exact = a.exact and op in ("amax", "amin") or (a.exact and op == "sum" and not a.t.dtype.is_floating_point)
        if op == "var":
            if not a.t.dtype.is_floating_point:
                return None
            return f"{a.name}.var({dim_src}, keepdim={keep})", False
        return f"{a.name}.{op}({dim_src}, keepdim={keep})", exact

    def _gen_argreduce(self, name):
        rng = self.rng
        a = self.pick(lambda v: v.t.dim() > 0 and v.exact and v.t.dtype != torch.bool)
        if a is None:
            return None
        d = rng.randrange(a.t.dim())
        keep = rng.random() < 0.5
        kind = rng.choice(["argmax", "argmin", "max", "min"])
        if kind in ("max", "min"):
            return f"{a.name}.{kind}({d}, keepdim={keep})[{rng.randint(0, 1)}]", True
        return f"torch.{kind}({a.name}, {d}, keepdim={keep})", True

    def _gen_softmax(self, name):
        a = self.pick(lambda v: v.t.dim() > 0 and v.t.dtype.is_floating_point)
        if a is None:
            return None
        return f"torch.softmax({a.name}, -1)", False

    def _gen_cumsum(self, name):
        a = self.pick(lambda v: v.t.dim() > 0 and v.t.dtype != torch.bool)
        if a is None:
            return None
        d = self.rng.randrange(a.t.dim())
        return f"torch.cumsum({a.name}, {d})", a.exact and not a.t.dtype.is_floating_point

    def _gen_cat(self, name):
        a = self.pick(lambda v: v.t.dim() > 0)
        if a is None:
            return None
        d = self.rng.randrange(a.t.dim())
        b = self.pick(lambda v: v.t.dim() == a.t.dim() and v.t.dtype == a.t.dtype and all(
            x == y for i, (x, y) in enumerate(zip(v.t.shape, a.t.shape)) if i != d))
        return f"torch.cat([{a.name}, {b.name}], {d})", a.exact and b.exact

    def _gen_matmul(self, name):
        a = self.pick(lambda v: v.t.dim() >= 2 and v.t.dtype in FLOATS)
        if a is None:
            return None
        b = self.pick(lambda v: v.t.dim() >= 2 and v.t.dtype == a.t.dtype and v.t.shape[-1] == a.t.shape[-1])
        if b is None:
            return None
        return f"torch.matmul({a.name}, {b.name}.transpose(-1, -2))", False

    def _gen_index(self, name):
        rng = self.rng
        a = self.pick(lambda v: v.t.dim() > 0)
        if a is None:
            return None
        d = rng.randrange(a.t.dim())
        n = a.t.shape[d]
        idx = [rng.randrange(n) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.5:
            return f"torch.index_select({a.name}, {d}, torch.tensor({idx}))", a.exact
        shape = list(a.t.shape)
        shape[d] = len(idx)
        index = torch.randint(0, n, shape, generator=torch.Generator().manual_seed(rng.randrange(1 << 30)))
        return f"torch.gather({a.name}, {d}, torch.tensor({index.tolist()}))", a.exact

    def _gen_inplace(self, name):
        rng = self.rng
        target = self.pick(lambda v: v.name == "self.buf" or (v.name.startswith("x") and v.t.dim() > 0))
        if target is None:
            return None
        src = self.pick(lambda v: v is not target and _broadcasts_to(v.t, target.t))
        kind = rng.choice(["add_", "mul_", "copy_", "index_copy_", "fill"])
        if kind == "fill":
            return f"{target.name}[0] = {self._operand_or_scalar()!r}", True, True, target
        if src is None:
            return None
        if kind == "copy_" and not src.exact and not target.t.dtype.is_floating_point:
            return None  # truncating a rounded value could land on the other integer
        if kind == "index_copy_":
            if target.t.dim() < 1 or target.t.shape[0] < 2:
                return None
            rows = sorted(rng.sample(range(target.t.shape[0]), rng.randint(1, 2)))
            return (f"{target.name}.index_copy_(0, torch.tensor({rows}), {src.name}.expand_as({target.name})"
                    f"[:{len(rows)}].to({target.name}.dtype))"), src.exact, True, target
        if kind == "copy_":
            return f"{target.name}.copy_({src.name})", src.exact, True, target
        return f"{target.name}.{kind}({src.name})", src.exact, True, target

    def _add_scopes(self):
        rng = self.rng
        self.scopes: list[tuple[int, int, str]] = []
        n = len(self.lines)
        if n < 2 or rng.random() < 0.3:
            return
        a = rng.randrange(n - 1)
        b = rng.randint(a + 1, n)
        self.scopes.append((a, b, "s0"))
        if b < n - 1 and rng.random() < 0.5:
            c = rng.randrange(b, n - 1)
            self.scopes.append((c, rng.randint(c + 1, n), "s1"))

    def _source(self) -> str:
        args = ", ".join(f"x{i}" for i in range(len(self.inputs)))
        out = [f"def forward(self, {args}):"]
        ends = {}
        begins = {}
        for a, b, s in self.scopes:
            begins[a] = s
            ends[b] = s
        indent = "    "
        for i, line in enumerate(self.lines):
            if i in ends:
                indent = "    "
            if i in begins:
                out.append(f"    with superkernel.scope({begins[i]!r}):")
                indent = "        "
            out.append(indent + line)
        out.append(f"    return ({', '.join(v.name for v in self.outputs)},)")
        return "\n".join(out)

    def module(self) -> torch.nn.Module:
        env = {"torch": torch, "superkernel": sk}
        exec(self.source, env)

        class Fuzzed(torch.nn.Module):
            pass

        Fuzzed.forward = env["forward"]
        m = Fuzzed()
        m.register_buffer("buf", self.buffer.clone())
        return m

    def value(self, name: str) -> Value:
        return next(v for v in self.values if v.name == name)



def _tame(t: torch.Tensor) -> bool:
    """Finite and below MAX_MAGNITUDE (floats), below 1e6 (integers: no overflow later)."""
    if t.dtype == torch.bool or t.numel() == 0:
        return True
    f = t.double()
    bound = MAX_MAGNITUDE if t.dtype.is_floating_point else 1e6
    return bool(torch.isfinite(f).all()) and float(f.abs().max()) <= bound


def _broadcasts(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        torch.broadcast_shapes(a.shape, b.shape)
        return True
    except RuntimeError:
        return False


def _broadcasts_to(src: torch.Tensor, dst: torch.Tensor) -> bool:
    try:
        return torch.broadcast_shapes(src.shape, dst.shape) == dst.shape
    except RuntimeError:
        return False


def _same(got: torch.Tensor, want: torch.Tensor, value: Value) -> str | None:
    exact = value.exact
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)} where torch gives {want.dtype}{list(want.shape)}"
    if exact or not want.dtype.is_floating_point:
        if want.dtype.is_floating_point:
            if torch.equal(torch.nan_to_num(got, nan=0.5), torch.nan_to_num(want, nan=0.5)):
                return None
        elif torch.equal(got, want):
            return None
        return f"differs from torch (exact): got {got.tolist()}, torch {want.tolist()}"
    tol = TOLERANCE[_coarser(value.coarsest, want.dtype)]
    scale = 1.0 + float(want.float().abs().max())
    err = float((got.float() - want.float()).abs().max())
    if err <= tol * scale:
        return None
    return f"max abs error {err:.3g} over the tolerance {tol * scale:.3g}: got {got.tolist()}, torch {want.tolist()}"


def _refusal_is_named(e: BaseException) -> str | None:
    """None when the error chain holds the backend's own error naming a node, else why not."""
    chain, seen = [], e
    while seen is not None:
        chain.append(seen)
        seen = seen.__cause__ or getattr(seen, "inner_exception", None) or seen.__context__
        if len(chain) > 20:
            break
    ours = [x for x in chain if isinstance(x, sk.SuperkernelError)]
    if not ours:
        return f"refused with {type(e).__name__}, not a superkernel error: {e}"
    msg = str(ours[0])
    if "node '" not in msg and "host step" not in msg and "host op '" not in msg:
        return f"the refusal does not name the node: {msg}"
    for verifier_words in ("have different dtypes", "do not broadcast", "verif"):
        if verifier_words in msg:
            return f"the lowering built operands the graph rejects: {msg}"
    return None


def run_program(seed: int) -> None:
    p = Program(seed)
    where = f"seed {seed}:\n{p.source}"
    ref_m, m = p.module(), p.module()
    ref_in = [t.clone() for t in p.inputs]
    got_in = [t.clone() for t in p.inputs]
    with torch.no_grad():
        want = ref_m(*ref_in)
    compiled = compile_fn(m, MODES["superkernel"])
    try:
        with torch.no_grad():
            got, ran = run_recorded(compiled, *got_in)
    except Exception as e:  # noqa: BLE001 - the refusal's form is what is checked
        why = _refusal_is_named(e)
        assert why is None, f"{where}\n{why}"
        return
    for i, (g, w) in enumerate(zip(got, want)):
        why = _same(g, w, p.outputs[i])
        assert why is None, f"{where}\noutput {i} ({p.outputs[i].name}): {why}"
    for i in sorted(p.mutated_inputs):
        why = _same(got_in[i], ref_in[i], p.value(f"x{i}"))
        assert why is None, f"{where}\ninput x{i} after the call: {why}"
    why = _same(m.buf, ref_m.buf, p.value("self.buf"))
    assert why is None, f"{where}\nthe buffer after the call: {why}"
    # The same lowered graphs in the other two modes: the same bits.
    for graph, args in ran:
        ref_bits = [bits(t) for t in graph(*[a.clone() for a in args]) if isinstance(t, torch.Tensor)]
        for mode in ("eager", "graph"):
            outs = graph.with_options(MODES[mode])(*[a.clone() for a in args])
            outs = [bits(t) for t in outs if isinstance(t, torch.Tensor)]
            assert all(torch.equal(a, b) for a, b in zip(outs, ref_bits)), f"{where}\n{mode} mode differs in bits"


SEEDS = REGRESSION_SEEDS + list(range(FIRST_SEED, FIRST_SEED + CASES))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program_matches_torch_in_every_mode(seed):
    run_program(seed)


def test_generator_covers_what_it_claims():
    """The generator must make what the docstring says it fuzzes, or the fuzz proves less."""
    lines = "\n".join(Program(s).source for s in range(1, 201))
    for what in ["torch.bfloat16", "torch.float16", "torch.int32", "torch.int64", "torch.bool", ".select(",
                 ".permute(", ".expand(", "keepdim=True", "keepdim=False", "superkernel.scope", "self.buf.",
                 "torch.cat(", "torch.matmul(", "torch.gather(", "torch.index_select(", "torch.where(", "2.0",
                 "index_copy_", "torch.softmax(", ".transpose(", ".unsqueeze(", "torch.cumsum(", ".var("]:
        assert what in lines, f"no program of seeds 1..200 has {what!r}"
    assert re.search(r"\[[^\]]*\d:\d", lines), "no program of seeds 1..200 slices"
