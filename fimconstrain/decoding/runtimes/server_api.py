"""The wire to a model server: OpenAI's ``/v1/completions``, read as tokens with their likeliest
alternatives.

What servers differ in is found out once, when one is connected (:func:`connect`): whether it
takes the prompt as token ids and names tokens by id (vLLM, ``return_tokens_as_token_ids``) or
only as text (llama-cpp-python's server: its tokens are then mapped back to ids through the
local tokenizer, :class:`TokenNames`); whether it tells log-probabilities at all; whether it runs
this package's vLLM plugin (which constrains the middle itself, docs/serving.md); its window. A
completion streams in (:class:`CompletionStream`) on a thread of its own, so that the caller can stop
waiting at once and closing it makes the server abort the request. A server that cannot be
reached, refuses or stays silent past the timeout is one :class:`ModelServerError`.
"""

from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..tokens.fim_formats import TextCodec

#: seconds a request may wait for the server's next piece before it is given up
DEFAULT_TIMEOUT = 10.0
#: the window assumed when the server does not say its own (tokens): llama-cpp-python's default
DEFAULT_WINDOW = 2048
#: alternatives asked for at each position: vLLM's default ceiling (``max_logprobs``)
ALTERNATIVES = 20
#: how often a waiting reader polls its stop flag (seconds)
POLL_SECONDS = 0.05
#: the prefix vLLM gives a token named by its id
ID_PREFIX = "token_id:"
#: a text both tokenizers read the same way only if they are the same tokenizer
TOKENIZER_PROBE = "def f(x):\n    return {'a': x} # ok\n"


class ModelServerError(ConnectionError):
    """The model server could not be reached, refused the request or stopped answering (not a
    :class:`~fimconstrain.engine.errors.FimConstrainError`: nothing about the text is wrong, so the
    editor's policy does not try another Python version)."""


@dataclass(frozen=True)
class ServerInfo:
    """What a server is and can do: its model and window; whether it takes and names tokens by
    id; whether it tells log-probabilities, and which; whether it constrains (this package's vLLM
    plugin)."""

    url: str
    model: str
    window: int
    by_id: bool
    tells: bool
    constrains: bool
    #: the log-probabilities it tells are the model's own under a ``logit_bias`` too (vLLM's);
    #: llama-cpp-python tells those of the biased logits
    raw: bool = True


@dataclass
class Told:
    """One token the server wrote: its id (None when its text names no single token) and
    log-probability (None: not asked for), and the log-probabilities of the likeliest tokens
    there, by id."""

    token: int | None
    logprob: float | None = None
    alternatives: dict[int, float] = field(default_factory=dict)


class TokenNames:
    """Ids of tokens a server names by their text (as it decodes a lone token: UTF-8, broken
    bytes dropped): each text's one token whose bytes are whole UTF-8, else its one token at all.
    A token cut inside a character (``b" \\xe2"``, read `` ``) is thus never taken for the
    whole one (`` ``); a text no single token owns names none."""

    def __init__(self, pieces: Sequence[bytes | None]):
        whole: dict[str, int | None] = {}
        broken: dict[str, int | None] = {}
        for token, piece in enumerate(pieces):
            if piece is None:
                continue
            try:
                text, owners = piece.decode("utf-8"), whole
            except UnicodeDecodeError:
                text, owners = piece.decode("utf-8", "ignore"), broken
            owners[text] = None if text in owners else token
        self.ids = {text: token for text, token in broken.items() if token is not None and text not in whole}
        self.ids.update((text, token) for text, token in whole.items() if token is not None)

    def __call__(self, text: str) -> int | None:
        return self.ids.get(text)


def _post(url: str, body: dict[str, Any], timeout: float) -> Any:
    """The JSON answer to a JSON POST; raises ``urllib.error.HTTPError`` on a refusal."""
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.load(answer)


def _refusal(error: urllib.error.HTTPError) -> str:
    """The server's own message in a refused request's body (OpenAI's error shape), else its status."""
    try:
        payload = error.read()
    except OSError:
        payload = b""
    return refusal_of(error.code, str(error.reason), payload)


def refusal_of(status: int, reason: str, payload: bytes) -> str:
    """``HTTP <status>: <the server's message>`` from a refusal's body, else its reason phrase."""
    try:
        body = json.loads(payload.decode("utf-8", "replace"))
        message = body.get("error", {}).get("message") or body.get("message") or body.get("detail")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {status}: {message or reason}"


def reason(error: BaseException) -> str:
    """What went wrong with a connection, in the words of the error underneath."""
    if isinstance(error, urllib.error.URLError) and error.reason is not None:
        return str(error.reason)
    return str(error) or type(error).__name__


