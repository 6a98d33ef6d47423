"""Scopes, core limits, streams, events and prefetch inside forward: captured by dynamo without a
graph break, they give the segments, partitions and cut reasons explain promises; outside
torch.compile they do nothing."""

import pytest
import torch
import torch._dynamo

import superkernel as sk
from conftest import MODES, bits, compile_fn, run_recorded

SK_MODE = {**MODES["superkernel"], "frozen_parameter": True}


class TwoBranch(torch.nn.Module):
    """Attention-like branch on the main stream, a MoE-like branch on stream "moe" under a core
    limit, joined by an event; then a second scope, a begin/end scope and a "do not fuse" range."""

    def __init__(self, fuse=True):
        super().__init__()
        torch.manual_seed(0)
        self.fuse = fuse
        self.w1 = torch.nn.Linear(64, 64, bias=False)
        self.w2 = torch.nn.Linear(64, 64, bias=False)
        self.w3 = torch.nn.Linear(64, 64, bias=False)

    def forward(self, x):
        with sk.superkernel_scope(self.fuse, "attn", "stream-fusion=1"):
            a = self.w1(x)
            done = sk.Event("moe_done")
            with sk.stream("moe"), sk.limit_core_num(1, 1):
                sk.prefetch(self.w3.weight, 4096, depend_on=x)
                b = self.w2(x) * 2.0
                done.record()
            done.wait()
            y = a + b
        with sk.superkernel_scope(self.fuse, "mlp"):
            z = torch.relu(self.w3(y))
        sk.scope_begin("tail")
        z = z + 1.0
        sk.scope_end("tail")
        with sk.scope(None):
            z = z * 3.0
        return z


@pytest.fixture(scope="module")
def two_branch():
    m = TwoBranch().eval()
    x = torch.randn(1, 64)
    compiled = compile_fn(m, SK_MODE)
    with torch.no_grad():
        out, ran = run_recorded(compiled, x)
    return m, x, out, ran


def test_markers_run_plain_torch_outside_compile():
    m = TwoBranch().eval()
    x = torch.randn(1, 64)
    with torch.no_grad():
        y = m(x)
        want = (torch.relu(m.w3(m.w1(x) + m.w2(x) * 2.0)) + 1.0) * 3.0
    assert torch.equal(y, want)


def test_scopes_streams_and_events_become_segments_and_partitions(two_branch):
    m, x, out, ran = two_branch
    with torch.no_grad():
        torch.testing.assert_close(out, m(x), rtol=1e-5, atol=1e-5)
    graph, _ = ran[0]
    assert graph.host_steps == []
    segs = graph.report.segments
    assert [s.scope for s in segs] == ["attn", "mlp", "tail"]
    assert [s.cut for s in segs] == ["SCOPE_BOUNDARY", "SCOPE_BOUNDARY", "NOT_FUSED"]
    attn = segs[0]
    assert any("stream 'moe'" in p and "LimitCoreNum 1" in p for p in attn.partitions), attn.partitions
    assert any("event 'moe_done'" in p for p in attn.sync_points), attn.sync_points
    assert [u.reason for u in graph.report.unfused] == ["NOT_FUSED"]  # the scope(None) range
    kernels = [graph.graph.op(i).kernel for i in range(graph.graph.num_ops)]
    assert "prefetch" in kernels
    text = graph.explain()
    for needle in ("segment 0 scope 'attn'", "partition stream 'moe'", "event 'moe_done'", "scope 'tail'"):
        assert needle in text


def test_explain_of_the_compiled_model_names_the_segments(two_branch):
    m, x, _, _ = two_branch
    compiled = compile_fn(m, SK_MODE)
    with torch.no_grad():
        text = sk.explain(compiled, x)
    assert "segment 0 scope 'attn'" in text and "segment 1 scope 'mlp'" in text


def test_the_three_modes_agree_bit_for_bit(two_branch):
    _, _, _, ran = two_branch
    graph, args = ran[0]
    ref = bits(graph(*args)[0])
    for mode in ("eager", "graph"):
        assert torch.equal(bits(graph.with_options(MODES[mode])(*args)[0]), ref), mode


def test_superkernel_scope_off_gives_whole_graph_fusion():
    m = TwoBranch(fuse=False).eval()
    compiled = compile_fn(m, SK_MODE)
    with torch.no_grad():
        _, ran = run_recorded(compiled, torch.randn(1, 64))
    scopes = [s.scope for s in ran[0][0].report.segments]
    assert "attn" not in scopes and "mlp" not in scopes and "tail" in scopes


