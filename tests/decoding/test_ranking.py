"""The walk order of candidate tokens (:mod:`fimconstrain.decoding.loop.ranking`), and its narrowing:
a scan past the top asks once for a cheap superset of the passing tokens and walks only those."""

from __future__ import annotations

import numpy as np

from fimconstrain.decoding.loop.ranking import ranked_tokens


def test_the_top_then_the_rest_by_key_never_twice_never_masked():
    keys = np.array([0.5, 3.0, -np.inf, 2.0, 1.0, 2.5])
    assert list(ranked_tokens(keys, 2)) == [1, 5, 3, 4, 0]
    assert list(ranked_tokens(keys, 2, rest=False)) == [1, 5]


def test_narrowing_is_asked_only_past_the_top_and_keeps_the_order():
    keys = np.array([0.5, 3.0, 0.1, 2.0, 1.0, 2.5])
    asked = []

    def narrow(k: np.ndarray) -> np.ndarray:
        asked.append(True)
        out = k.copy()
        out[[0, 5]] = -np.inf  # ruled out by the superset; 5 was in the top already
        return out

    walk = ranked_tokens(keys, 2, narrow=narrow)
    assert [next(walk), next(walk)] == [1, 5] and not asked  # the top: no narrowing
    assert list(walk) == [3, 4, 2] and asked == [True]
