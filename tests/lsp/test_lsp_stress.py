"""The server under stress: its first seconds, many requests at once, hostile documents and
big edits (pytest-lsp over stdio, the tiny random model). Nothing here asserts on timings:
order and answers only."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest_lsp = pytest.importorskip("pytest_lsp")
pytest.importorskip("torch")

from lsprotocol import types  # noqa: E402
from pytest_lsp import LanguageClient, client_capabilities  # noqa: E402
from test_lsp_server import SERVER, _complete, _open, _options, _statuses, _wait_status, tiny_model  # noqa: E402

from fimconstrain.engine.positions import line_starts  # noqa: E402
from lsp_server.documents import edited_starts, line_start_array  # noqa: E402

__all__ = ["tiny_model"]  # the module-scoped fixture, shared

SOURCE = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
CURSOR = types.Position(line=1, character=11)

pytestmark = [pytest.mark.time_limit(180), pytest.mark.filterwarnings("ignore::SyntaxWarning")]


async def _session(tiny_model, **options) -> LanguageClient:
    client = await SERVER.start()
    _statuses(client)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            initialization_options=_options(tiny_model, **options),
        )
    )
    return client


@pytest.mark.asyncio
async def test_a_request_during_the_model_load_waits_for_it(tiny_model):
    """Sent at once after initialization, with a deadline shorter than the load: answered with
    an item once the model is ready (the deadline counts from then), and the status says
    "loading" until the model is ready, never "completing" before that."""
    client = await _session(tiny_model, deadlineMs=300)
    try:
        _open(client, "file:///first.py", SOURCE)
        items = await _complete(client, "file:///first.py", CURSOR)
        assert items, [m.message for m in client.log_messages]
        statuses = _statuses(client)
        ready = next(i for i, s in enumerate(statuses) if "ready" in s["message"])
        assert all("completing" not in s["message"] for s in statuses[:ready])
        assert any("loading" in s["message"] for s in statuses[:ready])
    finally:
        await client.shutdown_session()


@pytest.mark.asyncio
async def test_many_requests_at_once_are_each_answered(tiny_model):
    """20 documents, a request each, all at once: every request gets an answer (items, or an
    empty list once its deadline passed while it waited), none is dropped."""
    client = await _session(tiny_model)
    try:
        await _wait_status(client, "idle", "ready")
        uris = [f"file:///doc{i}.py" for i in range(20)]
        for uri in uris:
            _open(client, uri, SOURCE)
        answers = await asyncio.wait_for(
            asyncio.gather(*(_complete(client, uri, CURSOR) for uri in uris)), timeout=150
        )
        assert len(answers) == 20 and all(isinstance(a, list) for a in answers)
        assert any(answers)
    finally:
        await client.shutdown_session()


@pytest.mark.asyncio
async def test_the_newest_request_for_a_document_wins(tiny_model):
    """Five requests for one document while the model loads (so none can finish before the
    next arrives, however fast the model): the four older ones are answered empty at once, the
    newest with an item."""
    client = await _session(tiny_model)
    try:
        _open(client, "file:///busy.py", SOURCE)
        answers = await asyncio.gather(*(_complete(client, "file:///busy.py", CURSOR) for _ in range(5)))
        assert answers[-1] and not any(answers[:-1])
    finally:
        await client.shutdown_session()


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", ["\ud800", "\x00"], ids=ascii)
async def test_a_document_no_python_can_read_gets_an_empty_answer(tiny_model, bad):
    """A lone surrogate or a NUL after the cursor: no item, a log line, the server goes on."""
    client = await _session(tiny_model)
    try:
        await _wait_status(client, "idle", "ready")
        _open(client, "file:///bad.py", SOURCE + f"# {bad}\n")
        assert await _complete(client, "file:///bad.py", CURSOR) == []
        assert not any("completion failed" in m.message for m in client.log_messages)  # no traceback
        _open(client, "file:///good.py", SOURCE)
        assert await _complete(client, "file:///good.py", CURSOR)  # still serving
    finally:
        await client.shutdown_session()


@pytest.mark.asyncio
async def test_edits_of_a_large_document_keep_positions_exact(tiny_model):
    """Thousands of lines, edited here and there: a completion at the end still lands where
    the client says (line starts are kept edit by edit)."""
    client = await _session(tiny_model)
    try:
        await _wait_status(client, "idle", "ready")
        body = "".join(f"value_{i} = {i}\n" for i in range(5000))
        uri = "file:///big.py"
        _open(client, uri, body + SOURCE)
        for version, line in enumerate((10, 2500, 4999), start=2):
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[
                        types.TextDocumentContentChangePartial(
                            range=types.Range(
                                start=types.Position(line=line, character=0),
                                end=types.Position(line=line, character=0),
                            ),
                            text="extra = 1\r\n",
                        )
                    ],
                )
            )
        cursor = types.Position(line=5000 + 3 + CURSOR.line, character=CURSOR.character)
        assert await _complete(client, uri, cursor)
    finally:
        await client.shutdown_session()


@pytest.mark.asyncio
async def test_a_small_document_is_answered_while_a_large_one_generates(tiny_model):
    """A large document's explicit request (three long generations, its text already read) and
    then a small document's: the small one is answered first, the large one's generation
    handing the worker over at its next decode step, and both are answered."""
    client = await _session(tiny_model, maxFileChars=10_000_000, maxTokens=512, finishSearch=False)
    try:
        await _wait_status(client, "idle", "ready")
        big = "".join(f"value_{i} = {i}\n" for i in range(20_000)) + "\n\ndef scale(x):\n    "
        _open(client, "file:///big.py", big)
        _open(client, "file:///small.py", SOURCE)
        at_end = types.Position(line=big.count("\n"), character=4)
        await _complete(client, "file:///big.py", at_end)  # its text is read (and kept) here
        large = asyncio.ensure_future(
            _complete(client, "file:///big.py", at_end, types.InlineCompletionTriggerKind.Invoked)
        )
        small = asyncio.ensure_future(_complete(client, "file:///small.py", CURSOR))
        done, _ = await asyncio.wait({large, small}, return_when=asyncio.FIRST_COMPLETED)
        assert small in done and large not in done
        assert isinstance(await small, list) and isinstance(await large, list)
    finally:
        await client.shutdown_session()


_PIECES = st.sampled_from(["a", "bc", "\n", "\r", "\r\n", " ", "é", ""])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_PIECES, max_size=30).map("".join),
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.lists(_PIECES, max_size=5).map("".join))),
)
def test_line_starts_kept_edit_by_edit_match_a_fresh_count(text, edits):
    starts = line_start_array(text)
    assert starts.tolist() == line_starts(text)
    for a, b, new in edits:
        a, b = sorted((min(a, len(text)), min(b, len(text))))
        text = text[:a] + new + text[b:]
        starts = edited_starts(starts, text, a, b, len(new))
        assert starts.tolist() == line_starts(text) == line_start_array(text).tolist()


def test_random_edit_sequences_match_a_fresh_count():
    rng = random.Random(0)
    text = "x = 1\r\ny = 2\rz = 3\n"
    starts = line_start_array(text)
    for _ in range(2000):
        a = rng.randint(0, len(text))
        b = rng.randint(a, min(len(text), a + 5))
        new = rng.choice(["", "\n", "\r", "q\r\n", "\r\nw"])
        text = text[:a] + new + text[b:]
        starts = edited_starts(starts, text, a, b, len(new))
    assert starts.tolist() == line_starts(text)
