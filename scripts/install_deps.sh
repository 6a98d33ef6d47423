#!/usr/bin/env bash
# Installs the Debian packages the build needs, only when something is missing.
#   g++ cmake make       the toolchain
#   googletest libgtest-dev libgmock-dev   tests
#   libdnnl-dev          oneDNN, the matmul reference point of sk_bench_kernels (optional)
#   libyaml-dev          model config files
#   libyaml-cpp-dev      the superkernel CLI's YAML configs (src/config)
#   chromium             renders the HTML report in the report test (optional; the test is skipped without it)
#   libcli11-dev         the superkernel CLI's command line (tools/superkernel)
#   python3-numpy        the reference implementation the model numerics test compares against
#   clang libclang-rt-14-dev   make test's fuzz phase: clang and its libFuzzer and sanitizer runtimes
#   python3-venv         the project's Python environment (make venv: torch, transformers)
#   python3-dev          Python's headers, for the Python package's extension module (python/)
#   libxbyak-dev         the x86-64 JIT backend's code generator (header-only)
#   openmpi-bin libopenmpi-dev   the MPI collectives (src/comm) and their tests under mpirun
set -euo pipefail

required=(g++ cmake make libgtest-dev libgmock-dev libyaml-dev libyaml-cpp-dev libcli11-dev python3-numpy clang libclang-rt-14-dev libxbyak-dev python3-venv python3-dev openmpi-bin libopenmpi-dev)
optional=(libdnnl-dev chromium)

missing=()
for pkg in "${required[@]}" "${optional[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install_deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Required packages must install; optional ones may be unavailable on some mirrors.
req_missing=()
for pkg in "${missing[@]}"; do
  [[ " ${optional[*]} " == *" $pkg "* ]] || req_missing+=("$pkg")
done
if ((${#req_missing[@]})); then
  $SUDO apt-get install -y -qq --no-install-recommends "${req_missing[@]}"
fi
for pkg in "${optional[@]}"; do
  if [[ " ${missing[*]} " == *" $pkg "* ]]; then
    $SUDO apt-get install -y -qq --no-install-recommends "$pkg" ||
      echo "install_deps: optional package $pkg unavailable; continuing without it"
  fi
done
