#!/usr/bin/env python3
"""Seeded Llama-style checkpoints in the published layout, for comparing runtimes on the same weights.

Writes DIR/config.json, DIR/model.safetensors (Linear, norm and embedding weights in f32, bf16
or f16: the same seeded values, rounded once) and, when the `sentencepiece` package is importable,
DIR/tokenizer.model: a SentencePiece model of vocab_size pieces (<unk>, <s>, </s>, the 256 byte
pieces, then placeholder words) that converters needing a tokenizer accept. The weights are
random: a model for timing and numerics, not for text.

    python bench/llama_checkpoint.py --hidden 1024 --layers 8 --dtype f32 /tmp/llama-1024-f32
    superkernel bench run.yaml        # model: {checkpoint: /tmp/llama-1024-f32, dtype: f16}

Sizes: intermediate_size = 2.75 x hidden (rounded to 256), head_dim 64, 4 query heads per
key/value head, vocab 32000 (--vocab), untied LM head.

--arch mixtral writes MixtralForCausalLM's published layout (block_sparse_moe.gate and
block_sparse_moe.experts.{e}.w1 / w3 / w2, --experts E of them, --active per token, each of
intermediate_size units); --arch qwen2_moe Qwen2MoeForCausalLM's (q/k/v biases,
mlp.experts.{e}.gate_proj / up_proj / down_proj of --expert-hidden units, a shared expert of
--shared-hidden units and its gate).

--arch deepseek_v2 / deepseek_v3 write DeepseekV2ForCausalLM's / DeepseekV3ForCausalLM's
published layout: MLA attention (hidden / 128 heads of qk_nope 64 + rope 32, v 64, kv_lora_rank
hidden / 4; q_proj, or with --q-lora-rank the q LoRA), a dense first layer of intermediate_size
units, then mlp.gate (V3: and its e_score_correction_bias), --experts routed experts
mlp.experts.{e}.gate_proj / up_proj / down_proj of --expert-hidden units, --active per token, and
--shared shared experts (mlp.shared_experts.*, one MLP of --shared x --expert-hidden units). V2
routes by softmax top-k; V3 by sigmoid scores within --groups-used of --groups groups.
"""
import argparse
import os
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checked_write import check_writable, replaced, write_bytes, write_json  # noqa: E402


