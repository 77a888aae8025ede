"""Typing through a generation (lsp_server/completer.py ``Job.typed_since``, lsp_server/server.py
``FimServer.supersede``): a newer request whose typed text the running generation wrote, or may
still write, lets it run on, so that the newer one is answered from its items; a generation the
typed text left behind, and a request that has not begun, stop at once. Policy only: no model."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("pygls")

from lsp_server.completer import Job
from lsp_server.server import FimServer

pytestmark = pytest.mark.time_limit(60)

URI = "file:///work/typing.py"
PREFIX, SUFFIX = "def area(w, h):\n    return ", "\n\nprint(area(2, 3))\n"


def running(middle: str, prefix: str = PREFIX, suffix: str = SUFFIX) -> Job:
    """A job whose generation began at ``prefix``|``suffix`` and has written ``middle`` so far."""
    job = Job(URI, math.inf, single_line=True)
    job.begin(60)
    job.around = (prefix, suffix)
    job.on_middle(middle)
    return job


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("w", "w"),  # the first character of what it wrote
        ("w * h", "w * h"),  # all of it
        ("w * h + 1", "w * h + 1"),  # past it: the generation may still write the rest
        ("x", None),  # not what it wrote
        ("", ""),  # nothing typed (a request at the same text)
    ],
)
def test_what_was_typed_at_the_cursor_is_followed_while_the_middle_spells_it(typed, expected):
    assert running("w * h").typed_since(PREFIX + typed + SUFFIX) == expected


def test_an_edit_elsewhere_or_a_stopped_job_is_not_followed():
    job = running("w * h")
    assert job.typed_since("# a comment\n" + PREFIX + "w" + SUFFIX) is None
    assert job.typed_since(PREFIX + "w" + SUFFIX + "x = 1\n") is None
    job.cancel()
    assert job.typed_since(PREFIX + "w" + SUFFIX) is None
    assert Job(URI, math.inf, single_line=True).typed_since(PREFIX + SUFFIX) is None  # no cursor


def test_a_keystroke_the_generation_wrote_keeps_it_and_ends_the_request_that_waited():
    server = FimServer()
    generation, waiting = running("w * h"), Job(URI, math.inf, single_line=True)
    server.generating[URI], server.jobs[URI] = generation, waiting
    server.supersede(URI, PREFIX + "w" + SUFFIX)
    assert not generation.cancelled
    assert waiting.cancelled and waiting.reason == "superseded"


@pytest.mark.parametrize("typed", ["x", ""])
def test_a_keystroke_it_did_not_write_or_none_at_all_stops_the_generation(typed):
    server = FimServer()
    generation = running("w * h")
    server.generating[URI] = server.jobs[URI] = generation
    server.supersede(URI, PREFIX + typed + SUFFIX)
    assert generation.cancelled and generation.reason == "superseded"


def test_an_edit_that_leaves_the_generation_behind_stops_it_before_any_request():
    server = FimServer()
    server.documents.open(URI, PREFIX + SUFFIX, 1, "python")
    generation = running("w * h")
    server.generating[URI] = generation
    change = _typed("w")
    server.documents.change(URI, 2, [change])
    server.document_changed(URI, [change])
    assert not generation.cancelled  # it wrote "w"
    change = _typed("+", after=1)
    server.documents.change(URI, 3, [change])
    server.document_changed(URI, [change])
    assert generation.cancelled


def _typed(text: str, after: int = 0):
    """The didChange of ``text`` typed ``after`` characters past the cursor."""
    from lsprotocol import types

    line, column = PREFIX.count("\n"), len(PREFIX.rsplit("\n", 1)[-1]) + after
    position = types.Position(line=line, character=column)
    return types.TextDocumentContentChangePartial(range=types.Range(start=position, end=position), text=text)
