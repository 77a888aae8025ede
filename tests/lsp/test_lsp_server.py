"""The language server end to end: pytest-lsp drives ``python -m lsp_server`` over stdio.

The server runs a tiny randomly initialised FIM model (built once per module by
``scripts/tiny_model.py``), so completions are nonsense but must still be valid:
every item, inserted at the cursor, must make the file parse.  Nothing here
asserts on timings; early stops are checked through the server's log.
"""

from __future__ import annotations

import ast
import asyncio
import os
import sys
from concurrent.futures import Future
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")
pytest.importorskip("pygls")
pytest.importorskip("torch")
pytest.importorskip("transformers")

from lsprotocol import types  # noqa: E402
from pygls.exceptions import JsonRpcException  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

SERVER_ENV = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "lsp_server"], server_env=SERVER_ENV)
MAX_TOKENS = 16

SOURCE = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
CURSOR = types.Position(line=1, character=11)  # after "return "
#: a cursor where the test model writes on for long (a block body after its indentation, not
#: healed): for the requests that must still be running when they are cancelled or superseded
LONG_SOURCE = "def add(a, b):\n    \n\n\nprint(add(1, 2))\n"
LONG_CURSOR = types.Position(line=1, character=4)

pytestmark = [pytest.mark.time_limit(120), pytest.mark.filterwarnings("ignore::SyntaxWarning")]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("lsp_tiny_model"))


def _options(model: Path | str, **extra) -> dict:
    return {
        "model": str(model),
        "maxTokens": MAX_TOKENS,
        "deadlineMs": 20000,
        "device": "cpu",
        "threads": 1,
        "finishSearch": True,  # a random model's middles are rarely valid without it
        **extra,
    }


def _statuses(client: LanguageClient) -> list[dict]:
    if not hasattr(client, "fim_statuses"):
        client.fim_statuses = []

        @client.feature("fimconstrain/status")
        def on_status(params):
            client.fim_statuses.append(params if isinstance(params, dict) else params._asdict())

    return client.fim_statuses


async def _wait_status(client: LanguageClient, state: str, contains: str = "", seconds: float = 60) -> dict:
    statuses = _statuses(client)
    for _ in range(int(seconds * 20)):
        for status in statuses:
            if status.get("state") == state and contains in status.get("message", ""):
                return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {state!r} status with {contains!r}; got {statuses}")


async def _wait_log(client: LanguageClient, needle: str, seconds: float = 30) -> str:
    for _ in range(int(seconds * 20)):
        for message in client.log_messages:
            if needle in message.message:
                return message.message
        await asyncio.sleep(0.05)
    raise AssertionError(f"no log message with {needle!r}: {[m.message for m in client.log_messages]}")


def _open(client: LanguageClient, uri: str, text: str, language: str = "python", version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)
        )
    )


async def _complete(
    client: LanguageClient,
    uri: str,
    position: types.Position,
    kind=types.InlineCompletionTriggerKind.Automatic,
    selected=None,
) -> list:
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=position,
            context=types.InlineCompletionContext(trigger_kind=kind, selected_completion_info=selected),
        )
    )
    if result is None:
        return []
    return list(result.items if hasattr(result, "items") else result)


def _offset(text: str, position: types.Position) -> int:
    """Offset of a UTF-16 position in text with \\n line ends (test documents only)."""
    line_start = sum(len(line) + 1 for line in text.split("\n")[: position.line])
    line = text.split("\n")[position.line]
    units = 0
    for i, ch in enumerate(line):
        if units >= position.character:
            return line_start + i
        units += 2 if ord(ch) > 0xFFFF else 1
    return line_start + len(line)


def _assert_valid(text: str, position: types.Position, items: list) -> None:
    at = _offset(text, position)
    for item in items:
        insert = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
        assert item.range is not None and item.range.start == position and item.range.end == position
        program = text[:at] + insert + text[at:]
        try:
            ast.parse(program)
        except SyntaxError as error:  # pragma: no cover - the message is the point
            raise AssertionError(f"item {insert!r} breaks the file: {error}\n{program}") from None


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, tiny_model):
    _statuses(lsp_client)
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            initialization_options=_options(tiny_model),
        )
    )
    await _wait_status(lsp_client, "idle", "ready")
    yield
    await lsp_client.shutdown_session()


