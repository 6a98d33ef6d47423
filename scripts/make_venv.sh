#!/usr/bin/env bash
# Creates (or brings up to date) the project's Python environment: make_venv.sh VENV REQUIREMENTS.
# The torch wheel pulls about 3 GB of CUDA libraries that stay unused on a CPU machine. uv (from
# PyPI, pinned here) downloads and unpacks them in parallel: on a busy 2-core machine a fresh
# environment took 6 minutes with uv against more than 15 with pip. Later runs only check the
# stamp (see the Makefile).
set -euo pipefail
venv="$1"
requirements="$2"
uv_version=0.13.9
if [ ! -x "$venv/bin/python" ]; then
  echo "make_venv: creating $venv (torch and transformers from PyPI: several minutes the first time)" >&2
  python3 -m venv "$venv"
fi
if [ "$("$venv/bin/python" -m uv --version 2>/dev/null)" != "uv $uv_version" ]; then
  "$venv/bin/python" -m pip install --quiet --progress-bar off "uv==$uv_version"
fi
echo "make_venv: installing $requirements into $venv" >&2
"$venv/bin/python" -m uv pip install --quiet --python "$venv/bin/python" -r "$requirements"
touch "$venv/.requirements-stamp"
