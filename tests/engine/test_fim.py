"""Fill in the middle: the checker's verdict on prefix + middle + suffix must be ast.parse's."""

import random
import sysconfig
from pathlib import Path

import pytest
from conftest import ast_ok as parses
from conftest import fc  # fim_checker at the running version: the oracle here is its ast.parse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fimconstrain


def verdict(prefix: str, middle: str, suffix: str, chunk: int = 3) -> bool:
    """Feed ``middle`` in chunks; complete means the whole file is accepted."""
    try:
        checker = fc().fim_checker(prefix, suffix)
    except fimconstrain.UncompletableError:
        return False
    for i in range(0, len(middle), chunk):
        checker = checker.feed(middle[i : i + chunk])
        if checker is None:
            return False
    return checker.is_complete()


def assert_like_python(prefix: str, middle: str, suffix: str) -> None:
    expected = parses(prefix + middle + suffix)
    assert verdict(prefix, middle, suffix) == expected, (prefix, middle, suffix, expected)
    if expected:  # completeness also for one-character feeding
        assert verdict(prefix, middle, suffix, chunk=1)


# Paper 004, Figure 6: one right context, many ways the middle's last symbol can run into it.
FIGURE_6_SUFFIX = '"#\'#"#"#\n'
FIGURE_6_MIDDLES = ["", '"foo', '"""foo""', "'foo", '"foo\\', "#foo", '"""foo', "1 + ", "x"]


@pytest.mark.parametrize("middle", FIGURE_6_MIDDLES)
def test_figure_6_symbols_crossing_the_cut(middle):
    assert_like_python("x = ", middle, FIGURE_6_SUFFIX)


# Figures 9 and 10: the indentation before the suffix's first newline is unknown.
INDENTATION_CASES = [
    ("if foo:\n    if bar:\n        pass", "", "\n    pass\n"),
    ("if foo:\n    if bar:\n        pass", "\n        x = 1", "\n    pass\n"),
    ("if foo:\n    if bar:\n        pass", "\nelse:\n  y", "\n    pass\n"),
    ("if foo:\n", "    if foo:\n", "        pass\n"),
    ("if foo:\n", "  if foo:\n", "        pass\n"),
    ("if foo:\n", "", "  try:\n    if baz:\n      pass\n  except e:\n    pass\n"),
    ("if foo:\n  try:\n", "    if baz:\n      pass", "\n  except e:\n    pass\n"),
    ("if foo:\n  try:\n", "    if baz:\n      pass", "\n   except e:\n    pass\n"),
    ("def f():\n    x = 1\n", "    return x", "\n\ndef g():\n    pass\n"),
    ("def f():\n    x = 1\n", "  return x", "\n\ndef g():\n    pass\n"),
    ("class A:\n    def f(self):\n", "        return 1\n", "    def g(self):\n        pass\n"),
    ("class A:\n    def f(self):\n", "        return 1\n  ", "    def g(self):\n        pass\n"),
    ("for i in x:\n", "    pass\n", "else:\n    pass\n"),
    ("for i in x:\n", "    pass\n    ", "else:\n    pass\n"),
    ("if a:\n\tif b:\n", "\t\tpass\n", "\telse:\n\t\tpass\n"),
    ("if a:\n\tif b:\n", "        pass\n", "\telse:\n\t\tpass\n"),
]


@pytest.mark.parametrize("prefix,middle,suffix", INDENTATION_CASES)
def test_indentation_across_the_cut(prefix, middle, suffix):
    assert_like_python(prefix, middle, suffix)


# Section VI-C: the bracket depth at the cut is unknown; extra closers in the suffix.
BRACKET_CASES = [
    ("foo(a,", " b", ")\n"),
    ("foo(a,", " b)", ")\n"),
    ("foo(a,", " b\n", ")\n"),
    ("foo(a,", "", ")\n"),
    ("x = [", "1, (2", ")]\n"),
    ("x = [", "1, (2", "]]\n"),
    ("x = ", "{'a': [1", "]}\nprint(x)\n"),
    ("x = ", "f(a\n", "\n  , b)\n"),
    ("x = ", "1\n", "  + 2\n"),
    ("x = (", "1\n", "  + 2)\n"),
    ("if (a and\n", "    b", "):\n    pass\n"),
    ("if (a and\n", "b):", "\n    pass\n"),
]


@pytest.mark.parametrize("prefix,middle,suffix", BRACKET_CASES)
def test_brackets_across_the_cut(prefix, middle, suffix):
    assert_like_python(prefix, middle, suffix)