# ---------------------------------------- with the shared server (VS Code's capabilities)


@pytest.mark.asyncio(loop_scope="module")
async def test_model_loads_in_the_background_with_progress_and_status(client: LanguageClient):
    statuses = _statuses(client)
    assert any(s["state"] == "busy" and "loading" in s["message"] for s in statuses)
    assert any(s["state"] == "idle" and "ready" in s["message"] for s in statuses)
    assert any("loaded" in m.message for m in client.log_messages)
    progress = [v for values in client.progress_reports.values() for v in values]
    assert {type(v).__name__ for v in progress} >= {"WorkDoneProgressBegin", "WorkDoneProgressEnd"}


@pytest.mark.asyncio(loop_scope="module")
async def test_initialize_result(tiny_model):
    """A fresh session: the capability and the position encoding VS Code gets (UTF-16)."""
    lsp_client = await SERVER.start()
    try:
        result = await lsp_client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"), initialization_options={"mode": "off"}
            )
        )
        assert result.capabilities.inline_completion_provider is not None
        assert result.capabilities.position_encoding in (None, types.PositionEncodingKind.Utf16)
        assert result.capabilities.text_document_sync.change == types.TextDocumentSyncKind.Incremental
        assert result.server_info.name == "fimconstrain-lsp"
        await lsp_client.shutdown_session()
        assert lsp_client._server.returncode == 0
    finally:
        await lsp_client.stop()


@pytest.mark.asyncio(loop_scope="module")
async def test_automatic_completion_is_valid(client: LanguageClient):
    uri = "file:///work/auto.py"
    _open(client, uri, SOURCE)
    items = await _complete(client, uri, CURSOR)
    assert len(items) <= 1
    _assert_valid(SOURCE, CURSOR, items)
    assert items, "a valid middle always exists here; the constraint or the shortest finish must find one"


@pytest.mark.asyncio(loop_scope="module")
async def test_the_cursor_notification_completes_ahead_of_the_request(client: LanguageClient):
    """``fimconstrain/cursor`` makes the server complete there while it is idle; the request
    that then comes at that cursor is answered from that work, without the model."""
    uri = "file:///work/ahead.py"
    text = SOURCE.replace("add(1, 2)", "add(7, 8)")  # (a text of its own: nothing known there yet)
    _open(client, uri, text)
    client.log_messages.clear()
    place = {"textDocument": {"uri": uri}, "position": {"line": CURSOR.line, "character": CURSOR.character}}
    client.protocol.notify("fimconstrain/cursor", place)
    worked = await _wait_log(client, "work ahead ahead.py:")
    assert " 0 tokens" not in worked
    items = await _complete(client, uri, CURSOR)
    _assert_valid(text, CURSOR, items)
    answered = await _wait_log(client, "completion ahead.py:")
    assert " 0 tokens" in answered, answered
    client.protocol.notify("fimconstrain/cursor", {"textDocument": {"uri": uri}})  # (no position)
    await _wait_log(client, "ignored a fimconstrain/cursor notification")


@pytest.mark.asyncio(loop_scope="module")
async def test_invoked_completion_gives_several_valid_items(client: LanguageClient):
    uri = "file:///work/invoked.py"
    text = "values = [1, 2,\n\ntotal = sum(values)\n"
    position = types.Position(line=0, character=15)
    _open(client, uri, text)
    items = await _complete(client, uri, position, types.InlineCompletionTriggerKind.Invoked)
    assert 1 <= len(items) <= 3
    _assert_valid(text, position, items)
    assert len({item.insert_text for item in items}) == len(items)


