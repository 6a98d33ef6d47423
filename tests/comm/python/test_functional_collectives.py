"""torch's functional collectives in a model compiled with the superkernel backend, run under
``mpirun -np 2`` (every rank runs this file; docs/COMM.md, "From PyTorch").

Each compiled step must give torch's own result (the same function in torch eager, whose
collectives run over gloo) bit for bit, in every mode: with two ranks every sum has one order,
and the compute around the collectives is elementwise. In superkernel mode the collectives sit
inside the fused segment. Unsupported uses raise at compile time, naming the node and the reason.
"""

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import superkernel as sk

# One core per rank: two ranks share a 2-CPU machine. A short watchdog: a rank whose test failed
# leaves the other's collective within seconds rather than minutes.
sk.configure_runtime(num_cores=1, pin_threads=False, watchdog_seconds=20.0)

import superkernel.distributed as skd  # noqa: E402

# torch's current names (reduce_scatter_tensor / all_gather_tensor before them): the same ops.
reduce_scatter = getattr(funcol, "reduce_scatter_single", None) or funcol.reduce_scatter_tensor
all_gather = getattr(funcol, "all_gather_single", None) or funcol.all_gather_tensor

MODES = {
    "eager": {"static_kernel_compile": False},
    "graph": {"static_kernel_compile": True},
    "superkernel": {"static_kernel_compile": True, "super_kernel_optimize": True},
}


@pytest.fixture(scope="module", autouse=True)
def world():
    skd.init_process_group()
    assert dist.get_world_size() == 2, "run under mpirun -np 2"
    assert dist.get_rank() == skd.rank()
    yield


def compile_fn(fn, options):
    torch._dynamo.reset()
    return torch.compile(fn, backend="superkernel", options=options, fullgraph=True, dynamic=False)


def wait(t):
    return t.wait() if isinstance(t, funcol.AsyncCollectiveTensor) else t


# Rank r sends SENDS[r][q] rows to rank q in the uneven all_to_all_single (all_to_all_v).
SENDS = [[1, 2], [3, 1]]


def rank_inputs():
    g = torch.Generator().manual_seed(100 + dist.get_rank())
    rows = sum(SENDS[dist.get_rank()])
    return (
        torch.randn(4, 24, generator=g),  # all_reduce, f32
        torch.randn(4, 8, generator=g).to(torch.bfloat16),  # all_reduce, bf16
        torch.randint(-1000, 1000, (6,), generator=g, dtype=torch.int32),  # all_reduce, i32
        torch.randn(6, 5, generator=g),  # reduce_scatter: 2 blocks of 3 rows
        torch.randn(3, 7, generator=g),  # all_gather
        torch.randn(4, 3, generator=g),  # all_to_all_single, equal splits
        torch.randn(rows, 4, generator=g),  # all_to_all_single, uneven splits
    )


def step(a, b, c, d, e, f, u):
    group = dist.group.WORLD
    r = dist.get_rank()
    with sk.scope("step"):
        ar = funcol.all_reduce(a * 2.0, "sum", group) + 1.0
        ar16 = funcol.all_reduce(b, "sum", group)
        ari = funcol.all_reduce(c, "sum", group)
        rs = reduce_scatter(d + 1.0, "sum", 0, group) * 3.0
        ag = all_gather(e, 0, group) - 0.5
        a2a = funcol.all_to_all_single(f * f, None, None, group)
        uneven = funcol.all_to_all_single(u + 1.0, [SENDS[0][r], SENDS[1][r]], SENDS[r], group) * 2.0
        inplace = a - 0.5
        dist.all_reduce(inplace)  # synchronous: dynamo rewrites it into the functional all_reduce
        return ar, ar16, ari, rs, ag, a2a, uneven, inplace * 2.0


def test_collectives_match_torch_in_every_mode():
    inputs = rank_inputs()
    want = [wait(t) for t in step(*inputs)]  # torch eager: gloo
    with sk.recording() as ran:
        got = compile_fn(step, MODES["superkernel"])(*inputs)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"output {i}: {g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)}"
        assert torch.equal(g, w), f"output {i} differs from torch's: largest difference {(g.float() - w.float()).abs().max()}"
    # Every op ran in the superkernel graph (no host step ran a collective in torch), and the
    # collectives are inside the fused segment.
    assert len(ran) == 1
    compiled, args = ran[0]
    assert not compiled.host_steps, compiled.explain()
    text = compiled.explain()
    for kernel in ("comm.all_reduce.f32", "comm.all_reduce.bf16", "comm.all_reduce.i32", "comm.reduce_scatter.f32",
                   "comm.all_gather", "comm.all_to_all", "comm.all_to_all_v"):
        assert f"({kernel}) on core" in text, text
    fused = [s for s in compiled.report.segments if s.scope == "step"]
    assert len(fused) == 1, text
    # The same lowered graph in eager and graph modes: the same bits.
    ref = [t for t in compiled(*args) if isinstance(t, torch.Tensor)]
    for mode in ("eager", "graph"):
        other = compiled.with_options(MODES[mode])
        assert other.report.mode == mode
        outs = [t for t in other(*args) if isinstance(t, torch.Tensor)]
        assert len(outs) == len(ref)
        for i, (o, r) in enumerate(zip(outs, ref)):
            assert torch.equal(o, r), f"{mode}: output {i} differs from superkernel mode's"


def compile_error(fn, *args):
    with pytest.raises(Exception) as info:
        compile_fn(fn, MODES["graph"])(*args)
    return str(info.value)


def test_a_group_of_some_ranks_is_refused_naming_it():
    sub = dist.new_group([0])  # every rank creates it; only rank 0 is a member
    if dist.get_rank() != 0:
        return
    message = compile_error(lambda x: funcol.all_reduce(x, "sum", sub) + 1.0, torch.ones(4))
    assert "all_reduce" in message and "global ranks [0]" in message and "MPI_COMM_WORLD" in message, message


def test_a_reduction_other_than_sum_is_refused_naming_it():
    message = compile_error(lambda x: funcol.all_reduce(x, "max", dist.group.WORLD) + 1.0, torch.ones(4))
    assert "reduction 'max'" in message, message


def test_other_collectives_are_refused_naming_them():
    message = compile_error(lambda x: funcol.broadcast(x, 0, dist.group.WORLD) + 1.0, torch.ones(4))
    assert "broadcast" in message and "not supported" in message, message
