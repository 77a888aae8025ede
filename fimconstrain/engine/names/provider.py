"""The name-provider interface: which names may be written at a point (paper 003 §3.1, where
such a provider is a "completion engine").

Synchromesh's completion engine (CE) maps a partial program to the set of tokens that may come
next; its context-sensitive layer knows, for instance, the columns of a table behind an alias.
Here the syntactic layer is the FIM checker and a :class:`NameProvider` is the semantic
layer for identifiers: at a :class:`NamePoint` (a bare name, or an attribute of a receiver) it
answers a :class:`NameSet`: the names that exist there, and whether that set can be trusted to
be complete (``confident``), or :data:`UNKNOWN`. Unlike the paper's engines these answers are
advisory: the decode loop restricts only where a provider is confident and the position is a
plain read, reranks elsewhere, and never waits on a provider past its budget (fail-open).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class NamePoint:
    """Where an identifier is being written.

    ``text`` is the file up to the identifier's first character (the prefix and the middle so
    far): ``source`` up to ``end`` (None: all of it), cut only when a provider reads it, since
    the bare names' provider never does and the file may be long. ``suffix`` is the file after
    the middle. ``receiver`` is an attribute's receiver as written (``self``, ``os.path``), None
    for a bare name. ``middle_start``: where the middle begins in ``text``;
    ``bound_in_middle``: names the middle has bound before this point.
    """

    source: str
    suffix: str
    receiver: str | None = None
    middle_start: int = 0
    bound_in_middle: frozenset[str] = frozenset()
    end: int | None = None

    @property
    def text(self) -> str:
        return self.source if self.end is None else self.source[: self.end]


@dataclass(frozen=True)
class NameSet:
    """The names that exist at a point (None: unknown), and whether the set is complete."""

    names: frozenset[str] | None
    confident: bool = False
    _sorted: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.names is not None and not self._sorted:
            object.__setattr__(self, "_sorted", tuple(sorted(self.names)))

    @property
    def known(self) -> bool:
        return self.names is not None

    def has(self, name: str) -> bool:
        """Whether ``name`` is in the set (True when the set is unknown)."""
        return self.names is None or name in self.names

    def has_prefix(self, partial: str) -> bool:
        """Whether some name in the set starts with ``partial`` (True when the set is unknown):
        the derivative test of paper 003 §3.2 for an identifier still being written."""
        if self.names is None:
            return True
        at = bisect_left(self._sorted, partial)
        return at < len(self._sorted) and self._sorted[at].startswith(partial)

    def union(self, more: frozenset[str]) -> NameSet:
        """This set with ``more`` names (unknown stays unknown)."""
        if self.names is None or more <= self.names:
            return self
        return NameSet(self.names | more, self.confident)


UNKNOWN = NameSet(None, False)


class NameProvider(Protocol):
    """A provider of the names that exist at a point; it must not raise and should answer
    fast (it is asked for candidate tokens of every decode step where a name is written)."""

    def names(self, point: NamePoint) -> NameSet: ...
