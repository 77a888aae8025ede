"""How far down a row's candidates the constraint has to check: until the request's sampler
could not pick any token below.

vLLM samples after the logits processors: temperature, then ``min_p``, then ``top_k`` and
``top_p`` over what the processors left (greedy takes the best).  Greedy, ``min_p`` (relative to
the best allowed token) and ``top_k`` (a count) each keep a best-first run of the allowed tokens
that is known as soon as the checked candidates that pass hold it; tokens further down can then
stay masked without a check, and the sampled distribution is the one the whole top-``k`` mask
gives (``top_p`` then works on the same run).  ``top_p`` alone never settles early: its nucleus
is relative to the mass of every allowed token, which only the whole check knows.  Greedy
decoding, the editor's usual setting, checks candidates only until the first passes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: slack on the min_p test, in log-probability (vLLM compares in float32): settle later, never earlier
_SLACK = 1e-4


@dataclass(frozen=True)
class SamplerSupport:
    """One request's sampling settings, as far as they bound which allowed tokens it can pick.

    ``top_k`` 0 means no limit.  :meth:`settled` reads the candidates' scores: their logits
    divided by ``temperature`` (greedy: by 1, where only order and ties count), which differ
    from log-probabilities by one constant per row."""

    greedy: bool = False
    top_k: int = 0
    min_p: float = 0.0
    temperature: float = 1.0

    @classmethod
    def of(cls, params) -> SamplerSupport | None:
        """The support bound of vLLM ``SamplingParams``; None where nothing bounds it (plain
        sampling, ``top_p`` alone) or where the request asked for the log-probabilities of the
        best alternatives (they would show the cut). ``logprobs`` 0, the sampled token's alone
        (what the editor's model-server backend asks for), is bounded: vLLM's default
        ``logprobs_mode`` reads them before any logits processor, so no mask changes them."""
        if params.logprobs:
            return None
        if params.temperature == 0.0:
            return cls(greedy=True)
        if params.top_k <= 0 and params.min_p <= 0.0:
            return None
        return cls(top_k=max(0, params.top_k), min_p=params.min_p, temperature=params.temperature)

    def settled(self, passing: Sequence[float], below: float) -> bool:
        """Whether no token below the checked ones can be sampled: ``passing`` are the scores
        of the candidates that passed (best first), and every unchecked token scores at most
        ``below``.  A token tied with the last one kept is kept too (greedy and vLLM's top-k
        compare values), so a tie never settles; ``min_p`` keeps the tokens whose probability
        is at least ``min_p`` times the best's, a score at least ``log(min_p)`` below it."""
        if not passing:
            return False
        if self.greedy:
            return below < passing[0]
        if self.top_k and len(passing) >= self.top_k and below < passing[self.top_k - 1]:
            return True
        return self.min_p > 0.0 and below < passing[0] + math.log(self.min_p) - _SLACK
