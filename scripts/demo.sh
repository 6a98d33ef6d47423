#!/usr/bin/env bash
# The main job of `make demo`: a small graph in every mode, what the compiler does with fusion
# scopes, and the dispatch benchmark (eager vs graph vs superkernel) with its JSON.
set -euo pipefail
build=${1:-build}

echo "== hello: one graph, three execution modes =="
"$build/examples/sk_example_hello_graph"
echo
echo "== explain: segments, cut reasons and per-core programs =="
"$build/examples/sk_example_explain_scopes"
echo
echo "== dispatch benchmark (ns per node, median; lower is better) =="
"$build/bench/sk_bench_dispatch" --runs 11 --json "$build/bench_dispatch.json"
