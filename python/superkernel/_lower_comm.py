"""torch's functional collectives -> superkernel's collective kernels over MPI.

Rows of the lowering table (``_lowering.ATEN_LOWERINGS``, added by ``register``) for the ops
``torch.distributed._functional_collectives`` traces to (docs/COMM.md, "From PyTorch"):

=========================================================  ==========================================
``_c10d_functional.all_reduce`` (``"sum"``)                 ``comm.all_reduce.{f32,bf16,f16,i32}``
``_c10d_functional.reduce_scatter_tensor`` (``"sum"``)      ``comm.reduce_scatter.{f32,bf16,f16,i32}``
``_c10d_functional.all_gather_into_tensor``                 ``comm.all_gather``
``_c10d_functional.all_to_all_single`` (equal splits)       ``comm.all_to_all``
``_c10d_functional.all_to_all_single`` (other splits)       ``comm.all_to_all_v`` (constant counts)
``_c10d_functional.wait_tensor``                            nothing: the collective's consumers wait
                                                            for it inside the launch, like any producer
=========================================================  ==========================================

The process group: the collectives run over MPI_COMM_WORLD (superkernel.distributed), so a
group must hold every rank in MPI's order (the default group, or a ``new_group`` of all ranks),
and torch's rank and world size must be MPI's. Everything else a compiled graph may hold of
torch.distributed raises, naming the node and what is unsupported, at compile time (before any
rank sends a message): other groups, reductions other than sum, reduction dtypes the kernels lack,
data-dependent split sizes, a collective whose result leaves the graph before its wait_tensor
(asynchronous across graphs), and every other c10d op (in-place and coalesced forms, broadcast,
point-to-point, the Work-returning ``c10d::*`` ops of the asynchronous API).

A synchronous ``torch.distributed.all_reduce(t)`` lowers too: dynamo rewrites it into the
functional all_reduce, its wait_tensor and an ``aten.copy`` of the result (a row here, the
result itself). ``async_op=True`` dynamo refuses itself under ``fullgraph=True``; without it the
call runs in torch eager (over torch's own backend), outside the compiled graphs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.fx as fx

from ._errors import FailedPreconditionError, UnimplementedError
from ._lowering import Capabilities, Ctx, Row, dtype, shape
from ._torch_types import has_sk_dtype

# Reductions sum in these dtypes (f32 accumulation for the 16-bit floats, wrapping i32).
_REDUCE_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32)
_LOWERED = ("all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor", "all_to_all_single", "wait_tensor")
# Namespaces of torch.distributed's ops: anything of theirs without a row here is refused.
_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd", "c10d")


@dataclass(frozen=True)
class CollectiveRow(Row):
    """A row whose check runs before the table's dtype check: an unsupported collective raises
    instead of becoming a host step (which would run it in torch, outside the super kernels)."""

    check_before_dtypes: bool = True


def _op(node: fx.Node) -> str:
    return f"{node.target} (node '{node.name}')"


def _unsupported(node: fx.Node, what: str) -> UnimplementedError:
    return UnimplementedError(f"superkernel backend: {_op(node)}: {what} (docs/COMM.md, 'From PyTorch')")


def _group(node: fx.Node, group_name):
    """The communicator Group of the node's process group; raises unless the group is every rank
    in MPI's order and torch's world is MPI's."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    from . import distributed

    if not distributed.available():
        distributed._require()
    if not dist.is_initialized():
        raise FailedPreconditionError(
            f"superkernel backend: {_op(node)}: torch.distributed is not initialised; under mpirun call "
            "superkernel.distributed.init_process_group() before compiling"
        )
    pg = c10d._resolve_process_group(group_name) if isinstance(group_name, str) else group_name
    ranks = dist.get_process_group_ranks(pg)
    world = dist.get_world_size()
    if ranks != list(range(world)):
        label = group_name if isinstance(group_name, str) else c10d._get_process_group_name(pg)
        raise _unsupported(
            node,
            f"process group '{label}' has the global ranks {ranks}; the collective kernels run over MPI_COMM_WORLD, "
            f"so only a group of every rank in order ({list(range(world))}: the default group) maps to it",
        )
    distributed.check_torch_matches_mpi()
    return distributed.group()


