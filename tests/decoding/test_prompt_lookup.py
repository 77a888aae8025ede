"""Drafts from the prompt itself (fimconstrain/decoding/runtimes/prompt_lookup.py)."""

from __future__ import annotations

from fimconstrain.decoding.runtimes.prompt_lookup import draft


def test_the_tokens_after_the_last_occurrence_of_the_tail_are_drafted():
    ids = [1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 1, 2, 3]
    assert draft(ids, 2) == [7, 8]  # the most recent earlier (1, 2, 3), not the first
    assert draft(ids, 10) == [7, 8, 1, 2, 3]  # up to the end


def test_a_longer_match_wins_over_a_more_recent_shorter_one():
    ids = [5, 6, 7, 8, 40, 0, 7, 8, 41, 5, 6, 7, 8]
    assert draft(ids, 1) == [40]  # (5, 6, 7, 8) occurred once; (7, 8) more recently


def test_nothing_is_drafted_without_a_match_or_room():
    assert draft([1, 2, 3, 4, 5], 4) == []
    assert draft([1, 2, 1, 2], 0) == []
    assert draft([1], 4) == []