@pytest.mark.asyncio(loop_scope="module")
async def test_did_change_then_complete_again(client: LanguageClient):
    uri = "file:///work/change.py"
    _open(client, uri, SOURCE)
    first = await _complete(client, uri, CURSOR)
    _assert_valid(SOURCE, CURSOR, first)
    # type "a" after "return " (incremental change), then ask again one character further on
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(range=types.Range(start=CURSOR, end=CURSOR), text="a")
            ],
        )
    )
    text = SOURCE.replace("return ", "return a")
    position = types.Position(line=1, character=12)
    items = await _complete(client, uri, position)
    _assert_valid(text, position, items)
    # a multi-line change: replace the call on the last line, and complete inside the new one
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=4, character=0), end=types.Position(line=5, character=0)
                    ),
                    text="x = add(\n    1,\n)\n",
                )
            ],
        )
    )
    text = text.replace("print(add(1, 2))\n", "x = add(\n    1,\n)\n")
    position = types.Position(line=5, character=6)  # after "    1,"
    items = await _complete(client, uri, position)
    _assert_valid(text, position, items)


@pytest.mark.asyncio(loop_scope="module")
async def test_selected_completion_info_is_extended(client: LanguageClient):
    uri = "file:///work/selected.py"
    text = "import os\nname = os.pa\n"
    position = types.Position(line=1, character=12)
    _open(client, uri, text)
    word = types.Range(start=types.Position(line=1, character=10), end=position)
    selected = types.SelectedCompletionInfo(range=word, text="path")
    items = await _complete(client, uri, position, types.InlineCompletionTriggerKind.Invoked, selected)
    assert items
    for item in items:
        assert item.insert_text.startswith("path") and item.range == word
        ast.parse(text[: _offset(text, word.start)] + item.insert_text + text[_offset(text, position) :])


@pytest.mark.asyncio(loop_scope="module")
async def test_mid_line_completion_is_one_line(client: LanguageClient):
    uri = "file:///work/midline.py"
    text = "def f(x):\n    return g(x, )\n"
    position = types.Position(line=1, character=16)  # after "g(x, "
    _open(client, uri, text)
    items = await _complete(client, uri, position, types.InlineCompletionTriggerKind.Invoked)
    _assert_valid(text, position, items)
    assert all("\n" not in item.insert_text for item in items)


@pytest.mark.asyncio(loop_scope="module")
async def test_cancel_request_stops_generation(client: LanguageClient):
    uri = "file:///work/cancel.py"
    _open(client, uri, LONG_SOURCE)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"fimconstrain": {"maxTokens": 2000, "multiline": "always"}}
        )
    )
    try:
        await _wait_log(client, "'maxTokens': 2000")
        client.log_messages.clear()
        msg_id = "cancel-me"
        _statuses(client).clear()
        future = asyncio.ensure_future(
            client.protocol.send_request_async(
                types.TEXT_DOCUMENT_INLINE_COMPLETION,
                types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    position=LONG_CURSOR,
                    context=types.InlineCompletionContext(
                        trigger_kind=types.InlineCompletionTriggerKind.Automatic
                    ),
                ),
                msg_id=msg_id,
            )
        )
        await _wait_status(client, "busy", "completing cancel.py")
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        with pytest.raises(JsonRpcException):
            await future
        message = await _wait_log(client, "stopped early: cancelled")
        tokens = int(message.split(" tokens")[0].rsplit(" ", 1)[-1])
        assert tokens < 2000
        # the worker is free again: the next request is answered
        items = await _complete(client, uri, LONG_CURSOR)
        _assert_valid(LONG_SOURCE, LONG_CURSOR, items)
    finally:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"fimconstrain": {"maxTokens": MAX_TOKENS, "multiline": "auto"}}
            )
        )
        await _wait_log(client, f"'maxTokens': {MAX_TOKENS}")


