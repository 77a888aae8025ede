"""A model server as a model backend: the one decode loop (:mod:`..loop.generate`) runs over an
OpenAI-compatible ``/v1/completions`` endpoint, so a server's middles are constrained, healed
and ended exactly as a model here ends them (issue 50).

A step needs the next token's logits; a server tells only the likeliest :data:`ALTERNATIVES`
(``logprobs``). So a session's logits are those log-probabilities, every other token at -inf,
and where none of them passes the constraint the loop asks for more (:meth:`ServerSession.reveal`):
the same position again with the tokens the constraint may still take favoured, or those already
told banned (``logit_bias``), so that the server's own greedy pick is the likeliest token not yet
told. The server writes on from there greedily while the loop checks (speculation): as long as
the loop takes the server's own token, the next position is already on its way; where it takes
another, the stream is closed (the server aborts it) and the prompt with the tokens chosen asked
again, which the server's prompt cache reads in a few tokens.

Where the server names tokens by text (llama-cpp-python), its greedy tokens stream without
log-probabilities, which it computes slowly, and a position is asked for its likeliest tokens
only where the loop needs more than the server's own (:attr:`ServerBackend.lazy`).

A server that constrains the middle itself (this package's vLLM plugin, docs/serving.md) writes
it in one request, which the loop checks token by token against the same constraint, nothing
healed; a server that tells no log-probabilities writes it as it likes and the loop cuts it to
its longest valid prefix (mode ``checked``, paper 004 §VII-B):
:class:`~fimconstrain.decoding.loop.server_decoder.ServerDecoder`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..tokens.fim_formats import FimFormat, TextCodec, special_token_ids
from ..tokens.token_bytes import vocabulary
from .backend import GenerationRequest
from .server_api import (
    ALTERNATIVES,
    DEFAULT_TIMEOUT,
    CompletionStream,
    ModelServerError,
    ServerInfo,
    TokenNames,
    Told,
    connect,
)

#: asks at one position before the loop is told there is nothing more (it then ends the middle)
MAX_ASKS = 16
#: at most this many tokens the constraint still allows are favoured in one ask; past it, the
#: tokens already told are banned instead (one more token told per ask)
MAX_FAVOURED = 2048
#: the ``logit_bias`` that favours (bans) a token: OpenAI's and vLLM's bound
BIAS = 100.0


class ServerBackend:
    """The model behind ``url`` (``model``: the server's name for it, default the first it
    serves), read through the local ``tokenizer`` and ``fim_format`` of the same model;
    ``plugin``: let a server that runs this package's vLLM plugin constrain the middle; ``lazy``:
    ask for log-probabilities only where needed (None: where tokens are named by text)."""

    runtime = "server"

    def __init__(
        self,
        url: str,
        tokenizer: Any,
        fim_format: FimFormat,
        *,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        plugin: bool = True,
        lazy: bool | None = None,
    ):
        self.tokenizer, self.fim_format, self.timeout = tokenizer, fim_format, timeout
        self.codec = TextCodec(tokenizer)
        self.info: ServerInfo = connect(url, self.codec, model, timeout)
        #: the server constrains the middle itself (its plugin, unless ``plugin`` is False: then
        #: the loop here chooses each token, as over any server)
        self.constrains = self.info.constrains and plugin
        self.name = f"{self.info.model} at {self.info.url}"
        self.vocab_size = len(tokenizer)
        self.context_window = self.info.window
        self.special_ids = frozenset(special_token_ids(tokenizer))
        #: the tokens that end a middle; the one a session's logits hold where the server
        #: stopped of itself (it does not say at which of its end tokens)
        self.stop_ids = frozenset(fim_format.stop_ids(tokenizer))
        eos = tokenizer.eos_token_id
        self.stop_id = eos if eos in self.stop_ids else min(self.stop_ids)
        #: the token a plugged server ends a middle with where its budget finish invented text
        #: (``fim_invented_stop``, docs/serving.md): the format's prefix marker, never a middle's
        self.invented_stop = fim_format.marker_ids(tokenizer)["PRE"]
        #: ids of tokens a server that names them by text names
        self.names = None if self.info.by_id else TokenNames(vocabulary(tokenizer).pieces)
        #: log-probabilities are asked for only where the loop needs more than the server's own
        #: token (greedy): a server that names tokens by text (llama-cpp-python) sorts the whole
        #: vocabulary in Python for each token it tells them of (0.15 s a token at 152k tokens,
        #: three times the model's step); a token taken so has no log-probability (0 stands in)
        self.lazy = self.info.tells and not self.info.by_id if lazy is None else lazy

    @property
    def steered(self) -> bool:
        """Whether the loop chooses each token (the server tells alternatives and does not
        constrain the middle itself)."""
        return self.info.tells and not self.constrains

    def start(self, request: GenerationRequest | None = None) -> ServerSession:
        return ServerSession(self, request)


class ServerSession:
    """One middle through the server: the tokens so far, what is told of the position the loop
    chooses now, and the completion that writes on from there (see the module)."""

    def __init__(self, backend: ServerBackend, request: GenerationRequest | None):
        self.backend, self.request = backend, request
        self.seconds = 0.0
        self.ids: list[int] = []
        self.prompt_length = 0
        self.should_stop: Callable[[], bool] | None = None
        self.completion: CompletionStream | None = None
        #: the server's own token at the position chosen now (None: it stopped there, or unknown)
        self.ahead: Told | None = None
        #: log-probability by id of each token told at the position chosen now
        self.known: dict[int, float] = {}
        #: asks at the position chosen now; whether the last one had a ``logit_bias``; whether
        #: the server stopped of itself at the position chosen now; whether only its own token is
        #: known there, its log-probability not asked for (:attr:`ServerBackend.lazy`)
        self.asks, self.biased, self.stopped_here, self.guessed = 0, False, False, False
        #: the completion tells log-probabilities though the server is lazy (then it gives way)
        self.slow = False
        #: rows hold the tokens told, as log-probabilities (see :mod:`.backend`)
        self.partial = True
        #: the server's plugin ended the middle with a budget finish that invents (see :mod:`.backend`)
        self.invented_end = False

    def prefill(self, ids: list[int], should_stop: Callable[[], bool] | None = None) -> np.ndarray | None:
        self.ids, self.prompt_length, self.should_stop = list(ids), len(ids), should_stop
        logits = self._ask({})
        return None if should_stop is not None and should_stop() else logits

    def step(self, token: int) -> np.ndarray:
        self.ids.append(token)
        ahead, self.asks = self.ahead, 0
        writes_on = self.completion is not None and ahead is not None and ahead.token == token
        if writes_on and not (self.slow and self._spelled_as_read()):
            return self._advance()
        return self._ask({})

    def _spelled_as_read(self) -> bool:
        """Whether the middle's tokens so far are how the tokenizer reads their text: a server
        given the prompt as text then reads the same tokens, so a slow stream (a lazy server's,
        telling log-probabilities) may give way to a fresh, fast one; else it writes on, since
        only its own stream keeps those tokens."""
        middle = self.ids[self.prompt_length :]
        return self.backend.codec.encode(self.backend.codec.decode(middle)) == middle

    def reveal(self, allowed: np.ndarray | None) -> np.ndarray | None:
        """The logits of the position chosen now with one more token told: the likeliest of
        ``allowed`` (a mask over ids; None: any) not told yet; None when the server tells no
        alternatives, or this position has been asked :data:`MAX_ASKS` times."""
        if not self.backend.steered or self.asks >= MAX_ASKS:
            return None
        if self.guessed:  # first the likeliest tokens here, told this time (one token's ask)
            return self._ask({}, alternatives=True)
        refused = set(self.known)
        if self.stopped_here:  # (it stopped at one of its end tokens: which, it does not say)
            refused |= self.backend.stop_ids
        told = np.fromiter(refused, dtype=np.int64, count=len(refused))
        bias: dict[int, float]
        if allowed is not None:
            wanted = allowed[: self.backend.vocab_size].copy()
            wanted[told[told < wanted.shape[0]]] = False
            favoured = np.flatnonzero(wanted)
            if not favoured.size:
                return None
            if favoured.size <= MAX_FAVOURED:
                bias = dict.fromkeys(favoured.tolist(), BIAS)
            else:
                bias = dict.fromkeys(told.tolist(), -BIAS)
        else:
            bias = dict.fromkeys(told.tolist(), -BIAS)
        logits = self._ask(bias, keep=True)
        if self.ahead is None or self.ahead.token is None:  # (a token it cannot name: asking
            self.asks = MAX_ASKS  # again would tell the same)
        return logits

    def close(self) -> None:
        if self.completion is not None:
            self.completion.close()
            self.completion = None

    def _ask(self, bias: dict[int, float], keep: bool = False, alternatives: bool = False) -> np.ndarray:
        """Ask for a completion of the prompt and the tokens chosen (``bias`` as ``logit_bias``)
        and read its first token: the position chosen now, what was told of it kept with ``keep``.
        Of a lazy server, log-probabilities only with a bias, ``alternatives`` or sampling, and
        then for that one token."""
        self.close()
        backend, request = self.backend, self.request
        info = backend.info
        sampling = request is not None and request.sampling
        told = info.tells and (not backend.lazy or bool(bias) or alternatives or sampling)
        left = (request.budget if request is not None else 256) - (len(self.ids) - self.prompt_length)
        body: dict[str, Any] = {
            "model": info.model,
            "prompt": self.ids
            if info.by_id
            else backend.tokenizer.decode(self.ids, skip_special_tokens=False),
            "max_tokens": max(1, left),
            "temperature": 0,
            "repetition_penalty": 1.0,  # vLLM's name
            "repeat_penalty": 1.0,  # llama-cpp-python's: its default is 1.1
            "skip_special_tokens": False,
        }
        if bias and not info.raw:  # (past its first token it would tell biased numbers)
            body["max_tokens"] = 1
        if told:
            body["logprobs"] = 0 if backend.constrains else ALTERNATIVES
        if info.by_id:
            body["return_tokens_as_token_ids"] = True
        if bias:
            body["logit_bias"] = {str(token): value for token, value in bias.items()}
        if backend.constrains and request is not None and request.mode in ("constrained", "prefix"):
            body["vllm_xargs"] = {
                "fim_prefix": request.prefix,
                "fim_suffix": request.suffix if request.mode == "constrained" else "",
                "fim_python_version": request.python_version,
                "fim_top_k": request.top_k,
                "fim_invented_stop": backend.invented_stop,
            }
            body["stop_token_ids"] = [backend.invented_stop]
        start = time.perf_counter()
        self.completion = CompletionStream(info, body, backend.timeout, backend.codec, backend.names)
        self.biased, self.asks, self.slow = bool(bias), self.asks + 1, told and backend.lazy and not sampling
        self.seconds += time.perf_counter() - start
        return self._advance(self.known if keep else {}, first=True)

    def _advance(self, known: dict[int, float] | None = None, first: bool = False) -> np.ndarray:
        """The next position's logits from the completion (what was ``known`` of it kept). The
        server's own token counts as told only where it was the likeliest of the tokens not yet
        told: not past the first token of a biased completion (the bias holds for each of its
        tokens: past the first, its pick is no rank of the model's), whose other tokens are told
        only past the first (at the first they were, unbiased, before)."""
        completion = self.completion
        assert completion is not None  # (asked, or still writing on)
        start = time.perf_counter()
        told = completion.next(self.should_stop)
        self.seconds += time.perf_counter() - start
        self.known = dict(known or {})
        self.ahead, self.stopped_here, self.guessed = told, False, False
        if told is not None and told.logprob is None and told.token is not None:
            self.known[told.token] = 0.0  # (its own pick, not asked how likely: see ``guessed``)
            self.guessed = self.backend.steered
        elif told is not None:
            if not (first and self.biased):  # (a biased ask tells its pick alone: below)
                self.known.update(told.alternatives)
            logprob = 0.0 if told.logprob is None else told.logprob
            if told.token is not None and not self.biased:
                self.known[told.token] = logprob
            elif told.token is not None and first:
                # the likeliest of the tokens favoured; where the server tells biased numbers,
                # the lowest told before stands in for its own (an upper bound)
                raw = self.backend.info.raw
                self.known[told.token] = logprob if raw or not known else min(known.values())
        elif completion.ended:
            self.close()
            if completion.finish != "stop":  # (its budget ran out: the loop's has not)
                if first:
                    raise ModelServerError(f"model server {self.backend.info.url} wrote nothing")
                return self._ask({})
            self.known.setdefault(self.backend.stop_id, 0.0)  # the server stopped of itself here
            self.stopped_here = True
            self.invented_end = completion.stop_reason == self.backend.invented_stop
        logits = np.full(self.backend.vocab_size, -np.inf, dtype=np.float32)
        for token, logprob in self.known.items():
            if 0 <= token < logits.shape[0]:
                logits[token] = logprob
        return logits
