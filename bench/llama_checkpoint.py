#!/usr/bin/env python3
"""Seeded Llama checkpoints in the published layout, for comparing runtimes on the same weights.

Writes DIR/config.json, DIR/model.safetensors (Linear, norm and embedding weights in f32, bf16
or f16: the same seeded values, rounded once) and, when the `sentencepiece` package is importable,
DIR/tokenizer.model: a SentencePiece model of vocab_size pieces (<unk>, <s>, </s>, the 256 byte
pieces, then placeholder words) that converters needing a tokenizer accept. The weights are
random: a model for timing and numerics, not for text.

    python bench/llama_checkpoint.py --hidden 1024 --layers 8 --dtype f32 /tmp/llama-1024-f32
    superkernel bench run.yaml        # model: {checkpoint: /tmp/llama-1024-f32, dtype: f16}

Sizes: intermediate_size = 2.75 x hidden (rounded to 256), head_dim 64, 4 query heads per
key/value head, vocab 32000 (--vocab), untied LM head.
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
    for i in range(a.layers):
        p = "model.layers.%d." % i
        shapes = {
            "self_attn.q_proj": (Hq * Dh, D),
            "self_attn.k_proj": (Hkv * Dh, D),
            "self_attn.v_proj": (Hkv * Dh, D),
            "self_attn.o_proj": (D, Hq * Dh),
            "mlp.gate_proj": (F, D),
            "mlp.up_proj": (F, D),
            "mlp.down_proj": (D, F),
        }
        for name, shape in shapes.items():
            tensors[p + name + ".weight"] = uniform(shape, shape[1] ** -0.5)
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
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
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
    write_json(os.path.join(a.out, "config.json"), config)
    params = sum(t.numel() for t in tensors.values())
    print("%s: %d layers, hidden %d, intermediate %d, %.1f M parameters, %s" % (a.out, a.layers, D, F, params / 1e6,
                                                                              a.dtype))


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        sys.exit(f"llama_checkpoint: {e}")
