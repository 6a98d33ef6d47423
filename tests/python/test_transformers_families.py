"""transformers decoder families (tiny random configs) in f32, bf16 and f16 through the superkernel
backend. The dense ones: Llama, Qwen2 (q/k/v biases: addmm), Qwen3 (q/k norms), OLMo-2 (its q/k
norms multiply a 16-bit weight by an f32 activation), Mistral, Granite (its embedding, residual,
attention and logits multipliers), Phi-3 (fused qkv and gate_up projections, split in the graph),
Gemma (the (1 + w) norm, GELU-tanh, a scaled embedding), and the LayerNorm families OLMo (LayerNorm
without weight or bias), StableLM (partial rotary) and Phi (one norm per layer, the attention and
MLP in parallel), whose norms run on layer_norm.f32 (_patterns.py). The MoE ones, with the
"batched_mm" experts implementation: Qwen3-MoE (softmax top-k) and DeepSeek-V3 (MLA with its
interleaved RoPE on strided slices, the key assembled by slice_scatter, grouped routing through
scatter, shared experts).

Each compiles into one graph per call shape with no host step (fullgraph: no graph break), its
greedy ids follow torch eager's over 16 steps with a static cache (parting only at a tie within the
dtype's tolerance), logits within it, the decode step gives the same bits in the three modes
(transformers_decode.check_model); in bf16 the step captured once and replayed gives the compiled
calls' ids and logits bit for bit (check_replay); in bf16, with one fusion scope per decoder layer
(superkernel.scope_modules), the SCOPED families still compile with no graph break and no host
step, each layer a segment of its own; and Llama and Qwen3 in bf16 and f16 run their projections,
norms, SwiGLU and RoPE on the 16-bit matmuls and the library's fused kernels."""

import pytest
import torch
import transformers

import superkernel as sk
from transformers_decode import check_model

TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128)
TOL = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}
MOE = dict(moe_intermediate_size=32, num_experts_per_tok=2)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=16)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {}),
    # sliding_window None: the cache of 32 is shorter than any window, and a window makes transformers
    # build its mask differently per step (a recompile per step under fullgraph).
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=None)),
    "granite": ("GraniteConfig", "GraniteForCausalLM", {}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(pad_token_id=0)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(head_dim=16)),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {}),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {}),
    "phi": ("PhiConfig", "PhiForCausalLM", {}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(**MOE, num_experts=8, head_dim=16)),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                    dict(**MOE, num_key_value_heads=4, n_routed_experts=8, n_shared_experts=1,
                         first_k_dense_replace=1, n_group=2, topk_group=1, kv_lora_rank=16, q_lora_rank=24,
                         qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16)),
}
# layer_norm.f32 per model: two per layer and the final one; Phi's layers have one.
LAYER_NORMS = {"olmo": 5, "stablelm": 5, "phi": 3}
# The MoE blocks' kernels: router top-k, rows grouped by expert, each expert's weights read in place.
MOE_KERNELS = {"tensor.topk", "moe_dispatch.f32"}
GROUPED = {"f32": "grouped_matmul.f32", "bf16": "grouped_matmul.bf16", "f16": "grouped_matmul.f16"}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def _model(family, dtype):
    config_cls, model_cls, extra = FAMILIES[family]
    config = getattr(transformers, config_cls)(**{**TINY, **extra})
    if family in ("qwen3_moe", "deepseek_v3"):
        config._experts_implementation = "batched_mm"
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(config).to(dtype).eval(), config


def _kernels(graph):
    return [graph.graph.op(i).kernel for i in range(graph.graph.num_ops)]


# The families whose bf16 run puts one fusion scope on each decoder layer.
SCOPED = {"llama", "qwen3", "olmo2", "qwen3_moe", "deepseek_v3"}


def _check_16_bit_kernels(family, config, kernels, suffix):
    """Llama and Qwen3 in the 16-bit dtypes run every projection on matmul.<dtype> and their norms,
    SwiGLU and RoPE on the library's kernels (python/superkernel/_patterns.py), not element-wise
    chains."""
    layers = config.num_hidden_layers
    assert "tensor.batched_mm" not in kernels
    # q, k, v, o, gate, up, down per layer and the head.
    assert kernels.count(f"matmul.{suffix}") == 7 * layers + 1
    # Two norms per layer and the final one; Qwen3 also normalises q and k per head.
    assert kernels.count("rms_norm.f32") == (2 + (2 if family == "qwen3" else 0)) * layers + 1
    assert kernels.count("silu_mul.f32") == layers
    assert kernels.count("rope.f32") == 2 * layers


# One compile per case (compiling is most of the time): the bf16 case also replays the captured step
# and, for SCOPED, compiles with a scope per layer.
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_compiles_and_follows_eager(family, dtype):
    model, config = _model(family, DTYPES[dtype])
    scoped = dtype == "bf16" and family in SCOPED
    if scoped:
        assert sk.scope_modules(model, r"model\.layers\.\d+") == ["model.layers.0", "model.layers.1"]
    _, decode = check_model(model, config, tol=TOL[DTYPES[dtype]], replay=dtype == "bf16")
    assert decode.host_steps == [], decode.explain()
    kernels = _kernels(decode)
    assert kernels.count("layer_norm.f32") == LAYER_NORMS.get(family, 0), decode.explain()
    if scoped:
        scopes = {s.scope for s in decode.report.segments}
        assert {"model.layers.0", "model.layers.1"} <= scopes, decode.explain()
    if family in ("llama", "qwen3") and dtype != "f32":
        _check_16_bit_kernels(family, config, kernels, dtype)
    if family in ("qwen3_moe", "deepseek_v3"):
        assert MOE_KERNELS <= set(kernels), decode.explain()
        # gate_up and down per MoE layer (DeepSeek-V3's first layer is dense); no weight copies.
        assert kernels.count(GROUPED[dtype]) == 2 * (config.num_hidden_layers - getattr(
            config, "first_k_dense_replace", 0)), decode.explain()
        assert "tensor.batched_mm" not in kernels, decode.explain()
