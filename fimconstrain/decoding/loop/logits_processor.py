"""The FIM constraint as a transformers ``LogitsProcessor``, for ``model.generate()``.

The same constraint state as the project's own decode loop (:mod:`.constraint`): each row's
middle so far is replayed through cached children, so a step costs one check per candidate.
"""

from __future__ import annotations

import time
from functools import partial
from itertools import islice

import torch
from transformers import LogitsProcessor

from ...engine.checker import fim_checker
from ...engine.versions import VersionLike
from ..masks.store import MaskStore
from ..tokens.fim_formats import FimFormat, TextCodec, resolve_format, special_token_ids
from .constraint import ConstraintState, passing_tokens
from .ranking import ranked_tokens


class TransformersFimProcessor(LogitsProcessor):
    """For ``model.generate()``: keep only the first ``k`` tokens (by score) that pass the FIM constraint.

    Every row of the batch fills the same prefix/suffix; ``prompt_length`` is the
    (padded) prompt width, so the row's middle is ``input_ids[row, prompt_length:]``.
    When no token passes, only the stop tokens stay allowed so generation ends. No token
    healing here: the caller's prompt is taken as it is.
    ``python_version``: the syntax the constraint accepts (default: the newest).
    ``mask_store``: the token-mask store that screens the checks past a row's first candidate
    and narrows the walk past the top ``k`` (:mod:`.constraint`); True (the default) loads
    the tokenizer's for the version (built once, cached on disk), None checks without one.
    """

    def __init__(
        self,
        tokenizer,
        prefix: str,
        suffix: str,
        prompt_length: int,
        k: int = 1,
        fim_format: FimFormat | None = None,
        python_version: VersionLike | None = None,
        mask_store: MaskStore | bool | None = True,
    ):
        fmt = fim_format or resolve_format(tokenizer)
        self.codec = TextCodec(tokenizer)
        self.stop_ids = fmt.stop_ids(tokenizer)
        self.banned_ids = special_token_ids(tokenizer) - self.stop_ids
        self.prompt_length = prompt_length
        self.k = k
        checker = fim_checker(prefix, suffix, python_version=python_version)
        if mask_store is True:
            mask_store = MaskStore.load_or_build(tokenizer, progress=False, python_version=python_version)
        self.store = mask_store or None
        self.root = ConstraintState(checker, self.codec, store=self.store)
        self.seconds = 0.0

    def state_for(self, middle: list[int]) -> ConstraintState | None:
        """The constraint state after ``middle`` (children are cached, so each step costs one
        feed per row)."""
        state = self.root
        for token in middle:
            if token in self.stop_ids:
                return state
            child = state.child(token)
            if child is None:
                return None
            state = child
        return state

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        start = time.perf_counter()
        masked = torch.full_like(scores, float("-inf"))
        for row in range(scores.shape[0]):
            state = self.state_for(input_ids[row, self.prompt_length :].tolist())
            allowed: list[int] = []
            if state is not None:
                keys = scores[row].float().cpu().numpy()
                ranked = ranked_tokens(keys, self.k, narrow=partial(state.narrow, also=self.stop_ids))
                allowed = list(islice(passing_tokens(state, ranked, self.stop_ids, self.banned_ids), self.k))
            allowed = allowed or sorted(self.stop_ids)
            masked[row, allowed] = scores[row, allowed]
        self.seconds += time.perf_counter() - start
        # torch's stubs type full_like as Tensor; transformers' LogitsProcessor says FloatTensor
        return masked  # type: ignore[return-value]
