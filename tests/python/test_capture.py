"""superkernel.capture: a compiled call captured once and replayed gives the bits the compiled
call gives on the same inputs, in every mode; what a replay could not redo is refused when
capturing."""

import pytest
import torch

import superkernel as sk
from conftest import MODES, bits, compile_fn


class Step(torch.nn.Module):
    """A decode-like step: a matmul chain with a norm, and a buffer the step writes in place
    (a cache row at `pos`, and a step counter)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w1 = torch.nn.Linear(32, 64, bias=False)
        self.w2 = torch.nn.Linear(64, 32, bias=False)
        self.register_buffer("cache", torch.zeros(8, 32))
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x, pos):
        h = torch.nn.functional.silu(self.w1(x))
        y = self.w2(h)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)
        self.cache.index_copy_(0, pos, y)
        self.count.add_(1.0)
        return y + self.cache.sum(0, keepdim=True)


def reference_run(mode, xs):
    """The outputs of a compiled call on each input in turn, and the buffers after them."""
    m = Step().eval()
    f = compile_fn(m, {**MODES[mode], "frozen_parameter": True})
    outs = []
    with torch.no_grad():
        for i, x in enumerate(xs):
            outs.append(f(x, torch.tensor([i])).clone())
    return outs, m.cache.clone(), m.count.clone()


@pytest.mark.parametrize("mode", list(MODES))
def test_replay_gives_the_compiled_calls_bits(mode):
    torch.manual_seed(1)
    xs = [torch.randn(1, 32) for _ in range(4)]
    want, want_cache, want_count = reference_run(mode, xs)
    m = Step().eval()
    f = compile_fn(m, {**MODES[mode], "frozen_parameter": True})
    x, pos = xs[0].clone(), torch.tensor([0])
    with torch.no_grad():
        step = sk.capture(f, x, pos)
    assert step.inputs == (x, pos)
    assert torch.equal(bits(step.result), bits(want[0]))
    for i in range(1, len(xs)):
        x.copy_(xs[i])
        pos.fill_(i)
        out = step()
        assert out is step.result  # static outputs, overwritten by each replay
        assert torch.equal(bits(out), bits(want[i])), f"step {i}"
    assert torch.equal(bits(m.cache), bits(want_cache))
    assert torch.equal(bits(m.count), bits(want_count))
    assert "torch graph:" in step.explain()


def test_two_compiled_graphs_chained():
    torch.manual_seed(2)
    # Instances of two classes: dynamo would serve one class's frozen graph to both (docs/PYTHON.md, Limits).
    a, b = torch.nn.Linear(16, 16).eval(), torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
    fa = compile_fn(a, {"frozen_parameter": True})
    fb = torch.compile(b, backend="superkernel", fullgraph=True, dynamic=False, options={"frozen_parameter": True})
    x = torch.randn(2, 16)
    with torch.no_grad():
        step = sk.capture(lambda t: fb(fa(t)), x)
        assert len(step.graphs) == 2
        x.copy_(torch.randn(2, 16))
        want = fb(fa(x)).clone()
    assert torch.equal(bits(step()), bits(want))


def test_a_call_without_compiled_graphs_is_refused():
    m = torch.nn.Linear(4, 4)
    with torch.no_grad(), pytest.raises(sk.InvalidArgumentError, match="ran no graph compiled by the superkernel"):
        sk.capture(m, torch.randn(1, 4))


def test_an_input_computed_by_eager_torch_is_refused():
    f = compile_fn(torch.nn.Linear(4, 4).eval(), {"frozen_parameter": True})
    x = torch.randn(1, 4)
    with torch.no_grad(), pytest.raises(sk.InvalidArgumentError, match="computed by eager torch during the capture"):
        sk.capture(lambda t: f(t * 2.0), x)


def test_a_result_computed_after_the_graphs_is_refused():
    f = compile_fn(torch.nn.Linear(4, 4).eval(), {"frozen_parameter": True})
    x = torch.randn(1, 4)
    with torch.no_grad(), pytest.raises(sk.InvalidArgumentError, match="tensor 0 of the result was computed outside"):
        sk.capture(lambda t: f(t) + 1.0, x)


def test_a_non_contiguous_input_is_refused():
    f = compile_fn(lambda t: t * 2.0 + 1.0)
    x = torch.randn(4, 6).t()
    with torch.no_grad(), pytest.raises(sk.InvalidArgumentError, match="is not contiguous"):
        sk.capture(f, x)