SYMBOL_CASES = [
    ("value = compu", "ted_tot", "al + 1\n"),
    ("value = compu", "ted tot", "al + 1\n"),
    ("x = 12", "3", "45\n"),
    ("x = 12", ".", "45\n"),
    ("x = 12", " ", "45\n"),
    ("x = 0", "x", "ff\n"),
    ("x = a ", "=", "= b\n"),
    ("x = a =", "", "= b\n"),
    ("x = 'abc", "def", "ghi'\n"),
    ("x = 'abc", "d'ef", "ghi'\n"),
    ('x = """abc\n', "def\n", 'ghi"""\n'),
    ('x = """abc\n', 'def"""', '\nghi"""\n'),
    ("x = f'{a", "+b", "}'\n"),
    ("x = f'{a", "+", "}'\n"),
    ("x = rb'\\", "d", "'\n"),
    ("x = 1  # comm", "ent", "\ny = 2\n"),
    ("x = 1  # comm", "ent\n", "y = 2\n"),
    ("x = 1 + \\", "\n", "    2\n"),
    ("x = 1 + \\", "\n\n", "    2\n"),
    ("def f():\n    '''Doc", "string", "'''\n    return 1\n"),
    ("def f():\n    '''Doc", "string'''", "\n    return 1\n"),
    ("", "import os\n", ""),
    ("", "", ""),
    ("", "x = 1", "\n"),
    ("x = 1\n", "", ""),
    ("x = 1\n", "y = ", "2\n"),
    ("x = 1\n", "", "\n"),
    ("x = 1\n", "  ", "\n"),
    ("if x:\n", "  ", "  pass\n"),
    ("if x:\n", "   ", " pass\n"),
    ("x = 1\r\n", "y = 2\r", "\nz = 3\r\n"),
    ("x = 1\r\n", "y = 2", "\r\nz = 3\r\n"),
    ("x = 1\r", "\n", "z = 3\r\n"),
    ("match x:\n    case ", "[1, *rest]", ":\n        pass\n"),
    ("match x:\n    case ", "[1, *rest] if rest", ":\n        pass\n"),
    ("lambda_ = lambda ", "x, /, y=1, *a, z, **k", ": x\n"),
    ("@decorator", "(arg)", "\ndef f(): pass\n"),
    ("async def f():\n    async with a as b, c", " as d", ":\n        pass\n"),
]


@pytest.mark.parametrize("prefix,middle,suffix", SYMBOL_CASES)
def test_symbols_and_edges(prefix, middle, suffix):
    assert_like_python(prefix, middle, suffix)


def test_feed_is_pure_with_a_suffix():
    checker = fc().fim_checker("foo(a,", ")\n")
    good = checker.feed(" b")
    assert checker.feed(" b]") is None
    assert good is not None and good.is_complete()
    assert not checker.feed(" b(").is_complete()
    assert good.is_complete()


def _real_files():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = ["textwrap.py", "shlex.py", "bisect.py", "colorsys.py", "fnmatch.py", "this.py"]
    return [(name, (stdlib / name).read_text("utf-8")) for name in names if (stdlib / name).exists()]


REAL_FILES = _real_files()


