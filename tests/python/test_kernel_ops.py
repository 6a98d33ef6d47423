"""Kernels as torch ops (torch.ops.superkernel.*): every kernel of the built-in package is
reachable, a call in plain torch runs the kernel (checked against torch formulas), the fake
implementation gives the kernel's shapes, and under the backend the call becomes that graph op,
writing in-place operands (paged caches) into the torch tensors."""

import math

import pytest
import torch
import torch.nn.functional as F

import superkernel as sk
from superkernel import _kernel_ops
from conftest import MODES, bits, compile_fn, run_recorded

ops = torch.ops.superkernel
torch.manual_seed(0)


def test_every_builtin_kernel_is_a_torch_op():
    names = sk.runtime().kernel_names()
    # The general tensor kernels (tensor.*) are what torch's own ops lower to (test_aten_ops.py);
    # call_kernel reaches them, and any other kernel, by name.
    missing = [k for k in _kernel_ops.check_kernel_coverage(names) if not k.startswith("tensor.")]
    assert missing == []
    for sig in _kernel_ops.BUILTIN_SIGNATURES:
        assert hasattr(ops, sig.name)


def test_core_kernels_in_plain_torch():
    x, w, g = torch.randn(3, 64), torch.randn(48, 64), torch.rand(64) + 0.5
    torch.testing.assert_close(ops.matmul(x, w), x @ w.t(), rtol=1e-4, atol=1e-4)
    # bf16 weights: f32 products of the widened weights, except where the CPU has AVX-512 BF16, whose
    # dot-product instruction takes x rounded to bf16 too (docs/kernels_matmul.md); either, not a mix.
    wb = w.to(torch.bfloat16).float()
    y = ops.matmul(x, w.to(torch.bfloat16))
    widened, rounded = x @ wb.t(), x.to(torch.bfloat16).float() @ wb.t()
    assert not torch.allclose(widened, rounded, rtol=1e-4, atol=1e-4)
    assert torch.allclose(y, widened, rtol=1e-4, atol=1e-4) or torch.allclose(y, rounded, rtol=1e-4, atol=1e-4)
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g
    torch.testing.assert_close(ops.rms_norm(x, g, 1e-6), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ops.silu_mul(x, x * 2), F.silu(x) * x * 2, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ops.softmax(x), torch.softmax(x, -1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ops.layer_norm(x, g, g * 0.1, 1e-5), F.layer_norm(x, (64,), g, g * 0.1, 1e-5),
                               rtol=1e-5, atol=1e-5)
    table = torch.randn(10, 8)
    ids = torch.tensor([[3, 0, 9]], dtype=torch.int32)
    assert torch.equal(ops.embedding(ids, table), table[ids.long()])
    assert torch.equal(ops.argmax(x), x.argmax(-1).to(torch.int32))
    y = ops.copy(x.t())
    assert torch.equal(y, x.t()) and y.is_contiguous()
    assert torch.equal(sk.call_kernel("add.f32", [x, g], [(torch.float32, [3, 64])])[0], x + g)


def test_eager_calls_bind_each_calls_tensors():
    # The cached one-op executable binds its operands by address: a later call reads its own
    # tensors (others, or the same two swapped), and an empty operand is an error naming it.
    a, b, c = torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)
    assert torch.equal(ops.add(a, b), a + b)
    assert torch.equal(ops.add(b, a), b + a)
    assert torch.equal(ops.add(c, a), c + a)
    b.copy_(c)
    assert torch.equal(ops.add(a, b), a + c)
    with pytest.raises(sk.InvalidArgumentError, match="argument 'a' has no elements"):
        ops.add(torch.zeros(0, 8), torch.zeros(0, 8))


