"""Helpers shared by the torch-level tests (each test file runs in its own process)."""

import pytest

MODES = {
    "eager": {"static_kernel_compile": False},
    "graph": {"static_kernel_compile": True},
    "superkernel": {"static_kernel_compile": True, "super_kernel_optimize": True},
}


def compile_fn(fn, options=None, **kwargs):
    """torch.compile with the superkernel backend, fullgraph and static shapes."""
    import torch

    torch._dynamo.reset()
    return torch.compile(fn, backend="superkernel", options=options, fullgraph=True, dynamic=False, **kwargs)


def run_recorded(compiled, *args, **kwargs):
    """Calls `compiled` and returns (its result, [(compiled graph, graph inputs)] it ran)."""
    import superkernel as sk

    with sk.recording() as ran:
        out = compiled(*args, **kwargs)
    return out, ran


def bits(t):
    """A tensor's bytes, for bit-identity checks."""
    import torch

    t = t.detach().contiguous().reshape(-1)  # a 0-d tensor has no byte view
    return t.view(torch.uint8) if t.dtype != torch.bool else t


@pytest.fixture(scope="session")
def sk():
    import superkernel

    return superkernel
