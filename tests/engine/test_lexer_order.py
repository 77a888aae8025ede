"""The depth-first lexer (``lexer.advance``) against the character-by-character sweep it
replaced: the same surviving branches, in the same order, on real files read in random
pieces, at several Python versions and in JSON. The sweep below is the specification."""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import pytest

from fimconstrain.engine import fim_checker, lexer
from fimconstrain.engine.automata.regex_dfa import DEAD


def sweep(layer, branches, text):
    """Every branch advanced one character at a time, the branch that goes on before the
    one that ends its symbol (the lexer's reference reading)."""
    dfa = layer.dfa
    for ch in text:
        survivors = []
        for parser, layout, state, lexeme, guards in branches:
            if guards:
                kept, longer = [], False
                for g in guards:
                    g2 = dfa.step(g, ch)
                    if g2 == DEAD:
                        continue
                    if dfa.accept[g2]:
                        longer = True
                        break
                    kept.append(g2)
                if longer:
                    continue
                guards = tuple(kept)
            nxt = dfa.step(state, ch)
            if nxt != DEAD and dfa.live[nxt] & layer.allowed(parser, layout):
                survivors.append((parser, layout, nxt, lexeme + ch, guards))
            if not dfa.accept[state] or dfa.accept[nxt]:
                continue
            ended = layer.end_symbol(parser, layout, state, lexeme)
            if ended is None:
                continue
            parser2, layout2 = ended
            fresh = dfa.step(layer.lex_start(layout2), ch)
            if fresh != DEAD and dfa.live[fresh] & layer.allowed(parser2, layout2):
                survivors.append((parser2, layout2, fresh, ch, guards + (nxt,) if nxt != DEAD else guards))
        branches = survivors
    return branches


def shape(layer, branch):
    """A branch with its parser state described by what it can do (two readings build equal
    sets as different objects)."""
    parser, layout, state, lexeme, guards = branch
    items = sorted(d for items in parser.waiting.values() for d, _ in items)
    return layer.recognizer.expected_terminals(parser), parser.accepting, items, layout, state, lexeme, guards


def stdlib_texts(count: int, seed: int) -> list[str]:
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    random.Random(seed).shuffle(files)
    return [f.read_text(encoding="utf-8")[:4000] for f in files[:count]]


@pytest.mark.parametrize("version", ["3.8", "3.11", "3.14"])
def test_depth_first_reading_equals_the_sweep_on_real_files(version):
    rng = random.Random(version)
    compared = 0
    for text in stdlib_texts(6, seed=int(version[2:])):
        checker = fim_checker("", "", python_version=version)
        layer, branches, at = checker.layer, checker.branches, 0
        while at < len(text):
            piece = text[at : at + rng.randint(1, 12)]
            at += len(piece)
            expected = sweep(layer, branches, piece)
            got = lexer.advance(layer, branches, piece)
            assert [shape(layer, b) for b in got] == [shape(layer, b) for b in expected], repr(piece)
            compared += len(got)
            branches = got
            if not branches:  # (a cut inside a non-UTF-8 or otherwise odd file)
                break
    assert compared > 1000


def test_many_branches_keep_the_sweep_order():
    """Branches from several places at once (as the suffix refutation reads from every
    layout a text may start in), through names that may go on or end, numbers that may grow
    an exponent, operators that may double, and strings and f-strings."""
    prefixes = ("", "def f():\n    x = ", "y = (", "z = f'{", "if a:\n    if b:\n        ")
    checkers = [fim_checker(prefix, "") for prefix in prefixes]
    layer = checkers[0].layer
    branches = [b for c in checkers for b in c.branches]
    most = 0
    for text in ("a if b else c\n", "1e5 + 0x1f ** 2\n", "not x and y or g(*a, **k)\n", "x}' + 'q'\n"):
        for cut in range(len(text) + 1):
            got = lexer.advance(layer, branches, text[:cut])
            expected = sweep(layer, branches, text[:cut])
            assert [shape(layer, b) for b in got] == [shape(layer, b) for b in expected], text[:cut]
            most = max(most, len(got))
    assert most >= 3


def test_json_reads_the_same():
    checker = fim_checker("", "", language="json")
    layer, text = checker.layer, '{"a": [1, 2.5e3, true, null], "b": {"c": "d\\n"}}'
    for cut in range(len(text) + 1):
        got = lexer.advance(layer, checker.branches, text[:cut])
        expected = sweep(layer, checker.branches, text[:cut])
        assert [shape(layer, b) for b in got] == [shape(layer, b) for b in expected]