def test_rope_matches_the_neox_formula():
    T, H, D, theta = 3, 2, 8, 10000.0
    x, pos = torch.randn(T, H, D), torch.tensor([0, 5, 2], dtype=torch.int32)
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = torch.arange(16, dtype=torch.float64)[:, None] * inv[None]
    table = torch.cat([angles.cos(), angles.sin()], -1).float()
    cos, sin = table[pos.long(), : D // 2], table[pos.long(), D // 2:]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    want = torch.cat([x1 * cos[:, None] - x2 * sin[:, None], x2 * cos[:, None] + x1 * sin[:, None]], -1)
    torch.testing.assert_close(ops.rope(x, pos, table, D, D, True), want, rtol=1e-5, atol=1e-5)


def _paged(cache_len=8, blocks=4, bs=4, hkv=2, d=8):
    return torch.zeros(blocks, bs, hkv, d), torch.zeros(blocks, bs, hkv, d)


def test_kv_append_writes_the_torch_caches_and_paged_attention_reads_them():
    k_cache, v_cache = _paged()
    ptr = k_cache.data_ptr()
    T, Hq, Hkv, D = 5, 4, 2, 8
    k, v = torch.randn(T, Hkv, D), torch.randn(T, Hkv, D)
    slots = torch.tensor([4, 5, 6, 7, 8], dtype=torch.int32)  # blocks 1 and 2 hold the sequence
    ops.kv_append(k, v, slots, k_cache, v_cache)
    assert k_cache.data_ptr() == ptr
    assert torch.equal(k_cache.view(-1, Hkv, D)[4:9], k) and torch.equal(v_cache.view(-1, Hkv, D)[4:9], v)
    q = torch.randn(1, Hq, D)
    tables = torch.tensor([[1, 2, 0, 0]], dtype=torch.int32)
    out = ops.paged_attention(q, k_cache, v_cache, tables, torch.tensor([T], dtype=torch.int32), 1 / math.sqrt(D))
    kk = k.repeat_interleave(Hq // Hkv, 1).transpose(0, 1)  # [Hq, T, D]
    vv = v.repeat_interleave(Hq // Hkv, 1).transpose(0, 1)
    want = F.scaled_dot_product_attention(q.transpose(0, 1)[:, None], kk[:, None], vv[:, None])[:, 0].transpose(0, 1)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


def test_moe_pipeline_matches_a_dense_reference():
    T, D, E, Z, k = 3, 16, 4, 2, 3
    x, logits, bias = torch.randn(T, D), torch.randn(T, E + Z), torch.zeros(E + Z)
    w = torch.randn(E, D, D) * 0.1
    ids, weights = ops.moe_router(logits, bias, top_k=k, num_real_experts=E, normalize=True)
    s = torch.softmax(logits, -1)
    top = torch.topk(s, k, -1)
    assert torch.equal(ids, top.indices.to(torch.int32))
    torch.testing.assert_close(weights, top.values / (top.values.sum(-1, keepdim=True) + 1e-20))
    x_sorted, counts, row_map = ops.moe_dispatch(x, ids, num_real_experts=E, num_zero_experts=Z)
    y = ops.grouped_matmul(x_sorted, counts, w)
    out = ops.moe_combine(y, row_map, weights, x)
    want = torch.zeros(T, D)
    for t in range(T):
        for j in range(k):
            e = int(ids[t, j])
            want[t] += weights[t, j] * (w[e] @ x[t] if e < E else x[t])  # zero experts return x
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)


def test_fake_implementations_give_the_kernels_shapes():
    x, w = torch.randn(2, 3, 16), torch.randn(8, 16)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        y = ops.matmul(fx, fw)
        q, s = ops.quantize(fx)
    assert y.shape == (2, 3, 8) and y.dtype == torch.float32
    assert q.shape == (2, 3, 16) and q.dtype == torch.int8 and s.shape == (2, 3)
    torch.library.opcheck(ops.rms_norm.default, (torch.randn(2, 8), torch.rand(8), 1e-6),
                          test_utils=("test_schema", "test_faketensor"))


class PagedLayer(torch.nn.Module):
    """A decode step written with kernel ops, as production model files call vendor ops."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.norm = torch.nn.Parameter(torch.rand(32) + 0.5)
        self.qkv = torch.nn.Parameter(torch.randn(3 * 32, 32) * 0.1)
        self.register_buffer("k_cache", torch.zeros(4, 4, 2, 16))
        self.register_buffer("v_cache", torch.zeros(4, 4, 2, 16))

    def forward(self, x, slots, tables, lens):
        with sk.scope("layer"):
            h = ops.rms_norm(x, self.norm, 1e-6)
            qkv = ops.matmul(h, self.qkv)
            q, k, v = qkv.split(32, dim=-1)
            ops.kv_append(k.reshape(-1, 2, 16), v.reshape(-1, 2, 16), slots, self.k_cache, self.v_cache)
            o = ops.paged_attention(q.reshape(-1, 2, 16), self.k_cache, self.v_cache, tables, lens, 0.25)
            return o.reshape(-1, 32) + x


def test_kernel_ops_lower_to_graph_ops_and_write_the_caches_in_place():
    eager, compiled_model = PagedLayer(), PagedLayer()
    compiled = compile_fn(compiled_model, {**MODES["superkernel"], "frozen_parameter": True})
    tables = torch.tensor([[2, 0, 0, 0]], dtype=torch.int32)
    with torch.no_grad():
        for step in range(3):
            x = torch.randn(1, 32)
            args = (x, torch.tensor([8 + step], dtype=torch.int32), tables, torch.tensor([step + 1], dtype=torch.int32))
            want = eager(*args)
            got, ran = run_recorded(compiled, *args)
            assert torch.equal(got, want)  # the same kernels, eager or fused
    assert torch.equal(compiled_model.k_cache, eager.k_cache) and torch.equal(compiled_model.v_cache, eager.v_cache)
    graph, gargs = ran[0]
    assert graph.host_steps == []
    kernels = {graph.graph.op(i).kernel for i in range(graph.graph.num_ops)}
    assert {"rms_norm.f32", "matmul.f32", "kv_append.f32", "paged_attention.f32"} <= kernels
    assert [s.scope for s in graph.report.segments] == ["layer"]
    ref = bits(graph(*gargs)[0])
    for mode in ("eager", "graph"):
        assert torch.equal(bits(graph.with_options(MODES[mode])(*gargs)[0]), ref)


def test_a_user_signature_registers_a_new_op():
    sig = sk.KernelSignature(
        "double_add", "(Tensor a, Tensor b) -> Tensor", ("a", "b"),
        lambda a: [(torch.float32, list(a["a"].shape))], "add.f32")
    sk.register_kernel_op(sig)
    x = torch.randn(4, 8)
    assert torch.equal(ops.double_add(x, x), x + x)
    with pytest.raises(ValueError, match="another signature"):
        sk.register_kernel_op(sk.KernelSignature("double_add", "(Tensor a) -> Tensor", ("a",),
                                                 lambda a: [], "copy"))
