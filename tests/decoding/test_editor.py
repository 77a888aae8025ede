"""The editor's policy in the library: whether the cursor asks for a line or a block, which
Python version a file is completed as, and the same item from ``fimconstrain complete`` and the
language server."""

from __future__ import annotations

import os

import pytest


def test_multiline_policy():
    from fimconstrain.decoding.editor.policy import wants_multiline

    assert not wants_multiline("x = f(", ")\n")  # inside a line
    assert not wants_multiline("x = ", "\n")  # finishing a line
    assert wants_multiline("def f():\n    ", "\n")  # an empty (indented) line
    assert wants_multiline("def f():", "\n")  # a line that opens a block
    assert wants_multiline("if x:  # why", "\n")
    assert wants_multiline("x = f(", ")\n", "always") and not wants_multiline("def f():\n", "", "never")


@pytest.mark.parametrize(
    "spec, bound",
    [
        (">=3.9", (3, 9)),
        ("~=3.10", (3, 10)),
        (">=3.8,<4", (3, 8)),
        ("^3.11", (3, 11)),
        ("~3.10", (3, 10)),
        ("==3.12.*", (3, 12)),
        (">3.9", (3, 9)),
        (">= 3.10 , != 3.11.*", (3, 10)),
        (">=3.8 <4", (3, 8)),
        ("3.11", (3, 11)),
        ("^3.9 || ^3.11", (3, 9)),
        (">=3.6", (3, 8)),
        (">=2.7", (3, 8)),
        (">=3.15", (3, 14)),
        ("<4", None),
        ("", None),
        ("*", None),
        ("whatever", None),
    ],
)
def test_requires_python_lower_bound(spec, bound):
    from fimconstrain.decoding.editor.python_version import lower_bound

    assert lower_bound(spec) == bound


def test_auto_version_from_the_nearest_pyproject(tmp_path):
    from fimconstrain.decoding.editor.python_version import Chooser

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "a"\nrequires-python = ">=3.9"\n')
    inner = tmp_path / "pkg" / "sub"
    inner.mkdir(parents=True)
    chooser = Chooser()
    choice = chooser.choose("auto", inner / "mod.py")
    assert choice.version == (3, 9) and "'>=3.9'" in choice.source and str(tmp_path) in choice.source
    assert chooser.choose("3.12", inner / "mod.py").version == (3, 12)  # a set version wins
    # the nearest file decides, even without requires-python (then: the newest)
    (tmp_path / "pkg" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    choice = chooser.choose("auto", inner / "mod.py")
    assert choice.version == (3, 14) and "no requires-python" in choice.source
    # Poetry's python dependency, and a file that changed since it was read
    poetry = tmp_path / "pkg" / "pyproject.toml"
    poetry.write_text('[tool.poetry.dependencies]\npython = "^3.11"\n')
    os.utime(poetry, ns=(1, 1))
    assert chooser.choose("auto", inner / "mod.py").version == (3, 11)
    poetry.write_text('[project]\nrequires-python = "~=3.10"\n[tool.poetry.dependencies]\npython = "^3.11"\n')
    os.utime(poetry, ns=(2, 2))
    assert chooser.choose("auto", inner / "mod.py").version == (3, 10)
    # a broken file, no file at all, a document without a path: the newest
    poetry.write_text("[project\n")
    choice = chooser.choose("auto", inner / "mod.py")
    assert choice.version == (3, 14) and "cannot be read" in choice.source
    assert chooser.choose("auto", None).version == (3, 14)  # a buffer with no file


class _Counting:
    """A decoder that always writes ``middle`` (valid, confident) and counts its generations."""

    python_version = (3, 12)

    def __init__(self, middle: str):
        self.middle, self.calls = middle, 0

    def generate(self, prefix, suffix, options=None, controls=None, **changes):
        from fimconstrain.decoding.loop.result import FimResult, StopReason

        self.calls += 1
        return FimResult(self.middle, "constrained", True, StopReason.LINE, 3, 10, logprobs=[-0.1] * 3)


def test_typing_the_start_of_the_shown_item_gets_its_rest_without_the_model():
    from fimconstrain.decoding.editor.policy import ShownItems, complete_at_cursor
    from fimconstrain.decoding.loop.options import DecodeOptions

    decoder, shown = _Counting("a + b"), ShownItems()
    prefix, suffix = "def add(a, b):\n    return ", "\n"
    options = DecodeOptions.editor(True, semantic=False)
    first = complete_at_cursor(decoder, prefix, suffix, options, shown=shown)
    assert [item.middle for item in first.items] == ["a + b"] and not first.recalled
    typed = complete_at_cursor(decoder, prefix + "a +", suffix, options, shown=shown)
    assert [item.middle for item in typed.items] == [" b"] and typed.recalled and decoder.calls == 1
    again = complete_at_cursor(decoder, prefix + "a + ", suffix, options, shown=shown)
    assert [item.middle for item in again.items] == ["b"] and decoder.calls == 1
    complete_at_cursor(decoder, prefix + "a - ", suffix, options, shown=shown)  # not what it showed
    assert decoder.calls == 2
    complete_at_cursor(decoder, prefix + "a + b", suffix, options, shown=shown)  # typed all of it
    complete_at_cursor(decoder, prefix, suffix + "\nx = 1\n", options, shown=shown)  # another text
    assert decoder.calls == 4


def test_generation_stops_early_enough_to_end_the_middle_by_the_deadline():
    from fimconstrain.decoding.editor.policy import ENDING_RESERVE_SECONDS, Deadline

    soon = Deadline(ENDING_RESERVE_SECONDS / 2)
    assert soon.should_stop() and not soon.expired()  # (the middle is ended in what is left)
    assert not Deadline(10 * ENDING_RESERVE_SECONDS).should_stop() and not Deadline().should_stop()


def test_a_cursor_already_completed_is_answered_from_memory_among_several():
    """``ShownItems`` keeps the items of the last cursors (an LRU): moving back to one of them
    answers its items without the model, the one least recently used goes first."""
    from fimconstrain.decoding.editor.policy import ShownItems, complete_at_cursor
    from fimconstrain.decoding.loop.options import DecodeOptions

    decoder, shown = _Counting("a + b"), ShownItems(size=2)
    options = DecodeOptions.editor(True, semantic=False)
    cursors = [(f"def f{n}(a, b):\n    return ", "\n") for n in range(3)]
    complete_at_cursor(decoder, *cursors[0], options, shown=shown)
    complete_at_cursor(decoder, *cursors[1], options, shown=shown)
    again = complete_at_cursor(decoder, *cursors[0], options, shown=shown)
    assert again.recalled and [item.middle for item in again.items] == ["a + b"] and decoder.calls == 2
    complete_at_cursor(decoder, *cursors[2], options, shown=shown)  # the second goes: used least lately
    assert complete_at_cursor(decoder, *cursors[0], options, shown=shown).recalled and decoder.calls == 3
    assert not complete_at_cursor(decoder, *cursors[1], options, shown=shown).recalled
    assert decoder.calls == 4
