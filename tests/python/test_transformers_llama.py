"""transformers' LlamaForCausalLM (tiny random config, f32) compiled with the superkernel
backend: the same greedy ids as torch eager over 16 steps with a static KV cache, logits within
1e-4, the decode step bit-identical in the three modes, and every op of it run by a kernel."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from transformers_decode import check_model, check_replay


def test_llama_greedy_ids_equal_eager():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = LlamaForCausalLM(config).eval()
    prefill, decode = check_model(model, config, tol=1e-4)
    assert decode.host_steps == [], decode.explain()


def test_llama_decode_captured_and_replayed():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    check_replay(LlamaForCausalLM(config).eval(), config)
