"""transformers models in the half dtypes they ship in run on the 16-bit fast paths (every family
in every dtype is in test_transformers_families.py). Llama and Qwen3 in bf16 and f16: their projections on matmul.bf16 / matmul.f16, the norms, SwiGLU and RoPE on
the library's kernels (python/superkernel/_patterns.py), not element-wise chains."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from transformers_decode import check_model

# Logits of a tiny random model are O(1); bf16 keeps 8 bits, so a few of its ulps.
TOL = {torch.bfloat16: 5e-2, torch.float16: 1e-2}
# The sizes every model here shares.
TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=128)


def _model(cls, config, dtype):
    torch.manual_seed(0)
    return cls(config).to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_half_models_run_on_the_16_bit_kernels(arch, dtype):
    cls, config = {
        "llama": (LlamaForCausalLM, LlamaConfig(**TINY, num_key_value_heads=2)),
        "qwen3": (Qwen3ForCausalLM, Qwen3Config(**TINY, num_key_value_heads=2, head_dim=16)),
    }[arch]
    _, decode = check_model(_model(cls, config, dtype), config, tol=TOL[dtype])
    assert decode.host_steps == [], decode.explain()
    kernels = [decode.graph.op(i).kernel for i in range(decode.graph.num_ops)]
    suffix = "bf16" if dtype == torch.bfloat16 else "f16"
    layers = config.num_hidden_layers
    # q, k, v, o, gate, up, down per layer and the head.
    assert kernels.count(f"matmul.{suffix}") == 7 * layers + 1, decode.explain()
    assert "tensor.batched_mm" not in kernels
    # Two norms per layer and the final one; Qwen3 also normalises q and k per head.
    assert kernels.count("rms_norm.f32") == (2 + (2 if arch == "qwen3" else 0)) * layers + 1
    assert kernels.count("silu_mul.f32") == layers
    assert kernels.count("rope.f32") == 2 * layers
