"""LongCat-Flash written in PyTorch, with the fusion scopes, core limits, streams, events and
prefetch of the superkernel front-end: the model file as its users write it.

Per decoder layer, ``multi_stream_forward`` marks three super kernels through
``superkernel_scope(enable, name, options)``, so one file runs with fusion on or off:

    scope_{i}_part1       h = MLA_0(rms_norm(x)); x = x + h; n = rms_norm(x)
    scope_{i}_part2_moe   moe_out = MoE(n)        stream "moe" (multi-streams) under limit_core_num
    scope_{i}_part2_main  x = x + MLP_0(n); x = x + MLA_1(..); x = x + MLP_1(..); x = x + moe_out

plus ``scope_embed`` and ``scope_lm_head``. The fused kernels are called through
``torch.ops.superkernel.*``: the absorbed MLA over a paged latent cache (``mla_cache_append``,
``mla_attention`` / ``mla_attention_prefill``), the router with zero-computation experts
(``moe_router``), ``moe_dispatch``, ``grouped_matmul`` and ``moe_combine``. The graph is the C++
model's (src/models/longcat_flash.cc) op for op, so the logits are bit-identical to it.

    from superkernel.models import longcat_flash as lc
    model = lc.LongcatFlash.from_checkpoint("ckpt/", lc.BuildOptions(max_context=64))
    session = lc.Session(model, lc.compile_options("superkernel"))  # compile_step(model.decode, ...)
    logits = session.prefill([prompt_ids]); logits = session.decode([next_id])

``LongcatFlashAfd`` is the attention-FFN disaggregated FFN model: per layer one scope
``scope_{i}_moe`` over the router and experts, prefetching the next layer's router and expert
gate/up weights from stream ``prefetch``.
"""

from __future__ import annotations

import contextlib
import math
import types
from dataclasses import dataclass, field
from typing import Callable

import torch

from .. import _markers as sk
from .._errors import InvalidArgumentError, UnimplementedError
from ._weights import CheckpointWeights, RandomWeights, WeightSource, large_pages, skipped_by_published_definition

ops = torch.ops.superkernel

# The published q_a_layernorm and kv_a_layernorm are built without an eps argument: the RMSNorm
# default, not rms_norm_eps.
LORA_NORM_EPS = 1e-6


