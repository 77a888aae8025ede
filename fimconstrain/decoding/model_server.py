"""A model server as the editor's model: the FIM prompt and the constraint's arguments go to an
OpenAI-compatible ``/v1/completions`` endpoint, and the middle comes back as a :class:`.result.FimResult`.

A vLLM server with this package installed constrains the middle itself (its plugin reads
``vllm_xargs``: docs/serving.md); whether a server does is asked once, when it is connected
(:func:`server_constrains`).  Against a server without the plugin (llama.cpp's server, another
vLLM) the middle is generated unconstrained and cut here to its longest valid prefix: the
``checked`` mode of paper 004 §VII-B, which the result's ``mode`` says.  The answer streams in:
each piece is read on by the FIM checker (:func:`~fimconstrain.engine.checker.fim_checker`), so
a one-line middle ends as soon as its line has, and a request that is stopped from outside closes
its HTTP connection (the server then aborts it).  A server that cannot be reached, refuses the
request or stays silent past the timeout is one :class:`ModelServerError`.

:class:`ServerDecoder` has the decode loop's ``generate`` (:meth:`.generate.FimDecoder.generate`),
so the editor's policy (:func:`.editor.complete_at_cursor`) runs on it unchanged.
"""

from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..engine.checker import fim_checker
from ..engine.versions import NEWEST, PythonVersion, format_version, parse_python_version
from .constraint import is_word_char
from .fim_formats import FimFormat, get_format
from .options import Controls, DecodeOptions
from .result import FimResult, StopReason

#: seconds a request may wait for the server's next piece before it is given up
DEFAULT_TIMEOUT = 10.0
#: the window assumed when the server does not say its own (tokens)
DEFAULT_WINDOW = 4096
#: characters of prompt per token of the window: code runs 2.5-4 characters a token, so the
#: prompt fits the window with room to spare (the constraint reads the whole file regardless)
CHARS_PER_TOKEN = 2
#: the FIM format unless told: the StarCoder family's (the shipped model's too)
SERVER_FORMAT = "starcoder"
#: how often a waiting request polls its stop flag (seconds)
POLL_SECONDS = 0.05


class ModelServerError(ConnectionError):
    """The model server could not be reached, refused the request or stopped answering (not a
    :class:`~fimconstrain.engine.errors.FimConstrainError`: nothing about the text is wrong, so the
    editor's policy does not try another Python version)."""


@dataclass(frozen=True)
class ServerInfo:
    """What the server says of itself: the model's name and window, and whether it constrains."""

    model: str
    window: int
    constrains: bool


def _post(url: str, body: dict[str, Any], timeout: float) -> Any:
    """The response to a JSON POST (open: the caller reads and closes it)."""
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=timeout)


def _refusal(error: urllib.error.HTTPError) -> str:
    """The server's own message in a refused request's body (OpenAI's error shape), else its status."""
    try:
        payload = error.read()
    except OSError:
        payload = b""
    return _refusal_of(error.code, str(error.reason), payload)


def _refusal_of(status: int, reason: str, payload: bytes) -> str:
    try:
        body = json.loads(payload.decode("utf-8", "replace"))
        message = body.get("error", {}).get("message") or body.get("message")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {status}: {message or reason}"