@pytest.mark.asyncio(loop_scope="module")
async def test_newer_request_supersedes(client: LanguageClient):
    uri = "file:///work/supersede.py"
    # a text of its own: at a cursor another test completed, the server answers from its memory
    text = LONG_SOURCE.replace("add(1, 2)", "add(3, 4)")
    _open(client, uri, text)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"fimconstrain": {"maxTokens": 2000, "multiline": "always"}}
        )
    )
    try:
        await _wait_log(client, "'maxTokens': 2000")
        client.log_messages.clear()
        _statuses(client).clear()
        old = asyncio.ensure_future(_complete(client, uri, LONG_CURSOR))
        await _wait_status(client, "busy", "completing supersede.py")
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fimconstrain": {"maxTokens": MAX_TOKENS}})
        )
        new = await _complete(client, uri, LONG_CURSOR)
        assert await old == []
        _assert_valid(text, LONG_CURSOR, new)
        message = await _wait_log(client, "stopped early: superseded")
        assert int(message.split(" tokens")[0].rsplit(" ", 1)[-1]) < 2000
    finally:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"fimconstrain": {"maxTokens": MAX_TOKENS, "multiline": "auto"}}
            )
        )
        await _wait_log(client, "'multiline': 'auto'")


@pytest.mark.asyncio(loop_scope="module")
async def test_deadline_returns_valid_or_nothing(client: LanguageClient):
    uri = "file:///work/deadline.py"
    text = "class Point:\n    def __init__(self, x, y):\n        \n\n    def norm(self):\n        return 1\n"
    position = types.Position(line=2, character=8)
    _open(client, uri, text)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimconstrain": {"maxTokens": 2000, "deadlineMs": 300}})
    )
    try:
        await _wait_log(client, "'deadlineMs': 300")
        client.log_messages.clear()
        items = await _complete(client, uri, position)
        _assert_valid(text, position, items)
        await _wait_log(client, "stopped early: deadline")
    finally:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"fimconstrain": {"maxTokens": MAX_TOKENS, "deadlineMs": 20000}}
            )
        )
        await _wait_log(client, "'deadlineMs': 20000")


@pytest.mark.asyncio(loop_scope="module")
async def test_configuration_change_mode_off_and_prefix(client: LanguageClient):
    uri = "file:///work/modes.py"
    _open(client, uri, SOURCE)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimconstrain": {"mode": "off"}})
    )
    await _wait_status(client, "idle", "off")
    assert await _complete(client, uri, CURSOR) == []
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"mode": "prefix"}))
    await _wait_log(client, "'mode': 'prefix'")
    items = await _complete(client, uri, CURSOR)
    for item in items:  # prefix mode: the middle completes the text before the cursor on its own
        ast.parse(SOURCE[: _offset(SOURCE, CURSOR)] + item.insert_text)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"fimconstrain": {"mode": "fim", "bogus": 1, "maxTokens": -5}}
        )
    )
    await _wait_log(client, "'mode': 'fim'")
    await _wait_log(client, "unknown setting 'bogus'")
    await _wait_log(client, "'maxTokens' = -5 ignored")
    items = await _complete(client, uri, CURSOR)
    _assert_valid(SOURCE, CURSOR, items)


@pytest.mark.asyncio(loop_scope="module")
async def test_documents_it_does_not_serve(client: LanguageClient):
    assert await _complete(client, "file:///work/never-opened.py", CURSOR) == []
    await _wait_log(client, "not open")
    _open(client, "file:///work/notes.md", "# notes\n\nsome text\n", language="markdown")
    assert await _complete(client, "file:///work/notes.md", types.Position(line=2, character=4)) == []
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimconstrain": {"maxFileChars": 1000}})
    )
    await _wait_log(client, "'maxFileChars': 1000")
    huge = "x = 1\n" * 1000 + "y = \n"
    _open(client, "file:///work/huge.py", huge)
    assert await _complete(client, "file:///work/huge.py", types.Position(line=1000, character=4)) == []
    await _wait_log(client, "over maxFileChars")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimconstrain": {"maxFileChars": 200000}})
    )
    await _wait_log(client, "'maxFileChars': 200000")
    # an uncompletable file (a stray closing bracket before the cursor): nothing, not an error
    _open(client, "file:///work/broken.py", "x = 1)\ny = \n")
    assert await _complete(client, "file:///work/broken.py", types.Position(line=1, character=4)) == []
    # a position past the end of the file is clamped
    items = await _complete(client, "file:///work/auto.py", types.Position(line=99, character=99))
    assert isinstance(items, list)


