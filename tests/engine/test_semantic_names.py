"""The completion engines for names (paper 003): the forgiving scanner, where a name is read or
bound, the file-local scopes on real code, and the per-candidate check (exclusions only where
the provider is confident and the position a plain read; never at a binding position)."""

from __future__ import annotations

import ast
import random

import pytest
from conftest import STDLIB

from fimconstrain.engine.names.name_check import RESOLVES, NameCheck
from fimconstrain.engine.names.name_positions import Reader
from fimconstrain.engine.names.provider import UNKNOWN, NamePoint, NameSet
from fimconstrain.engine.names.py_tokens import NAME, STRING, scan
from fimconstrain.engine.names.scopes import ALWAYS_VISIBLE, FileScopes


def position_at(text: str):
    reader = Reader()
    for token in scan(text):
        reader = reader.step(token)
    return reader.position()


def test_the_scanner_never_raises_and_keeps_unterminated_strings():
    tokens = list(scan('x = f"abc\ny = """doc\\'))
    assert [t.kind for t in tokens] == [NAME, "OP", STRING, "NEWLINE", NAME, "OP", STRING]
    assert [t.kind for t in scan("a ) ] } $ \\")][:2] == [NAME, "OP"]
    assert next(scan("'it''s'")).text == "'it'"


@pytest.mark.parametrize(
    "text",
    [
        "def ", "def f(", "def f(a, *", "class ", "for ", "for i, (", "[x for ", "import ",
        "from os import ", "from os import (path, ", "lambda ", "lambda a, ", "with open(p) as ",
        "except ValueError as ", "global ", "nonlocal ", "del ", "case ", "sorted(v, key=lambda ",
        "async def ", "def f[",
    ],
    ids=repr,
)  # fmt: skip
def test_binding_positions_are_never_checked(text):
    position = position_at(text)
    assert not position.checked and position.binds


@pytest.mark.parametrize(
    "text, escapes, hard",
    [
        ("return ", set(), True),
        ("x = a + ", set(), True),
        ("def f(a=", set(), True),
        ("def f(a: ", set(), True),
        ("for i in ", set(), True),
        ("x[1:", set(), True),
        ("print(1 + ", set(), False),  # inside parentheses: maybe a comprehension's variable
        ("[x for x in ", set(), False),
        ("y = self.", set(), True),
        ("", {"=", ",", ":", ")", "]"}, False),  # a statement's first name may be a target
        ("a, ", {"=", ",", ":", ")", "]"}, False),
        ("x = ", {"="}, False),  # x = y = 0
        ("f(", {"=", ":="}, False),  # a keyword argument, of any callable
        ("f(a, ", {"=", ":="}, False),
        ("class C(Base, ", {"=", ":="}, False),
        ("if ", {":="}, False),
        ("while ", {":="}, False),
        ("x[", {":="}, False),
        ("self.", {"=", ",", ":", ")", "]"}, False),  # self.new = ...
    ],
    ids=repr,
)
def test_read_positions_and_their_escapes(text, escapes, hard):
    position = position_at(text)
    assert position.checked
    assert set(position.escapes) == escapes
    assert position.hard is hard


def test_attribute_positions_carry_their_receiver():
    text = "value = os.path.join(a).upper("
    reader = Reader()
    for token in scan(text[: -len("upper(")]):
        reader = reader.step(token)
    position = reader.position()
    assert position.attribute and position.receiver is not None
    assert text[slice(*position.receiver)] == "os.path.join(a)"


SOURCE = """import os
from collections import OrderedDict as OD

LIMIT = 3


def helper(a, b=2, *args, **kw):
    total = a + b
    for i, (x, y) in enumerate(args):
        total += x
    return total


class Box:
    size = 4

    def grow(self, by=size):
        result = by * 2
        CURSOR
        return result


def later():
    pass
"""


def scopes_at_cursor(source: str = SOURCE) -> tuple[FileScopes, str, str]:
    prefix, suffix = source.split("CURSOR")
    return FileScopes.read(prefix, suffix), prefix, suffix


