#!/usr/bin/env python3
"""Load on ``superkernel serve``: clients streaming /v1/completions at concurrency 1, 4, 16 and 64,
fixed prompt and output lengths, side by side in one run for each execution mode. Reports output
tokens/s, requests/s, time to first token and inter-token latency (p50 / p99), and beside them the
model's own prefill and decode step at batch 1 (what ``run`` would take on the same weights), so
the server's overhead and batching gain read off one table.

    PYTHONPATH=build/python build/venv/bin/python bench/serve_load.py --config configs/longcat-mini.yaml
    ... --modes graph,superkernel --concurrency 1,4,16,64 --max-sequences 16 --json build/serve_load.json

The weights are the config's seeded random ones, written once into a checkpoint directory (every
tensor the model reads, under its checkpoint name) with a word-level tokenizer without an EOS token,
so every request runs to its max_tokens. The server runs as its own process (`python -m superkernel
serve`), the clients are threads of this one; each client sends its requests one after another, a
concurrency level --requests-per-client requests per client after one warm-up request each.
"""

from __future__ import annotations

import argparse
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
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

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
    vocab = {f"w{i}": i for i in range(config.vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0").save_pretrained(directory)


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
                if event["choices"] and event["choices"][0]["text"]:
                    times.append(time.perf_counter())
    return times[0] - t0, times, len(times)


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def load(url: str, concurrency: int, per_client: int, prompt: list[int], out_tokens: int) -> dict:
    body = {"prompt": prompt, "max_tokens": out_tokens, "temperature": 0}
    ttft, itl, tokens, lock = [], [], [0], threading.Lock()

    def client(i):
        stream(url, dict(body, prompt=[(t + i) % 90 + 3 for t in prompt]))  # warm-up
        barrier.wait()
        for _ in range(per_client):
            first, times, n = stream(url, dict(body, prompt=[(t + i) % 90 + 3 for t in prompt]))
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
    """The model's own prefill and decode step at batch 1 (the `run` command's session)."""
    from superkernel import _cli
    from superkernel.models import longcat_flash as lc

    cfg.checkpoint, cfg.batch, cfg.prompt_tokens, cfg.new_tokens = ckpt, 1, prompt_tokens, runs + 2
    _, model = _cli.build_model(cfg, mode)
    session = lc.Session(model, _cli._step_options(cfg, mode), replay=True)
    prompt = [[(7 * i) % 90 + 3 for i in range(prompt_tokens)]]
    prefill = []
    for _ in range(3):
        session.reset()
        t0 = time.perf_counter()
        logits = session.prefill(prompt)
        prefill.append(time.perf_counter() - t0)
    steps = []
    token = [int(logits[0].argmax())]
    for _ in range(runs):
        t0 = time.perf_counter()
        logits = session.decode(token)
        steps.append(time.perf_counter() - t0)
        token = [int(logits[0].argmax())]
    return {"prefill_ms": statistics.median(prefill[1:]) * 1e3, "step_ms": statistics.median(steps[2:]) * 1e3}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="configs/longcat-mini.yaml")
    p.add_argument("--modes", default="superkernel", help="comma-separated: eager, graph, superkernel")
    p.add_argument("--concurrency", default="1,4,16,64")
    p.add_argument("--max-sequences", type=int, default=16, help="the server's sequence rows")
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--output-tokens", type=int, default=32)
    p.add_argument("--prefill-chunk", type=int, default=32, help="the server's prefill launch (default: 32)")
    p.add_argument("--requests-per-client", type=int, default=3)
    p.add_argument("--cores", type=int, default=0, help="the server runtime's cores (default: every CPU)")
    p.add_argument("--json", help="write the results as JSON")
    args = p.parse_args()
    if args.json:
        check_writable(args.json)
    from superkernel.models import run_config

    levels = [int(c) for c in args.concurrency.split(",")]
    base = run_config.load(args.config)
    if base.checkpoint:
        sys.exit("serve_load: the config must have random weights (model.config); it writes their checkpoint")
    ckpt = tempfile.mkdtemp(prefix="sk_serve_load_")
    write_checkpoint(base, ckpt)
    prompt = [(5 * i) % 90 + 3 for i in range(args.prompt_tokens)]
    cores = os.cpu_count()
    print(f"machine: {cores} cores; checkpoint {ckpt} ({args.config}'s seeded weights)", file=sys.stderr)
    config_path = os.path.join(ckpt, "run.yaml")
    with open(config_path, "w") as f:
        f.write(f"model:\n  checkpoint: {ckpt}\n" + (f"runtime:\n  cores: {args.cores}\n" if args.cores else ""))
    results = []
    for mode in args.modes.split(","):
        ref = batch1_reference(run_config.load(config_path), ckpt, mode, args.prompt_tokens, 30)
        port = free_port()
        # The server in a process of its own, as a user runs it: the clients' Python does not share
        # its interpreter (on 2 cores they still share the CPUs).
        cmd = [sys.executable, "-m", "superkernel", "serve", config_path, "--mode", mode, "--port", str(port),
               "--max-sequences", str(args.max_sequences), "--max-context",
               str(args.prompt_tokens + args.output_tokens + 16), "--prefill-chunk", str(args.prefill_chunk), "-q",
               "--max-waiting", "256"]
        server = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 600
        while True:
            if server.poll() is not None:
                sys.exit(f"serve_load: the server exited: {server.stderr.read()}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=5):
                    break
            except OSError:
                if time.time() > deadline:
                    server.kill()
                    sys.exit("serve_load: the server did not come up in 600 s")
                time.sleep(0.2)
        rows = []
        for c in levels:
            print(f"  {mode}: concurrency {c}", file=sys.stderr, flush=True)
            rows.append(load(url, c, args.requests_per_client, prompt, args.output_tokens))
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=120)
        one = next((r for r in rows if r["concurrency"] == 1), None)
        print(f"\n| {mode}, {args.cores or cores} cores, {args.max_sequences} rows, prompt {args.prompt_tokens}, output {args.output_tokens} "
              "| output tokens/s | requests/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | tokens/s vs c=1 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            gain = f"{r['tokens_per_s'] / one['tokens_per_s']:.2f}x" if one else ""
            print(f"| concurrency {r['concurrency']} | {r['tokens_per_s']:.1f} | {r['requests_per_s']:.2f} | "
                  f"{r['ttft_p50_ms']:.2f} | {r['ttft_p99_ms']:.2f} | {r['itl_p50_ms']:.2f} | {r['itl_p99_ms']:.2f} | "
                  f"{gain} |")
        print(f"| batch-1 session (`run`): prefill {ref['prefill_ms']:.2f} ms, decode step {ref['step_ms']:.2f} ms "
              "| | | | | | | |")
        for r in rows:
            results.append({"bench": "serve_load", "mode": mode, "cores": args.cores or cores, **r, **ref})
    if args.json:
        return json_exit_code(args.json, {"machine": {"cores": cores}, "results": results}, "serve_load")
    return 0


if __name__ == "__main__":
    sys.exit(main())