@pytest.mark.asyncio(loop_scope="module")
async def test_malformed_and_unknown_requests(client: LanguageClient):
    with pytest.raises(JsonRpcException) as info:
        await client.protocol.send_request_async("fimconstrain/noSuchMethod", {"x": 1})
    assert "noSuchMethod" in str(info.value) or info.value.code == -32601
    # raw messages: the client library would refuse to send these
    pending: Future = Future()
    client.protocol._request_futures["bad-params"] = pending
    client.protocol._send_data(
        {
            "jsonrpc": "2.0",
            "id": "bad-params",
            "method": types.TEXT_DOCUMENT_INLINE_COMPLETION,
            "params": {"textDocument": 5, "position": "here"},
        }
    )
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wrap_future(pending)
    assert info.value.code == -32602
    client.protocol._send_data({"jsonrpc": "2.0", "method": "fimconstrain/unknownNotification", "params": {}})
    client.protocol._send_data(
        {"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_DID_CHANGE, "params": {"textDocument": {"uri": 3}}}
    )
    # still alive and completing
    items = await _complete(client, "file:///work/auto.py", CURSOR)
    _assert_valid(SOURCE, CURSOR, items)


# ---------------------------------------- a client that offers UTF-8; a model that fails


@pytest.mark.asyncio(loop_scope="module")
async def test_utf8_positions_model_failure_and_reload(tiny_model):
    lsp_client = await SERVER.start()
    try:
        _statuses(lsp_client)
        caps = client_capabilities("neovim")
        caps.general = types.GeneralClientCapabilities(
            position_encodings=[types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8]
        )
        result = await lsp_client.initialize_session(
            types.InitializeParams(capabilities=caps, initialization_options=_options("/nonexistent/model"))
        )
        assert result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
        await _wait_status(lsp_client, "error", "failed to load")
        uri = "file:///work/unicode.py"
        text = "x = 'é😀' if y else z\nname = \n"
        _open(lsp_client, uri, text)
        assert await _complete(lsp_client, uri, types.Position(line=1, character=7)) == []

        lsp_client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"fimconstrain": {"model": str(tiny_model)}})
        )
        await _wait_status(lsp_client, "idle", "ready")
        items = await _complete(lsp_client, uri, types.Position(line=1, character=7))
        assert items
        for item in items:
            ast.parse(text.replace("name = ", "name = " + item.insert_text))
        # insert before "if" at its UTF-8 column (13); read as UTF-16 that column is before "y",
        # which would leave the file uncompletable (and the server with nothing to offer)
        column = len("x = 'é😀' ".encode())
        lsp_client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(
                            start=types.Position(line=0, character=column),
                            end=types.Position(line=0, character=column),
                        ),
                        text="+ 'q' ",
                    )
                ],
            )
        )
        text = text.replace("😀' ", "😀' + 'q' ")
        items = await _complete(lsp_client, uri, types.Position(line=1, character=7))
        assert items
        for item in items:
            ast.parse(text.replace("name = ", "name = " + item.insert_text))
        await lsp_client.shutdown_session()
        assert lsp_client._server.returncode == 0
    finally:
        await lsp_client.stop()


def _random_bytes_named_gguf(tmp_path: Path, tiny_model: Path) -> Path:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(bytes(range(256)) * 16)
    return bad


def _model_without_fim_tokens(tmp_path: Path, tiny_model: Path) -> Path:
    import shutil

    model = Path(shutil.copytree(tiny_model, tmp_path / "model"))
    for path in model.glob("*.json"):  # SantaCoder's FIM markers renamed: no format's markers left
        path.write_text(path.read_text("utf-8").replace("<fim-", "<no-fim-"), "utf-8")
    return model


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_random_bytes_named_gguf, "not a GGUF file"),
        (_model_without_fim_tokens, "no known FIM marker tokens"),
    ],
    ids=["random-bytes", "no-fim-tokens"],
)
async def test_a_file_that_is_no_model_is_one_line_in_the_status(make, says, tiny_model, tmp_path):
    bad = make(tmp_path, tiny_model)
    lsp_client = await SERVER.start()
    try:
        _statuses(lsp_client)
        await lsp_client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"), initialization_options=_options(bad)
            )
        )
        status = await _wait_status(lsp_client, "error", says)
        assert "\n" not in status["message"] and str(bad) in status["message"]
        await lsp_client.shutdown_session()
    finally:
        await lsp_client.stop()


