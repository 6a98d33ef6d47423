#!/usr/bin/env python3
"""Independent NumPy implementation of the published LongCat-Flash and Llama definitions.

Writes a tiny checkpoint (config.json + model.safetensors, published tensor names, Linear
weights [out, in]) and the logits the published model computes on it, in float64:

    reference.py longcat|longcat-per-expert|longcat-small-lora|llama OUT_DIR

(`longcat-per-expert` stores the experts as `mlp.experts.{e}.{gate,up,down}_proj.weight`, the
other exporter layout, instead of the packed `experts.gate_up_proj` / `experts.down_proj`;
`longcat-small-lora` scales q_a_proj and kv_a_proj_with_mqa down by 2e-4, so that the mean square
their RMS norms see is ~1e-6 and the norms' eps matters.)

OUT_DIR/inputs.txt:  line 1 "B STEPS", then B lines of prompt ids, then STEPS lines of B ids
                     (the token each sequence is fed at each decode step).
OUT_DIR/expected.f32: little-endian f32 logits: every prompt token's row (sequence by sequence,
                     in prompt order), then each decode step's B rows.
OUT_DIR/margin.txt:  the smallest gap between the k-th and (k+1)-th router key over all tokens
                     (LongCat), so the test can tell a near-tie from a wrong selection.

The attention is evaluated in the plain (non-absorbed) form over the full causal history, and
LongCat's RoPE in the published interleave form, so nothing here mirrors the C++ graph.
"""
import json
import os
import struct
import sys

import numpy as np

LONGCAT = dict(vocab_size=64, hidden_size=32, num_layers=2, num_attention_heads=2, q_lora_rank=16,
               kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, ffn_hidden_size=48,
               expert_ffn_hidden_size=16, n_routed_experts=4, zero_expert_num=2, moe_topk=2,
               routed_scaling_factor=6.0, rms_norm_eps=1e-5, rope_theta=10000000.0, mla_scale_q_lora=True,
               mla_scale_kv_lora=True, model_type="longcat_flash", architectures=["LongcatFlashForCausalLM"])
LLAMA = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6, rope_theta=10000.0,
             tie_word_embeddings=False, model_type="llama", architectures=["LlamaForCausalLM"])
PROMPTS = [[3, 17, 42, 8, 25], [61, 0, 33]]
# The published q_a_layernorm and kv_a_layernorm are built without an eps argument: the RMSNorm
# default, not rms_norm_eps.
LORA_NORM_EPS = 1e-6
STEPS = [[5, 9], [12, 40], [7, 7]]


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


class Weights(dict):
    def __init__(self, seed):
        super().__init__()
        self.rng = np.random.default_rng(seed)

    def linear(self, name, out_features, in_features):
        bound = 1.0 / np.sqrt(in_features)
        self[name] = self.rng.uniform(-bound, bound, (out_features, in_features)).astype(np.float32)
        return self[name].astype(np.float64)

    def tensor(self, name, shape, low, high):
        self[name] = self.rng.uniform(low, high, shape).astype(np.float32)
        return self[name].astype(np.float64)

    def norm(self, name, dim):
        return self.tensor(name, (dim,), 0.9, 1.1)


def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def rope_cos_sin(positions, dim, theta):
    inv_freq = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    freqs = np.outer(positions, inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb), np.sin(emb)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rope(x, cos, sin):
    """x [T, H, D], cos/sin [T, D]: the rotate-halves form."""
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]


