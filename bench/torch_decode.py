#!/usr/bin/env python3
"""One decode step of transformers' LlamaForCausalLM (random weights in f32, bf16 or f16, batch 1,
static KV cache), side by side in one run: torch eager, torch.compile with inductor, torch.compile with
backend="superkernel" in each execution mode (and, after each, the compiled graph that step ran,
called directly: the share of the step that is the backend's, without dynamo's guards,
aot_autograd's wrappers and the model's own Python; and the step captured once with
superkernel.capture and replayed), and the same model built by the C++ API
(superkernel.cpp_models.build_llama, paged cache, weights of the same dtype, f32 activations) in
graph and superkernel mode. Prints a
Markdown table of median step times and ratios (and --json in the project's bench format).

    PYTHONPATH=build/python build/venv/bin/python bench/torch_decode.py
    PYTHONPATH=build/python build/venv/bin/python bench/torch_decode.py --sizes llama-mini --runs 20
    ... --dtypes f32,bf16   # one table per size and dtype (default f32)
    ... --weight-dtypes w8a8,w4a8   # also: weights quantised by the backend's weight_dtype and the
                                    # C++ model's, against the same model's unquantised rows
    ... --kernel-time 20    # also: each step's core time by kernel, the backend's graph against the C++ model's

Sizes: llama-mini (configs/llama-mini.yaml: hidden 128, 4 layers, vocab 512) and llama-8l-1024
(hidden 1024, intermediate 2816, 8 layers, 16 heads / 4 KV heads, vocab 32000).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from checked_write import check_writable, json_exit_code
from interleaved import time_interleaved

SIZES = {
    "llama-mini": dict(vocab_size=512, hidden_size=128, intermediate_size=344, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2),
    "llama-8l-1024": dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                          num_attention_heads=16, num_key_value_heads=4),
}
PROMPT = 8
CACHE_LEN = 128


def captured_decode(model, config, options: dict):
    """`model` compiled with the backend (`options`, parameters frozen), the prompt prefilled into a
    fresh static cache, and the next decode step captured once with superkernel.capture: the
    compiled graph replayed on the memory it was captured on, as a deployment replays a CUDA graph.
    Each replay is one more decode step (the graph reads the cache's length from the cache)."""
    import torch
    from transformers import StaticCache

    import superkernel as sk

    compiled = torch.compile(model, backend="superkernel", options={**options, "frozen_parameter": True},
                             fullgraph=True, dynamic=False, isolate_recompiles=True)
    cache = StaticCache(config=config, max_cache_len=CACHE_LEN)
    with torch.no_grad():
        compiled(torch.arange(1, PROMPT + 1)[None], cache=cache, use_cache=True)
        return sk.capture(lambda t: compiled(t, cache=cache, use_cache=True), torch.tensor([[1]]))


def cpp_decode(size: dict, options: dict, weight_dtype: str = "f32"):
    """The same Llama built by the C++ API (paged cache) and compiled with `options`, its inputs set
    for the decode step after the prompt: (executable, graph)."""
    import numpy as np

    import superkernel as sk

    block = 16
    graph = sk.cpp_models.build_llama(dict(size, rms_norm_eps=1e-6, rope_theta=10000.0), phase="decode", batch=1,
                                      block_size=block, max_context=CACHE_LEN, weight_dtype=weight_dtype)
    exe = sk.compile(graph, options)
    for name, value in (("input_ids", [1]), ("positions", [PROMPT]), ("slot_mapping", [PROMPT]),
                        ("context_lens", [PROMPT + 1])):
        exe.set_input(name, np.array(value, np.int32))
    exe.set_input("block_tables", np.arange(CACHE_LEN // block, dtype=np.int32)[None])
    return exe, graph


TORCH_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def torch_configs(size: dict, dtype: str, args, weight_dtypes=()):
    """(name, step function factory) for the torch model in each configuration."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

    # Every configuration stays compiled while they are timed in turn: each torch.compile keeps its
    # own compiled entries (isolate_recompiles), so that one's prefill and decode do not count
    # against another's recompile limit.
    torch._dynamo.reset()
    torch.manual_seed(0)
    config = LlamaConfig(**size, max_position_embeddings=CACHE_LEN * 2)
    model = LlamaForCausalLM(config).eval().to(getattr(torch, TORCH_DTYPES[dtype]))

    def stepper(forward):
        """Prefill once, then each call is one decode step (the cache grows by one token)."""
        cache = StaticCache(config=config, max_cache_len=CACHE_LEN)
        token = torch.tensor([[1]])
        with torch.no_grad():
            forward(torch.arange(1, PROMPT + 1)[None], cache=cache, use_cache=True)

        def step():
            with torch.no_grad():
                forward(token, cache=cache, use_cache=True)

        return step

    configs = [("torch eager", lambda: stepper(model))]
    if not args.no_inductor:
        configs.append(("torch inductor", lambda: stepper(
            torch.compile(model, backend="inductor", fullgraph=True, dynamic=False, isolate_recompiles=True))))
    modes = {
        "eager": {"static_kernel_compile": False},
        "graph": {"static_kernel_compile": True},
        "superkernel": {"static_kernel_compile": True, "super_kernel_optimize": True},
    }
    import superkernel as sk

    graphs = {}

    def superkernel_stepper(mode, opts):
        step = stepper(torch.compile(model, backend="superkernel", options={**opts, "frozen_parameter": True},
                                     fullgraph=True, dynamic=False, isolate_recompiles=True))
        with sk.recording() as ran:
            step()
        graphs[mode] = ran
        return step

    def graph_alone(mode):
        """The compiled graph the backend runs for one step, called directly on that step's
        inputs: binding, the executable's run and the output tensors, without dynamo's guards,
        aot_autograd's wrappers and the model's Python around them."""
        ran = graphs.get(mode)
        if not ran or len(ran) != 1:
            raise RuntimeError(f"the step ran {len(ran or [])} compiled graphs, not one")
        compiled, inputs = ran[0]
        return lambda: compiled(*inputs)

    for mode, opts in modes.items():
        configs.append((f"backend superkernel {mode}", lambda mode=mode, opts=opts: superkernel_stepper(mode, opts)))
        configs.append((f"superkernel {mode}: compiled graph alone", lambda mode=mode: graph_alone(mode)))
        configs.append((f"superkernel {mode}: captured step replayed",
                        lambda opts=opts: captured_decode(model, config, opts)))
    # What a deployment with frozen weights may add: dynamo no longer re-checks the model's modules
    # and parameters on every call (torch's own guard filter; the backend already treats the
    # parameters as constants), leaving the guards on the step's inputs.
    configs.append(("backend superkernel superkernel, module guards skipped",
                    lambda: superkernel_stepper("superkernel, module guards skipped", {
                        **modes["superkernel"],
                        "guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe})))
    for wd in weight_dtypes:
        configs.append((f"superkernel superkernel, weight_dtype {wd}: captured step replayed",
                        lambda wd=wd: captured_decode(model, config, {**modes["superkernel"], "weight_dtype": wd})))
    return configs


def logits_step(exe):
    """A C++ model's timed step: the run and one copy of the logits out, as the torch rows return
    them (into a NumPy array kept from step to step: nanobind reads it through the buffer
    protocol)."""
    import numpy as np

    name = exe.output_names()[0]
    out = np.empty(exe.tensor(name).shape, np.float32)

    def step():
        exe.run()
        exe.read_into(name, out)

    return step


def cpp_configs(size: dict, dtype: str, weight_dtypes=()):
    """The same Llama built by the C++ API: one Executable.run() and a copy of the logits per step."""

    def stepper(mode_opts, weight_dtype):
        return logits_step(cpp_decode(size, mode_opts, weight_dtype)[0])

    sk_mode = {"static_kernel_compile": True, "super_kernel_optimize": True}
    return [
        ("C++ model graph", lambda: stepper({"static_kernel_compile": True}, dtype)),
        ("C++ model superkernel", lambda: stepper(sk_mode, dtype)),
    ] + [(f"C++ model superkernel, weight_dtype {wd}", lambda wd=wd: stepper(sk_mode, wd)) for wd in weight_dtypes]


def kernel_time(size: dict, steps: int, dtype: str = "f32") -> None:
    """Where each step's core time goes, by kernel, for the backend's superkernel-mode step
    (captured and replayed) and the C++ model's: both compiled with tracing, run `steps` times
    alternately; the median over the steps of each kernel's time summed over the cores."""
    import collections
    import re
    import tempfile

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    def by_kernel(path):
        with open(path) as f:
            data = json.load(f)
        out = collections.defaultdict(float)
        for e in data["traceEvents"] if isinstance(data, dict) else data:
            if e.get("ph") == "X":
                m = re.search(r"\(([^)]*)\)", e.get("name", ""))
                out[m.group(1) if m else e.get("name", "").split(" ")[0]] += e.get("dur", 0)
        return out

    mode = {"static_kernel_compile": True, "super_kernel_optimize": True}
    tmp = tempfile.mkdtemp(prefix="torch_decode_trace")
    torch._dynamo.reset()
    torch.manual_seed(0)
    config = LlamaConfig(**size, max_position_embeddings=CACHE_LEN * 2)
    model = LlamaForCausalLM(config).eval().to(getattr(torch, TORCH_DTYPES[dtype]))
    step = captured_decode(model, config, {**mode, "trace": f"{tmp}/torch.json"})
    exe, graph = cpp_decode(size, {**mode, "trace": f"{tmp}/cpp.json"}, dtype)
    seen = {"torch graph": collections.defaultdict(list), "C++ model": collections.defaultdict(list)}
    for _ in range(steps):
        step()
        for k, v in by_kernel(f"{tmp}/torch.json").items():
            seen["torch graph"][k].append(v)
        exe.run()
        for k, v in by_kernel(f"{tmp}/cpp.json").items():
            seen["C++ model"][k].append(v)
    print(f"\ncore time per step by kernel, superkernel mode, µs summed over the cores (median of {steps} steps)\n")
    for side, kernels in seen.items():
        total = sum(statistics.median(v) for v in kernels.values())
        rows = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in
                         sorted(kernels.items(), key=lambda kv: -statistics.median(kv[1])) if statistics.median(v) >= 1)
        print(f"- {side} ({graph.num_ops if side == 'C++ model' else step.graphs[0].graph.num_ops} ops): "
              f"total {total:.0f}: {rows}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="llama-mini,llama-8l-1024")
    p.add_argument("--dtypes", default="f32", help="comma-separated: f32, bf16, f16 (the model's parameters)")
    p.add_argument("--weight-dtypes", default="", help="comma-separated: w8a8, w4a8, w4 (extra quantised rows)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--threads", type=int, default=0, help="torch threads and superkernel cores (0: all CPUs)")
    p.add_argument("--no-inductor", action="store_true", help="skip torch.compile with inductor (slow to compile)")
    p.add_argument("--no-huge-pages", action="store_true",
                   help="leave torch's tensors on 4 KiB pages (default: THP_MEM_ALLOC_ENABLE=1, as the C++ model)")
    p.add_argument("--load-policy", default="adaptive", choices=["adaptive", "static", "one_thread"],
                   help="the superkernel runtime's load policy (docs/OPTIONS.md)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--kernel-time", type=int, default=0, metavar="STEPS",
                   help="also trace STEPS steps of the backend's superkernel-mode step and the C++ model's and "
                        "print each one's core time by kernel")
    args = p.parse_args()
    # Each superkernel configuration decodes prefill + 1 + 2 * (warmup + runs) positions into one
    # static cache: its own steps and its compiled graph's alone, which advances the same cache.
    if PROMPT + 1 + 2 * (args.warmup + args.runs) > CACHE_LEN:
        p.error(f"--warmup + --runs must be at most {(CACHE_LEN - PROMPT - 1) // 2} (a static cache of {CACHE_LEN})")
    for d in args.dtypes.split(","):
        if d not in TORCH_DTYPES:
            p.error(f"--dtypes: '{d}': expected f32, bf16 or f16")
    weight_dtypes = [w for w in args.weight_dtypes.split(",") if w]
    for w in weight_dtypes:
        if w not in ("w8a8", "w4a8", "w4"):
            p.error(f"--weight-dtypes: '{w}': expected w8a8, w4a8 or w4")
    if args.json:
        try:
            check_writable(args.json)
        except OSError as e:
            p.error(f"--json: {e}")
    if not args.no_huge_pages:
        # torch's CPU allocator places allocations of 2 MiB and more on transparent huge pages
        # when this is set before it starts; the C++ model's weights are on huge pages too
        # (src/util/large_alloc.h), so both read their weights the same way.
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

    import torch

    cores = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(cores)
    # torch's thread pool first: the superkernel runtime pins the calling thread to one CPU, and
    # threads created after that would inherit the pinning.
    torch.ones(1024, 1024) @ torch.ones(1024, 1024)
    import superkernel as sk

    sk.configure_runtime(num_cores=cores, load_policy=args.load_policy)
    results = []
    isa = sk.Runtime.cpu_isa()
    one_thread_before = sk.runtime().one_thread_launches
    print(f"machine: {cores} cores, {isa}, load policy {args.load_policy}; torch {torch.__version__}; "
          f"batch 1, prompt {PROMPT}, "
          f"static cache {CACHE_LEN}; median of {args.runs} interleaved rounds after {args.warmup}; "
          f"torch on {'4 KiB' if args.no_huge_pages else 'huge'} pages", file=sys.stderr)
    for size_name, dtype in [(n, d) for n in args.sizes.split(",") for d in args.dtypes.split(",")]:
        size = SIZES[size_name]
        name = size_name if dtype == "f32" else f"{size_name} {dtype}"
        steps, errors = {}, {}
        for label, make in torch_configs(size, dtype, args, weight_dtypes) + cpp_configs(size, dtype, weight_dtypes):
            t0 = time.perf_counter()
            try:
                steps[label] = make()
            except Exception as e:  # a configuration that cannot run is reported, not fatal
                errors[label] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            print(f"  {name} {label}: set-up {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        # torch's own configurations, then those on the superkernel runtime (bench/interleaved.py).
        t0 = time.perf_counter()
        torch_own = ("torch eager", "torch inductor")
        samples = time_interleaved(steps, ([k for k in steps if k in torch_own], [k for k in steps if k not in torch_own]),
                                   args.warmup, args.runs)
        timed = {k: (statistics.median(v) * 1e3, min(v) * 1e3, max(v) * 1e3) for k, v in samples.items()}
        print(f"  {name}: {len(steps)} configurations timed in interleaved rounds in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        rows = [(label, *timed[label], None) if label in timed else (label, None, None, None, errors[label])
                for label in list(steps) + list(errors)]
        times = {label: med for label, med, *_ in rows if med is not None}
        refs = {"vs torch eager": "torch eager", "vs inductor": "torch inductor",
                "vs C++ model": "C++ model superkernel"}
        print("\n| model | config | cores | step ms | min | max | " + " | ".join(refs) + " |")
        print("|---|---|---|---|---|---|" + "---|" * len(refs))
        for label, med, lo, hi, err in rows:
            if med is None:
                print(f"| {name} | {label} | {cores} | n/a ({err}) | | | " + " | ".join("" for _ in refs) + " |")
                results.append({"bench": size_name, "dtype": dtype, "mode": label, "cores": cores, "metric": "decode step",
                                "median": None, "min": None, "max": None, "runs": 0, "unit": "ms",
                                "unsupported": err})
                continue
            ratios = {k: (med / times[v] if v in times else None) for k, v in refs.items()}
            cells = " | ".join(f"{r:.2f}x" if r else "" for r in ratios.values())
            print(f"| {name} | {label} | {cores} | {med:.3f} | {lo:.3f} | {hi:.3f} | {cells} |")
            results.append({"bench": size_name, "dtype": dtype, "mode": label, "cores": cores, "metric": "decode step",
                            "median": med,
                            "min": lo, "max": hi, "runs": args.runs, "unit": "ms",
                            "ratios": {k: v for k, v in ratios.items() if v}})
        sys.stdout.flush()
        if args.kernel_time:
            kernel_time(size, args.kernel_time, dtype)
    print(f"superkernel launches that ran on one thread (load policy {args.load_policy}): "
          f"{sk.runtime().one_thread_launches - one_thread_before}", file=sys.stderr)
    if args.json:
        return json_exit_code(args.json, {"machine": {"cores": cores, "isa": isa, "load_policy": args.load_policy},
                                          "results": results}, "torch_decode", indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
