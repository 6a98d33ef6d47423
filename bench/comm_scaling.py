#!/usr/bin/env python3
"""The parallel LongCat-Flash decode step at 2, 8 and 128 ranks, on paper, from measured costs.

Reads what two measurements printed and applies the model of docs/PERFORMANCE.md ("Scaling on
paper"):

  --comm  JSON written by `mpirun -np 2 sk_bench_comm --json PATH` (one or more runs): the cost of
          a launch boundary around a collective (cut - fused) and the latency and per-byte cost of
          one message round (the one-op all-reduce at 4 KiB and 256 KiB);
  --trace rank 0's Chrome trace of one superkernel-mode decode step of the parallel model:
          `mpirun -np 2 superkernel trace configs/longcat-parallel.yaml --mode superkernel -o PATH`;
          K, the kernels of one layer on one rank (collectives left out), and the share of them
          that runs on the main stream beside the MoE branch.

Each --comm file gives one set of figures (the trace is shared), so two runs show how far the
conclusions move with the machine's noise. Assumptions (stated in the output): gamma, the cost of
posting and completing one non-blocking request, 0.6 us; across machines alpha = 5 us and
10 GB/s. Example:

  mpirun --allow-run-as-root --bind-to none -np 2 build/bench/sk_bench_comm --runs 40 --json build/comm1.json
  mpirun --allow-run-as-root --bind-to none -np 2 build/bin/superkernel trace configs/longcat-parallel.yaml \\
      --mode superkernel -o build/parallel_trace.json
  python3 bench/comm_scaling.py --comm build/comm1.json --trace build/parallel_trace.json
"""

import argparse
import json
import re
import statistics
import sys

GAMMA_US = 0.6  # posting and completing one non-blocking request (assumed; OpenMPI's shared memory)
ALPHA_ACROSS_US = 5.0  # one message round between machines (assumed)
BETA_ACROSS_US_PER_KIB = 0.1  # 10 GB/s between machines (assumed)
RANKS_PER_MACHINE = 8

# One layer's collectives: (name, message rounds, on the MoE stream).
COLLECTIVES = [
    ("all_reduce after o_proj (attention 0)", 2, False),
    ("all_reduce after down_proj (MLP 0)", 2, False),
    ("all_reduce after o_proj (attention 1)", 2, False),
    ("all_reduce after down_proj (MLP 1)", 2, False),
    ("all_to_all_v dispatch", 2, True),
    ("all_to_all_v combine", 2, True),
    ("all_gather of the MoE output", 1, True),
]


def fail(msg):
    print(f"comm_scaling.py: {msg}", file=sys.stderr)
    sys.exit(2)


def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {what} {path}: {e}")


def comm_costs(path):
    """Delta-cut, alpha + gamma and beta from one sk_bench_comm --json file."""
    results = load_json(path, "--comm").get("results", [])
    lat = {(r["bench"], r["mode"]): r["median"] for r in results if r.get("metric") == "latency"}
    benches = sorted({b for b, _ in lat})
    deltas = [lat[(b, "cut")] - lat[(b, "fused")] for b in benches if (b, "cut") in lat and (b, "fused") in lat]
    small, large = "all_reduce/4096B", "all_reduce/262144B"
    for b in (small, large):
        if (b, "alone") not in lat:
            fail(f"{path} has no one-op all-reduce result '{b}': run sk_bench_comm without --quick, which leaves it out")
    if not deltas:
        fail(f"{path} has no fused and cut pair")
    # t(B) = 2 (alpha + gamma) + beta B: two message rounds of B bytes' worth.
    beta = (lat[(large, "alone")] - lat[(small, "alone")]) / (256 - 4)  # us per KiB
    alpha_gamma = max(GAMMA_US, (lat[(small, "alone")] - beta * 4) / 2)
    return {"dcut": statistics.median(deltas), "dcut_range": (min(deltas), max(deltas)),
            "alpha_gamma": alpha_gamma, "beta": beta}


# The main-stream ops that may run beside the MoE branch: everything of the layer after the first
# attention's residual except the MoE itself (the dense MLP, the second attention, the second MLP).
OVERLAP = re.compile(r"\.(mlps\.\d+|self_attn\.1|input_layernorm\.1|post_attention_layernorm\.1|residual\.[1-9])\b")
LAYER = re.compile(r"model\.layers\.(\d+)\.")


def kernel_costs(path):
    """K (us per layer, collectives excluded) and the share of K that overlaps the MoE branch."""
    d = load_json(path, "--trace")
    events = d["traceEvents"] if isinstance(d, dict) else d
    per_layer, overlap, comm = {}, {}, {}
    for e in events:
        if e.get("ph") != "X":
            continue
        name = e.get("name", "")
        m = LAYER.search(name)
        if not m:
            continue
        layer = int(m.group(1))
        if "(comm." in name:
            comm[layer] = comm.get(layer, 0.0) + float(e.get("dur", 0))
            continue
        per_layer[layer] = per_layer.get(layer, 0.0) + float(e.get("dur", 0))
        if OVERLAP.search(name) and ".mlp." not in name:
            overlap[layer] = overlap.get(layer, 0.0) + float(e.get("dur", 0))
    if not per_layer:
        fail(f"{path} holds no kernel of a layer (model.layers.N...): is it a trace of the parallel model?")
    k = statistics.median(per_layer.values())
    share = statistics.median(overlap.get(i, 0.0) / per_layer[i] for i in per_layer)
    # What the collectives took inside the real 2-rank step, waiting for the slower rank included
    # (which the model below leaves out: it assumes the ranks' shares of work are equal).
    traced_comm = statistics.median(comm.get(i, 0.0) for i in per_layer)
    return {"K": k, "overlap": share, "layers": len(per_layer), "traced_comm": traced_comm}