def test_scopes_on_a_real_layout():
    scopes, _, _ = scopes_at_cursor()
    mine = scopes.visible - ALWAYS_VISIBLE
    assert {"os", "OD", "LIMIT", "helper", "Box", "later", "self", "by", "result"} <= mine
    assert not {"total", "i", "x", "a", "size"} & mine  # other functions' locals; a class body
    assert scopes.confident


def test_a_class_body_is_seen_in_its_own_body_and_def_headers():
    assert "size" in FileScopes.read(SOURCE.split("    def grow")[0] + "    x = ", "").visible
    assert "size" in FileScopes.read(SOURCE.split("by=size")[0] + "by=", "").visible


def test_later_bindings_of_the_same_function_count():
    prefix = "def f(items):\n    for item in items:\n        "
    suffix = "print(item)\n        seen = item\n    return seen\n\ndef g():\n    hidden = 1\n"
    visible = FileScopes.read(prefix, suffix).visible
    assert {"items", "item", "seen", "f", "g"} <= visible and "hidden" not in visible


def test_star_imports_and_globals_calls_make_the_scope_unsure():
    assert not FileScopes.read("from os import *\nx = ", "").confident
    assert not FileScopes.read("globals()['a'] = 1\nx = ", "").confident
    assert FileScopes.read("from .globals import g\nx = ", "").confident


def test_scopes_of_a_standard_library_file_match_its_own_bindings():
    """Every name bound at module level in a real file is visible at a cursor after it."""
    source = (STDLIB / "json" / "decoder.py").read_text()
    cut = source.index("def py_scanstring")
    scopes = FileScopes.read(source[:cut], source[cut:])
    module_names = {
        target.id
        for node in ast.parse(source).body
        for target in (node.targets if isinstance(node, ast.Assign) else [])
        if isinstance(target, ast.Name)
    }
    module_names |= {
        node.name for node in ast.parse(source).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }
    assert module_names and module_names <= scopes.visible


def test_names_bound_in_the_middle_are_known_to_later_tokens():
    scopes, prefix, suffix = scopes_at_cursor()
    check = NameCheck(prefix, suffix, scopes)
    assert check.verdict("return fresh_value").excluded
    check.advance("fresh_value = 3\n        ")
    assert not check.verdict("return fresh_value").fails
    assert "fresh_value" in check.bound


def test_going_back_to_a_mark_forgets_what_was_bound_after_it():
    """A decoder that takes tokens back (a whole line tried again) gets the names as they were."""
    scopes, prefix, suffix = scopes_at_cursor()
    check = NameCheck(prefix, suffix, scopes)
    mark = check.mark()
    check.advance("fresh_value = 3\n        ")
    assert not check.verdict("return fresh_value").fails
    check.go_back(mark)
    assert check.verdict("return fresh_value").excluded and "fresh_value" not in check.bound
    prefix = "import os\nobj = make()\n"
    check = NameCheck(prefix, "\n", FileScopes.read(prefix, "\n"), _Attributes())
    mark = check.mark()
    check.advance("obj.fresh = 1\n")
    assert check.bound_attributes == {"obj": frozenset({"fresh"})}
    check.go_back(mark)
    assert check.bound_attributes == {}


@pytest.mark.parametrize(
    "added, excluded, fails",
    [
        ("return resul", False, False),  # a known name being written
        ("return resulx", True, True),
        ("return total", True, True),  # another function's local
        ("return LIMIT + siz", True, True),  # a class body's name, from a method
        ("print(undefined_name)", False, True),  # a call's argument: soft (no exclusion)
        ("fresh = 1", False, False),  # a new variable
        ("self.extra = 1", False, False),
        ("value = by if by else LIMIT", False, False),
        ("return rb'x'", False, False),  # a string prefix
        ("return [q for q in range(3)]", False, True),  # the variable comes after: soft only
    ],
    ids=repr,
)
def test_verdicts(added, excluded, fails):
    scopes, prefix, suffix = scopes_at_cursor()
    verdict = NameCheck(prefix, suffix, scopes).verdict(added)
    assert (verdict.excluded, verdict.fails) == (excluded, fails)


