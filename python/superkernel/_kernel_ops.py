"""The kernels of the loaded packages as torch ops: ``torch.ops.superkernel.<name>``.

One ``KernelSignature`` per op says everything the three users of an op need: its torch schema,
the kernel it runs (chosen from the operands' dtypes, as the C++ nn:: builders choose), which
arguments the kernel reads in which order, the outputs (dtype and shape from the arguments: the
fake implementation under torch.compile), the attribute blob, and the arguments it writes in
place. In plain torch a call runs the kernel on the tensors (a one-op executable, compiled once
per shapes and attributes and cached); under the backend the call becomes that graph op.

    logits = model_logits  # f32 [T, E]
    ids, weights = torch.ops.superkernel.moe_router(logits, bias, top_k=2, num_real_experts=8)

A user kernel package gets its ops the same way: ``load_kernel_package(path, signatures=[...])``
with a KernelSignature per kernel, or ``torch.ops.superkernel.call_kernel`` for any kernel by name
with explicit output specs.
"""

from __future__ import annotations

import math
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import _superkernel
from ._errors import InvalidArgumentError
from ._torch_types import to_sk, to_torch

Spec = tuple[torch.dtype, Sequence[int]]


@dataclass(frozen=True)
class KernelSignature:
    """How ``torch.ops.superkernel.<name>`` calls a kernel.

    name: the op name. schema: its torch schema without the name, e.g.
    "(Tensor x, Tensor weight, float eps) -> Tensor". inputs: the schema arguments the kernel
    reads, in the kernel's operand order (an optional one that is None is left out). outputs:
    args -> [(dtype, shape)] of the new outputs. kernel: the kernel name, or args -> name.
    attrs: args -> bytes (the kernel's attribute struct). mutates: arguments the kernel writes in
    place (after the new outputs, in this order; the schema marks them Tensor(a!)).
    """

    name: str
    schema: str
    inputs: tuple[str, ...]
    outputs: Callable[[dict], list[Spec]]
    kernel: str | Callable[[dict], str]
    attrs: Callable[[dict], bytes] | None = None
    mutates: tuple[str, ...] = ()
    doc: str = ""
    arg_names: tuple[str, ...] = field(default=(), compare=False)

    def kernel_name(self, args: dict) -> str:
        return self.kernel if isinstance(self.kernel, str) else self.kernel(args)

    def attr_bytes(self, args: dict) -> bytes:
        return self.attrs(args) if self.attrs else b""

    def input_names(self, args: dict) -> list[str]:
        return [n for n in self.inputs if args.get(n) is not None]


def _dtype_suffix(t: torch.Tensor) -> str:
    return {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.int8: "i8"}.get(
        t.dtype, str(t.dtype))


def _weight_kernel(family: str, weight_arg: str = "weight") -> Callable[[dict], str]:
    def choose(args: dict) -> str:
        w = args[weight_arg]
        if w.dtype == torch.int8:
            return f"{family}.w8a8_dyn"
        return f"{family}.{_dtype_suffix(w)}"

    return choose


def _cache_kernel(family: str, cache_arg: str) -> Callable[[dict], str]:
    return lambda args: f"{family}.{_dtype_suffix(args[cache_arg])}"


def _like(arg: str, dtype: torch.dtype = torch.float32) -> Callable[[dict], list[Spec]]:
    return lambda args: [(dtype, list(args[arg].shape))]


def _last(arg: str, last_from: str, dim: int) -> Callable[[dict], list[Spec]]:
    return lambda args: [(torch.float32, list(args[arg].shape[:-1]) + [args[last_from].shape[dim]])]


def _pack(fmt: str, *names: str) -> Callable[[dict], bytes]:
    return lambda args: struct.pack(fmt, *(args[n] for n in names))


def _router_attrs(args: dict) -> bytes:
    base = struct.pack(
        "<iiiif",
        args["top_k"],
        args["num_real_experts"],
        1 if args["sigmoid"] else 0,
        1 if args["normalize"] else 0,
        args["routed_scaling_factor"],
    )
    if args["n_group"] == 1 and args["topk_group"] == 1:
        return base
    return base + struct.pack("<ii", args["n_group"], args["topk_group"])


