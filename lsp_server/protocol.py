"""The server's protocol: pygls' LSP protocol with the changes this server needs, and the one
module that touches pygls' internals (``_send_response``, ``_shutdown``, the feature manager's
``features``), so that a pygls upgrade that moves them breaks here and in its test
(tests/lsp/test_protocol.py), nowhere else."""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from .documents import UTF8, encoding_name

log = logging.getLogger("lsp_server")


class _BadRequest:
    """A request whose params could not be read: answered with InvalidParams instead of dropped."""

    def __init__(self, msg_id, method: str, error: Exception):
        self.id, self.method, self.error = msg_id, method, error


class FimProtocol(LanguageServerProtocol):
    """pygls' protocol with these changes: UTF-8 positions whenever the client offers them, an
    InvalidParams answer for malformed requests, a ParseError answer for a body that is not
    JSON, an InvalidRequest answer for every request after ``shutdown``, and document sync that
    a bad edit cannot break."""

    @property
    def shut_down(self) -> bool:
        """Whether the client has asked the server to shut down (an exit then ends it cleanly)."""
        return self._shutdown

    def reply_parse_error(self, error: Exception) -> None:
        """Answer a message whose body is not JSON (JSON-RPC: error -32700, id null)."""
        log.warning("a message that is not JSON was answered with a parse error: %s", error)
        self._send_response(
            None,  # type: ignore[arg-type]  # JSON-RPC answers an unreadable request with id null
            error=types.ResponseError(code=types.ErrorCodes.ParseError, message=f"parse error: {error}"),
        )

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        general = params.capabilities.general if params.capabilities else None
        offered = list(general.position_encodings or []) if general else []
        if types.PositionEncodingKind.Utf8 in offered or "utf-8" in offered:
            assert general is not None  # offered is empty without it
            general.position_encodings = [types.PositionEncodingKind.Utf8] + [
                e for e in offered if encoding_name(e) != UTF8
            ]
        return (yield from super().lsp_initialize(params))

    # Documents live in the server's own store (lsp_server/documents.py), not in pygls'
    # workspace too: a second copy doubled the memory of a large document and re-split its
    # lines on every edit, on the event loop.

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if isinstance(data, dict) and "jsonrpc" in data and "id" in data and "method" in data:
                return _BadRequest(data["id"], str(data["method"]), error)
            raise

    def handle_message(self, message):
        method, msg_id = getattr(message, "method", None), getattr(message, "id", None)
        if self._shutdown and method not in (None, types.EXIT) and msg_id is not None:
            self._send_response(
                msg_id,
                error=types.ResponseError(
                    code=types.ErrorCodes.InvalidRequest, message=f"{method} after shutdown"
                ),
            )
            return
        if isinstance(message, _BadRequest):
            log.warning(
                "malformed %s request (id %s): its params do not match the protocol",
                message.method,
                message.id,
            )
            self._send_response(
                message.id,
                error=types.ResponseError(
                    code=JsonRpcInvalidParams.CODE,
                    message=f"invalid params for {message.method}: they do not match the LSP schema",
                ),
            )
            return
        super().handle_message(message)
