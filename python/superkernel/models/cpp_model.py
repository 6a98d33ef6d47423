"""A model of the C++ model library (``llama``, ``mixtral``, ``deepseek_v3``, ``longcat_flash``, ...;
docs/MODELS.md) built by its C++ builder and compiled by the runtime in one execution mode, with the
paged-step interface the server's engine drives: the graphs ``superkernel run`` runs, reachable
from Python without a PyTorch port of the architecture.

    model = CppModel("llama", checkpoint="ckpt/", mode="superkernel", rows=8, max_context=512)
    logits = model.prefill(ids, positions, slots, seq_ids, want_rows)   # [len(want_rows), vocab]
    logits = model.decode(ids, positions, slots, tables, context_lens)  # [len(ids), vocab]

One set of paged caches holds ``rows`` sequences (sequence b owns cache blocks j * rows + b, the
C++ PagedCacheLayout); a prefill graph takes packed tokens of some of them (one graph per launch
size, ``prefill_tokens`` and its halves down to 16, times the sequences in a power of two: the
smallest that holds the chunk, its block tables the chunk's own sequences') and computes the LM
head for the rows asked for only (PrefillLogits::kLastToken); the decode graph
is compiled once per launch size (powers of two up to ``rows``, BuildOptions::cache_sequences),
so a step pays for the sequences it runs, and every size reads the same caches. The weights are
loaded (mapped, converted or quantised) once and shared by every graph.
"""

from __future__ import annotations

import numpy as np
import torch

from .._errors import InvalidArgumentError
from ._architectures import CPP_ONLY, LLAMA_FAMILIES

ARCHITECTURES = CPP_ONLY + ("longcat_flash",)


class _Config:
    """The fields the engine and the command line read (vocab_size, ...)."""

    def __init__(self, fields: dict):
        self.__dict__.update(fields)