def _line_and_span_cuts(source: str, rng: random.Random, count: int):
    """Pairs of cuts: 1-5 whole lines at a random line, then any span of up to 100 characters."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    for _ in range(count):
        i = rng.randrange(len(lines))
        j = min(len(lines), i + rng.randint(1, 5))
        yield offsets[i], offsets[j]
        a = rng.randrange(len(source) + 1)
        yield a, min(len(source), a + rng.randint(0, 100))


@pytest.mark.parametrize("name,source", REAL_FILES, ids=[n for n, _ in REAL_FILES])
def test_original_middles_of_real_files_are_accepted(name, source):
    rng = random.Random(name)
    for a, b in _line_and_span_cuts(source, rng, 12):
        checker = fc().fim_checker(source[:a], source[b:])
        middle = source[a:b]
        i = 0
        while i < len(middle):
            n = rng.randint(1, 8)
            checker = checker.feed(middle[i : i + n])
            assert checker is not None, (name, a, b, middle[: i + n])
            i += n
        assert checker.is_complete(), (name, a, b)


@pytest.mark.parametrize("name,source", REAL_FILES[:4], ids=[n for n, _ in REAL_FILES[:4]])
def test_every_stop_along_a_middle_answers_as_python(name, source):
    """``is_complete`` after each character of the true middle, one checker after the other, cut
    at a line start and mid-line: the suffix's plan remembers its verdicts at the starts of its
    lines, and the later stops that meet one there answer from it."""
    rng = random.Random(name)
    lines = source.splitlines(keepends=True)
    for _ in range(3):
        i = rng.randrange(len(lines) - 1)
        a = sum(map(len, lines[:i])) + rng.choice([0, len(lines[i]) // 2])  # a line start, a mid-line
        b = a + len(lines[i]) + len(lines[i + 1])
        prefix, middle, suffix = source[:a], source[a:b], source[b:]
        checker = fc().fim_checker(prefix, suffix)
        for k, ch in enumerate(middle, 1):
            checker = checker.feed(ch)
            assert checker is not None, (name, a, middle[:k])
            assert checker.is_complete() == parses(prefix + middle[:k] + suffix), (name, a, middle[:k])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_real_cuts_and_mutated_middles(data):
    _name, source = data.draw(st.sampled_from(REAL_FILES))
    a = data.draw(st.integers(0, len(source)))
    b = data.draw(st.integers(a, min(len(source), a + 120)))
    middle = source[a:b]
    assert verdict(source[:a], middle, source[b:], chunk=data.draw(st.integers(1, 8)))
    if middle:
        pos = data.draw(st.integers(0, len(middle) - 1))
        char = data.draw(st.sampled_from(list("()[]{}:,.=+- \n\t'\"#\\x1")))
        mutated = middle[:pos] + char + middle[pos + 1 :]
        assert verdict(source[:a], mutated, source[b:]) == parses(source[:a] + mutated + source[b:])


UNJOINABLE = [
    ("def f():\n    x = ", "\n    return x\n\ndef g(:\n    pass\n"),
    ("x = ", "1\n\nclass A:\n    def f(self):\n  return 1\n"),
    ("x = (", "\ny = 1 +\n"),
    ("import os\n", "\nprint(os.sep\n"),
    # broken inside the head (the open top-level statement), whatever the middle
    ("def f():\n    ", "return 1\n    x = (]\n    return x\n"),
    ("class A:\n    x = ", "1\n    def f(self) -> -> int:\n        pass\n"),
    ("if a:\n    ", "pass\n  foo\n    bar(\n"),  # the file cannot end: a bracket stays open
    ("x = 1\n", "if a:\n        x = 1\n    y = 2\n      z = 3\nw = 1\n"),  # an indent after `y = 2`
]


@pytest.mark.parametrize("prefix,suffix", UNJOINABLE)
def test_unjoinable_contexts_get_a_clear_answer(prefix, suffix):
    with pytest.raises(fimconstrain.UncompletableError) as info:
        fc().fim_checker(prefix, suffix)
    assert "no middle can join" in str(info.value)
    assert len(prefix) <= info.value.offset <= len(prefix) + len(suffix)


# Heads that look broken but that some middle rescues: the refutation must let them through.
@pytest.mark.parametrize(
    "prefix,middle,suffix",
    [
        ("x = 1\n", "y = '", "(]'\n"),  # the suffix starts inside a string
        ("x = 1\n", "# ", "(] } )\nz = 2\n"),  # inside a comment
        ("def f():\n    return ", "x *", "* 2\n"),  # an operator split by the cursor
        ("x = [1, 2", "][", "0]\n"),  # closers opened by the middle
        ("x = 1\n", 'y = """', '\n(]\n"""\n'),  # a triple-quoted string over lines
        ("x = ", "1", "e-3 if a else b\n"),  # a number split by the cursor
        ("x = 1\n", 'y = "', 'a \\" (] \\" b"\nz = 2\n'),  # escaped quotes before the closing one
        ("s = ", 'r"""', '\n)$\n"""\nt = 1\n'),  # a string that runs past the head
    ],
)
def test_heads_that_only_look_broken_are_joinable(prefix, middle, suffix):
    assert parses(prefix + middle + suffix)
    assert verdict(prefix, middle, suffix)


# Tails that are broken on their own but can be rescued by what comes before them.
RESCUABLE = [
    ("x = ", '"""', '\ny = """\n'),  # a string from the middle swallows the broken line
    ("x = (1,", "", "\n2)\n"),  # the tail closes a bracket left open
    ("x = [", "1,", "\n2]\n"),
    ("def f():\n    return ", "'''", "\n\n)'''\n"),
]


@pytest.mark.parametrize("prefix,middle,suffix", RESCUABLE)
def test_rescuable_tails_are_not_refused(prefix, middle, suffix):
    assert parses(prefix + middle + suffix)
    assert verdict(prefix, middle, suffix)
