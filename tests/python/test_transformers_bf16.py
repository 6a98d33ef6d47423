"""transformers models in the half dtypes they ship in, through the superkernel backend: OLMo-2
(its q/k norms multiply a bf16 weight by an f32 activation) and DeepSeek-V3 (MLA, grouped
routing, the router's f32 logits) in bf16, Llama in f16. Each compiles (torch's type promotion
applied to every mixed-dtype op), greedy ids equal torch eager's over 16 steps with a static
cache, logits within the half dtype's tolerance, and the decode step gives the same bits in the
three modes (transformers_decode.check_model). Llama and Qwen3 in bf16 and f16 run on the
16-bit fast paths: their projections on matmul.bf16 / matmul.f16, the norms, SwiGLU and RoPE on
the library's kernels (python/superkernel/_patterns.py), not element-wise chains."""

import pytest
import torch
from transformers import (DeepseekV3Config, DeepseekV3ForCausalLM, LlamaConfig, LlamaForCausalLM, Olmo2Config,
                          Olmo2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

from transformers_decode import check_model

# Logits of a tiny random model are O(1); bf16 keeps 8 bits, so a few of its ulps.
TOL = {torch.bfloat16: 5e-2, torch.float16: 1e-2}
# The sizes every model here shares.
TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=128)


def _model(cls, config, dtype):
    torch.manual_seed(0)
    return cls(config).to(dtype).eval()


def test_olmo2_bf16_compiles_and_matches_eager():
    config = Olmo2Config(**TINY, num_key_value_heads=2)
    _, decode = check_model(_model(Olmo2ForCausalLM, config, torch.bfloat16), config, tol=TOL[torch.bfloat16])
    # The norms' upcasts and the weight x activation products ran as casts and kernels, not in torch.
    assert decode.host_steps == [], decode.explain()
    kernels = {decode.graph.op(i).kernel for i in range(decode.graph.num_ops)}
    assert "tensor.cast" in kernels


def test_deepseek_v3_bf16_compiles_and_matches_eager():
    config = DeepseekV3Config(**TINY, moe_intermediate_size=32, num_key_value_heads=4, n_routed_experts=8,
                              num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1, n_group=2,
                              topk_group=1, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=8,
                              v_head_dim=16)
    config._experts_implementation = "batched_mm"
    check_model(_model(DeepseekV3ForCausalLM, config, torch.bfloat16), config, tol=TOL[torch.bfloat16])


def test_llama_f16_compiles_and_matches_eager():
    config = LlamaConfig(**TINY, num_key_value_heads=2)
    _, decode = check_model(_model(LlamaForCausalLM, config, torch.float16), config, tol=TOL[torch.float16])
    assert decode.host_steps == [], decode.explain()


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
