"""The VS Code extension (``vscode-extension/``): built, unit-tested and packaged as CI would.

One module-scoped fixture runs, in ``vscode-extension/``: ``npm ci``, ``npm run compile``,
``npm test`` (node:test; with FIMCONSTRAIN_TEST_PYTHON set, its server test starts
``python -m lsp_server`` with the extension's settings) and ``npm run package``; the tests
then read the produced ``.vsix``.  Skipped without npm, or with a Node.js older than 20
(@vscode/vsce 3 needs 20).  ``npm ci`` needs the npm registry.

``test_settings_match_the_server`` needs no npm: it checks the settings the extension
declares against ``lsp_server.config``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "vscode-extension"
MANIFEST = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))

#: settings the extension reads itself; all the others are the server's (lsp_server/config.py)
CLIENT_SETTINGS = {"enable", "interpreter", "debounceMs", "trace.server"}
COMMANDS = {
    "fimconstrain.restartServer",
    "fimconstrain.toggle",
    "fimconstrain.triggerInlineCompletion",
    "fimconstrain.showOutput",
    "fimconstrain.getModel",
}


def _settings() -> dict[str, dict]:
    """Declared settings by key without the ``fimconstrain.`` prefix."""
    properties = MANIFEST["contributes"]["configuration"]["properties"]
    return {name.removeprefix("fimconstrain."): schema for name, schema in properties.items()}


def test_settings_match_the_server():
    from lsp_server.config import MODES, MULTILINE, Settings

    server_defaults = Settings().to_dict()
    declared = {key: schema for key, schema in _settings().items() if key not in CLIENT_SETTINGS}
    # every server setting but `languages` (the extension only sends Python documents)
    assert set(declared) == set(server_defaults) - {"languages"}
    for key, schema in declared.items():
        # the settings UI spells "the server's default" "" or 0; the extension sends null for it
        default = schema["default"]
        if default == "" or (default == 0 and schema["type"] == "integer"):
            default = None
        assert default == server_defaults[key], key
    assert declared["mode"]["enum"] == list(MODES)
    assert declared["multiline"]["enum"] == list(MULTILINE)
    from fimconstrain.decoding.editor.python_version import CHOICES

    assert declared["pythonVersion"]["enum"] == list(CHOICES)
    from fimconstrain.decoding.tokens.fim_formats import FORMATS

    assert set(declared["fimFormat"]["enum"]) == {""} | set(FORMATS)


# ---------------------------------------------------------------- the npm build


def _node_major() -> int | None:
    try:
        out = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return None
    match = re.match(r"v(\d+)\.", out.strip())
    return int(match.group(1)) if match else None


def _run(cmd: list[str], env: dict[str, str], timeout: int) -> str:
    """Run an npm command in vscode-extension/; its output, or a test failure with the output's tail."""
    done = subprocess.run(
        cmd, cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {done.returncode}:\n{output[-4000:]}", pytrace=False)
    return output


def _server_importable() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("pygls", "lsp_server"))


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (the VS Code extension needs Node.js >= 20 and npm)")
    major = _node_major()
    if major is None or major < 20:
        pytest.skip(f"Node.js {major or 'unknown'} is too old: @vscode/vsce 3 needs Node.js >= 20")
    env = dict(
        os.environ, npm_config_audit="false", npm_config_fund="false", npm_config_update_notifier="false"
    )
    if _server_importable():  # lets the node test start the real server with this interpreter
        env["FIMCONSTRAIN_TEST_PYTHON"] = sys.executable
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    vsix = tmp_path_factory.mktemp("vsix") / "fimconstrain.vsix"
    _run([npm, "ci"], env, timeout=600)
    _run([npm, "run", "compile"], env, timeout=300)
    tests = _run([npm, "test"], env, timeout=300)
    _run([npm, "run", "package", "--", "--out", str(vsix)], env, timeout=300)
    return SimpleNamespace(tests=tests, vsix=vsix, server_test="FIMCONSTRAIN_TEST_PYTHON" in env)


def _count(output: str, what: str) -> int:
    match = re.search(rf"^# {what} (\d+)$", output, re.M)
    assert match, f"no '# {what}' line in the node test output:\n{output[-3000:]}"
    return int(match.group(1))


def test_node_unit_tests_pass(build):
    assert _count(build.tests, "fail") == 0
    assert _count(build.tests, "pass") >= 25
    # the server test is skipped only where this Python cannot run the server
    assert _count(build.tests, "skipped") == (0 if build.server_test else 1)


def test_vsix_holds_the_bundled_extension(build):
    with zipfile.ZipFile(build.vsix) as vsix:
        names = set(vsix.namelist())
        bundle = vsix.read("extension/out/extension.js").decode("utf-8")
    assert {
        "extension/package.json",
        "extension/out/extension.js",
        "extension/LICENSE.txt",
        "extension/readme.md",
        "extension.vsixmanifest",
    } <= names
    # one file of code: no sources, tests, source maps or node_modules
    assert not [n for n in names if n.startswith("extension/") and n.endswith((".ts", ".map"))]
    assert not [n for n in names if "/node_modules/" in n or "/out/tests/" in n or "/src/" in n]
    # vscode-languageclient is inside the bundle (it speaks LSP 3.18 inline completion) ...
    assert "textDocument/inlineCompletion" in bundle
    # ... so the bundle needs nothing at run time but VS Code's API and Node.js' own modules
    builtins = json.loads(
        subprocess.run(
            ["node", "-p", "JSON.stringify(require('module').builtinModules)"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    )
    required = set(re.findall(r"""\brequire\(["']([^"']+)["']\)""", bundle))
    assert "vscode" in required
    assert required - {"vscode"} <= set(builtins) | {f"node:{b}" for b in builtins}, required


def test_vsix_manifest_declares_commands_settings_and_activation(build):
    with zipfile.ZipFile(build.vsix) as vsix:
        manifest = json.loads(vsix.read("extension/package.json"))
    assert manifest["main"] == "./out/extension.js"
    assert manifest["activationEvents"] == ["onLanguage:python"]
    assert manifest["engines"]["vscode"].startswith("^1.")
    contributes = manifest["contributes"]
    assert {c["command"] for c in contributes["commands"]} == COMMANDS
    assert "fimconstrain.triggerInlineCompletion" in {k["command"] for k in contributes["keybindings"]}
    settings = {name.removeprefix("fimconstrain.") for name in contributes["configuration"]["properties"]}
    assert {"enable", "interpreter", "debounceMs", "model", "device", "mode", "maxTokens"} <= settings
    version = re.match(r"[\^~]?(\d+)\.(\d+)\.(\d+)", manifest["dependencies"]["vscode-languageclient"])
    assert version and tuple(map(int, version.groups())) >= (10, 0, 1)  # inline completion on by default
