"""transformers' LlamaForCausalLM (tiny random config, f32) compiled with the superkernel
backend: the same greedy ids as torch eager over 16 steps with a static KV cache, logits within
1e-4, the decode step bit-identical in the three modes, and every op of it run by a kernel."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from conftest import compile_fn, run_recorded

from transformers_decode import check_model, check_replay


def test_llama_greedy_ids_equal_eager():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = LlamaForCausalLM(config).eval()
    prefill, decode = check_model(model, config, tol=1e-4)
    assert decode.host_steps == [], decode.explain()
    # transformers' rotary embedding (x * cos + rotate_half(x) * sin) is one rope op per q and k.
    kernels = [decode.graph.op(i).kernel for i in range(decode.graph.num_ops)]
    assert kernels.count("rope.f32") == 2 * config.num_hidden_layers, decode.explain()
    assert f"rope x{2 * config.num_hidden_layers}" in decode.rewrites


def rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)


@pytest.mark.parametrize("doubled", [True, False])
def test_rotary_pattern_only_where_both_halves_match(doubled):
    """The rope rewrite needs cos and sin of cat([f, f]) (each row's halves equal, as the rope
    kernel's table assumes); with cat([f, g]) the ops stay elementwise. Both within 1e-5 of torch."""
    torch.manual_seed(3)
    x = torch.randn(1, 3, 4, 8).transpose(1, 2)  # [B, H, T, D] from [B, T, H, D]
    f, g = torch.randn(1, 3, 4), torch.randn(1, 3, 4)

    def fn(x, f, g):
        emb = torch.cat((f, f if doubled else g), dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
        return x * cos + rotate_half(x) * sin

    compiled = compile_fn(fn, {"frozen_parameter": True})
    with torch.no_grad():
        out, ran = run_recorded(compiled, x, f, g)
    torch.testing.assert_close(out, fn(x, f, g), rtol=1e-5, atol=1e-5)
    kernels = {ran[0][0].graph.op(i).kernel for i in range(ran[0][0].graph.num_ops)}
    assert ("rope.f32" in kernels) == doubled, ran[0][0].explain()


def test_llama_decode_captured_and_replayed():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    check_replay(LlamaForCausalLM(config).eval(), config)
