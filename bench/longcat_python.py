#!/usr/bin/env python3
"""One LongCat-Flash decode step, side by side in one run: transformers' LongcatFlashForCausalLM
(eager, and torch.compile with inductor), the PyTorch sample superkernel.models.longcat_flash
under the superkernel backend in each execution mode, and the C++ model (src/models) compiled in
each mode, on the same weights (the seeded random source, by published name).

    PYTHONPATH=build/python build/venv/bin/python bench/longcat_python.py \\
        configs/longcat-mini.yaml configs/longcat-small.yaml [--runs 40] [--json out.json]

Every implementation first prefills the config's seeded prompt and decodes up to the step timed;
then that one decode step is timed `runs` times, in interleaved rounds (each round times every
implementation once, so drift hits all alike; the KV caches are rolled back, so every run is the
same step), first the sample's and the C++ model's, then transformers'. The table gives medians ±
median absolute deviation and ratios: against transformers' best (eager or inductor), and
sample / C++ in the same mode (the sample's goal is 1.0). "sample, frozen modules" is the sample
compiled as `python -m superkernel` compiles it: dynamo no longer re-checks the model's modules on
every call (longcat_flash.compile_options(frozen_modules=True)). Before timing, the sample's
logits are checked bit-identical to the C++ model's in every mode and transformers' within 1e-3 of them.
"""

import argparse
import os
import statistics
import sys

import numpy as np
import torch
from interleaved import time_interleaved

import superkernel as sk
from superkernel._cli import default_prompts
from superkernel._files import write_json
from superkernel.models import longcat_flash as lc
from superkernel.models import run_config
from superkernel.models._weights import RandomWeights

MODES = ("eager", "graph", "superkernel")


def hf_model(cfg, config):
    """transformers' model on the sample's weights: packed gate_up_proj zero-padded for the
    zero-computation experts, as transformers sizes it."""
    from transformers import LongcatFlashConfig, LongcatFlashForCausalLM

    keys = {k: (float(v) if "." in v or "e" in v else int(v)) for k, v in cfg.model_keys.items()}
    hf_config = LongcatFlashConfig(**keys, head_dim=config.qk_rope_head_dim, rope_theta=1e7)
    hf_config._attn_implementation = "eager"
    model = LongcatFlashForCausalLM(hf_config).eval()
    source = RandomWeights(cfg.seed)
    state = {}
    for name, t in model.state_dict().items():
        shape = list(t.shape)
        if name.endswith("experts.gate_up_proj"):
            w = torch.zeros(shape)
            w[: config.n_routed_experts] = source.get(name, "f32", [config.n_routed_experts] + shape[1:], "linear")
        elif name.endswith("experts.down_proj"):
            w = source.get(name, "f32", shape, "linear")
        elif name == "model.embed_tokens.weight":
            w = source.get(name, "f32", shape, "embedding")
        elif "norm" in name:
            w = source.get(name, "f32", shape, "norm")
        elif name.endswith("e_score_correction_bias"):
            w = source.get(name, "f32", shape, "bias")
        else:
            w = source.get(name, "f32", shape, "linear")
        state[name] = w
    model.load_state_dict(state)
    return model


class HFStep:
    """transformers' decode step at the timed position: DynamicCache cropped back after each run."""

    def __init__(self, model, prompts, ids, compiled):
        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache(config=model.config)
        tokens = torch.tensor(prompts)
        with torch.inference_mode():
            out = model(input_ids=tokens, past_key_values=self.cache, use_cache=True)
            for step in ids[:-2]:
                out = model(input_ids=torch.tensor(step).view(-1, 1), past_key_values=self.cache, use_cache=True)
        self.length = self.cache.get_seq_length()
        self.tokens = torch.tensor(ids[-2]).view(-1, 1)
        self.forward = (torch.compile(model, dynamic=False) if compiled else model)
        self.logits = self()[:, -1]

    def __call__(self):
        with torch.inference_mode():
            out = self.forward(input_ids=self.tokens, past_key_values=self.cache, use_cache=True)
        # Back to the timed position (transformers' crop takes the number of tokens to drop, negated).
        self.cache.crop(self.length - self.cache.get_seq_length())
        return out.logits


