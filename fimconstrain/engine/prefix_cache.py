"""Checkers after recently seen prefixes, reused up to the first edit (paper 004 §III and
§IV-A footnote 2: work shared across calls with a common prefix; docs/references.md [R11]).

Feeding is exact and pure, so the checker after ``prefix[:p]`` can be stored and reused for any
later prefix that starts with the same text, wherever the edit was: an editor asks again after
every keystroke, and most of the file has not changed since the last request.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from .errors import Interrupted
from .layers.layer_protocol import StateT

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A small least-recently-used map (an ordered dict held, not subclassed: a compiled class
    cannot extend one)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or None."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


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


class PrefixCache(Generic[StateT]):
    """Checkers at line starts of recently seen prefixes, reused up to the first edit.

    Feeding is exact and pure, so the checker after ``prefix[:p]`` serves any later prefix
    that shares its first ``p`` characters. For each recent document the cache keeps
    checkpoints at line starts about every ``spacing`` characters; a request after an edit
    anywhere resumes from the last checkpoint before the edit.
    """

    def __init__(self, documents: int = 8, spacing: int = 256) -> None:
        self._documents: list[tuple[str, list[tuple[int, StateT]]]] = []
        self.size = documents
        self.spacing = spacing
        self.hits = 0
        self.misses = 0

    def checker_for(
        self, start: StateT, prefix: str, should_stop: Callable[[], bool] | None = None
    ) -> StateT | None:
        """The checker after ``prefix`` (None if the prefix is rejected). ``should_stop`` is asked
        at each checkpoint; when it says so, the checkpoints so far are kept and
        :class:`~.errors.Interrupted` is raised (a large prefix is built across several calls)."""
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
        at, resumed = checkpoints[-1]
        checker: StateT | None = resumed
        next_mark = at + self.spacing
        pos = prefix.find("\n", next_mark - 1)
        while checker is not None and 0 <= pos < len(prefix) - 1:
            if should_stop is not None and should_stop():
                self._remember(prefix, checkpoints)
                raise Interrupted(f"stopped after {at} of {len(prefix)} characters of the prefix")
            checker = checker.feed(prefix[at : pos + 1])
            at = pos + 1
            if checker is not None:
                checkpoints.append((at, checker))
            pos = prefix.find("\n", at + self.spacing - 1)
        if checker is not None:
            checker = checker.feed(prefix[at:])
        self._remember(prefix, checkpoints)
        return checker

    def _remember(self, prefix: str, checkpoints: list[tuple[int, StateT]]) -> None:
        self._documents.insert(0, (prefix, checkpoints))
        del self._documents[self.size :]

    def clear(self) -> None:
        self._documents.clear()
