"""What the far parts of a file contribute, computed once and cached between requests.

An editor asks again after every keystroke, and most of the file has not changed since the
last request. Two facts keep the repeated work small:

* Feeding is exact and pure, so the checker after ``prefix[:p]`` can be stored and reused for
  any later prefix that starts with the same text (:class:`PrefixCache`), wherever the
  edit was.
* Python source splits cleanly before a line at column 0 that does not continue a compound
  statement (``else``, ``elif``, ``except``, ``finally``): when the text before such a line is
  a complete file, the whole is valid exactly when the text from that line on is valid on its
  own. So the suffix is split into a *head*, parsed after each middle, and a *tail*, checked
  once (:class:`SuffixPlan`); middles that leave the head open (a decorator waiting for its
  ``def``) are followed through the tail for real.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from .infix import lex, refuted_at

#: keywords that continue a compound statement, so a line starting with one is no split point
_CONTINUATIONS = re.compile(r"(?:else|elif|except|finally)\b")
#: a line start at column 0 with a character that can begin a statement
_TOP_LEVEL_LINE = re.compile(r"(?<!\\)\n(?=[^\s#\\)\]}])")
#: the indentation of a non-blank line, up to its first character
_LINE_FIRST_CHAR = re.compile(r"\n[ \t\f]*(?=\S)")


class LRU(OrderedDict):
    """A small least-recently-used map."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def get(self, key, default=None):
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def put(self, key, value) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


def top_level_starts(text: str, start: int = 0) -> list[int]:
    """Offsets of lines at column 0 that may begin a new top-level statement (a superset:
    the text is not lexed, so some may lie inside strings; callers verify)."""
    return [m.end() for m in _TOP_LEVEL_LINE.finditer(text, start)
            if not _CONTINUATIONS.match(text, m.end())]


_UNKNOWN = object()


class SuffixPlan:
    """A suffix split into a head parsed per middle and a tail checked once on its own.

    ``memo`` remembers how finishing the head turned out from a given point and parser state.
    The points are just after the first character of each line, where the previous logical
    line has been closed: middles that differ only before that line usually reach the same
    state there (their open items point at the same origin sets), so repeated end-of-middle
    checks cost about one line of the head.
    """

    def __init__(self, head: str, tail: str = "", start=None):
        self.head = head
        self.tail = tail
        self._start = start
        self._tail_valid: bool | None = None
        self._unjoinable = _UNKNOWN
        self.checkpoints = [m.end() + 1 for m in _LINE_FIRST_CHAR.finditer(head)]
        self.checkpoints.append(len(head))
        self.memo = LRU(4096)

    @property
    def split(self) -> bool:
        return bool(self.tail)

    @property
    def tail_valid(self) -> bool:
        """Whether the tail is a valid file on its own (checked on first use, then kept)."""
        if self._tail_valid is None:
            after = self._start.feed(self.tail)
            self._tail_valid = after is not None and after.is_complete()
        return self._tail_valid

    def unjoinable(self) -> tuple[int, str] | None:
        """``(offset in the suffix, reason)`` when no middle can make the file valid: the head
        can be part of no program (see :mod:`fimconstrain.infix`), or the tail is broken in a
        way nothing before it can change; None otherwise (which does not promise that some
        middle joins). Computed once per suffix."""
        if self._unjoinable is _UNKNOWN:
            self._unjoinable = self._head_refuted() or self._tail_refuted()
        return self._unjoinable

    def _head_refuted(self) -> tuple[int, str] | None:
        if self._start is None:
            return None
        return self._refuted(len(self.head), ends_file=not self.split)

    def _refuted(self, end: int, ends_file: bool) -> tuple[int, str] | None:
        """The infix refutation of the suffix's first ``end`` characters, with its reason."""
        suffix = self.head + self.tail
        error = refuted_at(self._start._layer, suffix, end, ends_file=ends_file)
        if error is None:
            return None
        if error >= end and ends_file:
            return error, ("no middle can join this prefix and suffix: no program can end with "
                           "this suffix, whatever comes before it (it leaves something open)")
        line = suffix.count("\n", 0, error) + 1
        return error, (f"no middle can join this prefix and suffix: line {line} of the suffix "
                       f"cannot occur in any program, whatever comes before it")

    def _tail_refuted(self) -> tuple[int, str] | None:
        if not self.split or self.tail_valid or not _isolated(self._start._layer, self.tail):
            return None
        if self.head == "\n":
            # The middle may end in a backslash, making the tail's first line a continuation
            # line: no longer a file on its own, but still text that some program must hold.
            return self._refuted(len(self.head) + len(self.tail), ends_file=True)
        from .checker import first_error_offset

        error = first_error_offset(self._start, self.tail)
        line = self.head.count("\n") + self.tail.count("\n", 0, error) + 1
        where = "its end" if error >= len(self.tail) else f"line {line} of the suffix"
        return len(self.head) + error, (
            f"no middle can join this prefix and suffix: the suffix from line "
            f"{self.head.count(chr(10)) + 1} on must be valid on its own (it starts a top-level "
            f"statement), and it is not (first error at {where})")