BUILTIN_SIGNATURES: tuple[KernelSignature, ...] = (
    # ---- core (ops.h) ----
    KernelSignature("add", "(Tensor a, Tensor b) -> Tensor", ("a", "b"), _like("a"), "add.f32",
                    doc="a + b, b of a's shape or a suffix of it (f32)"),
    KernelSignature("mul", "(Tensor a, Tensor b) -> Tensor", ("a", "b"), _like("a"), "mul.f32",
                    doc="a * b, b of a's shape or a suffix of it (f32)"),
    KernelSignature("silu_mul", "(Tensor gate, Tensor up) -> Tensor", ("gate", "up"), _like("gate"), "silu_mul.f32",
                    doc="silu(gate) * up"),
    KernelSignature("rms_norm", "(Tensor x, Tensor weight, float eps) -> Tensor", ("x", "weight"), _like("x"),
                    "rms_norm.f32", _pack("<f", "eps"), doc="x / sqrt(mean(x^2, -1) + eps) * weight"),
    KernelSignature("softmax", "(Tensor x) -> Tensor", ("x",), _like("x"), "softmax.f32",
                    doc="softmax over the last dim"),
    KernelSignature("embedding", "(Tensor ids, Tensor table) -> Tensor", ("ids", "table"),
                    lambda a: [(torch.float32, list(a["ids"].shape) + [a["table"].shape[1]])], "embedding.f32",
                    doc="rows of table [V, D] at ids (i32)"),
    KernelSignature("copy", "(Tensor x) -> Tensor", ("x",), lambda a: [(a["x"].dtype, list(a["x"].shape))], "copy",
                    doc="dense copy"),
    # ---- matmul family ----
    KernelSignature("matmul", "(Tensor x, Tensor weight, Tensor? scale=None) -> Tensor", ("x", "weight", "scale"),
                    _last("x", "weight", 0), _weight_kernel("matmul"),
                    doc="x [..., K] (f32) times weight [N, K]^T: f32, bf16, f16, or i8 with per-channel scale [N] "
                        "(w8a8_dyn)"),
    KernelSignature("matmul_int4", "(Tensor x, Tensor weight, Tensor scale, Tensor? zero=None, "
                    "bool f32_activations=False) -> Tensor", ("x", "weight", "scale", "zero"),
                    lambda a: [(torch.float32, list(a["x"].shape[:-1]) + [
                        a["weight"].shape[0] * 16 if a["weight"].dim() == 4 else a["weight"].shape[0]])],
                    lambda a: "matmul.w4" if a["f32_activations"] else "matmul.w4a8_dyn",
                    doc="x [..., K] (f32) times group-wise 4-bit weights (superkernel.nn.quantize_int4's weight, "
                        "scale and zero): matmul.w4a8_dyn, or matmul.w4 with f32_activations"),
    KernelSignature("quantize", "(Tensor x) -> (Tensor, Tensor)", ("x",),
                    lambda a: [(torch.int8, list(a["x"].shape)), (torch.float32, list(a["x"].shape[:-1]))],
                    "quantize.i8", doc="per-row symmetric int8: (q i8 [..., K], scale f32 [...])"),
    KernelSignature("matmul_w8a8", "(Tensor q, Tensor x_scale, Tensor weight, Tensor w_scale) -> Tensor",
                    ("q", "x_scale", "weight", "w_scale"), _last("q", "weight", 0), "matmul.w8a8",
                    doc="pre-quantized activations times int8 weights"),
    KernelSignature("grouped_matmul", "(Tensor x, Tensor counts, Tensor weight, Tensor? scale=None) -> Tensor",
                    ("x", "counts", "weight", "scale"),
                    lambda a: [(torch.float32, [a["x"].shape[0], a["weight"].shape[1]])],
                    _weight_kernel("grouped_matmul"),
                    doc="rows of x [R, K] grouped by counts [E] times weight [E, N, K]^T"),
    # ---- attention family ----
    KernelSignature("layer_norm", "(Tensor x, Tensor gamma, Tensor beta, float eps) -> Tensor", ("x", "gamma", "beta"),
                    _like("x"), "layer_norm.f32", _pack("<f", "eps")),
    KernelSignature("rope",
                    "(Tensor x, Tensor positions, Tensor cos_sin, int head_dim, int rotary_dim, bool neox_style=True)"
                    " -> Tensor", ("x", "positions", "cos_sin"), _like("x"), "rope.f32",
                    lambda a: struct.pack("<iii", a["head_dim"], a["rotary_dim"], 1 if a["neox_style"] else 0),
                    doc="rotary embedding of x [T, H, Dh] at positions (i32) from a cos/sin table"),
    KernelSignature("kv_append",
                    "(Tensor k_new, Tensor v_new, Tensor slot_mapping, Tensor(a!) k_cache, Tensor(b!) v_cache) -> ()",
                    ("k_new", "v_new", "slot_mapping", "k_cache", "v_cache"), lambda a: [],
                    _cache_kernel("kv_append", "k_cache"), mutates=("k_cache", "v_cache"),
                    doc="writes k_new, v_new [T, Hkv, Dh] at slot_mapping into the paged caches in place"),
    KernelSignature("paged_attention",
                    "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, Tensor context_lens, float scale)"
                    " -> Tensor", ("q", "k_cache", "v_cache", "block_tables", "context_lens"), _like("q"),
                    _cache_kernel("paged_attention", "k_cache"), _pack("<f", "scale")),
    KernelSignature("paged_attention_prefill",
                    "(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, Tensor seq_ids, Tensor positions,"
                    " float scale) -> Tensor", ("q", "k_cache", "v_cache", "block_tables", "seq_ids", "positions"),
                    _like("q"), _cache_kernel("paged_attention_prefill", "k_cache"), _pack("<f", "scale")),
    KernelSignature("mla_cache_append",
                    "(Tensor c_kv, Tensor k_pe, Tensor slot_mapping, Tensor(a!) latent_cache) -> ()",
                    ("c_kv", "k_pe", "slot_mapping", "latent_cache"), lambda a: [],
                    _cache_kernel("mla_cache_append", "latent_cache"), mutates=("latent_cache",)),
    KernelSignature("mla_attention",
                    "(Tensor q_latent, Tensor q_pe, Tensor latent_cache, Tensor block_tables, Tensor context_lens,"
                    " float scale) -> Tensor", ("q_latent", "q_pe", "latent_cache", "block_tables", "context_lens"),
                    _like("q_latent"), _cache_kernel("mla_attention", "latent_cache"),
                    lambda a: struct.pack("<iif", a["q_latent"].shape[2], a["q_pe"].shape[2], a["scale"]),
                    doc="absorbed MLA over a paged latent cache, one query per sequence"),
    KernelSignature("mla_attention_prefill",
                    "(Tensor q_latent, Tensor q_pe, Tensor latent_cache, Tensor block_tables, Tensor seq_ids,"
                    " Tensor positions, float scale) -> Tensor",
                    ("q_latent", "q_pe", "latent_cache", "block_tables", "seq_ids", "positions"), _like("q_latent"),
                    _cache_kernel("mla_attention_prefill", "latent_cache"),
                    lambda a: struct.pack("<iif", a["q_latent"].shape[2], a["q_pe"].shape[2], a["scale"])),
    KernelSignature("batched_matmul", "(Tensor x, Tensor w) -> Tensor", ("x", "w"),
                    lambda a: [(torch.float32, [a["x"].shape[0], a["x"].shape[1], a["w"].shape[1]])],
                    "batched_matmul.f32", doc="x [Hb, M, K] times w [Hb, N, K]^T"),
    # ---- MoE and sampling family ----
    KernelSignature("moe_router",
                    "(Tensor logits, Tensor bias, int top_k, int num_real_experts, bool sigmoid=False,"
                    " bool normalize=True, float routed_scaling_factor=1.0, int n_group=1, int topk_group=1)"
                    " -> (Tensor, Tensor)", ("logits", "bias"),
                    lambda a: [(torch.int32, [a["logits"].shape[0], a["top_k"]]),
                               (torch.float32, [a["logits"].shape[0], a["top_k"]])],
                    "moe_router.f32", _router_attrs,
                    doc="top-k experts (ids i32, weights f32) from logits [T, E+Z], with zero experts and groups"),
    KernelSignature("moe_dispatch", "(Tensor x, Tensor topk_ids, int num_real_experts, int num_zero_experts=0)"
                    " -> (Tensor, Tensor, Tensor)", ("x", "topk_ids"),
                    lambda a: [(torch.float32, [a["topk_ids"].numel(), a["x"].shape[1]]),
                               (torch.int32, [a["num_real_experts"]]),
                               (torch.int32, list(a["topk_ids"].shape))],
                    "moe_dispatch.f32", _pack("<ii", "num_real_experts", "num_zero_experts"),
                    doc="rows sorted by expert: (x_sorted, counts, row_map)"),
    KernelSignature("moe_combine", "(Tensor y, Tensor row_map, Tensor topk_weights, Tensor x) -> Tensor",
                    ("y", "row_map", "topk_weights", "x"), _like("x"), "moe_combine.f32"),
    KernelSignature("moe_combine_shared",
                    "(Tensor y, Tensor row_map, Tensor topk_weights, Tensor x, Tensor shared) -> Tensor",
                    ("y", "row_map", "topk_weights", "x", "shared"), _like("x"), "moe_combine_shared.f32"),
    KernelSignature("argmax", "(Tensor logits) -> Tensor", ("logits",),
                    lambda a: [(torch.int32, [a["logits"].shape[0]])], "argmax.f32"),
    KernelSignature("sample",
                    "(Tensor logits, Tensor step, int seed, float temperature, float top_p=1.0, int top_k=0) -> Tensor",
                    ("logits", "step"), lambda a: [(torch.int32, [a["logits"].shape[0]])], "sample.f32",
                    lambda a: struct.pack("<Qffii", a["seed"], a["temperature"], a["top_p"], a["top_k"], 0)),
)

