"""An OpenAI-compatible completions server over a model backend of this package, for tests: it
answers as vLLM does (``naming="id"``: token-id prompts, tokens named ``token_id:N``), as
llama-cpp-python's server does (``naming="text"``: text prompts only, tokens named by their text,
the end token never written out), or tells no log-probabilities at all (``naming=None``).

Greedy under ``logit_bias``, which holds for every token of the request, and the log-probabilities
it tells are the model's own, before the bias (both servers' default); at most ``top`` of them.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from fimconstrain.decoding.runtimes.backend import ModelBackend


class OpenAIServer(ThreadingHTTPServer):
    """Serves ``backend`` on a free local port; ``pause`` seconds before each token; ``refuse``:
    the message every completion is refused with (HTTP 400). What it was sent, and whether a
    client hung up, are kept."""

    daemon_threads = True

    def __init__(self, backend: ModelBackend, naming: str | None = "id", top: int = 20, pause: float = 0.0):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.backend, self.naming, self.top, self.pause = backend, naming, top, pause
        self.refuse: str | None = None
        self.bodies: list[dict[str, Any]] = []
        self.hung_up = threading.Event()
        self.lock = threading.Lock()  # one generation at a time, as a server with one model slot
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()

    def name(self, token: int) -> str:
        if self.naming == "id":
            return f"token_id:{token}"
        return self.backend.tokenizer.decode([token]).replace("\ufffd", "")

    def tokens(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The completion's tokens as streamed choices: greedy under the bias, until a stop token
        (written out only when tokens are named by id) or ``max_tokens``."""
        prompt = body["prompt"]
        ids = (
            prompt
            if isinstance(prompt, list)
            else self.backend.tokenizer.encode(prompt, add_special_tokens=False)
        )
        bias = {int(token): float(value) for token, value in (body.get("logit_bias") or {}).items()}
        stops = self.backend.fim_format.stop_ids(self.backend.tokenizer)
        session = self.backend.start()
        logits = session.prefill(list(ids))
        choices = []
        for n in range(int(body["max_tokens"])):
            assert logits is not None
            logprobs = logits - np.logaddexp.reduce(logits.astype(np.float64))
            biased = logprobs.copy()
            for token, value in bias.items():
                biased[token] += value
            token = int(np.argmax(biased))
            last = n + 1 == int(body["max_tokens"])
            if token in stops and self.naming != "id":
                choices.append({"text": "", "finish_reason": "stop"})
                break
            choice: dict[str, Any] = {"text": self.backend.tokenizer.decode([token]), "finish_reason": None}
            if self.naming is not None and body.get("logprobs") is not None:
                top = np.argsort(-logprobs, kind="stable")[: min(self.top, int(body["logprobs"]))]
                choice["logprobs"] = {
                    "tokens": [self.name(token)],
                    "token_logprobs": [float(logprobs[token])],
                    "top_logprobs": [{self.name(int(t)): float(logprobs[t]) for t in top}],
                }
            if token in stops:
                choice["finish_reason"] = "stop"
            elif last:
                choice["finish_reason"] = "length"
            choices.append(choice)
            if token in stops:
                break
            logits = session.step(token)
        return choices


class _Handler(BaseHTTPRequestHandler):
    server: OpenAIServer

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        window = self.server.backend.context_window
        self._json(200, {"object": "list", "data": [{"id": "test-coder", "max_model_len": window}]})

    def do_POST(self) -> None:
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.bodies.append(body)
        if self.path == "/tokenize" and server.naming == "id":
            self._json(
                200, {"tokens": server.backend.tokenizer.encode(body["prompt"], add_special_tokens=False)}
            )
            return
        if self.path != "/v1/completions":
            self._json(404, {"detail": "Not Found"})
            return
        if server.naming != "id" and not isinstance(body["prompt"], str):
            self._json(500, {"message": "Input should be a valid string"})
            return
        if server.refuse and body.get("stream"):
            self._json(400, {"error": {"message": server.refuse}})
            return
        with server.lock:
            choices = server.tokens(body)
        if not body.get("stream"):
            merged: dict[str, Any] = {
                "text": "".join(c["text"] for c in choices),
                "finish_reason": choices[-1]["finish_reason"],
            }
            if "logprobs" in choices[0]:
                merged["logprobs"] = {
                    key: [v for c in choices if "logprobs" in c for v in c["logprobs"][key]]
                    for key in ("tokens", "token_logprobs", "top_logprobs")
                }
            self._json(200, {"choices": [merged]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            for choice in choices:
                time.sleep(server.pause)
                self.wfile.write(b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            server.hung_up.set()
