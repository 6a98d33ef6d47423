"""One aot_autograd forward graph -> one superkernel Graph and Executable, and the callable
torch runs for it.

Graph inputs: parameters and buffers the graph does not write become external constants over
torch's storage with ``frozen_parameter`` (otherwise inputs bound to it at every call); inputs
the graph writes (static KV caches, counters) become variables bound to the torch tensor's memory
(``Executable.bind_variable``), so in-place updates land in torch's tensor; other inputs are
copied in (small) or bound (large). A step is one call into C++: bind or copy the inputs, run,
copy each output once into a new torch tensor.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from . import _superkernel
from ._errors import InvalidArgumentError, SuperkernelError, UnimplementedError
from ._kernel_ops import bind_node_args, signature_of
from ._lowering import ATEN_LOWERINGS, AUTO_FUNCTIONALIZED, Capabilities, Ctx, norm_dim, shape, val
from ._markers import marker_targets
from ._options import BackendOptions
from ._partition import BARRIER, HostStep, partition
from ._patterns import rewrite
from ._weight_dtype import convert as convert_weights
from ._torch_types import has_sk_dtype, to_sk

aten = torch.ops.aten
_sk = _superkernel

# Inputs at most this large are copied at every call; larger ones are bound in place (a rebind
# costs a pass over the executable's ops, a copy of a few KiB costs less).
COPY_INPUT_BYTES = 64 * 1024

_recorders: list[list] = []
# Open superkernel.capture() blocks, innermost last: each a list that every graph run appends
# (graph, argument tensors, input pointers, output tensors) to.
_captures: list[list] = []


def source_name(text: str) -> str:
    """'L['args'][0]._modules['model']._parameters['weight']' -> 'model.weight'."""
    parts = re.findall(r"_(?:modules|parameters|buffers)\['([^']+)'\]", text)
    if parts:
        return ".".join(parts)
    parts = re.findall(r"\['([^']+)'\]|\.(\w+)|\[(\d+)\]", text)
    flat = [a or b or c for a, b, c in parts]
    return ".".join(flat) if flat else text


@dataclass
class InputInfo:
    """What the backend knows about one graph input (from dynamo)."""

    name: str
    static: bool  # a module parameter or buffer
    real: Any  # the tensor dynamo passed (the parameter itself for static inputs)


@dataclass
class Binding:
    index: int  # position among the graph's inputs
    sk_name: str
    nbytes: int
    bind: bool
    contiguous: bool
    written: bool = False  # the graph writes it in place (a cache, a counter): state the caller keeps


@dataclass
class OutputSlot:
    kind: str  # "sk" | "torch" | "const" | "none"
    index: int = -1  # sk: position among the executable's outputs
    value: Any = None  # const / none: the value
    dtype: Any = None
    shape: Any = None


def _is_copy_back(node: fx.Node) -> bool:
    return (
        node.op == "call_function"
        and node.target is aten.copy_.default
        and isinstance(node.args[0], fx.Node)
        and node.args[0].op == "placeholder"
    )


def _foldable(node: fx.Node, folded: dict) -> bool:
    if node.op == "get_attr":
        return True
    if node.op != "call_function":
        return False
    target = node.target
    if target in marker_targets() or signature_of(target) is not None:
        return False
    if isinstance(target, torch._ops.OpOverload):
        if target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
            return False
    elif target is not operator.getitem:
        return False
    if target in (aten.full_like.default, aten.zeros_like.default, aten.ones_like.default):
        return True  # values do not depend on the input, only its (static) shape
    return all(a in folded for a in node.all_input_nodes)


class Lowerer(Ctx):
    def __init__(self, gm: fx.GraphModule, inputs: list[InputInfo], options: BackendOptions, runtime):
        self.gm = gm
        self.inputs = inputs
        self.options = options
        self.runtime = runtime
        self.caps = Capabilities(runtime.kernel_names())
        self.g = _sk.Graph("torch_graph")
        self.env: dict[fx.Node, Any] = {}
        self.folded: dict[fx.Node, Any] = {}
        self.folded_consts: dict[fx.Node, Any] = {}
        self.done: set = set()
        self.streams = {"default": self.g.current_stream()}
        self.stream_stack: list = []
        self.limit_stack: list = []
        self.scope_stack: list = []
        self.events: dict = {}
        self.rewrites: list[str] = []
        self.converted_weights: set = set()
        self.notes: list[str] = []
        # (input index, data pointer, name) of every parameter bound as an external constant.
        self.frozen: list[tuple[int, int, str]] = []
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(self.placeholders) != len(inputs):
            raise UnimplementedError(
                f"the forward graph has {len(self.placeholders)} inputs where dynamo passed {len(inputs)}; "
                "the superkernel backend cannot tell parameters from inputs"
            )
        self.copy_back = {n.args[0]: n for n in gm.graph.nodes if _is_copy_back(n)}
        self.names: dict[fx.Node, str] = {}
        for ph, info in zip(self.placeholders, inputs):
            self.names[ph] = info.name

    # ---- Ctx ----
    def name(self, node: fx.Node) -> str:
        return self.names.get(node, node.name)

    def value(self, node) -> Any:
        if not isinstance(node, fx.Node):
            if isinstance(node, (list, tuple)):
                return type(node)(self.value(n) for n in node)
            return node
        if node in self.env:
            return self.env[node]
        if node in self.folded:
            return self._folded_value(node)
        raise AssertionError(f"node {node.name} used before it was lowered")

    def _folded_value(self, node: fx.Node):
        if node not in self.folded_consts:
            v = self.folded[node]
            if isinstance(v, torch.Tensor):
                v = v.contiguous()
                self.folded_consts[node] = self.g.constant(self.name(node), v)
            else:
                self.folded_consts[node] = v
        return self.folded_consts[node]

    # ---- passes ----
    def fold_constants(self) -> None:
        for node in self.gm.graph.nodes:
            if not _foldable(node, self.folded):
                continue
            if node.op == "get_attr":
                self.folded[node] = getattr(self.gm, node.target)
                continue
            if node.target in (aten.full_like.default, aten.zeros_like.default, aten.ones_like.default):
                # Only the shape and dtype of the input matter: a stand-in tensor of both.
                like = node.args[0]
                stand_in = torch.empty(shape(like), dtype=val(like).dtype)
                args = (stand_in,) + tuple(node.args[1:])
                kwargs = dict(node.kwargs)
            else:
                args = torch.fx.node.map_arg(node.args, lambda n: self.folded[n])
                kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.folded[n])
            with torch.no_grad():
                self.folded[node] = node.target(*args, **kwargs)

    def dense_weights(self) -> set:
        out = set()
        for ph, info in zip(self.placeholders, self.inputs):
            v = val(ph)
            # 2-D: linear weights; 3-D: packed experts [E, N, K] (grouped_matmul).
            if isinstance(v, torch.Tensor) and v.dim() in (2, 3) and v.is_contiguous() and ph not in self.copy_back:
                out.add(ph)
        return out

    def frozen_linear_weights(self) -> dict:
        """Graph input node (an FX placeholder) -> (parameter name, its tensor), for the frozen 2-D
        parameters and 3-D packed experts (weight_dtype)."""
        out = {}
        if not self.options.frozen_parameter:
            return out
        for ph, info in zip(self.placeholders, self.inputs):
            if info.static and isinstance(info.real, torch.Tensor) and info.real.dim() in (2, 3) and ph not in self.copy_back:
                out[ph] = (info.name, info.real)
        return out

    def special_kinds(self) -> dict:
        special = {}
        for ph, c in self.copy_back.items():
            special[c] = (BARRIER,)
        for node in self.folded:
            special[node] = ("const",)
        return special

    # ---- inputs ----
    def lower_inputs(self) -> list[Binding]:
        bindings = []
        for i, (ph, info) in enumerate(zip(self.placeholders, self.inputs)):
            v = val(ph)
            if not isinstance(v, torch.Tensor):
                raise UnimplementedError(f"graph input '{info.name}' is a {type(v).__name__}, not a tensor")
            if not ph.users and ph not in self.copy_back:
                if ph in self.converted_weights:  # its converted copy is a constant: still refuse a replaced one
                    self.frozen.append((i, info.real.data_ptr(), info.name))
                continue
            if not has_sk_dtype(v.dtype):
                raise UnimplementedError(f"graph input '{info.name}': dtype {v.dtype} has no superkernel dtype")
            dt = to_sk(v.dtype, f"graph input '{info.name}'")
            shp = list(v.shape)
            nbytes = v.numel() * v.element_size()
            mutated = ph in self.copy_back
            if mutated:
                if not v.is_contiguous():
                    raise UnimplementedError(
                        f"graph input '{info.name}' is written by the graph but not contiguous: it cannot live in "
                        "torch's memory as a graph variable"
                    )
                self.env[ph] = self.g.variable(info.name, dt, shp)
                bindings.append(Binding(i, info.name, nbytes, True, True, written=True))
                continue
            real = info.real
            if (
                info.static
                and self.options.frozen_parameter
                and isinstance(real, torch.Tensor)
                and real.is_contiguous()
                and real.data_ptr() % max(1, real.element_size()) == 0
            ):
                self.env[ph] = self.g._constant_external_ptr(
                    info.name, dt, shp, real.data_ptr(), nbytes, real
                )
                self.frozen.append((i, real.data_ptr(), info.name))
                continue
            self.env[ph] = self.g.input(info.name, dt, shp)
            contiguous = v.is_contiguous()
            bind = contiguous and (info.static or nbytes > COPY_INPUT_BYTES)
            bindings.append(Binding(i, info.name, nbytes, bind, contiguous))
        return bindings

    # ---- markers ----
    def lower_marker(self, node: fx.Node) -> None:
        name = node.target._opname if hasattr(node.target, "_opname") else str(node.target)
        a = node.args
        g = self.g
        if name == "scope_begin":
            scope, options, fuse = a
            g.push_scope(scope if fuse else "", options)
            self.scope_stack.append(scope if fuse else None)
        elif name == "scope_end":
            scope, fuse = a
            if not self.scope_stack:
                raise InvalidArgumentError(
                    f"graph break inside scope '{scope}': this compiled graph starts inside the scope (dynamo split "
                    "the model there, e.g. at data-dependent control flow): move the break out of the scope"
                )
            g.pop_scope(scope if fuse else "")
            self.scope_stack.pop()
        elif name == "limit_core_num_begin":
            self.limit_stack.append(g.core_limit())
            g.set_core_limit(int(a[0]), int(a[1]))
        elif name == "limit_core_num_end":
            prev = self.limit_stack.pop() if self.limit_stack else (0, 0)
            g.set_core_limit(prev[0], prev[1])
        elif name == "stream_begin":
            s = self.streams.get(a[0])
            if s is None:
                s = self.streams[a[0]] = g.create_stream(a[0])
            self.stream_stack.append(g.current_stream())
            g.set_stream(s)
        elif name == "stream_end":
            g.set_stream(self.stream_stack.pop() if self.stream_stack else self.streams["default"])
        elif name in ("record_event", "wait_event"):
            ev = self.events.get(a[0])
            if ev is None:
                ev = self.events[a[0]] = g.create_event(a[0])
            (g.record if name == "record_event" else g.wait)(ev)
        elif name == "prefetch":
            tensor, nbytes, offset = a[0], a[1], a[2]
            depend_on = a[3] if len(a) > 3 else None
            _sk.prefetch(g, self.value(tensor), self.value(depend_on) if depend_on is not None else None,
                         int(nbytes), int(offset), self.name(node))
        else:  # pragma: no cover
            raise AssertionError(f"unknown marker {name}")

    # ---- kernel ops ----
    def lower_kernel_op(self, node: fx.Node, sig, args: dict, write_targets: dict) -> list:
        fake = {k: (val(v) if isinstance(v, fx.Node) else v) for k, v in args.items()}
        kernel = sig.kernel_name(fake)
        inputs = [self.value(args[n]) for n in sig.input_names(fake)]
        specs = [(to_sk(d, f"op '{node.name}' output"), list(s)) for d, s in sig.outputs(fake)]
        write_into = [_sk.Tensor() for _ in specs]
        for n in sig.mutates:
            t = write_targets[n]
            info = self.g.tensor(t)
            specs.append((info.dtype, list(info.shape)))
            write_into.append(t)
        return self.g.add_op(kernel, inputs, specs, sig.attr_bytes(fake), write_into, self.name(node))

    def _write_target(self, source: fx.Node, node: fx.Node) -> _sk.Tensor:
        """Where an in-place update of `source` writes: the variable itself when no later op
        reads its old value, else a fresh copy of it."""
        t = self.value(source)
        copy_node = self.copy_back.get(source) if source.op == "placeholder" else None
        later_readers = [u for u in source.users if u is not node and u is not copy_node and u not in self.done]
        if copy_node is not None and not later_readers:
            return t
        info = self.g.tensor(t)
        d = self.g.declare(self.name(node) + "_copy", info.dtype, list(info.shape))
        self.g.add_op("copy", [t], [(info.dtype, list(info.shape))], None, [d], self.name(node) + "_copy")
        return d

    def lower_auto_functionalized(self, node: fx.Node):
        op = node.args[0]
        sig = signature_of(op)
        if sig is None:
            raise UnimplementedError(f"node '{node.name}': {op} with in-place arguments is not a superkernel kernel op")
        kwargs = dict(node.kwargs)
        bases = kwargs.pop("_all_bases", None)
        targets = {}
        args = {}
        for k, v in kwargs.items():
            if k.startswith("_") and k.endswith("_base_index"):
                continue
            args[k] = v
        if bases is not None:  # auto_functionalized_v2: mutated args given as base indices
            for n in sig.mutates:
                idx = node.kwargs.get(f"_{n}_base_index")
                args[n] = bases[idx]
        for n in sig.mutates:
            targets[n] = self._write_target(args[n], node)
        outs = self.lower_kernel_op(node, sig, args, targets)
        new = list(outs[: len(outs) - len(sig.mutates)])
        # As the functionalisation op returns: the op's outputs (a tuple flattened, one output or
        # None as one element), then the new value of each written base (v2) or argument (v1).
        if bases is not None:
            written = [None] * len(bases)
            for n in sig.mutates:
                written[node.kwargs[f"_{n}_base_index"]] = targets[n]
        else:
            written = [targets[n] for n in sig.mutates]
        head = new if len(new) > 1 else [new[0] if new else None]
        return (*head, *written)

    # ---- index updates of written inputs (static KV caches) ----
    def lower_index_update(self, node: fx.Node):
        T = self.caps.tensor_ops
        src = node.args[0]
        dst = self._write_target(src, node)
        if node.target is aten.index_copy.default:
            _, dim, index, source = node.args
            T.index_copy(self.g, dst, norm_dim(dim, len(shape(src))), self.value(index), self.value(source),
                         self.name(node))
            return dst
        indices, values = node.args[1], node.args[2]
        accumulate = node.args[3] if len(node.args) > 3 else False
        dim = next(i for i, x in enumerate(indices) if x is not None)
        if not accumulate and sum(x is not None for x in indices) == 1:
            want = shape(src)
            want[dim] = shape(indices[dim])[0]
            v = self.value(values)
            if shape(values) != want:  # values broadcast to the indexed slice (a view, no copy)
                v = self.g.expand(v, want, self.name(node) + "_values")
            T.index_copy(self.g, dst, dim, self.value(indices[dim]), v, self.name(node))
            return dst
        T.index_put(self.g, dst, [self.value(x) for x in indices], self.value(values), bool(accumulate),
                    self.name(node))
        return dst

    # ---- host steps ----
    def lower_host_step(self, step: HostStep) -> None:
        sub = fx.Graph()
        env = {}
        for n in step.inputs:
            env[n] = sub.placeholder(n.name)
            env[n].meta = dict(n.meta)
        for n in step.nodes:
            env[n] = sub.node_copy(n, lambda a: env[a])
        sub.output(tuple(env[n] for n in step.outputs))
        module = fx.GraphModule(self.gm, sub)
        ins = []
        for n in step.inputs:
            v = self.value(n)
            if not isinstance(v, _sk.Tensor):
                raise UnimplementedError(f"host step '{step.name}': input '{n.name}' is not a tensor")
            ins.append(v)
        outs = []
        for n in step.outputs:
            t = val(n)
            outs.append((to_sk(t.dtype, f"host step '{step.name}' output '{n.name}'"), list(t.shape), n.name))

        def run(inputs, outputs, module=module):
            with torch.no_grad():
                res = module(*inputs)
            for o, r in zip(outputs, res):
                o.copy_(r)

        handles = self.g.host_op(step.name, run, ins, outs, [], "torch")
        for n, h in zip(step.outputs, handles):
            self.env[n] = h
        for n in step.nodes:
            self.done.add(n)

    # ---- the walk ----
    def lower_node(self, node: fx.Node) -> None:
        if node in self.folded:
            return
        if node.op in ("placeholder", "output"):
            return
        if node.op == "call_function" and node.target in marker_targets():
            self.lower_marker(node)
            return
        if _is_copy_back(node):
            dst, src = node.args[0], node.args[1]
            var, value = self.value(dst), self.value(src)
            self.env[node] = var  # copy_ returns its destination
            if isinstance(value, _sk.Tensor) and value.id == var.id:
                return
            info = self.g.tensor(var)
            if shape(src) != list(info.shape) or val(src).dtype != val(dst).dtype:
                raise UnimplementedError(f"node '{node.name}': copy_ with broadcasting or a dtype change")
            self.g.add_op("copy", [value], [(info.dtype, list(info.shape))], None, [var], node.name)
            return
        if node.op == "call_function" and node.target is operator.getitem:
            self.env[node] = self.value(node.args[0])[node.args[1]]
            return
        if node.op == "call_function" and node.target in AUTO_FUNCTIONALIZED:
            self.env[node] = self.lower_auto_functionalized(node)
            return
        sig = signature_of(node.target)
        if sig is not None:
            args = bind_node_args(sig, node.args, node.kwargs)
            outs = self.lower_kernel_op(node, sig, args, {})
            self.env[node] = None if not outs else (outs[0] if len(outs) == 1 else tuple(outs))
            return
        row = ATEN_LOWERINGS[node.target]
        self.env[node] = row.lower(self, node)
        self._check_lowered_dtypes(node)

    def _check_lowered_dtypes(self, node: fx.Node) -> None:
        """A row's values have torch's dtypes: anything else is the lowering's error, said here
        with the node's name rather than by the verifier or, worse, by wrong numbers later."""
        got = self.env[node]
        want = val(node)
        pairs = zip(got, want) if isinstance(got, tuple) and isinstance(want, (tuple, list)) else [(got, want)]
        for g, w in pairs:
            if not isinstance(g, _sk.Tensor) or not isinstance(w, torch.Tensor) or not has_sk_dtype(w.dtype):
                continue
            have = self.g.tensor(g).dtype
            if have != to_sk(w.dtype):
                raise UnimplementedError(f"lowers to {have} where torch computes {w.dtype} (a missing promotion)")

    def lower_outputs(self) -> list[OutputSlot]:
        out_node = next(n for n in self.gm.graph.nodes if n.op == "output")
        slots = []
        n_sk = 0
        outputs: set[int] = set()
        for i, a in enumerate(out_node.args[0]):
            if not isinstance(a, fx.Node):
                slots.append(OutputSlot("none", value=a))
                continue
            if a in self.folded:
                slots.append(OutputSlot("const", value=self.folded[a]))
                continue
            v = self.value(a)
            if not isinstance(v, _sk.Tensor):
                slots.append(OutputSlot("none", value=v))
                continue
            info = self.g.tensor(v)
            kind = info.kind
            base_kind = self.g.tensor_info(info.base).kind if kind == _sk.TensorKind.view else kind
            if base_kind != _sk.TensorKind.intermediate:
                # An alias of a graph input: torch computes the view itself (below) so that it
                # aliases the caller's tensor as the graph says.
                slots.append(OutputSlot("torch", value=a))
                continue
            if v.id in outputs:  # the same tensor returned twice: a graph output holds one tensor
                v = _sk.copy(self.g, v, f"out{i}_copy")
            outputs.add(v.id)
            self.g.output(v, f"out{i}")
            slots.append(OutputSlot("sk", index=n_sk, dtype=val(a).dtype, shape=list(val(a).shape)))
            n_sk += 1
        return slots

    def build(self) -> "CompiledGraph":
        self.fold_constants()
        converted, self.converted_weights = convert_weights(self.gm, self.caps, self.frozen_linear_weights(),
                                                            self.options)
        self.rewrites = converted + rewrite(self.gm, self.caps, self.dense_weights())
        for node in self.gm.graph.nodes:  # constants the rewrites added (rope's positions)
            if node.op == "get_attr" and node not in self.folded:
                self.folded[node] = getattr(self.gm, node.target)
        self.copy_back = {n.args[0]: n for n in self.gm.graph.nodes if _is_copy_back(n)}
        # Folding may have left dead nodes after the rewrites: drop them from the fold map.
        live = set(self.gm.graph.nodes)
        self.folded = {n: v for n, v in self.folded.items() if n in live}
        part = partition(self.gm, self.caps, self.special_kinds())
        bindings = self.lower_inputs()
        for item in part.order:
            try:
                if isinstance(item, HostStep):
                    self.lower_host_step(item)
                else:
                    self.lower_node(item)
                    self.done.add(item)
            except SuperkernelError as e:
                what = item.name if isinstance(item, HostStep) else f"node '{item.name}' ({item.target})"
                raise type(e)(f"{what}: {e}") from e
        if self.scope_stack:
            name = self.scope_stack[-1] if self.scope_stack[-1] is not None else "<do not fuse>"
            raise InvalidArgumentError(
                f"graph break inside scope '{name}': this compiled graph ends inside the scope (dynamo split the model "
                "there, e.g. at data-dependent control flow; with fullgraph=True dynamo reports the break itself): "
                "move the break out of the scope"
            )
        slots = self.lower_outputs()
        return CompiledGraph(self, part, bindings, slots)