def apply_rope_interleave(x, cos, sin):
    """The published interleave form: de-interleave the pairs, then rotate halves."""
    t, h, d = x.shape
    x = x.reshape(t, h, d // 2, 2).transpose(0, 1, 3, 2).reshape(t, h, d)
    return apply_rope(x, cos, sin)


def causal_attention(q, k, v, scale):
    """q [T, H, Dk], k [T, H, Dk], v [T, H, Dv]: every token attends to itself and earlier ones."""
    t = q.shape[0]
    scores = np.einsum("thd,shd->hts", q, k) * scale
    scores = np.where(np.tril(np.ones((t, t), dtype=bool))[None], scores, -np.inf)
    return np.einsum("hts,shd->thd", softmax(scores), v)


class LongCatFlash:
    def __init__(self, cfg, seed):
        self.c = cfg
        self.w = Weights(seed)
        c, w = cfg, self.w
        d, h = c["hidden_size"], c["num_attention_heads"]
        nope, rope, vd = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        e, z, f = c["n_routed_experts"], c["zero_expert_num"], c["expert_ffn_hidden_size"]
        w.tensor("model.embed_tokens.weight", (c["vocab_size"], d), -1.0, 1.0)
        for i in range(c["num_layers"]):
            p = f"model.layers.{i}."
            for j in range(2):
                w.norm(p + f"input_layernorm.{j}.weight", d)
                w.norm(p + f"post_attention_layernorm.{j}.weight", d)
                a = p + f"self_attn.{j}."
                w.linear(a + "q_a_proj.weight", c["q_lora_rank"], d)
                w.norm(a + "q_a_layernorm.weight", c["q_lora_rank"])
                w.linear(a + "q_b_proj.weight", h * (nope + rope), c["q_lora_rank"])
                w.linear(a + "kv_a_proj_with_mqa.weight", c["kv_lora_rank"] + rope, d)
                w.norm(a + "kv_a_layernorm.weight", c["kv_lora_rank"])
                w.linear(a + "kv_b_proj.weight", h * (nope + vd), c["kv_lora_rank"])
                w.linear(a + "o_proj.weight", d, h * vd)
                m = p + f"mlps.{j}."
                w.linear(m + "gate_proj.weight", c["ffn_hidden_size"], d)
                w.linear(m + "up_proj.weight", c["ffn_hidden_size"], d)
                w.linear(m + "down_proj.weight", d, c["ffn_hidden_size"])
            w.linear(p + "mlp.router.classifier.weight", e + z, d)
            w.tensor(p + "mlp.router.e_score_correction_bias", (e + z,), -0.05, 0.05)
            w.tensor(p + "mlp.experts.gate_up_proj", (e, 2 * f, d), -d ** -0.5, d ** -0.5)
            w.tensor(p + "mlp.experts.down_proj", (e, d, f), -f ** -0.5, f ** -0.5)
        w.norm("model.norm.weight", d)
        w.linear("lm_head.weight", c["vocab_size"], d)
        self.margin = np.inf

    def g(self, name):
        return self.w[name].astype(np.float64)

    def mla(self, x, positions, p):
        c = self.c
        t, h = x.shape[0], c["num_attention_heads"]
        nope, rope, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
        eps = LORA_NORM_EPS
        q = rms_norm(x @ self.g(p + "q_a_proj.weight").T, self.g(p + "q_a_layernorm.weight"), eps)
        q = (q @ self.g(p + "q_b_proj.weight").T).reshape(t, h, nope + rope)
        q_pass, q_rot = q[..., :nope], q[..., nope:]
        ckv = x @ self.g(p + "kv_a_proj_with_mqa.weight").T
        k_pass, k_rot = ckv[:, :r], ckv[:, r:].reshape(t, 1, rope)
        k_pass = rms_norm(k_pass, self.g(p + "kv_a_layernorm.weight"), eps)
        if c["mla_scale_q_lora"]:
            s = (c["hidden_size"] / c["q_lora_rank"]) ** 0.5
            q_pass, q_rot = q_pass * s, q_rot * s
        if c["mla_scale_kv_lora"]:
            k_pass = k_pass * (c["hidden_size"] / r) ** 0.5
        kv = (k_pass @ self.g(p + "kv_b_proj.weight").T).reshape(t, h, nope + vd)
        k_nope, value = kv[..., :nope], kv[..., nope:]
        cos, sin = rope_cos_sin(positions, rope, c["rope_theta"])
        q_rot = apply_rope_interleave(q_rot, cos, sin)
        k_rot = np.broadcast_to(apply_rope_interleave(k_rot, cos, sin), (t, h, rope))
        query = np.concatenate([q_pass, q_rot], axis=-1)
        key = np.concatenate([k_nope, k_rot], axis=-1)
        out = causal_attention(query, key, value, (nope + rope) ** -0.5).reshape(t, h * vd)
        return out @ self.g(p + "o_proj.weight").T

    def mlp(self, x, p):
        return (silu(x @ self.g(p + "gate_proj.weight").T) * (x @ self.g(p + "up_proj.weight").T)) @ \
            self.g(p + "down_proj.weight").T

    def moe(self, x, p):
        c = self.c
        e, k, f = c["n_routed_experts"], c["moe_topk"], c["expert_ffn_hidden_size"]
        scores = softmax(x @ self.g(p + "router.classifier.weight").T)
        keys = scores + self.g(p + "router.e_score_correction_bias")
        order = np.argsort(-keys, axis=-1, kind="stable")
        ranked = np.take_along_axis(keys, order, axis=-1)
        self.margin = min(self.margin, float(np.min(ranked[:, k - 1] - ranked[:, k])))
        out = np.zeros_like(x)
        for t in range(x.shape[0]):
            for expert in order[t, :k]:
                weight = scores[t, expert] * c["routed_scaling_factor"]
                if expert >= e:
                    out[t] += weight * x[t]
                    continue
                gate_up = self.g(p + "experts.gate_up_proj")[expert] @ x[t]
                hidden = silu(gate_up[:f]) * gate_up[f:]
                out[t] += weight * (self.g(p + "experts.down_proj")[expert] @ hidden)
        return out

    def forward(self, ids):
        """Logits of every token of one sequence (causal)."""
        c = self.c
        eps = c["rms_norm_eps"]
        positions = np.arange(len(ids))
        x = self.g("model.embed_tokens.weight")[ids]
        for i in range(c["num_layers"]):
            p = f"model.layers.{i}."
            x = x + self.mla(rms_norm(x, self.g(p + "input_layernorm.0.weight"), eps), positions,
                             p + "self_attn.0.")
            n = rms_norm(x, self.g(p + "post_attention_layernorm.0.weight"), eps)
            shortcut = self.moe(n, p + "mlp.")
            x = x + self.mlp(n, p + "mlps.0.")
            x = x + self.mla(rms_norm(x, self.g(p + "input_layernorm.1.weight"), eps), positions,
                             p + "self_attn.1.")
            x = x + self.mlp(rms_norm(x, self.g(p + "post_attention_layernorm.1.weight"), eps), p + "mlps.1.")
            x = x + shortcut
        return rms_norm(x, self.g("model.norm.weight"), eps) @ self.g("lm_head.weight").T


class Llama:
    def __init__(self, cfg, seed):
        self.c = cfg
        self.w = Weights(seed)
        c, w = cfg, self.w
        d, hq, hkv, dh, f = (c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"],
                             c["intermediate_size"])
        w.tensor("model.embed_tokens.weight", (c["vocab_size"], d), -1.0, 1.0)
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            w.norm(p + "input_layernorm.weight", d)
            w.norm(p + "post_attention_layernorm.weight", d)
            w.linear(p + "self_attn.q_proj.weight", hq * dh, d)
            w.linear(p + "self_attn.k_proj.weight", hkv * dh, d)
            w.linear(p + "self_attn.v_proj.weight", hkv * dh, d)
            w.linear(p + "self_attn.o_proj.weight", d, hq * dh)
            w.linear(p + "mlp.gate_proj.weight", f, d)
            w.linear(p + "mlp.up_proj.weight", f, d)
            w.linear(p + "mlp.down_proj.weight", d, f)
        w.norm("model.norm.weight", d)
        w.linear("lm_head.weight", c["vocab_size"], d)
        self.margin = np.inf

    def g(self, name):
        return self.w[name].astype(np.float64)

    def forward(self, ids):
        c = self.c
        eps, t = c["rms_norm_eps"], len(ids)
        hq, hkv, dh = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        cos, sin = rope_cos_sin(np.arange(t), dh, c["rope_theta"])
        x = self.g("model.embed_tokens.weight")[ids]
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = rms_norm(x, self.g(p + "input_layernorm.weight"), eps)
            q = apply_rope((h @ self.g(p + "self_attn.q_proj.weight").T).reshape(t, hq, dh), cos, sin)
            k = apply_rope((h @ self.g(p + "self_attn.k_proj.weight").T).reshape(t, hkv, dh), cos, sin)
            v = (h @ self.g(p + "self_attn.v_proj.weight").T).reshape(t, hkv, dh)
            k, v = np.repeat(k, hq // hkv, axis=1), np.repeat(v, hq // hkv, axis=1)
            o = causal_attention(q, k, v, dh ** -0.5).reshape(t, hq * dh)
            x = x + o @ self.g(p + "self_attn.o_proj.weight").T
            h = rms_norm(x, self.g(p + "post_attention_layernorm.weight"), eps)
            x = x + (silu(h @ self.g(p + "mlp.gate_proj.weight").T) * (h @ self.g(p + "mlp.up_proj.weight").T)) @ \
                self.g(p + "mlp.down_proj.weight").T
        return rms_norm(x, self.g("model.norm.weight"), eps) @ self.g("lm_head.weight").T


def per_expert(tensors, cfg):
    """The packed expert tensors split into one Linear weight per expert and projection."""
    out, f = {}, cfg["expert_ffn_hidden_size"]
    for name, array in tensors.items():
        if name.endswith("mlp.experts.gate_up_proj"):
            prefix = name[: -len("gate_up_proj")]
            for e in range(array.shape[0]):
                out[f"{prefix}{e}.gate_proj.weight"] = array[e, :f]
                out[f"{prefix}{e}.up_proj.weight"] = array[e, f:]
        elif name.endswith("mlp.experts.down_proj"):
            prefix = name[: -len("down_proj")]
            for e in range(array.shape[0]):
                out[f"{prefix}{e}.down_proj.weight"] = array[e]
        else:
            out[name] = array
    return out


def main():
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    longcat = kind.startswith("longcat")
    cfg = LONGCAT if longcat else LLAMA
    model = (LongCatFlash if longcat else Llama)(cfg, seed=1234)
    if kind == "longcat-small-lora":
        for name in list(model.w):
            if name.endswith(("q_a_proj.weight", "kv_a_proj_with_mqa.weight")):
                model.w[name] = (model.w[name] * 2e-4).astype(np.float32)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tensors = per_expert(model.w, cfg) if kind == "longcat-per-expert" else model.w
    write_safetensors(os.path.join(out, "model.safetensors"), tensors)

    rows = []
    for b, prompt in enumerate(PROMPTS):
        rows.append(model.forward(prompt))
    history = [list(p) for p in PROMPTS]
    for step in STEPS:
        for b, token in enumerate(step):
            history[b].append(token)
            rows.append(model.forward(history[b])[-1:])
    np.concatenate(rows).astype("<f4").tofile(os.path.join(out, "expected.f32"))
    with open(os.path.join(out, "inputs.txt"), "w") as f:
        f.write(f"{len(PROMPTS)} {len(STEPS)}\n")
        for line in PROMPTS + STEPS:
            f.write(" ".join(map(str, line)) + "\n")
    with open(os.path.join(out, "margin.txt"), "w") as f:
        f.write(f"{model.margin}\n")


if __name__ == "__main__":
    main()