class _Unsure:
    def names(self, point: NamePoint) -> NameSet:
        return NameSet(frozenset({"known"}), confident=False)


class _Broken:
    def names(self, point: NamePoint) -> NameSet:
        raise RuntimeError("provider down")


def test_an_unsure_engine_never_excludes():
    check = NameCheck("def f():\n    ", "\n", _Unsure())
    verdict = check.verdict("return unknown")
    assert verdict.fails and not verdict.excluded


def test_a_failing_engine_is_unknown():
    check = NameCheck("def f():\n    ", "\n", _Broken(), _Broken())
    assert not check.verdict("return os.nothing").fails


class _Attributes:
    def __init__(self):
        self.asked: list[str | None] = []

    def names(self, point: NamePoint) -> NameSet:
        self.asked.append(point.receiver)
        if point.receiver == "os":
            return NameSet(frozenset({"path", "sep"}), confident=True)
        return UNKNOWN


def test_attributes_are_asked_of_their_receiver_and_set_attributes_count():
    attributes = _Attributes()
    prefix = "import os\nobj = make()\n"
    check = NameCheck(prefix, "\n", FileScopes.read(prefix, "\n"), attributes)
    assert check.verdict("x = os.nope").excluded
    assert not check.verdict("x = os.pa").fails
    assert not check.verdict("x = obj.anything").fails  # unknown receiver: no opinion
    check.advance("obj.fresh = 1\n")
    assert check.bound_attributes == {"obj": frozenset({"fresh"})}
    assert "os" in attributes.asked


def test_text_without_a_name_is_judged_only_after_a_name():
    """A candidate with no character of a name still finishes the name before it (judged);
    after anything else it writes no name, and no provider is asked."""
    attributes = _Attributes()
    prefix = "import os\nx = os.pa"
    check = NameCheck(prefix, "\n", FileScopes.read(prefix, "\n"), attributes)
    assert check.verdict("(").excluded and "os" in attributes.asked  # ``pa`` ends: no such attribute
    attributes = _Attributes()
    prefix = "import os\nx = (os.path"
    check = NameCheck(prefix, "\n", FileScopes.read(prefix, "\n"), attributes)
    check.advance(")")
    asked = list(attributes.asked)
    for added in [":", ")\n", " = ", "[", "'", "#", "\\\n", "..."]:
        assert check.verdict(added) == RESOLVES
    assert attributes.asked == asked


def test_a_name_the_user_typed_is_not_held_against_the_middle():
    scopes, prefix, suffix = scopes_at_cursor()
    check = NameCheck(prefix + "return qq", suffix, scopes)
    assert not check.verdict("zz").fails  # already unresolvable before the middle
    assert not check.verdict("(").fails


def _true_middles(source: str, rng: random.Random, n: int):
    lines = source.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    for i in rng.sample(starts, min(n, len(starts))):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        prefix = "\n".join(lines[:i] + [line[:indent]])
        yield prefix, line[indent:], "\n" + "\n".join(lines[i + 1 :])


@pytest.mark.parametrize("name", ["json/decoder.py", "textwrap.py", "shlex.py", "dataclasses.py"])
def test_true_middles_of_real_files_are_never_excluded(name):
    """Completeness in practice: the author's own line, fed a character at a time (finer
    than any tokenizer), is never excluded by the file-local engine."""
    source = (STDLIB / name).read_text()
    for prefix, truth, suffix in _true_middles(source, random.Random(name), 25):
        check = NameCheck(prefix, suffix, FileScopes.read(prefix, suffix))
        for ch in truth:
            verdict = check.verdict(ch)
            assert not verdict.excluded, (name, truth, verdict)
            check.advance(ch)
