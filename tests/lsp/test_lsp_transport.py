"""The wire, from a raw client: the real server (``python -m lsp_server``) over stdio pipes and
over ``--tcp``, fed bytes that break the LSP framing. Each case then checks that a well-formed
request is still answered: a lowercase header, a Content-Length larger than the body (with the
next message sent at once, or only after it), one over the maximum, a header split across
reads, a body that is not JSON (-32700), a stream that ends inside a body, and requests after
``shutdown`` (-32600)."""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
import time
from typing import BinaryIO

import pytest
from conftest import REPO

READ_SECONDS = 15  # a hang fails the test instead of stalling the run
MAX_BYTES = 100_000  # the server's --max-message-bytes here

pytestmark = pytest.mark.time_limit(60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _connect(port: int) -> socket.socket:
    """A connection to the server's port, retried while the server starts."""
    deadline = time.monotonic() + READ_SECONDS
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=READ_SECONDS)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class RawClient:
    """The server as a subprocess; frames written as given, responses read by a thread."""

    def __init__(self, transport: str):
        args = [sys.executable, "-m", "lsp_server", "--max-message-bytes", str(MAX_BYTES)]
        port = _free_port()
        if transport == "tcp":
            args += ["--tcp", "--port", str(port)]
        pipe = subprocess.PIPE if transport == "stdio" else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdin=pipe, stdout=pipe, stderr=subprocess.PIPE, cwd=REPO)
        self.sock: socket.socket | None = None
        if transport == "tcp":
            self.sock = _connect(port)
            self.sock.settimeout(None)
            self.out: BinaryIO = self.sock.makefile("wb")
            self.input: BinaryIO = self.sock.makefile("rb")
        else:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.out, self.input = self.proc.stdin, self.proc.stdout
        self.messages: queue.Queue = queue.Queue()
        self.responses: dict = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        """Put each message the server sends on the queue, then None at the end of its output."""
        while (message := self._read_message()) is not None:
            self.messages.put(message)
        self.messages.put(None)

    def _read_message(self) -> dict | None:
        length = None
        while True:
            try:
                line = self.input.readline()
            except OSError:  # the socket was closed under the thread
                return None
            if not line:
                return None
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
            if line in (b"\r\n", b"\n") and length is not None:
                return json.loads(self.input.read(length))

    def send_raw(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    def send(self, message: dict, header: bytes = b"Content-Length") -> None:
        self.send_raw(frame(message, header))

    def end_input(self) -> None:
        """Close the server's input (the client is gone)."""
        if self.sock is not None:
            self.sock.shutdown(socket.SHUT_WR)
        else:
            self.out.close()

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
        self.proc.wait(timeout=30)
        if self.sock is not None:
            self.sock.close()
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")


def frame(message: dict, header: bytes = b"Content-Length") -> bytes:
    body = json.dumps(message).encode()
    return header + b": %d\r\n\r\n" % len(body) + body


def request(msg_id, method: str, params=None) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


INITIALIZE = request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})


@pytest.fixture(params=["stdio", "tcp"])
def client(request):
    c = RawClient(request.param)
    yield c
    c.close()


@pytest.fixture
def ready(client):
    """A client whose server has answered ``initialize``."""
    client.send(INITIALIZE)
    assert "capabilities" in client.response(1)["result"]
    return client


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


def test_a_content_length_larger_than_the_body_is_resynchronised(ready):
    body = json.dumps(probe(2)).encode()
    ready.send_raw(b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body)  # 40 bytes too many
    _still_answers(ready, 3)  # read from the header the long body ran into
    assert ready.response(2)["result"] == {"items": []}  # and the short body itself was whole JSON


def test_a_content_length_larger_than_the_body_does_not_wait_for_the_missing_bytes(ready):
    """The client sends the next request only after the bad one and waits for its answer:
    the server must not wait for bytes that never come."""
    body = json.dumps(probe(2)).encode()
    ready.send_raw(b"Content-Length: %d\r\n\r\n" % (len(body) + 50_000) + body)
    time.sleep(0.2)  # the server is now inside the long body
    _still_answers(ready, 3)


def test_a_content_length_over_the_maximum_is_skipped(ready):
    ready.send_raw(
        b"Content-Length: 999999999999\r\n\r\n" + b'{"jsonrpc": "2.0", "id": 2, "method": "shutdown"}\n'
    )
    _still_answers(ready, 3)
    assert ready.proc.poll() is None  # alive
    assert "over the maximum" in ready.close()


def test_a_skipped_body_without_line_breaks_resynchronises_at_the_next_header(ready):
    """The skipped body is read in bounded pieces; the header right after it is found even when
    a piece ends inside it."""
    oversized = b"x" * (MAX_BYTES + 1)
    for cut in (-6, 6):  # the header begins a few bytes before / after a 64 KiB piece ends
        pad = b"y" * (64 * 1024 - len(oversized) % (64 * 1024) + cut)
        ready.send_raw(b"Content-Length: %d\r\n\r\n" % len(oversized) + oversized + pad)
        _still_answers(ready, 10 + cut)


def test_a_body_that_is_not_json_gets_a_parse_error(ready):
    garbage = b"{this is not json"
    ready.send_raw(b"Content-Length: %d\r\n\r\n" % len(garbage) + garbage)
    error = ready.response(None)["error"]
    assert error["code"] == -32700
    _still_answers(ready, 2)


def test_a_stream_that_ends_inside_a_body_stops_the_server(ready):
    ready.send_raw(frame(probe(2))[:-10])
    ready.end_input()
    assert ready.proc.wait(timeout=READ_SECONDS) == 1  # no shutdown came: exit code 1, no hang


def test_every_request_after_shutdown_is_an_invalid_request(ready):
    ready.send(request(2, "shutdown"))
    assert ready.response(2)["result"] is None
    for msg_id, method in ((3, "textDocument/inlineCompletion"), (4, "shutdown"), (5, "initialize")):
        ready.send(request(msg_id, method, {}))
        assert ready.response(msg_id)["error"]["code"] == -32600, method
    ready.send({"jsonrpc": "2.0", "method": "exit"})
    assert ready.proc.wait(timeout=READ_SECONDS) == 0  # exit after shutdown: a clean stop
