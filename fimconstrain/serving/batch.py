"""Checking a decoding step's batch: which tokens each constrained row allows.

A :class:`RowQuery` says what changed for one request since the last step (committed tokens
kept and added), the speculative tokens in front of this row and the row's candidates (its top
``k`` logits, best first, with their scores where the request's sampler reads them).
A :class:`BatchChecker` answers a whole step at once, so that :class:`InlineChecker` (this
process) and :class:`~.pool.ConstraintPool` (worker processes that own the requests) are
interchangeable under the vLLM processor and the benchmark.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from .requests import FimArgs, RequestConstraint, TokenTable
from .support import SamplerSupport


@dataclass(frozen=True)
class RowQuery:
    """One logits row of a step: request ``key``'s committed middle becomes its first ``keep``
    tokens and ``new``; the row's tokens are then ``drafts`` (speculative, not committed);
    ``candidates`` are the row's best tokens, best first, and ``scores`` their logits at the
    sampler's temperature (empty unless the request has a bounded sampler,
    :class:`~.support.SamplerSupport`)."""

    key: int
    keep: int
    new: tuple[int, ...]
    drafts: tuple[int, ...]
    candidates: tuple[int, ...]
    scores: tuple[float, ...] = ()


def keep_only(logits: torch.Tensor, answers: Sequence[Sequence[int]]) -> torch.Tensor:
    """``logits`` at -inf but at each row's allowed tokens: one fill and one indexed copy
    through the flat view (a boolean mask and its inverse cost two more passes over it). The
    flat index is built by numpy (half the time of a Python list through ``torch.tensor``)."""
    vocab = logits.shape[1]
    lengths = [len(allowed) for allowed in answers]
    tokens = np.fromiter(itertools.chain.from_iterable(answers), dtype=np.int64, count=sum(lengths))
    rows = np.repeat(np.arange(len(answers), dtype=np.int64), lengths)
    index = torch.from_numpy(rows * vocab + tokens).to(logits.device)
    out = torch.full(logits.shape, float("-inf"), dtype=logits.dtype, device=logits.device)
    out.view(-1)[index] = logits.reshape(-1)[index]
    return out


def constrain(
    checker: BatchChecker,
    logits: torch.Tensor,
    queries: Sequence[RowQuery],
    top_ks: Sequence[int],
    samplers: Sequence[SamplerSupport | None],
) -> torch.Tensor:
    """``logits`` (row ``i`` for ``queries[i]``, whose candidates this fills in) with every token
    the row does not allow at -inf: a row's candidates are its finite top ``top_ks[i]``, with
    their scores (logits at the sampler's temperature) where ``samplers[i]`` bounds the check.
    The vLLM processor's step, and what the benchmarks time."""
    best = torch.topk(logits, min(logits.shape[1], max(top_ks)))
    ids, finite = best.indices.tolist(), torch.isfinite(best.values).sum(dim=1).tolist()
    scores: list[list[float]] = [[] for _ in queries]
    if any(s is not None for s in samplers):  # only a bounded sampler reads the scores
        scale = [s.temperature if s is not None and not s.greedy else 1.0 for s in samplers]
        scores = (best.values / torch.tensor(scale, device=logits.device)[:, None]).tolist()
    filled = []
    for q, top_k, sampler, row, n_finite, score_row in zip(queries, top_ks, samplers, ids, finite, scores):
        n = min(n_finite, top_k)  # finite values come first
        kept_scores = tuple(score_row[:n]) if sampler is not None else ()
        filled.append(RowQuery(q.key, q.keep, q.new, q.drafts, tuple(row[:n]), kept_scores))
    return keep_only(logits, checker.check(filled))


class BatchChecker(Protocol):
    """Requests added and removed by key, and the allowed tokens of a step's rows."""

    def add(
        self, key: int, args: FimArgs, extra_stops: Iterable[int] = (), sampler: SamplerSupport | None = None
    ) -> None: ...

    def remove(self, key: int) -> None: ...

    def check(self, rows: Sequence[RowQuery]) -> list[list[int]]: ...

    def close(self) -> None: ...


class InlineChecker:
    """A :class:`BatchChecker` in this process, one row after another.

    A key that is added again replaces its request (vLLM recycles request slots)."""

    def __init__(self, table: TokenTable):
        self.table = table
        self.requests: dict[int, RequestConstraint] = {}

    def add(
        self, key: int, args: FimArgs, extra_stops: Iterable[int] = (), sampler: SamplerSupport | None = None
    ) -> None:
        self.requests[key] = RequestConstraint(args, self.table, extra_stops, sampler)

    def remove(self, key: int) -> None:
        self.requests.pop(key, None)

    def check(self, rows: Sequence[RowQuery]) -> list[list[int]]:
        out = []
        for row in rows:
            request = self.requests[row.key]
            if row.new or row.keep < len(request.ids):
                request.sync(row.keep, row.new)
            out.append(request.allowed(row.candidates, row.drafts, row.scores))
        return out

    def close(self) -> None:
        self.requests.clear()
