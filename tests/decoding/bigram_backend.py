"""A bigram FIM model in pure numpy, for tests: a runtime behind the model-backend seam
(``fimconstrain.decoding.runtimes.backend``) that no user chooses.

It proves the seam: no torch, no transformers model, only a tokenizer and a
table of next-token log-probabilities, yet every decoding mode, the editor's policy and the
evaluation run through it unchanged. It learns from FIM examples cut from the texts it is given
(prompt, middle, stop token), so its middles are weak but its own; tests and smoke runs use it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from fimconstrain.decoding.runtimes.backend import GenerationRequest
from fimconstrain.decoding.tokens.fim_formats import (
    FimFormat,
    TextCodec,
    build_prompt,
    resolve_format,
    special_token_ids,
)


class BigramBackend:
    """Next-token log-probabilities that depend on the last token only (add-``smoothing`` counts)."""

    runtime = "numpy"

    def __init__(
        self,
        tokenizer: Any,
        log_probs: np.ndarray,
        fim_format: FimFormat | None = None,
        context_window: int = 1024,
        name: str = "bigram",
    ):
        self.tokenizer, self.name, self.context_window = tokenizer, name, context_window
        self.fim_format = fim_format or resolve_format(tokenizer)
        self.log_probs = log_probs.astype(np.float32)
        self.vocab_size = int(log_probs.shape[1])
        self.special_ids = frozenset(special_token_ids(tokenizer))

    @classmethod
    def train(
        cls,
        tokenizer: Any,
        texts: Iterable[str],
        cuts_per_text: int = 8,
        smoothing: float = 0.01,
        seed: int = 0,
        fim_format: FimFormat | None = None,
    ) -> BigramBackend:
        """Count token pairs over ``cuts_per_text`` FIM examples of each text (a random middle
        of up to a few lines, its prompt, then the middle and the stop token)."""
        fmt = fim_format or resolve_format(tokenizer)
        codec = TextCodec(tokenizer)
        stop = tokenizer.eos_token_id
        size = len(tokenizer)
        counts = np.full((size, size), smoothing, dtype=np.float64)
        rng = random.Random(seed)
        for text in texts:
            for _ in range(cuts_per_text):
                start = rng.randrange(len(text) + 1)
                end = min(len(text), start + rng.randrange(1, 120))
                prompt = build_prompt(fmt, codec, text[:start], text[end:], 256)
                sequence = prompt + codec.encode(text[start:end]) + [stop]
                np.add.at(counts, (sequence[:-1], sequence[1:]), 1.0)
        log_probs = np.log(counts / counts.sum(axis=1, keepdims=True))
        return cls(tokenizer, log_probs, fmt)

    def start(self, request: GenerationRequest | None = None) -> BigramSession:
        return BigramSession(self.log_probs)


class BigramSession:
    """A bigram model keeps nothing between steps but the last token."""

    partial = False  # (a whole row of logits)
    invented_end = False  # (the model writes every token)

    def __init__(self, log_probs: np.ndarray):
        self.log_probs = log_probs
        self.seconds = 0.0

    def _after(self, token: int) -> np.ndarray:
        start = time.perf_counter()
        logits = self.log_probs[token].copy()
        self.seconds += time.perf_counter() - start
        return logits

    def prefill(self, ids: list[int], should_stop: Callable[[], bool] | None = None) -> np.ndarray | None:
        return self._after(ids[-1])

    def step(self, token: int) -> np.ndarray:
        return self._after(token)

    def reveal(self, allowed: np.ndarray | None) -> None:
        return None  # (its logits are a whole row)

    def close(self) -> None:
        pass
