"""The backend's options: the keys and nesting of the C++ CompileOptions, the modes they select,
frozen_parameter, and errors naming the key."""

import pytest
import torch
import torch._dynamo

import superkernel as sk
from conftest import MODES, compile_fn, run_recorded


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(16, 16, bias=False)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2.0


@pytest.mark.parametrize("mode", list(MODES))
def test_the_options_select_the_mode(mode):
    with torch.no_grad():
        _, ran = run_recorded(compile_fn(Small(), MODES[mode]), torch.randn(2, 16))
    assert ran[0][0].report.mode == mode


def test_nested_options_as_dict_or_string():
    x = torch.randn(2, 16)
    for nested in ({"early_start": 1, "sync_choice": "cost"}, "early_start=1:sync_choice=cost"):
        opts = {**MODES["superkernel"], "super_kernel_optimize_options": nested}
        with torch.no_grad():
            _, ran = run_recorded(compile_fn(Small(), opts), x)
        assert "early-start=1 sync-choice=cost" in ran[0][0].report.segments[0].schedule


def test_an_unknown_key_or_bad_value_raises_naming_it():
    with pytest.raises(sk.InvalidArgumentError, match="bogus"):
        sk.backend({"bogus": 1})  # checked at once
    with pytest.raises(ValueError, match="early_start"):
        sk.backend({"super_kernel_optimize_options": {"early_start": 9}})
    with pytest.raises(ValueError, match="frozen_parameter"):
        sk.backend({"frozen_parameter": "yes"})
    with pytest.raises(ValueError, match="super_kernel_optimize"):
        sk.backend({"static_kernel_compile": False, "super_kernel_optimize": True})
    # Through torch.compile(options=...) the error comes at the first call, from dynamo.
    compiled = compile_fn(Small(), {"super_kernel_debug_options": {"not_a_debug_option": True}})
    with pytest.raises(Exception, match="not_a_debug_option"):
        with torch.no_grad():
            compiled(torch.randn(2, 16))


def test_backend_callable_with_checked_options():
    m = Small()
    x = torch.randn(2, 16)
    torch._dynamo.reset()
    compiled = torch.compile(m, backend=sk.backend(MODES["graph"]), fullgraph=True, dynamic=False)
    with torch.no_grad():
        out, ran = run_recorded(compiled, x)
        torch.testing.assert_close(out, m(x))
    assert ran[0][0].report.mode == "graph"


@pytest.mark.parametrize("frozen", [True, False])
def test_parameters_share_torch_storage(frozen):
    m = Small()
    x = torch.randn(2, 16)
    compiled = compile_fn(m, {**MODES["superkernel"], "frozen_parameter": frozen})
    with torch.no_grad():
        _, ran = run_recorded(compiled, x)
        graph = ran[0][0].graph
        kinds = {graph.tensor_info(i).name: graph.tensor_info(i).kind for i in range(graph.num_tensors)}
        assert kinds["lin.weight"] == (sk.TensorKind.constant if frozen else sk.TensorKind.input)
        # No copy either way: an in-place update of the parameter is what the next call reads.
        m.lin.weight.mul_(-1.0)
        torch.testing.assert_close(compiled(x), m(x))


def test_a_frozen_graph_never_runs_another_instances_weights():
    # One compiled function called with two instances of the same class: dynamo may reuse the
    # first graph (it guards parameters by shape); the backend must then refuse, not run the
    # first instance's weights.
    torch._dynamo.reset()
    first, second = Small(), Small()
    with torch.no_grad():
        second.lin.weight.add_(1.0)  # other weights than the first instance's
    x = torch.randn(2, 16)
    step = torch.compile(lambda mod, t: mod(t), backend=sk.backend({**MODES["graph"], "frozen_parameter": True}),
                         fullgraph=True, dynamic=False)
    with torch.no_grad():
        torch.testing.assert_close(step(first, x), first(x))
        try:
            out = step(second, x)
        except sk.InvalidArgumentError as e:
            assert "frozen_parameter" in str(e) and "lin." in str(e)
        else:
            torch.testing.assert_close(out, second(x))


def test_training_graphs_are_refused():
    m = Small()
    with pytest.raises(Exception, match="inference"):
        compile_fn(m, MODES["graph"])(torch.randn(2, 16))


@pytest.mark.parametrize("frozen", [True, False])
def test_tensors_dynamo_installs_on_the_graph_module(frozen):
    # With dynamo's install_free_tensors the parameters are attributes of the graph module, not
    # inputs, and aot_autograd passes them ahead of the inputs: the backend names and binds them
    # like the lifted ones.
    m = Small()
    x = torch.randn(2, 16)
    torch._dynamo.reset()
    with torch._dynamo.config.patch(install_free_tensors=True), torch.no_grad():
        compiled = torch.compile(m, backend=sk.backend({**MODES["superkernel"], "frozen_parameter": frozen}),
                                 fullgraph=True, dynamic=False)
        out, ran = run_recorded(compiled, x)
        torch.testing.assert_close(out, m(x))
        graph = ran[0][0].graph
        kinds = {graph.tensor_info(i).name: graph.tensor_info(i).kind for i in range(graph.num_tensors)}
        weight = [name for name in kinds if name.endswith("lin.weight") or name.endswith("lin_weight")]
        assert len(weight) == 1, sorted(kinds)
        assert kinds[weight[0]] == (sk.TensorKind.constant if frozen else sk.TensorKind.input)
        m.lin.weight.mul_(-1.0)
        torch.testing.assert_close(compiled(x), m(x))
