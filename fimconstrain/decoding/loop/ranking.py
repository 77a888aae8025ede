"""The order the decode loop walks candidate tokens in, from a step's logits (numpy arrays).

Greedy walks the logits best first; sampling walks them perturbed by Gumbel noise, so the first
candidate that passes the constraint is an exact draw from the model's distribution restricted
to the passing tokens (paper 004 §VII-B walks the top candidates the same way).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np


def log_normaliser(logits: np.ndarray) -> float:
    """``log(sum(exp(logits)))``: a token's log-probability is its logit minus this. The
    exponentials are taken in the row's own precision and summed in float64: a float64 copy of a
    151,936-token row is 1.2 MB, which a process that maps large blocks on their own (the
    language server's, ``fimconstrain/collector.py``) maps and faults in anew at every step."""
    top = float(logits.max())
    return top + float(np.log(np.exp(logits - top).sum(dtype=np.float64)))


def ranking_keys(
    logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator
) -> np.ndarray:
    """Keys whose descending order is the walk order: logits (greedy) or perturbed by Gumbel noise (sampling).

    With ``top_p < 1`` the nucleus comes first, then the other tokens in their own Gumbel order.
    """
    if temperature <= 0:
        return logits
    scaled = logits.astype(np.float64) / temperature
    scaled -= log_normaliser(scaled)
    uniform = np.clip(rng.random(scaled.shape), 1e-12, 1 - 1e-12)
    keys = scaled - np.log(-np.log(uniform))
    if top_p < 1.0:
        order = np.argsort(-scaled, kind="stable")
        probs = np.exp(scaled[order])
        outside = np.cumsum(probs) - probs >= top_p
        finite = keys[np.isfinite(keys)]
        keys[order[outside]] -= float(finite.max() - finite.min()) + 1.0
    return keys


#: from this many keys the top is found among the keys above a bar read off a strided sample of
#: :data:`SAMPLE` of them (at Qwen's 151,936 tokens about 0.07 ms against 0.23 for a partial
#: sort of them all)
SAMPLED_FROM = 16384
SAMPLE = 4096


def top_ids(keys: np.ndarray, first: int) -> np.ndarray:
    """The ids of the ``first`` largest keys (1 <= ``first`` <= ``len(keys)``), by descending key,
    ties by id, so that a shorter top is always the start of a longer one. With many keys, a bar
    that a few times ``first`` of a strided sample reach picks the keys to sort first: every key
    left out is below every key picked, so when at least ``first`` are picked the top is among
    them (else every unmasked key is sorted). Masked keys (-inf) are left out before any
    partition (partitioning thousands of equal keys took 20 ms at 151,936: a step that heals a
    token masks all but a few) and come last, by id, only where too few others are left."""
    n = keys.shape[-1]
    picked: np.ndarray | None = None
    if n >= SAMPLED_FROM:
        sample = keys[:: n // SAMPLE]
        k = min(len(sample), 4 * first * len(sample) // n + 8)
        sample = sample[sample > -np.inf]
        if len(sample) >= k:
            chosen = np.flatnonzero(keys >= np.partition(sample, len(sample) - k)[len(sample) - k])
            picked = chosen if len(chosen) >= first else None
    if picked is None:
        picked = np.flatnonzero(keys > -np.inf)
        if len(picked) < first:
            top = picked[np.argsort(-keys[picked], kind="stable")]
            masked = np.flatnonzero(keys[: first + len(top)] == -np.inf)  # (enough of them, by id)
            return np.concatenate([top, masked[: first - len(top)]])
    # every key tied with the top's last one comes in, so that the lowest ids win the ties
    values = keys[picked]
    picked = picked[values >= np.partition(values, len(values) - first)[len(values) - first]]
    return picked[np.argsort(-keys[picked], kind="stable")][:first]


def next_id(keys: np.ndarray, first: int) -> int:
    """The id of the largest key but ``first``'s (the largest; ``keys`` has two at least): the
    largest of the keys before it and after it (views, no copy), ties by id. Most steps take the
    first valid candidate, and the names guide looks at the next one only where the first's
    names fail: one more pass of argmax (0.01 ms at 151,936 tokens) then, rather than a top
    (0.07 ms)."""
    before, after = keys[:first], keys[first + 1 :]
    low = int(np.argmax(before)) if len(before) else None
    high = first + 1 + int(np.argmax(after)) if len(after) else None
    second = low if high is None or (low is not None and keys[low] >= keys[high]) else high
    assert second is not None
    return second


def _unmasked(keys: np.ndarray, ids) -> list[int]:
    """``ids`` (a sequence of token ids) without those whose key is -inf, in order."""
    ids = np.asarray(ids, dtype=np.intp)
    return ids[np.isfinite(keys[ids])].tolist()


def ranked_tokens(
    keys: np.ndarray,
    first: int,
    rest: bool = True,
    narrow: Callable[[np.ndarray], np.ndarray] | None = None,
    top: np.ndarray | None = None,
    favourite: int | None = None,
) -> Iterator[int]:
    """Token ids by descending key: the top ``first`` from a partial sort, then (with ``rest``)
    the others from a full one; tokens whose key is -inf (masked out) never come.

    Without ``top`` the first two come from argmax (the second by :func:`next_id`, only once
    the walk asks for it), and the partial sort waits for a third. ``narrow``, asked only when
    the walk goes past the top (most steps never do), returns the keys with more tokens masked
    out (a cheap superset of the passing ones: the token-mask store's), so that the scan of the
    rest never checks a token it already rules out. ``top``: :func:`top_ids` of ``keys`` for at
    least ``first`` tokens, and ``favourite``: the argmax of ``keys``, when the step has them
    already.
    """
    # (masked tokens are dropped from the top rather than counted first: a pass over every key
    # less, 0.05 ms at 151,936 tokens; when some are dropped, every finite key was in the top)
    first = min(first, keys.shape[-1])
    best: list[int] = []
    if first:
        if top is not None and len(top) >= first:
            best = _unmasked(keys, top[:first])
            yield from best
        else:  # (the second is read only when the walk asks for it)
            lead = int(np.argmax(keys)) if favourite is None else favourite
            if math.isfinite(keys[lead]):  # (a masked lead: every key is masked)
                best.append(lead)
                yield lead
            if best and first > 1:
                second = next_id(keys, lead)
                if math.isfinite(keys[second]):
                    best.append(second)
                    yield second
                if len(best) == 2 < first:
                    more = _unmasked(keys, top_ids(keys, first)[2:])
                    best += more
                    yield from more
    if rest and len(best) == first < keys.shape[-1]:
        if narrow is not None:
            keys = narrow(keys)
        candidates = np.flatnonzero(np.isfinite(keys))
        seen = set(best)
        order = candidates[np.argsort(-keys[candidates], kind="stable")].tolist()
        yield from (token for token in order if token not in seen)
