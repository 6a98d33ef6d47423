#!/usr/bin/env python3
"""Checks a superkernel trace against the Chrome trace-event format: every event has ph, pid and
tid; slices have ts and a non-negative dur; every flow id has exactly one start and one finish;
the expected number of processes (one per mode) and at least one wait; no flow arrow points back
in time (its finish, where the waiting core proceeds, is not before its start, the signal)."""
import json
import sys

path, processes = sys.argv[1], int(sys.argv[2])
events = json.load(open(path))["traceEvents"]
pids, flows, flow_ts, waits, slices = set(), {}, {}, 0, 0
for e in events:
    for key in ("ph", "pid", "tid"):
        assert key in e, f"event without {key}: {e}"
    pids.add(e["pid"])
    if e["ph"] == "M":
        continue
    assert isinstance(e["ts"], (int, float)), e
    if e["ph"] == "X":
        slices += 1
        assert e["dur"] >= 0, e
        assert e["name"], e
        waits += e["cat"] == "wait"
    else:
        assert e["ph"] in ("s", "f"), e
        flows.setdefault(e["id"], []).append(e["ph"])
        flow_ts.setdefault(e["id"], {})[e["ph"]] = e["ts"]
assert len(pids) == processes, f"{len(pids)} processes, expected {processes}"
assert slices > 0, "no slices"
assert waits > 0, "no waits"
for fid, phases in flows.items():
    assert sorted(phases) == ["f", "s"], f"flow {fid}: {phases}"
assert len(flows) == waits, f"{len(flows)} flows for {waits} waits"
backwards = [fid for fid, ts in flow_ts.items() if ts["f"] < ts["s"]]
assert not backwards, f"{len(backwards)} of {len(flows)} arrows point back in time, e.g. flow {backwards[0]}"
print(f"ok: {slices} slices, {waits} waits, {len(flows)} flows, {len(pids)} processes")
