#!/usr/bin/env bash
# The pinned llama.cpp binding of the GGUF backend (fimconstrain/decoding/runtimes/llama_backend.py):
# llama-cpp-python from PyPI, which is a source distribution only, built once into a wheel that is
# cached outside the repository and then installed into the given interpreter's environment.
#
#   bash scripts/llama_toolchain.sh [PYTHON]
#
# The build is portable (GGML_NATIVE=OFF: no -march=native, so the wheel runs on any x86-64 the
# cache travels to) and takes 10-20 minutes on 2 cores; cached, the install takes seconds. The
# wheel lives in ${FIMCONSTRAIN_LLAMA_CACHE:-$HOME/.cache/fimconstrain-llama}/wheels, named by
# the pin and the interpreter version (the stamp file `complete` names both). PYTHON defaults to
# .venv/bin/python, else python3. Prints the installed wheel on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA=llama-cpp-python==0.3.36
CACHE="${FIMCONSTRAIN_LLAMA_CACHE:-$HOME/.cache/fimconstrain-llama}"
PYTHON="${1:-}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
PYVER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
STAMP="$LLAMA python$PYVER GGML_NATIVE=OFF"
WHEELS="$CACHE/wheels-python$PYVER"

say() { echo "llama-toolchain: $*" >&2; }

if ! [[ -f "$CACHE/complete-python$PYVER" && "$(cat "$CACHE/complete-python$PYVER")" == "$STAMP" ]]; then
    start=$SECONDS
    say "building $LLAMA for python$PYVER (portable, about 10-20 minutes on 2 cores)"
    # build into a fresh directory, then move it into place: an interrupted build never looks complete
    BUILD="$WHEELS.partial.$$"
    rm -rf "$BUILD"
    mkdir -p "$BUILD"
    trap 'rm -rf "$BUILD"' EXIT
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF" \
        CMAKE_BUILD_PARALLEL_LEVEL="$(nproc 2>/dev/null || echo 2)" \
        "$PYTHON" -m pip wheel --quiet --no-deps --no-cache-dir --wheel-dir "$BUILD" "$LLAMA" >&2
    rm -rf "$WHEELS"
    mv "$BUILD" "$WHEELS"
    trap - EXIT
    echo "$STAMP" >"$CACHE/complete-python$PYVER"
    say "built in $((SECONDS - start)) s"
fi

WHEEL="$(ls "$WHEELS"/llama_cpp_python-*.whl)"
# its Python dependencies (numpy, typing-extensions, diskcache, jinja2) come from PyPI as usual
"$PYTHON" -m pip install --quiet "$WHEEL" >&2
say "installed $(basename "$WHEEL") into $PYTHON"
echo "$WHEEL"
