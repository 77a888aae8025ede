"""A transformers causal LM behind the model-backend seam (:mod:`.backend`).

One forward pass per generated token, reusing the key/value cache of everything before it;
the logits leave torch as a float32 numpy array, so nothing after the model step imports torch.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..tokens.fim_formats import FimFormat, resolve_format, special_token_ids
from .backend import GenerationRequest

#: prompt tokens per forward pass when the prompt is read in pieces (:meth:`TransformersSession.prefill`)
PREFILL_CHUNK = 128


def context_window(model, tokenizer) -> int:
    """The model's window from its config (``n_positions`` or ``max_position_embeddings``), else
    the tokenizer's."""
    for key in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        value = getattr(model.config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return min(int(tokenizer.model_max_length), 1 << 20)


def cache_argument(model) -> str:
    """The name ``model.forward`` takes its key/value cache by: ``cache`` in transformers 5
    (where ``past_key_values`` warns, and goes in 5.40), ``past_key_values`` before.  A wrapper
    whose forward passes ``**kwargs`` on is taken to wrap a model of the installed transformers."""
    parameters = inspect.signature(model.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in parameters:
            return name
    import transformers

    return "cache" if int(transformers.__version__.split(".")[0]) >= 5 else "past_key_values"


class TransformersBackend:
    """A transformers ``PreTrainedModel`` (or anything with its call and ``config``), its
    tokenizer and FIM format (default: detected from the tokenizer)."""

    runtime = "transformers"

    def __init__(self, model: Any, tokenizer: Any, fim_format: FimFormat | None = None, name: str = ""):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.fim_format = fim_format or resolve_format(tokenizer)
        self.vocab_size = int(model.config.vocab_size)
        self.context_window = context_window(model, tokenizer)
        self.special_ids = frozenset(special_token_ids(tokenizer))
        self._cache_name = cache_argument(model)

    def start(self, request: GenerationRequest | None = None) -> TransformersSession:
        return TransformersSession(self.model, self._cache_name)


class TransformersSession:
    """One generation's key/value cache; :attr:`seconds` counts the forward passes."""

    partial = False  # (a whole row of logits)
    invented_end = False  # (the model writes every token)

    def __init__(self, model: Any, cache_name: str):
        self.model, self.cache_name = model, cache_name
        self.past = None
        self.seconds = 0.0

    @torch.inference_mode()
    def feed(self, ids: list[int]) -> np.ndarray:
        """Next-token logits after feeding ``ids`` on top of the cache."""
        start = time.perf_counter()
        inputs = torch.tensor([ids], dtype=torch.long, device=self.model.device)
        out = self.model(input_ids=inputs, use_cache=True, **{self.cache_name: self.past})
        self.past = getattr(out, self.cache_name)
        logits = out.logits[0, -1].float().cpu().numpy()
        self.seconds += time.perf_counter() - start
        return logits

    def step(self, token: int) -> np.ndarray:
        return self.feed([token])

    def reveal(self, allowed: np.ndarray | None) -> None:
        return None  # (its logits are a whole row)

    def close(self) -> None:
        pass

    def prefill(self, ids: list[int], should_stop: Callable[[], bool] | None = None) -> np.ndarray | None:
        """The prompt's next-token logits. With ``should_stop`` the prompt is fed
        :data:`PREFILL_CHUNK` tokens at a time (the key/value cache joins the pieces into one
        pass) and asked between them, so that a server can hand its worker over mid-prompt;
        None when it said stop."""
        if should_stop is None:
            return self.feed(ids)
        logits = None
        for start in range(0, len(ids), PREFILL_CHUNK):
            if start and should_stop():
                return None
            logits = self.feed(ids[start : start + PREFILL_CHUNK])
        return logits
