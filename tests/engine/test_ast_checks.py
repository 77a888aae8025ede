"""The checks ast.parse makes after parsing, per target version (engine/layers/ast_checks.py and the
grammar's `any_name`): before 3.9 binding `__debug__` and a keyword argument given twice; from
3.14 the names of the module's leading `from __future__` imports. Also 3.12 and 3.13's line
breaks in a one-quote format spec, and 3.12 on a debugging `=` two format specs deep
(engine/layers/fstring_modes.py).

What each version's ast.parse says was measured with that interpreter (pyenv's CPython 3.8.18
to 3.13.0, pyodide's 3.14); ``tests/engine/test_python_versions.py`` compares with the
interpreters themselves. Every case is also cut at every offset into prefix, middle and suffix:
a valid program is accepted from any cut, an invalid one is never complete and is rejected by
``feed`` once the middle holds the offending construct whole.
"""

from __future__ import annotations

import pytest

import fimconstrain

OLD = ["3.8"]
NEW = ["3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
ALL = OLD + NEW


def accepts(version: str, src: str) -> bool:
    c = fimconstrain.fim_checker("", "", python_version=version).feed(src)
    return c is not None and c.is_complete()


def fim_verdicts(version: str, src: str) -> set[bool]:
    """The verdict (fed, then complete) of every cut of ``src`` into prefix, middle and suffix
    with a middle of up to 12 characters, fed one character at a time (a prefix or suffix
    that ``fim_checker`` refutes outright counts as rejected)."""
    out = set()
    for start in range(len(src) + 1):
        for end in range(start, min(len(src), start + 12) + 1):
            try:
                c = fimconstrain.fim_checker(src[:start], src[end:], python_version=version)
            except fimconstrain.UncompletableError:  # the prefix or the suffix is hopeless
                out.add(False)
                continue
            for ch in src[start:end]:
                c = c.feed(ch)
                if c is None:
                    break
            out.add(c is not None and c.is_complete())
    return out


def assert_valid(version: str, src: str) -> None:
    assert accepts(version, src), f"{version} rejects {src!r}"
    assert fim_verdicts(version, src) == {True}, f"{version}: some cut of {src!r} is rejected"


def assert_rejected_only_before_3_9(src: str) -> None:
    """3.8 rejects ``src`` (ast.parse checked it before 3.9); every later version accepts it."""
    assert not accepts("3.8", src)
    for version in NEW:
        assert accepts(version, src), version


def assert_invalid(version: str, src: str) -> None:
    assert not accepts(version, src), f"{version} accepts {src!r}"
    assert fim_verdicts(version, src) == {False}, f"{version}: some cut of {src!r} is complete"


# ---------------------------------------------------------------- __debug__ before 3.9

DEBUG_BINDINGS = [
    "__debug__ = 1\n",
    "__debug__ += 1\n",
    "__debug__: int\n",
    "a, *__debug__ = x\n",
    "(__debug__) = 1\n",
    "x = __debug__ = 1\n",
    "obj.__debug__ = 1\n",
    "obj.__debug__ += 1\n",
    "obj.__debug__: int\n",
    "(__debug__ := 1)\n",
    "for __debug__ in x: pass\n",
    "for x.__debug__ in y: pass\n",
    "[x for __debug__ in y]\n",
    "with x as __debug__: pass\n",
    "try:\n    pass\nexcept E as __debug__:\n    pass\n",
    "import __debug__\n",
    "import a, __debug__\n",
    "import x as __debug__\n",
    "from x import __debug__\n",
    "from x import y as __debug__\n",
    "def __debug__(): pass\n",
    "class __debug__: pass\n",
    "def f(__debug__): pass\n",
    "def f(*, __debug__=1): pass\n",
    "def f(**__debug__): pass\n",
    "lambda __debug__: 0\n",
    "f(__debug__=1)\n",
    "class C(__debug__=1): pass\n",
]

DEBUG_READS = [
    "__debug__\n",
    "x = __debug__\n",
    "print(__debug__, x.__debug__)\n",
    "del __debug__\n",
    "del x.__debug__, [__debug__]\n",
    "x.__debug__.y = 1\n",
    "__debug__[0] += 1\n",
    "global a, __debug__\n",
    "def f():\n    nonlocal __debug__\n",
    "import a.__debug__\n",
    "import __debug__.a\n",
    "import __debug__ as x\n",
    "from __debug__ import x\n",
    "from x import __debug__ as y\n",
    "@__debug__\ndef f(): pass\n",
    "@a.__debug__(x)\ndef f(): pass\n",
    "f(**__debug__)\n",
    "f'{__debug__}'\n",
    "__debug__x = 1\n",
    "x__debug__ = 1\n",
]


@pytest.mark.parametrize("src", DEBUG_BINDINGS)
def test_binding_debug_is_rejected_before_3_9(src):
    assert_rejected_only_before_3_9(src)


@pytest.mark.parametrize("src", DEBUG_READS)
@pytest.mark.parametrize("version", ALL)
def test_reading_debug_is_fine_everywhere(version, src):
    assert accepts(version, src)


@pytest.mark.parametrize(
    "src", ["__debug__ = 1\n", "f(__debug__=1)\n", "import x as __debug__\n", "def f(__debug__): pass\n"]
)
def test_binding_debug_at_every_cut(src):
    assert_invalid("3.8", src)
    assert_valid("3.9", src)


@pytest.mark.parametrize("src", ["x = __debug__\n", "f(__debug__)\n", "del __debug__\n", "__debug__x = 1\n"])
def test_reading_debug_at_every_cut(src):
    assert_valid("3.8", src)


def test_debug_rejected_once_the_binding_is_unavoidable():
    c = fimconstrain.fim_checker("", "", python_version="3.8")
    c = c.feed("__debug__ ")
    assert c is not None  # `__debug__ == 1` may follow
    assert c.feed("= 1\n") is None
    assert c.feed("== 1\n") is not None
    call = fimconstrain.fim_checker("f(", ")\n", python_version="3.8")
    assert call.feed("__debug__") is not None
    assert call.feed("__debug__=") is not None  # `__debug__==1` may follow
    assert call.feed("__debug__=1") is None


# ---------------------------------------------------------------- repeated keyword arguments

REPEATED = [
    "f(a=1, a=2)\n",
    "f(a, b=1, b=1)\n",
    "f(a=1, *b, a=2)\n",
    "f(a=1, **k, a=2)\n",
    "f(1, x=2, *(3, 4), x=5)\n",
    "class C(a=1, b=2, a=3): pass\n",
    "@f(a=1, a=2)\ndef g(): pass\n",
    "f(x for x in y)(a=1, a=1)\n",
    "f'{f(a=1, a=2)}'\n",
    "f(a=1,\n  # comment\n  a=2)\n",
    "f(a=g(b=1), b=2, a=3)\n",
]

NOT_REPEATED = [
    "f(a=1, b=2)\n",
    "f(a=1)(a=2)\n",
    "f(a=1, b=f(a=2))\n",
    "f(a=1, b=lambda a=2: 0, c=3)\n",
    "f(lambda a=1: 0, a=2)\n",
    "f(a=1, b=(lambda: 0)(a=1))\n",
    "f(a=1, **k, **k)\n",
    "f(a=1, b=[a for a in b], c={a: 1})\n",
    "def f(a=1, b=2): pass\n",
    "def f(a: b=1, c: b=2): pass\n",
    "f(a == 1, a == 2)\n",
    "f(a=(a := 1), b=a)\n",
    "f(x=1)\nf(x=2)\n",
    "d = dict(a=1, b=2)\ne = dict(a=1, b=2)\n",
]


@pytest.mark.parametrize("src", REPEATED)
def test_repeated_keyword_argument_is_rejected_before_3_9(src):
    assert_rejected_only_before_3_9(src)


@pytest.mark.parametrize("src", NOT_REPEATED)
@pytest.mark.parametrize("version", ALL)
def test_distinct_keyword_arguments_are_fine(version, src):
    assert accepts(version, src)


@pytest.mark.parametrize("src", ["f(a=1, a=2)\n", "f(a=1, *b, a=2)\n"])
def test_repeated_keyword_argument_at_every_cut(src):
    assert_invalid("3.8", src)
    assert_valid("3.9", src)


@pytest.mark.parametrize("src", ["f(a=1, b=2)\n", "f(lambda a=1: 0, a=2)\n", "f(a=1)(a=2)\n"])
def test_distinct_keyword_arguments_at_every_cut(src):
    assert_valid("3.8", src)


def test_repeated_keyword_rejected_at_its_equals_sign():
    c = fimconstrain.fim_checker("f(a=1, ", ")\n", python_version="3.8")
    assert c.feed("a") is not None  # `aa=2` may follow
    assert c.feed("a =") is not None  # `a == 2` may follow (wrong for other reasons, not this one)
    assert c.feed("a = ") is None
    assert c.feed("a=2") is None
    assert c.feed("aa=2") is not None
    assert fimconstrain.fim_checker("f(a=1, ", "=2)\n", python_version="3.8").feed("a") is not None
    assert not fimconstrain.fim_checker("f(a=1, ", "=2)\n", python_version="3.8").feed("a").is_complete()


# ---------------------------------------------------------------- future imports in 3.14

BAD_FUTURES = [
    "from __future__ import braces\n",
    "from __future__ import nonexistent\n",
    "from __future__ import *\n",
    "from __future__ import braces as b\n",
    "from __future__ import (annotations, braces)\n",
    "from __future__ import (annotations,\n    braces,)\n",
    "from __future__ import annotations\nfrom __future__ import nonexistent\n",
    "from __future__ import annotations; from __future__ import braces\n",
    '"""Doc."""\nfrom __future__ import braces\n',
    '# comment\n\n("doc" "string")\n\nfrom __future__ import braces\n',
    '"doc"; from __future__ import braces\n',
    "from __future__ import annotations as a, braces\n",
    "from __future__ import match\n",
]

GOOD_FUTURES = [
    "from __future__ import annotations\n",
    "from __future__ import (annotations)\n",
    "from __future__ import annotations as braces\n",
    "from __future__ import nested_scopes, generators, division, absolute_import, with_statement,"
    " print_function, unicode_literals, barry_as_FLUFL, generator_stop, annotations\n",
    # not among the module's leading statements: the compiler's business, not ast.parse's
    "x = 1\nfrom __future__ import braces\n",
    "x = 1; from __future__ import braces\n",
    '"""doc"""\n"""doc2"""\nfrom __future__ import braces\n',
    'b"doc"\nfrom __future__ import braces\n',
    'f"doc"\nfrom __future__ import braces\n',
    '"doc".upper()\nfrom __future__ import braces\n',
    '("doc",)\nfrom __future__ import braces\n',
    "def f():\n    from __future__ import braces\n",
    "if 1:\n    from __future__ import braces\n",
    "from __future__ import annotations\nimport os\nfrom __future__ import braces\n",
    "from .__future__ import braces\n",
    "from __future__.x import braces\n",
    "import __future__\n",
]


@pytest.mark.parametrize("src", BAD_FUTURES)
def test_unknown_future_feature_is_rejected_from_3_14(src):
    assert not accepts("3.14", src)
    for version in ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]:
        assert accepts(version, src), version


