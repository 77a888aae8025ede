#!/usr/bin/env bash
# The constraint's share of a real-sized model's step on a lent GPU machine, with the native
# engine built there by the machine's own compiler: benchmarks/model_timing.py at batch 1 (the
# decode loop), 16 and 64 (the serving checker), SantaCoder's and StarCoder2-3B's architectures
# with random weights (docs/serving.md, "Timing real model sizes"). Nothing is fetched there.
#
# Here, once (the image has torch and transformers; lark, mypy, whose mypyc compiles the engine,
# setuptools and tqdm travel as wheels for its Python, 3.12):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       -d .whl lark==1.3.1 mypy==2.4.1 setuptools==84.2.1 tqdm==4.67.1
# The device call (the device tool's run; the timing stops after SECONDS_LEFT, 9 minutes):
#   command: bash scripts/gpu_timing.sh      carry: [".whl"]      timeout_s: 600
# Its files: model_timing.json (the figures, and which engine ran) and timing.log.
#
# A CPU check here (PYTHON: an interpreter with the project's model extra; OUT: any folder):
#   OUT=/tmp/t PYTHON=.venv/bin/python DEVICE=cpu BATCHES="1 2" TIMING_ARGS="--tiny --cuts 2 --tokens 8" \
#       bash scripts/gpu_timing.sh
set -euo pipefail
cd "$(dirname "$0")/.."

: "${OUT:?OUT: the folder whose files come back (the device tool sets it)}"
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
BATCHES=${BATCHES:-1 16 64}
TIMING_ARGS=${TIMING_ARGS:---cuts 4}  # (4 real cuts at batch 1, cycled to fill the batches)
SECONDS_LEFT=${SECONDS_LEFT:-540}  # the timing's limit: the call stays under the tool's 10 minutes
log="$OUT"/timing.log

if [ -d .whl ]; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/fimconstrain-site .whl/*.whl
    export PYTHONPATH=/tmp/fimconstrain-site${PYTHONPATH:+:$PYTHONPATH}
fi
{
    echo "== $("$PYTHON" --version), $(cc --version | head -1)"
    # the engine in place, as an editable install builds it: mypyc's modules and each C extension
    # on its own (a build that fails leaves its Python twin, and the line below says which runs)
    "$PYTHON" setup.py -q build_ext --inplace
    "$PYTHON" -c 'import fimconstrain; print("== engine:", fimconstrain.ENGINE_BUILD)'
} 2>&1 | tee "$log"
# shellcheck disable=SC2086  # (the batches and extra arguments are words)
timeout "$SECONDS_LEFT" "$PYTHON" benchmarks/model_timing.py --device "$DEVICE" --batches $BATCHES \
    $TIMING_ARGS --out "$OUT"/model_timing.json 2>&1 | tee -a "$log"