@dataclass
class BuildOptions:
    """The C++ models' BuildOptions (docs/MODELS.md, "Build options")."""

    weight_dtype: str = "f32"  # f32 | bf16 (Linear weights; norms, embeddings, router, absorbed MLA stay f32)
    kv_cache_dtype: str = "f32"  # f32 | bf16
    batch: int = 1
    block_size: int = 16
    max_context: int = 256
    prefill_tokens: int = 16
    enable_superkernel: bool = True  # superkernel_scope(enable, ...): the scopes are in the graph
    multi_streams: int = 0  # 1, 2: the shortcut MoE on stream "moe", fused beside the main stream
    moe_core_limit: int = 0
    prefetch: bool = False  # AFD only: prefetch the next layer's router and gate/up weights
    prefetch_core_limit: int = 0
    scope_options: Callable[[str], str] | None = field(default=None, compare=False)
    allow_unused_tensors: bool = False

    def validate(self) -> None:
        if self.weight_dtype not in ("f32", "bf16"):
            if self.weight_dtype == "w8a8":
                raise UnimplementedError("build option 'weight_dtype': w8a8 is not implemented by the Python "
                                         "LongCat-Flash model (the C++ model runs it); use f32 or bf16")
            raise InvalidArgumentError(f"build option 'weight_dtype': '{self.weight_dtype}': expected f32 or bf16")
        if self.kv_cache_dtype not in ("f32", "bf16"):
            raise InvalidArgumentError(f"build option 'kv_cache_dtype': '{self.kv_cache_dtype}': expected f32 or bf16")
        for key in ("batch", "block_size", "max_context", "prefill_tokens"):
            if getattr(self, key) <= 0:
                raise InvalidArgumentError(f"build option '{key}' must be positive, got {getattr(self, key)}")
        if self.multi_streams not in (0, 1, 2):
            raise InvalidArgumentError(f"build option 'multi_streams': expected 0, 1 or 2, got {self.multi_streams}")
        if self.prefetch and self.multi_streams == 0:
            raise InvalidArgumentError("build option 'prefetch': prefetches run on a stream of their own; set "
                                       "multi_streams to 1 or 2")
        for key in ("moe_core_limit", "prefetch_core_limit"):
            if getattr(self, key) < 0:
                raise InvalidArgumentError(f"build option '{key}' must be at least 0, got {getattr(self, key)}")

    @property
    def max_blocks(self) -> int:
        return -(-self.max_context // self.block_size)

    def scope(self, name: str) -> str:
        return self.scope_options(name) if self.scope_options else ""

    def stream_fused_scope(self, name: str) -> str:
        """The scope's options, with stream-fusion=1 added when the MoE has its own stream (so the
        branch and the main stream fuse into one super kernel) unless the options set it."""
        text = self.scope(name)
        if self.multi_streams == 0 or "stream-fusion" in text:
            return text
        return text + (":" if text else "") + "stream-fusion=1"


@dataclass
class LongcatFlashConfig:
    """The resolved config: the fields the C++ LongCatFlashConfig holds, read from a checkpoint's
    config.json by the C++ loader (the same keys applied, refused, ignored) or from a dict of
    config.json keys."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    ffn_hidden_size: int
    expert_ffn_hidden_size: int
    n_routed_experts: int
    zero_expert_num: int
    moe_topk: int
    routed_scaling_factor: float
    rms_norm_eps: float
    mla_scale_q_lora: bool
    mla_scale_kv_lora: bool
    max_position_embeddings: int
    attention_bias: bool
    tie_word_embeddings: bool
    rope_type: str
    rope_original_max_position_embeddings: int
    softmax_mscale: float
    ignored: list = field(default_factory=list)  # [(key, line, why)] of config.json
    checkpoint: str = ""
    values: dict = field(default_factory=dict)  # the dict it was made from (no checkpoint)

    @classmethod
    def load(cls, checkpoint: str = "", values: dict | None = None) -> "LongcatFlashConfig":
        from .. import cpp_models

        d = dict(cpp_models.longcat_flash_config(values or {}, checkpoint, 0))
        d.pop("rope_cos_sin")
        return cls(**d, checkpoint=checkpoint, values=dict(values or {}))

    def rope_table(self, rows: int) -> torch.Tensor:
        """The cos/sin table rope.f32 reads [rows, qk_rope_head_dim], computed as the C++ model does."""
        from .. import cpp_models

        d = cpp_models.longcat_flash_config(self.values, self.checkpoint, rows)
        return torch.frombuffer(bytearray(d["rope_cos_sin"]), dtype=torch.float32).reshape(rows, self.qk_rope_head_dim)


def rope_rows(config: LongcatFlashConfig, options: BuildOptions, phase: str) -> int:
    """Rows of the RoPE table, and the dynamic-RoPE cases a per-position table cannot express
    (the C++ model's refusals, docs/MODELS.md "RoPE")."""
    rows = options.max_context
    m = config.rope_original_max_position_embeddings
    if config.rope_type == "dynamic" and options.max_context > m:
        what = (f"rope_type 'dynamic' with max_context {options.max_context} > max_position_embeddings {m}: ")
        if options.batch > 1:
            raise UnimplementedError(what + "transformers rotates every sequence of a batch with the frequencies of "
                                     "the longest one, which a per-position table cannot express; build with batch "
                                     "1 or max_context <= max_position_embeddings")
        if phase == "prefill":
            if options.prefill_tokens > m:
                raise UnimplementedError(what + f"a prefill of {options.prefill_tokens} tokens would rotate its "
                                         "tokens with the frequencies of its full length, which a per-position table "
                                         "cannot express; prefill at most max_position_embeddings tokens")
            rows = m
    return rows


class _Loader:
    """Reads the model's weights by published name, in the dtypes the C++ model uses."""

    def __init__(self, source: WeightSource, weight_dtype: str):
        self.source = source
        self.weight_dtype = weight_dtype

    def f32(self, name, shape, init):
        return self.source.get(name, "f32", shape, init)

    def linear(self, name, shape):
        return self.source.get(name, self.weight_dtype, shape, "linear")

    def norm(self, name, n):
        return self.source.get(name, "f32", [n], "norm")

    def biased(self, module, shape, bias):
        return self.linear(module + ".weight", shape), (self.f32(module + ".bias", [shape[0]], "bias") if bias else None)

    def experts(self, packed, shape, per_expert):
        """Packed [E, N, K] when the source has it, else the per-expert tensors stacked."""
        if self.source.has(packed):
            return self.source.get(packed, self.weight_dtype, shape, "linear")
        experts, out, k = shape
        parts = []
        for e in range(experts):
            names = per_expert(e)
            if not all(self.source.has(n) for n in names):
                missing = [n for n in names if not self.source.has(n)]
                raise InvalidArgumentError(f"{self.source.describe()}: expert weights: no packed '{packed}' and no "
                                           f"per-expert '{missing[0]}'")
            rows = out // len(names)
            parts.extend(self.source.get(n, self.weight_dtype, [rows, k], "linear") for n in names)
        return large_pages(torch.cat(parts).reshape(shape))


def _param(t: torch.Tensor) -> torch.nn.Parameter:
    return torch.nn.Parameter(t, requires_grad=False)


def _linear(x, weight, bias=None):
    y = ops.matmul(x, weight)
    return y if bias is None else ops.add(y, bias)


class MLA(torch.nn.Module):
    """Multi-head latent attention, absorbed form, over this sublayer's paged latent cache."""

    def __init__(self, m: "LongcatFlash", w: _Loader, layer: int, sublayer: int):
        super().__init__()
        c, o = m.config, m.options
        p = f"model.layers.{layer}.self_attn.{sublayer}."
        D, H, R = c.hidden_size, c.num_attention_heads, c.kv_lora_rank
        nope, rope, v = c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
        self.heads, self.nope, self.rope, self.v, self.rank = H, nope, rope, v, R
        bias = c.attention_bias
        self.q_a_proj, self.q_a_bias = w.biased(p + "q_a_proj", [c.q_lora_rank, D], bias)
        self.q_a_layernorm = w.norm(p + "q_a_layernorm.weight", c.q_lora_rank)
        self.q_b_proj = w.linear(p + "q_b_proj.weight", [H * (nope + rope), c.q_lora_rank])
        self.kv_a_proj_with_mqa, self.kv_a_bias = w.biased(p + "kv_a_proj_with_mqa", [R + rope, D], bias)
        self.kv_a_layernorm = w.norm(p + "kv_a_layernorm.weight", R)
        self.kv_lora_scale = (torch.full([R], math.sqrt(D / R), dtype=torch.float32) if c.mla_scale_kv_lora else None)
        kv_b = w.f32(p + "kv_b_proj.weight", [H * (nope + v), R], "linear").reshape(H, nope + v, R)
        # W_UK per head transposed to [R, nope] maps q_nope into latent space; W_UV [v, R] maps the
        # attended latent to the value head.
        self.w_uk = kv_b[:, :nope, :].transpose(1, 2).contiguous()
        self.w_uv = kv_b[:, nope:, :].contiguous()
        self.o_proj, self.o_bias = w.biased(p + "o_proj", [D, H * v], bias)
        for name in ("q_a_proj", "q_a_bias", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_bias",
                     "kv_a_layernorm", "kv_lora_scale", "w_uk", "w_uv", "o_proj", "o_bias"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, _param(t))
        cache_dtype = torch.float32 if o.kv_cache_dtype == "f32" else torch.bfloat16
        self.register_buffer("latent_cache", torch.zeros([o.batch * o.max_blocks, o.block_size, R + rope],
                                                         dtype=cache_dtype), persistent=False)
        # LongCat scales q_nope and q_rope by sqrt(hidden / q_lora_rank): the same factor on every
        # score, folded into the softmax scale (as yarn's mscale_all_dim factor is).
        scale = c.softmax_mscale / math.sqrt(nope + rope)
        if c.mla_scale_q_lora:
            scale *= math.sqrt(D / c.q_lora_rank)
        self.scale = float(torch.tensor(scale, dtype=torch.float32))

    def forward(self, x, s: "StepInputs", cos_sin):
        T = x.shape[0]
        H, nope, rope, v, R = self.heads, self.nope, self.rope, self.v, self.rank
        q_a = _linear(x, self.q_a_proj, self.q_a_bias)
        q_a = ops.rms_norm(q_a, self.q_a_layernorm, LORA_NORM_EPS)
        q = ops.matmul(q_a, self.q_b_proj).view(T, H, nope + rope)
        q_nope = q[:, :, :nope]
        q_pe = ops.rope(q[:, :, nope:], s.positions, cos_sin, rope, rope, False)
        kv_a = _linear(x, self.kv_a_proj_with_mqa, self.kv_a_bias)
        c_kv = ops.rms_norm(kv_a[:, :R], self.kv_a_layernorm, LORA_NORM_EPS)
        if self.kv_lora_scale is not None:
            c_kv = ops.mul(c_kv, self.kv_lora_scale)
        k_pe = ops.rope(kv_a[:, R:], s.positions, cos_sin, rope, rope, False)
        ops.mla_cache_append(c_kv, k_pe, s.slot_mapping, self.latent_cache)
        q_latent = ops.batched_matmul(q_nope.transpose(0, 1), self.w_uk).transpose(0, 1)
        if s.context_lens is not None:
            latent = ops.mla_attention(q_latent, q_pe, self.latent_cache, s.block_tables, s.context_lens, self.scale)
        else:
            latent = ops.mla_attention_prefill(q_latent, q_pe, self.latent_cache, s.block_tables, s.seq_ids,
                                               s.positions, self.scale)
        heads = ops.batched_matmul(latent.transpose(0, 1), self.w_uv)  # [H, T, v]
        o = ops.copy(heads.transpose(0, 1)).view(T, H * v)
        return _linear(o, self.o_proj, self.o_bias)


class MLP(torch.nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, w: _Loader, prefix: str, hidden: int, ffn: int):
        super().__init__()
        self.gate_proj = _param(w.linear(prefix + "gate_proj.weight", [ffn, hidden]))
        self.up_proj = _param(w.linear(prefix + "up_proj.weight", [ffn, hidden]))
        self.down_proj = _param(w.linear(prefix + "down_proj.weight", [hidden, ffn]))

    def forward(self, x):
        return ops.matmul(ops.silu_mul(ops.matmul(x, self.gate_proj), ops.matmul(x, self.up_proj)), self.down_proj)


class MoE(torch.nn.Module):
    """Router over routed + zero-computation experts (softmax scores, top-k of scores + bias,
    weights times routed_scaling_factor, no renormalisation), the routed experts' SwiGLU FFNs as
    grouped matmuls over the packed [E, 2F, hidden] / [E, hidden, F] weights, and the weighted
    sum in which a zero-computation expert contributes its weight times x."""

    def __init__(self, c: LongcatFlashConfig, w: _Loader, layer: int):
        super().__init__()
        p = f"model.layers.{layer}.mlp."
        D, E, Z, F = c.hidden_size, c.n_routed_experts, c.zero_expert_num, c.expert_ffn_hidden_size
        self.top_k, self.experts, self.zero_experts, self.ffn = c.moe_topk, E, Z, F
        self.routed_scaling_factor = c.routed_scaling_factor
        self.classifier = _param(w.f32(p + "router.classifier.weight", [E + Z, D], "linear"))
        self.e_score_correction_bias = _param(w.f32(p + "router.e_score_correction_bias", [E + Z], "bias"))

        def expert(e, proj):
            return f"{p}experts.{e}.{proj}.weight"

        self.gate_up_proj = _param(w.experts(p + "experts.gate_up_proj", [E, 2 * F, D],
                                             lambda e: [expert(e, "gate_proj"), expert(e, "up_proj")]))
        self.down_proj = _param(w.experts(p + "experts.down_proj", [E, D, F], lambda e: [expert(e, "down_proj")]))

    def forward(self, x):
        F = self.ffn
        logits = ops.matmul(x, self.classifier)
        topk_ids, topk_weights = ops.moe_router(logits, self.e_score_correction_bias, self.top_k, self.experts,
                                                False, False, self.routed_scaling_factor)
        x_sorted, counts, row_map = ops.moe_dispatch(x, topk_ids, self.experts, self.zero_experts)
        gate_up = ops.grouped_matmul(x_sorted, counts, self.gate_up_proj)
        h = ops.silu_mul(gate_up[:, :F], gate_up[:, F:])
        y = ops.grouped_matmul(h, counts, self.down_proj)
        return ops.moe_combine(y, row_map, topk_weights, x)


class DecoderLayer(torch.nn.Module):
    def __init__(self, m: "LongcatFlash", w: _Loader, layer: int):
        super().__init__()
        c = m.config
        p = f"model.layers.{layer}."
        self.layer, self.options, self.eps = layer, m.options, float(c.rms_norm_eps)
        # Scope names and options, resolved once here rather than traced in every compile.
        o = m.options
        self.scopes = {"part1": (f"scope_{layer}_part1", o.scope(f"scope_{layer}_part1"))}
        for part in ("part2_moe", "part2_main"):
            self.scopes[part] = (f"scope_{layer}_{part}", o.stream_fused_scope(f"scope_{layer}_{part}"))
        self.input_layernorm = torch.nn.ParameterList(
            [_param(w.norm(f"{p}input_layernorm.{j}.weight", c.hidden_size)) for j in range(2)])
        self.post_attention_layernorm = torch.nn.ParameterList(
            [_param(w.norm(f"{p}post_attention_layernorm.{j}.weight", c.hidden_size)) for j in range(2)])
        self.self_attn = torch.nn.ModuleList([MLA(m, w, layer, 0), MLA(m, w, layer, 1)])
        self.mlps = torch.nn.ModuleList(
            [MLP(w, f"{p}mlps.{j}.", c.hidden_size, c.ffn_hidden_size) for j in range(2)])
        self.mlp = MoE(c, w, layer)

    def forward(self, x, s: "StepInputs", cos_sin):
        return self.multi_stream_forward(x, s, cos_sin)

    def multi_stream_forward(self, x, s: "StepInputs", cos_sin):
        o, i, eps = self.options, self.layer, self.eps
        fuse = o.enable_superkernel
        with sk.superkernel_scope(fuse, *self.scopes["part1"]):
            x = ops.add(x, self.self_attn[0](ops.rms_norm(x, self.input_layernorm[0], eps), s, cos_sin))
            n = ops.rms_norm(x, self.post_attention_layernorm[0], eps)
        # With multi-streams the shortcut MoE runs on its own stream beside the main branch, inside
        # the same super kernel (stream fusion); events order it after n and the shortcut add after it.
        branch = o.multi_streams > 0
        n_ready = sk.Event(f"model.layers.{i}.n_ready")
        moe_done = sk.Event(f"model.layers.{i}.moe_done")
        if branch:
            n_ready.record()
        with sk.superkernel_scope(fuse, *self.scopes["part2_moe"]):
            with (sk.stream("moe") if branch else contextlib.nullcontext()), \
                    sk.limit_core_num(o.moe_core_limit, o.moe_core_limit):
                if branch:
                    n_ready.wait()
                moe_out = self.mlp(n)
                if branch:
                    moe_done.record()
        with sk.superkernel_scope(fuse, *self.scopes["part2_main"]):
            x = ops.add(x, self.mlps[0](n))
            x = ops.add(x, self.self_attn[1](ops.rms_norm(x, self.input_layernorm[1], eps), s, cos_sin))
            x = ops.add(x, self.mlps[1](ops.rms_norm(x, self.post_attention_layernorm[1], eps)))
            if branch:
                moe_done.wait()
            x = ops.add(x, moe_out)
        return x


@dataclass
class StepInputs:
    """One step's inputs (i32): the C++ models' graph inputs."""

    input_ids: torch.Tensor
    positions: torch.Tensor
    slot_mapping: torch.Tensor
    block_tables: torch.Tensor
    context_lens: torch.Tensor | None = None  # decode
    seq_ids: torch.Tensor | None = None  # prefill


def _check_unread(source: WeightSource, allow: bool) -> list[str]:
    unread = source.unread()
    skipped = [n for n in unread if allow or skipped_by_published_definition(n)]
    errors = [n for n in unread if n not in skipped]
    if errors:
        raise InvalidArgumentError(
            f"{source.describe()}: {len(errors)} tensor(s) no graph reads (the config and the checkpoint "
            f"disagree; allow_unused_tensors runs it anyway): {', '.join(errors)}")
    return skipped


class LongcatFlash(torch.nn.Module):
    """LongCat-Flash decode and prefill. ``decode(input_ids, positions, slot_mapping, block_tables,
    context_lens)`` and ``prefill(input_ids, positions, slot_mapping, block_tables, seq_ids)`` return
    the logits [T, vocab_size] (f32) and append the step's tokens to the paged latent caches
    (buffers ``layers.{i}.self_attn.{j}.latent_cache``)."""

    def __init__(self, config: LongcatFlashConfig, options: BuildOptions, source: WeightSource):
        super().__init__()
        options.validate()
        self.config, self.options = config, options
        c = config
        w = _Loader(source, options.weight_dtype)
        self.embed_tokens = _param(w.f32("model.embed_tokens.weight", [c.vocab_size, c.hidden_size], "embedding"))
        self.layers = torch.nn.ModuleList([DecoderLayer(self, w, i) for i in range(c.num_layers)])
        self.norm = _param(w.norm("model.norm.weight", c.hidden_size))
        if c.tie_word_embeddings:
            self.lm_head = (self.embed_tokens if options.weight_dtype == "f32" else
                            _param(w.linear("model.embed_tokens.weight", [c.vocab_size, c.hidden_size])))
        else:
            self.lm_head = _param(w.linear("lm_head.weight", [c.vocab_size, c.hidden_size]))
        self.register_buffer("cos_sin_decode", config.rope_table(rope_rows(c, options, "decode")), persistent=False)
        self.register_buffer("cos_sin_prefill", config.rope_table(rope_rows(c, options, "prefill")),
                             persistent=False)
        self.skipped_tensors = _check_unread(source, options.allow_unused_tensors)
        self.source = source.describe()
        self.scopes = {name: (name, options.scope(name)) for name in ("scope_embed", "scope_lm_head")}

    @classmethod
    def from_checkpoint(cls, directory: str, options: BuildOptions | None = None) -> "LongcatFlash":
        """A Hugging Face checkpoint directory, read as the C++ loader reads it."""
        return cls(LongcatFlashConfig.load(checkpoint=directory), options or BuildOptions(),
                   CheckpointWeights(directory))

    @classmethod
    def random(cls, values: dict, options: BuildOptions | None = None, seed: int = 1) -> "LongcatFlash":
        """config.json keys and the C++ models' seeded random weights (the same bytes)."""
        return cls(LongcatFlashConfig.load(values=values), options or BuildOptions(), RandomWeights(seed))

    def caches(self) -> list[torch.Tensor]:
        return [attn.latent_cache for layer in self.layers for attn in layer.self_attn]

    def clear_caches(self) -> None:
        for t in self.caches():
            t.zero_()

    def _forward(self, s: StepInputs, cos_sin):
        o = self.options
        with sk.superkernel_scope(o.enable_superkernel, *self.scopes["scope_embed"]):
            x = ops.embedding(s.input_ids, self.embed_tokens)
        for layer in self.layers:
            x = layer(x, s, cos_sin)
        with sk.superkernel_scope(o.enable_superkernel, *self.scopes["scope_lm_head"]):
            x = ops.rms_norm(x, self.norm, float(self.config.rms_norm_eps))
            return ops.matmul(x, self.lm_head)

    def decode(self, input_ids, positions, slot_mapping, block_tables, context_lens):
        return self._forward(StepInputs(input_ids, positions, slot_mapping, block_tables, context_lens=context_lens),
                             self.cos_sin_decode)

    def prefill(self, input_ids, positions, slot_mapping, block_tables, seq_ids):
        return self._forward(StepInputs(input_ids, positions, slot_mapping, block_tables, seq_ids=seq_ids),
                             self.cos_sin_prefill)

    forward = decode


class LongcatFlashAfd(torch.nn.Module):
    """The FFN side of attention-FFN disaggregation: per layer ``x = MoE_i(x)`` in one scope
    ``scope_{i}_moe`` under ``limit_core_num(moe_core_limit)``; with ``prefetch`` each layer's
    scope also warms the next layer's router and expert gate/up weights from stream ``prefetch``
    after the layer's input is ready (nothing waits for them)."""

    def __init__(self, config: LongcatFlashConfig, options: BuildOptions, source: WeightSource):
        super().__init__()
        options.validate()
        self.config, self.options = config, options
        w = _Loader(source, options.weight_dtype)
        self.layers = torch.nn.ModuleList([MoE(config, w, i) for i in range(config.num_layers)])
        # Reads only the FFN side of a LongCat checkpoint: every other tensor is expected.
        self.skipped_tensors = _check_unread(source, True)
        self.source = source.describe()
        self.scopes = []
        for i in range(config.num_layers):
            name = f"scope_{i}_moe"
            self.scopes.append((name, options.stream_fused_scope(name) if options.prefetch else options.scope(name)))

    @classmethod
    def from_checkpoint(cls, directory: str, options: BuildOptions | None = None) -> "LongcatFlashAfd":
        return cls(LongcatFlashConfig.load(checkpoint=directory), options or BuildOptions(),
                   CheckpointWeights(directory))

    @classmethod
    def random(cls, values: dict, options: BuildOptions | None = None, seed: int = 1) -> "LongcatFlashAfd":
        return cls(LongcatFlashConfig.load(values=values), options or BuildOptions(), RandomWeights(seed))

    def forward(self, hidden_states):
        o = self.options
        x = hidden_states
        for i, moe in enumerate(self.layers):
            with sk.superkernel_scope(o.enable_superkernel, *self.scopes[i]):
                if o.prefetch and i + 1 < len(self.layers):
                    nxt = self.layers[i + 1]
                    with sk.stream("prefetch"), sk.limit_core_num(o.prefetch_core_limit, o.prefetch_core_limit):
                        for t in (nxt.classifier, nxt.gate_up_proj):
                            sk.prefetch(t, t.numel() * t.element_size(), depend_on=x)
                with sk.limit_core_num(o.moe_core_limit, o.moe_core_limit):
                    x = moe(x)
        return x


class PagedCacheLayout:
    """Host-side paged-cache bookkeeping, as the C++ models' PagedCacheLayout: block j of sequence
    b is cache block j * batch + b (the sequences interleave, so the block tables are never the
    identity); prompts are laid out sequence by sequence and the prefill padded to
    ``prefill_tokens`` with tokens written nowhere (slot -1)."""

    def __init__(self, options: BuildOptions):
        self.batch, self.block_size = options.batch, options.block_size
        self.max_blocks, self.max_context, self.prefill_tokens = options.max_blocks, options.max_context, \
            options.prefill_tokens
        self._tables = [[j * self.batch + b for j in range(self.max_blocks)] for b in range(self.batch)]
        self.block_tables = torch.tensor(self._tables, dtype=torch.int32)
        self.reset()

    def reset(self) -> None:
        self.lens = [0] * self.batch
        self.last_rows = [-1] * self.batch

    def slot(self, b: int, position: int) -> int:
        block = self._tables[b][position // self.block_size]  # a list: indexing the tensor costs microseconds
        return block * self.block_size + position % self.block_size

    def prefill(self, prompts: list[list[int]]) -> StepInputs:
        if len(prompts) != self.batch:
            raise InvalidArgumentError(f"prefill: {len(prompts)} prompts for a batch of {self.batch} sequences")
        total = sum(len(p) for p in prompts)
        for b, p in enumerate(prompts):
            if self.lens[b] + len(p) > self.max_context:
                raise InvalidArgumentError(f"prefill: sequence {b} would hold {self.lens[b] + len(p)} tokens, more "
                                           f"than max_context {self.max_context}")
        if total > self.prefill_tokens:
            raise InvalidArgumentError(f"prefill: the prompts hold {total} tokens, more than the graph's "
                                       f"prefill_tokens {self.prefill_tokens}")
        ids, seq, pos, slots = [], [], [], []
        for b, p in enumerate(prompts):
            for token in p:
                ids.append(token)
                seq.append(b)
                pos.append(self.lens[b])
                slots.append(self.slot(b, self.lens[b]))
                self.lens[b] += 1
            self.last_rows[b] = len(ids) - 1
        while len(ids) < self.prefill_tokens:
            ids.append(0)
            seq.append(0)
            pos.append(0)
            slots.append(-1)
        i32 = torch.int32
        return StepInputs(torch.tensor(ids, dtype=i32), torch.tensor(pos, dtype=i32), torch.tensor(slots, dtype=i32),
                          self.block_tables, seq_ids=torch.tensor(seq, dtype=i32))

    def decode_values(self, ids: list[int]) -> tuple[list[int], list[int], list[int]]:
        """Advances every sequence by one token: (positions, slots, context lengths) as lists."""
        if len(ids) != self.batch:
            raise InvalidArgumentError(f"decode: {len(ids)} token ids for a batch of {self.batch} sequences")
        for b in range(self.batch):
            if self.lens[b] + 1 > self.max_context:
                raise InvalidArgumentError(f"decode: sequence {b} is full (max_context {self.max_context})")
        pos, slots, lens = [], [], []
        for b in range(self.batch):
            pos.append(self.lens[b])
            slots.append(self.slot(b, self.lens[b]))
            self.lens[b] += 1
            lens.append(self.lens[b])
        return pos, slots, lens

    def decode(self, ids: list[int]) -> StepInputs:
        pos, slots, lens = self.decode_values(ids)
        i32 = torch.int32
        return StepInputs(torch.tensor(ids, dtype=i32), torch.tensor(pos, dtype=i32), torch.tensor(slots, dtype=i32),
                          self.block_tables, context_lens=torch.tensor(lens, dtype=i32))


MODES = {
    "eager": {"static_kernel_compile": False},
    "graph": {"static_kernel_compile": True},
    "superkernel": {"static_kernel_compile": True, "super_kernel_optimize": True},
}


def compile_options(mode: str, extra: dict | None = None, *, frozen_modules: bool = False) -> dict:
    """torch.compile options for an execution mode (eager, graph, superkernel), parameters frozen.

    ``frozen_modules``: dynamo no longer re-checks the model's modules and their attributes on
    every call (torch's ``guard_filter_fn=torch.compiler.skip_guard_on_all_nn_modules_unsafe``;
    the guards on the step's inputs stay). It takes about 0.15 ms off a step (16 % of
    `longcat-mini`'s; docs/PERFORMANCE.md, "The LongCat-Flash PyTorch sample against transformers
    and the C++ model"); in exchange, a module attribute changed
    after the first call (``model.options.enable_superkernel = False``) is not seen, so it suits a
    model that is built, compiled and then only run, as ``python -m superkernel`` does."""
    if mode not in MODES:
        raise InvalidArgumentError(f"mode '{mode}': expected eager, graph or superkernel")
    options = dict(MODES[mode], frozen_parameter=True, **(extra or {}))
    if frozen_modules:
        skip = getattr(torch.compiler, "skip_guard_on_all_nn_modules_unsafe", None)
        if skip is None:
            raise UnimplementedError(f"frozen_modules: torch {torch.__version__} has no "
                                     "torch.compiler.skip_guard_on_all_nn_modules_unsafe (torch >= 2.7 has)")
        # torch.compile takes this key out of `options` for dynamo; the backend never sees it.
        options["guard_filter_fn"] = skip
    return options


def compile_step(method, options: dict):
    """torch.compile(method, backend="superkernel", fullgraph=True, dynamic=False) for one model
    instance's step (``model.decode``, ``model.prefill``, ``model.forward``).

    With ``frozen_parameter`` the compiled graph holds this instance's weights as constants, but
    dynamo caches compiled code per code object and guards parameters by shape only: a second
    instance of the same class would be served the first one's graph (its weights). The method is
    therefore compiled from a copy of its code object, whose cache belongs to this instance alone
    (and many instances never reach dynamo's recompile limit)."""
    func = method.__func__
    own = types.FunctionType(func.__code__.replace(), func.__globals__, func.__name__, func.__defaults__,
                             func.__closure__)
    own.__kwdefaults__ = func.__kwdefaults__
    return torch.compile(types.MethodType(own, method.__self__), backend="superkernel", fullgraph=True,
                         dynamic=False, options=options)


class Session:
    """Prefill then decode on a LongcatFlash with its paged-cache bookkeeping. ``compile`` is None
    (plain torch: every kernel op runs on its own) or backend options (``compile_options(mode)``):
    decode and prefill are then each compiled with torch.compile(backend="superkernel",
    fullgraph=True, dynamic=False).

    ``replay`` (compiled sessions only): the first decode step is captured
    (``superkernel.capture``) and every later one replays it after writing its inputs into the
    captured ones, without torch's per-call Python in between; ``decode`` then returns the same
    logits tensor each step, overwritten by the next (clone it to keep it)."""

    def __init__(self, model: LongcatFlash, compile: dict | None = None, *, replay: bool = False):  # noqa: A002
        self.model = model
        self.layout = PagedCacheLayout(model.options)
        if replay and compile is None:
            raise InvalidArgumentError("Session(replay=True): replay needs a compiled session (compile=options)")
        self.replay = replay
        self._captured = None
        if compile is None:
            self._decode, self._prefill = model.decode, model.prefill
        else:
            # torch.compile compiles on the first call: a session that never prefills compiles
            # only the decode graph.
            self._decode = compile_step(model.decode, compile)
            self._prefill = compile_step(model.prefill, compile)

    def reset(self) -> None:
        self.layout.reset()
        self.model.clear_caches()

    def prefill(self, prompts: list[list[int]]) -> torch.Tensor:
        """Logits [batch, vocab] of each prompt's last token."""
        s = self.layout.prefill(prompts)
        with torch.inference_mode():
            logits = self._prefill(s.input_ids, s.positions, s.slot_mapping, s.block_tables, s.seq_ids)
        return logits[self.layout.last_rows]

    def prompt_by_decode(self, prompts: list[list[int]]) -> torch.Tensor:
        """Feeds equally long prompts token by token through the decode graph (no prefill graph
        to compile, whatever the prompt's length); logits [batch, vocab] of the last tokens."""
        if len({len(p) for p in prompts}) != 1 or not prompts[0]:
            raise InvalidArgumentError("prompt_by_decode: the prompts must be non-empty and equally long")
        for step in zip(*prompts):
            logits = self.decode(list(step))
        return logits

    def decode(self, ids: list[int]) -> torch.Tensor:
        """Logits [batch, vocab] of one token per sequence."""
        if self.replay and self._captured is not None:
            pos, slots, lens = self.layout.decode_values(ids)  # the block tables never change
            self._write_captured({"input_ids": ids, "positions": pos, "slot_mapping": slots, "context_lens": lens})
            return self._captured()
        s = self.layout.decode(ids)
        inputs = (s.input_ids, s.positions, s.slot_mapping, s.block_tables, s.context_lens)
        if not self.replay:
            with torch.inference_mode():
                return self._decode(*inputs)
        from .._capture import capture

        static = [t.clone() for t in inputs]  # outside inference mode: later steps write them
        with torch.inference_mode():
            self._captured = capture(self._decode, *static)
        # NumPy views of the captured inputs: writing a step's values through them costs less than
        # a torch.tensor and a copy_ per input, which were more than the rest of the Python here.
        names = ("input_ids", "positions", "slot_mapping", "block_tables", "context_lens")
        self._captured_views = {n: t.numpy() for n, t in zip(names, self._captured.inputs)}
        return self._captured.result

    def _write_captured(self, values: dict) -> None:
        for name, v in values.items():
            self._captured_views[name][...] = v

    def decode_inputs(self, ids: list[int]) -> StepInputs:
        return self.layout.decode(ids)

    def timed_decode(self, s: StepInputs) -> Callable[[], torch.Tensor]:
        """A call running the decode step on `s` again and again (a benchmark's timed step): the
        captured step's replay with `s` written into its inputs, or the compiled call on `s`."""
        inputs = (s.input_ids, s.positions, s.slot_mapping, s.block_tables, s.context_lens)
        if not self.replay:
            return lambda: self._decode(*inputs)
        if self._captured is None:
            raise InvalidArgumentError("timed_decode: no decode step was captured yet (decode once first)")
        self._write_captured({"input_ids": s.input_ids.numpy(), "positions": s.positions.numpy(),
                              "slot_mapping": s.slot_mapping.numpy(), "block_tables": s.block_tables.numpy(),
                              "context_lens": s.context_lens.numpy()})
        return self._captured