class CppModel:
    """See the module docstring. ``options``: compile options (a dict as ``superkernel.compile``
    takes, or None for graph mode); ``scope_options``: a string or a callable scope -> options
    string; ``weight_dtype``: f32, bf16, f16, w8a8, w4a8 or w4 (BuildOptions::weight_dtype)."""

    def __init__(self, architecture: str, *, checkpoint: str = "", config: dict | None = None, seed: int = 1,
                 options: dict | None = None, rows: int = 1, block_size: int = 16, max_context: int = 256,
                 prefill_tokens: int = 16, weight_dtype: str = "f32", kv_cache_dtype: str = "f32",
                 scope_options="", multi_streams: int = 0, moe_core_limit: int = 0,
                 allow_unused_tensors: bool = False, runtime=None):
        from .. import _superkernel, cpp_models
        from .. import compile as sk_compile

        if architecture not in ARCHITECTURES:
            raise InvalidArgumentError(f"architecture '{architecture}': expected one of {', '.join(ARCHITECTURES)}")
        if bool(checkpoint) == (config is not None):
            raise InvalidArgumentError("CppModel: give a checkpoint directory or a config dict (random weights)")
        for key, value in (("rows", rows), ("block_size", block_size), ("max_context", max_context),
                           ("prefill_tokens", prefill_tokens)):
            if value < 1:
                raise InvalidArgumentError(f"CppModel: '{key}' must be at least 1, got {value}")
        self.architecture = architecture
        self.rows, self.block_size, self.chunk = rows, block_size, prefill_tokens
        self.max_blocks = -(-max_context // block_size)
        self.max_context = self.max_blocks * block_size
        where = dict(checkpoint=checkpoint) if checkpoint else dict(config=config)
        self.weights = (_superkernel.models.Weights.checkpoint(checkpoint) if checkpoint
                        else _superkernel.models.Weights.random(seed))
        if architecture in CPP_ONLY and config is not None:
            where = dict(config=dict(config, model_type=architecture))
        if architecture in CPP_ONLY:  # one builder per config class: the family comes from model_type
            kind = "llama" if architecture in LLAMA_FAMILIES else "deepseek"
            fields = getattr(cpp_models, f"{kind}_config")(**where)
            if fields["model_type"] != architecture:
                raise InvalidArgumentError(f"architecture '{architecture}': the checkpoint's model_type is "
                                           f"'{fields['model_type']}'")
            self._build_fn = getattr(cpp_models, f"build_{kind}")
            unread = getattr(cpp_models, f"{kind}_unread_tensors")
            cache_names = getattr(cpp_models, f"{kind}_cache_names")(**where)
        else:
            fields = cpp_models.longcat_flash_config(**where)
            self._build_fn, unread = cpp_models.build_longcat_flash, cpp_models.longcat_flash_unread_tensors
            cache_names = cpp_models.longcat_flash_cache_names(**where)
        self.config = _Config(fields)
        self.ignored_keys = fields["ignored"]
        self._where = where
        self._build_kw = dict(block_size=block_size, max_context=self.max_context, weight_dtype=weight_dtype,
                              scope_options=scope_options, multi_streams=multi_streams,
                              moe_core_limit=moe_core_limit, kv_cache_dtype=kv_cache_dtype, weights=self.weights,
                              cache_sequences=rows)
        self._options = options
        self._compile = lambda g: sk_compile(g, options, runtime)
        self.mode = "graph" if options is None else None
        prefill_graph = self._build("prefill", rows, prefill_tokens=prefill_tokens, prefill_logits="last")
        self._prefill_graphs = {prefill_tokens: prefill_graph}
        self._decode_graphs: dict[int, object] = {}
        self._decode_graphs[rows] = self._build("decode", rows)  # every graph read from one weight source
        self.skipped_tensors = (unread(**where, weights=self.weights, allow=allow_unused_tensors)
                                if checkpoint else [])
        first = self._compile(prefill_graph)
        self.mode = first.mode
        # The caches: torch tensors every executable binds (bf16 caches as torch.bfloat16).
        dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
        self.caches = {}
        for name in cache_names:
            shape = list(prefill_graph.shape(name))
            self.caches[name] = torch.zeros(shape, dtype=dtypes[kv_cache_dtype])
        self._prefill: dict[tuple[int, int], tuple] = {}
        self._prefill[(prefill_tokens, rows)] = (first, *self._bind(first, ("input_ids", "positions", "slot_mapping",
                                                                            "seq_ids"), prefill_tokens,
                                                                    logit_rows=rows))
        self._prefill_graphs.clear()
        self._decode: dict[int, tuple] = {}
        self.vocab_size = self.config.vocab_size

    # ---- building -------------------------------------------------------------------------------

    def _build(self, phase: str, batch: int, **extra):
        kw = dict(self._build_kw, **extra)
        return self._build_fn(phase=phase, batch=batch, **kw, **self._where)

    def _bind(self, exe, token_inputs, tokens: int, *, logit_rows: int = 0, rows: int = 0):
        """Binds the caches and NumPy buffers for every input to `exe` (a step then writes the
        buffers and runs, with no copy in between); (buffers by name, logits out)."""
        for name, t in self.caches.items():
            exe.bind_variable(name, t)
        io = {name: np.zeros(tokens, np.int32) for name in token_inputs}
        io["block_tables"] = np.zeros((logit_rows or rows, self.max_blocks), np.int32)
        io["block_tables"][...] = self.block_tables_for(range(logit_rows or rows))
        if logit_rows:
            io["logit_rows"] = np.zeros(logit_rows, np.int32)
        if "context_lens" in io:
            io["context_lens"][...] = 1
        for name, buf in io.items():
            exe.bind_variable(name, buf)
        out = torch.zeros([logit_rows or rows, self.config.vocab_size], dtype=torch.float32)
        return io, out

    def block_tables_for(self, rows) -> list[list[int]]:
        return [[j * self.rows + b for j in range(self.max_blocks)] for b in rows]

    def decode_sizes(self) -> list[int]:
        sizes, b = [], 1
        while b < self.rows:
            sizes.append(b)
            b *= 2
        return sizes + [self.rows]

    def prefill_sizes(self) -> list[int]:
        """The prefill launch sizes: ``prefill_tokens`` and its halves down to 16 tokens, so a
        launch computes about the rows it has (the graphs' shapes are static; padding rows cost
        as much as real ones), while a busy server fills the largest."""
        sizes, t = [], self.chunk
        while True:
            sizes.append(t)
            if t % 2 or t // 2 < 16:
                break
            t //= 2
        return sorted(sizes)

    def prefill_shapes(self) -> list[tuple[int, int]]:
        """(tokens, sequences) of every prefill graph: each launch size of prefill_sizes() with
        the sequences it holds in a power of two (decode_sizes()), so a lone prompt's LM head
        computes one row, not one per cache sequence."""
        return [(t, b) for t in self.prefill_sizes() for b in self.decode_sizes() if b < 2 * t]

    def _prefill_exe(self, tokens: int, sequences: int):
        size = next(t for t in self.prefill_sizes() if t >= tokens)
        seqs = next(b for b in self.decode_sizes() if b >= sequences)
        entry = self._prefill.get((size, seqs))
        if entry is None:
            graph = self._build("prefill", seqs, prefill_tokens=size, prefill_logits="last")
            exe = self._compile(graph)
            entry = self._prefill[(size, seqs)] = (exe, *self._bind(exe, ("input_ids", "positions", "slot_mapping",
                                                                          "seq_ids"), size, logit_rows=seqs))
        return entry

    def _decode_exe(self, rows: int):
        entry = self._decode.get(rows)
        if entry is None:
            if rows not in self.decode_sizes():
                raise InvalidArgumentError(f"decode: {rows} rows; the launch sizes are {self.decode_sizes()}")
            graph = self._decode_graphs.pop(rows, None) or self._build("decode", rows)
            exe = self._compile(graph)
            io, out = self._bind(exe, ("input_ids", "positions", "slot_mapping", "context_lens"), rows, rows=rows)
            entry = self._decode[rows] = (exe, io, out)
        return entry

    # ---- the steps --------------------------------------------------------------------------------

    def prefill(self, ids, positions, slots, seq_ids, want_rows) -> torch.Tensor:
        """One prefill launch of up to `prefill_tokens` packed tokens of cache sequences
        `seq_ids`, on the smallest graph that holds them (prefill_shapes(): the rest padding,
        written nowhere; the graph's block tables those of the chunk's own sequences); the logits
        of the chunk rows `want_rows` (at most one per sequence of the chunk)."""
        n = len(ids)
        if n > self.chunk:
            raise InvalidArgumentError(f"prefill: {n} tokens; the largest launch takes {self.chunk}")
        local: dict[int, int] = {}  # cache sequence -> row of this launch's block tables
        for q in seq_ids:
            if not 0 <= q < self.rows:
                raise InvalidArgumentError(f"prefill: sequence {q} is not one of the {self.rows} cache sequences")
            local.setdefault(q, len(local))
        if len(want_rows) > max(len(local), 1):
            raise InvalidArgumentError(f"prefill: {len(want_rows)} logit rows for {len(local)} sequences")
        exe, io, out = self._prefill_exe(n, max(len(local), 1))
        seqs = io["block_tables"].shape[0]
        order = list(local) + [next(iter(local), 0)] * (seqs - len(local))  # padding rows: a copy, never read
        io["block_tables"][...] = self.block_tables_for(order)
        for name, values, pad in (("input_ids", ids, 0), ("positions", positions, 0), ("slot_mapping", slots, -1),
                                  ("seq_ids", [local[q] for q in seq_ids], 0)):
            buf = io[name]
            buf[:n] = values
            buf[n:] = pad
        io["logit_rows"][:len(want_rows)] = want_rows
        io["logit_rows"][len(want_rows):] = 0
        exe.run()
        exe.read_into("logits", out)
        return out[:len(want_rows)]

    def decode(self, ids, positions, slots, tables, context_lens) -> torch.Tensor:
        """One decode step of len(ids) rows (a launch size of decode_sizes()): logits [rows, vocab]
        (the model's buffer, overwritten by the next step of this size)."""
        exe, io, out = self._decode_exe(len(ids))
        io["input_ids"][...] = ids
        io["positions"][...] = positions
        io["slot_mapping"][...] = slots
        io["context_lens"][...] = context_lens
        io["block_tables"][...] = tables
        exe.run()
        exe.read_into("logits", out)
        return out

    def clear_caches(self) -> None:
        for t in self.caches.values():
            t.zero_()

