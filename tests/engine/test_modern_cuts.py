"""Fill in the middle of modern code: nested f-strings (PEP 701), t-strings (PEP 750), ``except
A, B:`` (PEP 758), type parameter lists and their defaults (PEP 695, 696).

The files under ``tests/data/modern/`` (``.txt`` so that no tool of an older Python tries to
compile them) are valid programs; a header line ``# min-version: 3.X`` says from which version
on, and the interpreters confirm it (``benchmarks/oracles.py``; skipped where one is missing).
At every cut of such a file, ``prefix = src[:i]``, ``suffix = src[j:]`` with a middle of 0 to 3
characters (every ``j``, ``i = j - 0..3``) and with each whole line as the middle,
``fim_checker(prefix, suffix, python_version="3.14").feed(middle)`` must not be None and must be
complete: nothing valid may be cut off.
"""

from __future__ import annotations

import re
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import oracles

DATA = REPO / "tests" / "data" / "modern"
FILES = sorted(p.name for p in DATA.glob("*.txt"))
TARGET = "3.14"
MAX_MIDDLE = 3
WORKERS = 2
SHOW = 20


def source(name: str) -> str:
    return (DATA / name).read_text("utf-8")


def min_version(src: str) -> str:
    m = re.search(r"^# min-version: (3\.\d+)$", src, re.M)
    assert m, "a file under tests/data/modern needs a '# min-version: 3.X' line"
    return m.group(1)


def cut_ok(src: str, i: int, j: int, version: str = TARGET) -> str | None:
    """None when the cut (i, j) is accepted, else what went wrong."""
    import fimconstrain

    try:
        c = fimconstrain.fim_checker(src[:i], src[j:], python_version=version)
    except fimconstrain.UncompletableError as e:
        return f"fim_checker raised UncompletableError({e}, offset={e.offset})"
    except Exception as e:
        return f"fim_checker raised {type(e).__name__}: {e}"
    try:
        fed = c.feed(src[i:j])
        if fed is None:
            return "feed(middle) is None"
        if not fed.is_complete():
            return "not is_complete()"
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def describe(src: str, i: int, j: int, why: str) -> str:
    line = src.count("\n", 0, i) + 1
    start = src.rfind("\n", 0, i) + 1
    end = src.find("\n", j)
    end = len(src) if end < 0 else end
    return f"line {line}: {src[start:i]!r} ⟦{src[i:j]!r}⟧ {src[j:end]!r}: {why}"


def _check_range(args) -> list[str]:
    name, lo, hi = args
    src = source(name)
    bad = []
    for j in range(lo, hi):  # the same suffix for a few middles in a row: its work is cached
        for k in range(MAX_MIDDLE + 1):
            i = j - k
            if i < 0:
                break
            why = cut_ok(src, i, j)
            if why is not None:
                bad.append(describe(src, i, j, why))
    return bad


def run_parallel(tasks: list) -> list[str]:
    import multiprocessing as mp

    if WORKERS <= 1 or sys.platform == "win32":
        return [b for t in tasks for b in _check_range(t)]
    with mp.get_context("fork").Pool(WORKERS) as pool:
        return [b for part in pool.map(_check_range, tasks, chunksize=1) for b in part]


@pytest.mark.parametrize("name", FILES)
def test_files_are_valid_from_their_min_version(name):
    """The interpreters' word that the test data is what it says, and the engine's agreement on
    the whole file at every version (accepted from min-version on, rejected before)."""
    import fimconstrain

    src = source(name)
    low = min_version(src)
    checked = []
    for v in oracles.VERSIONS:
        o = oracles.available(v)
        if o is None:
            continue
        ok, msg = oracles.details(v, [src])[0]
        expected = tuple(map(int, v.split("."))) >= tuple(map(int, low.split(".")))
        assert ok == expected, (
            f"{name}: Python {v} {'accepts' if ok else 'rejects'} it ({msg}); min-version is {low}"
        )
        c = fimconstrain.fim_checker("", "", python_version=v).feed(src)
        ours = c is not None and bool(c.is_complete())
        checked.append((v, ok, ours))
    if not checked:
        pytest.skip("no interpreter found for any version (benchmarks/oracles.py)")
    wrong = [
        f"Python {v} {'accepts' if ok else 'rejects'}, the engine at {v} does not"
        for v, ok, ours in checked
        if ok != ours
    ]
    assert not wrong, f"{name}: " + "; ".join(wrong)


@pytest.mark.parametrize("name", FILES)
def test_whole_line_middles(name):
    src = source(name)
    bad, start = [], 0
    for line in src.splitlines(keepends=True):
        end = start + len(line)
        why = cut_ok(src, start, end)
        if why is not None:
            bad.append(describe(src, start, end, why))
        start = end
    assert not bad, f"{name}: {len(bad)} whole-line middles rejected (first {SHOW}):\n" + "\n".join(
        bad[:SHOW]
    )


@pytest.mark.slow
@pytest.mark.time_limit(400)
@pytest.mark.parametrize("name", FILES)
def test_every_cut_with_short_middles(name):
    src = source(name)
    n = len(src) + 1
    step = max(1, n // (8 * WORKERS))
    tasks = [(name, lo, min(n, lo + step)) for lo in range(0, n, step)]
    bad = run_parallel(tasks)
    assert not bad, (
        f"{name}: {len(bad)} cuts (middle of 0..{MAX_MIDDLE} chars) rejected (first {SHOW}):\n"
        + "\n".join(bad[:SHOW])
    )
