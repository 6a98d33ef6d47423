"""The gate before a comparison with llama.cpp: both give the same greedy ids on the same f32 weights.

    python3 bench/llama_cpp_greedy_gate.py --checkpoint /tmp/cmp/mixtral-1024-f32 \
        --llama-server /tmp/llama-build/bin/llama-server --gguf /tmp/cmp/mixtral-1024-f32.gguf

Runs `superkernel run RUN.yaml --prompt IDS --tokens N` (RUN.yaml: the checkpoint in f32,
superkernel mode, in a temporary directory) and asks a `llama-server` started
on the GGUF file (a free local port, one slot, greedy: temperature 0, top_k 1) for N tokens after
the same prompt ids. A GGUF converted with another RoPE base, norm eps, expert order or tensor
mapping gives other ids within a few steps; equal ids over N steps say the conversion is right,
so a speed comparison on the two files compares the same model. Exit 0 when the ids are equal,
1 when they differ, 2 on a usage or run error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def fail(message: str):
    print(f"llama_cpp_greedy_gate: {message}", file=sys.stderr)
    sys.exit(2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours(cli: str, checkpoint: str, prompt: list[int], tokens: int) -> list[int]:
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "run.yaml")
        with open(config, "w") as f:
            f.write("model_config:\n  exe_mode: superkernel\n  custom_params: {enable_superkernel: true}\n"
                    f"model:\n  checkpoint: {os.path.abspath(checkpoint)}\n  dtype: f32\n")
        cmd = [cli, "run", config, "-q", "--prompt", ",".join(map(str, prompt)), "--tokens", str(tokens)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = re.search(r"sequence 0 tokens: ([0-9 ]+)", done.stdout)
    if done.returncode != 0 or not found:
        fail(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return [int(t) for t in found.group(1).split()]


def llama_cpp(server: str, gguf: str, prompt: list[int], tokens: int) -> list[int]:
    port = free_port()
    proc = subprocess.Popen([server, "-m", gguf, "--port", str(port), "-np", "1", "-c", "512", "-t", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                fail(f"llama-server exited {proc.returncode}:\n{proc.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                fail("llama-server did not become ready in 300 s")
            time.sleep(0.5)
        body = {"prompt": prompt, "n_predict": tokens, "temperature": 0.0, "top_k": 1, "cache_prompt": False,
                "return_tokens": True, "ignore_eos": True}
        req = urllib.request.Request(url + "/completion", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            out = json.loads(r.read())
        return [int(t) for t in out["tokens"]]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, help="the f32 checkpoint directory")
    ap.add_argument("--llama-server", required=True, help="llama.cpp's llama-server binary")
    ap.add_argument("--gguf", required=True, help="the f32 GGUF converted from the same checkpoint")
    ap.add_argument("--cli", default=os.path.join(here, "..", "build", "bin", "superkernel"))
    ap.add_argument("--prompt", default="1,17,42,8,25,61,300,33,7,90,12,1000",
                    help="prompt token ids, comma-separated")
    ap.add_argument("--tokens", type=int, default=16)
    a = ap.parse_args()
    prompt = [int(t) for t in a.prompt.split(",")]
    want = ours(a.cli, a.checkpoint, prompt, a.tokens)
    got = llama_cpp(a.llama_server, a.gguf, prompt, a.tokens)
    print(f"superkernel: {' '.join(map(str, want))}")
    print(f"llama.cpp:   {' '.join(map(str, got))}")
    if got != want:
        first = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
        print(f"llama_cpp_greedy_gate: the ids differ from step {first}: the conversion (or a model) is wrong")
        return 1
    print(f"llama_cpp_greedy_gate: {len(want)} greedy ids equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
