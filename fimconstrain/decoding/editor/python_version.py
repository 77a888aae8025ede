"""Which Python version a file is completed as, for every caller (the editor, ``fimconstrain
complete``, the evaluation): one setting, read the same way.

``"3.8"`` .. ``"3.14"``: that version. ``"auto"`` (the default): the lower bound of
``requires-python`` in the ``[project]`` table of the nearest ``pyproject.toml`` above the
file (the convention ruff uses; Poetry's ``[tool.poetry.dependencies] python`` when
there is no ``[project] requires-python``), clamped into 3.8 .. 3.14; the newest when
there is no such file, no such key, or no lower bound in it.

A file is never refused for its version: if it does not parse at the chosen version but does
at a newer one, it is completed as the newest version that works (:func:`newest_accepting`;
the editor's policy, :mod:`.policy`, applies it), and the server says so in its log and status.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...engine.checker import fim_checker
from ...engine.errors import FimConstrainError, Interrupted
from ...engine.versions import (
    NEWEST,
    OLDEST,
    SUPPORTED,
    PythonVersion,
    format_version,
    parse_python_version,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (pyproject: tomli; python_version<'3.11')
    import tomli as tomllib

log = logging.getLogger(__name__)

AUTO = "auto"
PYPROJECT = "pyproject.toml"
#: setting values, as the extension offers them
CHOICES = (AUTO, *(format_version(v) for v in SUPPORTED))


def normalize_setting(value) -> str:
    """``"auto"`` or ``"3.12"`` (from ``"3.12"``, ``" 3.12 "``, ``"AUTO"``); ValueError otherwise.
    Numbers are refused: JSON's 3.10 is 3.1."""
    if isinstance(value, str):
        if value.strip().lower() == AUTO:
            return AUTO
        try:
            return format_version(parse_python_version(value))
        except Exception:
            pass
    raise ValueError(
        f'expected "auto" or a Python version from {format_version(OLDEST)} to '
        f'{format_version(NEWEST)} as a string, such as "3.12"'
    )


# ---------------------------------------------------------------- requires-python


_VERSION = re.compile(r"(\d+)(?:\.(\d+|\*))?")


def _major_minor(text: str) -> PythonVersion | None:
    match = _VERSION.match(text.strip())
    if not match:
        return None
    minor = match.group(2)
    return int(match.group(1)), 0 if minor in (None, "*") else int(minor)


def _clamp(version: PythonVersion) -> PythonVersion:
    return min(max(version, OLDEST), NEWEST)


