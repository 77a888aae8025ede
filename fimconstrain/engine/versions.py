"""Target Python versions: which syntax the engine accepts is chosen per checker, not by the
interpreter it runs on. One grammar serves 3.8 through 3.14 through version gates
(``grammars/python.lark``, see :func:`fimconstrain.engine.automata.grammar.apply_version_gates`)."""

from __future__ import annotations

import re

from .errors import InputError

#: a target version as ``(major, minor)``
PythonVersion = tuple[int, int]
#: what callers may pass: ``"3.12"`` or ``(3, 12)``
VersionLike = str | tuple[int, int]

SUPPORTED: tuple[PythonVersion, ...] = tuple((3, minor) for minor in range(8, 15))
OLDEST: PythonVersion = SUPPORTED[0]
NEWEST: PythonVersion = SUPPORTED[-1]

_VERSION = re.compile(r"\s*(\d+)\.(\d+)\s*")


def parse_python_version(value: VersionLike | None) -> PythonVersion:
    """``"3.12"``, ``(3, 12)`` or None (the newest) as ``(3, 12)``; :class:`InputError` for
    anything else or a version outside 3.8 .. 3.14."""
    if value is None:
        return NEWEST
    version: PythonVersion | None = None
    if isinstance(value, str):
        match = _VERSION.fullmatch(value)
        if match:
            version = (int(match.group(1)), int(match.group(2)))
    elif (
        isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(part, int) and not isinstance(part, bool) for part in value)
    ):
        version = (value[0], value[1])
    if version is None:
        raise InputError(f"python_version must look like '3.12' or (3, 12), not {value!r}")
    if version not in SUPPORTED:
        raise InputError(
            f"python_version {format_version(version)} is not supported; "
            f"supported: {format_version(OLDEST)} to {format_version(NEWEST)}"
        )
    return version


def format_version(version: PythonVersion) -> str:
    return f"{version[0]}.{version[1]}"
