"""Ending inside ``max_tokens`` on the server: a constrained request whose budget nears its end
keeps only the tokens after which the file can still be finished, stop token included, in the
tokens left (paper 002: sampling in ``L ∩ R_n``).

The processor only masks, so a request that reaches ``max_tokens`` would end where the model
happened to be, mid-structure. Here the distance to a valid end is the token count of the
engine's shortest finish (:meth:`fimconstrain.engine.checker.ParseState.shortest_finish`, the
budget finish of docs/references.md [S9]) encoded by the served tokenizer. Far from the end
nothing changes. Within :data:`FINISH_GROWTH` tokens of the finish's own length, a candidate
passes only if its own finish still fits after it; when none of the best
:data:`BUDGET_CANDIDATES` does, the finish's first token is the only one allowed, so the
request writes the finish and ends with a stop token: every middle a plugged server returns
parses, unless the finish search finds no finish at all (then the mask is as without a budget).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..decoding.loop.constraint import ConstraintState
from ..decoding.tokens.fim_formats import TextCodec

#: how much one token may lengthen the shortest finish (a token such as ``([{`` opens three
#: brackets): nearer the end than this, each candidate's own finish is measured
FINISH_GROWTH = 4
#: the candidates measured at one step near the end (the likeliest first)
BUDGET_CANDIDATES = 4
#: seconds one finish search may take: a bound on a pathological step's work (a search takes
#: 0.2-10 ms on the cuts of tests/serving), never reached on an ordinary one
FINISH_SECONDS = 0.25
#: the blanks the finish search puts before a closing symbol (``( ) )``): each costs a token
_SPACED_CLOSING = re.compile(r"[ \t]+(?=[)\]}:,])")


class BudgetEnd:
    """The finish plans of one request's middles, by their tokens (each searched for once)."""

    def __init__(self, codec: TextCodec, stop_ids: set[int]):
        self.codec, self.stop_ids = codec, stop_ids
        self._plans: dict[tuple[int, ...], list[int] | None] = {}

    def plan(self, state: ConstraintState) -> list[int] | None:
        """The tokens of a shortest finish after ``state`` ([] when the file is valid now);
        None when there is none to plan (no finish found, or a character still half written).
        A plan's first token leads to the rest of it: a new search from there could choose
        another finish, longer than the budget has room for."""
        if state.ids in self._plans and (self._plans[state.ids] != [] or _valid_now(state)):
            plan = self._plans[state.ids]
        else:
            plan = self._plans[state.ids] = self._search(state)
        if plan:
            self._plans.setdefault(state.ids + (plan[0],), plan[1:])
        return plan

    def _search(self, state: ConstraintState) -> list[int] | None:
        if _valid_now(state):
            return []
        if state.held or state.healing:
            return None
        return self._fewest_tokens(state)

    def _fewest_tokens(self, state: ConstraintState) -> list[int] | None:
        """The engine's shortest finish after ``state`` as tokens, its closing symbols drawn
        together (and its leading blanks dropped) where that still completes the file."""
        text = state.checker.shortest_finish(seconds=FINISH_SECONDS)
        if not text:
            return None
        tight = _SPACED_CLOSING.sub("", text).lstrip(" \t")
        if tight != text:
            after = state.checker.feed(tight) if tight else state.checker
            if after is not None and after.is_complete():
                text = tight
        return self.codec.encode(text, leading_space=False) or None

    def within(self, state: ConstraintState, passing: Sequence[int], left: int) -> list[int]:
        """The tokens of ``passing`` (best first) that still let the file end within ``left``
        tokens (this step's included), or the finish's first token when none of the measured
        ones does; ``passing`` as it is far from the end or where no finish is known; the stop tokens
        alone where the file is complete and nothing else fits."""
        plan = self.plan(state)
        if plan is None or left > len(plan) + 1 + FINISH_GROWTH:
            return list(passing)
        kept: list[int] = []
        measured = 0
        for token in passing:
            if token in self.stop_ids:  # passing holds a stop token only where the file is complete
                kept.append(token)
                continue
            if measured == BUDGET_CANDIDATES:
                continue
            measured += 1
            after = state.child(token)
            rest = None if after is None else self.plan(after)
            if rest is not None and 1 + len(rest) + 1 <= left:  # the token, its finish, the stop
                kept.append(token)
        if kept:
            return kept
        if not plan:  # complete now, and no stop token among the candidates: end here
            return sorted(self.stop_ids)
        if len(plan) + 1 <= left and state.passes(plan[0]):
            return [plan[0]]
        return list(passing)


def _valid_now(state: ConstraintState) -> bool:
    """Whether the file is a complete program with the middle as it is: ``can_end`` without its
    preference against a last name that runs into the suffix's first (``codecs.Incremen|tal``),
    which a stop at the end of the budget overrides."""
    final = None if state.healing else state.final_checker()
    return final is not None and final.is_complete()
