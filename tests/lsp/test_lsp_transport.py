"""The wire, from a raw client: the real server (``python -m lsp_server``) over stdio pipes, fed
bytes that break the LSP framing. Each case then checks that a well-formed request is still
answered: a lowercase header, a Content-Length larger than the body, one over the maximum,
a body that is not JSON (-32700), and requests after ``shutdown`` (-32600)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading

import pytest
from conftest import REPO

READ_SECONDS = 60  # a hang fails the test instead of stalling the run


class RawClient:
    """The server as a subprocess; frames written as given, responses read by a thread."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lsp_server", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        self.messages: queue.Queue = queue.Queue()
        self.responses: dict = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.messages.put(None)
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                if line in (b"\r\n", b"\n") and length is not None:
                    break
            self.messages.put(json.loads(out.read(length)))

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict, header: bytes = b"Content-Length") -> None:
        body = json.dumps(message).encode()
        self.send_raw(header + b": %d\r\n\r\n" % len(body) + body)

    def response(self, msg_id) -> dict:
        """The response to ``msg_id`` (notifications skipped, other responses kept for later)."""
        while msg_id not in self.responses:
            message = self.messages.get(timeout=READ_SECONDS)
            assert message is not None, "the server closed the connection"
            if "method" not in message:
                self.responses[message.get("id")] = message
        return self.responses.pop(msg_id)

    def close(self) -> str:
        """Stop the server; its stderr."""
        self.proc.kill()
        _, err = self.proc.communicate(timeout=30)
        return err.decode("utf-8", "replace")


def request(msg_id, method: str, params=None) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


INITIALIZE = request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})


@pytest.fixture
def client():
    c = RawClient("--max-message-bytes", "100000")
    yield c
    c.close()


def probe(msg_id: int) -> dict:
    """A request the server answers without a model: completions for a document never opened."""
    params = {
        "textDocument": {"uri": "file:///never-opened.py"},
        "position": {"line": 0, "character": 0},
        "context": {"triggerKind": 1},
    }
    return request(msg_id, "textDocument/inlineCompletion", params)


def _still_answers(client: RawClient, msg_id: int) -> None:
    """A well-formed request after the damage gets its answer."""
    client.send(probe(msg_id))
    assert client.response(msg_id)["result"] == {"items": []}


def test_a_lowercase_header_is_read(client):
    client.send(INITIALIZE, header=b"content-length")
    assert "capabilities" in client.response(1)["result"]
    client.send(request(2, "shutdown"), header=b"CONTENT-LENGTH")
    assert client.response(2)["result"] is None


def test_a_content_length_larger_than_the_body_is_resynchronised(client):
    client.send(INITIALIZE)
    client.response(1)
    body = json.dumps(probe(2)).encode()
    client.send_raw(b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body)  # 40 bytes too many
    _still_answers(client, 3)  # read from the header the long body ran into
    assert client.response(2)["result"] == {"items": []}  # and the short body itself was whole JSON


def test_a_content_length_over_the_maximum_is_skipped(client):
    client.send(INITIALIZE)
    client.response(1)
    client.send_raw(
        b"Content-Length: 999999999999\r\n\r\n" + b'{"jsonrpc": "2.0", "id": 2, "method": "shutdown"}\n'
    )
    _still_answers(client, 3)
    assert client.proc.poll() is None  # alive
    assert "over the maximum" in client.close()


def test_a_body_that_is_not_json_gets_a_parse_error(client):
    client.send(INITIALIZE)
    client.response(1)
    garbage = b"{this is not json"
    client.send_raw(b"Content-Length: %d\r\n\r\n" % len(garbage) + garbage)
    error = client.response(None)["error"]
    assert error["code"] == -32700
    _still_answers(client, 2)


def test_every_request_after_shutdown_is_an_invalid_request(client):
    client.send(INITIALIZE)
    client.response(1)
    client.send(request(2, "shutdown"))
    assert client.response(2)["result"] is None
    for msg_id, method in ((3, "textDocument/inlineCompletion"), (4, "shutdown"), (5, "initialize")):
        client.send(request(msg_id, method, {}))
        assert client.response(msg_id)["error"]["code"] == -32600, method
    client.send({"jsonrpc": "2.0", "method": "exit"})
    assert client.proc.wait(timeout=READ_SECONDS) == 0  # exit after shutdown: a clean stop