# ---------------------------------------------------------------- the pure parts, in-process


def _position_at(text: str, offset: int, encoding: str) -> tuple[int, int]:
    """The LSP (line, character) of ``offset``, computed apart from the server (lines end at
    \r\n, \r or \n; characters counted in ``encoding``'s units)."""
    import re

    line_start = max([0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text[:offset])])
    chunk = text[line_start:offset]
    width = {"utf-8": lambda ch: len(ch.encode()), "utf-16": lambda ch: 2 if ord(ch) > 0xFFFF else 1}
    units = sum(map(width.get(encoding, lambda ch: 1), chunk))
    return len(re.findall(r"\r\n|\r|\n", text[:line_start])), units


def test_positions_in_each_encoding():
    from lsp_server.documents import UTF8, UTF16, UTF32, offset_at

    text = "a = 'é😀'\r\nb\x0cc = 1\rd\n"
    assert offset_at(text, 0, 5, UTF16) == 5
    assert offset_at(text, 0, 6, UTF16) == 6 and offset_at(text, 0, 8, UTF16) == 7
    assert offset_at(text, 0, 7, UTF16) == 6  # inside the surrogate pair: before the character
    assert offset_at(text, 0, 7, UTF8) == 6 and offset_at(text, 0, 11, UTF8) == 7
    assert offset_at(text, 0, 7, UTF32) == 7
    assert offset_at(text, 0, 99, UTF16) == 8  # clamped to the line's end, before \r\n
    assert offset_at(text, 1, 2, UTF16) == 12  # a form feed is not a line break in LSP
    assert offset_at(text, 2, 0, UTF16) == text.index("d")
    assert offset_at(text, 9, 0, UTF16) == len(text)
    for enc in (UTF8, UTF16, UTF32):
        for offset in range(len(text) + 1):
            if text[offset - 1 : offset + 1] == "\r\n":
                continue
            assert offset_at(text, *_position_at(text, offset, enc), enc) == offset


def test_incremental_changes():
    from lsp_server.documents import UTF8, Documents

    docs = Documents()
    docs.encoding = UTF8
    docs.open("u", "s = 'é'\nt = 1\n", 1, "python")
    change = types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(line=0, character=8), end=types.Position(line=1, character=1)),
        text=" + 'x'\nu",
    )
    assert docs.change("u", 2, [change])
    assert docs.get("u").text == "s = 'é' + 'x'\nu = 1\n"
    assert docs.change("u", 3, [types.TextDocumentContentChangeWholeDocument(text="z = 2\n")])
    assert docs.get("u").text == "z = 2\n" and docs.get("u").version == 3
    assert not docs.change("nope", 1, [change])


@pytest.fixture(scope="module")
def completer(tiny_model):
    from lsp_server.completer import Completer
    from lsp_server.config import Settings

    completer = Completer()
    completer.load(Settings(model=str(tiny_model), threads=1))
    return completer


def test_cancel_stops_within_one_decode_step(completer):
    import time

    from lsp_server.completer import Job
    from lsp_server.config import Settings

    # the plain decode loop: a random model's names would make the names guide end it early
    settings = Settings(max_tokens=1000, multiline="always", semantic=False)
    job = Job("u", time.monotonic() + 60, single_line=False)
    seen = job.on_token

    def on_token(token):
        seen(token)
        if job.generated == 5:
            job.cancel()  # from "outside", between two decode steps

    job.on_token = on_token
    assert completer.complete(job, "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n", settings, 1) == []
    assert job.generated == 5 and job.reason == "cancelled"


