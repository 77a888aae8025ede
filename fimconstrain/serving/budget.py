"""Ending inside ``max_tokens`` on the server: a constrained request whose budget nears its end
keeps only the tokens after which the file can still be finished, stop token included, in the
tokens left (paper 002: sampling in ``L ∩ R_n``).

The processor only masks, so a request that reaches ``max_tokens`` would end where the model
happened to be, mid-structure. Here the distance to a valid end is the token count of the finish
the decode loop plans too (:func:`fimconstrain.decoding.loop.end_of_middle.planned_finish`: the
engine's shortest finish, the budget finish of docs/references.md [S9], closings first and names
and literals as the last resort) encoded by the served tokenizer. Far from the end nothing
changes but that the likeliest candidates go only where a finish is known (a middle whose finish
search fails, a docstring closed before code that needs ``if A:`` and a string reopened to meet the
suffix, cannot be taken back). Within :data:`FINISH_GROWTH` tokens of the finish's own length,
only candidates whose own finish still fits after them pass; when none of the best
:data:`BUDGET_CANDIDATES` does, the finish's first token is the only one allowed, so the request
writes the finish and ends with a stop token: every middle a plugged server returns parses, unless
the finish search finds no finish for the empty middle (then the mask is as without a budget).
Where a forced finish invents text, the request is told so (:meth:`BudgetEnd.invented`; on the
wire, ``fim_invented_stop``: :mod:`.requests`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..decoding.loop.constraint import ConstraintState
from ..decoding.loop.end_of_middle import planned_finish
from ..decoding.tokens.fim_formats import TextCodec

#: how much one token may lengthen the shortest finish (a token such as ``([{`` opens three
#: brackets; a line break before a suffix that goes on with ``= 16`` needs ``A =`` after it):
#: nearer the end than this, each candidate's own finish is measured
FINISH_GROWTH = 4
#: the candidates measured at one step near the end (the likeliest first)
BUDGET_CANDIDATES = 4
#: seconds one finish search may take: a bound on a pathological step's work (a search takes
#: 0.2-10 ms on the cuts of tests/serving), never reached on an ordinary one
FINISH_SECONDS = 0.25


@dataclass(frozen=True)
class Plan:
    """The tokens of a finish, and whether it writes something nobody typed (a placeholder name,
    a literal: :class:`~fimconstrain.decoding.loop.end_of_middle.Finish`)."""

    tokens: tuple[int, ...]
    invents: bool = False

    def rest(self) -> Plan:
        """The plan after its first token."""
        return Plan(self.tokens[1:], self.invents)


#: what :meth:`BudgetEnd.plan` finds for a middle not searched yet
_UNSEARCHED = Plan((), invents=True)


class BudgetEnd:
    """The finish plans of one request's middles, by their tokens (each searched for once), and
    the middles where it forced a token of a plan that invents (:meth:`invented`)."""

    def __init__(self, codec: TextCodec, stop_ids: set[int]):
        self.codec, self.stop_ids = codec, stop_ids
        self._plans: dict[tuple[int, ...], Plan | None] = {}
        self._inventing: set[tuple[int, ...]] = set()  # middles ending in such a forced token

    def plan(self, state: ConstraintState) -> Plan | None:
        """The plan of a shortest finish after ``state`` (no tokens when the file is valid now);
        None when there is none to plan (no finish found, or a character still half written).
        A plan's first token leads to the rest of it: a new search from there could choose
        another finish, longer than the budget has room for."""
        known = self._plans.get(state.ids, _UNSEARCHED)
        if known is _UNSEARCHED or (known is not None and not known.tokens and not _valid_now(state)):
            known = self._plans[state.ids] = self._search(state)
        if known is not None and known.tokens:
            self._plans.setdefault(state.ids + known.tokens[:1], known.rest())
        return known

    def _search(self, state: ConstraintState) -> Plan | None:
        if _valid_now(state):
            return Plan(())
        if state.held or state.healing:
            return None
        finish = planned_finish(state.checker, FINISH_SECONDS)
        if finish is None or not finish.text:
            return None
        tokens = self.codec.encode(finish.text, leading_space=False)
        return Plan(tuple(tokens), finish.invents) if tokens else None

    def invented(self, ids: tuple[int, ...]) -> bool:
        """Whether the middle ``ids`` (a row's: the committed tokens and its drafts) holds a
        token this budget end forced from a finish that invents."""
        return any(ids[: len(forced)] == forced for forced in self._inventing)

    def within(self, state: ConstraintState, passing: Sequence[int], left: int) -> list[int]:
        """The tokens of ``passing`` (best first) after which the file can still end within
        ``left`` tokens (this step's included): each of the best :data:`BUDGET_CANDIDATES` is kept
        only if a finish is known after it that fits, so that the middle never goes where no
        finish is known (the plugin cannot take a token back, as the loop here cuts a middle);
        the others are kept far from the end and dropped near it. When none is kept, the first
        token of this state's own finish; ``passing`` as it is where no finish is known here;
        the stop tokens alone where the file is complete and nothing else fits."""
        plan = self.plan(state)
        near = left <= (0 if plan is None else len(plan.tokens)) + 1 + FINISH_GROWTH
        kept: list[int] = []
        measured = 0
        for token in passing:
            if token in self.stop_ids:  # passing holds a stop token only where the file is complete
                kept.append(token)
            elif measured < BUDGET_CANDIDATES:
                measured += 1
                if self._fits(state.child(token), left - 1, near):
                    kept.append(token)
            elif not near:
                kept.append(token)
        if kept or plan is None:
            return kept or list(passing)
        if not plan.tokens:  # complete now, and no stop token among the candidates: end here
            return sorted(self.stop_ids)
        if len(plan.tokens) + 1 <= left and state.passes(plan.tokens[0]):
            if plan.invents:
                self._inventing.add(state.ids + plan.tokens[:1])
            return [plan.tokens[0]]
        return list(passing)

    def _fits(self, after: ConstraintState | None, left: int, near: bool) -> bool:
        """Whether a finish known after ``after`` and its stop token fit in ``left`` tokens; far
        from the end, a state inside a character half written counts as fitting (its finish is
        known once the character is)."""
        if after is None:
            return False
        if after.held and not near:
            return True
        rest = self.plan(after)
        return rest is not None and len(rest.tokens) + 1 <= left


def _valid_now(state: ConstraintState) -> bool:
    """Whether the file is a complete program with the middle as it is: ``can_end`` without its
    preference against a last name that runs into the suffix's first (``codecs.Incremen|tal``),
    which a stop at the end of the budget overrides."""
    final = None if state.healing else state.final_checker()
    return final is not None and final.is_complete()
