"""The holes at the cut (issue "Holes at the cut"): one test per class from its repro, then
every cut of a family of files around it, judged by the running interpreter's ast.parse.

Classes: C1 a backslash continuation across the cut into a column-0 suffix line; C2 a
continued block header whose body is indented less than the continuation; C3 bracket lines at
column 0 with dedents the stdlib tokenizer refuses; C4 CPython's end-of-file rules for a final
backslash; C5 a cursor in a last-line comment without a final newline; S1 complex literals in
patterns; S2 ``_`` where CPython has already read a wildcard; S3 NUL and lone surrogates.
"""

from __future__ import annotations

import pytest
from conftest import ast_ok, fc, uncompletable

REPROS = {
    "C1": ("x = 1", " \\", "\n, 2\n"),
    "C2": ("if x", " \\", "\n  :\n pass\n"),
    "C3": ("x = (", "", "\n1,\n    2,\n  3)\n"),
    "C4": ("", "x = 1 \\\r\n", ""),
    "C5": ("#", "", " a b"),
    "S1": ("match x:\n case ", "1+2", ": pass\n"),
    "S2": ("match x:\n case ", "y as _", ": pass\n"),
    "S3": ("x = '", "", "\x00'\n"),
}

VARIANTS = {
    "C1": [
        "x = 1 \\\n, 2\n",
        "x = [1,\\\n2]\n",
        "def f():\n    return 1 + \\\n2\n",
        "if a and \\\nb:\n    pass\n",
        "x = 1 \\\r\n+ 2\r\n",
        "import os, \\\nsys\n",
        "with a as b, \\\nc as d:\n pass\n",
        "assert x, \\\n'msg'\n",
        "x = \\\n1\n",
        "if x: y = \\\n1\nelse: pass\n",
        "s = 'ab\\\ncd'\n",
    ],
    "C2": [
        "if x \\\n  :\n pass\n",
        "while a \\\n    and b:\n  pass\n",
        "def f(a) \\\n      -> int:\n  return a\n",
        "class A \\\n   (B):\n pass\n",
        "for i in \\\n        range(3):\n    pass\n",
        "if x:\n    if y \\\n  :\n        pass\n",
    ],
    "C3": [
        "x = (\n1,\n    2,\n  3)\n",
        "f(a,\nb,\n   c\n )\n",
        "x = [\n  1,\n 2]\ny = 2\n",
        "d = {\n'a': 1,\n    'b': 2,\n      }\n",
        "def f(\na,\n   b):\n    pass\n",
        "if x:\n    y = (\n1,\n  2)\n    z = 1\n",
        "x = f'{(\n1,\n   2)}'\n",
    ],
    "C4": [
        "x = 1\\\r\n",
        "x = 1\\\n",
        "x = 1 \\\r\n\r\n",
        "if x:\n    y = 2 \\\r\n",
        "x = (1,\\\r\n",
        "x = 1\r\n\\\r\n",
        "\\\r\n",
        "x = 1\\\r",
        "# c\\\r\n",
        "x = 1\\",
    ],
    "C5": [
        "# a b",
        "x = 1\n# a b",
        "x = 1  # c",
        "if x:\n    pass  # end",
        "x = 1 # '\"",
        "#",
        "x = 1\r\n# a b",
        "def f():\n    return 1\n    # done",
    ],
    "S1": [
        "match x:\n case 1+2j: pass\n",
        "match x:\n case -1-2j: pass\n",
        "match x:\n case 1+2: pass\n",
        "match x:\n case 1j+2j: pass\n",
        "match x:\n case -1: pass\n",
        "match x:\n case 1.5-0j: pass\n",
        "match x:\n case (1+2j, -3): pass\n",
        "match x:\n case {1+2j: y}: pass\n",
        "match x:\n case 0x1+2j: pass\n",
        "match x:\n case -1+2: pass\n",
        "match x:\n case 1-2J|3: pass\n",
    ],
    "S2": [
        "match x:\n case y as _: pass\n",
        "match x:\n case {**_}: pass\n",
        "match x:\n case _.x: pass\n",
        "match x:\n case _(): pass\n",
        "match x:\n case _: pass\n",
        "match x:\n case [_, *_]: pass\n",
        "match x:\n case C(a=_): pass\n",
        "match x:\n case {'a': _}: pass\n",
        "match x:\n case _ as y: pass\n",
        "match x:\n case (_): pass\n",
        "match x:\n case a._: pass\n",
        "match x:\n case _.a.b(): pass\n",
        "match x:\n case C(_=1): pass\n",
        "match x:\n case {_.x: 1}: pass\n",
        "match x:\n case 1 | _.x: pass\n",
    ],
    "S3": ["x = '\x00'\n", "x = 1 # \x00\n", "x = '\ud800'\n", "x = 1\n\x00", "x = 1\n# \udfff\n"],
}


