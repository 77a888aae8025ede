"""The server on its default runtime, llama.cpp, with the shipped model: many requests at once.

One llama.cpp context serves every request. Requests that overlapped used to fail (``completion
failed``: a request paused at a decode step found another request's tokens in the context, and
with twenty documents asking at once 0 to 1 of them got an item): here every request is
answered, none fails, each document asked at once gets an item when it gets one asked alone,
and a newer request for a document supersedes its queued one. The deadline is the server's
default (3 s): it counts from when a request's work begins, so requests queued behind nineteen
others still get theirs. Nothing here asserts on timings. Without llama-cpp-python these tests
are skipped, except under CI (the ``CI`` variable set).
"""

from __future__ import annotations

import ast
import asyncio
import os
import sys

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")

from conftest import require_llama_cpp  # noqa: E402
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

from fimconstrain.decoding.models.loading import default_gguf  # noqa: E402
from lsp_server.server import BACKGROUND_DOCUMENT_CHARS  # noqa: E402

SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "lsp_server"],
    server_env={**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"},
)
SOURCE = "def area(width, height):\n    return \n\n\nprint(area(2, 3))\n"
CURSOR = types.Position(line=1, character=11)  # after "return "
NAMES = ("area", "perimeter", "volume", "ratio", "scale", "total", "mean", "spread", "offset", "blend")
#: twenty documents, each its own prompt
DOCUMENTS = {
    f"file:///at_once/doc{i}.py": SOURCE.replace("area", f"{NAMES[i % 10]}{'' if i < 10 else i}")
    for i in range(20)
}

pytestmark = [pytest.mark.time_limit(600), pytest.mark.filterwarnings("ignore::SyntaxWarning")]


@pytest.fixture(scope="module", autouse=True)
def _llama_cpp():
    require_llama_cpp()
    default_gguf()  # written once into the cache before the servers' clocks start


async def _session(**options) -> LanguageClient:
    """A server on llama.cpp with the shipped model, ready."""
    client = await SERVER.start()
    statuses: list[dict] = []
    client.fim_statuses = statuses  # type: ignore[attr-defined]

    @client.feature("fimconstrain/status")
    def on_status(params):
        statuses.append(params if isinstance(params, dict) else params._asdict())

    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            initialization_options={"runtime": "llama", "finishSearch": True, **options},
        )
    )
    for _ in range(3000):
        if any(s["state"] == "idle" and "ready" in s["message"] for s in statuses):
            break
        if any(s["state"] == "error" for s in statuses):
            raise AssertionError(f"the model did not load: {statuses}")
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"the model was not ready: {statuses}")
    return client


def _open(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )


async def _complete(
    client: LanguageClient,
    uri: str,
    position: types.Position,
    kind=types.InlineCompletionTriggerKind.Automatic,
) -> list[str]:
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=position,
            context=types.InlineCompletionContext(trigger_kind=kind),
        )
    )
    assert isinstance(result, types.InlineCompletionList), result  # an answer, never an error
    texts = []
    for item in result.items:
        assert isinstance(item.insert_text, str)
        texts.append(item.insert_text)
    return texts


def _assert_valid(text: str, position: types.Position, middles: list[str]) -> None:
    lines = text.split("\n")
    at = sum(len(line) + 1 for line in lines[: position.line]) + position.character
    for middle in middles:
        ast.parse(text[:at] + middle + text[at:])


def _no_failures(client: LanguageClient) -> None:
    failures = [m.message for m in client.log_messages if m.type == types.MessageType.Error]
    failures += [m.message for m in client.log_messages if "completion failed" in m.message]
    assert not failures, failures


@pytest.mark.asyncio
async def test_twenty_documents_at_once_each_get_the_item_they_get_alone():
    client = await _session()  # the default deadline, 3 s
    try:
        for uri, text in DOCUMENTS.items():
            _open(client, uri, text)
        alone = [await _complete(client, uri, CURSOR) for uri in DOCUMENTS]
        assert sum(map(bool, alone)) >= 10, alone  # the shipped model completes most of these
        at_once = await asyncio.wait_for(
            asyncio.gather(*(_complete(client, uri, CURSOR) for uri in DOCUMENTS)), timeout=400
        )
        await _complete(client, "file:///not-open.py", CURSOR)  # a round trip: the log is in
        _no_failures(client)
        for (uri, text), before, now in zip(DOCUMENTS.items(), alone, at_once, strict=True):
            _assert_valid(text, CURSOR, now)
            assert bool(now) == bool(before), (uri, before, now)  # due an item: it got one
        # a newer request for a document whose request is still queued supersedes it: the older
        # one is answered with nothing, the newer one gets its items (each document a text of its
        # own first: at a cursor already completed the server answers from its memory at once)
        again = {uri: text + "\n# again\n" for uri, text in DOCUMENTS.items()}
        for uri, text in again.items():
            _open(client, uri, text)
        last = list(DOCUMENTS)[-1]
        queued = [asyncio.ensure_future(_complete(client, uri, CURSOR)) for uri in DOCUMENTS]
        await asyncio.sleep(0.1)  # (sent)
        newer = await _complete(client, last, CURSOR)
        assert await queued[-1] == []
        _assert_valid(again[last], CURSOR, newer)
        await asyncio.gather(*queued)
        _no_failures(client)
    finally:
        await client.shutdown_session()


@pytest.mark.asyncio
async def test_a_large_documents_generation_paused_for_small_ones_goes_on():
    """A large document's request (background work) is paused at a decode step for twenty small
    documents' requests, each of which takes the llama.cpp context; it then goes on with its
    own tokens, and every request is answered, none failing."""
    client = await _session(maxFileChars=10_000_000, maxTokens=256, deadlineMs=60_000)
    try:
        big = "".join(f"value_{i} = {i}\n" for i in range(15_000)) + "\n\ndef scale(x):\n    "
        assert len(big) >= BACKGROUND_DOCUMENT_CHARS
        at_end = types.Position(line=big.count("\n"), character=4)
        _open(client, "file:///big.py", big)
        for uri, text in DOCUMENTS.items():
            _open(client, uri, text)
        await _complete(client, "file:///big.py", at_end)  # its text is read (and kept) here
        large = asyncio.ensure_future(
            _complete(client, "file:///big.py", at_end, types.InlineCompletionTriggerKind.Invoked)
        )
        for _ in range(200):  # until it is under way (the worker is free: it starts at once)
            if any("completing big.py" in s["message"] for s in client.fim_statuses):  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # into its generation (its text was read before)
        small = await asyncio.gather(*(_complete(client, uri, CURSOR) for uri in DOCUMENTS))
        middles = await large
        await _complete(client, "file:///not-open.py", CURSOR)
        _no_failures(client)
        _assert_valid(big, at_end, middles)
        for text, got in zip(DOCUMENTS.values(), small, strict=True):
            _assert_valid(text, CURSOR, got)
        summaries = [m.message for m in client.log_messages if m.message.startswith("completion big.py")]
        assert any("paused" in line for line in summaries), summaries
    finally:
        await client.shutdown_session()