def main_bytes_kib(w, hidden):
    """KiB one rank moves per layer in the all-reduces: W f32 tokens of `hidden` (one per rank)."""
    rows = w * hidden * 4 / 1024
    return 4 * 2 * (w - 1) / w * rows  # each: a reduce-scatter and an all-gather of W rows


def moe_bytes_kib(w, hidden, topk):
    """KiB one rank moves per layer in the MoE branch: its token to and from the experts it chose
    on other ranks (dispatch, combine), and the all-gather of every rank's MoE output."""
    row = hidden * 4 / 1024
    return 2 * topk * row * (w - 1) / w + (w - 1) * row


def step_model(main, moe, k, overlap, dcut, hidden, topk):
    """main, moe: (ranks, alpha, beta) of the tensor-parallel all-reduces and of the MoE branch."""
    (w_main, alpha_main, beta_main), (w_moe, alpha_moe, beta_moe) = main, moe
    rounds_main = sum(r for _, r, on_moe in COLLECTIVES if not on_moe)
    rounds_moe = sum(r for _, r, on_moe in COLLECTIVES if on_moe)
    comm_main = rounds_main * (alpha_main + (w_main - 1) * GAMMA_US) + beta_main * main_bytes_kib(w_main, hidden)
    comm_moe = rounds_moe * (alpha_moe + (w_moe - 1) * GAMMA_US) + beta_moe * moe_bytes_kib(w_moe, hidden, topk)
    fused = k + comm_main + max(0.0, comm_moe - overlap * k)
    cut = k + comm_main + comm_moe + len(COLLECTIVES) * dcut
    return comm_main + comm_moe, comm_moe, fused, cut


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--comm", nargs="+", required=True, help="sk_bench_comm --json files (one row set each)")
    ap.add_argument("--trace", nargs="+", required=True,
                    help="rank 0's superkernel-mode trace of the parallel model: one, or one per --comm file")
    ap.add_argument("--hidden", type=int, default=128, help="hidden size of the activations moved (default 128)")
    ap.add_argument("--topk", type=int, default=2, help="experts per token (default 2)")
    a = ap.parse_args()

    if len(a.trace) not in (1, len(a.comm)):
        fail(f"give one --trace, or one per --comm file ({len(a.comm)}), not {len(a.trace)}")
    traces = a.trace if len(a.trace) == len(a.comm) else a.trace * len(a.comm)
    print(f"assumed: gamma = {GAMMA_US} us per request; across machines alpha = {ALPHA_ACROSS_US} us, "
          f"beta = {BETA_ACROSS_US_PER_KIB} us/KiB; {RANKS_PER_MACHINE} ranks per machine")
    kernels = {trace: kernel_costs(trace) for trace in dict.fromkeys(traces)}
    for run, trace in enumerate(traces, 1):
        kc = kernels[trace]
        print(f"run {run}: K = {kc['K']:.1f} us per layer (kernels of one layer on one rank, collectives left out; "
              f"median of {kc['layers']} layers of {trace}); share of K beside the MoE branch {kc['overlap']:.2f}; "
              f"the collectives took {kc['traced_comm']:.1f} us per layer in that traced 2-rank step, waiting for "
              f"the slower rank included")
    print()
    print("| run | layout | comm per layer (us) | of it MoE (us) | fused (us) | cut (us) | cut / fused |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for run, (path, trace) in enumerate(zip(a.comm, traces), 1):
        kc = kernels[trace]
        cc = comm_costs(path)
        alpha_local = cc["alpha_gamma"] - GAMMA_US
        print(f"| {run} | measured: delta-cut {cc['dcut']:.2f} us (per collective {cc['dcut_range'][0]:.2f}-"
              f"{cc['dcut_range'][1]:.2f}), alpha + gamma {cc['alpha_gamma']:.2f} us, beta {cc['beta']:.3f} us/KiB "
              f"| | | | | |")
        local = (alpha_local, cc["beta"])
        across = (ALPHA_ACROSS_US, BETA_ACROSS_US_PER_KIB)
        per = RANKS_PER_MACHINE
        layouts = [
            ("W = 2, tp = ep = 2", (2, *local), (2, *local)),
            (f"W = {per}, tp = ep = {per} (one machine)", (per, *local), (per, *local)),
            (f"W = 128, tp = ep = 128 ({128 // per} machines)", (128, *across), (128, *across)),
            (f"tp = {per} in a machine, ep = 128 (published)", (per, *local), (128, *across)),
        ]
        for name, main_layout, moe_layout in layouts:
            comm, moe, fused, cut = step_model(main_layout, moe_layout, kc["K"], kc["overlap"], cc["dcut"],
                                               a.hidden, a.topk)
            print(f"| {run} | {name} | {comm:.1f} | {moe:.1f} | {fused:.1f} | {cut:.1f} | {cut / fused:.2f} |")


if __name__ == "__main__":
    main()
