"""Capability-based partition: which FX nodes run as kernels and which as host steps in torch.

Every node gets a kind: ``kernel`` (a table row or kernel op accepts it), ``host`` (with the
reason), ``marker`` (scopes, streams, events, core limits, prefetch) or ``barrier`` (the writes
of mutated inputs at the end). Markers and barriers keep their place: the graph's scopes and
streams follow program order. Between them the nodes are reordered, respecting data flow, so
that host nodes gather into as few host steps as possible (a greedy two-colour topological
order: keep taking ready nodes of the current kind, switch only when none is left), and each
maximal run of host nodes becomes one host step.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from ._lowering import Capabilities, kernel_reason, tensors_of, val
from ._markers import marker_targets

aten = torch.ops.aten

KERNEL, HOST, MARKER, BARRIER, INPUT, OUTPUT, CONST = "kernel", "host", "marker", "barrier", "input", "output", "const"


@dataclass
class HostStep:
    """Consecutive host nodes run by one host op."""

    name: str
    nodes: list[fx.Node]
    reasons: dict  # node -> reason
    inputs: list[fx.Node] = field(default_factory=list)
    outputs: list[fx.Node] = field(default_factory=list)


@dataclass
class Partition:
    order: list  # fx.Node or HostStep, in execution order
    kinds: dict  # node -> kind
    reasons: dict  # host node -> reason
    steps: list[HostStep]


def _is_getitem(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is operator.getitem


def classify(gm: fx.GraphModule, caps: Capabilities, special: dict) -> tuple[dict, dict]:
    """kind per node, and the reason of every host node. `special` maps nodes the lowering
    context handles itself (mutations, index updates) to their kind."""
    markers = marker_targets()
    kinds, reasons = {}, {}
    for node in gm.graph.nodes:
        if node in special:
            kinds[node] = special[node][0]
            if special[node][0] == HOST:
                reasons[node] = special[node][1]
            continue
        if node.op == "placeholder":
            kinds[node] = INPUT
        elif node.op == "output":
            kinds[node] = OUTPUT
        elif node.op == "get_attr":
            kinds[node] = CONST
        elif node.op != "call_function":
            kinds[node] = HOST
            reasons[node] = f"{node.op} node"
        elif node.target in markers:
            kinds[node] = MARKER
        elif _is_getitem(node):
            kinds[node] = None  # follows its producer, below
        else:
            reason = kernel_reason(node, caps)
            kinds[node] = KERNEL if reason is None else HOST
            if reason is not None:
                reasons[node] = reason
    for node in gm.graph.nodes:
        if kinds[node] is None:
            src = node.args[0]
            kinds[node] = kinds[src]
    # A value the graph cannot hold (e.g. bool without a bool dtype) may only flow between host
    # nodes: its kernel consumers were already refused by their dtype check.
    return kinds, reasons


def _barrier(kind) -> bool:
    return kind in (MARKER, BARRIER, OUTPUT)


def _reorder_region(nodes: list[fx.Node], kinds: dict) -> list[fx.Node]:
    """Greedy two-colour topological order of one region (no markers inside)."""
    members = set(nodes)
    position = {n: i for i, n in enumerate(nodes)}
    pending = {n: sum(1 for a in n.all_input_nodes if a in members) for n in nodes}
    ready = {KERNEL: [], HOST: [], "other": []}

    def colour(n):
        k = kinds[n]
        return k if k in (KERNEL, HOST) else "other"

    for n in nodes:
        if pending[n] == 0:
            ready[colour(n)].append(n)
    out = []
    current = HOST  # host steps first: what they compute (masks, positions) is ready early
    while len(out) < len(nodes):
        for c in ("other", current, KERNEL if current == HOST else HOST):
            if ready[c]:
                if c != "other":
                    current = c
                break
        else:  # pragma: no cover - a cycle cannot happen in an FX graph
            raise AssertionError("reorder: no ready node")
        lst = ready[c]
        lst.sort(key=position.get)
        n = lst.pop(0)
        out.append(n)
        for u in n.users:
            if u in members:
                pending[u] -= 1
                if pending[u] == 0:
                    ready[colour(u)].append(u)
    return out


def partition(gm: fx.GraphModule, caps: Capabilities, special: dict) -> Partition:
    kinds, reasons = classify(gm, caps, special)
    nodes = list(gm.graph.nodes)
    # Split at barriers; reorder each region.
    order: list[fx.Node] = []
    region: list[fx.Node] = []
    for n in nodes:
        if _barrier(kinds[n]):
            order += _reorder_region(region, kinds)
            region = []
            order.append(n)
        else:
            region.append(n)
    order += _reorder_region(region, kinds)

    # Group maximal runs of host nodes (getitems of host nodes included).
    steps: list[HostStep] = []
    grouped: list = []
    run: list[fx.Node] = []

    def close():
        if not run:
            return
        step = HostStep(f"torch_{len(steps)}", list(run), {n: reasons.get(n, "") for n in run if n in reasons})
        steps.append(step)
        grouped.append(step)
        run.clear()

    for n in order:
        if kinds[n] == HOST:
            run.append(n)
        else:
            close()
            grouped.append(n)
    close()

    for step in steps:
        members = set(step.nodes)
        ins = []
        for n in step.nodes:
            for a in n.all_input_nodes:
                if a not in members and a not in ins:
                    ins.append(a)
        step.inputs = ins
        step.outputs = [n for n in step.nodes if tensors_of(val(n)) and any(u not in members for u in n.users)]
        first = step.nodes[0]
        label = str(first.target).replace("aten.", "").split(".")[0] if first.op == "call_function" else first.op
        step.name = f"torch_{steps.index(step)}_{label}"
    return Partition(grouped, kinds, reasons, steps)
