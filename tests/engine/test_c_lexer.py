"""The C branching lexer (``engine/_lexer.c``) against the Python loop it twins
(``lexer.advance_in_python``), branch for branch: real files read in random pieces at several
Python versions, cut anywhere (inside strings, f-strings, comments and non-ASCII names), many
branches at once, JSON, and a layer fresh from its grammar (the C mirror then meets every state
as the automaton makes it). Two readings build equal Earley sets as different objects, so sets
are compared item for item, their origins likewise down to the sets both readings share.
Where the C lexer is not built, or ``FIMCONSTRAIN_ENGINE=python`` leaves it out, the tests say so
by skipping (CI builds it, and runs them where it serves)."""

from __future__ import annotations

import os
import random
import re
import sysconfig
from pathlib import Path

import pytest

import fimconstrain
from fimconstrain.engine import fim_checker, lexer, native
from fimconstrain.engine.automata.earley import EarleySet
from fimconstrain.engine.checker import get_layer

#: the sources asked for (CI's second run of the engine's tests): the C lexer is left out
SOURCES_ASKED = os.environ.get(native.ENV_VAR, "").strip().lower() == "python"
pytestmark = pytest.mark.skipif(
    native.lexer_extension() is None and (SOURCES_ASKED or not os.environ.get("CI")),
    reason="the C lexer is not built here, or FIMCONSTRAIN_ENGINE=python leaves it out",
)


def same_set(x: EarleySet | None, y: EarleySet | None, met: dict[tuple[int, int], bool]) -> bool:
    """Whether ``x`` and ``y`` hold the same items in the same order, origins likewise."""
    if x is y:
        return True
    if x is None or y is None:
        return False
    key = (id(x), id(y))
    if key not in met:
        met[key] = True  # (assumed while its origins are compared)
        met[key] = (
            x.accepting == y.accepting
            and list(x.waiting) == list(y.waiting)
            and x.prediction.terminals == y.prediction.terminals
            and all(
                len(x.waiting[s]) == len(y.waiting[s])
                and all(
                    dx == dy and same_set(ox, oy, met)
                    for (dx, ox), (dy, oy) in zip(x.waiting[s], y.waiting[s], strict=True)
                )
                for s in x.waiting
            )
        )
    return met[key]


def assert_same(got: list, expected: list, what: str) -> None:
    assert len(got) == len(expected), what
    met: dict[tuple[int, int], bool] = {}
    for g, e in zip(got, expected, strict=True):
        assert g[1:] == e[1:], what
        assert same_set(g[0], e[0], met), what


def c_lexer(layer):
    found = lexer.c_lexer_for(layer)
    assert found is not False, "the C lexer does not serve"
    return found


def read_in_pieces(layer, branches, text: str, rng: random.Random) -> int:
    """Read ``text`` in random pieces with both lexers, each piece from the same branches."""
    c, compared, at = c_lexer(layer), 0, 0
    while at < len(text) and branches:
        piece = text[at : at + rng.choice((1, 2, 3, 5, 8, 13, 40))]
        at += len(piece)
        got = c.advance(branches, piece)
        expected = lexer.advance_in_python(layer, branches, piece)
        assert_same(got, expected, repr(piece))
        compared += len(got)
        branches = expected
    return compared


@pytest.mark.parametrize("version", ["3.8", "3.11", "3.12", "3.14"])
def test_the_c_lexer_reads_real_files_as_the_python_loop(version):
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    random.Random(version).shuffle(files)
    rng, compared = random.Random(int(version[2:])), 0
    for path in files[:8]:
        text = path.read_text(encoding="utf-8", errors="replace")[:6000]
        checker = fim_checker("", "", python_version=version)
        compared += read_in_pieces(checker.layer, checker.branches, text, rng)
    assert compared > 2000


