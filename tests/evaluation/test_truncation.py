"""The field's post-processing of unconstrained middles (the baseline the constrained path must beat)."""

from __future__ import annotations

import pytest

from fimconstrain.evaluation.examples import Example
from fimconstrain.evaluation.truncation import block_end, call_end, field_truncation, first_line


def _example(benchmark: str, subset: str, prefix: str = "") -> Example:
    return Example("t", "k", "p", "s", prefix, "", "", {"benchmark": benchmark, "subset": subset})


def test_single_line_keeps_the_first_line_with_its_break():
    example = _example("humaneval-infilling", "single-line")
    assert field_truncation(example, "    x = 1\n    y = 2\n") == "    x = 1\n"
    assert field_truncation(example, "    x = 1") == "    x = 1\n"  # a line ends with its break


def test_other_humaneval_subsets_keep_the_middle():
    middle = "    x = 1\n    y = 2\n"
    assert field_truncation(_example("humaneval-infilling", "multi-line"), middle) == middle


def test_a_safim_block_ends_where_a_line_is_indented_less_than_the_cursor():
    example = _example("safim", "block", prefix="for i in x:\n    ")
    assert (
        field_truncation(example, "a = 1\n    if a:\n        b\nprint(a)\n") == "a = 1\n    if a:\n        b"
    )
    assert block_end("a = 1\n", 4) == "a = 1\n"  # no line ends it: as generated


def test_safim_control_is_its_first_line_and_api_its_call():
    assert field_truncation(_example("safim", "control"), "i in x:\n        y") == "i in x:"
    assert (
        field_truncation(_example("safim", "api"), "np.sum(a, axis=(0, 1)) + 2\nz")
        == "np.sum(a, axis=(0, 1))"
    )
    assert call_end("f(')')\n") == "f(')')"  # a bracket inside a string does not count
    assert call_end("x + y\nz") == "x + y"


@pytest.mark.parametrize("middle", ["", "\n", "abc"])
def test_first_line_of_short_middles(middle):
    assert first_line(middle, keep_break=False) == middle.split("\n")[0]