def test_deadline_and_single_line(completer):
    """The deadline and the end of a one-line completion stop generation through should_stop."""
    import time

    from lsp_server.completer import Job
    from lsp_server.config import Settings

    # the plain decode loop: a random model's names would make the names guide end it early
    settings = Settings(max_tokens=1000, multiline="always", semantic=False)
    prefix, suffix = "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"
    job = Job("u", time.monotonic() + 0.2, single_line=False)
    items = completer.complete(job, prefix, suffix, settings, 1)
    assert job.ended == "deadline" and job.generated < 1000
    for middle in items:
        ast.parse(prefix + middle + suffix)
    # one line at a time: generation stops at the end of the line
    job = Job("u", time.monotonic() + 60, single_line=True)
    for middle in completer.complete(job, "x = 1\ny = ", "\n", settings, 1):
        assert "\n" not in middle.strip("\n")
        ast.parse("x = 1\ny = " + middle + "\n")


def test_a_job_says_where_its_time_went(completer):
    """The model's and the constraint's seconds over a job's generations (the server logs them
    per token; the editor-quality benchmark reads them)."""
    import time

    from lsp_server.completer import Job
    from lsp_server.config import Settings

    settings = Settings(max_tokens=12, multiline="always", semantic=False)
    job = Job("u", time.monotonic() + 60, single_line=False)
    started = time.perf_counter()
    completer.complete(job, "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n", settings, 1)
    wall = time.perf_counter() - started
    assert job.generated > 0 and job.model_seconds > 0 and job.constraint_seconds > 0
    assert job.model_seconds + job.constraint_seconds <= wall  # two parts of the same time
    model, constraint = job.model_seconds, job.constraint_seconds
    completer.complete(job, "x = ", "\n", settings, 1)
    assert job.model_seconds > model and job.constraint_seconds > constraint  # summed over generations


# ---------------------------------------------------------------- pythonVersion


def _uri(path: Path) -> str:
    return path.resolve().as_uri()


def test_python_version_setting():
    from lsp_server.config import Settings, update

    assert Settings().python_version == "auto"
    settings, problems = update(Settings(), {"pythonVersion": "3.9"})
    assert settings.python_version == "3.9" and not problems
    assert update(settings, {"pythonVersion": "AUTO"})[0].python_version == "auto"
    for bad in ("3.7", "3.15", 3.1, "newest", None):
        kept, problems = update(settings, {"pythonVersion": bad})
        assert kept.python_version == "3.9" and problems and "3.8" in problems[0]


def test_engine_falls_back_to_a_newer_version(completer):
    """A document that does not parse at the version asked for, but does at the newest, is
    completed as the newest (never refused); one that parses keeps its version."""
    import time

    from lsp_server.completer import Job
    from lsp_server.config import Settings

    settings = Settings(max_tokens=4, multiline="never")
    prefix, suffix = "match command:\n    case 'go':\n        x = ", "\n"
    job = Job("u", time.monotonic() + 60, True, python_version=(3, 9), verify_text=prefix + suffix)
    for middle in completer.complete(job, prefix, suffix, settings, 1):
        ast.parse(prefix + middle + suffix)
    assert job.used_version == (3, 14)
    # no whole-document check, but the text before the cursor needs 3.12: the same
    prefix, suffix = "type Pair = tuple[int, int]\nx = ", "\n"
    job = Job("u", time.monotonic() + 60, True, python_version=(3, 11))
    completer.complete(job, prefix, suffix, settings, 1)
    assert job.used_version == (3, 14)
    job = Job("u", time.monotonic() + 60, True, python_version=(3, 9), verify_text="x = 1\ny = \n")
    completer.complete(job, "x = 1\ny = ", "\n", settings, 1)
    assert job.used_version == (3, 9)
    # broken at every version: nothing, and the version stays
    job = Job("u", time.monotonic() + 60, True, python_version=(3, 9), verify_text="x = 1)\ny = \n")
    assert completer.complete(job, "x = 1)\ny = ", "\n", settings, 1) == []
    assert job.used_version == (3, 9)