@pytest.mark.parametrize("src", GOOD_FUTURES)
@pytest.mark.parametrize("version", ALL)
def test_other_future_imports_are_fine(version, src):
    assert accepts(version, src)


@pytest.mark.parametrize(
    "src", ["from __future__ import braces\n", '"doc"\nfrom __future__ import annotations, nope\n']
)
def test_unknown_future_feature_at_every_cut(src):
    assert_invalid("3.14", src)
    assert_valid("3.13", src)


@pytest.mark.parametrize(
    "src", ["x = 1\nfrom __future__ import braces\n", "from __future__ import annotations\n"]
)
def test_future_imports_at_every_cut(src):
    assert_valid("3.14", src)


def test_future_suffix_tail_depends_on_what_comes_before():
    """A suffix's tail (after a top-level line) is checked on its own only past the module's
    leading statements."""
    suffix = "\nfrom __future__ import braces\n"
    for middle, valid in [("x = 1", True), ('"""doc"""', False), ("", False), ("import os", True)]:
        c = fimconstrain.fim_checker("", suffix, python_version="3.14").feed(middle)
        assert c is not None
        assert c.is_complete() is valid, middle


def test_future_feature_rejected_once_its_name_ends():
    c = fimconstrain.fim_checker("from __future__ import ", "\n", python_version="3.14")
    assert c.feed("annot") is not None  # may become `annotations`
    assert c.feed("annotations") is not None
    assert c.feed("braces") is not None  # may still become `braces_x`... which is no feature either
    assert not c.feed("braces").is_complete()
    assert c.feed("braces ") is None
    assert c.feed("braces,") is None