def write_tokenizer(path, vocab_size):
    try:
        from sentencepiece import sentencepiece_model_pb2 as sp
    except ImportError:
        print("sentencepiece is not installed: no tokenizer.model written", file=sys.stderr)
        return
    m = sp.ModelProto()
    m.trainer_spec.model_type = sp.TrainerSpec.BPE
    m.trainer_spec.vocab_size = vocab_size
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id, m.trainer_spec.bos_id, m.trainer_spec.eos_id, m.trainer_spec.pad_id = 0, 1, 2, -1
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True

    def piece(text, kind, score=0.0):
        p = m.pieces.add()
        p.piece, p.type, p.score = text, kind, score

    P = sp.ModelProto.SentencePiece
    piece("<unk>", P.UNKNOWN)
    piece("<s>", P.CONTROL)
    piece("</s>", P.CONTROL)
    for b in range(256):
        piece("<0x%02X>" % b, P.BYTE)
    for i in range(vocab_size - len(m.pieces)):
        piece("\u2581w%d" % i, P.NORMAL, -float(i))
    write_bytes(path, m.SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="checkpoint directory to write")
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arch", choices=["llama", "mixtral", "qwen2_moe", "deepseek_v2", "deepseek_v3"],
                    default="llama")
    ap.add_argument("--experts", type=int, default=8, help="routed experts per MoE layer")
    ap.add_argument("--active", type=int, default=2, help="experts per token")
    ap.add_argument("--expert-hidden", type=int, default=0, help="qwen2_moe: an expert's units (default F / 4)")
    ap.add_argument("--shared-hidden", type=int, default=0, help="qwen2_moe: the shared expert's units (default F)")
    ap.add_argument("--shared", type=int, default=2, help="deepseek: shared experts")
    ap.add_argument("--q-lora-rank", type=int, default=0, help="deepseek: the q LoRA rank (0: q_proj)")
    ap.add_argument("--groups", type=int, default=8, help="deepseek_v3: n_group")
    ap.add_argument("--groups-used", type=int, default=4, help="deepseek_v3: topk_group")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    check_writable(os.path.join(a.out, "model.safetensors"))  # before the weights are drawn

    D = a.hidden
    F = (int(2.75 * D) + 255) // 256 * 256
    Dh = 64
    Hq = D // Dh
    Hkv = max(1, Hq // 4)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[a.dtype]
    gen = torch.Generator().manual_seed(a.seed)

    def uniform(shape, bound, center=0.0):
        return (torch.rand(shape, generator=gen) * 2 - 1) * bound + center

    tensors = {"model.embed_tokens.weight": uniform((a.vocab, D), 1.0)}
    Fe = a.expert_hidden or F // 4
    Fs = a.shared_hidden or F
    deepseek = a.arch.startswith("deepseek")
    # DeepSeek's MLA: heads of qk_nope 64 + rope 32 and v 64 over a latent of hidden / 4.
    H, nope, rope, v, R = D // 128, 64, 32, 64, D // 4
    for i in range(a.layers):
        p = "model.layers.%d." % i
        shapes = {
            "self_attn.q_proj": (Hq * Dh, D),
            "self_attn.k_proj": (Hkv * Dh, D),
            "self_attn.v_proj": (Hkv * Dh, D),
            "self_attn.o_proj": (D, Hq * Dh),
        }
        if deepseek:
            shapes = {"self_attn.kv_a_proj_with_mqa": (R + rope, D), "self_attn.kv_b_proj": (H * (nope + v), R),
                      "self_attn.o_proj": (D, H * v)}
            if a.q_lora_rank:
                shapes.update({"self_attn.q_a_proj": (a.q_lora_rank, D),
                               "self_attn.q_b_proj": (H * (nope + rope), a.q_lora_rank)})
                tensors[p + "self_attn.q_a_layernorm.weight"] = uniform((a.q_lora_rank,), 1 / 16, 1.0)
            else:
                shapes["self_attn.q_proj"] = (H * (nope + rope), D)
            tensors[p + "self_attn.kv_a_layernorm.weight"] = uniform((R,), 1 / 16, 1.0)
            if i == 0:  # first_k_dense_replace = 1
                shapes.update({"mlp.gate_proj": (F, D), "mlp.up_proj": (F, D), "mlp.down_proj": (D, F)})
            else:
                shapes["mlp.gate"] = (a.experts, D)
                for e in range(a.experts):
                    q = "mlp.experts.%d." % e
                    shapes.update({q + "gate_proj": (Fe, D), q + "up_proj": (Fe, D), q + "down_proj": (D, Fe)})
                Fsh = a.shared * Fe
                shapes.update({"mlp.shared_experts.gate_proj": (Fsh, D), "mlp.shared_experts.up_proj": (Fsh, D),
                               "mlp.shared_experts.down_proj": (D, Fsh)})
                if a.arch == "deepseek_v3":
                    tensors[p + "mlp.gate.e_score_correction_bias"] = uniform((a.experts,), 0.05)
        elif a.arch == "llama":
            shapes.update({"mlp.gate_proj": (F, D), "mlp.up_proj": (F, D), "mlp.down_proj": (D, F)})
        elif a.arch == "mixtral":
            shapes["block_sparse_moe.gate"] = (a.experts, D)
            for e in range(a.experts):
                q = "block_sparse_moe.experts.%d." % e
                shapes.update({q + "w1": (F, D), q + "w3": (F, D), q + "w2": (D, F)})
        else:
            shapes["mlp.gate"] = (a.experts, D)
            for e in range(a.experts):
                q = "mlp.experts.%d." % e
                shapes.update({q + "gate_proj": (Fe, D), q + "up_proj": (Fe, D), q + "down_proj": (D, Fe)})
            shapes.update({"mlp.shared_expert.gate_proj": (Fs, D), "mlp.shared_expert.up_proj": (Fs, D),
                           "mlp.shared_expert.down_proj": (D, Fs), "mlp.shared_expert_gate": (1, D)})
        for name, shape in shapes.items():
            tensors[p + name + ".weight"] = uniform(shape, shape[1] ** -0.5)
        if a.arch == "qwen2_moe":
            for name, n in (("q_proj", Hq * Dh), ("k_proj", Hkv * Dh), ("v_proj", Hkv * Dh)):
                tensors[p + "self_attn." + name + ".bias"] = uniform((n,), 0.1)
        tensors[p + "input_layernorm.weight"] = uniform((D,), 1 / 16, 1.0)
        tensors[p + "post_attention_layernorm.weight"] = uniform((D,), 1 / 16, 1.0)
    tensors["model.norm.weight"] = uniform((D,), 1 / 16, 1.0)
    tensors["lm_head.weight"] = uniform((a.vocab, D), D**-0.5)
    tensors = {k: v.to(dtype).contiguous() for k, v in tensors.items()}

    # The config last: a directory with a config.json holds a whole checkpoint.
    with replaced(os.path.join(a.out, "model.safetensors")) as tmp:
        save_file(tensors, tmp, metadata={"format": "pt"})
    write_tokenizer(os.path.join(a.out, "tokenizer.model"), a.vocab)
    config = {
        "architectures": [{"llama": "LlamaForCausalLM", "mixtral": "MixtralForCausalLM",
                           "qwen2_moe": "Qwen2MoeForCausalLM", "deepseek_v2": "DeepseekV2ForCausalLM",
                           "deepseek_v3": "DeepseekV3ForCausalLM"}[a.arch]],
        "model_type": a.arch,
        "vocab_size": a.vocab,
        "hidden_size": D,
        "intermediate_size": F,
        "num_hidden_layers": a.layers,
        "num_attention_heads": Hq,
        "num_key_value_heads": Hkv,
        "head_dim": Dh,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[a.dtype],
    }
    if a.arch == "mixtral":
        config.update(num_local_experts=a.experts, num_experts_per_tok=a.active, sliding_window=None)
    if a.arch == "qwen2_moe":
        config.update(num_experts=a.experts, num_experts_per_tok=a.active, moe_intermediate_size=Fe,
                      shared_expert_intermediate_size=Fs, norm_topk_prob=False, decoder_sparse_step=1,
                      mlp_only_layers=[], use_sliding_window=False, qkv_bias=True)
    if deepseek:
        for key in ("num_key_value_heads", "head_dim"):
            del config[key]
        config.update(num_attention_heads=H, num_key_value_heads=H, kv_lora_rank=R,
                      q_lora_rank=a.q_lora_rank or None, qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=v,
                      moe_intermediate_size=Fe, n_routed_experts=a.experts, n_shared_experts=a.shared,
                      num_experts_per_tok=a.active, first_k_dense_replace=1, rms_norm_eps=1e-6)
        if a.arch == "deepseek_v2":
            config.update(topk_method="greedy", routed_scaling_factor=1.0, norm_topk_prob=False)
        else:
            config.update(n_group=a.groups, topk_group=a.groups_used, routed_scaling_factor=2.5, norm_topk_prob=True,
                          scoring_func="sigmoid", topk_method="noaux_tc", rope_interleave=True)
    write_json(os.path.join(a.out, "config.json"), config)
    params = sum(t.numel() for t in tensors.values())
    print("%s: %s, %d layers, hidden %d, intermediate %d, %.1f M parameters, %s" % (
        a.out, a.arch, a.layers, D, F, params / 1e6, a.dtype))


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        sys.exit(f"llama_checkpoint: {e}")