# Kernels reached another way: the prefetch marker op (superkernel.prefetch) is the prefetch kernel.
KERNELS_WITHOUT_OP = {"prefetch": "torch.ops.superkernel.prefetch (superkernel.prefetch)"}

_registry: dict[str, KernelSignature] = {}
_by_target: dict[Any, KernelSignature] = {}


def _fake(sig: KernelSignature):
    def fake(*args, **kwargs):
        bound = _bind(sig, args, kwargs)
        device = next(v.device for v in bound.values() if isinstance(v, torch.Tensor))
        outs = [torch.empty(list(shape), dtype=dtype, device=device) for dtype, shape in sig.outputs(bound)]
        return _result(outs)

    return fake


def _result(outs: list):
    if not outs:
        return None
    return outs[0] if len(outs) == 1 else tuple(outs)


_schemas: dict[str, Any] = {}


def _parsed_schema(sig: KernelSignature):
    # Parsed once per op: parse_schema costs about 7 us, a call of a small kernel not much more.
    schema = _schemas.get(sig.schema)
    if schema is None:
        schema = _schemas[sig.schema] = torch._C.parse_schema(f"superkernel::{sig.name}{sig.schema}")
    return schema


def _bind(sig: KernelSignature, args: tuple, kwargs: dict) -> dict:
    schema = _parsed_schema(sig)
    bound = {}
    for i, a in enumerate(schema.arguments):
        if i < len(args):
            bound[a.name] = args[i]
        elif a.name in kwargs:
            bound[a.name] = kwargs[a.name]
        elif a.has_default_value():
            bound[a.name] = a.default_value
        else:
            raise InvalidArgumentError(f"torch.ops.superkernel.{sig.name}: missing argument '{a.name}'")
    return bound