# ---------------------------------------------------------------- 3.12 and 3.13: format specs

SPEC_BREAKS_VALID_3_12_AND_3_13 = [
    'f"{x:\\n}"\n',
    'f"{x:abc\\n}"\n',
    'f"{x:a\\n  }"\n',
    'f"{x:a\\n#c\\n}"\n',
    'f"{x:a\\n \\\\\\n}"\n',
    'f"{x:\\n{y}}"\n',
    'f"{x:a\\n{y}\\n}"\n',
    "f'{x:{y:a\\n}}'\n",
]
SPEC_BREAKS_INVALID = [
    'f"{x:\\nabc}"\n',
    'f"{x:abc\\ndef}"\n',
    'f"{x:\\n !r}"\n',
    'f"{x:a\\n#c}"\n',
    'f"{x:a\\n{y}b}"\n',
    'rf"{x:a\\nb}"\n',
]


@pytest.mark.parametrize("src", SPEC_BREAKS_VALID_3_12_AND_3_13)
def test_line_break_in_format_spec_accepted_in_3_12_and_3_13(src):
    src = src.encode().decode("unicode_escape")
    assert accepts("3.12", src)
    assert accepts("3.13", src)
    assert not accepts("3.14", src)


@pytest.mark.parametrize("src", SPEC_BREAKS_INVALID)
@pytest.mark.parametrize("version", ["3.12", "3.13", "3.14"])
def test_text_after_a_line_break_in_format_spec_is_rejected(version, src):
    assert not accepts(version, src.encode().decode("unicode_escape"))


