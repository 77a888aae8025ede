"""Whose turn it is: engine work runs on several threads but one at a time, and a request on
a large document hands its turn to a small document's request at its next safe point.

The model and the checker caches are used only by the thread holding the turn, so the engine
needs no locks of its own. A completion is not always run to its end once started: at its safe
points (each decode step, each few hundred characters of a document being read: both poll
``Job.should_stop``) it calls :meth:`Turns.checkpoint`, which may hand the turn over and wait
for it to come back. At those points no engine call is half done, and the work so far stays
with the paused completion (a llama.cpp session's key/value cache included: the backend keeps
it aside while another session uses the context).

Who goes first, by level, and within a level first come first served:

1. ``URGENT``: a request that was cancelled, superseded or ran out of time; it only winds up.
2. ``ORDINARY``: a request on an ordinary document; never preempted by another ordinary one,
   so that each, once started, has the worker until it ends (its deadline counts from then).
3. ``BACKGROUND``: a request on a large document; it gives way to anything above it, except
   that one that has waited :data:`AGING_SECONDS` for its first turn ranks as ordinary (a
   stream of small documents' requests does not hold it off for ever).
4. ``AHEAD``: work ahead of a request (a completion at a cursor the client reported, while the
   worker is idle); it gives way to every request, until a request takes it over (then it
   ranks as that request would).

Requests of the same length are best served one after the other: sharing the worker among them
(as this module did, in 50 ms turns once a request had held it 0.25 s) made every one of them
finish late, on llama.cpp at the cost of switching its context each turn, and with deadlines
counted from each request's start most of them ran out (``benchmarks/lsp_load.py``, twenty
documents at once; docs/lsp.md). Work without safe points (loading the model, freeing caches)
is ordinary and runs to its end.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

URGENT, ORDINARY, BACKGROUND, AHEAD = 0, 1, 2, 3
#: how long a background request waits for its first turn before it ranks as ordinary
AGING_SECONDS = 5.0
#: how often a waiting thread looks again whether its level changed (a cancel does not notify)
WAKE_SECONDS = 0.02

_arrivals = itertools.count()


class Ticket:
    """One piece of work's place in line: its level and when it arrived (``ahead``: whether it
    is still work ahead of any request)."""

    def __init__(
        self,
        background: bool = False,
        urgent: Callable[[], bool] = lambda: False,
        ahead: Callable[[], bool] = lambda: False,
    ):
        self.background = background
        self.urgent = urgent
        self.ahead = ahead
        self.arrived = next(_arrivals)
        self.arrival = time.monotonic()
        self.first_turn: float | None = None  # when it first held the turn

    def level(self, now: float) -> int:
        if self.urgent():
            return URGENT
        if self.ahead():
            return AHEAD
        if (
            self.background
            and (self.first_turn if self.first_turn is not None else now) - self.arrival < AGING_SECONDS
        ):
            return BACKGROUND
        return ORDINARY  # (a background request that waited long for its first turn stays ordinary)

    def rank(self, now: float) -> tuple[int, int]:
        """Lower goes first: level, then arrival."""
        return self.level(now), self.arrived


class Turns:
    """The one turn, handed between threads by :class:`Ticket` rank."""

    def __init__(self, when_idle: Callable[[], None] = lambda: None) -> None:
        self._changed = threading.Condition()
        self._waiting: list[Ticket] = []
        self._holder: Ticket | None = None
        self._when_idle = when_idle  # called after work ends with none holding or waiting

    def run(self, ticket: Ticket, work: Callable[[], T]) -> T:
        """``work()`` on this thread once ``ticket`` has the turn; the turn is given back after."""
        with self._changed:
            self._wait_for_turn(ticket)
        try:
            return work()
        finally:
            with self._changed:
                self._give_up(ticket)
                idle = not self._waiting
            if idle:
                self._when_idle()

    def checkpoint(self, ticket: Ticket) -> bool:
        """Called by the holder at a safe point: hand the turn to a waiter that goes first, and
        return when the turn is back (True: it was handed over)."""
        with self._changed:
            now = time.monotonic()
            first = self._first(now)
            if first is None or not self._gives_way(ticket, first, now):
                return False
            self._give_up(ticket)
            self._wait_for_turn(ticket)
            return True

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _first(self, now: float) -> Ticket | None:
        return min(self._waiting, key=lambda ticket: ticket.rank(now), default=None)

    @staticmethod
    def _gives_way(holder: Ticket, waiter: Ticket, now: float) -> bool:
        level = holder.level(now)
        return level != URGENT and waiter.level(now) < level  # an urgent holder is winding up

    def _wait_for_turn(self, ticket: Ticket) -> None:
        """(Lock held.) Queue ``ticket`` and wait until it is first in line and the turn is free."""
        self._waiting.append(ticket)
        while self._holder is not None or self._first(time.monotonic()) is not ticket:
            self._changed.wait(WAKE_SECONDS)
        self._waiting.remove(ticket)
        self._holder = ticket
        if ticket.first_turn is None:
            ticket.first_turn = time.monotonic()

    def _give_up(self, ticket: Ticket) -> None:
        """(Lock held.) ``ticket`` no longer holds the turn; wake the waiters to see who is next."""
        assert self._holder is ticket
        self._holder = None
        self._changed.notify_all()
