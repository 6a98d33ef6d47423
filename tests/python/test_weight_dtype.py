"""The backend option weight_dtype: a model's frozen linear weights converted or quantised once at
compile time (python/superkernel/_weight_dtype.py). Each choice runs its kernel for every
selected projection, gives the logits of the format's definition (computed here in torch from
the definitions in include/superkernel/nn.h and weights.h, not through the library), the same
bits in the three modes, and leaves the torch parameters as they were; include / exclude pick
the parameters; bad values are errors naming the option or the parameter.
superkernel.quantization_error reports the deviation from eager."""

import copy
from unittest import mock

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

import superkernel as sk
from conftest import MODES, bits, compile_fn

CONFIG = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128)
IDS = torch.tensor([[1, 5, 9, 3, 7, 2]])
GROUP = 32  # the hidden size is 64: int4 groups of 32
KERNEL = {"f32": "matmul.f32", "bf16": "matmul.bf16", "f16": "matmul.f16", "w8a8": "matmul.w8a8_dyn",
          "w4a8": "matmul.w4a8_dyn", "w4": "matmul.w4"}
LINEARS = 7 * CONFIG["num_hidden_layers"] + 1  # q, k, v, o, gate, up, down per layer, and the head


def _model(dtype=torch.float32):
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**CONFIG)).to(dtype).eval()


def _options(weight_dtype, **more):
    return {**MODES["superkernel"], "frozen_parameter": True, "weight_dtype": weight_dtype, "int4_group": GROUP,
            **more}


# ---- the formats' definitions, in torch ----

def _round_f16(s):
    return s.to(torch.float16).to(torch.float32)


def _int8_rows(x):
    """Per-row symmetric int8: s = max|x| / 127, q = round(x / s); x as q * s."""
    s = x.abs().amax(-1, keepdim=True) / 127
    s = torch.where(s == 0, torch.ones_like(s), s)
    return torch.clamp(torch.round(x / s), -127, 127) * s


def _int4_groups(w):
    """Asymmetric 4-bit groups of GROUP along the input: s = (max - min) / 15 over the group and 0,
    rounded to f16; z = round(-min / s); q = clamp(round(w / s) + z, 0, 15); w as (q - z) * s."""
    g = w.reshape(w.shape[0], -1, GROUP)
    lo = torch.minimum(g.amin(-1, keepdim=True), torch.zeros(()))
    hi = torch.maximum(g.amax(-1, keepdim=True), torch.zeros(()))
    s = _round_f16((hi - lo) / 15)
    s = torch.where(s == 0, torch.ones_like(s), s)
    z = torch.round(-lo / s)
    q = torch.clamp(torch.round(g / s) + z, 0, 15)
    return ((q - z) * s).reshape(w.shape)


def _definition(weight_dtype, x, w):
    """x [..., K] (f32) times w [N, K]^T as the weight_dtype defines it."""
    w = w.float()
    if weight_dtype in ("f32", "bf16", "f16"):
        w = w.to(getattr(torch, {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[weight_dtype])).float()
    elif weight_dtype == "w8a8":
        x, w = _int8_rows(x), _int8_rows(w)
    else:
        w = _int4_groups(w)
        if weight_dtype == "w4a8":
            x = _int8_rows(x)
    return x.double() @ w.double().T


def _reference_logits(model, weight_dtype, skip=()):
    ref = copy.deepcopy(model)
    for name, mod in ref.named_modules():
        if isinstance(mod, torch.nn.Linear) and not any(s in name for s in skip):
            def forward(x, w=mod.weight):
                return _definition(weight_dtype, x.float(), w).to(x.dtype)
            mod.forward = forward
    with torch.no_grad():
        return ref(IDS).logits.float()


def _run(model, options):
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="superkernel", options=options, fullgraph=True, dynamic=False)
    with torch.no_grad(), sk.recording(snapshot=True) as ran:
        logits = compiled(IDS).logits.float()
    graph, args = ran[-1]
    kernels = [graph.graph.op(i).kernel for i in range(graph.graph.num_ops)]
    return logits, graph, args, kernels


def _same_bits_in_every_mode(graph, args):
    outs = {}
    for mode in MODES:
        replay = [a.clone() if isinstance(a, torch.Tensor) and i not in graph.frozen_inputs else a
                  for i, a in enumerate(args)]
        outs[mode] = [bits(t) for t in graph.with_options(MODES[mode])(*replay) if isinstance(t, torch.Tensor)]
    for mode in ("eager", "graph"):
        assert all(torch.equal(a, b) for a, b in zip(outs[mode], outs["superkernel"])), mode


@pytest.mark.parametrize("weight_dtype", list(KERNEL))
def test_each_weight_dtype_runs_its_kernel_and_gives_its_definition(weight_dtype):
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    logits, graph, args, kernels = _run(model, _options(weight_dtype))
    assert kernels.count(KERNEL[weight_dtype]) == LINEARS, graph.explain()
    assert f"weight_dtype {weight_dtype} x{LINEARS}" in graph.explain()
    want = _reference_logits(model, weight_dtype)
    # Summation order, and an activation's int8 rounding falling the other way at a tie.
    torch.testing.assert_close(logits, want, rtol=0, atol=2e-3 if weight_dtype in ("w8a8", "w4a8") else 1e-4)
    _same_bits_in_every_mode(graph, args)
    # The torch parameters are untouched: the converted copies live in the compiled graph.
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_a_bf16_model_with_w8a8_weights():
    model = _model(torch.bfloat16)
    logits, graph, args, kernels = _run(model, _options("w8a8"))
    assert kernels.count("matmul.w8a8_dyn") == LINEARS
    assert "matmul.bf16" not in kernels
    want = _reference_logits(model, "w8a8")
    torch.testing.assert_close(logits, want, rtol=0, atol=5e-2)  # bf16 activations between the layers
    _same_bits_in_every_mode(graph, args)


