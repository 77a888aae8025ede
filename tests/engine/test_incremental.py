"""Incremental use: cut a valid file anywhere, feed the rest in pieces; feed is pure.

A valid file must never be rejected on the way and must be complete at the
end, whatever the cut and the chunking. The larger run is
``benchmarks/incremental_completeness.py``.
"""

from __future__ import annotations

import random

import pytest
from conftest import EXAMPLES, STDLIB, fc, feed_random_chunks, read_utf8, sample_stdlib, uncompletable, where
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FILES = sample_stdlib(8, 12_000, seed=7, min_bytes=500) + [EXAMPLES / "inventory.py"]
SMALL = sample_stdlib(3, 3_000, seed=11, min_bytes=300)


def _id(p):
    try:
        return str(p.relative_to(STDLIB))
    except ValueError:
        return p.name


def _check_cut(src: str, cut: int, rng: random.Random, lo: int = 1, hi: int = 8):
    try:
        c = fc().fim_checker(src[:cut], "")
    except uncompletable() as e:
        pytest.fail(f"valid prefix rejected at construction (cut {where(src, cut)}): {e}")
    end, bad = feed_random_chunks(c, src[cut:], rng, lo, hi)
    if end is None:
        pytest.fail(
            f"valid continuation rejected (cut {where(src, cut)}) in the chunk at {where(src, cut + bad)}"
        )
    assert end.is_complete(), f"valid file not complete at the end (cut {where(src, cut)})"


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_random_cuts_random_chunks(path):
    src = read_utf8(path)
    rng = random.Random(len(src))
    cuts = [0, len(src)] + [rng.randint(0, len(src)) for _ in range(3)]
    for cut in cuts:
        _check_cut(src, cut, rng)


def test_cut_inside_tokens():
    """Cuts inside strings, comments, names, numbers, indentation and after a backslash."""
    src = (
        "import os  # a comment\n"
        "def f(alpha, beta=0x1F):\n"
        "    '''doc\n    string'''\n"
        "    total = alpha + \\\n        beta\n"
        "    if total > 1_000.5e3:\n"
        "        return f'{total!r:>10}'\n"
        "    return [x for x in (1, 2,\n"
        "                        3)]\n"
    )
    rng = random.Random(3)
    for cut in range(len(src) + 1):
        _check_cut(src, cut, rng)


def test_feed_is_pure():
    c = fc().fim_checker("def f(x):\n    y = ", "")
    assert not c.is_complete()
    a = c.feed("x + 1\n")
    b = c.feed(")")
    d = c.feed("x +")
    assert a is not None and a.is_complete()
    assert b is None
    assert d is not None and not d.is_complete()
    # c itself is unchanged by any of these
    assert not c.is_complete()
    a2 = c.feed("x + 1\n")
    assert a2 is not None and a2.is_complete()
    # the forks are independent of each other
    e = d.feed(" 2\n")
    assert e is not None and e.is_complete()
    assert not d.is_complete()
    assert a.is_complete()
    assert d.feed(")") is None
    assert d.feed(" 3\n").is_complete()
    # a fork that continues the statement on the next line is independent of a
    f = a.feed("    return y\n")
    assert f is not None and f.is_complete()
    assert a.feed("  return y\n") is None  # unindent to no outer level
    assert a.is_complete()
    # feeding the empty string is the identity
    z = c.feed("")
    assert z is not None and not z.is_complete()
    assert z.feed("1\n").is_complete()


def test_many_forks_from_one_checker():
    c = fc().fim_checker("values = [1, 2, 3]\nresult = ", "")
    candidates = ["sum(values)\n", "values[0]\n", "len(values) * 2\n", "(\n", "]\n", "values[\n", "if\n"]
    verdicts = []
    for _ in range(2):  # the same answers the second time round
        row = []
        for cand in candidates:
            n = c.feed(cand)
            row.append(None if n is None else n.is_complete())
        verdicts.append(row)
    assert verdicts[0] == verdicts[1]
    assert verdicts[0][:3] == [True, True, True]
    assert verdicts[0][3] is False  # "(\n" is open, completable
    assert verdicts[0][4] is None  # "]" closes nothing
    assert verdicts[0][5] is False
    assert verdicts[0][6] is None  # `result = if`


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_hypothesis_cuts_and_chunks(data):
    path = data.draw(st.sampled_from(SMALL), label="file")
    src = read_utf8(path)
    cut = data.draw(st.integers(0, len(src)), label="cut")
    sizes = data.draw(st.lists(st.integers(1, 12), min_size=1, max_size=20), label="chunk sizes (cycled)")
    c = fc().fim_checker(src[:cut], "")
    pos, i = cut, 0
    while pos < len(src):
        k = sizes[i % len(sizes)]
        i += 1
        nxt = c.feed(src[pos : pos + k])
        assert nxt is not None, f"{_id(path)}: rejected chunk at {where(src, pos)} (cut {where(src, cut)})"
        c, pos = nxt, pos + k
    assert c.is_complete(), f"{_id(path)}: not complete (cut {where(src, cut)})"


def test_files_were_found():
    assert len(FILES) >= 6 and len(SMALL) == 3