@pytest.mark.parametrize("src", ['f"{x:{y}\\n}"\n', 'f"{x:a{y}\\n}"\n', 'f"{x:{y}\\n{z}}"\n'])
def test_line_break_after_a_field_in_format_spec(src):
    src = src.encode().decode("unicode_escape")
    assert accepts("3.12", src)
    assert not accepts("3.13", src)


@pytest.mark.parametrize("version", ["3.12", "3.13", "3.14"])
def test_backslash_line_break_in_format_spec(version):
    assert accepts(version, 'f"{x:a\\\nb}"\n')  # a line continuation, as in any string


def test_format_spec_line_break_at_every_cut():
    assert_valid("3.12", 'f"{x:a\n}"\n')
    assert_invalid("3.12", 'f"{x:a\nb}"\n')


# ---------------------------------------------------------------- 3.12 on: `=` two specs deep

DEBUG_TWO_SPECS_DEEP = ['f"{x:{y:{z=}}}"\n', 'f"{x:{y:{ z = !r}}}"\n', 'f"{x:{y:a{z=:>3}}}"\n']
DEBUG_ALLOWED = [
    'f"{x:{y:{z==1}}}"\n',  # a comparison, not a debugging `=`
    'f"{x:{y:{(z:=1)}}}"\n',
    'f"{x:{y:{f(a=1)}}}"\n',
    "f\"{x:{y:{f'{z=}'}}}\"\n",  # a string of its own: its fields count from zero
    'f"{x=:{y}}"\n',
]


@pytest.mark.parametrize("src", DEBUG_TWO_SPECS_DEEP)
@pytest.mark.parametrize("version", ["3.12", "3.13", "3.14"])
def test_debugging_equals_two_format_specs_deep_is_rejected(version, src):
    """CPython's parser fails there (gh-121130): "field 'value' is required for Constant"."""
    assert_invalid(version, src)


@pytest.mark.parametrize("src", DEBUG_ALLOWED)
@pytest.mark.parametrize("version", ["3.12", "3.14"])
def test_other_equals_signs_in_nested_format_specs_are_kept(version, src):
    assert_valid(version, src)