def _check_sum(node: fx.Node, reduce_op) -> None:
    if str(reduce_op).lower() != "sum":
        raise _unsupported(node, f"reduction '{reduce_op}': the collective kernels sum (reduce_op 'sum')")
    if dtype(node.args[0]) not in _REDUCE_DTYPES:
        raise _unsupported(
            node,
            f"a sum of {dtype(node.args[0])}: the collective kernels sum float32, bfloat16, float16 and int32",
        )


def _check_moved_dtype(node: fx.Node) -> None:
    if not has_sk_dtype(dtype(node.args[0])):
        raise _unsupported(node, f"dtype {dtype(node.args[0])} has no superkernel dtype")


def _check_waited(node: fx.Node) -> None:
    """Every use of the result goes through wait_tensor in this graph: a result leaving the graph
    un-waited belongs to an asynchronous collective that another graph (or torch) would wait for."""
    for user in node.users:
        if user.target is not torch.ops._c10d_functional.wait_tensor.default:
            raise _unsupported(
                node,
                f"its result reaches '{user.name}' ({user.op} {user.target}) without wait_tensor: an asynchronous "
                "collective waited for outside this compiled graph is not supported (wait on it inside the graph)",
            )


def _check_group_size(node: fx.Node, group_size, group) -> None:
    if group_size != group.size:
        raise _unsupported(node, f"group_size {group_size}, but the process group has {group.size} ranks")


def _dim0_divides(node: fx.Node, size: int) -> None:
    rows = shape(node.args[0])[0] if shape(node.args[0]) else 0
    if not shape(node.args[0]) or rows % size != 0:
        raise _unsupported(node, f"input of shape {shape(node.args[0])}: dim 0 must be a multiple of {size} ranks")


def _name(ctx: Ctx, node: fx.Node) -> str:
    return ctx.name(node)


def _dense_input(ctx: Ctx, node: fx.Node):
    return ctx.dense(ctx.value(node.args[0]), _name(ctx, node))


# ---- all_reduce(input, reduce_op, group_name) ---------------------------------------------------


def _check_all_reduce(node, caps: Capabilities):
    _check_sum(node, node.args[1])
    _group(node, node.args[2])
    _check_waited(node)
    return None


def _lower_all_reduce(ctx: Ctx, node: fx.Node):
    from . import _comm

    x = _dense_input(ctx, node)
    if not shape(node.args[0]):  # a 0-d tensor: the kernels take at least one dim
        y = _comm.all_reduce(ctx.g, _group(node, node.args[2]), ctx.g.reshape(x, [1], _name(ctx, node) + "_1d"))
        return ctx.g.reshape(y, [], _name(ctx, node))
    return _comm.all_reduce(ctx.g, _group(node, node.args[2]), x, _name(ctx, node))


# ---- reduce_scatter_tensor(input, reduce_op, group_size, group_name) ----------------------------


def _check_reduce_scatter(node, caps):
    _check_sum(node, node.args[1])
    group = _group(node, node.args[3])
    _check_group_size(node, node.args[2], group)
    _dim0_divides(node, group.size)
    _check_waited(node)
    return None


def _lower_reduce_scatter(ctx: Ctx, node: fx.Node):
    from . import _comm

    return _comm.reduce_scatter(ctx.g, _group(node, node.args[3]), _dense_input(ctx, node), _name(ctx, node))


# ---- all_gather_into_tensor(input, group_size, group_name) --------------------------------------


def _check_all_gather(node, caps):
    _check_moved_dtype(node)
    group = _group(node, node.args[2])
    _check_group_size(node, node.args[1], group)
    if not shape(node.args[0]):
        raise _unsupported(node, "a 0-d input: all_gather_into_tensor gathers along dim 0")
    _check_waited(node)
    return None


def _lower_all_gather(ctx: Ctx, node: fx.Node):
    from . import _comm

    return _comm.all_gather(ctx.g, _group(node, node.args[2]), _dense_input(ctx, node), _name(ctx, node))


# ---- all_to_all_single(input, output_split_sizes, input_split_sizes, group_name) -----------------