def test_prefetch_off_keeps_results():
    m = TwoBranch().eval()
    x = torch.randn(1, 64)
    with torch.no_grad():
        on = compile_fn(m, SK_MODE)(x)
        _, ran = run_recorded(compile_fn(m, {**SK_MODE, "prefetch": False}), x)
        off = ran[0][0](*ran[0][1])[0]
    assert torch.equal(on, off)
    assert any("prefetch" in w for w in ran[0][0].report.warnings)


class ScopedHostOp(torch.nn.Module):
    def forward(self, x):
        with sk.scope("layer0"):
            return torch.special.erfcx(x) + 1.0  # no kernel: a host step inside the scope


def test_an_op_without_kernel_inside_a_scope_is_a_graph_break_error():
    with pytest.raises(Exception, match=r"scope 'layer0'.*graph break") as e:
        with torch.no_grad():
            compile_fn(ScopedHostOp(), SK_MODE)(torch.randn(4))
    assert "erfcx" in str(e.value)  # the host step's op and why it has no kernel
    # With strict-scope-check=bypass the scope runs unfused, results as torch's.
    class Bypass(torch.nn.Module):
        def forward(self, x):
            with sk.scope("layer0", "strict-scope-check=bypass"):
                return torch.special.erfcx(x) + 1.0

    x = torch.randn(4)
    with torch.no_grad():
        out, ran = run_recorded(compile_fn(Bypass(), SK_MODE), x)
    torch.testing.assert_close(out, torch.special.erfcx(x) + 1.0)
    assert ran[0][0].host_steps and "SCOPE_BYPASSED" in ran[0][0].explain()


class DataDependentBreak(torch.nn.Module):
    def forward(self, x):
        y = x * 2.0
        with sk.scope("layer0"):
            y = y + 1.0
            if y.sum().item() > 0:  # data-dependent control flow: dynamo must break the graph here
                y = y * 3.0
            y = y - 1.0
        return y


def test_a_dynamo_graph_break_inside_a_scope_is_an_error_naming_the_scope():
    torch._dynamo.reset()
    compiled = torch.compile(DataDependentBreak(), backend="superkernel", options=SK_MODE, dynamic=False)
    with pytest.raises(Exception, match=r"graph break inside scope 'layer0'"):
        with torch.no_grad():
            compiled(torch.ones(4))
    # fullgraph=True: dynamo refuses the break itself, pointing at the line, and the error names
    # the scope too (a note on dynamo's exception).
    with pytest.raises(Exception, match=r"item\(\)") as e:
        with torch.no_grad():
            compile_fn(DataDependentBreak(), SK_MODE)(torch.ones(4))
    assert any("graph break inside scope 'layer0'" in n for n in getattr(e.value, "__notes__", [])) or (
        "graph break inside scope 'layer0'" in str(e.value)
    )
    # A refused break outside any scope gets no such note.
    class BreakOutsideScope(torch.nn.Module):
        def forward(self, x):
            with sk.scope("layer0"):
                x = x + 1.0
            if x.sum().item() > 0:
                x = x * 3.0
            return x

    with pytest.raises(Exception, match=r"item\(\)") as e:
        with torch.no_grad():
            compile_fn(BreakOutsideScope(), SK_MODE)(torch.ones(4))
    assert "inside scope" not in str(e.value) + "".join(getattr(e.value, "__notes__", []))


def test_a_bad_scope_option_is_an_error_naming_the_key():
    class BadOption(torch.nn.Module):
        def forward(self, x):
            with sk.scope("s", "early-start=7"):
                return x * 2.0

    with pytest.raises(Exception, match="early-start"):
        with torch.no_grad():
            compile_fn(BadOption(), SK_MODE)(torch.randn(4))


def test_scope_modules_scopes_by_name_and_refuses_what_it_cannot_scope():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    assert sk.scope_modules(model, r"[02]") == ["0", "2"]
    x = torch.randn(2, 4)
    torch.testing.assert_close(model(x), model[2](model[1](model[0](x))))  # outside compile: plain torch
    with pytest.raises(ValueError, match=r"module '0' is already in scope '0'"):
        sk.scope_modules(model, r"0")
    with pytest.raises(ValueError, match=r"no submodule of Sequential has a name matching 'layers\\.\\d\+'"):
        sk.scope_modules(model, r"layers\.\d+")
