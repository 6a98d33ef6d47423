#!/usr/bin/env bash
# The main job of `make demo`: LongCat-Flash decode (configs/longcat-mini.yaml, every op small, so
# dispatch dominates) in the eager, graph and superkernel modes side by side, with their outputs
# checked bit for bit, then what the compiler made of the fusion scopes.
# The dispatch micro-benchmark moved to `make bench`.
set -euo pipefail
build=${1:-build}
config=${SK_DEMO_CONFIG:-configs/longcat-mini.yaml}

echo "== superkernel bench $config =="
"$build/bin/superkernel" bench "$config" --json "$build/bench_longcat_mini.json"
echo
echo "== superkernel explain $config (layer 0) =="
"$build/bin/superkernel" explain "$config" --quiet | sed -n '1,/^layer 1:/p' | sed '$d'
echo
echo "JSON: $build/bench_longcat_mini.json; every layer and per-core programs: $build/bin/superkernel explain $config"
