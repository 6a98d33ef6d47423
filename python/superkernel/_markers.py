"""Fusion scopes, core limits, streams, events and prefetch inside a model's ``forward``.

Each one is a torch custom op with side effects (``torch.ops.superkernel.*``): dynamo keeps it in
program order without a graph break, aot_autograd keeps it through decomposition, and the
lowering turns it into the graph's scope stack, core limit, stream and event attributes (or a
prefetch op). Outside ``torch.compile`` none of them calls anything: the model runs in plain
torch (prefetch does nothing).

    class Layer(torch.nn.Module):
        def forward(self, x):
            with superkernel.scope("layer0", "early-start=1"):
                h = self.mlp(x)
            with superkernel.stream("moe"), superkernel.limit_core_num(1, 1):
                done = superkernel.Event("moe_done")
                y = self.moe(x)
                done.record()
            done.wait()
            return h + y
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import weakref

import torch

NAMESPACE = "superkernel"

# The marker ops (op name -> what the lowering does with it).
MARKER_OPS = (
    "scope_begin",
    "scope_end",
    "limit_core_num_begin",
    "limit_core_num_end",
    "stream_begin",
    "stream_end",
    "record_event",
    "wait_event",
    "prefetch",
)


class _TraceScopes:
    """The fusion scopes open in the graph dynamo is tracing now (one stack per tracing context, so
    a restarted analysis starts afresh), and the note a refused graph break gets from them."""

    def __init__(self):
        self.owner = None  # a weak reference to the tracing context the stack belongs to
        self.stack: list = []

    def _current(self) -> list:
        context = torch._guards.TracingContext.try_get()
        if context is None:
            return []  # not under dynamo (a plain fake-tensor run): nothing to report
        if self.owner is None or self.owner() is not context:
            self.owner = weakref.ref(context)
            self.stack = []
            self._watch_compile_end()
        return self.stack

    def begin(self, name) -> None:
        self._current().append(name)

    def end(self) -> None:
        stack = self._current()
        if stack:
            stack.pop()

    def _watch_compile_end(self) -> None:
        # Registered again when needed: torch._dynamo.reset() clears dynamo's callbacks.
        import torch._dynamo

        handler = torch._dynamo.callback_handler
        if self._on_compile_end not in handler.end_callbacks:
            handler.register_end_callback(self._on_compile_end)

    def _on_compile_end(self, _args) -> None:
        # Runs in the `finally` of dynamo's compile: a graph break refused there (fullgraph=True) is
        # the exception in flight.
        stack, self.stack, self.owner = self.stack, [], None
        error = sys.exc_info()[1]
        if error is None or not stack or not isinstance(error, _graph_break_errors()):
            return
        name = stack[-1] if stack[-1] is not None else "<do not fuse>"
        note = (
            f"superkernel: graph break inside scope '{name}' (open scopes: "
            f"{' > '.join(s if s is not None else '<do not fuse>' for s in stack)}): a scope must lie within one "
            "graph; move the break out of the scope"
        )
        if hasattr(error, "add_note"):
            error.add_note(note)
        else:  # Python < 3.11: no notes, the message itself says it
            error.args = (f"{error.args[0] if error.args else ''}\n{note}",) + tuple(error.args[1:])


def _graph_break_errors() -> tuple:
    from torch._dynamo.exc import Unsupported, UserError

    return (Unsupported, UserError)


_trace_scopes = _TraceScopes()


def _register() -> None:
    lib = f"{NAMESPACE}::"

    @torch.library.custom_op(lib + "scope_begin", mutates_args=())
    def scope_begin(name: str, options: str, fuse: bool) -> None:
        return None

    @torch.library.custom_op(lib + "scope_end", mutates_args=())
    def scope_end(name: str, fuse: bool) -> None:
        return None

    @torch.library.custom_op(lib + "limit_core_num_begin", mutates_args=())
    def limit_core_num_begin(cube: int, vector: int) -> None:
        return None

    @torch.library.custom_op(lib + "limit_core_num_end", mutates_args=())
    def limit_core_num_end() -> None:
        return None

    @torch.library.custom_op(lib + "stream_begin", mutates_args=())
    def stream_begin(name: str) -> None:
        return None

    @torch.library.custom_op(lib + "stream_end", mutates_args=())
    def stream_end(name: str) -> None:
        return None

    @torch.library.custom_op(lib + "record_event", mutates_args=())
    def record_event(name: str) -> None:
        return None

    @torch.library.custom_op(lib + "wait_event", mutates_args=())
    def wait_event(name: str) -> None:
        return None

    @torch.library.custom_op(lib + "prefetch", mutates_args=())
    def prefetch_op(tensor: torch.Tensor, nbytes: int, offset: int, depend_on: torch.Tensor | None) -> None:
        return None

    # The scope markers' fake implementations run while dynamo traces: they keep the scopes open
    # at that point, so that a graph break dynamo refuses (fullgraph=True) can name its scope.
    scope_begin.register_fake(lambda name, options, fuse: _trace_scopes.begin(name if fuse else None))
    scope_end.register_fake(lambda name, fuse: _trace_scopes.end())
    for op in (
        limit_core_num_begin,
        limit_core_num_end,
        stream_begin,
        stream_end,
        record_event,
        wait_event,
        prefetch_op,
    ):
        # Dynamo refuses a custom op without a fake implementation; markers produce nothing.
        op.register_fake(lambda *args, **kwargs: None)
    for name in MARKER_OPS:
        # Nothing consumes a marker's result: without this FX would drop it as dead code.
        torch.fx.node.has_side_effect(getattr(torch.ops.superkernel, name).default)


_register()


def marker_targets() -> set:
    return {getattr(torch.ops.superkernel, name).default for name in MARKER_OPS}


def _compiling() -> bool:
    return torch.compiler.is_compiling()


class scope:
    """``with superkernel.scope(name, options=""):`` ops inside may fuse into super kernels.

    ``name=None`` marks the ops inside as "do not fuse". ``options`` is the scope option string
    ("key=value:key=value", docs/OPTIONS.md). The same name in several places is one fusion range.
    """

    def __init__(self, name: str | None, options: str = ""):
        self.name = "" if name is None else name
        self.options = options
        self.fuse = name is not None

    def __enter__(self):
        if _compiling():
            torch.ops.superkernel.scope_begin(self.name, self.options, self.fuse)
        return self

    def __exit__(self, *exc):
        if _compiling():
            torch.ops.superkernel.scope_end(self.name, self.fuse)
        return False


def scope_begin(name: str, options: str = "") -> None:
    """Opens scope `name` until scope_end(name) (the begin/end front-end)."""
    if _compiling():
        torch.ops.superkernel.scope_begin(name, options, True)


def scope_end(name: str) -> None:
    if _compiling():
        torch.ops.superkernel.scope_end(name, True)


def superkernel_scope(enable: bool, name: str | None, options: str = ""):
    """``with superkernel_scope(enable, name, options):`` a scope when `enable`, nothing otherwise,
    so one model file runs with fusion on or off."""
    return scope(name, options) if enable else contextlib.nullcontext()


def scope_modules(model: torch.nn.Module, pattern: str, options: str = "") -> list[str]:
    r"""Puts the forward of every submodule of `model` whose qualified name matches the regular
    expression `pattern` (in full) inside a fusion scope named after that name, for models whose
    ``forward`` you do not edit (a transformers model: ``scope_modules(model, r"model\.layers\.\d+")``
    gives one scope per decoder layer). Returns the names scoped, in module order; a pattern that
    matches no module, or a module scoped twice, is a ValueError naming it."""
    names = []
    for name, module in model.named_modules():
        if not name or not re.fullmatch(pattern, name):
            continue
        if getattr(module.forward, "_superkernel_scope", None) is not None:
            raise ValueError(f"scope_modules: module '{name}' is already in scope "
                             f"'{module.forward._superkernel_scope}'")
        inner = module.forward

        @functools.wraps(inner)
        def forward(*args, _inner=inner, _name=name, **kwargs):
            with scope(_name, options):
                return _inner(*args, **kwargs)

        forward._superkernel_scope = name
        module.forward = forward
        names.append(name)
    if not names:
        raise ValueError(f"scope_modules: no submodule of {type(model).__name__} has a name matching "
                         f"'{pattern}' (names look like '{next((n for n, _ in model.named_modules() if n), '')}')")
    return names


class limit_core_num:
    """``with superkernel.limit_core_num(cube, vector):`` ops inside use at most that many cube and
    vector cores (0: no limit); with stream fusion each stream gets its own cores."""

    def __init__(self, cube: int, vector: int):
        self.cube = cube
        self.vector = vector

    def __enter__(self):
        if _compiling():
            torch.ops.superkernel.limit_core_num_begin(self.cube, self.vector)
        return self

    def __exit__(self, *exc):
        if _compiling():
            torch.ops.superkernel.limit_core_num_end()
        return False


class stream:
    """``with superkernel.stream(name):`` ops inside run on stream `name` (created on first use;
    "default" is the main stream)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        if _compiling():
            torch.ops.superkernel.stream_begin(self.name)
        return self

    def __exit__(self, *exc):
        if _compiling():
            torch.ops.superkernel.stream_end(self.name)
        return False


class Event:
    """An event between streams: ``record()`` on the current stream, ``wait()`` makes the current
    stream wait for it. Events are named (one name, one event per compiled graph)."""

    def __init__(self, name: str):
        self.name = name

    def record(self) -> None:
        if _compiling():
            torch.ops.superkernel.record_event(self.name)

    def wait(self) -> None:
        if _compiling():
            torch.ops.superkernel.wait_event(self.name)


def prefetch(tensor: torch.Tensor, nbytes: int, depend_on: torch.Tensor | None = None, offset: int = 0) -> None:
    """Warms bytes [offset, offset + nbytes) of `tensor` (typically the next layer's weights) in
    the shared cache while compute goes on, after `depend_on` is computed (None: no ordering).
    Results never depend on it; in plain torch it does nothing."""
    if _compiling():
        torch.ops.superkernel.prefetch(tensor, nbytes, offset, depend_on)
