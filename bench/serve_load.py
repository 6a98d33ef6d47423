#!/usr/bin/env python3
"""Load on ``superkernel serve``: clients streaming /v1/completions at concurrency 1, 4, 16 and 64,
fixed prompt and output lengths, side by side in one run for each execution mode and, on a Llama
checkpoint, llama.cpp's ``llama-server`` on the same weights. Reports output tokens/s, requests/s,
time to first token and inter-token latency (p50 / p99), and beside them the model's own prefill
and decode step at batch 1 (what ``run`` would take on the same weights), so the server's overhead
and batching gain read off one table.

    PYTHONPATH=build/python build/venv/bin/python bench/serve_load.py --config configs/longcat-mini.yaml
    ... --modes graph,superkernel --concurrency 1,4,16,64 --max-sequences 16 --json build/serve_load.json

    # a Llama checkpoint (bench/llama_checkpoint.py) beside llama-server on its GGUF conversion
    ... --checkpoint /tmp/cmp/llama-1024-f32 --dtype bf16 \
        --llama-server /tmp/llama-build/bin/llama-server --gguf /tmp/cmp/llama-1024-bf16.gguf

With --config, the weights are the config's seeded random ones, written once into a checkpoint
directory (every tensor the model reads, under its checkpoint name). With --checkpoint, the served
directory links the checkpoint's files and, when it has no tokenizer.json, adds a word-level one
over its vocabulary (the prompts are token ids; the text is not read). Every request sets
``ignore_eos``, so each runs to its max_tokens on both servers. The servers run as their own
processes, the clients are threads of this one; each client sends its requests one after another,
a concurrency level --requests-per-client requests per client after one warm-up request each, in
--rounds interleaved rounds (every server at each level in turn, the order reversed each round).
The tables give the medians over the rounds; the ratio table the median and range of the
per-round ratios.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checked_write import check_writable, json_exit_code  # noqa: E402


def write_checkpoint(cfg, directory: str) -> None:
    """The config's seeded random weights as a checkpoint directory, with a word tokenizer."""
    import yaml
    from safetensors.torch import save_file

    from superkernel.models import longcat_flash as lc
    from superkernel.models._weights import RandomWeights

    class Recording(RandomWeights):
        def __init__(self, seed):
            super().__init__(seed)
            self.tensors = {}

        def get(self, name, dtype, shape, init):
            t = super().get(name, dtype, shape, init)
            self.tensors[name] = t.clone()
            return t

    values = dict(cfg.model_keys)
    config = lc.LongcatFlashConfig.load(values=values)
    source = Recording(cfg.seed)
    lc.LongcatFlash(config, cfg.build_options("graph"), source)
    save_file(source.tensors, os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({**{k: yaml.safe_load(v) for k, v in values.items()}, "model_type": "longcat_flash"}, f)
    word_tokenizer(directory, config.vocab_size)


def word_tokenizer(directory: str, vocab_size: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"w{i}": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0").save_pretrained(directory)


def served_checkpoint(checkpoint: str, directory: str) -> int:
    """`directory` links the checkpoint's files, with a word tokenizer unless it has tokenizer.json;
    returns the vocabulary size."""
    with open(os.path.join(checkpoint, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    for name in os.listdir(checkpoint):
        if name.endswith(".safetensors") or name in ("config.json", "model.safetensors.index.json",
                                                      "generation_config.json", "tokenizer.json",
                                                      "tokenizer_config.json", "special_tokens_map.json"):
            os.symlink(os.path.abspath(os.path.join(checkpoint, name)), os.path.join(directory, name))
    if not os.path.exists(os.path.join(checkpoint, "tokenizer.json")):
        word_tokenizer(directory, vocab)
    return vocab


_request_numbers = itertools.count()  # next() is atomic under the GIL

CPUS = os.sched_getaffinity(0)  # at import, before any launch pins this thread


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stream(url: str, body: dict) -> tuple[float, list[float], int]:
    """(time to first token, token arrival times, tokens) of one streamed completion."""
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    times = []
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
                event = json.loads(line[6:])
                # One frame per token on both servers; the closing frame (finish_reason set) of
                # llama-server carries no token.
                choice = event["choices"][0] if event["choices"] else None
                if choice is not None and (choice.get("text") or choice.get("finish_reason") is None):
                    times.append(time.perf_counter())
    return times[0] - t0, times, len(times)


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def load(url: str, concurrency: int, per_client: int, prompt: list[int], out_tokens: int) -> dict:
    body = {"prompt": prompt, "max_tokens": out_tokens, "temperature": 0, "ignore_eos": True}
    ttft, itl, tokens, lock = [], [], [0], threading.Lock()

    def client(i):
        # Every request's prompt differs from the first token on, from every other request of the
        # run (a counter in its first two tokens), so no server answers from a cached prefix:
        # llama-server keeps each slot's last prompt and reuses the longest common prefix.
        def prompt_of(j):
            n = next(_request_numbers)
            return [3 + n % 89, 3 + (n // 89) % 89] + [(t + i) % 90 + 3 for t in prompt[2:]]

        stream(url, dict(body, prompt=prompt_of(per_client)))  # warm-up
        barrier.wait()
        for j in range(per_client):
            first, times, n = stream(url, dict(body, prompt=prompt_of(j)))
            with lock:
                ttft.append(first)
                itl.extend(b - a for a, b in zip(times, times[1:]))
                tokens[0] += n

    barrier = threading.Barrier(concurrency + 1)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    n = concurrency * per_client
    return {"concurrency": concurrency, "requests": n, "tokens": tokens[0], "wall_s": wall,
            "tokens_per_s": tokens[0] / wall, "requests_per_s": n / wall, "ttft_p50_ms": pct(ttft, 0.5) * 1e3,
            "ttft_p99_ms": pct(ttft, 0.99) * 1e3, "itl_p50_ms": pct(itl, 0.5) * 1e3, "itl_p99_ms": pct(itl, 0.99) * 1e3}


def batch1_reference(cfg, ckpt: str, mode: str, prompt_tokens: int, runs: int) -> dict:
    """The model's own prefill and decode step at batch 1, as `run` takes them: the PyTorch
    sample's session (LongCat-Flash), or the C++ model's graphs (Llama)."""
    from superkernel import _cli
    from superkernel.models import longcat_flash as lc

    cfg.checkpoint, cfg.batch, cfg.prompt_tokens, cfg.new_tokens = ckpt, 1, prompt_tokens, runs + 2
    prompt = [(7 * i) % 90 + 3 for i in range(prompt_tokens)]
    if _cli._architecture(cfg) in _cli.CPP_ONLY:
        model = _cli.build_cpp_model(cfg, mode, rows=1, max_context=prompt_tokens + runs + 2,
                                     prefill_tokens=prompt_tokens, allow_unused=False)
        tables = model.block_tables_for([0])

        def prefill():
            return model.prefill(prompt, list(range(prompt_tokens)), list(range(prompt_tokens)),
                                 [0] * prompt_tokens, [prompt_tokens - 1])

        def decode(token, position):
            return model.decode(token, [position], [position], tables, [position + 1])
    else:
        _, sample = _cli.build_model(cfg, mode)
        session = lc.Session(sample, _cli._step_options(cfg, mode), replay=True)

        def prefill():
            session.reset()
            return session.prefill([prompt])

        def decode(token, position):
            return session.decode(token)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        logits = prefill()
        times.append(time.perf_counter() - t0)
    steps = []
    token = [int(logits[0].argmax())]
    for i in range(runs):
        t0 = time.perf_counter()
        logits = decode(token, prompt_tokens + i)
        steps.append(time.perf_counter() - t0)
        token = [int(logits[0].argmax())]
    return {"prefill_ms": statistics.median(times[1:]) * 1e3, "step_ms": statistics.median(steps[2:]) * 1e3}


def start_server(cmd: list[str], url: str, what: str, log_dir: str) -> subprocess.Popen:
    """Starts a server process and waits for its /health. Its output goes to a file (a pipe
    nobody reads fills up and stops a server that logs every request)."""
    log = open(os.path.join(log_dir, what.replace(" ", "_") + ".log"), "w")
    # The batch-1 reference ran launches on this thread, which pinned it to one CPU; a child
    # would inherit that one CPU, so it gets every CPU this process started with.
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: os.sched_setaffinity(0, CPUS))
    deadline = time.time() + 600
    while True:
        if server.poll() is not None:
            with open(log.name) as f:
                sys.exit(f"serve_load: {what} exited: {f.read()[-4000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.time() > deadline:
            server.kill()
            sys.exit(f"serve_load: {what} did not come up in 600 s (log: {log.name})")
        time.sleep(0.2)
    return server


def print_table(title: str, rows: list[dict], ref: dict | None) -> None:
    one = next((r for r in rows if r["concurrency"] == 1), None)
    print(f"\n| {title} | output tokens/s | requests/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | "
          "tokens/s vs c=1 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        gain = f"{r['tokens_per_s'] / one['tokens_per_s']:.2f}x" if one else ""
        print(f"| concurrency {r['concurrency']} | {r['tokens_per_s']:.1f} | {r['requests_per_s']:.2f} | "
              f"{r['ttft_p50_ms']:.2f} | {r['ttft_p99_ms']:.2f} | {r['itl_p50_ms']:.2f} | {r['itl_p99_ms']:.2f} | "
              f"{gain} |")
    if ref:
        print(f"| batch-1 model (`run`): prefill {ref['prefill_ms']:.2f} ms, decode step {ref['step_ms']:.2f} ms "
              "| | | | | | | |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/longcat-mini.yaml", help="a config with seeded random weights")
    p.add_argument("--checkpoint", help="serve this checkpoint directory instead (Llama, LongCat-Flash)")
    p.add_argument("--dtype", default="", help="with --checkpoint: model.dtype of the served weights "
                   "(f32, bf16, f16, w8a8, w4a8, w4; default: as stored)")
    p.add_argument("--llama-server", help="llama.cpp's llama-server binary, run beside on --gguf")
    p.add_argument("--gguf", help="the GGUF file of the same weights, for --llama-server")
    p.add_argument("--modes", default="superkernel", help="comma-separated: eager, graph, superkernel")
    p.add_argument("--concurrency", default="1,4,16,64")
    p.add_argument("--max-sequences", type=int, default=16, help="the server's sequence rows (llama-server -np)")
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--output-tokens", type=int, default=32)
    p.add_argument("--prefill-chunk", type=int, default=32, help="the server's prefill launch (default: 32)")
    p.add_argument("--requests-per-client", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3); medians over them")
    p.add_argument("--cores", type=int, default=0, help="the servers' cores / threads (default: every CPU)")
    p.add_argument("--load-policy", default="", help="runtime.load_policy of our server (default: adaptive)")
    p.add_argument("--json", help="write the results as JSON")
    args = p.parse_args()
    if args.json:
        check_writable(args.json)
    if bool(args.llama_server) != bool(args.gguf):
        sys.exit("serve_load: --llama-server and --gguf go together")
    from superkernel.models import run_config

    levels = [int(c) for c in args.concurrency.split(",")]
    ckpt = tempfile.mkdtemp(prefix="sk_serve_load_")
    if args.checkpoint:
        served_checkpoint(args.checkpoint, ckpt)
        source = f"checkpoint {args.checkpoint}"
    else:
        base = run_config.load(args.config)
        if base.checkpoint:
            sys.exit("serve_load: the config must have random weights (model.config); it writes their checkpoint")
        write_checkpoint(base, ckpt)
        source = f"{args.config}'s seeded weights"
    prompt = [(5 * i) % 90 + 3 for i in range(args.prompt_tokens)]
    cores = args.cores or os.cpu_count()
    context = args.prompt_tokens + args.output_tokens + 16
    print(f"machine: {os.cpu_count()} cores; serving {source} from {ckpt}", file=sys.stderr)
    config_path = os.path.join(ckpt, "run.yaml")
    dtype = {"w8a8": "  w8a8: true\n"}.get(args.dtype, f"  dtype: {args.dtype}\n" if args.dtype else "")
    with open(config_path, "w") as f:
        runtime = (f"  cores: {args.cores}\n" if args.cores else "") + \
            (f"  load_policy: {args.load_policy}\n" if args.load_policy else "")
        f.write(f"model:\n  checkpoint: {ckpt}\n{dtype}" + (f"runtime:\n{runtime}" if runtime else ""))
    modes = [m for m in args.modes.split(",") if m]
    # Every server up at once (an idle one takes no CPU: our engine waits on a condition, the
    # runtime's workers sleep, llama-server's slots idle), then rounds in which each concurrency
    # level runs on every server in turn, the order reversed from round to round, so that a slow
    # spell of a shared machine falls on all of them; medians over the rounds.
    servers, refs = [], {}
    try:
        for mode in modes:
            refs[mode] = batch1_reference(run_config.load(config_path), ckpt, mode, args.prompt_tokens, 30)
            port = free_port()
            cmd = [sys.executable, "-m", "superkernel", "serve", config_path, "--mode", mode, "--port", str(port),
                   "--max-sequences", str(args.max_sequences), "--max-context", str(context),
                   "--prefill-chunk", str(args.prefill_chunk), "-q", "--max-waiting", "256"]
            url = f"http://127.0.0.1:{port}"
            servers.append((f"superkernel {mode}", mode, url, start_server(cmd, url, f"superkernel {mode}", ckpt)))
        if args.llama_server:
            port = free_port()
            # -np sequences with continuous batching (on by default), each with the context ours
            # has; -b / -ub: prompt tokens per launch as ours.
            cmd = [args.llama_server, "-m", args.gguf, "--host", "127.0.0.1", "--port", str(port), "-t", str(cores),
                   "-np", str(args.max_sequences), "-c", str(context * args.max_sequences), "-cb",
                   "-b", str(max(args.prefill_chunk, 32)), "-ub", str(max(args.prefill_chunk, 32)), "--no-webui"]
            url = f"http://127.0.0.1:{port}"
            servers.append(("llama-server", None, url, start_server(cmd, url, "llama-server", ckpt)))
        runs: dict = {}  # (server, concurrency) -> [result per round]
        for rnd in range(args.rounds):
            order = servers if rnd % 2 == 0 else servers[::-1]
            for c in levels:
                for name, _, url, _ in order:
                    print(f"  round {rnd + 1}/{args.rounds}, {name}: concurrency {c}", file=sys.stderr, flush=True)
                    runs.setdefault((name, c), []).append(load(url, c, args.requests_per_client, prompt,
                                                               args.output_tokens))
    finally:
        for *_, proc in servers:
            proc.send_signal(signal.SIGTERM)
        for *_, proc in servers:
            try:
                proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
    keys = ("tokens_per_s", "requests_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")
    results = []
    for name, mode, _, _ in servers:
        rows = []
        for c in levels:
            rs = runs[(name, c)]
            row = {"concurrency": c, "rounds": len(rs), **{k: statistics.median(r[k] for r in rs) for k in keys},
                   "tokens": sum(r["tokens"] for r in rs), "requests": sum(r["requests"] for r in rs)}
            rows.append(row)
            extra = {"mode": mode, **refs[mode]} if mode else {"gguf": args.gguf}
            results.append({"bench": "serve_load", "server": name, "cores": cores, **row, **extra})
        title = (f"{name}, {args.dtype or 'stored'} weights, {cores} cores, {args.max_sequences} rows" if mode else
                 f"llama-server, {os.path.basename(args.gguf)}, {cores} threads, -np {args.max_sequences}")
        print_table(f"{title}, prompt {args.prompt_tokens}, output {args.output_tokens}, median of {args.rounds} "
                    "rounds", rows, refs.get(mode))
    if args.llama_server and modes:
        print("\n| concurrency | " + " | ".join(f"superkernel {m} / llama-server tokens/s (median of rounds, range)"
                                              for m in modes) + " |")
        print("|---|" + "---:|" * len(modes))
        for c in levels:
            cells = []
            for m in modes:
                ratios = [o["tokens_per_s"] / t["tokens_per_s"]
                          for o, t in zip(runs[(f"superkernel {m}", c)], runs[("llama-server", c)])]
                cells.append(f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
            print(f"| {c} | " + " | ".join(cells) + " |")
    if args.json:
        return json_exit_code(args.json, {"machine": {"cores": os.cpu_count()}, "results": results}, "serve_load")
    return 0


if __name__ == "__main__":
    sys.exit(main())
