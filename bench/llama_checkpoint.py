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
    ap.add_argument("--arch", choices=["llama", "mixtral", "qwen2_moe"], default="llama")
    ap.add_argument("--experts", type=int, default=8, help="routed experts per MoE layer")
    ap.add_argument("--active", type=int, default=2, help="experts per token")
    ap.add_argument("--expert-hidden", type=int, default=0, help="qwen2_moe: an expert's units (default F / 4)")
    ap.add_argument("--shared-hidden", type=int, default=0, help="qwen2_moe: the shared expert's units (default F)")
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
    for i in range(a.layers):
        p = "model.layers.%d." % i
        shapes = {
            "self_attn.q_proj": (Hq * Dh, D),
            "self_attn.k_proj": (Hkv * Dh, D),
            "self_attn.v_proj": (Hkv * Dh, D),
            "self_attn.o_proj": (D, Hq * Dh),
        }
        if a.arch == "llama":
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
                           "qwen2_moe": "Qwen2MoeForCausalLM"}[a.arch]],
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
    write_json(os.path.join(a.out, "config.json"), config)
    params = sum(t.numel() for t in tensors.values())
    print("%s: %s, %d layers, hidden %d, intermediate %d, %.1f M parameters, %s" % (
        a.out, a.arch, a.layers, D, F, params / 1e6, a.dtype))


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        sys.exit(f"llama_checkpoint: {e}")
