"""The one end-of-middle policy: a finish only closes what is open, never invents a name, a
literal or an operator; the editor takes no finish at all; repetition of the suffix is dropped."""

from __future__ import annotations

import ast

import pytest

import fimconstrain
from fimconstrain.decoding.loop.end_of_middle import (
    block_ends_in,
    drop_repetition,
    finish_middle,
    hides_rest_of_line,
    invents,
    says_nothing,
    single_line_end,
)

PREFIX, SUFFIX = "def f(x):\n    y = x + 1\n", "\n    return y\n"


@pytest.mark.parametrize("finish", [")", "]\n", "):\n        pass", ",)", "}"], ids=repr)
def test_closing_finishes_invent_nothing(finish):
    assert not invents(finish)


@pytest.mark.parametrize("finish", [" else A :", ")<", "}+", "0)", "'", "A", " is None", "passA"], ids=repr)
def test_finishes_that_say_something_invent(finish):
    assert invents(finish)


def test_a_middle_cut_short_is_closed_not_extended():
    checker = fimconstrain.fim_checker(PREFIX, SUFFIX)
    out = finish_middle(checker, "    z = (y +", suffix=SUFFIX)
    assert out == "    z = (y)"  # an operand would be invented: the tail "+" is dropped instead
    ast.parse(PREFIX + out + SUFFIX)


def test_without_the_finish_search_only_complete_cuts_count():
    checker = fimconstrain.fim_checker(PREFIX, SUFFIX)
    assert finish_middle(checker, "    z = (y", suffix=SUFFIX, finish=False) is None
    assert finish_middle(checker, "    z = y\n    w = (y", suffix=SUFFIX, finish=False) == "    z = y\n"
    assert finish_middle(checker, "    z = y", suffix=SUFFIX, finish=False) == "    z = y"


def test_repetition_of_the_suffix_is_dropped():
    checker = fimconstrain.fim_checker(PREFIX, SUFFIX)
    assert finish_middle(checker, "    z = y\n    return y", suffix=SUFFIX) == "    z = y"
    assert finish_middle(checker, "    z = 1\n    w = 2", single_line=True, suffix=SUFFIX) == "    z = 1"
    line_prefix, line_suffix = "x = max(a, ", "b)\n"
    line_checker = fimconstrain.fim_checker(line_prefix, line_suffix)
    assert drop_repetition(line_checker, "c, b)", line_suffix) == "c, "
    assert finish_middle(line_checker, "", suffix=line_suffix) is None  # nothing to offer


@pytest.mark.parametrize(
    "prefix, middle, suffix",
    [
        ("x = [1, 2", ", 3, 4 +", "\n"),
        ("if x:\n    y = (", "a, b", "\nprint(y)\n"),
        ("values = {", "'a': 1, 'b'", "\n"),
    ],
    ids=repr,
)
def test_finished_middles_are_valid_and_invent_nothing(prefix, middle, suffix):
    checker = fimconstrain.fim_checker(prefix, suffix)
    out = finish_middle(checker, middle, suffix=suffix)
    if out is None:
        return
    ast.parse(prefix + out + suffix)
    kept = max((i for i in range(len(out) + 1) if middle.startswith(out[:i])), default=0)
    assert not invents(out[kept:]), out


def test_an_inventing_finish_is_the_last_resort():
    """``x = (1 +``: every cut still needs an operand, so batch decoding takes the longest
    cut's finish (the file must be valid); the editor shows nothing."""
    checker = fimconstrain.fim_checker("x = (1 +", "\n")
    assert finish_middle(checker, " 2 *", suffix="\n") == " 2)"  # a cut that closes comes first
    out = finish_middle(checker, " -", suffix="\n")
    assert out is not None and out.startswith(" -") and invents(out[2:])
    ast.parse("x = (1 +" + out + "\n")
    assert finish_middle(checker, " -", suffix="\n", finish=False) is None


def test_a_one_line_middle_never_adds_a_line():
    """At ``    return |`` at the end of a file, a middle starting with a line break would leave a
    bare ``return`` and start a second line (seen in VS Code): cut there, nothing is left."""
    assert single_line_end("\n    return width") == 0
    assert single_line_end("width\n") == 5 and single_line_end("width") is None
    prefix = "def area(width, height):\n    return "
    checker = fimconstrain.fim_checker(prefix, "")
    assert not finish_middle(checker, "\n    return width", single_line=True, suffix="")
    assert finish_middle(checker, "width * height\nprint(1)", single_line=True, suffix="") == "width * height"


@pytest.mark.parametrize(
    "prefix,middle,suffix,hides",
    [
        ("    def ", "get(self):  # note", "add(self):\n", True),  # the comment swallows `add(self):`
        ("    def ", "f(self", ", a):  # x\n", False),  # the comment is the suffix's own
        ('x = "#', '" + y', " + z\n", False),  # a # inside a string
        ("x = ", "a  # c", "\n", False),  # nothing after the cursor to hide
        ("x = (", "1,\n  2)  # c", "  + 3\n", True),  # the middle's last line counts
    ],
)
def test_a_middle_may_not_comment_out_the_rest_of_the_line(prefix, middle, suffix, hides):
    assert hides_rest_of_line(prefix, middle, suffix) is hides


@pytest.mark.parametrize(
    "prefix,middle,start,ends",
    [
        ("def f():\n", "    return 1\n\nif x:\n", 0, ["    return 1\n", "    return 1"]),
        ("def f():\n    ", "x = 1\n    y = 2\nz", 0, ["x = 1\n    y = 2\n", "x = 1\n    y = 2"]),
        ("def f():", "\n    x = 1\n  y", 0, ["\n    x = 1\n", "\n    x = 1"]),  # after the header
        ("def f():\n    ", "x = 1\n    y = 2\n", 0, []),  # still in the block
        ("def f():\n    ", "x = 1\nz", 8, []),  # the dedent was written before ``start``
    ],
)
def test_a_block_ends_at_a_line_indented_less_than_its_first(prefix, middle, start, ends):
    assert block_ends_in(prefix, middle, start) == ends


@pytest.mark.parametrize(
    "middle,nothing", [("    # note\n", True), ("\n", True), ("    x = 1  # note\n", False)]
)
def test_a_line_of_only_a_comment_says_nothing(middle, nothing):
    assert says_nothing(middle) is nothing
