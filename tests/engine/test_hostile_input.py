"""Hostile characters anywhere in a file: the engine agrees with ``ast.parse`` and names the offset.

Real files and generated snippets get control characters, NUL, lone surrogates, byte order
marks, Unicode line separators, broken escapes (``\\x4``, ``\\N{nope}``, ``\\U00110000``) and
stray quotes and backslashes inserted at random places, then are cut in three; the verdict on
``prefix + middle + suffix`` must be CPython's (the cut fuzzer's exact check). A NUL or a lone
surrogate in the prefix or the suffix is an :class:`InputError` at its offset; in the middle it
is a rejection; a byte order mark at the very start is dropped, as CPython drops it from a file.
"""

from __future__ import annotations

import random

import cut_fuzz as cf
import pytest
from conftest import ast_ok, fc, first_dead
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

#: characters and short texts CPython's tokenizer treats specially, inserted at random places
HOSTILE = [
    "\x00",
    "\ud800",
    "\udfff",
    "\ufeff",
    "\x01",
    "\x0c",
    "\x1b",
    "\x7f",
    "\x85",
    "\u2028",
    "\u00a0",
    "\u200b",
    "\r",
    "\\",
    "\\\n",
    "\\\r\n",
    "\\x4",
    "\\x4g",
    "\\N{nope}",
    "\\N{EM DASH}",
    "\\u12",
    "\\U00110000",
    "\\777",
    "\u00e9",
    "\u210c",
    "$",
    "?",
    "`",
    "\t",
    "'",
    '"',
    "{",
    "}",
    "#",
]
#: what no source file may contain: the engine raises InputError for these in prefix or suffix
FORBIDDEN = ("\x00", "\ud800", "\udfff")

FUZZ = dict(
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _is_forbidden(ch: str) -> bool:
    return ch == "\x00" or "\ud800" <= ch <= "\udfff"


def _hostile_case(rng: random.Random) -> cf.Case:
    """A real file or a snippet with 1-3 hostile pieces inserted, cut at two random places."""
    base = cf.stdlib_case(rng, []) if rng.random() < 0.6 else cf.snippet_case(rng, mutated=False)
    text = base.prefix + base.middle + base.suffix
    how = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        at, piece = rng.randint(0, len(text)), rng.choice(HOSTILE)
        text = text[:at] + piece + text[at:]
        how.append(f"{piece!r}@{at}")
    i, j = cf.pick_cuts(text, rng)
    return cf.Case("hostile", text[:i], text[i:j], text[j:], f"{base.origin} + {' '.join(how)} cut={i},{j}")


def _hostile_cases():
    return st.integers(min_value=0, max_value=2**64 - 1).map(lambda seed: _hostile_case(random.Random(seed)))


def _check_forbidden(case: cf.Case) -> None:
    """NUL or a lone surrogate: InputError at the first one outside the middle, else a rejection."""
    outside = case.prefix + case.suffix
    first = next((i for i, ch in enumerate(outside) if _is_forbidden(ch)), None)
    if first is not None:
        with pytest.raises(fc().InputError) as info:
            fc().fim_checker(case.prefix, case.suffix)
        assert info.value.offset == first, (info.value.offset, first)
        assert f"offset {first}" in str(info.value)
    elif any(_is_forbidden(ch) for ch in case.middle):
        try:
            checker = fc().fim_checker(case.prefix, case.suffix)
        except fc().UncompletableError:
            return
        assert checker.feed(case.middle) is None


@pytest.mark.time_limit(300)
@settings(max_examples=400, **FUZZ)
@given(case=_hostile_cases())
def test_hostile_characters_agree_with_ast_parse(case):
    msg = cf.check(*case.triple())
    if msg is not None:
        small = cf.minimise(*case.triple(), budget=10.0)
        pytest.fail(f"{msg}\n  origin: {case.origin}\n  minimised: {small!r}", pytrace=False)
    _check_forbidden(case)


@pytest.mark.parametrize("bad", FORBIDDEN, ids=ascii)
@pytest.mark.parametrize("where", ["prefix", "suffix"])
def test_forbidden_character_is_an_input_error_naming_its_offset(bad, where):
    prefix, suffix = "x = 1\ny = ", "\n# note\n"
    if where == "prefix":
        prefix = prefix.replace("1", "1 # " + bad)
        offset = prefix.index(bad)
    else:
        suffix = suffix.replace("note", "no" + bad + "te")
        offset = len(prefix) + suffix.index(bad)
    with pytest.raises(fc().InputError) as info:
        fc().fim_checker(prefix, suffix)
    assert info.value.offset == offset
    assert f"offset {offset}" in str(info.value) and where in str(info.value)
    assert isinstance(info.value, fc().FimConstrainError)


@pytest.mark.parametrize("bad", FORBIDDEN, ids=ascii)
def test_forbidden_character_in_the_middle_is_rejected_where_it_is(bad):
    checker = fc().fim_checker("x = 1\ny = ", "\n")
    middle = "2 # a" + bad + "b"
    assert checker.feed(middle) is None
    assert first_dead(checker, middle) == middle.index(bad)


def test_the_issue_repro_nul_in_a_comment_of_the_suffix():
    """ast.parse rejects it, so no middle may make it complete."""
    assert not ast_ok("x = 1\ny = 2\n# \x00\n")
    with pytest.raises(fc().InputError):
        fc().fim_checker("x = 1\ny = ", "\n# \x00\n")


@pytest.mark.parametrize(
    "prefix, middle, suffix",
    [
        ("\ufeffx = ", "1", "\n"),
        ("\ufeff", "import os\n", ""),
        ("\ufeffdef f():\n    return ", "1", "\n"),
        ("\ufeff# coding: utf-8\n", "x = 1\n", ""),
    ],
    ids=repr,
)
def test_byte_order_mark_at_file_start_is_accepted_as_cpython_reads_files(prefix, middle, suffix):
    text = prefix + middle + suffix
    assert compile(text.encode("utf-8"), "<bom>", "exec")  # CPython reading the file's bytes
    assert ast_ok(text)
    checker = fc().fim_checker(prefix, suffix)
    assert checker.feed(middle).is_complete()


@pytest.mark.parametrize("text", ["x = 1\n\ufeff\n", "x = \ufeff1\n", "\ufeff\ufeffx = 1\n"], ids=ascii)
def test_byte_order_mark_elsewhere_in_code_is_rejected(text):
    assert not ast_ok(text)
    cut = len(text) // 2
    try:
        checker = fc().fim_checker(text[:cut], text[cut:])
    except fc().UncompletableError:
        return
    after = checker.feed("")
    assert after is None or not after.is_complete()


def test_byte_order_mark_at_the_start_of_the_suffix_starts_the_file_only_after_an_empty_middle():
    checker = fc().fim_checker("", "\ufeffx = 1\n")
    assert checker.is_complete()
    assert checker.feed("y = 2\n") is None or not checker.feed("y = 2\n").is_complete()
    assert not ast_ok("y = 2\n\ufeffx = 1\n")
    assert checker.feed("#").is_complete() and ast_ok("#\ufeffx = 1\n")


def test_byte_order_mark_error_offsets_count_it():
    with pytest.raises(fc().UncompletableError) as info:
        fc().fim_checker("\ufeffx = = 1\n", "")
    assert info.value.offset == len("\ufeffx = ")