def engine_ok(prefix: str, middle: str, suffix: str) -> bool:
    try:
        checker = fc().fim_checker(prefix, suffix)
    except uncompletable():
        return False
    after = checker.feed(middle)
    return after is not None and after.is_complete()


@pytest.mark.parametrize("name", sorted(REPROS))
def test_each_class_repro(name):
    prefix, middle, suffix = REPROS[name]
    assert engine_ok(prefix, middle, suffix) == ast_ok(prefix + middle + suffix)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_cut_of_each_class_variants(name):
    bad = []
    for text in VARIANTS[name]:
        expected = ast_ok(text)
        for i in range(len(text) + 1):
            for j in range(i, len(text) + 1):
                if engine_ok(text[:i], text[i:j], text[j:]) != expected:
                    bad.append((text[:i], text[i:j], text[j:], expected))
    assert not bad, f"{len(bad)} cuts disagree with ast.parse, first: {bad[:3]}"


@pytest.mark.parametrize(
    "version,accepted", [("3.8", True), ("3.11", True), ("3.12", False), ("3.14", False)]
)
def test_a_final_backslash_crlf_follows_each_version(version, accepted):
    """CPython before 3.12 translated a final ``\\r\\n`` into two line breaks, so a backslash may
    end such a file; 3.12 and later (3.14.2 under pyodide too) reject it, as all reject ``\\\\\\n``."""
    crlf = [
        ("", "x = 1\\\r\n", ""),
        ("x = 1", "\\\r", "\n"),
        ("x = 1\\", "", "\r\n"),
        ("x = 1\\\r", "\n", ""),
    ]
    lf = [("", "x = 1\\\n", ""), ("x = 1", "\\", "\n"), ("x = 1\\", "", "\n")]
    for cuts, expected in ((crlf, accepted), (lf, False)):
        for prefix, middle, suffix in cuts:
            try:
                after = fc().fim_checker(prefix, suffix, python_version=version).feed(middle)
            except uncompletable():
                after = None
            assert (after is not None and after.is_complete()) == expected, (prefix, middle, suffix)


def test_a_bad_character_in_the_suffix_is_reported_where_it_is():
    with pytest.raises(fc().InputError) as info:
        fc().fim_checker("x = '", "ab\x00'\n")
    assert info.value.offset == len("x = 'ab")
    with pytest.raises(fc().InputError) as info:
        fc().fim_checker("x = 1\n", "# \ud800\n")
    assert info.value.offset == len("x = 1\n# ")


def test_continuation_suffixes_are_still_refuted_when_no_line_can_hold_them():
    """The head ``\\n`` may follow a backslash, so the tail is not read as a file on its own;
    what no program can hold is still refuted."""
    with pytest.raises(uncompletable()):
        fc().fim_checker("x = (", "\ny = 1 +\n")
    with pytest.raises(uncompletable()):
        fc().fim_checker("x = 1", "\ny = = 2\nz = 3\n")


@pytest.mark.parametrize("elements", [300, 3000])
@pytest.mark.parametrize("item", ["1, ", "a + ", "f(x), ", "'s', "])
def test_long_single_line_suffixes_are_accepted(elements, item):
    assert fc().fim_checker("x = [", item * elements + "0]\n").is_complete()


@pytest.mark.parametrize("item", ["1, ", "a + ", "f(x), "])
def test_an_error_after_a_long_line_is_still_refuted(item):
    """The forgetful infix parse (linear in the suffix) keeps its power within its window: the
    line after a long one cannot hold ``= =`` (the long line alone could be a comment)."""
    with pytest.raises(uncompletable()):
        fc().fim_checker("x = [", item * 300 + "0,\n  = = 1]\n")
