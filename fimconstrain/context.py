"""What the far parts of a file contribute, computed once and cached between requests.

An editor asks again after every keystroke, and most of the file has not changed since the
last request. Two facts keep the repeated work small:

* Feeding is exact and pure, so the checker after ``prefix[:p]`` can be stored and reused for
  any later prefix that starts with the same text (:class:`PrefixCache`).
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
from dataclasses import dataclass

#: keywords that continue a compound statement, so a line starting with one is no split point
_CONTINUATIONS = re.compile(r"(?:else|elif|except|finally)\b")
#: a line start at column 0 with a character that can begin a statement
_TOP_LEVEL_LINE = re.compile(r"\n(?=[^\s#\\)\]}])")


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


@dataclass(frozen=True)
class SuffixPlan:
    """A suffix split into a head parsed per middle and a tail checked once on its own."""

    head: str
    tail: str
    tail_valid: bool

    @property
    def split(self) -> bool:
        return bool(self.tail)


def plan_suffix(start, suffix: str) -> SuffixPlan:
    """Split ``suffix`` before its first top-level statement line; ``start`` is the checker
    of an empty file, used to check the tail on its own."""
    starts = top_level_starts(suffix)
    if not starts:
        return SuffixPlan(suffix, "", False)
    head, tail = suffix[:starts[0]], suffix[starts[0]:]
    after = start.feed(tail)
    return SuffixPlan(head, tail, after is not None and after.is_complete())


class PrefixCache:
    """Checkers after line-start checkpoints of recent prefixes, keyed by the exact text.

    Only the last few checkpoints of each prefix are stored or looked up, which keeps memory
    and lookup cost linear in the prefix length: an edit near the cursor reuses the
    checkpoint at the start of the enclosing top-level statement.
    """

    CHECKPOINTS_PER_PREFIX = 8

    def __init__(self, size: int = 256):
        self._entries = LRU(size)
        self.hits = 0
        self.misses = 0

    def checker_for(self, start, prefix: str):
        """The checker after ``prefix``, fed from the longest cached checkpoint (or None if
        the prefix is rejected)."""
        checkpoints = top_level_starts(prefix)[-self.CHECKPOINTS_PER_PREFIX:]
        base, base_at = start, 0
        for p in reversed(checkpoints):
            cached = self._entries.get(prefix[:p])
            if cached is not None:
                base, base_at = cached, p
                self.hits += 1
                break
        else:
            self.misses += 1
        checker = base
        for p in checkpoints:
            if p <= base_at:
                continue
            checker = checker.feed(prefix[base_at:p])
            if checker is None:
                return None
            self._entries.put(prefix[:p], checker)
            base_at = p
        return checker.feed(prefix[base_at:])

    def clear(self) -> None:
        self._entries.clear()
