"""Whose turn it is: engine work runs on several threads but one at a time, and a long
completion hands its turn to a more urgent one at its next safe point.

The model and the checker caches are used only by the thread holding the turn, so the engine
needs no locks of its own. A completion is not run to its end once started: at its safe points
(each decode step, each few hundred characters of a document being read: both poll
``Job.should_stop``) it calls :meth:`Turns.checkpoint`, which may hand the turn over and wait
for it to come back. At those points no engine call is half done, and the work so far stays
with the paused completion.

Who goes first, by level (a multilevel feedback queue: short work first, as a typing user
wants it):

1. ``URGENT``: a request that was cancelled, superseded or ran out of time; it only winds up.
2. ``ORDINARY``: a request on an ordinary document, first come first served, never preempted
   by another ordinary one.
3. ``BACKGROUND``: a request on a large document, or one that has held the turn for
   :data:`LONG_SECONDS` in all; these share the worker in turns of :data:`TURN_SECONDS`,
   the one that has had least of it first, and give way to anything above them.

Work without safe points (loading the model, freeing caches) is ordinary and runs to its end.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

URGENT, ORDINARY, BACKGROUND = 0, 1, 2
#: turn held in all past which a request counts as background work
LONG_SECONDS = 0.25
#: how long background work keeps the turn while other background work waits
TURN_SECONDS = 0.05
#: how often a waiting thread looks again whether its level changed (a cancel does not notify)
WAKE_SECONDS = 0.02

_arrivals = itertools.count()


class Ticket:
    """One piece of work's place in line: its level and how long it has held the turn."""

    def __init__(self, background: bool = False, urgent: Callable[[], bool] = lambda: False):
        self.background = background
        self.urgent = urgent
        self.arrived = next(_arrivals)
        self.held = 0.0  # seconds of turn used before the current one
        self.since: float | None = None  # when the current turn began; None while not holding

    def used(self, now: float) -> float:
        return self.held + (now - self.since if self.since is not None else 0.0)

    def level(self, now: float) -> int:
        if self.urgent():
            return URGENT
        if self.background or self.used(now) >= LONG_SECONDS:
            return BACKGROUND
        return ORDINARY

    def rank(self, now: float) -> tuple[int, float, int]:
        """Lower goes first: level, then (background only) least turn used, then arrival."""
        level = self.level(now)
        return level, self.held if level == BACKGROUND else 0.0, self.arrived


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
                self._give_up(ticket, time.monotonic())
                idle = not self._waiting
            if idle:
                self._when_idle()

    def checkpoint(self, ticket: Ticket) -> None:
        """Called by the holder at a safe point: hand the turn to a waiter that goes first, and
        return when the turn is back."""
        with self._changed:
            now = time.monotonic()
            first = self._first(now)
            if first is None or not self._gives_way(ticket, first, now):
                return
            self._give_up(ticket, now)
            self._wait_for_turn(ticket)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _first(self, now: float) -> Ticket | None:
        return min(self._waiting, key=lambda ticket: ticket.rank(now), default=None)

    @staticmethod
    def _gives_way(holder: Ticket, waiter: Ticket, now: float) -> bool:
        level = holder.level(now)
        if level == URGENT:
            return False  # it is winding up: let it finish
        if waiter.level(now) < level:
            return True
        assert holder.since is not None  # it holds the turn
        return level == BACKGROUND and waiter.level(now) == BACKGROUND and now - holder.since >= TURN_SECONDS

    def _wait_for_turn(self, ticket: Ticket) -> None:
        """(Lock held.) Queue ``ticket`` and wait until it is first in line and the turn is free."""
        self._waiting.append(ticket)
        while self._holder is not None or self._first(time.monotonic()) is not ticket:
            self._changed.wait(WAKE_SECONDS)
        self._waiting.remove(ticket)
        self._holder, ticket.since = ticket, time.monotonic()

    def _give_up(self, ticket: Ticket, now: float) -> None:
        """(Lock held.) ``ticket`` no longer holds the turn; wake the waiters to see who is next."""
        assert self._holder is ticket
        ticket.held, ticket.since = ticket.used(now), None
        self._holder = None
        self._changed.notify_all()
