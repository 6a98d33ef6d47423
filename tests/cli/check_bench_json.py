#!/usr/bin/env python3
"""Checks what `superkernel bench --json` says about the machine and the bounds, without timing:
machine.cores is the number of CPUs the process may use (not the one CPU the launching thread is
pinned to); the STREAM triad ran on the runtime's cores; every mode's "outside kernels" share is
a share (0 to 1: kernel time measured inside the same traced step cannot exceed it)."""
import json
import os
import sys

path, runtime_cores = sys.argv[1], int(sys.argv[2])
doc = json.load(open(path))
cpus = len(os.sched_getaffinity(0))
assert doc["machine"]["cores"] == cpus, f"machine.cores {doc['machine']['cores']}, the process may use {cpus}"
results = doc["results"]
triad = [r for r in results if r["bench"] == "stream_triad"]
assert len(triad) == 1 and triad[0]["cores"] == runtime_cores, f"triad: {triad}"
modes = {}
for r in results:
    if r["metric"] == "outside_kernels_fraction":
        modes[r["mode"]] = r["median"]
        assert 0.0 <= r["median"] <= 1.0, f"outside kernels of {r['mode']}: {r['median']}"
    assert r["metric"] != "overhead_fraction", "the isolated-kernel overhead is gone"
assert sorted(modes) == ["eager", "graph", "superkernel"], modes
kernel = {r["mode"]: r["median"] for r in results if r["metric"] == "traced_kernel_time"}
step = {r["mode"]: r["median"] for r in results if r["metric"] == "traced_step_latency"}
for mode in modes:
    assert 0 < kernel[mode] <= step[mode], f"{mode}: kernel {kernel[mode]} ms of a {step[mode]} ms step"
print(f"ok: machine.cores {cpus}, triad on {runtime_cores} cores, outside kernels {modes}")
