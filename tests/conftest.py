"""Shared fixtures: the ast.parse oracle, the engine's verdicts, standard-library files.

Every test gets a hard time limit (``fimconstrain.time_limit``) so that a hang in
the engine fails the test instead of stalling the run: 600 s by default, or
``@pytest.mark.time_limit(seconds)`` (0: none). Tests marked ``slow`` run by default
(CI runs them too); deselect them locally with ``-m "not slow"``.
"""

from __future__ import annotations

import importlib
import os
import random
import sys
import sysconfig
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from fimconstrain.decoding.loop.oracle import ast_error, ast_parses

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "scripts"))  # helpers kept out of the library (tiny_model, ...)
from time_limit import time_limit  # noqa: E402

EXAMPLES = REPO / "examples"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
DEFAULT_TIME_LIMIT = 600
# The engine's default target is the newest Python (3.14); the oracle of these tests is the
# running interpreter's ast.parse, so the engine helpers here target the running version
# (clamped to the versions the engine knows) to compare like with like.
RUNNING_VERSION = "{}.{}".format(*min(max(sys.version_info[:2], (3, 8)), (3, 14)))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a long test (tens of seconds); runs by default and in CI")
    config.addinivalue_line(
        "markers", "time_limit(seconds): fail the test if it runs longer than this (default 600 s; 0: none)"
    )


@pytest.fixture(autouse=True)
def _time_limit(request):
    """Fail (rather than hang) a test that runs past its limit: TimeLimitExceeded, raised where
    the test was, a BaseException that the code under test's ``except Exception`` lets through."""
    marker = request.node.get_closest_marker("time_limit")
    seconds = marker.args[0] if marker else DEFAULT_TIME_LIMIT
    with time_limit(seconds, "the test"):
        yield


# ---------------------------------------------------------------- oracle and engine


#: the verdict of the running interpreter's ast.parse (warnings silenced)
ast_ok = ast_parses


def ast_message(src: str) -> str:
    """ "accepted", or what the running interpreter's ast.parse raised on ``src``."""
    error = ast_error(src)
    return "accepted" if error is None else f"{type(error).__name__}: {error}"


class _EngineAtRunningVersion:
    """The ``fimconstrain`` module, with ``fim_checker`` targeting ``RUNNING_VERSION`` unless a
    ``python_version`` is given; everything else is the module's."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)

    def fim_checker(self, prefix, suffix="", language="python", python_version=None, should_stop=None):
        return self._module.fim_checker(
            prefix,
            suffix,
            language,
            python_version=RUNNING_VERSION if python_version is None else python_version,
            should_stop=should_stop,
        )


_ENGINE = None


def fc():
    """fimconstrain, its fim_checker targeting the running interpreter's version (see above)."""
    global _ENGINE
    if _ENGINE is None:
        import fimconstrain

        _ENGINE = _EngineAtRunningVersion(fimconstrain)
    return _ENGINE


def uncompletable():
    """What ``fim_checker`` raises when no middle can make the file valid: a file that is wrong
    before the cursor or after it, or one with a character no file may contain."""
    from fimconstrain.engine.errors import InputError, UncompletableError

    return (UncompletableError, InputError)


def feed_ok(src: str) -> bool:
    """The engine's verdict through feed: fim_checker("", "").feed(src)."""
    c = fc().fim_checker("", "").feed(src)
    return c is not None and bool(c.is_complete())


def prefix_ok(src: str) -> bool:
    """The engine's verdict through construction: fim_checker(src, "")."""
    try:
        c = fc().fim_checker(src, "")
    except uncompletable():
        return False
    return bool(c.is_complete())


def chars_ok(src: str) -> bool:
    """The engine's verdict feeding one character at a time (stops at the first None)."""
    c = fc().fim_checker("", "")
    for ch in src:
        c = c.feed(ch)
        if c is None:
            return False
    return bool(c.is_complete())


def first_dead(checker, text: str):
    """Index of the first character of ``text`` after which ``checker`` rejects, or None."""
    for i, ch in enumerate(text):
        nxt = checker.feed(ch)
        if nxt is None:
            return i
        checker = nxt
    return None


def where(text: str, offset: int) -> str:
    """'line L col C: <source line with a marker>' for failure messages."""
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    end = len(text) if end < 0 else end
    return f"line {line} col {offset - start + 1}: {text[start:offset]!r} ⟦here⟧ {text[offset:end]!r}"


def feed_random_chunks(checker, text: str, rng: random.Random, lo: int = 1, hi: int = 8):
    """Feed ``text`` in random chunks; return (final checker or None, offset of the rejected chunk or
    None)."""
    pos = 0
    while pos < len(text):
        k = rng.randint(lo, hi)
        nxt = checker.feed(text[pos : pos + k])
        if nxt is None:
            return None, pos
        checker, pos = nxt, pos + k
    return checker, None


# ---------------------------------------------------------------- files


def stdlib_py_files() -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(STDLIB):
        dirnames[:] = sorted(
            d for d in dirnames if d not in ("site-packages", "dist-packages", "__pycache__")
        )
        out.extend(Path(dirpath) / f for f in filenames if f.endswith(".py"))
    return sorted(out)


def read_utf8(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def sample_stdlib(
    n: int, max_bytes: int, seed: int, *, min_bytes: int = 0, valid_only: bool = True
) -> list[Path]:
    """A deterministic sample of decodable standard-library files in a size range."""
    files = [f for f in stdlib_py_files() if min_bytes <= f.stat().st_size <= max_bytes]
    rng = random.Random(seed)
    rng.shuffle(files)
    out = []
    for f in files:
        text = read_utf8(f)
        if text is None or (valid_only and not ast_ok(text)):
            continue
        out.append(f)
        if len(out) >= n:
            break
    return sorted(out)


@pytest.fixture(scope="session")
def engine():
    """The helpers above as one object, for tests that prefer a fixture."""
    return SimpleNamespace(
        fc=fc(),
        ast_ok=ast_ok,
        ast_message=ast_message,
        feed_ok=feed_ok,
        prefix_ok=prefix_ok,
        chars_ok=chars_ok,
        first_dead=first_dead,
        where=where,
        feed_random_chunks=feed_random_chunks,
        Uncompletable=uncompletable(),
    )


@pytest.fixture(scope="session")
def load_script():
    """Import a file of ``scripts/`` (not a package; the folder is on ``sys.path``) by its name, once."""

    def load(name: str) -> ModuleType:
        return importlib.import_module(name)

    return load


# ---------------------------------------------------------------- toolchains


def missing(reason: str) -> None:
    """A toolchain or model a test needs is absent: skip, except under CI (the ``CI`` variable
    set), where ``.ci/run`` installs it and its absence fails the test."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def require_llama_cpp():
    """The ``llama_cpp`` module (``scripts/llama_toolchain.sh`` installs it), or :func:`missing`."""
    try:
        import llama_cpp
    except ImportError:
        missing("llama-cpp-python is not installed (bash scripts/llama_toolchain.sh installs it)")
    return llama_cpp
