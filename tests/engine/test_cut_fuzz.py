"""The cut fuzzer, bounded: cut real and generated files at two places; the engine must agree with ast.parse.

Standard-library files go through validity-preserving transforms (CRLF, lone CR, tabs, form
feeds, backslash continuations, re-indented bracket lines, no final newline, a comment at
the end); generated snippets (match patterns, f-strings, decorators, ...) are also mutated
so that soundness is exercised. Generators live in ``tests/engine/cut_fuzz.py``; the long run is
``benchmarks/cut_fuzz.py``. A failure message carries a minimised (prefix, middle, suffix).
"""

from __future__ import annotations

import random

import cut_fuzz as cf
import pytest
from conftest import ast_ok
from hypothesis import HealthCheck, Phase, given, settings

# no shrinking: the draws are a Random's, a shrunk Random says little; the message minimises instead
FUZZ = dict(
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


def _assert_agrees(case: cf.Case):
    msg = cf.check(*case.triple())
    if msg is not None:
        small = cf.minimise(*case.triple(), budget=10.0)
        pytest.fail(f"{msg}\n  origin: {case.origin}\n  minimised: {small!r}", pytrace=False)


@pytest.mark.slow
@pytest.mark.time_limit(300)
@settings(max_examples=1500, **FUZZ)
@given(case=cf.stdlib_cases())
def test_stdlib_files_transformed_and_cut(case):
    _assert_agrees(case)


@pytest.mark.slow
@pytest.mark.time_limit(300)
@settings(max_examples=1200, **FUZZ)
@given(case=cf.snippet_cases(mutated=False))
def test_generated_snippets_cut(case):
    _assert_agrees(case)


@pytest.mark.slow
@pytest.mark.time_limit(300)
@settings(max_examples=1500, **FUZZ)
@given(case=cf.snippet_cases(mutated=True))
def test_mutated_snippets_cut(case):
    _assert_agrees(case)


# ---------------------------------------------------------------- the fuzzer's own pieces

FILES = cf.stdlib_sample()[:30]


@pytest.mark.time_limit(120)
@pytest.mark.parametrize("name", list(cf.TRANSFORMS))
def test_transform_preserves_validity(name):
    fn = cf.TRANSFORMS[name]
    changed = 0
    for k, (fname, src) in enumerate(FILES):
        for seed in (k, k + 1000):
            out = fn(src, seed)
            assert ast_ok(out), f"{name} made {fname} invalid (seed {seed})"
            assert fn(src, seed) == out, f"{name} is not deterministic"
            changed += out != src
    # each transform does something on most files (bracket continuation lines are rarer)
    assert changed >= (0.3 if name == "reindent_brackets" else 0.8) * 2 * len(FILES), (name, changed)


def test_transforms_do_what_they_say():
    src = "def f(a,\n      b):\n    if a and b:\n        return (a +\n                b)\n    return 0\n"
    assert cf.crlf(src) == src.replace("\n", "\r\n")
    assert "\n" not in cf.lone_cr(src) and cf.lone_cr(src).count("\r") == src.count("\n")
    assert "\t" in cf.tabs(src) and ast_ok(cf.tabs(src))
    assert not cf.remove_final_newline(src).endswith("\n")
    assert "#" in cf.comment_at_end(src, 1).rstrip("\n").rsplit("\n", 1)[-1]
    assert any("\\\n" in cf.backslashes(src, s) for s in range(5))
    assert any(cf.reindent_brackets(src, s) != src for s in range(5))
    assert any("\f" in cf.form_feeds(src, s) for s in range(5))
    # an unsafe split is never returned: '\\' before '\r' and a column-0 statement line
    assert "x = 1\\\r" not in cf.lone_cr("x = 1\\\n+ 2\n")


def test_generators_are_reproducible_and_cover_both_properties():
    for cat in cf.CATEGORIES:
        a = cf.case_in_category(cat, random.Random(f"0:{cat}:3"))
        b = cf.case_in_category(cat, random.Random(f"0:{cat}:3"))
        assert a == b and a.category == cat, cat
    snippets = [cf.SnippetGen(random.Random(k)).program() for k in range(150)]
    valid = sum(map(ast_ok, snippets))
    assert valid >= 0.9 * len(snippets), valid
    assert max(len(ln) for s in snippets for ln in s.splitlines()) < 200
    mutated = [cf.snippet_case(random.Random(k), mutated=True).text for k in range(150)]
    invalid = sum(not ast_ok(t) for t in mutated)
    assert 0.3 * len(mutated) <= invalid < len(mutated), invalid
    cuts = [cf.pick_cuts("x = (1,\n 2)  # c\n", random.Random(k)) for k in range(200)]
    assert all(0 <= i <= j <= 18 for i, j in cuts) and len(set(cuts)) > 20


def test_check_and_minimise_report_a_disagreement(monkeypatch):
    # an engine that wrongly rejects any file containing 'BUG'
    monkeypatch.setattr(
        cf,
        "outcome",
        lambda p, m, s: "raised" if "BUG" in p + m + s else ("complete" if ast_ok(p + m + s) else "raised"),
    )
    tally = cf.Tally()
    assert cf.check("x = 1\n", "y = 2\n", "", tally, "demo") is None
    msg = cf.check("x = 1\n", "BUG = 2\n", "z = 3\n", tally, "demo")
    assert msg.startswith("completeness: valid file raised | (")
    assert tally.counts["demo"]["cases"] == 2 and tally.counts["demo"]["disagreements"] == 1
    small = cf.minimise("a = 1\nb = 2\n", "BUG = 2\n", "c = 3\nd = 4\n")
    assert small == ("", "BUG", "")


# Disagreements this fuzzer's classes found (now fixed): they stay fixed.
KNOWN = [
    ("x = 1", " \\", "\n, 2\n"),
    ("if x", " \\", "\n  :\n pass\n"),
    ("x = (", "", "\n1,\n    2,\n  3)\n"),
    ("", "x = 1\\\r\n", ""),
    ("#", "", " a b"),
    ("match x:\n case 1+2:\n  pass\n", "", ""),
    ("match x:\n case [1] as _:\n  pass\n", "", ""),
    ("match x:\n case {**_}:\n  pass\n", "", ""),
    ("x = 1\n", "", "\x00"),
    ("x = 1\n", "", "'\ud800'\n"),
]


@pytest.mark.parametrize("triple", KNOWN, ids=[repr(t)[:40] for t in KNOWN])
def test_known_disagreements_stay_fixed(triple):
    assert cf.check(*triple) is None
