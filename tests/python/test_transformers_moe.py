"""transformers' Qwen3MoeForCausalLM (tiny random config, f32) compiled with the superkernel
backend: the same greedy ids as torch eager over 16 steps with a static KV cache, logits within
1e-4, the decode step bit-identical in the three modes. The expert dispatch transformers writes
(sort, histc, its own grouped_mm op) runs as host steps, named with their reasons."""

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from transformers_decode import check_model


def test_qwen3_moe_greedy_ids_equal_eager():
    torch.manual_seed(0)
    config = Qwen3MoeConfig(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                            num_experts=8, num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=16, max_position_embeddings=128)
    model = Qwen3MoeForCausalLM(config).eval()
    prefill, decode = check_model(model, config, tol=1e-4)
    reasons = [r for _, nodes in decode.host_steps for _, _, r in nodes]
    assert reasons and all(r for r in reasons)  # every host step says why
    text = decode.explain()
    assert "grouped_mm_fallback" in text and "HOST_OP" in text
