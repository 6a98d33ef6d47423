"""transformers' Qwen3MoeForCausalLM (tiny random config, f32, the "batched_mm" experts
implementation) compiled with the superkernel backend: the same greedy ids as torch eager over 16
steps with a static KV cache, logits within 1e-4, the decode step bit-identical in the three
modes, and every op of it (router top-k, expert weight gathers, batched products) run by a
kernel. The prompt goes token by token through the decode graph."""

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from transformers_decode import check_model


def test_qwen3_moe_greedy_ids_equal_eager():
    torch.manual_seed(0)
    config = Qwen3MoeConfig(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                            num_experts=8, num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=16, max_position_embeddings=128)
    config._experts_implementation = "batched_mm"
    model = Qwen3MoeForCausalLM(config).eval()
    first, decode = check_model(model, config, tol=1e-4, prompt_at_once=False)
    assert decode.host_steps == [], decode.explain()
    kernels = {decode.graph.op(i).kernel for i in range(decode.graph.num_ops)}
    assert {"tensor.topk", "tensor.index_select", "tensor.batched_mm"} <= kernels
