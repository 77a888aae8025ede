"""The editor's model-server backend (:mod:`fimconstrain.decoding.model_server`) against a small
OpenAI-compatible server written here, one without the fimconstrain plugin as llama.cpp's server
or a plain vLLM is: its middle is cut to the longest valid prefix (checked mode), one line ends at
its line, a stopped request closes its connection, and a server that is down, refuses or falls
silent is one :class:`ModelServerError`, never a hang.  The same backend against a real vLLM with
the plugin is in ``tests/serving/test_vllm_engine.py``."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fimconstrain.decoding.model_server import ModelServerError, ServerDecoder
from fimconstrain.decoding.options import Controls, DecodeOptions
from fimconstrain.decoding.result import StopReason

PREFIX, SUFFIX = "def f(a, b):\n    return ", "\n"
#: what the fake model writes, one streamed piece per token: valid up to "    return", then not
PIECES = [" a", " +", " b", "\n", "    return", " ((", " [", " {"]


class FakeServer(ThreadingHTTPServer):
    """``/v1/models`` and ``/v1/completions`` (streamed or not) of an OpenAI-compatible server
    that ignores ``vllm_xargs``; ``pause`` seconds before each piece; what it was sent and
    whether a client hung up are kept."""

    daemon_threads = True

    def __init__(self, pieces=PIECES, pause: float = 0.0, refuse: str | None = None):
        super().__init__(("127.0.0.1", 0), Handler)
        self.pieces, self.pause, self.refuse = pieces, pause, refuse
        self.bodies: list[dict] = []
        self.hung_up = threading.Event()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def log_message(self, *args) -> None:
        pass

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._json(200, {"object": "list", "data": [{"id": "fake-coder"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        if self.server.refuse and body.get("stream"):
            self._json(400, {"error": {"message": self.server.refuse}})
            return
        if not body.get("stream"):
            self._json(200, {"choices": [{"text": "x", "finish_reason": "length"}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            for i, piece in enumerate(self.server.pieces):
                time.sleep(self.server.pause)
                last = i == len(self.server.pieces) - 1
                choice = {
                    "text": piece,
                    "logprobs": {"token_logprobs": [-0.5]},
                    "finish_reason": "length" if last else None,
                }
                self.wfile.write(b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            self.server.hung_up.set()


@pytest.fixture
def fake():
    servers: list[FakeServer] = []

    def make(**kwargs) -> FakeServer:
        servers.append(FakeServer(**kwargs))
        return servers[-1]

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_server_without_the_plugin_is_checked(fake):
    server = fake()
    decoder = ServerDecoder(server.url, timeout=5)
    assert not decoder.constrains and decoder.info.model == "fake-coder"
    result = decoder.generate(PREFIX, SUFFIX, DecodeOptions(max_new_tokens=8))
    assert result.mode == "checked" and result.valid
    assert result.middle == " a + b\n    return" and result.raw_middle == "".join(PIECES)
    assert result.logprobs == [-0.5] * 5 and result.tokens == 5 and result.generated == len(PIECES)
    sent = server.bodies[-1]
    assert "vllm_xargs" not in sent and sent["stream"] and sent["max_tokens"] == 8
    assert sent["prompt"] == f"<fim_prefix>{PREFIX}<fim_suffix>{SUFFIX}<fim_middle>"


def test_one_line_ends_at_its_line(fake):
    decoder = ServerDecoder(fake().url, timeout=5)
    result = decoder.generate(PREFIX, SUFFIX, DecodeOptions(single_line=True))
    assert (result.middle, result.stopped, result.valid) == (" a + b", StopReason.LINE, True)


def test_a_stopped_request_hangs_up_at_once(fake):
    server = fake(pieces=PIECES * 20, pause=0.1)
    decoder = ServerDecoder(server.url, timeout=5)
    start = time.monotonic()
    result = decoder.generate(
        PREFIX, SUFFIX, controls=Controls(should_stop=lambda: time.monotonic() - start > 0.35)
    )
    assert result.stopped == StopReason.CANCELLED and result.generated < len(PIECES) * 20
    assert server.hung_up.wait(3), "the server never saw the connection close"


def test_a_server_that_is_down_refuses_or_falls_silent_is_one_error(fake):
    server = fake()
    url = server.url
    server.shutdown()
    server.server_close()
    with pytest.raises(ModelServerError, match="cannot be reached"):
        ServerDecoder(url, timeout=2)
    with pytest.raises(ModelServerError, match=r"^model server http://\S+: HTTP 400: prompt too long$"):
        ServerDecoder(fake(refuse="prompt too long").url, timeout=2).generate(PREFIX, SUFFIX)
    silent = ServerDecoder(fake(pause=3.0).url, timeout=0.5)
    with pytest.raises(ModelServerError, match="stopped answering"):
        silent.generate(PREFIX, SUFFIX)
    with pytest.raises(ModelServerError, match="does not serve"):
        ServerDecoder(fake().url, model="other", timeout=2)


def test_the_language_servers_engine_says_once_that_the_server_is_gone(fake):
    """The language server's engine on a model server: items while it answers; when it stops
    answering, no items and one message in ``server_error`` (the status), cleared when it is back."""
    pytest.importorskip("pygls")
    from lsp_server.config import Settings
    from lsp_server.engine import Engine, Job

    server = fake()
    settings = Settings(server=server.url, finish_search=False, semantic=False)
    engine = Engine()
    loaded = engine.load(settings)
    assert loaded.name == f"fake-coder at {server.url}" and loaded.fim_format == "starcoder"

    def complete() -> list[str]:
        return engine.complete(Job("file:///a.py", time.monotonic() + 10, True), PREFIX, SUFFIX, settings, 1)

    assert complete() == [" a + b"] and engine.server_error is None
    server.refuse = "the model is reloading"
    assert complete() == [] and "the model is reloading" in (engine.server_error or "")
    server.refuse = None
    assert complete() == [" a + b"] and engine.server_error is None
