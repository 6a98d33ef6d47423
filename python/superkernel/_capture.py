"""superkernel.capture: record the compiled graphs one call of a compiled model runs, then
replay them without torch's per-call Python (dynamo's frame evaluation and guards,
aot_autograd's wrapper, the binding's checks and allocations).

The pattern is a CUDA graph's: the inputs given to ``capture`` are static (write the next step's
values into them in place), the returned tensors are static (each replay overwrites them), and
a replay runs exactly the graphs the capture ran, on the memory it ran them on. Everything a
replay would silently miss is refused when capturing: a call that ran no compiled graph, a graph
input computed by eager torch during the capture (a replay would not recompute it), a returned
tensor no graph wrote.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

from ._compiled import CompiledGraph, _captures
from ._errors import InvalidArgumentError


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _tensors(tree) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


class CapturedStep:
    """The graphs one call ran, ready to run again on the same memory: ``step()`` replays them
    and returns the captured call's result, whose tensors now hold the new values."""

    def __init__(self, calls: list, result: Any, inputs: tuple):
        self._calls = [(graph.runner, ptrs, out_ptrs) for graph, _, ptrs, _, out_ptrs in calls]
        self.graphs: list[CompiledGraph] = [graph for graph, *_ in calls]
        # Replays write and read this memory: keep every tensor of the capture alive.
        self._keep = [(args, outs) for _, args, _, outs, _ in calls]
        self.inputs = inputs
        self.result = result

    def __call__(self) -> Any:
        for runner, ptrs, out_ptrs in self._calls:
            runner.step(ptrs, out_ptrs)
        return self.result

    replay = __call__

    def explain(self) -> str:
        """What each captured graph is (as superkernel.explain prints it), in the order replayed."""
        return "\n\n".join(g.explain() for g in self.graphs)


def capture(fn, *args, **kwargs) -> CapturedStep:
    """Calls ``fn(*args, **kwargs)`` once (a model compiled with backend="superkernel", or a
    function calling compiled models) and returns a CapturedStep that replays the graphs it ran.

    The tensors in ``args``/``kwargs`` are the step's static inputs: change them in place
    (``ids.copy_(next_ids)``) between replays. Module parameters and buffers (caches) are read
    and written where they live. A replay checks nothing that dynamo would: it runs the captured
    graphs whatever has changed since (capture again after changing a shape, a mode or a
    replaced parameter)."""
    calls: list = []
    _captures.append(calls)
    try:
        result = fn(*args, **kwargs)
    finally:
        _captures.pop()
    if not calls:
        raise InvalidArgumentError(
            "capture: the call ran no graph compiled by the superkernel backend (was the model compiled with "
            "backend='superkernel'?)"
        )
    inputs = _tensors((args, kwargs))
    known = {_storage(t) for t in inputs}
    for n, (graph, graph_args, _, outs, _) in enumerate(calls):
        for b in graph.bindings:
            info = graph.lowerer.inputs[b.index]
            t = graph_args[b.index]
            # Parameters and buffers, and tensors the graph writes in place (caches and counters
            # held by the caller, such as a transformers StaticCache's), are state that lives on.
            if info.static or b.written or _storage(t) in known:
                continue
            raise InvalidArgumentError(
                f"capture: input '{info.name}' of compiled graph {n} was computed by eager torch during the capture "
                "(it is neither an argument of capture, nor a module parameter or buffer, nor a tensor the graph "
                "writes in place, nor a compiled graph's output), so a replay would not recompute it: pass it to "
                "capture as an argument, or compute it inside the compiled function"
            )
        known.update(_storage(o) for o in outs)
        known.update(_storage(s.value) for s in graph.slots if s.kind == "const" and isinstance(s.value, torch.Tensor))
        known.update(_storage(graph_args[i]) for i in range(len(graph_args))
                     if isinstance(graph_args[i], torch.Tensor) and graph.lowerer.inputs[i].static)
    for i, t in enumerate(_tensors(result)):
        if _storage(t) not in known:
            raise InvalidArgumentError(
                f"capture: tensor {i} of the result was computed outside the compiled graphs (by eager torch after "
                "them), so a replay would not update it: return what the compiled function returns"
            )
    return CapturedStep(calls, result, tuple(inputs))