def _isolated(layer, tail: str) -> bool:
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
    depth, deltas = 0, layer.bracket_delta
    for begin, _, mask in lex(layer, tail):
        if not mask:
            return not _closes_unopened(tail, begin, depth)
        depth += deltas.get(mask, 0)
        if depth < 0:
            return False
    return True


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


def plan_suffix(start, suffix: str) -> SuffixPlan:
    """Split ``suffix`` before its first top-level statement line; ``start`` is the checker
    of an empty file, used to check the tail on its own."""
    starts = top_level_starts(suffix)
    if not starts:
        return SuffixPlan(suffix, start=start)
    return SuffixPlan(suffix[:starts[0]], suffix[starts[0]:], start)


def common_prefix_length(a: str, b: str) -> int:
    """Length of the longest common prefix, by bisection on C-speed slice comparisons."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # invariant: a[:lo] == b[:lo] and a[:hi + 1] != b[:hi + 1]
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixCache:
    """Checkers at line starts of recently seen prefixes, reused up to the first edit.

    Feeding is exact and pure, so the checker after ``prefix[:p]`` serves any later prefix
    that shares its first ``p`` characters. For each recent document the cache keeps
    checkpoints at line starts about every ``spacing`` characters; a request after an edit
    anywhere resumes from the last checkpoint before the edit.
    """

    def __init__(self, documents: int = 8, spacing: int = 256):
        self._documents: list[tuple[str, list[tuple[int, object]]]] = []
        self.size = documents
        self.spacing = spacing
        self.hits = 0
        self.misses = 0

    def checker_for(self, start, prefix: str):
        """The checker after ``prefix`` (None if the prefix is rejected)."""
        best, shared = -1, 0
        for i, (text, _) in enumerate(self._documents):
            n = common_prefix_length(text, prefix)
            if n > shared:
                best, shared = i, n
        checkpoints = [(0, start)]
        if best >= 0:
            checkpoints = [cp for cp in self._documents.pop(best)[1] if cp[0] <= shared]
            self.hits += 1
        else:
            self.misses += 1
        at, checker = checkpoints[-1]
        next_mark = at + self.spacing
        pos = prefix.find("\n", next_mark - 1)
        while checker is not None and 0 <= pos < len(prefix) - 1:
            checker = checker.feed(prefix[at:pos + 1])
            at = pos + 1
            if checker is not None:
                checkpoints.append((at, checker))
            pos = prefix.find("\n", at + self.spacing - 1)
        if checker is not None:
            checker = checker.feed(prefix[at:])
        self._documents.insert(0, (prefix, checkpoints))
        del self._documents[self.size:]
        return checker

    def clear(self) -> None:
        self._documents.clear()
