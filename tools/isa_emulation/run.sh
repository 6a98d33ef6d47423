#!/usr/bin/env bash
# Runs the built-in kernels' AVX-512 paths under the Bochs CPU emulator and checks them against
# the reference implementations (tools/isa_emulation/README.md). Usage: run.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
venv=$BUILD/isa-emulation-venv
if [ ! -x "$venv/bin/python" ]; then
  echo "isa-emulation: creating $venv with bochscpu-python 0.4.0 from PyPI"
  if ! python3 -m venv "$venv"; then
    echo "isa-emulation: python3 -m venv failed; on Debian install python3-venv" >&2
    exit 1
  fi
  "$venv/bin/pip" install --quiet bochscpu-python==0.4.0
fi
# The wheel is linked against glibc >= 2.38; older ones need two C23 entry points preloaded.
preload=""
if ! "$venv/bin/python" -c "import bochscpu" 2>/dev/null; then
  preload="$BUILD/tools/isa_emulation/libglibc_c23_compat.so"
fi
# LD_BIND_NOW resolves every PLT slot up front, so emulated code never enters the dynamic linker.
# The binding library reports "leaked" objects at exit; they are its own and harmless.
LD_BIND_NOW=1 LD_PRELOAD="$preload" "$venv/bin/python" "$here/run.py" "$BUILD" 2> >(grep -v "leaked" >&2)
