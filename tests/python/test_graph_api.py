"""The package without torch: graphs, builders, the runtime, executables with NumPy in and out,
explain, and C++ errors as Python exceptions."""

import sys

import numpy as np
import pytest

# This file runs in its own process (one ctest entry per file): hiding torch checks that the
# graph API needs nothing but NumPy.
sys.modules["torch"] = None
import superkernel as sk  # noqa: E402


def test_the_package_imports_without_torch():
    assert not hasattr(sk, "scope") and not hasattr(sk, "backend")

MODES = {
    "eager": {"static_kernel_compile": False},
    "graph": {"static_kernel_compile": True},
    "superkernel": {"static_kernel_compile": True, "super_kernel_optimize": True},
}


def hello_graph(w, gamma):
    g = sk.Graph("hello")
    x = g.input("x", sk.DType.f32, [2, 64])
    wt = g.constant("w", w)
    gt = g.constant("gamma", gamma)
    with g.scope("block"):
        h = sk.ops.rms_norm(g, sk.ops.matmul(g, x, wt), gt, 1e-6)
        g.output(sk.ops.add(g, h, x), "y")
    return g


def reference(x, w, gamma):
    h = x.astype(np.float64) @ w.astype(np.float64).T
    h = h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * gamma
    return h + x


def random_hello(seed):
    """hello_graph with random weights, its input x, and the weights for the reference."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(-0.1, 0.1, (64, 64)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 64).astype(np.float32)
    x = rng.uniform(-1, 1, (2, 64)).astype(np.float32)
    return hello_graph(w, gamma), x, w, gamma


def test_three_modes_agree_bit_for_bit_and_match_numpy():
    g, x, w, gamma = random_hello(0)
    outs = {}
    for mode, opts in MODES.items():
        exe = sk.compile(g, opts)
        assert exe.mode == mode
        exe.set_input("x", x)
        exe.run()
        outs[mode] = exe.read("y")
    for mode in MODES:
        assert outs[mode].dtype == np.float32 and outs[mode].shape == (2, 64)
        assert np.array_equal(outs[mode].view(np.uint32), outs["eager"].view(np.uint32)), mode
    np.testing.assert_allclose(outs["eager"], reference(x, w, gamma), rtol=1e-5, atol=1e-5)


def test_output_view_is_the_executables_memory():
    g = sk.Graph("double")
    x = g.input("x", sk.DType.f32, [8])
    g.output(sk.ops.add(g, x, x), "y")
    exe = sk.compile(g, MODES["graph"])
    exe.set_input("x", np.ones(8, np.float32))
    exe.run()
    view = exe.tensor("y")
    assert np.all(view == 2)
    exe.set_input("x", np.full(8, 3, np.float32))
    exe.run()
    assert np.all(view == 6)  # the same memory, rewritten by the run: no copy was made
    copy = exe.read("y")
    exe.set_input("x", np.zeros(8, np.float32))
    exe.run()
    assert np.all(copy == 6) and np.all(view == 0)


def test_bound_variable_and_external_constant_share_numpy_memory():
    g = sk.Graph("state")
    x = g.input("x", sk.DType.f32, [4])
    w = np.arange(4, dtype=np.float32)
    wt = g.constant_external("w", w)
    v = g.variable("v", sk.DType.f32, [4])
    # v <- x * w, written in place into the variable
    g.add_op("mul.f32", [x, wt], [(sk.DType.f32, [4])], write_into=[v])
    g.output(sk.ops.add(g, v, x), "y")
    state = np.zeros(4, np.float32)
    exe = sk.compile(g, MODES["superkernel"])
    exe.bind_variable("v", state)
    exe.set_input("x", np.full(4, 2, np.float32))
    exe.run()
    np.testing.assert_array_equal(state, [0, 2, 4, 6])  # the run wrote the NumPy array
    w[:] = 10  # the constant is read in place: the next run sees the new values
    exe.run()
    np.testing.assert_array_equal(state, [20, 20, 20, 20])


def test_host_op_with_a_numpy_callback_cuts_the_segment():
    g = sk.Graph("host")
    x = g.input("x", sk.DType.f32, [4])
    a = sk.ops.add(g, x, x)

    def triple(inputs, outputs):
        outputs[0][...] = inputs[0] * 3

    (b,) = g.host_op("triple", triple, [a], [(sk.DType.f32, [4])])
    g.output(sk.ops.mul(g, b, x), "y")
    for opts in MODES.values():
        exe = sk.compile(g, opts)
        exe.set_input("x", np.array([1, 2, 3, 4], np.float32))
        exe.run()
        np.testing.assert_array_equal(exe.read("y"), [6, 24, 54, 96])
    text = sk.explain(g, MODES["superkernel"])
    assert "cut HOST_OP at op 'triple'" in text


def test_host_op_exception_is_a_kernel_error_naming_the_op():
    g = sk.Graph("failing")
    x = g.input("x", sk.DType.f32, [2])

    def fail(inputs, outputs):
        raise ValueError("no luck")

    (y,) = g.host_op("boom", fail, [x], [(sk.DType.f32, [2])])
    g.output(y, "y")
    exe = sk.compile(g)
    exe.set_input("x", np.zeros(2, np.float32))
    with pytest.raises(sk.KernelError, match=r"boom.*ValueError: no luck"):
        exe.run()


def test_scopes_give_segments_and_cut_reasons():
    g = sk.Graph("scopes")
    x = g.input("x", sk.DType.f32, [1, 32])
    w = g.constant("w", np.eye(32, dtype=np.float32))
    with g.scope("a"):
        h = sk.ops.matmul(g, x, w)
        h = sk.ops.add(g, h, x)
    with g.scope("b", "early-start=1"):
        y = sk.ops.softmax(g, h)
    with g.scope(None):
        y = sk.ops.mul(g, y, y)
    g.output(y, "y")
    exe = sk.compile(g, MODES["superkernel"])
    segs = exe.report.segments
    assert [s.scope for s in segs] == ["a", "b"]
    assert segs[0].cut == "SCOPE_BOUNDARY"
    assert [u.reason for u in exe.report.unfused] == ["NOT_FUSED"]


def test_streams_events_and_core_limits_show_in_the_report():
    g = sk.Graph("streams")
    x = g.input("x", sk.DType.f32, [1, 64])
    side = g.create_stream("side")
    done = g.create_event("done")
    with g.scope("s", "stream-fusion=1"):
        a = sk.ops.add(g, x, x)
        with g.stream(side), g.limit_core_num(1, 1):
            b = sk.ops.mul(g, x, x)
            g.record(done)
        g.wait(done)
        g.output(sk.ops.add(g, a, b), "y")
    exe = sk.compile(g, MODES["superkernel"])
    seg = exe.report.segments[0]
    assert any("stream 'side'" in p and "LimitCoreNum" in p for p in seg.partitions), seg.partitions
    assert any("event 'done'" in s for s in seg.sync_points), seg.sync_points
    exe.set_input("x", np.full((1, 64), 2, np.float32))
    exe.run()
    np.testing.assert_array_equal(exe.read("y"), np.full((1, 64), 8, np.float32))


def test_errors_arrive_as_python_exceptions_with_the_cpp_message():
    g = sk.Graph("errors")
    x = g.input("x", sk.DType.f32, [4])
    g.output(sk.ops.add(g, x, x), "y")
    with pytest.raises(sk.InvalidArgumentError, match="bogus") as e:
        sk.compile(g, {"bogus": True})
    assert isinstance(e.value, ValueError) and e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(ValueError, match="early_start"):
        sk.compile(g, {"super_kernel_optimize_options": {"early_start": 9}})
    with pytest.raises(ValueError, match="super_kernel_optimize"):
        sk.compile(g, {"static_kernel_compile": False, "super_kernel_optimize": True})
    exe = sk.compile(g)
    with pytest.raises(sk.FailedPreconditionError, match="'x' was never set"):
        exe.run()
    with pytest.raises(sk.NotFoundError, match="nope") as e:
        exe.set_input("nope", np.zeros(4, np.float32))
    assert isinstance(e.value, LookupError)
    with pytest.raises(sk.InvalidArgumentError, match="got i32 data"):
        exe.set_input("x", np.zeros(4, np.int32))
    bad = sk.Graph("bad")
    a = bad.input("a", sk.DType.f32, [2, 3])
    w = bad.input("w", sk.DType.f32, [4, 5])
    bad.output(sk.ops.matmul(bad, a, w, "mm"), "y")
    with pytest.raises(sk.InvalidArgumentError, match="mm"):
        bad.verify()


def test_option_string_form_equals_the_dict_form():
    a = sk.compile_options({"super_kernel_optimize": True, "super_kernel_optimize_options": "stream_fusion=1:early_start=2"})
    b = sk.compile_options(
        {"super_kernel_optimize": True, "super_kernel_optimize_options": {"stream_fusion": True, "early_start": 2}}
    )
    assert a.mode == b.mode == "superkernel"
    g = hello_graph(np.eye(64, dtype=np.float32), np.ones(64, np.float32))
    assert sk.explain(g, a) == sk.explain(g, b)
    with pytest.raises(ValueError, match="not_an_option"):
        sk.compile_options({"super_kernel_optimize_options": "not_an_option=1"})


def test_runtime_lists_the_builtin_kernels():
    names = sk.runtime().kernel_names()
    assert "matmul.f32" in names and "rms_norm.f32" in names
    assert sk.runtime().num_cores >= 1
    assert sk.Runtime.cpu_isa() in ("avx512", "avx2", "scalar")


def test_load_policy_one_thread_gives_the_same_bits_and_a_bad_name_lists_the_policies():
    g, x, _, _ = random_hello(1)
    outs = {}
    for policy in ("static", "one_thread"):
        # chunk_bytes small enough that the helper thread shares the GEMVs of the one-thread launches
        rt = sk.Runtime.create(num_cores=2, pin_threads=False, allow_oversubscribe=True, load_policy=policy,
                               chunk_bytes=4096)
        for mode, opts in MODES.items():
            exe = sk.compile(g, opts, runtime=rt)
            exe.set_input("x", x)
            exe.run()
            outs[(policy, mode)] = exe.read("y")
        if policy == "one_thread":
            assert rt.one_thread_launches > 0
            assert rt.shared_calls > 0  # the graph's GEMVs, in 4 KiB chunks
        else:
            assert rt.one_thread_launches == 0
            assert rt.shared_calls == 0
    for mode in MODES:
        assert np.array_equal(outs[("one_thread", mode)].view(np.uint32), outs[("static", mode)].view(np.uint32)), mode
    with pytest.raises(ValueError, match="adaptive, static, one_thread"):
        sk.Runtime.create(num_cores=1, load_policy="solo")
    with pytest.raises(ValueError, match="'chunk_bytes' = 100"):
        sk.Runtime.create(num_cores=1, chunk_bytes=100)