def test_the_c_lexer_reads_odd_text_as_the_python_loop():
    """Non-ASCII names and strings, f-strings nested and with formats, bytes, continuation
    lines, tabs, a stray character, and text that kills every branch."""
    texts = [
        "café = 'naïve' + \"日本\"  # ünïcode\nπ = 3.14\n",
        "x = f'{a!r:>{width}} {b + 1:{fmt}}' + f\"{'q'}\" + rf'{c}\\n'\n",
        "y = b'\\x00' + br'raw' \\\n    + 1e-5j\nif x:\n\tpass\n",
        "def f(a, /, *b, c=1, **d) -> None:\n    return [i async for i in g()]\n",
        "z = 1 $ 2\n",
        "match x:\n    case {'a': 1, **rest} if rest:\n        pass\n",
    ]
    for version in ("3.8", "3.12", "3.14"):
        rng = random.Random(version)
        for text in texts:
            checker = fim_checker("", "", python_version=version)
            read_in_pieces(checker.layer, checker.branches, text, rng)


def test_many_branches_at_once():
    """Branches from several places (as the suffix refutation reads), read together."""
    prefixes = ("", "def f():\n    x = ", "y = (", "z = f'{", "if a:\n    if b:\n        ", "s = '''")
    checkers = [fim_checker(prefix, "") for prefix in prefixes]
    layer = checkers[0].layer
    branches = [b for c in checkers for b in c.branches]
    c = c_lexer(layer)
    for text in ("a if b else c\n", "1e5 + 0x1f ** 2\n", "x}' + 'q'\n", "'''\n", "not x and y\n"):
        for cut in range(len(text) + 1):
            got = c.advance(branches, text[:cut])
            assert_same(got, lexer.advance_in_python(layer, branches, text[:cut]), text[:cut])


def test_json_and_a_fresh_layer():
    """JSON's plain layer, and a Python layer built anew (its automaton has made no state yet:
    the C mirror reads each as it is made)."""
    checker = fim_checker("", "", language="json")
    read_in_pieces(
        checker.layer, checker.branches, '{"a": [1, 2.5e3, true, null], "b": {"ü": "d\\n"}}', random.Random(1)
    )
    fresh = type(get_layer("python"))(get_layer("python").grammar, get_layer("python").version)
    text = Path(fimconstrain.__file__).read_text(encoding="utf-8")
    assert read_in_pieces(fresh, [fresh.initial_branch()], text, random.Random(2)) > 100


def test_an_error_in_the_layer_comes_out():
    """What the layer raises where a symbol ends reaches the caller, and the lexer still serves."""
    layer = get_layer("python")

    class Failing:
        dfa, ignore_mask = layer.dfa, layer.ignore_mask
        allowed, token_mask = layer.allowed, layer.token_mask
        ignore_unchanged, lex_start = layer.ignore_unchanged, layer.lex_start
        plain_ends, recognizer = layer.plain_ends, layer.recognizer

        def end_and_next(self, parser, layout, state, text):
            raise RuntimeError(f"end of {text!r}")

    c = native.lexer_extension().Lexer(Failing(), (layer.grammar.n_terminals + 63) // 64)
    with pytest.raises(RuntimeError, match="end of '\\\\n\\\\n'"):
        c.advance([layer.initial_branch()], "\nx = 1")
    assert c.advance([layer.initial_branch()], "\n    ") != []  # (no symbol ends)


def test_an_error_in_a_plain_end_comes_out():
    """What the recognizer raises where a plain symbol (a name) ends, which the C lexer scans
    without the layer's ``end_and_next``, reaches the caller, and the lexer still serves."""
    layer = get_layer("python")

    class FailingRecognizer:
        def scan_expecting(self, parser, terminals):
            raise RuntimeError(f"scan of {terminals!r}")

    class Failing:
        dfa, ignore_mask = layer.dfa, layer.ignore_mask
        allowed, token_mask, end_and_next = layer.allowed, layer.token_mask, layer.end_and_next
        ignore_unchanged, lex_start, plain_ends = layer.ignore_unchanged, layer.lex_start, layer.plain_ends
        recognizer = FailingRecognizer()

    c = native.lexer_extension().Lexer(Failing(), (layer.grammar.n_terminals + 63) // 64)
    name = layer.terminal_ids(layer.name_mask)[0]
    with pytest.raises(RuntimeError, match=re.escape(f"scan of ({name},)")):
        c.advance(fim_checker("x = abc", "").branches, " + 1")
    assert c.advance(fim_checker("x = abc", "").branches, "d") != []  # (no symbol ends)
