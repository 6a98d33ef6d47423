"""Request bodies for fuzzing `superkernel serve`'s routes: seeded mutations of valid bodies (the
seed corpus below), so a failing case is reproduced from its seed alone.

Each case is (route, raw bytes). A mutation replaces a field's value with one of another type
(strings, numbers at and beyond the ranges, NaN and infinities as JSON allows them through
Python's encoder, nested lists and objects, very long strings), drops or adds fields (known and
unknown), nests messages wrongly, or damages the bytes themselves (truncation, invalid UTF-8,
a byte flipped, an empty body, deep nesting).

    for route, body in cases(seed=1, count=200): post(route, body)

    python tests/python/http_fuzz.py --url http://127.0.0.1:8000 --count 100000 --seed 7
"""

from __future__ import annotations

import json
import random

SEEDS = (
    ("/v1/completions", {"prompt": "w3 w4 w5", "max_tokens": 2, "temperature": 0}),
    ("/v1/completions", {"prompt": [3, 4, 5], "max_tokens": 2, "temperature": 0.7, "top_p": 0.9, "top_k": 5,
                         "seed": 3, "stop": ["w9"], "logprobs": 2}),
    ("/v1/completions", {"prompt": "w1", "max_tokens": 1, "stream": True, "stream_options": {"include_usage": True}}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "w5 w6"}], "max_tokens": 2,
                              "temperature": 0}),
    ("/v1/chat/completions", {"messages": [{"role": "system", "content": "w1"}, {"role": "user", "content": "w2",
                                                                                "name": "a"}],
                              "max_completion_tokens": 2, "logprobs": True, "top_logprobs": 1, "stream": True}),
)

FIELDS = ("prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed",
          "stop", "n", "stream", "stream_options", "logprobs", "top_logprobs", "echo", "user", "model",
          "frequency_penalty", "presence_penalty", "ignore_eos", "logit_bias", "tools", "suffix", "best_of")


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(14 if depth < 3 else 9)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, 1, -1, 2, 3, 20, 21, 64, 65, 95, 96, 2**31, 2**63, -2**63, 10**30])
    if kind == 3:
        return rng.choice([0.0, -0.5, 0.5, 1.0, 1.5, 2.0, 2.5, 1e-300, 1e300, float("nan"), float("inf"),
                           -float("inf")])
    if kind == 4:
        return rng.choice(["", "w3", "w3 w4 w95", "\u00e9\u4e2d\U0001f600", "\x00", "w" * rng.randrange(1, 3000)])
    if kind == 5:
        return [rng.randrange(-5, 200) for _ in range(rng.randrange(0, 70))]
    if kind == 6:
        return rng.choice(["user", "assistant", "system", "tool", "developer"])
    if kind == 7:
        return "".join(chr(rng.randrange(1, 0x2FFF)) for _ in range(rng.randrange(0, 40)))
    if kind == 8:
        return rng.randrange(-3, 100)
    if kind in (9, 10):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    if kind in (11, 12):
        return {rng.choice(FIELDS + ("role", "content", "name", "include_usage")): _value(rng, depth + 1)
                for _ in range(rng.randrange(0, 4))}
    return [{"role": _value(rng, depth + 1), "content": _value(rng, depth + 1)} for _ in range(rng.randrange(0, 3))]


def _mutate_body(rng: random.Random, body: dict) -> dict:
    body = json.loads(json.dumps(body))
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(5)
        if op == 0 and body:
            body[rng.choice(sorted(body))] = _value(rng)
        elif op == 1 and body:
            del body[rng.choice(sorted(body))]
        elif op == 2:
            body[rng.choice(FIELDS)] = _value(rng)
        elif op == 3 and isinstance(body.get("messages"), list) and body["messages"]:
            m = rng.choice(body["messages"])
            if isinstance(m, dict):
                m[rng.choice(("role", "content", "name", "extra"))] = _value(rng)
        else:
            body["max_tokens"] = rng.choice([1, 2, 0, -1, 63, 64, 10**9, "2", 1.5])
    # Keep the valid ones short: a body that passes the checks generates at most a few tokens.
    for key in ("max_tokens", "max_completion_tokens"):
        if isinstance(body.get(key), int) and not isinstance(body.get(key), bool) and 2 < body[key] < 10**6:
            body[key] = 2
    return body


def _damage(rng: random.Random, raw: bytes) -> bytes:
    op = rng.randrange(6)
    if op == 0:
        return raw[:rng.randrange(len(raw) + 1)]
    if op == 1 and raw:
        i = rng.randrange(len(raw))
        return raw[:i] + bytes([rng.randrange(256)]) + raw[i + 1:]
    if op == 2:
        return raw + b"\xff\xfe"
    if op == 3:
        return b""
    if op == 4:
        depth = rng.randrange(100, 3000)
        return b'{"prompt": ' + b"[" * depth + b"1" + b"]" * depth + b"}"
    return b"[" + raw + b"]"


def cases(seed: int, count: int):
    """`count` (route, body bytes) pairs, the same ones for the same seed."""
    rng = random.Random(seed)
    for _ in range(count):
        route, base = rng.choice(SEEDS)
        if rng.random() < 0.1:  # the other route's body
            route = "/v1/chat/completions" if route == "/v1/completions" else "/v1/completions"
        body = _mutate_body(rng, base)
        raw = json.dumps(body).encode()  # NaN and Infinity as Python writes them
        if rng.random() < 0.2:
            raw = _damage(rng, raw)
        yield route, raw


def main() -> int:
    import argparse
    import urllib.error
    import urllib.request

    p = argparse.ArgumentParser(description="Fuzz a running server's routes (exit 1 on a 5xx or a dead server).")
    p.add_argument("--url", required=True)
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    for i, (route, raw) in enumerate(cases(args.seed, args.count)):
        req = urllib.request.Request(args.url + route, data=raw, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                r.read()
                status = r.status
        except urllib.error.HTTPError as e:
            status = e.code
        if status not in (200, 400, 503):
            print(f"case {i} (seed {args.seed}): {route} answered {status} to {raw[:300]!r}")
            return 1
    print(f"{args.count} cases, seed {args.seed}: no 5xx")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
