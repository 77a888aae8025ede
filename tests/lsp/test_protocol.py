"""The pygls internals the server's protocol (lsp_server/protocol.py) relies on are still there
on the installed pygls: a pygls upgrade that moves them fails here, by name, before it fails a
request at run time."""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("pygls")

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol

from lsp_server.protocol import FimProtocol
from lsp_server.server import FimServer, create_server


def test_the_internals_it_reaches_are_there():
    server = FimServer()
    protocol = server.protocol
    assert isinstance(protocol, FimProtocol) and isinstance(protocol, LanguageServerProtocol)
    assert isinstance(protocol._shutdown, bool) and protocol.shut_down is False
    assert "error" in inspect.signature(LanguageServerProtocol._send_response).parameters
    features = protocol.fm.features
    assert isinstance(features, dict)
    # the handlers it hands document sync to are the server's, registered by method name
    created = create_server()
    synced = (types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE, types.TEXT_DOCUMENT_DID_CLOSE)
    for method in synced:
        assert callable(created.protocol.fm.features.get(method)), method
