"""Who holds the worker (lsp_server/turns.py): one piece of work at a time, ordinary requests
first come first served, background work preempted at its next checkpoint, urgent work first.
Order only: nothing here asserts on timings."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from lsp_server import turns as turns_module
from lsp_server.turns import BACKGROUND, ORDINARY, URGENT, Ticket, Turns

pytestmark = pytest.mark.time_limit(60)


class Recorder:
    """Work that writes what it does in one shared log and can be run on its own thread."""

    def __init__(self, turns: Turns):
        self.turns = turns
        self.log: list[str] = []
        self.threads: list[threading.Thread] = []

    def start(self, ticket: Ticket, name: str, steps: int = 1, between: Callable[[], None] = lambda: None):
        def work() -> None:
            for i in range(steps):
                self.log.append(f"{name}{i}")
                between()
                self.turns.checkpoint(ticket)

        thread = threading.Thread(target=self.turns.run, args=(ticket, work))
        thread.start()
        self.threads.append(thread)
        return thread

    def join(self) -> None:
        for thread in self.threads:
            thread.join(10)
            assert not thread.is_alive()


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.001)


def test_one_piece_of_work_at_a_time():
    turns, inside, most = Turns(), [0], [0]
    lock = threading.Lock()

    def step() -> None:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.0005)
        with lock:
            inside[0] -= 1

    recorder = Recorder(turns)
    for i in range(6):
        recorder.start(Ticket(background=i % 2 == 0), f"w{i}-", steps=20, between=step)
    recorder.join()
    assert most[0] == 1 and len(recorder.log) == 120


def test_an_ordinary_request_preempts_background_work_at_its_next_checkpoint():
    turns = Turns()
    recorder = Recorder(turns)
    go_on = threading.Event()
    background = Ticket(background=True)
    recorder.start(background, "b", steps=50, between=lambda: go_on.wait(10))
    _until(lambda: len(recorder.log) >= 1)
    recorder.start(Ticket(), "o")
    _until(lambda: turns.waiting == 1)
    seen = len(recorder.log)
    go_on.set()
    recorder.join()
    # the background work ends the step it was in, then hands over at once
    assert recorder.log.index("o0") == seen
    assert recorder.log[-1] == "b49"


def test_ordinary_requests_are_first_come_first_served():
    turns = Turns()
    recorder = Recorder(turns)
    go_on = threading.Event()
    recorder.start(Ticket(), "a", steps=20, between=lambda: go_on.wait(10))
    _until(lambda: len(recorder.log) >= 1)
    recorder.start(Ticket(), "b")
    _until(lambda: turns.waiting == 1)
    recorder.start(Ticket(), "c")
    _until(lambda: turns.waiting == 2)
    go_on.set()
    recorder.join()
    assert recorder.log == [f"a{i}" for i in range(20)] + ["b0", "c0"]


def test_urgent_work_goes_first_and_is_not_preempted():
    turns = Turns()
    recorder = Recorder(turns)
    go_on = threading.Event()
    cancelled = threading.Event()
    recorder.start(Ticket(), "a", steps=3, between=lambda: go_on.wait(10))
    _until(lambda: len(recorder.log) >= 1)
    recorder.start(Ticket(), "b")
    _until(lambda: turns.waiting == 1)
    recorder.start(Ticket(urgent=cancelled.is_set), "c", steps=3)
    _until(lambda: turns.waiting == 2)
    cancelled.set()
    go_on.set()
    recorder.join()
    # "a" is ordinary: it gives way to the (now) urgent "c" at its first checkpoint
    assert recorder.log == ["a0", "c0", "c1", "c2", "a1", "a2", "b0"]


def test_a_long_ordinary_request_is_not_preempted_by_a_newer_one():
    """However long it holds the worker: the newer one waits for it to end (its deadline counts
    from its own start, and the one before it must not be left half done)."""
    ticket = Ticket()
    ticket.first_turn = ticket.arrival - 3600  # it has worked for an hour
    assert ticket.level(time.monotonic()) == ORDINARY
    assert Ticket(urgent=lambda: True).level(time.monotonic()) == URGENT
    assert Ticket(background=True).level(time.monotonic()) == BACKGROUND


def test_a_background_request_that_waited_long_for_its_first_turn_ranks_as_ordinary(monkeypatch):
    monkeypatch.setattr(turns_module, "AGING_SECONDS", 0.0)
    waited = Ticket(background=True)
    assert waited.level(time.monotonic()) == ORDINARY
    monkeypatch.setattr(turns_module, "AGING_SECONDS", 1e9)
    assert waited.level(time.monotonic()) == BACKGROUND
    started = Ticket(background=True)
    started.first_turn = started.arrival  # it got its first turn at once: background for good
    monkeypatch.setattr(turns_module, "AGING_SECONDS", 0.5)
    assert started.level(started.arrival + 3600) == BACKGROUND
    late = Ticket(background=True)
    late.first_turn = late.arrival + 1.0  # it waited past AGING_SECONDS: ordinary for good
    assert late.level(late.arrival + 3600) == ORDINARY


def test_background_requests_are_first_come_first_served():
    turns = Turns()
    recorder = Recorder(turns)
    go_on = threading.Event()
    recorder.start(Ticket(background=True), "a", steps=4, between=lambda: go_on.wait(10))
    _until(lambda: len(recorder.log) >= 1)
    recorder.start(Ticket(background=True), "b", steps=3)
    _until(lambda: turns.waiting == 1)
    go_on.set()
    recorder.join()
    assert recorder.log == ["a0", "a1", "a2", "a3", "b0", "b1", "b2"]


def test_preempted_background_work_goes_on_before_later_background_work():
    turns = Turns()
    recorder = Recorder(turns)
    go_on = threading.Event()
    recorder.start(Ticket(background=True), "a", steps=3, between=lambda: go_on.wait(10))
    _until(lambda: len(recorder.log) >= 1)
    recorder.start(Ticket(), "o", steps=2)
    _until(lambda: turns.waiting == 1)
    recorder.start(Ticket(background=True), "b", steps=2)
    _until(lambda: turns.waiting == 2)
    go_on.set()
    recorder.join()
    assert recorder.log == ["a0", "o0", "o1", "a1", "a2", "b0", "b1"]


def test_work_that_raises_gives_the_turn_back():
    turns = Turns()

    def fails() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError):
        turns.run(Ticket(), fails)
    assert turns.run(Ticket(), lambda: 42) == 42
