"""The walk order of candidate tokens (:mod:`fimconstrain.decoding.loop.ranking`), and its narrowing:
a scan past the top asks once for a cheap superset of the passing tokens and walks only those."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fimconstrain.decoding.loop.ranking import SAMPLE, SAMPLED_FROM, next_id, ranked_tokens, top_ids


def test_the_top_then_the_rest_by_key_never_twice_never_masked():
    keys = np.array([0.5, 3.0, -np.inf, 2.0, 1.0, 2.5])
    assert list(ranked_tokens(keys, 2)) == [1, 5, 3, 4, 0]
    assert list(ranked_tokens(keys, 2, rest=False)) == [1, 5]
    assert list(ranked_tokens(np.array([-np.inf, 1.0, -np.inf, 0.0]), 3)) == [1, 3]  # all in the top


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


@given(
    st.integers(1, 200),
    st.sampled_from([np.float32, np.float64]),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["normal", "few values", "mostly masked", "sorted", "high where sampled"]),
)
@settings(max_examples=60, deadline=None)
def test_the_top_of_a_large_vocabulary_is_the_partial_sorts(first, dtype, seed, shape):
    """top_ids past SAMPLED_FROM keys (a bar from a sample first) gives the same keys in the same
    order as a full sort by key then id; a few candidates above the bar, or none, fall back to
    the partial sort."""
    rng = np.random.default_rng(seed)
    n = SAMPLED_FROM + int(rng.integers(0, 3 * SAMPLED_FROM))
    keys = rng.standard_normal(n).astype(dtype) * 4
    if shape == "few values":  # many ties, at the edge too
        keys = np.round(keys).astype(dtype)
    elif shape == "mostly masked":
        keys[rng.random(n) < 0.999] = -np.inf
    elif shape == "sorted":  # the strided sample sees only the low end
        keys = np.sort(keys)
    elif shape == "high where sampled":  # fewer than ``first`` above the bar: the partial sort
        keys[:: n // SAMPLE] += 100
    first = min(first, int(np.isfinite(keys).sum()) or 1)
    top = top_ids(keys, first)
    assert len(set(top.tolist())) == first
    assert keys[top].tolist() == sorted(keys.tolist(), reverse=True)[:first]
    assert top.tolist() == sorted(range(n), key=lambda i: (-keys[i], i))[:first]  # ties: lowest ids
    shorter = max(1, first // 3)
    assert top_ids(keys, shorter).tolist() == top.tolist()[:shorter]  # a shorter top starts a longer


@given(
    st.lists(st.sampled_from([-np.inf, -1.0, 0.0, 0.5, 2.0, 2.0, 3.0]), min_size=1, max_size=12),
    st.integers(1, 14),
)
def test_the_lead_from_argmax_is_the_tops_start(values, first):
    """The first two tokens, read by argmax before any partial sort, are the top's first two
    (ties by id, masked keys left out), and the walk after them is the one the top gives."""
    keys = np.array(values)
    best = int(np.argmax(keys))
    lead = [best] if len(keys) < 2 else [best, next_id(keys, best)]
    assert lead == top_ids(keys, min(2, len(keys))).tolist()
    assert list(ranked_tokens(keys, first, favourite=best)) == list(ranked_tokens(keys, first))
    assert list(ranked_tokens(keys, first)) == list(
        ranked_tokens(keys, first, top=top_ids(keys, min(first, len(keys))))
    )
    order = sorted((i for i in range(len(keys)) if keys[i] > -np.inf), key=lambda i: (-keys[i], i))
    assert list(ranked_tokens(keys, first)) == order