def bind_node_args(sig: KernelSignature, args: tuple, kwargs: dict) -> dict:
    """The op's arguments by name (the lowering's view of an FX node)."""
    return _bind(sig, args, kwargs)


def register_kernel_op(sig: KernelSignature) -> None:
    """Makes ``torch.ops.superkernel.<sig.name>`` call the kernel (eagerly) and lower to it."""
    if sig.name in _registry:
        if _registry[sig.name] == sig:
            return
        raise InvalidArgumentError(f"torch.ops.superkernel.{sig.name} is already defined with another signature")
    mutates = sig.mutates

    def impl(*args, **kwargs):
        return run_kernel_eagerly(sig, _bind(sig, args, kwargs))

    op = torch.library.custom_op(f"superkernel::{sig.name}", impl, mutates_args=mutates, schema=sig.schema)
    op.register_fake(_fake(sig))
    _registry[sig.name] = sig
    _by_target[getattr(torch.ops.superkernel, sig.name).default] = sig


def signature_of(target) -> KernelSignature | None:
    """The signature of an op overload (an FX node's target), if it is a kernel op."""
    return _by_target.get(target)


def registered() -> dict[str, KernelSignature]:
    return dict(_registry)


# ---- running a kernel on torch tensors (plain torch) ----------------------------------------

