"""``Layer.plain_ends`` against ``Layer.end_and_next``: where a layer says a symbol's end is the
parser's step alone (the C lexer then ends it without asking the layer), the layer's own answer
is that step, that layout, that start and those terminals. Checked for every lexer branch at
cuts of real files (Python at several versions, and JSON) and symbols of every kind."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import fimconstrain
from fimconstrain.engine import fim_checker
from fimconstrain.engine.automata.regex_dfa import DEAD

#: symbols ended at each branch: names, keywords, numbers, operators, every bracket, line
#: breaks inside and outside brackets, strings, a non-ASCII name (never a plain end)
SYMBOLS = (
    "x",
    "self",
    "if",
    "not",
    "12",
    "0x1f",
    "+",
    "**",
    ".",
    ",",
    ":",
    "=",
    "->",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "\n",
    "\n    ",
    "'a'",
    '"b"',
    "café",
    "#",
    " ",
)


def lexeme_state(layer, text: str) -> int:
    """The lexer state after ``text`` from the state where a symbol starts (DEAD if none)."""
    state = layer.dfa.start
    for ch in text:
        state = layer.dfa.step(state, ch)
        if state == DEAD:
            break
    return state


def held_to_end_and_next(checker, rng: random.Random) -> int:
    """Every plain end of ``checker``'s branches against ``end_and_next``; how many were plain."""
    layer, plain = checker.layer, 0
    for parser, layout, *_ in checker.branches:
        groups = layer.plain_ends(layout)
        for text in rng.sample(SYMBOLS, 12):
            state = lexeme_state(layer, text)
            mask = layer.token_mask(state) & layer.allowed(parser, layout)
            if not mask or mask & layer.ignore_mask or not text.isascii():
                continue
            group = next((g for g in groups if not mask & ~g[0]), None)
            if group is None:
                continue
            plain += 1
            _, scans, after_layout, start, extra = group
            expected = layer.end_and_next(parser, layout, state, text)
            if not scans:
                assert expected is not None and expected[0] is parser and expected[1] == layout, text
                assert expected[2:] == (layer.lex_start(layout), layer.allowed(parser, layout)), text
                continue
            scanned = layer.recognizer.scan_expecting(parser, layer.terminal_ids(mask))
            if scanned is None:
                assert expected is None, text
                continue
            assert expected is not None, text
            after, terminals = scanned
            assert expected[0].signature() == after.signature(), text
            assert expected[1:] == (after_layout, start, terminals | extra), text
    return plain


@pytest.mark.parametrize("version", ["3.8", "3.11", "3.14"])
def test_plain_ends_answer_as_the_layer_does(version):
    rng = random.Random(version)
    root = Path(fimconstrain.__file__).parent
    plain = 0
    for path in sorted(root.rglob("*.py"))[:12]:
        text = path.read_text(encoding="utf-8")
        for _ in range(20):
            at = rng.randrange(len(text) + 1)
            plain += held_to_end_and_next(fim_checker(text[:at], "", python_version=version), rng)
    if version == "3.8":
        assert plain == 0  # (its AST checks read keywords: every end is asked of the layer)
    else:
        assert plain > 500


def test_json_plain_ends_answer_as_the_layer_does():
    text = '{"a": [1, 2.5e3, true, null], "b": {"c": "d"}, "e": -1}'
    rng = random.Random(0)
    plain = sum(
        held_to_end_and_next(fim_checker(text[:at], "", language="json"), rng) for at in range(len(text))
    )
    assert plain > 50