class SampleStep:
    """The PyTorch sample compiled in `mode`, at the timed decode step."""

    def __init__(self, cfg, mode, prompts, ids=None, frozen_modules=False):
        self.model = lc.LongcatFlash.random(dict(cfg.model_keys), cfg.build_options(mode), cfg.seed)
        self.session = lc.Session(self.model, cfg.backend_options(mode, frozen_modules=frozen_modules))
        if ids is None:  # greedy ids: the prefill's, then new_tokens - 2 decode steps'
            ids = [self.session.prefill(prompts).argmax(-1).tolist()]
            for _ in range(cfg.new_tokens - 2):
                ids.append(self.session.decode(ids[-1]).argmax(-1).tolist())
            self.session.reset()
        # Replay up to the last decode step, which is the one timed (it decodes ids[-2]).
        self.session.prefill(prompts)
        for step in ids[:-2]:
            self.session.decode(step)
        self.ids = ids
        self.inputs = self.session.layout.decode(ids[-2])
        self.logits = self()

    def __call__(self):
        s = self.inputs
        with torch.inference_mode():
            return self.session._decode(s.input_ids, s.positions, s.slot_mapping, s.block_tables, s.context_lens)


class ReplayedStep:
    """A sample step captured once (superkernel.capture) and replayed: the same compiled graph,
    called without dynamo, aot_autograd or the binding's per-call checks in between."""

    def __init__(self, sample):
        s = sample.inputs
        with torch.inference_mode():
            self.step = sk.capture(sample.session._decode, s.input_ids, s.positions, s.slot_mapping, s.block_tables,
                                   s.context_lens)
        self.logits = self()

    def __call__(self):
        return self.step()


class CppStep:
    """The C++ model compiled in `mode`, on the same inputs and cache states."""

    def __init__(self, cfg, mode, prompts, ids):
        o = cfg.build_options(mode)
        kw = dict(batch=o.batch, block_size=o.block_size, max_context=o.max_context, prefill_tokens=o.prefill_tokens,
                  weight_dtype=o.weight_dtype, seed=cfg.seed, scope_options=cfg.scope_options_for,
                  multi_streams=o.multi_streams, moe_core_limit=o.moe_core_limit, kv_cache_dtype=o.kv_cache_dtype)
        values = dict(cfg.model_keys)
        options = {k: v for k, v in cfg.backend_options(mode).items() if k != "frozen_parameter"}
        self.prefill = sk.compile(sk.cpp_models.build_longcat_flash(values, "prefill", **kw), options)
        self.decode = sk.compile(sk.cpp_models.build_longcat_flash(values, "decode", **kw), options)
        dtype = np.float32 if o.kv_cache_dtype == "f32" else np.uint16
        self.caches = []
        for name in sk.cpp_models.longcat_flash_cache_names(values):
            shape = self.decode.tensor(name).shape
            buf = np.zeros(shape, dtype)
            self.caches.append(buf)
            self.prefill.bind_variable(name, buf)
            self.decode.bind_variable(name, buf)
        layout = lc.PagedCacheLayout(o)
        self.feed(self.prefill, layout.prefill(prompts), "seq_ids")
        self.prefill.run()
        for step in ids[:-2]:
            self.feed(self.decode, layout.decode(step), "context_lens")
            self.decode.run()
        self.feed(self.decode, layout.decode(ids[-2]), "context_lens")
        # The step is the run and one copy of the logits into memory kept from step to step, as a
        # C++ decode loop does (a fresh array per step would time its allocation too).
        # (A NumPy array: nanobind takes it through the buffer protocol; a torch tensor would go
        # through DLPack, which costs tens of microseconds a call.)
        self.out = np.empty(self.decode.tensor("logits").shape, np.float32)
        self.out_tensor = torch.from_numpy(self.out)
        self.logits = self()

    @staticmethod
    def feed(exe, s, last):
        for name in ("input_ids", "positions", "slot_mapping", "block_tables", last):
            exe.set_input(name, getattr(s, name).numpy())

    def __call__(self):
        self.decode.run()
        self.decode.read_into("logits", self.out)
        return self.out_tensor


