"""More decoder families from transformers (tiny random configs) in f32, bf16 and f16 through the
superkernel backend: Qwen2 (q/k/v biases: addmm), Mistral, Granite (its embedding, residual,
attention and logits multipliers), Phi-3 (fused qkv and gate_up projections, split in the graph)
Gemma (the (1 + w) norm, GELU-tanh, a scaled embedding), and the LayerNorm families OLMo
(LayerNorm without weight or bias), StableLM (partial rotary) and Phi (one norm per layer, the
attention and MLP in parallel), whose norms run on layer_norm.f32 (_patterns.py). Each compiles into one graph per
call shape with no host step, its greedy ids follow torch eager's (parting only at a tie within
the dtype's tolerance), logits within it, the decode step gives the same bits in the three modes
(transformers_decode.check_model), and in bf16 the step captured once and replayed gives the
compiled calls' ids and logits bit for bit (check_replay). Llama, Qwen3, OLMo-2, DeepSeek-V3 and
Qwen3-MoE have their own files."""

import pytest
import torch
import transformers

from transformers_decode import check_model, check_replay

TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128)
TOL = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}
FAMILIES = {
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    # sliding_window None: the cache of 32 is shorter than any window, and a window makes transformers
    # build its mask differently per step (a recompile per step under fullgraph).
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=None)),
    "granite": ("GraniteConfig", "GraniteForCausalLM", {}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(pad_token_id=0)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(head_dim=16)),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", {}),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {}),
    "phi": ("PhiConfig", "PhiForCausalLM", {}),
}
# layer_norm.f32 per model: two per layer and the final one; Phi's layers have one.
LAYER_NORMS = {"olmo": 5, "stablelm": 5, "phi": 3}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def _model(family, dtype):
    config_cls, model_cls, extra = FAMILIES[family]
    config = getattr(transformers, config_cls)(**TINY, **extra)
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(config).to(dtype).eval(), config


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_compiles_and_follows_eager(family, dtype):
    model, config = _model(family, DTYPES[dtype])
    _, decode = check_model(model, config, tol=TOL[DTYPES[dtype]])
    assert decode.host_steps == [], decode.explain()
    kernels = [decode.graph.op(i).kernel for i in range(decode.graph.num_ops)]
    assert kernels.count("layer_norm.f32") == LAYER_NORMS.get(family, 0), decode.explain()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_bf16_decode_captured_and_replayed(family):
    model, config = _model(family, torch.bfloat16)
    check_replay(model, config)
