"""What one call of a kernel costs from Python, beside what its kernel costs: torch.ops.superkernel.*
in plain torch (torch's custom-op dispatch, argument binding, the cached one-op executable's bind,
run and read) and the sampler of `python -m superkernel generate` (the same executable called
without the op), side by side in one run, medians of interleaved rounds.

    PYTHONPATH=build/python build/venv/bin/python bench/kernel_op_call.py [--runs 300] [--rounds 5]
"""

import argparse
import statistics
import time

import torch

import superkernel  # noqa: F401  (registers torch.ops.superkernel)
from superkernel._sampling import Sampler


def median_us(fn, runs: int) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="calls per configuration and round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    args = parser.parse_args()
    torch.manual_seed(0)
    ops = torch.ops.superkernel
    small = torch.randn(1, 512)
    vocab = torch.rand(1, 131072) * 16 - 12
    step = torch.tensor([7], dtype=torch.int64)
    x = torch.randn(4, 64)
    sampler = Sampler(1.0, 0, 0.9, 3)
    configs = {
        "op add [4, 64]": lambda: ops.add(x, x),
        "op argmax [1, 131072]": lambda: ops.argmax(vocab),
        "op sample top_p 0.9 [1, 512]": lambda: ops.sample(small, step, 3, 1.0, 0.9),
        "generate's sampler top_p 0.9 [1, 512]": lambda: sampler(small),
        "op sample top_p 0.9 [1, 131072]": lambda: ops.sample(vocab, step, 3, 1.0, 0.9),
        "generate's sampler top_p 0.9 [1, 131072]": lambda: sampler(vocab),
    }
    results = {name: [] for name in configs}
    for _ in range(args.rounds):
        for name, fn in configs.items():
            results[name].append(median_us(fn, args.runs))
    print(f"| call | median µs ({args.rounds} rounds of {args.runs}) | range |")
    print("|---|---:|---|")
    for name, values in results.items():
        print(f"| {name} | {statistics.median(values):.1f} | {min(values):.1f}-{max(values):.1f} |")


if __name__ == "__main__":
    main()
