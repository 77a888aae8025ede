"""Work ahead of a request (lsp_server/server.py ``FimServer.look_ahead``, the ``fimconstrain/cursor``
notification): a completion at the cursor the client reported runs while the worker is idle,
gives way to every request, and is taken over by the request that comes at its cursor; one at
a time; a request elsewhere stops it. Policy and order only: no model."""

from __future__ import annotations

import math
import threading

import pytest

pytest.importorskip("pygls")

from lsp_server.completer import Job
from lsp_server.server import FimServer, _cursor_place
from lsp_server.turns import AHEAD, ORDINARY, Ticket, Turns

pytestmark = pytest.mark.time_limit(60)

URI, OTHER = "file:///work/ahead.py", "file:///work/other.py"
PREFIX, SUFFIX = "def area(w, h):\n    return ", "\n\nprint(area(2, 3))\n"


def ahead(middle: str = "") -> Job:
    """Work ahead at ``PREFIX``|``SUFFIX`` that has begun and written ``middle`` so far."""
    job = Job(URI, math.inf, single_line=True)
    job.ahead, job.around = True, (PREFIX, SUFFIX)
    job.begin(60)
    job.on_middle(middle)
    return job


def test_a_request_at_its_cursor_takes_the_work_over():
    server = FimServer()
    work = server.generating[URI] = server.ahead = ahead("w * h")
    server.supersede(URI, PREFIX + SUFFIX)
    assert not work.cancelled and not work.ahead


def test_a_request_after_a_keystroke_it_wrote_takes_it_over_too():
    server = FimServer()
    work = server.generating[URI] = ahead("w * h")
    server.supersede(URI, PREFIX + "w" + SUFFIX)
    assert not work.cancelled and not work.ahead


def test_a_request_elsewhere_in_the_document_or_in_another_stops_it():
    server = FimServer()
    work = server.generating[URI] = server.ahead = ahead("w * h")
    server.supersede(URI, PREFIX + "x" + SUFFIX)
    assert work.cancelled and work.reason == "superseded"
    server = FimServer()
    work = server.generating[URI] = server.ahead = ahead("w * h")
    server.supersede(OTHER, "x = 1\n")
    assert work.cancelled and work.reason == "superseded"


def test_work_ahead_that_has_not_begun_is_no_ones():
    server = FimServer()
    work = Job(URI, math.inf, single_line=True)
    work.ahead, work.around = True, (PREFIX, SUFFIX)
    server.ahead = work  # (queued: no middle, no turn yet)
    server.supersede(URI, PREFIX + SUFFIX)
    assert work.cancelled


def test_it_gives_way_to_any_request_until_one_takes_it_over():
    job = ahead()
    ticket = Ticket(urgent=job.urgent, ahead=lambda: job.ahead)
    assert ticket.level(0.0) == AHEAD
    job.take_over()
    assert ticket.level(0.0) == ORDINARY
    job.cancel()
    assert ticket.level(0.0) < ORDINARY  # winding up


def test_a_request_preempts_work_ahead_at_its_next_checkpoint():
    turns, log = Turns(), []
    job = ahead()
    background = Ticket(ahead=lambda: job.ahead)
    holding, handed = threading.Event(), threading.Event()

    def work_ahead() -> None:
        holding.set()
        handed.wait(10)
        log.append("ahead: checkpoint")
        turns.checkpoint(background)
        log.append("ahead: back")

    thread = threading.Thread(target=turns.run, args=(background, work_ahead))
    thread.start()
    holding.wait(10)
    request = threading.Thread(target=turns.run, args=(Ticket(), lambda: log.append("request")))
    request.start()
    while turns.waiting == 0:
        pass
    handed.set()
    thread.join(10)
    request.join(10)
    assert log == ["ahead: checkpoint", "request", "ahead: back"]


@pytest.mark.parametrize(
    "params, place",
    [
        ({"textDocument": {"uri": URI}, "position": {"line": 1, "character": 11}}, (URI, 1, 11)),
        ({"textDocument": {"uri": URI}, "position": {"line": -1, "character": 0}}, None),
        ({"textDocument": {}, "position": {"line": 1, "character": 0}}, None),
        ({"position": {"line": 1, "character": "2"}}, None),
        (None, None),
    ],
)
def test_the_cursor_notification_is_read_or_refused(params, place):
    assert _cursor_place(params) == place


class _Worker:
    """Stands in for the server's worker: records the work handed to it, runs none."""

    def __init__(self):
        self.work: list[tuple] = []

    def __call__(self, work, *args, ticket=None):
        from concurrent.futures import Future

        self.work.append((work, args, ticket))
        return Future()


def loaded_server() -> tuple[FimServer, _Worker]:
    """A server that believes a model is loaded, with ``PREFIX + SUFFIX`` open at ``URI``."""
    server = FimServer()
    server.completer.loaded = object()  # type: ignore[assignment]  # (never called: the worker runs nothing)
    server.on_worker = worker = _Worker()  # type: ignore[method-assign]
    server.documents.open(URI, PREFIX + SUFFIX, 1, "python")
    return server, worker


def _typed(text: str):
    from lsprotocol import types

    at = types.Position(line=PREFIX.count("\n"), character=len(PREFIX.rsplit("\n", 1)[-1]))
    return types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=text)


def test_a_keystroke_starts_work_ahead_at_the_cursor_it_leaves():
    server, worker = loaded_server()
    change = _typed("w")
    server.documents.change(URI, 2, [change])
    server.document_changed(URI, [change])
    assert server.ahead is not None and server.ahead.around == (PREFIX + "w", SUFFIX)
    assert len(worker.work) == 1 and worker.work[0][2].level(0.0) == AHEAD


def test_no_work_ahead_where_a_generation_follows_the_typing_or_the_answer_is_known():
    server, worker = loaded_server()
    server.generating[URI] = running = ahead("w * h")
    running.take_over()
    change = _typed("w")
    server.documents.change(URI, 2, [change])
    server.document_changed(URI, [change])
    assert not running.cancelled and server.ahead is None and not worker.work
    del server.generating[URI]
    server.completer.shown.remember(PREFIX + "w", SUFFIX, [], final=True)
    server.look_ahead(URI, len(PREFIX) + 1)
    assert server.ahead is None and not worker.work


def test_a_newer_cursor_replaces_the_work_ahead():
    server, worker = loaded_server()
    server.look_ahead(URI, len(PREFIX))
    first = server.ahead
    server.look_ahead(URI, len(PREFIX) - 1)
    assert first is not None and first.cancelled and server.ahead is not first and len(worker.work) == 2
