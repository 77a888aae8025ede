"""The budget finish: a short text that turns a checker's middle into a complete file.

Generation under a token budget (paper 002) needs to know how to end well when the budget
runs out. The closings of what the middle opened come first (:mod:`~.closing`); with a
suffix, every cut point of those closings is also a place to bridge from into the suffix
(:mod:`~.bridging`), since the suffix usually closes what the middle opened. Every candidate
is verified by the exact checker.
"""

from __future__ import annotations

from ..layers.layer_protocol import LayoutT, LexicalLayer, ParseState
from .bridging import TimedSearch, bridge_planner, bridge_to_suffix
from .closing import closing_candidates


def shortest_finish(
    checker: ParseState[LayoutT], suffix_head: str | None, limit: int = 64, seconds: float | None = None
) -> str | None:
    """A short text ``t`` with ``checker.feed(t).is_complete()`` (suffix included), or None when none is
    found (within ``seconds``, if given); ``suffix_head``: the part of the suffix parsed per middle (see
    :class:`~.right_quotient.SuffixPlan`), None without a suffix. Tries the cheapest closing of the open
    rules cut at every point (the first ``limit`` candidates); with a suffix, then bridges into it
    (:func:`~.bridging.bridge_to_suffix`)."""
    search = TimedSearch(seconds)
    candidates = closing_candidates(checker)[:limit]
    found = search.first_complete(checker, candidates)
    if found is not None or suffix_head is None:
        return found
    return bridge_to_suffix(checker, candidates, suffix_head, search)


def prepare_finish_search(layer: LexicalLayer) -> None:
    """Build ``layer``'s finish-search tables now, once per layer and process (the closing and
    bridge planners, :meth:`.bridging.BridgePlanner.prepare`), so that no search pays for them."""
    bridge_planner(layer).prepare()
