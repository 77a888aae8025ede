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

from dataclasses import dataclass

#: slack on the probability test (vLLM compares in float32): settle later, never earlier
_SLACK = 1e-4


@dataclass(frozen=True)
class SamplerSupport:
    """One request's sampling settings, as far as they bound which allowed tokens it can pick.

    ``top_k`` 0 means no limit; probabilities given to :meth:`settled` are softmax at the
    request's ``temperature`` over the whole row."""

    greedy: bool = False
    top_k: int = 0
    min_p: float = 0.0
    temperature: float = 1.0

    @classmethod
    def of(cls, params) -> SamplerSupport | None:
        """The support bound of vLLM ``SamplingParams``; None where nothing bounds it (plain
        sampling) or where the request asked for log-probabilities (they would show the cut)."""
        if params.logprobs is not None:
            return None
        if params.temperature == 0.0:
            return cls(greedy=True)
        support = cls(top_k=max(0, params.top_k), min_p=params.min_p, temperature=params.temperature)
        return support if support.top_k or support.needs_probabilities else None

    @property
    def needs_probabilities(self) -> bool:
        """Whether :meth:`settled` reads probabilities (``min_p`` in use)."""
        return self.min_p > 0.0

    def settled(self, passing: int, best: float, below: float) -> bool:
        """Whether no token below the checked ones can be sampled: ``passing`` candidates passed,
        the first with probability ``best``, and every unchecked token has probability at most
        ``below``."""
        if passing == 0:
            return False
        if self.greedy or (self.top_k and passing >= self.top_k):
            return True
        return self.min_p > 0.0 and below < self.min_p * best * (1.0 - _SLACK)