def _splits(node: fx.Node, splits, which: str, size: int, rows: int) -> list[int]:
    """The split sizes as ints (equal blocks when empty); raises when data-dependent."""
    if splits is None or len(splits) == 0:
        return [rows // size] * size
    out = []
    for s in splits:
        if isinstance(s, fx.Node) or not isinstance(s, int):
            raise _unsupported(
                node,
                f"{which} split sizes {list(splits)} are computed at run time; the backend lowers constant split "
                "sizes (dynamic=False)",
            )
        out.append(int(s))
    if len(out) != size or any(s < 0 for s in out):
        raise _unsupported(node, f"{which} split sizes {out}: expected {size} non-negative sizes (one per rank)")
    return out


def _all_to_all_plan(node: fx.Node):
    group = _group(node, node.args[3])
    src = shape(node.args[0])
    if not src:
        raise _unsupported(node, "a 0-d input: all_to_all_single splits dim 0")
    out_rows = shape(node)[0]
    if not node.args[2] and src[0] % group.size != 0:
        raise _unsupported(node, f"input of shape {src} without split sizes: dim 0 must be a multiple of {group.size}")
    send = _splits(node, node.args[2], "input", group.size, src[0])
    recv = _splits(node, node.args[1], "output", group.size, out_rows)
    if sum(send) != src[0] or sum(recv) != out_rows:
        raise _unsupported(
            node, f"split sizes (input {send}, output {recv}) do not add up to the rows ({src[0]} in, {out_rows} out)"
        )
    return group, send, recv, out_rows


def _check_all_to_all(node, caps):
    _check_moved_dtype(node)
    _all_to_all_plan(node)
    _check_waited(node)
    return None


def _lower_all_to_all(ctx: Ctx, node: fx.Node):
    from . import _comm

    group, send, recv, out_rows = _all_to_all_plan(node)
    x = _dense_input(ctx, node)
    name = _name(ctx, node)
    if len(set(send)) == 1 and send == recv:
        return _comm.all_to_all(ctx.g, group, x, name)
    counts = ctx.g.constant(name + "_send_counts", np.asarray(send, np.int32))
    y, _recv_counts, _group_counts = _comm.all_to_all_v(ctx.g, group, x, counts, out_rows, 1, name=name)
    return y


# ---- wait_tensor(tensor) -------------------------------------------------------------------------


def _check_wait(node, caps):
    return None


def _lower_wait(ctx: Ctx, node: fx.Node):
    # The collective completed inside the launch: its consumers already wait for its core.
    return ctx.value(node.args[0])


# ---- everything else of torch.distributed ---------------------------------------------------------


def _refuse(node, caps):
    raise _unsupported(
        node,
        "the backend lowers torch.distributed._functional_collectives' all_reduce, reduce_scatter_tensor, "
        "all_gather_into_tensor and all_to_all_single (and their wait_tensor); in-place, coalesced, broadcast, "
        "point-to-point and asynchronous (Work-returning c10d) collectives are not supported",
    )


def _never(ctx, node):  # pragma: no cover - _refuse raised first
    raise AssertionError(f"{node.target} has no lowering")


def _other_ops():
    """Every overload of the torch.distributed namespaces that has no row of its own."""
    out = []
    for qualified in torch._C._dispatch_get_all_op_names():
        ns, _, name = qualified.partition("::")
        if ns not in _NAMESPACES or (ns == "_c10d_functional" and name in _LOWERED):
            continue
        try:
            packet = getattr(getattr(torch.ops, ns), name)
            out += [getattr(packet, overload) for overload in packet.overloads()]
        except (AttributeError, RuntimeError):  # pragma: no cover - an op without Python bindings
            continue
    return out


def register(table: dict) -> None:
    """Adds the collective rows to the lowering table (called once by _lowering)."""
    if not hasattr(torch.ops, "_c10d_functional") or not torch.distributed.is_available():
        return  # a torch without distributed: nothing of it can reach a graph
    c10d = torch.ops._c10d_functional
    table[c10d.all_reduce.default] = CollectiveRow(_check_all_reduce, _lower_all_reduce)
    table[c10d.reduce_scatter_tensor.default] = CollectiveRow(_check_reduce_scatter, _lower_reduce_scatter)
    table[c10d.all_gather_into_tensor.default] = CollectiveRow(_check_all_gather, _lower_all_gather)
    table[c10d.all_to_all_single.default] = CollectiveRow(_check_all_to_all, _lower_all_to_all)
    table[c10d.wait_tensor.default] = CollectiveRow(_check_wait, _lower_wait)
    for op in _other_ops():
        table.setdefault(op, CollectiveRow(_refuse, _never))