_cache_lock = threading.Lock()
_executables: dict[tuple, tuple] = {}


def _key(kernel: str, tensors: list[torch.Tensor], attrs: bytes, n_mutated: int) -> tuple:
    return (kernel, attrs, n_mutated, tuple((t.dtype, tuple(t.shape)) for t in tensors))


def run_kernel_eagerly(sig: KernelSignature, args: dict):
    """Runs the kernel on the tensors: a one-op graph compiled once per shapes and attributes,
    its operands bound to the tensors' memory (the mutated ones written in place)."""
    from . import _runtime_default  # the process-wide runtime

    kernel = sig.kernel_name(args)
    names = sig.input_names(args)
    tensors, spans = [], []
    for n in names:
        t = args[n]
        if not isinstance(t, torch.Tensor):
            raise InvalidArgumentError(f"torch.ops.superkernel.{sig.name}: argument '{n}' is not a tensor")
        if t.numel() == 0:
            raise InvalidArgumentError(f"torch.ops.superkernel.{sig.name}: argument '{n}' has no elements "
                                       f"(shape {list(t.shape)}); a kernel call needs data")
        if n in sig.mutates and not t.is_contiguous():
            raise InvalidArgumentError(
                f"torch.ops.superkernel.{sig.name}: '{n}' is written in place and must be contiguous"
            )
        t = t if t.is_contiguous() else t.contiguous()
        # Operands bound to the executable may not share bytes: a second view of memory already
        # bound (e.g. the same tensor passed twice) is read from a copy.
        lo, hi = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
        if n not in sig.mutates and any(lo < b and a < hi for a, b in spans):
            t = t.clone()
            lo, hi = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
        spans.append((lo, hi))
        tensors.append(t)
    attrs = sig.attr_bytes(args)
    out_specs = sig.outputs(args)
    key = _key(kernel, tensors, attrs, len(sig.mutates))
    with _cache_lock:
        entry = _executables.get(key)
        if entry is None:
            g = _superkernel.Graph(f"torch.ops.superkernel.{sig.name}")
            handles = {}
            for n, t in zip(names, tensors):
                make = g.variable if n in sig.mutates else g.input
                handles[n] = make(n, to_sk(t.dtype, f"argument '{n}'"), list(t.shape))
            outputs = [(to_sk(d, "output"), list(s), f"out{i}") for i, (d, s) in enumerate(out_specs)]
            for n in sig.mutates:
                outputs.append((to_sk(args[n].dtype), list(args[n].shape), f"{n}_out"))
            write_into = [_superkernel.Tensor() for _ in out_specs] + [handles[n] for n in sig.mutates]
            outs = g.add_op(kernel, [handles[n] for n in names], outputs, attrs, write_into, sig.name)
            for i in range(len(out_specs)):
                g.output(outs[i], f"out{i}")
            exe = _runtime_default.get().compile(g, _superkernel.CompileOptions.for_mode("graph"))
            # One call binds every operand to its tensor's memory by address, runs and copies the
            # outputs out (binding and reading through DLPack took about 5 us a tensor).
            runner = _superkernel._StepRunner(
                exe,
                [(n, t.numel() * t.element_size(), True) for n, t in zip(names, tensors)],
                [(f"out{i}", math.prod(s) * torch.empty((), dtype=d).element_size())
                 for i, (d, s) in enumerate(out_specs)],
            )
            entry = (exe, runner, threading.Lock())
            _executables[key] = entry
    exe, runner, lock = entry
    results = [torch.empty(list(s), dtype=d) for d, s in out_specs]
    with lock:
        # The tensors stay alive until step returns; the executable keeps only their addresses,
        # which the next call binds again where they differ.
        runner.step([t.data_ptr() for t in tensors], [r.data_ptr() for r in results])
    return _result(results)


