"""Timing in interleaved rounds, shared by the Python benchmarks (torch_decode.py,
longcat_python.py).

Each round calls every step of a group once, the order rotating from round to round, so that a
slow spell of a shared machine falls on all of them alike. Groups run one after the other: steps
whose idle threads spin (torch's OpenMP pool after each op, the superkernel runtime's workers
after each launch) go in different groups, or each side's spinning takes the CPUs from the other's
steps on a small machine.
"""

from __future__ import annotations

import time
from typing import Callable, Hashable, Iterable


def time_interleaved(steps: dict[Hashable, Callable[[], object]], groups: Iterable[Iterable[Hashable]],
                     warmup: int, runs: int) -> dict[Hashable, list[float]]:
    """Seconds of each timed call of each step, by key; `groups` partitions the keys of `steps`."""
    samples: dict[Hashable, list[float]] = {key: [] for key in steps}
    for group in groups:
        keys = [key for key in group if key in steps]
        for r in range(warmup + runs):
            for i in range(len(keys)):
                key = keys[(i + r) % len(keys)]
                t0 = time.perf_counter()
                steps[key]()
                if r >= warmup:
                    samples[key].append(time.perf_counter() - t0)
    return samples