def bench_config(path, args):
    cfg = run_config.load(path)
    if cfg.checkpoint or (cfg.architecture or "longcat_flash") != "longcat_flash":
        raise SystemExit(f"{path}: expected a LongCat-Flash config with random weights")
    cfg.new_tokens = max(cfg.new_tokens, 2)
    print(f"== {path}: building", file=sys.stderr, flush=True)
    config = lc.LongcatFlashConfig.load(values=dict(cfg.model_keys))
    prompts = default_prompts(cfg, config.vocab_size)
    steps = {}
    first = SampleStep(cfg, "eager", prompts)
    ids = first.ids
    steps[("sample", "eager")] = first
    for mode in MODES[1:]:
        steps[("sample", mode)] = SampleStep(cfg, mode, prompts, ids)
    # What `python -m superkernel` runs: dynamo no longer re-checks the model's modules on every call
    # (lc.compile_options(frozen_modules=True)).
    steps[("sample, frozen modules", "superkernel")] = SampleStep(cfg, "superkernel", prompts, ids,
                                                                 frozen_modules=True)
    for mode in MODES:
        steps[("sample, captured and replayed", mode)] = ReplayedStep(steps[("sample", mode)])
    for mode in MODES:
        steps[("C++", mode)] = CppStep(cfg, mode, prompts, ids)
    ref = steps[("C++", "eager")].logits
    for key, step in steps.items():
        if not torch.equal(step.logits.view(torch.int32), ref.view(torch.int32)):
            raise SystemExit(f"{path}: {key[0]} in {key[1]} mode: logits differ from the C++ model's eager mode")
    model = hf_model(cfg, config) if not args.skip_transformers else None
    for label, compiled in (() if args.skip_transformers else (("eager", False), ("inductor", True))):
        print(f"== {path}: transformers {label}", file=sys.stderr, flush=True)
        try:
            steps[("transformers", label)] = HFStep(model, prompts, ids, compiled)
        except Exception as e:  # noqa: BLE001 - a failing baseline is reported, not fatal
            print(f"transformers {label}: failed ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        diff = float((steps[("transformers", label)].logits - ref).abs().max())
        if diff > 1e-3 * max(1.0, float(ref.abs().max())):
            raise SystemExit(f"{path}: transformers {label} logits differ from the sample's by {diff:.3g}")
    # The sample's and the C++ model's steps, then transformers' (bench/interleaved.py): interleaved
    # together, torch's spinning threads and the runtime's took the CPUs from each other's steps
    # (the C++ model's longcat-mini step measured 0.98 ms there, 0.79 ms in a group of its own).
    samples = time_interleaved(steps, ([k for k in steps if k[0] != "transformers"],
                                       [k for k in steps if k[0] == "transformers"]), args.warmup, args.runs)
    med = {k: statistics.median(v) for k, v in samples.items()}
    mad = {k: statistics.median(abs(t - med[k]) for t in v) for k, v in samples.items()}
    hf = [med[k] for k in med if k[0] == "transformers"]
    best = min(hf) if hf else None
    rows = []
    print(f"\n{os.path.basename(path)}: one decode step (batch {cfg.batch}, context {len(prompts[0]) + len(ids) - 1}), "
          f"{args.runs} runs, {torch.get_num_threads()} torch threads, {sk.runtime().num_cores} superkernel cores; "
          "sample logits bit-identical to the C++ model in every mode\n")
    print("| implementation | mode | step (ms) | vs transformers best | sample / C++ |")
    print("|---|---|---:|---:|---:|")
    for (impl, mode), m in med.items():
        ratio = f"{m / med[('C++', mode)]:.3f}" if impl.startswith("sample") else ""
        # Without transformers' rows (--skip-transformers) there is nothing to compare with.
        vs_hf = f"{best / m:.2f}x" if hf else "not run"
        print(f"| {impl} | {mode} | {m * 1e3:.3f} ± {mad[(impl, mode)] * 1e3:.3f} | {vs_hf} | {ratio} |")
        rows.append({"implementation": impl, "mode": mode, "step_latency": m, "mad": mad[(impl, mode)],
                     "speedup_vs_transformers_best": best / m if hf else None})
    return {"config": path, "rows": rows}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("configs", nargs="*", default=["configs/longcat-mini.yaml", "configs/longcat-small.yaml"])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: the superkernel runtime's cores)")
    p.add_argument("--skip-transformers", action="store_true", help="the sample and the C++ model only")
    p.add_argument("--json")
    args = p.parse_args()
    torch.set_num_threads(args.threads or sk.runtime().num_cores)
    results = [bench_config(path, args) for path in args.configs]
    if args.json:
        write_json(args.json, {"benchmark": "longcat_python", "results": results})


if __name__ == "__main__":
    main()
