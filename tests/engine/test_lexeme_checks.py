"""The string lexemes' check (``lexeme_checks.string_ok``) against CPython itself.

``string_ok`` parses a lexeme with ``ast.parse`` only where its escapes can fail to decode (a
truncated ``\\x``, ``\\u`` or ``\\U``, a code point past U+10FFFF, a malformed or unknown
``\\N{...}``), bytes hold a non-ASCII character, or an f-string holds a backslash; elsewhere it
answers at once. Its answer must be CPython's on every lexeme.
"""

from __future__ import annotations

import ast
import contextlib
import random
import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from fimconstrain.engine.layers.lexeme_checks import string_ok

PREFIXES = ["", "r", "u", "b", "rb", "Br", "R", "f", "rf", "F"]
QUOTES = ["'", '"', "'''", '"""']
#: pieces a body is made of: escapes that decode, that only warn, and that can fail
PIECES = [
    "a", " ", "0", "7", "9", "f", "F", "{", "}", "x", "u", "U", "N", "é", "\u4e2d", "\\",
    "\\\\", "\\n", "\\t", "\\'", '\\"', "\\0", "\\777", "\\q", "\\d", "\\x4", "\\x41", "\\xZZ",
    "\\u12", "\\u00e9", "\\U0001F600", "\\U00110000", "\\UFFFFFFFF", "\\N", "\\N{", "\\N{DASH}",
    "\\N{EM DASH}", "\\N{LATIN SMALL LETTER A}", "\\N{NO SUCH NAME}", "\\\n",
]  # fmt: skip


def cpython_parses(text: str) -> bool:
    """CPython's own verdict on the lexeme (its warnings ignored, as the checker ignores them)."""
    with warnings.catch_warnings(), contextlib.suppress(SyntaxError, ValueError):
        warnings.simplefilter("ignore")
        ast.parse(text, mode="eval")
        return True
    return False


def lexeme(prefix: str, quote: str, pieces: list[str]) -> str | None:
    """The string lexeme, or None where the body would not stay inside its quotes (a quote in
    it, a line break in a one-line string, a backslash escaping the closing quote, or a
    replacement field an f-string would read as code)."""
    body = "".join(pieces)
    if quote[0] in body or (len(quote) == 1 and "\n" in body):
        return None
    if (len(body) - len(body.rstrip("\\"))) % 2:
        return None
    if "f" in prefix.lower() and ("{" in body or "}" in body):
        return None
    return prefix + quote + body + quote


@given(st.sampled_from(PREFIXES), st.sampled_from(QUOTES), st.lists(st.sampled_from(PIECES), max_size=6))
@settings(max_examples=3000, deadline=None)
def test_string_ok_is_cpythons_verdict(prefix: str, quote: str, pieces: list[str]) -> None:
    text = lexeme(prefix, quote, pieces)
    if text is None:
        return
    assert string_ok(text) == cpython_parses(text), text


def test_the_fast_answers_hold_on_many_random_lexemes() -> None:
    """A seeded sweep: each verdict is CPython's, and both verdicts occur (the pieces reach
    the escapes that fail)."""
    rng = random.Random(0)
    verdicts = {True: 0, False: 0}
    for _ in range(5000):
        text = lexeme(rng.choice(PREFIXES), rng.choice(QUOTES), rng.choices(PIECES, k=rng.randrange(6)))
        if text is not None:
            verdict = string_ok(text)
            assert verdict == cpython_parses(text), text
            verdicts[verdict] += 1
    assert verdicts[True] > 500 and verdicts[False] > 100