def connect(
    url: str, codec: TextCodec, model: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> ServerInfo:
    """Ask the server at ``url`` what it serves (``model``, else the first) and what it can do,
    and check that it reads text as ``codec``'s tokenizer does where it can tell (raises
    :class:`ModelServerError`, naming the fix, when it does not)."""
    base = url.rstrip("/")
    try:
        with urllib.request.urlopen(f"{base}/v1/models", timeout=timeout) as answer:
            listed = json.load(answer).get("data", [])
    except urllib.error.HTTPError as error:
        raise ModelServerError(f"model server {base}: {_refusal(error)}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise ModelServerError(f"model server {base} cannot be reached: {reason(error)}") from None
    names = [entry.get("id") for entry in listed]
    if model is None:
        if not names:
            raise ModelServerError(f"model server {base} serves no model")
        model = str(names[0])
    elif names and model not in names:
        raise ModelServerError(f"model server {base} does not serve {model!r} (it serves {', '.join(names)})")
    entry: dict[str, Any] = next((e for e in listed if e.get("id") == model), {})
    window = int(entry.get("max_model_len") or DEFAULT_WINDOW)
    _check_tokenizer(base, model, codec, timeout)
    try:
        by_id, tells = _reading(base, model, codec, timeout)
        raw = _raw_under_bias(base, model, codec, by_id, timeout) if tells else True
        constrains = _constrains(base, model, timeout)
    except ModelServerError:
        raise
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise ModelServerError(f"model server {base} cannot be reached: {reason(error)}") from None
    return ServerInfo(base, model, window, by_id, tells, constrains, raw)


def _reading(url: str, model: str, codec: TextCodec, timeout: float) -> tuple[bool, bool]:
    """Whether the server takes token ids and names tokens by id, and whether it tells
    log-probabilities: one token asked for with ids (a server that takes only text refuses it:
    llama-cpp-python with HTTP 500), else with text."""
    asked = {"model": model, "max_tokens": 1, "temperature": 0, "logprobs": 2}
    try:
        answer = _post(
            f"{url}/v1/completions",
            {**asked, "prompt": codec.encode("x = 1"), "return_tokens_as_token_ids": True},
            timeout,
        )
        logprobs = answer["choices"][0].get("logprobs") or {}
        tokens = logprobs.get("tokens") or []
        if tokens and all(str(t).startswith(ID_PREFIX) for t in tokens):
            return True, bool(logprobs.get("top_logprobs"))
    except urllib.error.HTTPError:
        pass  # (the text prompt below says what is wrong, if anything)
    try:
        answer = _post(f"{url}/v1/completions", {**asked, "prompt": "x = 1"}, timeout)
    except urllib.error.HTTPError as error:
        raise ModelServerError(f"model server {url}: {_refusal(error)}") from None
    logprobs = answer["choices"][0].get("logprobs") or {}
    return False, bool(logprobs.get("top_logprobs"))


def _raw_under_bias(url: str, model: str, codec: TextCodec, by_id: bool, timeout: float) -> bool:
    """Whether the log-probability told of a token favoured by ``logit_bias`` is the model's own
    (an unlikely token stays unlikely) rather than the biased one (close to 0)."""
    unlikely = codec.encode(" zqzq")[0]
    prompt: Any = codec.encode("x = 1") if by_id else "x = 1"
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "logprobs": 1}
    body.update(logit_bias={str(unlikely): 100}, return_tokens_as_token_ids=by_id)
    try:
        logprobs = _post(f"{url}/v1/completions", body, timeout)["choices"][0].get("logprobs") or {}
    except urllib.error.HTTPError as error:
        raise ModelServerError(f"model server {url}: {_refusal(error)}") from None
    told = (logprobs.get("token_logprobs") or [None])[0]
    return told is None or float(told) < -1.0


def _constrains(url: str, model: str, timeout: float) -> bool:
    """Whether the server runs this package's vLLM plugin: it refuses a FIM argument out of range
    at admission (HTTP 400 naming it), where a server without it ignores the argument."""
    probe = {"model": model, "prompt": "x", "max_tokens": 1, "vllm_xargs": {"fim_prefix": "", "fim_top_k": 0}}
    try:
        _post(f"{url}/v1/completions", probe, timeout)
        return False
    except urllib.error.HTTPError as error:
        if error.code == 400 and "fim_top_k" in _refusal(error):
            return True
        raise ModelServerError(f"model server {url}: {_refusal(error)}") from None


def _check_tokenizer(url: str, model: str, codec: TextCodec, timeout: float) -> None:
    """Compare the server's tokens of :data:`TOKENIZER_PROBE` with the local tokenizer's, where
    the server says them (vLLM's ``/tokenize``, llama-cpp-python's ``/extras/tokenize``)."""
    asks = (
        ("/tokenize", {"model": model, "prompt": TOKENIZER_PROBE, "add_special_tokens": False}),
        ("/extras/tokenize", {"input": TOKENIZER_PROBE}),
    )
    for path, body in asks:
        try:
            theirs = _post(f"{url}{path}", body, timeout).get("tokens")
        except (urllib.error.URLError, OSError, ValueError):
            continue
        ours = codec.encode(TOKENIZER_PROBE)
        bos = codec.tokenizer.bos_token_id
        if theirs and bos is not None and theirs[0] == bos and ours[:1] != [bos]:
            theirs = theirs[1:]
        if theirs is not None and theirs != ours:
            raise ModelServerError(
                f"model server {url}: {model!r} does not read text as the local tokenizer does "
                f"({theirs[:8]} against {ours[:8]}): name the server's model here (--model) so "
                f"that its tokenizer is read"
            )
        return


class CompletionStream:
    """A streamed completion (server-sent events) read on a thread of its own: :meth:`next`
    gives its tokens one at a time, :meth:`close` shuts the connection (the server then aborts
    the request). ``names`` maps a token's text to its id where the server names tokens by text.
    Where it tells no tokens (no ``logprobs`` asked, or none told), each streamed piece is one
    token where its text names one (llama-cpp-python streams a token a piece); other text is
    read with ``codec`` once a named piece or the end follows it."""

    def __init__(
        self,
        info: ServerInfo,
        body: dict[str, Any],
        timeout: float,
        codec: TextCodec,
        names: Callable[[str], int | None] | None = None,
    ):
        self.info, self.timeout, self.codec, self.names = info, timeout, codec, names
        #: text told without tokens that names no one token, not read into tokens yet
        self.text = ""
        parts = urllib.parse.urlsplit(info.url)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        try:
            self.connection = kind(parts.netloc, timeout=timeout)
            self.connection.connect()
            self.socket = self.connection.sock  # kept: http.client drops it when the server will close
            headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
            self.connection.request(
                "POST", f"{parts.path}/v1/completions", json.dumps({**body, "stream": True}), headers
            )
            self.response = self.connection.getresponse()
        except (http.client.HTTPException, OSError) as error:
            raise ModelServerError(f"model server {info.url} cannot be reached: {reason(error)}") from None
        if self.response.status != 200:
            payload = self.response.read()
            self.connection.close()
            refusal = refusal_of(self.response.status, self.response.reason, payload)
            raise ModelServerError(f"model server {info.url}: {refusal}")
        self.pieces: queue.Queue[dict[str, Any] | BaseException | None] = queue.Queue()
        self.waiting: list[Told] = []
        #: why the server ended the completion ("stop", "length"), once it has, and the stop
        #: token of ``stop_token_ids`` it ended at (vLLM's ``stop_reason``; None: another end)
        self.finish: str | None = None
        self.stop_reason: int | str | None = None
        self.ended = False
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

    def next(self, should_stop: Callable[[], bool] | None = None) -> Told | None:
        """The next token, or None once the completion has ended (:attr:`finish` says why) or
        ``should_stop`` said stop while waiting; raises :class:`ModelServerError` when the
        server stays silent past the timeout or breaks off."""
        waited = 0.0
        while not self.waiting and not self.ended:
            if should_stop is not None and should_stop():
                return None
            try:
                piece = self.pieces.get(timeout=POLL_SECONDS)
            except queue.Empty:
                waited += POLL_SECONDS
                if waited > self.timeout:
                    raise ModelServerError(f"model server {self.info.url} stopped answering") from None
                continue
            if piece is None:
                self.ended = True
                self.waiting.extend(self._read_text())
            elif isinstance(piece, BaseException):
                raise ModelServerError(f"model server {self.info.url} stopped answering: {reason(piece)}")
            else:
                for choice in piece.get("choices", []):
                    self.waiting.extend(self._told(choice))
                    self.finish = choice.get("finish_reason") or self.finish
                    self.stop_reason = choice.get("stop_reason", self.stop_reason)
        return self.waiting.pop(0) if self.waiting else None

    def _told(self, choice: dict[str, Any]) -> list[Told]:
        """The tokens of one streamed piece (its text as one token when it tells none)."""
        logprobs = choice.get("logprobs") or {}
        tokens = logprobs.get("tokens") or []
        if not tokens:
            text = choice.get("text", "")
            token = self.names(text) if self.names is not None and text else None
            if token is None:
                self.text += text
                return []
            return [*self._read_text(), Told(token)]
        scores = logprobs.get("token_logprobs") or [None] * len(tokens)
        tops = logprobs.get("top_logprobs") or [None] * len(tokens)
        told = []
        for name, score, top in zip(tokens, scores, tops):
            token = self._id(name)
            alternatives: dict[int, float] = {}
            for other, logprob in (top or {}).items():  # (best first: both servers keep the order)
                alternative = self._id(other)
                if alternative is None:  # a token it named by a text no one token owns: those
                    break  # after it are not the likeliest of the rest, so not told
                alternatives[alternative] = float(logprob)
            told.append(Told(token, float(score) if score is not None else None, alternatives))
        return told

    def _read_text(self) -> list[Told]:
        """The tokens of the text told without tokens not read yet (see the class)."""
        ids, self.text = self.codec.encode(self.text), ""
        return [Told(token) for token in ids]

    def _id(self, name: str) -> int | None:
        if self.info.by_id:
            return int(name[len(ID_PREFIX) :]) if name.startswith(ID_PREFIX) else None
        return self.names(name) if self.names is not None else None

    def close(self) -> None:
        try:
            self.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the server
        self.response.close()
        self.connection.close()
