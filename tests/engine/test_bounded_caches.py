"""The engine's per-process memos stay within their bounds however many distinct inputs a
long-running server reads, and a tiny bound changes no verdict: the Earley recognizer's shared
predictions (``Recognizer.predictions_limit``) and the lexer DFA's remembered transitions
(``LexerDFA.transitions_limit``)."""

from __future__ import annotations

import random

import pytest
from conftest import RUNNING_VERSION, read_utf8, sample_stdlib

from fimconstrain import FimConstrainError, fim_checker
from fimconstrain.engine.automata.earley import PREDICTIONS_LIMIT
from fimconstrain.engine.automata.regex_dfa import NON_ASCII_TRANSITIONS
from fimconstrain.engine.checker import get_layer

#: non-ASCII text of several scripts, in names, strings and comments
WORDS = ["café", "naïve", "Straße", "ĳssel", "Ωmega", "данные", "数据", "データ", "नमस्ते", "😀"]


def inputs(n_files: int, seed: int) -> list[tuple[str, str, str]]:
    """(prefix, middle, suffix) cuts of standard-library files, and made-up lines that put
    non-ASCII characters in names, strings and comments."""
    rng = random.Random(seed)
    out = []
    for path in sample_stdlib(n_files, 30_000, seed, min_bytes=1_000):
        text = read_utf8(path)
        for _ in range(2):
            a = rng.randrange(len(text))
            b = min(len(text), a + rng.randrange(1, 120))
            out.append((text[:a], text[a:b], text[b:]))
    for i in range(60):
        word = "".join(rng.sample(WORDS, 2)) + str(i)
        line = f"{word} = '{word}'  # {word}\n"
        out.append((f"def f():\n    x = 1\n    {line}", f"    {word} = ", f"{word!r}\n"))
    return out


def verdicts(cases: list[tuple[str, str, str]]) -> list[tuple[bool, ...]]:
    """For each cut: whether the checker is built, and after each step of the middle whether
    the text so far is accepted and completes the file."""
    out: list[tuple[bool, ...]] = []
    for prefix, middle, suffix in cases:
        try:
            checker = fim_checker(prefix, suffix, python_version=RUNNING_VERSION)
        except FimConstrainError:
            out.append((False,))
            continue
        row = [True]
        for end in range(0, len(middle) + 1, 5):
            after = checker.feed(middle[:end])
            row += [after is not None, after is not None and after.is_complete()]
        out.append(tuple(row))
    return out


@pytest.mark.time_limit(300)
def test_caches_stay_bounded_and_a_tiny_bound_changes_no_verdict(monkeypatch):
    layer = get_layer("python", RUNNING_VERSION)
    recognizer, dfa = layer.recognizer, layer.dfa
    assert recognizer.predictions_limit == PREDICTIONS_LIMIT
    assert dfa.transitions_limit == 128 + NON_ASCII_TRANSITIONS
    cases = inputs(40, seed=3)
    normal = verdicts(cases)
    assert len(recognizer._predictions) <= PREDICTIONS_LIMIT
    assert max(map(len, dfa.trans)) <= dfa.transitions_limit + 128

    monkeypatch.setattr(recognizer, "predictions_limit", 1)
    monkeypatch.setattr(recognizer, "_predictions", {})  # (the shared layer's, restored after)
    monkeypatch.setattr(dfa, "transitions_limit", 130)  # ASCII and two more per state
    remembered = [dict(row) for row in dfa.trans]
    for row in dfa.trans:  # forget what the first pass remembered past the tiny bound
        for ch in [ch for ch in row if ch >= "\x80"][2:]:
            del row[ch]
    try:
        sizes = []
        tiny = []
        for case in cases:
            tiny += verdicts([case])
            sizes.append(len(recognizer._predictions))
        assert tiny == normal
        assert max(sizes) == 1
        assert max(len(row) for row in dfa.trans) <= 130 + 128
    finally:
        for row, old in zip(dfa.trans, remembered):
            row.update(old)
