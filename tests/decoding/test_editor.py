"""The editor's policy in the library: whether the cursor asks for a line or a block, which
Python version a file is completed as, and the same item from ``fimconstrain complete`` and the
language server."""

from __future__ import annotations

import os

import pytest


def test_multiline_policy():
    from fimconstrain.decoding.editor import wants_multiline

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
    from fimconstrain.decoding.python_version import lower_bound

    assert lower_bound(spec) == bound


def test_auto_version_from_the_nearest_pyproject(tmp_path):
    from fimconstrain.decoding.python_version import Chooser

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
