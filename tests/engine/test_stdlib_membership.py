"""Whole standard-library files: the engine's verdict must equal ast.parse's.

A deterministic sample of files (fixed seed, ≤ 60 KB), a list of named files
with hard syntax, and the files of the standard library's own test data that
ast.parse rejects (or that are there to test syntax errors). The full run over
every file is ``benchmarks/stdlib_membership.py``.
"""

from __future__ import annotations

import pytest
from conftest import (
    STDLIB,
    ast_message,
    ast_ok,
    fc,
    feed_ok,
    first_dead,
    prefix_ok,
    read_utf8,
    sample_stdlib,
    where,
)

SAMPLE = sample_stdlib(40, 60_000, seed=20240607)

# syntax-heavy files: every statement form, patterns, f-strings, star-expressions, unicode names
HARD = [
    "test/test_grammar.py",
    "test/test_patma.py",
    "lib2to3/tests/data/py3_test_grammar.py",
    "test/test_fstring.py",
    "test/test_unpack_ex.py",
    "test/test_positional_only_arg.py",
    "test/test_named_expressions.py",
    "test/test_except_star.py",
    "test/test_string_literals.py",
    "test/test_type_comments.py",
    "test/test_genexps.py",
    "test/test_unicode_identifiers.py",
    "test/test_utf8source.py",
    "test/test_pep646_syntax.py",
]
HARD = [p for p in HARD if (STDLIB / p).is_file()]
# also checked through fim_checker(src, "") (construction from a prefix)
HARD_PREFIX = ["test/test_grammar.py", "test/test_patma.py"]

# files that exist to exercise syntax errors; most are rejected by ast.parse(str)
BAD_CANDIDATES = [
    "lib2to3/tests/data/py2_test_grammar.py",
    "lib2to3/tests/data/bom.py",
    "lib2to3/tests/data/crlf.py",
    "lib2to3/tests/data/false_encoding.py",
    "lib2to3/tests/data/different_encoding.py",
    "test/badsyntax_3131.py",
    "test/tokenizedata/badsyntax_3131.py",
    "test/tokenizedata/bad_coding2.py",
]
for _d in ("test", "test/test_future_stmt", "test/tokenizedata"):
    if (STDLIB / _d).is_dir():
        BAD_CANDIDATES += sorted(str(p.relative_to(STDLIB)) for p in (STDLIB / _d).glob("badsyntax_*.py"))
BAD = sorted({p for p in BAD_CANDIDATES if (STDLIB / p).is_file() and read_utf8(STDLIB / p) is not None})


def _rel(p):
    return str(p.relative_to(STDLIB))


def _explain(src: str) -> str:
    """Where the engine first goes wrong on a file ast.parse accepts."""
    dead = first_dead(fc().fim_checker("", ""), src)
    if dead is None:
        return "every prefix accepted, but not complete at the end"
    return "rejected at " + where(src, dead)


def test_sample_is_big_enough():
    assert len(SAMPLE) >= 30
    assert len(HARD) >= 5


@pytest.mark.parametrize("path", SAMPLE, ids=_rel)
def test_sample_file(path):
    src = read_utf8(path)
    expected = ast_ok(src)
    ours = feed_ok(src)
    if expected and not ours:
        pytest.fail(f"valid file rejected: {_explain(src)}")
    assert ours == expected, f"ast.parse: {ast_message(src)}"


@pytest.mark.parametrize("rel", HARD)
def test_hard_file(rel):
    src = read_utf8(STDLIB / rel)
    assert src is not None
    expected = ast_ok(src)
    ours = feed_ok(src)
    if expected and not ours:
        pytest.fail(f"valid file rejected: {_explain(src)}")
    assert ours == expected, f"ast.parse: {ast_message(src)}"


@pytest.mark.parametrize("rel", [p for p in HARD_PREFIX if p in HARD])
def test_hard_file_as_prefix(rel):
    src = read_utf8(STDLIB / rel)
    assert prefix_ok(src) == ast_ok(src)


def test_have_bad_files():
    assert any(not ast_ok(read_utf8(STDLIB / p)) for p in BAD), BAD


@pytest.mark.parametrize("rel", BAD)
def test_bad_syntax_file(rel):
    """Files of syntax-error test data: same verdict as ast.parse (rejected where it rejects)."""
    src = read_utf8(STDLIB / rel)
    expected = ast_ok(src)
    assert feed_ok(src) == expected, f"ast.parse: {ast_message(src)}"
    assert prefix_ok(src) == expected, f"ast.parse: {ast_message(src)}"
