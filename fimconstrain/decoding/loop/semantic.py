"""Semantic decoding: the decode loop's choice among syntactically valid candidates, guided by
completion engines for names (paper 003 §3.3, constrained semantic decoding), soft and fail-open.

Synchromesh samples only tokens its completion engine allows. Here the providers' answers are
trusted by degree (:mod:`fimconstrain.engine.names.name_check`): a candidate that makes a name
unresolvable where the provider is confident and the position is a plain read is *excluded*;
one that fails elsewhere (an instance's attribute, a name that may yet be bound or be a keyword
argument, a provider that is not sure) is *demoted* by ``penalty`` in the ranking (log-space:
its probability is multiplied by e^-penalty, an exact reweighting under Gumbel sampling).
:meth:`SemanticGuide.choose` walks the valid candidates best first and stops as soon as no later
one can win, so a step whose favourite resolves costs one check (and the ranking reads no second
token). If every candidate it judges is excluded, the syntactic favourite is taken (fail-open),
so the semantic layer never blocks a completion; providers that are slow answer "unknown" and
cost nothing (their budget is theirs).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ...engine.names.name_check import RESOLVES, NameCheck, NameMark, Verdict
from ...engine.names.provider import NameProvider
from ...engine.names.scopes import FileScopes
from . import jedi_attributes
from .constraint import ConstraintState, passing_candidates

#: log-probability taken off a candidate that makes a name unresolvable where not confident
SOFT_PENALTY = 2.0
#: valid candidates judged per step at most (then the best so far, or the syntactic favourite)
WINDOW = 16


@dataclass(frozen=True)
class SemanticOptions:
    """How names guide decoding: jedi for attributes (when installed), the soft penalty, how
    many valid candidates a step judges, and jedi's time budget per receiver (seconds)."""

    attributes: bool = True
    penalty: float = SOFT_PENALTY
    window: int = WINDOW
    budget: float = jedi_attributes.BUDGET


def name_providers(
    prefix: str, suffix: str, options: SemanticOptions
) -> tuple[NameProvider, jedi_attributes.FileAttributes | None]:
    """The name providers for one file: its scopes, and jedi's attributes if wanted and installed."""
    scopes = FileScopes.read(prefix, suffix)
    shared = jedi_attributes.shared() if options.attributes else None
    return scopes, (shared.for_file(prefix, suffix, options.budget) if shared is not None else None)


class SemanticGuide:
    """The semantic side of one generation: its :class:`NameCheck` and what it did (``stats``)."""

    def __init__(
        self,
        check: NameCheck,
        stop_ids: set[int],
        banned_ids: set[int],
        options: SemanticOptions = SemanticOptions(),
    ):
        self.check, self.options = check, options
        self.stop_ids, self.banned_ids = stop_ids, banned_ids
        self.stats: Counter[str] = Counter()
        self.attributes: jedi_attributes.FileAttributes | None = None  # for its timeouts

    @classmethod
    def start(
        cls,
        prefix: str,
        suffix: str,
        stop_ids: set[int],
        banned_ids: set[int],
        options: SemanticOptions = SemanticOptions(),
    ) -> SemanticGuide:
        """The guide for a middle between ``prefix`` and ``suffix`` (whose tokens first write
        the prefix's end again, token healing: that text is the user's, never judged)."""
        names, attributes = name_providers(prefix, suffix, options)
        check = NameCheck(prefix, suffix, names, attributes)
        guide = cls(check, stop_ids, banned_ids, options)
        guide.attributes = attributes
        return guide

    def verdict(self, state: ConstraintState, token: int) -> Verdict:
        """What ``token`` does to the middle's names (a stop token: nothing)."""
        if token in self.stop_ids:
            return RESOLVES
        return self.check.verdict(self._new_text(state, token))

    def mark(self) -> NameMark:
        """The names as they are now, for :meth:`go_back` (a middle that takes back tokens)."""
        return self.check.mark()

    def go_back(self, mark: NameMark) -> None:
        """Make the names what they were at ``mark``."""
        self.check.go_back(mark)

    @staticmethod
    def _new_text(state: ConstraintState, token: int) -> str:
        """What ``token`` adds after the prefix: its text past what is left to heal."""
        return (state.added_text(token) or "")[len(state.healing) :]

    def choose(
        self, state: ConstraintState, ranked: Iterator[int], keys: np.ndarray, whole: bool = True
    ) -> Iterator[tuple[int, ConstraintState]]:
        """The chosen valid candidate of ``ranked`` (best key first), with the state after it;
        nothing when no candidate is valid, or (unless ``whole``: only the likeliest tokens have
        keys) when the walk ran out of keyed tokens before its choice was sure. The guide moves
        on with the choice."""
        bar = -math.inf  # the best score so far: a candidate with a key below it cannot win
        limit = max(self.options.window * 4, 64)  # ranked tokens looked at once one is valid
        looked = 0
        fallback: tuple[int, ConstraintState, Verdict] | None = None
        best: tuple[int, ConstraintState] | None = None
        ran_out = True  # the walk went through every keyed token

        def gated() -> Iterator[int]:
            nonlocal looked, ran_out
            tokens, last = iter(ranked), math.inf  # (keys descend: none after ``last`` is higher)
            while last > bar:  # (so the next token is not even read: its key cannot win)
                token = next(tokens, None)
                if token is None:
                    return
                last = float(keys[token])
                if last <= bar or (fallback is not None and looked >= limit):
                    break
                looked += 1 if fallback is not None else 0
                yield token
            ran_out = False

        valid = passing_candidates(state, gated(), self.stop_ids, self.banned_ids)
        for judged, (token, nxt) in enumerate(valid, 1):
            verdict = self.verdict(state, token)
            if fallback is None:
                fallback = (token, nxt, verdict)
            self.stats["excluded" if verdict.excluded else "demoted" if verdict.fails else "resolves"] += 1
            key = float(keys[token])
            score = -math.inf if verdict.excluded else key - self.options.penalty if verdict.fails else key
            if score > bar:
                best, bar = (token, nxt), score
            if judged >= self.options.window:
                ran_out = False
                break
        if ran_out and not whole and bar < float(keys[np.isfinite(keys)].min(initial=np.inf)):
            return  # (a token not told, whose key is at most the least told one's, might win)
        if fallback is None:
            return
        if best is None:
            self.stats["fail-open"] += 1
            best = fallback[:2]
        elif best[0] != fallback[0]:
            self.stats["restricted" if fallback[2].excluded else "reranked"] += 1
        if self.attributes is not None:
            if self.attributes.timeouts:
                self.stats["jedi-timeouts"] = self.attributes.timeouts
            if waited := round(1000 * self.attributes.waited_total):
                self.stats["jedi-wait-ms"] = waited
            if self.attributes.not_waited:
                self.stats["jedi-not-waited"] = self.attributes.not_waited
        if best[0] not in self.stop_ids:
            self.check.advance(self._new_text(state, best[0]))
        yield best