def lower_bound(spec: str) -> PythonVersion | None:
    """The oldest ``(major, minor)`` a version specifier admits, clamped into 3.8 .. 3.14; None
    when it has no lower bound (``"<4"``) or cannot be read.

    PEP 440 (``">=3.9"``, ``"~=3.10"``, ``">=3.8,<4"``, ``"==3.11.*"``, ``">3.9"``: 3.9.1 is
    greater) through :mod:`packaging`; Poetry's ``"^3.11"``, ``"~3.10"``, ``"3.11"`` and
    ``"a || b"`` alternatives (the oldest of them) too."""
    spec = spec.strip()
    if not spec:
        return None
    if "||" in spec:
        alternatives = [lower_bound(part) for part in spec.split("||")]
        known = [bound for bound in alternatives if bound is not None]
        if not alternatives or len(known) < len(alternatives):
            return None
        return min(known)
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        parts = [(s.operator, s.version) for s in SpecifierSet(spec)]
    except InvalidSpecifier:
        parts = []
        for item in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", spec):
            match = re.fullmatch(r"(\^|~(?!=)|>=|>|==|~=|<=|<|!=|=)?\s*(\S+)", item.strip())
            if not match:
                return None
            parts.append((match.group(1) or "==", match.group(2)))
    bounds = []
    for operator, version in parts:
        if operator in ("<", "<=", "!="):
            continue
        found = _major_minor(version)
        if found is None:
            return None
        bounds.append(found)
    return _clamp(max(bounds)) if bounds else None


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` in ``start`` (a file's folder, or the folder itself) or
    above it."""
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        path = candidate / PYPROJECT
        if path.is_file():
            return path
    return None


def requires_python(pyproject: Path) -> str | None:
    """``[project] requires-python`` (else Poetry's ``[tool.poetry.dependencies] python``) of
    a ``pyproject.toml``; None when it has neither. Raises OSError or ValueError for a file
    that cannot be read."""
    with pyproject.open("rb") as f:
        data = tomllib.load(f)
    project = data.get("project")
    if isinstance(project, dict) and isinstance(project.get("requires-python"), str):
        return project["requires-python"]
    poetry = (
        data.get("tool", {}).get("poetry", {}).get("dependencies", {})
        if isinstance(data.get("tool"), dict)
        else {}
    )
    python = poetry.get("python") if isinstance(poetry, dict) else None
    return python if isinstance(python, str) else None


@dataclass(frozen=True)
class Choice:
    """The version a setting gives a file, and why (for logs and the status)."""

    version: PythonVersion
    source: str  # "--python-version", "requires-python '>=3.9' in /p/pyproject.toml", ...

    @property
    def label(self) -> str:
        return format_version(self.version)


class Chooser:
    """Resolves the setting for files; ``pyproject.toml`` files are read once per change
    (keyed by modification time and size). Thread-safe."""

    def __init__(self):
        self._read: dict[Path, tuple[tuple[int, int], str | None, str | None]] = {}
        self._lock = threading.Lock()

    def choose(self, setting: str, path: Path | None, named: str = "set explicitly") -> Choice:
        """The version ``setting`` (``"auto"`` or ``"3.12"``) gives the file at ``path`` (None:
        a file that is not on disk, such as an editor's unsaved buffer); ``named``: what a set
        version is called in the choice's source (the setting's name)."""
        if setting != AUTO:
            return Choice(parse_python_version(setting), named)
        if path is None:
            return Choice(NEWEST, "newest (the file has no path)")
        pyproject = find_pyproject(path)
        if pyproject is None:
            return Choice(NEWEST, f"newest (no {PYPROJECT} above the file)")
        spec, problem = self._requires_python(pyproject)
        if problem is not None:
            return Choice(NEWEST, f"newest ({pyproject} cannot be read: {problem})")
        if spec is None:
            return Choice(NEWEST, f"newest (no requires-python in {pyproject})")
        bound = lower_bound(spec)
        if bound is None:
            return Choice(NEWEST, f"newest (requires-python {spec!r} in {pyproject} has no lower bound)")
        return Choice(bound, f"requires-python {spec!r} in {pyproject}")

    def _requires_python(self, pyproject: Path) -> tuple[str | None, str | None]:
        try:
            stat = pyproject.stat()
        except OSError as error:
            return None, str(error)
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            known = self._read.get(pyproject)
        if known is not None and known[0] == stamp:
            return known[1], known[2]
        try:
            spec, problem = requires_python(pyproject), None
        except (OSError, ValueError) as error:  # tomllib.TOMLDecodeError is a ValueError
            spec, problem = None, str(error)
            log.warning("%s: cannot read requires-python: %s", pyproject, error)
        with self._lock:
            self._read[pyproject] = (stamp, spec, problem)
        return spec, problem


# ---------------------------------------------------------------- does the text parse at a version


def accepts(
    prefix: str, suffix: str, version: PythonVersion, should_stop: Callable[[], bool] | None = None
) -> bool:
    """Whether some middle makes ``prefix + middle + suffix`` a program of ``version`` (as far
    as the checker can tell up front: a prefix that no text completes, or a suffix that cannot
    follow, is not). Runs the checker: call it on the server's worker thread. ``should_stop``:
    as :func:`~fimconstrain.engine.checker.fim_checker`'s (:class:`~fimconstrain.engine.errors.Interrupted`
    goes through)."""
    try:
        fim_checker(prefix, suffix, python_version=version, should_stop=should_stop)
    except Interrupted:
        raise
    except FimConstrainError:
        return False
    except RecursionError:  # pragma: no cover - pathological nesting
        return False
    return True


def newest_accepting(prefix: str, suffix: str, version: PythonVersion) -> PythonVersion | None:
    """The newest version, when it is newer than ``version`` and :func:`accepts` the text;
    else None. Only the newest is tried: from 3.8 to 3.14 the syntax only grows, so when even
    the newest rejects the text, its error is not a matter of version (and a broken file
    costs one extra check, not one per version)."""
    if version < NEWEST and accepts(prefix, suffix, NEWEST):
        return NEWEST
    return None
