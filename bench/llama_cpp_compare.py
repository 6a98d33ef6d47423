"""Our decode and prefill tokens/s beside llama.cpp's on the same weights, in interleaved rounds.

    python3 bench/llama_cpp_compare.py --config bench-llama-1024.yaml \
        --llama-bench /tmp/llama-build/bin/llama-bench \
        --gguf f32=/tmp/cmp/llama-1024-f32.gguf --gguf w4a8=/tmp/cmp/llama-1024-q4_0.gguf \
        --threads 1,2 --pp 512 --rounds 3

Each round runs, for every weight type and thread count, our
`superkernel bench CONFIG --dtype TYPE --threads N [--pp P] --format llama-bench -q` and
`llama-bench -m GGUF -t N -p P -n TG -r REPS` on the GGUF file given for that type, the two in
alternating order from round to round, so that a slow spell of a shared machine falls on both.
A single run of each side, even a quiet one, moves by 10-20 % on a small VM; the ratio of two
runs taken seconds apart moves much less. The table gives, per (type, threads, test), both
sides' median tokens/s over the rounds, the median of the per-round ratios (ours / llama.cpp)
and their range.

TYPE is our weight type (`f32`, `bf16`, `f16`, `w8a8`, `w4a8`, `w4`); the GGUF file is the one a
user would compare with (F32, BF16, F16, Q8_0, Q4_0). Tests: our `tg @ dD` (one decode step at
depth D) against llama-bench's `tgN` (N steps from an empty cache), `ppN` against `ppN`.
llama.cpp is built by hand outside the repository (docs/PERFORMANCE.md, "Setup").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checked_write import check_writable, json_exit_code  # noqa: E402

OUR_TYPES = ("f32", "bf16", "f16", "w8a8", "w4a8", "w4")


class CompareError(Exception):
    pass


def parse_table(text: str, source: str) -> dict[tuple[int, str], float]:
    """{(threads, test kind): mean t/s} from a llama-bench-style markdown table.

    The test kind is "tg" for any decode test (ours `tg @ d64`, llama-bench's `tg64`) and the
    test's own name for prefill (`pp512`). Columns are found by the header row's names.
    """
    rows: dict[tuple[int, str], float] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            if "threads" in cells and "test" in cells and "t/s" in cells:
                header = cells
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue  # the separator row
        if len(cells) != len(header):
            raise CompareError(f"{source}: a table row has {len(cells)} cells, the header {len(header)}: {line}")
        row = dict(zip(header, cells))
        test = row["test"]
        kind = "tg" if test.startswith("tg") else test
        try:
            threads = int(row["threads"])
            tps = float(row["t/s"].split("±")[0])
        except ValueError as e:
            raise CompareError(f"{source}: cannot read threads / t/s in: {line}") from e
        rows[(threads, kind)] = tps
    if header is None:
        raise CompareError(f"{source}: no table with 'threads', 'test' and 't/s' columns in its output:\n"
                           + text[-2000:])
    return rows


def run(cmd: list[str], source: str) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:
        raise CompareError(f"{source}: cannot run {cmd[0]}: {e}") from e
    if done.returncode != 0:
        raise CompareError(f"{source}: {' '.join(cmd)} exited with {done.returncode}:\n"
                           + (done.stderr or done.stdout)[-2000:])
    return done.stdout


@dataclass
class Cell:
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)


def parse_gguf_args(values: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for v in values:
        dtype, sep, path = v.partition("=")
        if not sep or not path:
            raise CompareError(f"--gguf {v}: expected TYPE=PATH, e.g. w4a8=/tmp/cmp/llama-1024-q4_0.gguf")
        if dtype not in OUR_TYPES:
            raise CompareError(f"--gguf {v}: unknown weight type '{dtype}' (expected one of {', '.join(OUR_TYPES)})")
        if not os.path.isfile(path):
            raise CompareError(f"--gguf {v}: no such file: {path}")
        if any(d == dtype for d, _ in pairs):
            raise CompareError(f"--gguf {v}: weight type '{dtype}' given twice")
        pairs.append((dtype, path))
    if not pairs:
        raise CompareError("no --gguf TYPE=PATH given: nothing to compare")
    return pairs


def parse_threads(text: str) -> list[int]:
    try:
        threads = [int(t) for t in text.split(",")]
    except ValueError as e:
        raise CompareError(f"--threads {text}: expected a comma-separated list of thread counts") from e
    if not threads or any(t < 1 for t in threads):
        raise CompareError(f"--threads {text}: thread counts must be >= 1")
    return threads


def compare(args: argparse.Namespace) -> tuple[list[dict], str]:
    ggufs = parse_gguf_args(args.gguf)
    threads = parse_threads(args.threads)
    for path, what in ((args.superkernel, "--superkernel"), (args.llama_bench, "--llama-bench")):
        if not os.access(path, os.X_OK):
            raise CompareError(f"{what} {path}: not an executable file")
    if not os.path.isfile(args.config):
        raise CompareError(f"--config {args.config}: no such file")
    if args.rounds < 1 or args.tg < 1 or args.llama_reps < 1 or args.pp < 0:
        raise CompareError("--rounds, --tg and --llama-reps must be >= 1 and --pp >= 0")
    thread_list = ",".join(str(t) for t in threads)
    cells: dict[tuple[str, int, str], Cell] = {}
    for r in range(args.rounds):
        for dtype, gguf in ggufs:
            ours_cmd = [args.superkernel, "bench", args.config, "--dtype", dtype, "--threads", thread_list,
                        "--format", "llama-bench", "-q"]
            if args.pp > 0:
                ours_cmd += ["--pp", str(args.pp)]
            if args.runs > 0:
                ours_cmd += ["--runs", str(args.runs)]
            theirs_cmd = [args.llama_bench, "-m", gguf, "-t", thread_list, "-p", str(args.pp), "-n", str(args.tg),
                          "-r", str(args.llama_reps)]
            sides = [("ours", ours_cmd), ("llama.cpp", theirs_cmd)]
            if r % 2 == 1:
                sides.reverse()
            tables = {}
            for name, cmd in sides:
                print(f"round {r + 1}/{args.rounds}: {dtype} {name}", file=sys.stderr, flush=True)
                tables[name] = parse_table(run(cmd, f"{name} ({dtype})"), f"{name} ({dtype})")
            # Both sides ran the same tests and thread counts: a row on one side only is an error.
            for side, other in (("ours", "llama.cpp"), ("llama.cpp", "ours")):
                for key in sorted(set(tables[side]) - set(tables[other])):
                    raise CompareError(f"{other} ({dtype}): no {key[1]} row at {key[0]} threads in its table "
                                       f"(the {side} table has one)")
            for key, ours in sorted(tables["ours"].items()):
                theirs = tables["llama.cpp"][key]
                if theirs <= 0:
                    raise CompareError(f"llama.cpp ({dtype}): {key[1]} at {key[0]} threads reports {theirs} t/s")
                cell = cells.setdefault((dtype, key[0], key[1]), Cell())
                cell.ours.append(ours)
                cell.theirs.append(theirs)
                cell.ratios.append(ours / theirs)
    gguf_of = dict(ggufs)
    rows = []
    for (dtype, t, kind), c in cells.items():
        rows.append({
            "weights": dtype,
            "gguf": os.path.basename(gguf_of[dtype]),
            "threads": t,
            "test": kind,
            "ours_tps": c.ours,
            "llama_cpp_tps": c.theirs,
            "ratios": c.ratios,
            "ours_median": statistics.median(c.ours),
            "llama_cpp_median": statistics.median(c.theirs),
            "ratio_median": statistics.median(c.ratios),
        })
    order = {d: i for i, (d, _) in enumerate(ggufs)}
    rows.sort(key=lambda x: (order[x["weights"]], x["test"] != "tg", x["test"], x["threads"]))
    lines = [
        "| weights | GGUF | threads | test | ours t/s | llama.cpp t/s | ours / llama.cpp | range |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    for x in rows:
        ratio = f"{x['ratio_median']:.2f}"
        if x["ratio_median"] < 1.0:
            ratio = f"**{ratio}**"
        lines.append(f"| {x['weights']} | {x['gguf']} | {x['threads']} | {x['test']} | {x['ours_median']:.2f} | "
                     f"{x['llama_cpp_median']:.2f} | {ratio} | {min(x['ratios']):.2f}-{max(x['ratios']):.2f} |")
    lines.append("")
    lines.append(f"medians of {args.rounds} interleaved rounds; ours: `tg @ dD` (one decode step at depth D) and "
                 f"ppN, llama.cpp: tg{args.tg} and ppN (each side's t/s is its own mean over its repetitions); "
                 "ratio = ours / llama.cpp per round, bold below 1")
    return rows, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True,
                   help="our YAML config (model.checkpoint: the weights the GGUF files hold)")
    p.add_argument("--llama-bench", required=True, help="path of a llama-bench built by hand")
    p.add_argument("--gguf", action="append", default=[], metavar="TYPE=PATH",
                   help="our weight type and the GGUF file to hold it against (repeatable, in table order)")
    p.add_argument("--superkernel", default=os.path.join(here, "..", "build", "bin", "superkernel"),
                   help="the superkernel CLI (default: build/bin/superkernel)")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    p.add_argument("--pp", type=int, default=512,
                   help="prompt tokens of the prefill test; 0: decode only (default 512)")
    p.add_argument("--tg", type=int, default=64, help="llama-bench's decode steps per repetition, -n (default 64)")
    p.add_argument("--llama-reps", type=int, default=3, help="llama-bench's repetitions, -r (default 3)")
    p.add_argument("--runs", type=int, default=0, help="our decode runs per round (default: the config's bench.runs)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--json", help="also write every round's figures here")
    args = p.parse_args(argv)
    try:
        if args.json:
            check_writable(args.json)
    except OSError as e:
        print(f"llama_cpp_compare: --json: {e}", file=sys.stderr)
        return 2
    try:
        rows, table = compare(args)
    except CompareError as e:
        print(f"llama_cpp_compare: {e}", file=sys.stderr)
        return 2
    print(table)
    if args.json:
        return json_exit_code(args.json, {"rounds": args.rounds, "rows": rows}, "llama_cpp_compare")
    return 0


if __name__ == "__main__":
    sys.exit(main())