class CompiledGraph:
    """The callable torch runs for one forward graph."""

    def __init__(self, lowerer: Lowerer, part, bindings: list[Binding], slots: list[OutputSlot], options=None):
        self.lowerer = lowerer
        self.graph = lowerer.g
        self.options = options or lowerer.options
        self.runtime = lowerer.runtime
        self.partition = part
        self.rewrites = lowerer.rewrites
        self.notes = lowerer.notes
        self.input_names = [i.name for i in lowerer.inputs]
        self.host_steps = [
            (s.name, [(n.name, str(n.target), part.reasons.get(n, "")) for n in s.nodes if n.target is not operator.getitem])
            for s in part.steps
        ]
        try:
            self.executable = self.runtime.compile(self.graph, self.options.compile)
        except SuperkernelError as e:
            raise type(e)(self._with_host_steps(str(e))) from e
        self.bindings = bindings
        self.slots = slots
        self._sk_slots = [s for s in slots if s.kind == "sk"]
        # Output names are out<position>; remap to the runner's order.
        names = [f"out{i}" for i, s in enumerate(slots) if s.kind == "sk"]
        self.runner = _sk._StepRunner(
            self.executable,
            [(b.sk_name, b.nbytes, b.bind) for b in bindings],
            [(n, math.prod(s.shape) * torch.empty((), dtype=s.dtype).element_size())
             for n, s in zip(names, self._sk_slots)],
        )
        self._torch_outputs = self._alias_module(lowerer.gm, [s.value for s in slots if s.kind == "torch"])
        self._index = [b.index for b in bindings]
        self._contiguous = all(b.contiguous for b in bindings)
        self._out_specs = [(s.shape, s.dtype) for s in self._sk_slots]
        self._only_sk_outputs = len(self._sk_slots) == len(slots)  # the result is the list of new tensors
        # dynamo guards parameters by shape and dtype only, so it can call this graph with another
        # module instance's parameters (or a parameter replaced rather than updated in place);
        # the executable reads the storage it was compiled with, so that call must fail.
        self._frozen_index = [i for i, _, _ in lowerer.frozen]
        self._frozen_ptrs = [p for _, p, _ in lowerer.frozen]

    def _with_host_steps(self, message: str) -> str:
        for name, nodes in self.host_steps:
            if f"'{name}'" in message:
                ops = "; ".join(f"{n} ({t}): {r}" for n, t, r in nodes)
                message += f"\n  host op '{name}' runs in torch: {ops}"
        return message

    @staticmethod
    def _alias_module(gm: fx.GraphModule, outputs: list[fx.Node]):
        if not outputs:
            return None
        sub = fx.Graph()
        env = {}
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                env[n] = sub.placeholder(n.name)
        needed = set()
        stack = list(outputs)
        while stack:
            n = stack.pop()
            if n in needed or n.op == "placeholder":
                continue
            needed.add(n)
            # The executable already wrote the destination of a copy_ (a graph variable in the
            # caller's memory): the output is that tensor, not a second write.
            stack.extend([n.args[0]] if _is_copy_back(n) else n.all_input_nodes)
        for n in gm.graph.nodes:
            if n in needed:
                env[n] = env[n.args[0]] if _is_copy_back(n) else sub.node_copy(n, lambda a: env[a])
        sub.output(tuple(env[n] for n in outputs))
        return fx.GraphModule(gm, sub)

    def __call__(self, *args):
        if _recorders:
            ran, snapshot = _recorders[-1]
            # A snapshot copies the inputs before the run writes any of them (caches, counters).
            # Frozen parameters are kept as they are: the graph holds their storage as constants.
            frozen = set(self._frozen_index)
            ran.append((self, [a.clone() if isinstance(a, torch.Tensor) and i not in frozen else a
                               for i, a in enumerate(args)] if snapshot else args))
        if self._frozen_index and [args[i].data_ptr() for i in self._frozen_index] != self._frozen_ptrs:
            self._frozen_moved(args)
        if _captures and not self._contiguous:  # refused before the run writes anything
            bad = next(b.sk_name for b in self.bindings if not b.contiguous)
            raise InvalidArgumentError(
                f"capture: graph input '{bad}' is not contiguous, so each call runs on a fresh copy of it that a "
                "replay could not refresh: make it contiguous before the compiled call"
            )
        index = self._index
        if self._contiguous:
            ptrs = [args[i].data_ptr() for i in index]
            keep = None
        else:
            keep = [args[i] if b.contiguous else args[i].contiguous() for i, b in zip(index, self.bindings)]
            ptrs = [t.data_ptr() for t in keep]
        outs = [torch.empty(s, dtype=d) for s, d in self._out_specs]
        out_ptrs = [o.data_ptr() for o in outs]
        self.runner.step(ptrs, out_ptrs)
        if _captures:
            _captures[-1].append((self, args, ptrs, outs, out_ptrs))
        del keep
        if self._only_sk_outputs:
            return outs
        aliases = self._torch_outputs(*args) if self._torch_outputs is not None else ()
        result = []
        it_sk, it_alias = iter(outs), iter(aliases)
        for s in self.slots:
            if s.kind == "sk":
                result.append(next(it_sk))
            elif s.kind == "torch":
                result.append(next(it_alias))
            else:
                result.append(s.value)
        return result

    @property
    def frozen_inputs(self) -> frozenset:
        """Positions of the arguments bound as constants (frozen_parameter): a replay must pass
        these very tensors, not copies."""
        return frozenset(self._frozen_index)

    def _frozen_moved(self, args) -> None:
        for i, ptr, name in self.lowerer.frozen:
            if args[i].data_ptr() != ptr:
                raise InvalidArgumentError(
                    f"frozen_parameter: parameter '{name}' is not the tensor this graph was compiled with (another "
                    "instance of the same module class, whose parameters dynamo guards by shape only, or a parameter "
                    "replaced instead of updated in place): compile each instance with its own code object "
                    "(docs/PYTHON.md, Limits), or use frozen_parameter=False"
                )

    def with_options(self, options) -> "CompiledGraph":
        """The same lowered graph compiled with other options (a dict as the backend takes, e.g.
        another execution mode), called the same way: to A/B modes on the same inputs."""
        from ._options import backend_options

        opts = backend_options({"frozen_parameter": self.options.frozen_parameter, **dict(options)})
        return CompiledGraph(self.lowerer, self.partition, self.bindings, self.slots, opts)

    # ---- introspection ----
    @property
    def report(self):
        return self.executable.report

    def explain(self) -> str:
        lines = [f"torch graph: {self.graph.num_ops} ops, mode {self.options.mode}"]
        if self.rewrites:
            lines.append("kernel patterns: " + ", ".join(self.rewrites))
        for name, nodes in self.host_steps:
            lines.append(f"host step '{name}' (runs in torch between launches):")
            for n, t, r in nodes:
                lines.append(f"  {n} = {t}: {r}")
        lines.extend(self.notes)
        lines.append(self.runtime.explain(self.graph, self.options.compile))
        return "\n".join(lines)


def compile_fx(gm: fx.GraphModule, inputs: list[InputInfo], options: BackendOptions, runtime) -> CompiledGraph:
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # aot_autograd calls the compiler under its fake mode; constant folding and binding the
    # parameters need real tensors.
    with unset_fake_temporarily(), torch.no_grad():
        return Lowerer(gm, inputs, options, runtime).build()
