"""The vocabulary walk's context key (``walk_ends.reduction_key``): parser states whose one
kernel item has the same deterministic reduction path share it, and states that share it accept
the same continuations."""

from __future__ import annotations

import itertools

import pytest

import fimconstrain
from fimconstrain.engine.walk_ends import reduction_key

#: a text, and texts after it whose states are compared (each ends with a blank, so that its
#: last symbol has ended): a state's origins are the sets of the text it was fed after, so
#: states share a key only after the same text
RUNS = {
    "x = ": ["", "- ", "-- ", "- - - ", "~ ", "~ ~ ", "+ ~ - ", "- ~ + ", "not ", "not not ", "( ", "[- "],
    "x = a ** ": ["", "- ", "- - ", "~ - ", "(- "],
    "x = f( ": ["", "- ", "- - ", "-a, - "],
    "x = f(-a, ": ["", "- ", "- - "],
    "x = lambda: ": ["", "- ", "- - "],
    "x = a if b else ": ["", "- ", "- - ", "not "],
    "def f():\n    x = yield ": ["", "- ", "- - "],
}
#: what may follow, each fed after each state: the states that share a key must agree on all
PROBES = [
    "1\n",
    "a\n",
    "- 1\n",
    "not a\n",
    "lambda: 1\n",
    "a if b else c\n",
    ")\n",
    "]\n",
    "1)\n",
    "1]\n",
    "a.b\n",
    "1 + 2\n",
    "=\n",
    "1, 2\n",
    "*a\n",
]


def _states(base: str, version: str):
    """(text, its checker, its key) for each text of ``RUNS[base]`` after ``base``, where the
    checker has one branch (its lexeme a blank: the symbols before it ended)."""
    start = fimconstrain.fim_checker(base, "", python_version=version)
    out = []
    for text in RUNS[base]:
        checker = start.feed(text)
        assert checker is not None, (base, text)
        if len(checker.branches) == 1 and checker.branches[0][3].isspace():
            parser = checker.branches[0][0]
            out.append((text, checker, reduction_key(checker.layer.grammar, parser)))
    return out


@pytest.mark.parametrize("version", ["3.8", "3.12", "3.14"])
def test_a_run_of_unary_operators_is_one_key(version):
    """The sets after one, two and three signs differ (each a deeper expression) and share a
    key, in each place a unary operand is read, where the outermost sign is the same (each sign
    has its own rule); other places do not share it."""
    keys = {(base, text): key for base in RUNS for text, _, key in _states(base, version)}
    for base, run in [
        ("x = ", ["- ", "-- ", "- - - ", "- ~ + "]),
        ("x = ", ["~ ", "~ ~ "]),
        ("x = a ** ", ["- ", "- - ", "~ - "]),
        ("x = f( ", ["- ", "- - "]),
        ("x = f(-a, ", ["- ", "- - "]),
        ("x = lambda: ", ["- ", "- - "]),
        ("x = a if b else ", ["- ", "- - "]),
        ("def f():\n    x = yield ", ["- ", "- - "]),
    ]:
        assert len({keys[base, text] for text in run}) == 1, (base, run)
    assert keys["x = ", "- "] != keys["x = ", ""]
    assert keys["x = ", "- "] != keys["x = ", "[- "]
    assert keys["x = ", "not "] != keys["x = ", "- "]
    assert keys["x = ", "~ "] != keys["x = ", "+ ~ - "]
    assert keys["x = f( ", "- "] != keys["x = f( ", "-a, - "]


@pytest.mark.parametrize("version", ["3.8", "3.12", "3.14"])
def test_states_that_share_a_key_accept_the_same_continuations(version):
    """Every pair of states with one key: each probe is taken by both or by neither, and
    leaves both complete or neither. Many pairs share one (else this tests nothing)."""
    shared = 0
    for base in RUNS:
        for (t1, c1, k1), (t2, c2, k2) in itertools.combinations(_states(base, version), 2):
            if k1 != k2:
                continue
            shared += 1
            for probe in PROBES:
                a, b = c1.feed(probe), c2.feed(probe)
                assert (a is None) == (b is None), (base, t1, t2, probe)
                assert a is None or b is None or a.is_complete() == b.is_complete(), (base, t1, t2, probe)
    assert shared >= 15
