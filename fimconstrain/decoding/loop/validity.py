"""Whether a middle makes the file valid, and the middle a list of tokens writes.

The judge is CPython's ``ast.parse`` at the running version, else the engine at the target
version; checked decoding cuts an unconstrained middle to its longest valid token prefix
(paper 004 §VII-B).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ...engine.checker import fim_checker
from ...engine.versions import PythonVersion
from ..tokens.fim_formats import TextCodec
from .constraint import is_word_char
from .oracle import ast_parses


def parses(program: str, python_version: PythonVersion | None = None) -> bool:
    """Whether ``program`` is valid Python at ``python_version``: the running Python's
    ``ast.parse`` when that is the version (the ground truth), else the engine's own verdict
    at that version (the only judge of another version's syntax in this process)."""
    if python_version is not None and python_version != sys.version_info[:2]:
        checker = fim_checker("", "", python_version=python_version).feed(program)
        return checker is not None and checker.is_complete()
    return ast_parses(program)


def longest_valid_prefix(
    prefix: str,
    codec: TextCodec,
    ids: list[int],
    suffix: str,
    python_version: PythonVersion | None = None,
    healed: str = "",
    valid: Callable[[str], bool] | None = None,
) -> str:
    """The longest token-boundary prefix of the middle that makes the file parse (paper 004
    §VII-B), else all of it; ``healed``: the prefix's end the tokens write first (not middle).
    A middle ending in a name character never counts before a suffix that starts with one.
    ``valid`` judges a middle in place of :func:`parses` over the whole file (a checker that
    has read the prefix answers without reading it again)."""
    fuses = bool(suffix) and is_word_char(suffix[0])
    for n in range(len(ids), -1, -1):
        middle = middle_of(codec, ids[:n], healed)
        if fuses and middle and is_word_char(middle[-1]):
            continue
        if valid(middle) if valid is not None else parses(prefix + middle + suffix, python_version):
            return middle
    return middle_of(codec, ids, healed)


def middle_of(codec: TextCodec, ids: list[int], healed: str = "") -> str:
    """The middle that tokens ``ids`` write: their text after the ``healed`` end of the prefix
    they write again first ("" until they have written all of it)."""
    text = codec.decode(ids)
    return text[len(healed) :] if text.startswith(healed) else ""