# ---- any kernel by name ----------------------------------------------------------------------


def _register_call_kernel() -> None:
    # Output specs travel as flat lists: dtypes (torch ScalarType), ranks, then the dims.
    schema = ("(str kernel, Tensor[] inputs, ScalarType[] out_dtypes, int[] out_ranks, int[] out_dims,"
              " int[] attrs) -> Tensor[]")

    def specs(out_dtypes, out_ranks, out_dims):
        out, at = [], 0
        for d, r in zip(out_dtypes, out_ranks):
            out.append((d, list(out_dims[at:at + r])))
            at += r
        return out

    def impl(kernel, inputs, out_dtypes, out_ranks, out_dims, attrs):
        sig = KernelSignature(
            "call_kernel", schema, tuple(f"in{i}" for i in range(len(inputs))),
            lambda a: specs(out_dtypes, out_ranks, out_dims), kernel, lambda a: bytes(attrs))
        res = run_kernel_eagerly(sig, {f"in{i}": t for i, t in enumerate(inputs)})
        if res is None:
            return []
        return list(res) if isinstance(res, tuple) else [res]

    def fake(kernel, inputs, out_dtypes, out_ranks, out_dims, attrs):
        device = inputs[0].device if inputs else torch.device("cpu")
        return [torch.empty(s, dtype=d, device=device) for d, s in specs(out_dtypes, out_ranks, out_dims)]

    op = torch.library.custom_op("superkernel::call_kernel", impl, mutates_args=(), schema=schema)
    op.register_fake(fake)


def call_kernel(kernel: str, inputs: Sequence[torch.Tensor], outputs: Sequence[Spec], attrs: bytes = b""):
    """Runs (or, under the backend, lowers to) any kernel by name: ``outputs`` lists (dtype, shape)."""
    outputs = list(outputs)
    return torch.ops.superkernel.call_kernel(
        kernel, list(inputs), [d for d, _ in outputs], [len(s) for _, s in outputs],
        [int(x) for _, s in outputs for x in s], list(attrs))


def check_kernel_coverage(kernel_names: Sequence[str]) -> list[str]:
    """Kernels of `kernel_names` that no op in the registry reaches (by name or family)."""
    reached = set()
    for sig in _registry.values():
        if isinstance(sig.kernel, str):
            reached.add(sig.kernel)
    families = {sig.name for sig in _registry.values()}
    missing = []
    for k in kernel_names:
        family = k.split(".", 1)[0]
        if k in reached or family in families or k in KERNELS_WITHOUT_OP:
            continue
        if k == "matmul.w8a8":
            continue  # torch.ops.superkernel.matmul_w8a8
        if k == "quantize.i8":
            continue  # torch.ops.superkernel.quantize
        missing.append(k)
    return missing


for _sig in BUILTIN_SIGNATURES:
    register_kernel_op(_sig)
_register_call_kernel()

__all__ = ["KernelSignature", "register_kernel_op", "call_kernel", "signature_of", "registered", "to_torch"]
