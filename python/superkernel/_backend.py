"""The torch.compile backend: ``torch.compile(model, backend="superkernel", options={...})``.

dynamo hands over an FX graph of torch-level ops; aot_autograd functionalises it and decomposes
it to core ATen (scaled dot-product attention stays whole: the sdpa kernel, or one torch host
step, computes it), and each forward graph becomes one superkernel executable (_compiled.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from . import _runtime_default
from ._compiled import CompiledGraph, InputInfo, compile_fx, source_name
from ._errors import UnimplementedError
from ._options import BackendOptions, backend_options

BACKEND_NAME = "superkernel"

_compiled_graphs: list[CompiledGraph] = []


def decompositions() -> dict:
    from torch._decomp import core_aten_decompositions

    table = dict(core_aten_decompositions())
    for op in list(table):
        if "scaled_dot_product" in str(op):
            del table[op]
    return table


def _input_infos(gm: torch.fx.GraphModule, example_inputs: list) -> list[InputInfo]:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    infos = []
    for i, x in enumerate(example_inputs):
        node = placeholders[i] if i < len(placeholders) else None
        name = f"input{i}"
        grapharg = node.meta.get("grapharg") if node is not None else None
        if grapharg is not None and getattr(grapharg, "source", None) is not None:
            name = source_name(grapharg.source.name)
        elif node is not None:
            name = node.name
        static = getattr(x, "_dynamo_static_input_type", None) is not None or isinstance(x, torch.nn.Parameter)
        infos.append(InputInfo(name, static, x))
    # Tensors dynamo installed on the graph module instead (its config install_free_tensors):
    # aot_autograd passes them ahead of the inputs, parameters then buffers, from a list it built
    # once.
    installed = [*gm.named_parameters(remove_duplicate=False), *gm.named_buffers(remove_duplicate=False)]
    infos = [InputInfo(source_name(n), True, t) for n, t in installed] + infos
    # Names must be unique in the graph.
    seen: dict[str, int] = {}
    for info in infos:
        if info.name in seen:
            seen[info.name] += 1
            info.name = f"{info.name}#{seen[info.name]}"
        else:
            seen[info.name] = 0
    return infos


def _compile(gm: torch.fx.GraphModule, example_inputs: list, options: BackendOptions):
    from torch._dynamo.backends.common import aot_autograd

    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
        raise UnimplementedError(
            "the superkernel backend compiles inference graphs: call the compiled model under torch.no_grad() "
            "or torch.inference_mode()"
        )
    infos = _input_infos(gm, example_inputs)

    def forward_compiler(fx_gm: torch.fx.GraphModule, fx_inputs: list):
        compiled = compile_fx(fx_gm, infos, options, _runtime_default.get())
        _compiled_graphs.append(compiled)
        return compiled

    return aot_autograd(
        fw_compiler=forward_compiler,
        decompositions=decompositions(),
        keep_inference_input_mutations=True,
    )(gm, example_inputs)


def superkernel_backend(gm: torch.fx.GraphModule, example_inputs: list, options: Mapping[str, Any] | None = None):
    """The backend function torch.compile calls (registered as "superkernel")."""
    return _compile(gm, example_inputs, backend_options(options))


def backend(options: Mapping[str, Any] | None = None, **kwargs):
    """A backend with its options checked now (an unknown key or bad value raises here, not at
    the first call): ``torch.compile(model, backend=superkernel.backend({...}))``."""
    opts = backend_options({**(options or {}), **kwargs})

    def configured(gm, example_inputs):
        return _compile(gm, example_inputs, opts)

    configured.options = opts
    return configured


def compiled_graphs() -> list[CompiledGraph]:
    """Every graph the backend compiled in this process, oldest first."""
    return list(_compiled_graphs)


def register() -> None:
    """Registers the backend name with dynamo unless the installed package's entry point
    (group torch_dynamo_backends) will register it when torch looks the name up."""
    from importlib.metadata import entry_points

    from torch._dynamo.backends import registry

    if BACKEND_NAME in registry._COMPILER_FNS:
        return
    if any(ep.name == BACKEND_NAME for ep in entry_points(group="torch_dynamo_backends")):
        return
    registry.register_backend(compiler_fn=superkernel_backend, name=BACKEND_NAME)
