#!/usr/bin/env python3
"""transformers' Llama, Qwen3 and Qwen3-MoE (random weights, batch 1, static KV cache) at about
1024 x 8 layers in f32 / bf16 / f16, one decode step and a prefill of --prefill-tokens tokens, side
by side in one run per (model, dtype, phase): torch eager, torch.compile with inductor (and, with
--inductor-variants, inductor with mode="max-autotune" and with freezing), torch.compile with
backend="superkernel" (superkernel mode, parameters frozen) called every step, the decode step
captured once with superkernel.capture and replayed, the same with --weight-dtypes quantised
weights, and the C++ model on the same shapes where the C++ library has the architecture (Llama;
weights of the same dtype, f32 activations, paged cache). Prints one Markdown table each, medians
and ratios (and --json in the project's bench format).

    PYTHONPATH=build/python build/venv/bin/python bench/torch_models.py
    ... --archs llama,qwen3,qwen3_moe --dtypes bf16 --phases decode,prefill --weight-dtypes w8a8,w4a8

The MoE model uses transformers' "batched_mm" experts, which the backend lowers to grouped_matmul
over the packed weights (eager torch gathers every (token, slot)'s expert matrices first). There
is no grouped 4-bit kernel, so its w4a8 / w4 rows keep the experts in the model's dtype
(weight_dtype_exclude ["experts"]) and say so in the label.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from checked_write import check_writable, json_exit_code
from interleaved import time_interleaved
from torch_decode import logits_step

BASE = dict(vocab_size=32000, hidden_size=1024, num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4)
ARCHS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(intermediate_size=2816)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(intermediate_size=2816, head_dim=64)),
    # 16 experts of 704 (a quarter of the dense FFN), 4 active: the active FFN equals the dense models'.
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(intermediate_size=2816, moe_intermediate_size=704, num_experts=16, num_experts_per_tok=4,
                       head_dim=64)),
}
TORCH_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
DECODE_PROMPT = 8
SK_MODE = {"static_kernel_compile": True, "super_kernel_optimize": True, "frozen_parameter": True}


def build_model(arch: str, dtype: str, cache_len: int):
    import torch
    import transformers

    config_cls, model_cls, extra = ARCHS[arch]
    config = getattr(transformers, config_cls)(**BASE, **extra, max_position_embeddings=cache_len * 2)
    if arch == "qwen3_moe":
        config._experts_implementation = "batched_mm"
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(config).eval().to(getattr(torch, TORCH_DTYPES[dtype])), config


def torch_configs(arch: str, dtype: str, phase: str, args):
    """(label, step factory) for the torch model in each configuration."""
    import torch
    from transformers import StaticCache

    import superkernel as sk

    torch._dynamo.reset()
    cache_len = max(args.prefill_tokens, 128) + 8
    model, config = build_model(arch, dtype, cache_len)
    prompt = torch.arange(1, (args.prefill_tokens if phase == "prefill" else DECODE_PROMPT) + 1)[None] % 32000

    def stepper(forward):
        cache = StaticCache(config=config, max_cache_len=cache_len)
        if phase == "prefill":
            def step():  # the whole prompt into an emptied cache
                cache.reset()
                with torch.no_grad():
                    forward(prompt, cache=cache, use_cache=True)
            step()
            return step
        token = torch.tensor([[1]])
        with torch.no_grad():
            forward(prompt, cache=cache, use_cache=True)

        def step():  # one token; the cache grows by one
            with torch.no_grad():
                forward(token, cache=cache, use_cache=True)
        return step

    def compiled(**kw):
        return torch.compile(model, fullgraph=True, dynamic=False, isolate_recompiles=True, **kw)

    def captured(options):
        forward = compiled(backend="superkernel", options=options)
        cache = StaticCache(config=config, max_cache_len=cache_len)
        with torch.no_grad():
            forward(prompt, cache=cache, use_cache=True)
            return sk.capture(lambda t: forward(t, cache=cache, use_cache=True), torch.tensor([[1]]))

    configs = [("torch eager", lambda: stepper(model))]
    if not args.no_inductor:
        configs.append(("torch inductor", lambda: stepper(compiled(backend="inductor"))))
        if args.inductor_variants:
            configs.append(("torch inductor max-autotune", lambda: stepper(compiled(mode="max-autotune"))))
            configs.append(("torch inductor freezing", lambda: stepper(compiled(options={"freezing": True}))))
    configs.append(("backend superkernel, compiled call", lambda: stepper(compiled(backend="superkernel",
                                                                                   options=SK_MODE))))
    if phase == "decode":
        configs.append(("backend superkernel, captured step replayed", lambda: captured(SK_MODE)))
    for wd in args.weight_dtypes:
        opts = {**SK_MODE, "weight_dtype": wd}
        label = wd
        if arch == "qwen3_moe" and wd in ("w4a8", "w4"):  # no grouped 4-bit kernel
            opts["weight_dtype_exclude"] = ["experts"]
            label = f"{wd} (experts {dtype})"
        if phase == "decode":
            configs.append((f"backend superkernel {label}, replayed", lambda opts=opts: captured(opts)))
        else:
            configs.append((f"backend superkernel {label}, compiled call", lambda opts=opts: stepper(compiled(
                backend="superkernel", options=opts))))
    return configs


def cpp_configs(arch: str, dtype: str, phase: str, args):
    """The same Llama built by the C++ API (one Executable.run() and a copy of the logits)."""
    if arch != "llama":
        return []
    import numpy as np

    import superkernel as sk

    _, _, extra = ARCHS[arch]
    size = dict(BASE, **extra, rms_norm_eps=1e-6, rope_theta=10000.0)
    block = 16
    cache_len = max(args.prefill_tokens, 128) + 16

    def stepper(weight_dtype):
        tokens = args.prefill_tokens if phase == "prefill" else 1
        graph = sk.cpp_models.build_llama(size, phase=phase, batch=1, block_size=block, max_context=cache_len,
                                          prefill_tokens=tokens, weight_dtype=weight_dtype)
        exe = sk.compile(graph, {"static_kernel_compile": True, "super_kernel_optimize": True})
        first = 0 if phase == "prefill" else DECODE_PROMPT
        # Logits of every token, as the torch model computes them.
        feed = {"input_ids": np.arange(1, tokens + 1) % 32000, "positions": np.arange(first, first + tokens),
                "slot_mapping": np.arange(first, first + tokens)}
        if phase == "decode":
            feed["context_lens"] = [first + tokens]
        else:
            feed["seq_ids"] = np.zeros(tokens)
        for name, value in feed.items():
            exe.set_input(name, np.asarray(value, np.int32))
        exe.set_input("block_tables", np.arange(cache_len // block, dtype=np.int32)[None])
        return logits_step(exe)

    return [("C++ model superkernel", lambda: stepper(dtype))] + [
        (f"C++ model superkernel {wd}", lambda wd=wd: stepper(wd)) for wd in args.weight_dtypes]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--archs", default="llama,qwen3,qwen3_moe")
    p.add_argument("--dtypes", default="bf16", help="comma-separated: f32, bf16, f16")
    p.add_argument("--phases", default="decode,prefill", help="comma-separated: decode, prefill")
    p.add_argument("--prefill-tokens", type=int, default=512)
    p.add_argument("--weight-dtypes", default="", help="comma-separated: w8a8, w4a8, w4")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--runs", type=int, default=11, help="decode rounds (prefill: a third of it, at least 3)")
    p.add_argument("--no-inductor", action="store_true")
    p.add_argument("--inductor-variants", action="store_true", help="also inductor max-autotune and freezing")
    p.add_argument("--json")
    args = p.parse_args()
    for flag, values, allowed in (("--archs", args.archs, ARCHS), ("--dtypes", args.dtypes, TORCH_DTYPES),
                                  ("--phases", args.phases, ("decode", "prefill")),
                                  ("--weight-dtypes", args.weight_dtypes, ("w8a8", "w4a8", "w4"))):
        for v in [v for v in values.split(",") if v]:
            if v not in allowed:
                p.error(f"{flag}: '{v}': expected one of {', '.join(allowed)}")
    args.weight_dtypes = [w for w in args.weight_dtypes.split(",") if w]
    if args.json:
        try:
            check_writable(args.json)
        except OSError as e:
            p.error(f"--json: {e}")
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    import torch

    cores = len(os.sched_getaffinity(0))
    torch.set_num_threads(cores)
    torch.ones(1024, 1024) @ torch.ones(1024, 1024)  # torch's pool before the runtime pins this thread
    import superkernel as sk

    sk.configure_runtime(num_cores=cores)
    isa = sk.Runtime.cpu_isa()
    print(f"machine: {cores} cores, {isa}; torch {torch.__version__}; batch 1", file=sys.stderr)
    results = []
    for arch in args.archs.split(","):
        for dtype in args.dtypes.split(","):
            for phase in args.phases.split(","):
                name = f"{arch} {dtype} {phase}" + (f" {args.prefill_tokens}" if phase == "prefill" else "")
                steps, errors = {}, {}
                for label, make in torch_configs(arch, dtype, phase, args) + cpp_configs(arch, dtype, phase, args):
                    t0 = time.perf_counter()
                    try:
                        steps[label] = make()
                    except Exception as e:  # reported, not fatal
                        errors[label] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
                    print(f"  {name} {label}: set-up {time.perf_counter() - t0:.1f} s", file=sys.stderr)
                runs = args.runs if phase == "decode" else max(3, args.runs // 3)
                torch_own = [k for k in steps if k.startswith("torch")]
                samples = time_interleaved(steps, (torch_own, [k for k in steps if k not in torch_own]),
                                           min(args.warmup, 1) if phase == "prefill" else args.warmup, runs)
                med = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
                refs = {"vs eager": "torch eager", "vs inductor": "torch inductor",
                        "vs C++ model": "C++ model superkernel"}  # of the same weight dtype
                unit = "ms per step" if phase == "decode" else "ms per prefill"
                print(f"\n| {name} | {unit} | tokens/s | " + " | ".join(refs) + " |")
                print("|---|---:|---:|" + "---:|" * len(refs))
                tokens = 1 if phase == "decode" else args.prefill_tokens
                for label in list(steps) + list(errors):
                    if label in errors:
                        print(f"| {label} | n/a ({errors[label]}) | | " + " | " * (len(refs) - 1) + " |")
                        continue
                    # A quantised row against the C++ model with the same weights.
                    wd = next((w for w in args.weight_dtypes if f" {w}" in label), None)
                    row_refs = dict(refs, **({"vs C++ model": f"C++ model superkernel {wd}"} if wd else {}))
                    ratios = {k: med[label] / med[v] for k, v in row_refs.items() if v in med}
                    print(f"| {label} | {med[label]:.2f} | {tokens * 1e3 / med[label]:.1f} | " +
                          " | ".join(f"{ratios[k]:.2f}x" if k in ratios else "" for k in refs) + " |")
                    results.append({"bench": f"{arch} {phase}", "dtype": dtype, "mode": label, "cores": cores,
                                    "metric": unit, "median": med[label], "min": min(samples[label]) * 1e3,
                                    "max": max(samples[label]) * 1e3, "runs": runs, "unit": "ms",
                                    "ratios": ratios})
                sys.stdout.flush()
    if args.json:
        return json_exit_code(args.json, {"machine": {"cores": cores, "isa": isa}, "results": results},
                              "torch_models", indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