def server_info(url: str, model: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> ServerInfo:
    """Ask the server at ``url`` for its model (``model``, else the first it serves), the model's
    window and whether it runs this package's plugin; raises :class:`ModelServerError`."""
    base = url.rstrip("/")
    try:
        with urllib.request.urlopen(f"{base}/v1/models", timeout=timeout) as answer:
            listed = json.load(answer).get("data", [])
    except urllib.error.HTTPError as error:
        raise ModelServerError(f"model server {base}: {_refusal(error)}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise ModelServerError(f"model server {base} cannot be reached: {_reason(error)}") from None
    names = [entry.get("id") for entry in listed]
    if model is None:
        if not names:
            raise ModelServerError(f"model server {base} serves no model")
        model = str(names[0])
    elif names and model not in names:
        raise ModelServerError(f"model server {base} does not serve {model!r} (it serves {', '.join(names)})")
    entry: dict[str, Any] = next((e for e in listed if e.get("id") == model), {})
    window = int(entry.get("max_model_len") or DEFAULT_WINDOW)
    return ServerInfo(model, window, server_constrains(base, model, timeout))


def server_constrains(url: str, model: str, timeout: float = DEFAULT_TIMEOUT) -> bool:
    """Whether the server runs this package's vLLM plugin: it refuses a FIM argument out of range
    at admission (HTTP 400 naming it), where a server without it ignores the argument."""
    probe = {"model": model, "prompt": "x", "max_tokens": 1, "vllm_xargs": {"fim_prefix": "", "fim_top_k": 0}}
    try:
        with _post(f"{url}/v1/completions", probe, timeout) as answer:
            answer.read()
        return False
    except urllib.error.HTTPError as error:
        if error.code == 400 and "fim_top_k" in _refusal(error):
            return True
        raise ModelServerError(f"model server {url}: {_refusal(error)}") from None
    except (urllib.error.URLError, OSError) as error:
        raise ModelServerError(f"model server {url} cannot be reached: {_reason(error)}") from None


def _reason(error: BaseException) -> str:
    if isinstance(error, urllib.error.URLError) and error.reason is not None:
        return str(error.reason)
    return str(error) or type(error).__name__


def fim_prompt(fim_format: FimFormat, prefix: str, suffix: str, window: int, budget: int) -> str:
    """The FIM prompt as text (the server's tokenizer reads the markers as its special tokens),
    with as much of the text around the cursor as ``window - budget`` tokens leave room for:
    three quarters before the cursor, a quarter after."""
    room = max(64, (window - budget) * CHARS_PER_TOKEN)
    after = min(len(suffix), room // 4)
    before = room - after
    parts = {"prefix": prefix[-before:] if before else "", "suffix": suffix[:after]}
    layout = fim_format.layouts["psm"]
    return "".join(parts[p] if p in parts else fim_format.markers[p][-1].lstrip("▁") for p in layout)


class _Stream:
    """A streamed completion (server-sent events) read on a thread of its own, so that the caller
    polls its stop flag while the server is silent, and :meth:`close` shuts the connection down
    (which wakes the reader, and makes the server abort the request)."""

    def __init__(self, url: str, body: dict[str, Any], timeout: float):
        parts = urllib.parse.urlsplit(url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self.connection = kind(parts.netloc, timeout=timeout)
        self.connection.connect()
        self.socket = self.connection.sock  # kept: http.client drops it when the server will close
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        self.connection.request("POST", parts.path, json.dumps(body), headers)
        self.response = self.connection.getresponse()
        if self.response.status != 200:
            payload = self.response.read()
            self.connection.close()
            refusal = _refusal_of(self.response.status, self.response.reason, payload)
            raise ModelServerError(f"model server {url.rsplit('/v1/', 1)[0]}: {refusal}")
        self.pieces: queue.Queue[dict[str, Any] | BaseException | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.response:
                if line.startswith(b"data: "):
                    data = line[6:].strip()
                    if data == b"[DONE]":
                        break
                    self.pieces.put(json.loads(data))
        except BaseException as error:
            self.pieces.put(error)
        self.pieces.put(None)

    def close(self) -> None:
        try:
            self.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the server
        self.response.close()
        self.connection.close()


class ServerDecoder:
    """Middles from a model server, with the decode loop's ``generate`` (see the module).

    ``url`` is the server's base URL (``http://host:port``); ``model`` its model (None: the first
    it serves); ``fim_format`` the model's FIM prompt format; ``timeout`` the seconds a request
    may wait for the server's next piece."""

    runtime = "server"

    def __init__(
        self,
        url: str,
        model: str | None = None,
        fim_format: str = SERVER_FORMAT,
        timeout: float = DEFAULT_TIMEOUT,
        python_version: PythonVersion | str | None = None,
    ):
        self.url, self.timeout = url.rstrip("/"), timeout
        self.fim_format = get_format(fim_format)
        self.python_version = parse_python_version(python_version) if python_version else NEWEST
        self.info = server_info(self.url, model, timeout)
        self.name = f"{self.info.model} at {self.url}"

    @property
    def constrains(self) -> bool:
        """Whether the server constrains the middle (else it is checked here)."""
        return self.info.constrains

    def generate(
        self,
        prefix: str,
        suffix: str,
        options: DecodeOptions | None = None,
        controls: Controls | None = None,
        **changes: Any,
    ) -> FimResult:
        """The middle between ``prefix`` and ``suffix`` from the server (``options`` as for
        :meth:`.generate.FimDecoder.generate`; the budget, sampling, one line, the version and
        the mode are read, the rest is the server's): constrained there when it can, else cut
        here to the longest valid prefix. Raises :class:`ModelServerError`, and the engine's
        error when no middle can join ``prefix`` and ``suffix``."""
        options = replace(options or DecodeOptions(), **changes) if changes else options or DecodeOptions()
        controls = controls or Controls()
        version = options.python_version or self.python_version
        start = time.perf_counter()
        checker = fim_checker(prefix, suffix, python_version=version)
        setup = time.perf_counter() - start
        mode = options.mode if options.mode in ("unconstrained", "checked") else "constrained"
        if mode == "constrained" and not self.constrains:
            mode = "checked"
        body: dict[str, Any] = {
            "model": self.info.model,
            "prompt": fim_prompt(self.fim_format, prefix, suffix, self.info.window, options.max_new_tokens),
            "max_tokens": options.max_new_tokens,
            "temperature": options.temperature,
            "top_p": options.top_p,
            "stream": True,
            "logprobs": 0,
            "stop": [s.lstrip("▁") for s in self.fim_format.stops],
            "skip_special_tokens": False,
        }
        if options.seed is not None:
            body["seed"] = options.seed
        if mode == "constrained":
            body["vllm_xargs"] = {
                "fim_prefix": prefix,
                "fim_suffix": suffix,
                "fim_python_version": format_version(version),
                "fim_top_k": options.top_k,
            }
        result = FimResult("", mode, False, StopReason.BUDGET, 0, 0, setup_seconds=setup)
        text, logprobs = "", list[float]()
        marks: list[tuple[int, int]] = []  # (where a piece starts in the text, its log-probabilities so far)
        valid_ends = [0] if checker.is_complete() else []  # where the middle could end validly
        state = None if mode == "unconstrained" else checker
        fuses = bool(suffix) and is_word_char(suffix[0])
        start = time.perf_counter()
        for piece, token_logprobs, finish in self._stream(body, controls):
            if piece is None:
                result.stopped = StopReason.CANCELLED
                break
            marks.append((len(text), len(logprobs) + len(token_logprobs)))
            text += piece
            logprobs.extend(token_logprobs)
            if state is not None and piece:
                state = state.feed(piece)
                if state is not None and state.is_complete() and not (fuses and is_word_char(text[-1])):
                    valid_ends.append(len(text))
            if finish is not None:
                result.stopped = StopReason.EOS if finish == "stop" else StopReason.BUDGET
            if options.single_line and _line_ended(text):
                result.stopped = StopReason.LINE
                text = text[: text.index("\n", len(text) - len(text.lstrip("\n")))]
                break
        result.model_seconds = time.perf_counter() - start
        result.generated = result.steps = len(logprobs)
        middle = text
        after = checker.feed(text)
        result.valid = after is not None and after.is_complete()
        if not result.valid and mode != "unconstrained":
            cuts = [end for end in valid_ends if end <= len(text)]
            if cuts:
                result.raw_middle, middle, result.valid = text, text[: cuts[-1]], True
        result.middle = middle
        result.logprobs = logprobs[: max((n for begin, n in marks if begin < len(middle)), default=0)]
        result.tokens = len(result.logprobs)
        return result

    def _stream(
        self, body: dict[str, Any], controls: Controls
    ) -> Iterator[tuple[str | None, list[float], Any]]:
        """``(text, its tokens' log-probabilities, finish reason)`` per streamed piece, then
        ``(None, [], None)`` if ``controls`` stopped it (the connection is closed then)."""
        try:
            stream = _Stream(f"{self.url}/v1/completions", body, self.timeout)
        except ModelServerError:
            raise  # refused: the server's own message
        except (http.client.HTTPException, OSError) as error:
            raise ModelServerError(f"model server {self.url} cannot be reached: {_reason(error)}") from None
        try:
            while True:
                if controls.should_stop is not None and controls.should_stop():
                    yield None, [], None
                    return
                try:
                    chunk = stream.pieces.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    continue
                if chunk is None:
                    return
                if isinstance(chunk, BaseException):
                    raise ModelServerError(f"model server {self.url} stopped answering: {_reason(chunk)}")
                for choice in chunk.get("choices", []):
                    scores = (choice.get("logprobs") or {}).get("token_logprobs") or []
                    yield (
                        choice.get("text", ""),
                        [float(s) for s in scores if s is not None],
                        choice.get("finish_reason"),
                    )
        finally:
            stream.close()


def _line_ended(text: str) -> bool:
    """Whether a one-line middle has ended: a line break after some code on its line."""
    return "\n" in text.lstrip("\n") and bool(text.lstrip("\n").split("\n", 1)[0].strip())
