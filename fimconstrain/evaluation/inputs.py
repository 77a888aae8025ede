"""The files the evaluation commands read, checked: a dataset, a manifest or a results file is
each told apart from the others (and from a Python file or a folder), so a wrong argument is one
line naming the file and what to pass instead, with exit code 2, never a traceback or a silent
run over nothing (issue: "every bad input a one-line error").

Each kind of file is JSONL; what tells them apart is the fields of a line: an example has
``prefix``/``middle``/``suffix``, a manifest row ``start``/``end`` without texts (after a header
line ``{"manifest": ...}``), a result ``key`` and ``mode``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from ..engine.errors import FimConstrainError, InputError

EXAMPLE_FIELDS = ("id", "kind", "path", "sha256", "prefix", "middle", "suffix")


def one_line_errors(prog: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Decorate a command's ``main``: a :class:`FimConstrainError` (bad input, a missing model)
    or an unreadable path becomes one line on standard error and exit code 2."""

    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def run(*args, **kwargs) -> int:
            try:
                return main(*args, **kwargs)
            except FimConstrainError as error:
                print(f"{prog}: {error}", file=sys.stderr)
            except OSError as error:
                if error.filename is None:
                    raise
                print(f"{prog}: {error.filename}: {error.strerror or error}", file=sys.stderr)
            return 2

        return run

    return wrap


def json_lines(path: Path, what: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) of every non-blank line of the JSONL file ``path``; anything else
    (no such file, a folder, a line that is not a JSON object) is an :class:`InputError`."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not {what}")
    if not path.exists():
        raise InputError(f"{path}: No such file or directory")
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                if not raw.endswith(b"\n"):
                    return  # the last line of a run still writing (or killed): not there yet
                hint = " (a Python file?)" if path.suffix == ".py" else ""
                raise InputError(
                    f"{path}:{number}: not JSON{hint}; expected {what} (JSONL, one object a line)"
                ) from None
            if not isinstance(value, dict):
                raise InputError(f"{path}:{number}: not a JSON object; expected {what}")
            yield number, value


def kind_of(value: dict) -> str:
    """What a JSONL line is: "example", "manifest", "result" or "unknown"."""
    if "manifest" in value or ("start" in value and "end" in value and "prefix" not in value):
        return "manifest"
    if "key" in value and "mode" in value:
        return "result"
    if all(name in value for name in EXAMPLE_FIELDS):
        return "example"
    return "unknown"


#: what to do with a file of one kind passed where another was expected
_INSTEAD = {
    "manifest": "a dataset manifest: rebuild its dataset with `fimconstrain dataset --rebuild`",
    "result": "a results file (fimconstrain eval --out): pass it to `fimconstrain report`",
    "example": "a dataset (fimconstrain dataset): run `fimconstrain eval` on it first",
    "unknown": "not a file fimconstrain writes",
}


def lines_of_kind(path: Path, kind: str, what: str) -> Iterator[dict]:
    """The objects of ``path``, each checked to be a ``kind`` line (a manifest's header skipped)."""
    for number, value in json_lines(path, what):
        found = kind_of(value)
        if found == kind:
            if "manifest" not in value:
                yield value
            continue
        raise InputError(f"{path}:{number}: {_INSTEAD[found]}; expected {what}")


def read_dataset(path: Path) -> list[dict]:
    """The examples of a dataset file (as dicts, in file order); it must hold at least one."""
    examples = list(lines_of_kind(path, "example", "a dataset (fimconstrain dataset --out)"))
    if not examples:
        raise InputError(f"{path}: holds no examples (an empty dataset)")
    ids = [e["id"] for e in examples]
    if len(set(ids)) != len(ids):
        raise InputError(f"{path}: example ids repeat (not a dataset fimconstrain dataset wrote)")
    return examples


def read_results(path: Path) -> list[dict]:
    """The records of a results file; each must carry its provenance (``settings_id``)."""
    records = []
    for number, value in enumerate(lines_of_kind(path, "result", "results (fimconstrain eval --out)"), 1):
        if "settings_id" not in value:
            raise InputError(
                f"{path}: record {number} has no provenance (written by an older fimconstrain eval); "
                f"run eval again into a new file"
            )
        records.append(value)
    return records