@pytest.mark.asyncio(loop_scope="module")
async def test_python_version_auto_from_pyproject_and_fallback(client: LanguageClient, tmp_path):
    """auto: the lower bound of requires-python; a file that needs newer syntax is completed as
    the newest, and the log and the status say so."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nrequires-python = ">=3.9,<4"\n')
    statuses = _statuses(client)
    plain = tmp_path / "plain.py"
    _open(client, _uri(plain), SOURCE)
    _assert_valid(SOURCE, CURSOR, await _complete(client, _uri(plain), CURSOR))
    await _wait_log(client, "plain.py: Python 3.9 (requires-python '>=3.9,<4'")
    assert any(s.get("pythonVersion") == "3.9" for s in statuses), statuses

    newer = tmp_path / "newer.py"
    text = "match command:\n    case 'go':\n        pass\n" + SOURCE
    position = types.Position(line=CURSOR.line + 3, character=CURSOR.character)
    _open(client, _uri(newer), text)
    _assert_valid(text, position, await _complete(client, _uri(newer), position))
    await _wait_log(client, "newer.py does not parse as Python 3.9")
    status = await _wait_status(client, "idle", "newer.py: Python 3.14 (it does not parse as 3.9)")
    assert status["pythonVersion"] == "3.14"

    # a version set in the settings is used as it is (and every document is checked again)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimconstrain": {"pythonVersion": "3.11"}})
    )
    await _wait_log(client, "'pythonVersion': '3.11'")
    _assert_valid(SOURCE, CURSOR, await _complete(client, _uri(plain), CURSOR))
    await _wait_log(client, "plain.py: Python 3.11 (setting pythonVersion)")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"fimconstrain": {"pythonVersion": "auto"}})
    )
    await _wait_log(client, "'pythonVersion': 'auto'")


@pytest.mark.asyncio(loop_scope="module")
async def test_the_command_line_gives_the_items_the_server_gives(
    client: LanguageClient, tiny_model, tmp_path
):
    """One policy: ``fimconstrain complete`` with the server's settings gives the item the server
    gives at the same cursor (the same version from requires-python, the same line-or-block
    choice, the same end of the middle and confidence gate), at a line and a block cursor."""
    import json
    import subprocess

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nrequires-python = ">=3.10"\n')
    text = (
        "def scale(values, k):\n    out = []\n    for v in values:\n        out.append(v * k)\n"
        "    \n    return out\n"
    )
    path, shown = tmp_path / "same.py", []
    path.write_text(text)
    _open(client, _uri(path), text)
    for line, character in ((1, 10), (4, 4)):  # "out = |[]" (one line), an empty line (a block)
        served = await _complete(client, _uri(path), types.Position(line=line, character=character))
        command = [sys.executable, "-m", "fimconstrain", "complete", str(path)]
        command += ["--cursor", f"{line + 1}:{character + 1}", "--model", str(tiny_model)]
        command += ["--max-new-tokens", str(MAX_TOKENS), "--finish-search", "--json"]
        run = subprocess.run(command, capture_output=True, text=True, env=SERVER_ENV, timeout=120)
        assert run.returncode in (0, 1), run.stderr
        record = json.loads(run.stdout)
        assert record["python_version"] == "3.10"
        assert [item.insert_text for item in served] == ([record["middle"]] if record["shown"] else [])
        shown.append(record["shown"])
    assert any(shown)  # (not only two empty answers)


def test_major_changes_check_the_document_again():
    from lsp_server.server import _major_change

    def edit(start: int, end: int, text: str):
        return types.TextDocumentContentChangePartial(
            range=types.Range(
                start=types.Position(line=start, character=0), end=types.Position(line=end, character=0)
            ),
            text=text,
        )

    assert not _major_change(edit(3, 3, "x"))  # typing
    assert not _major_change(edit(3, 4, "y = 2\n"))
    assert _major_change(types.TextDocumentContentChangeWholeDocument(text="x = 1\n"))
    assert _major_change(edit(3, 3, "x = 1\n" * 5))  # a paste
    assert _major_change(edit(3, 40, ""))  # a block deleted
