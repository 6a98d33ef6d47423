"""superkernel: fuse already-compiled kernels into super kernels, from Python.

Without torch: build graphs (``Graph``, ``superkernel.ops``, ``superkernel.nn``), compile them
(``compile(graph, options)``) on a ``Runtime`` and run them with NumPy arrays in and out.

With torch: ``torch.compile(model, backend="superkernel", options={...})``; fusion scopes,
core limits, streams, events and prefetch inside ``forward`` (``scope``, ``limit_core_num``,
``stream``, ``Event``, ``prefetch``); every kernel as ``torch.ops.superkernel.<name>``.
docs/PYTHON.md describes it all.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ._errors import (
    DeadlockError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    KernelError,
    NotFoundError,
    SuperkernelError,
    UnimplementedError,
)
from ._superkernel import (
    KERNEL_ABI_VERSION,
    CompileOptions,
    CompileReport,
    DType,
    Executable,
    Graph,
    OpKind,
    Runtime,
    SegmentReport,
    Tensor,
    TensorKind,
    nn,
)
from ._superkernel import models as cpp_models
from . import ops
from ._options import compile_options
from . import _runtime_default

__version__ = "0.1.0"


def runtime() -> Runtime:
    """The process-wide runtime (every available core, pinned), created on first use."""
    return _runtime_default.get()


def configure_runtime(**options) -> None:
    """Options of the process-wide runtime, before its first use: num_cores, cube_cores,
    pin_threads, allow_oversubscribe, spin_us, watchdog_seconds, load_builtin_kernels,
    kernel_packages, load_policy, chunk_bytes (RuntimeOptions, docs/OPTIONS.md)."""
    _runtime_default.configure(**options)


def set_runtime(rt: Runtime) -> None:
    """Makes `rt` the process-wide runtime."""
    _runtime_default.set_runtime(rt)


def compile(graph: Graph, options: Any = None, runtime: Runtime | None = None) -> Executable:  # noqa: A001
    """Compiles `graph` with options given as a dict (the C++ CompileOptions keys and nesting,
    docs/OPTIONS.md), a CompileOptions, or None (graph mode)."""
    return (runtime or _runtime_default.get()).compile(graph, compile_options(options))


@contextlib.contextmanager
def recording(snapshot: bool = False):
    """``with superkernel.recording() as ran: model(x)``: `ran` lists (compiled graph, its
    inputs) for every graph the superkernel backend ran inside the block, in order; with
    `snapshot`, copies of the inputs taken before the run wrote any (to replay a step). A compiled
    graph has ``explain()``, ``report``, ``host_steps`` and ``with_options(...)``."""
    from ._compiled import _recorders

    ran: list = []
    _recorders.append((ran, snapshot))
    try:
        yield ran
    finally:
        _recorders.pop()


def explain(target: Any, *args, options: Any = None, runtime: Runtime | None = None, **kwargs) -> str:
    """What the compiler makes of a graph or of a compiled torch model, as text.

    ``explain(graph, options=...)``: segments, cut reasons and per-core programs (sk::explain).
    ``explain(compiled_model, *inputs, **kwargs)``: runs the model once on the inputs and
    explains every graph the superkernel backend ran for that call: its host steps with their
    reasons, then the compiler's text.
    """
    if isinstance(target, Graph):
        if len(args) > 1 or kwargs or (args and options is not None):
            raise InvalidArgumentError("explain(graph, options): takes the graph and its options only")
        opts = args[0] if args else options
        return (runtime or _runtime_default.get()).explain(target, compile_options(opts))
    with recording() as ran:
        target(*args, **kwargs)
    if not ran:
        raise InvalidArgumentError(
            "explain: the call ran no graph compiled by the superkernel backend (was the model compiled with "
            "backend='superkernel'?)"
        )
    seen, texts = set(), []
    for g, _ in ran:
        if id(g) not in seen:
            seen.add(id(g))
            texts.append(g.explain())
    return "\n\n".join(texts)


__all__ = [
    "Graph", "Tensor", "DType", "TensorKind", "OpKind", "Runtime", "Executable", "CompileOptions",
    "CompileReport", "SegmentReport", "ops", "nn", "cpp_models", "compile", "compile_options", "explain", "runtime",
    "configure_runtime", "set_runtime", "recording", "KERNEL_ABI_VERSION", "SuperkernelError", "InvalidArgumentError",
    "NotFoundError", "UnimplementedError", "FailedPreconditionError", "KernelError", "DeadlockError",
    "InternalError",
]

try:
    import torch  # noqa: F401
except ImportError:  # the graph API works without torch
    torch = None

if torch is not None:
    from ._markers import (Event, limit_core_num, prefetch, scope, scope_begin, scope_end, scope_modules, stream,
                           superkernel_scope)
    from ._kernel_ops import KernelSignature, call_kernel, register_kernel_op
    from ._backend import backend, compiled_graphs, superkernel_backend
    from ._capture import CapturedStep, capture
    from ._weight_dtype import quantization_error
    from . import _backend

    _backend.register()

    def load_kernel_package(path: str, signatures=()) -> None:
        """Loads a kernel package into the process-wide runtime and makes each KernelSignature
        a torch op (``torch.ops.superkernel.<name>``); any of its kernels is also reachable by
        name through ``call_kernel``."""
        _runtime_default.get().load_kernel_package(path)
        for sig in signatures:
            register_kernel_op(sig)

    __all__ += [
        "backend", "superkernel_backend", "compiled_graphs", "scope", "scope_begin", "scope_end", "scope_modules",
        "superkernel_scope", "limit_core_num", "stream", "Event", "prefetch", "KernelSignature",
        "register_kernel_op", "call_kernel", "load_kernel_package", "capture", "CapturedStep",
        "quantization_error",
    ]
