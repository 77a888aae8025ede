"""The seam between the decode loop and a model runtime: what the loop needs from a model.

The loop (:mod:`..loop.generate`) prefills a prompt, steps one token at a time and reads the
next-token logits as a numpy array; the constraint reads the vocabulary through the tokenizer
(token texts and bytes, :class:`..tokens.fim_formats.TextCodec`) and keeps the special ids out of a
middle. Nothing else of the model is seen, so any runtime that offers these (transformers,
:mod:`.transformers_backend`; llama.cpp, :mod:`.llama_backend`; a model server, which tells only
its likeliest tokens, :mod:`.server_backend`; the tests' pure-numpy bigram model,
``tests/decoding/bigram_backend.py``) runs every decoding mode, the editor's policy and the
evaluation unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..tokens.fim_formats import FimFormat


@dataclass(frozen=True)
class GenerationRequest:
    """What one generation is, for a runtime that serves whole requests (a model server): the
    most tokens it takes, and the text and settings of a server that constrains the middle itself."""

    budget: int
    prefix: str
    suffix: str
    python_version: str
    top_k: int
    mode: str
    #: tokens are drawn (temperature above 0), not the likeliest taken
    sampling: bool = False


class ModelSession(Protocol):
    """One generation's model state (its key/value cache, or whatever the runtime keeps)."""

    #: seconds spent in the model since the session started, or since the caller reset it
    seconds: float
    #: whether a row holds only the likeliest tokens, as their log-probabilities (a server's:
    #: the others at -inf, their mass not missing; :meth:`reveal` tells more); else a whole row
    #: of logits, a token's log-probability its logit less the row's log-normaliser
    partial: bool
    #: the runtime, not the model, ended the middle with text nobody typed (a plugged server's
    #: budget finish that writes a placeholder name: docs/serving.md); an editor never shows it
    invented_end: bool

    def prefill(self, ids: list[int], should_stop: Callable[[], bool] | None = None) -> np.ndarray | None:
        """The next-token logits after the prompt ``ids`` (float32, one per vocabulary id); None
        when ``should_stop``, asked between pieces of a long prompt, said stop."""
        ...

    def step(self, token: int) -> np.ndarray:
        """The next-token logits after feeding one more token."""
        ...

    def reveal(self, allowed: np.ndarray | None) -> np.ndarray | None:
        """The last logits with one more token made known, the likeliest of the ``allowed`` ids
        (a mask; None: any) that was not: for a runtime that tells only its likeliest tokens
        (a model server, every other at -inf). None: nothing more to tell (a whole row)."""
        ...

    def close(self) -> None:
        """Release what the session holds (a server's open request)."""
        ...


class ModelBackend(Protocol):
    """A FIM model: its vocabulary, its prompt format and window, and sessions that step it."""

    #: the model's name, for logs and records
    name: str
    #: what runs it, named as `--runtime` names it ("transformers", "llama"; "server"), for logs and records
    runtime: str
    #: a Hugging Face-compatible tokenizer (``encode``, ``decode``, ``convert_ids_to_tokens``,
    #: special tokens): the vocabulary the constraint reads token texts and bytes from
    tokenizer: Any
    fim_format: FimFormat
    #: width of the logits (may exceed the tokenizer's size: padded embeddings)
    vocab_size: int
    #: tokens the model attends to: the prompt and the middle together
    context_window: int
    #: ids that never write a middle's text (FIM markers, padding, end of text...)
    special_ids: frozenset[int]

    def start(self, request: GenerationRequest | None = None) -> ModelSession:
        """A fresh session for one generation (``request``: what it is, for a runtime that
        serves whole requests; the others read none of it)."""
        ...
