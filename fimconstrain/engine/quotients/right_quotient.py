"""The right quotient by the suffix: what the far side of the cursor allows, computed once
per suffix and cached between requests (paper 004 §IV-B, §V-B, §VI-A, §VI-C: the suffix is
read forward from each middle's branches rather than through a reversed grammar;
docs/references.md [R4]).

Python source splits cleanly before a line at column 0 that does not continue a compound
statement (``else``, ``elif``, ``except``, ``finally``): when the text before such a line is a
complete file, the whole is valid exactly when the text from that line on is valid on its own.
So the suffix is split into a *head*, parsed after each middle, and a *tail*, checked once
(:class:`SuffixPlan`); middles that leave the head open (a decorator waiting for its ``def``)
are followed through the tail for real. A suffix that no middle can join is refuted up front
(:meth:`SuffixPlan.unjoinable`, with :mod:`fimconstrain.engine.quotients.refutation` for the head).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Generic

from ..layers.layer_protocol import Branch, LayoutT, LexicalLayer, ParseState
from ..lexer import BranchKey
from ..prefix_cache import LRU
from ..rejection import first_error_offset
from .refutation import read_brackets, refuted_at

#: where a :class:`SuffixPlan`'s memo stands: an offset in the head and the branches there
PlanKey = tuple[int, tuple[BranchKey[LayoutT], ...]]

#: keywords that continue a compound statement, so a line starting with one is no split point
_CONTINUATIONS = re.compile(r"(?:else|elif|except|finally)\b")
#: a line start at column 0 with a character that can begin a statement
_TOP_LEVEL_LINE = re.compile(r"(?<!\\)\n(?=[^\s#\\)\]}])")
#: the indentation of a non-blank line, up to its first character
_LINE_FIRST_CHAR = re.compile(r"\n[ \t\f]*(?=\S)")


def top_level_starts(text: str, start: int = 0) -> list[int]:
    """Offsets of lines at column 0 that may begin a new top-level statement (a superset:
    the text is not lexed, so some may lie inside strings; callers verify)."""
    return [m.end() for m in _TOP_LEVEL_LINE.finditer(text, start) if not _CONTINUATIONS.match(text, m.end())]


class SuffixPlan(Generic[LayoutT]):
    """A suffix split into a head parsed per middle and a tail checked once on its own.

    ``memo`` remembers how finishing the head turned out from a given point and parser state.
    The points are just after the first character of each line, where the previous logical
    line has been closed: middles that differ only before that line usually reach the same
    state there (their open items point at the same origin sets), so repeated end-of-middle
    checks cost about one line of the head.
    """

    def __init__(self, start: ParseState[LayoutT], head: str, tail: str = "") -> None:
        """``start``: the checker of an empty file (to check the tail on its own)."""
        self.head = head
        self.tail = tail
        self._start = start
        self._tail_valid: bool | None = None
        self._unjoinable: tuple[int, str] | None = None
        self._unjoinable_known = False
        self.checkpoints = [m.end() + 1 for m in _LINE_FIRST_CHAR.finditer(head)]
        self.checkpoints.append(len(head))
        #: (checkpoint, branches there) -> (verdict, the branches: they hold the origin sets
        #: whose ids are in the key)
        self.memo: LRU[PlanKey[LayoutT], tuple[bool, list[Branch[LayoutT]]]] = LRU(4096)

    @property
    def split(self) -> bool:
        return bool(self.tail)

    @property
    def tail_valid(self) -> bool:
        """Whether the tail is a valid file on its own (checked on first use, then kept)."""
        if self._tail_valid is None:
            self.check_tail(self._start.feed)
        assert self._tail_valid is not None  # set by check_tail
        return self._tail_valid

    def check_tail(self, read: Callable[[str], ParseState[LayoutT] | None]) -> None:
        """Check the tail now, if not yet: ``read(tail)`` is the checker after it from an empty
        file (a cached reader resumes a tail edited near its end and may be interrupted)."""
        if self.split and self._tail_valid is None:
            after = read(self.tail)
            self._tail_valid = after is not None and after.is_complete()

    def unjoinable(self) -> tuple[int, str] | None:
        """``(offset in the suffix, reason)`` when no middle can make the file valid: the head
        can be part of no program (see :mod:`fimconstrain.engine.quotients.refutation`), or the
        tail is broken in a way nothing before it can change; None otherwise (which does not
        promise that some middle joins). Computed once per suffix."""
        if not self._unjoinable_known:
            self._unjoinable = self._head_refuted() or self._tail_refuted()
            self._unjoinable_known = True
        return self._unjoinable

    def _head_refuted(self) -> tuple[int, str] | None:
        return self._refuted(len(self.head), ends_file=not self.split)

    def _refuted(self, end: int, ends_file: bool) -> tuple[int, str] | None:
        """The infix refutation of the suffix's first ``end`` characters, with its reason."""
        suffix = self.head + self.tail
        error = refuted_at(self._start.layer, suffix, end, ends_file=ends_file)
        if error is None:
            return None
        if error >= end and ends_file:
            return error, (
                "no middle can join this prefix and suffix: no program can end with "
                "this suffix, whatever comes before it (it leaves something open)"
            )
        line = suffix.count("\n", 0, error) + 1
        return error, (
            f"no middle can join this prefix and suffix: line {line} of the suffix "
            f"cannot occur in any program, whatever comes before it"
        )

    def _tail_refuted(self) -> tuple[int, str] | None:
        if not self.split or self.tail_valid or not _isolated(self._start.layer, self.tail):
            return None
        if self.head == "\n":
            # The middle may end in a backslash, making the tail's first line a continuation
            # line: no longer a file on its own, but still text that some program must hold.
            return self._refuted(len(self.head) + len(self.tail), ends_file=True)
        error = first_error_offset(self._start, self.tail)
        line = self.head.count("\n") + self.tail.count("\n", 0, error) + 1
        where = "its end" if error >= len(self.tail) else f"line {line} of the suffix"
        return len(self.head) + error, (
            f"no middle can join this prefix and suffix: the suffix from line "
            f"{self.head.count(chr(10)) + 1} on must be valid on its own (it starts a top-level "
            f"statement), and it is not (first error at {where})"
        )


def _isolated(layer: LexicalLayer, tail: str) -> bool:
    """Whether text before ``tail`` (a line at column 0 that follows no backslash in the
    suffix) can change how it is read only by making its first line a continuation line, by
    the tokenizer's rules for what spans lines:

    * strings: no triple-quoted string can run into it (it has no triple quotes);
    * brackets and f-string fields: read by the layer's lexer as the checker reads it (layout
      aside), it closes none that it did not open. Past a character that does not lex, the
      reading of strings is unknown, so brackets are counted character by character there.
    """
    if '"""' in tail or "'''" in tail:
        return False
    reading = read_brackets(layer, tail)
    if reading.lowest < 0:
        return False
    return reading.stopped is None or not _closes_unopened(tail, reading.stopped, reading.depth)


def _closes_unopened(text: str, start: int, depth: int) -> bool:
    """Whether ``text[start:]``, counted character by character from bracket depth ``depth``,
    closes a bracket it did not open."""
    for ch in text[start:]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return True
    return False


def plan_suffix(start: ParseState[LayoutT], suffix: str) -> SuffixPlan[LayoutT]:
    """Split ``suffix`` before its first top-level statement line; ``start`` is the checker
    of an empty file, used to check the tail on its own."""
    starts = top_level_starts(suffix)
    if not starts:
        return SuffixPlan(start, suffix)
    return SuffixPlan(start, suffix[: starts[0]], suffix[starts[0] :])
