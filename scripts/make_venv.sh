#!/usr/bin/env bash
# Creates (or brings up to date) the project's Python environment: make_venv.sh VENV REQUIREMENTS.
# The torch wheel pulls about 3 GB of CUDA libraries that stay unused on a CPU machine, so the
# first install takes several minutes; later runs only check the stamp (see the Makefile).
set -euo pipefail
venv="$1"
requirements="$2"
if [ ! -x "$venv/bin/python" ]; then
  echo "make_venv: creating $venv (torch and transformers from PyPI: several minutes the first time)" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
echo "make_venv: installing $requirements into $venv" >&2
"$venv/bin/python" -m pip install --quiet --progress-bar off -r "$requirements"
touch "$venv/.requirements-stamp"