def _moe_model():
    config = Qwen3MoeConfig(**CONFIG, moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2, head_dim=16)
    config._experts_implementation = "batched_mm"
    torch.manual_seed(0)
    return Qwen3MoeForCausalLM(config).eval()


def test_packed_experts_run_on_the_grouped_kernels():
    """Qwen3-MoE's packed experts [E, N, K] (gate_up_proj, down_proj) are quantised with the
    linear weights: grouped_matmul.w8a8_dyn, each expert's rows as a linear weight's. The reference
    is transformers' own expert loop (the "eager" implementation) with every F.linear (projections,
    router, each expert) computed by the w8a8 definition."""
    model = _moe_model()
    layers = CONFIG["num_hidden_layers"]
    logits, graph, args, kernels = _run(model, _options("w8a8"))
    assert kernels.count("grouped_matmul.w8a8_dyn") == 2 * layers, graph.explain()
    assert "tensor.batched_mm" not in kernels and "grouped_matmul.f32" not in kernels
    ref = copy.deepcopy(model)
    ref.config._experts_implementation = "eager"
    for mod in ref.modules():
        if hasattr(mod, "config"):
            mod.config._experts_implementation = "eager"

    def linear(x, w, b=None):
        y = _definition("w8a8", x.float(), w).to(x.dtype)
        return y if b is None else y + b

    with torch.no_grad(), mock.patch("torch.nn.functional.linear", linear):
        want = ref(IDS).logits.float()
    torch.testing.assert_close(logits, want, rtol=0, atol=2e-3)
    _same_bits_in_every_mode(graph, args)
    # No grouped 4-bit kernel: w4a8 refuses the experts by name unless they are excluded.
    with pytest.raises(Exception, match=r"experts\.gate_up_proj.*no grouped 4-bit"):
        _run(model, _options("w4a8"))
    _, graph, _, kernels = _run(model, _options("w4a8", weight_dtype_exclude=["experts"]))
    assert kernels.count("grouped_matmul.f32") == 2 * layers
    assert kernels.count("matmul.w4a8_dyn") == 5 * layers + 1  # q, k, v, o, the router; the head


def test_include_and_exclude_pick_the_parameters():
    model = _model()
    _, graph, _, kernels = _run(model, _options("w8a8", weight_dtype_exclude="lm_head"))
    assert kernels.count("matmul.w8a8_dyn") == LINEARS - 1
    assert kernels.count("matmul.f32") == 1  # the head, by the f32 pattern
    _, graph, _, kernels = _run(model, _options("w4", weight_dtype_include=[r"mlp\.(gate|up)_proj"]))
    assert kernels.count("matmul.w4") == 2 * CONFIG["num_hidden_layers"]
    assert kernels.count("matmul.f32") == LINEARS - 2 * CONFIG["num_hidden_layers"]


def test_bad_weight_options_are_errors_naming_them():
    with pytest.raises(sk.InvalidArgumentError, match="weight_dtype.*'int3'"):
        sk.backend({"frozen_parameter": True, "weight_dtype": "int3"})
    with pytest.raises(sk.InvalidArgumentError, match="frozen_parameter"):
        sk.backend({"weight_dtype": "w8a8"})
    with pytest.raises(sk.InvalidArgumentError, match="int4_group"):
        sk.backend({"frozen_parameter": True, "weight_dtype": "w4", "int4_group": 48})
    with pytest.raises(sk.InvalidArgumentError, match="weight_dtype_exclude.*needs option 'weight_dtype'"):
        sk.backend({"frozen_parameter": True, "weight_dtype_exclude": ["lm_head"]})
    with pytest.raises(sk.InvalidArgumentError, match="weight_dtype_include.*not a regular expression"):
        sk.backend({"frozen_parameter": True, "weight_dtype": "w8a8", "weight_dtype_include": ["("]})
    with pytest.raises(sk.InvalidArgumentError, match="int4_symmetric"):
        sk.backend({"frozen_parameter": True, "weight_dtype": "w4", "int4_symmetric": 1})
    # A group that does not divide a projection's input names the parameter (at the first call).
    compiled = compile_fn(_model(), _options("w4a8", int4_group=128))
    with pytest.raises(Exception, match=r"q_proj.*int4_group 128"):
        with torch.no_grad():
            compiled(IDS)


def test_quantization_error_reports_the_deviation_from_eager():
    model = _model()
    torch._dynamo.reset()
    exact = sk.quantization_error(model, IDS, options=_options("f32"))
    assert exact["max_abs"] < 1e-5 and exact["argmax_agreement"] == 1.0
    torch._dynamo.reset()
    w8 = sk.quantization_error(model, IDS, options=_options("w8a8"))
    torch._dynamo.reset()
    w4 = sk.quantization_error(model, IDS, options=_options("w4a8"))
    # Measured on this model: rel_l2 1.5e-2 (w8a8) and 0.12 (w4a8); 4 bits lose more than 8.
    assert 0 < w8["rel_l2"] < 0.05
    assert w8["rel_l2"] < w4["rel_l2"] < 0.3
    assert set(w4) == {"max_abs", "rel_l2", "argmax_agreement"}
    with pytest.raises(sk.InvalidArgumentError, match="options must be a dict"):
        sk.quantization_error(model, IDS, options="w8a8")
