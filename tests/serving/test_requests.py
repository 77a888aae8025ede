"""One serving request's constraint (:mod:`fimconstrain.serving.requests`) with the token-mask
store screening its checks and without it: the same allowed tokens for the top-``k`` check,
the bounded samplers' check and the full mask, and no token the store rules out is fed to the
checker past a state's first candidate."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from fimconstrain.decoding.constraint import ConstraintState
from fimconstrain.serving.requests import FimArgs, RequestConstraint, TokenTable
from fimconstrain.serving.support import SamplerSupport

CUTS = [
    ("def area(w, h):\n    return (w *", ")\n\nprint(area(2, 3))\n", "3.12"),
    ("import os\nfor name in os.listdir('.'):\n    if name.", ":\n        print(name)\n", "3.11"),
    ("x = [1, 2,", "]\n", "3.8"),
    ("class A:\n    def f(self):\n        ", "\n", "3.14"),
]
SAMPLERS = [None, SamplerSupport(greedy=True), SamplerSupport(min_p=0.2, temperature=1.0)]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    from transformers import AutoTokenizer

    from fimconstrain.evaluation.tiny_model import build_tiny_model

    return AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny"), context=256))


@pytest.mark.parametrize("sampler", SAMPLERS, ids=["mask", "greedy", "min_p"])
@pytest.mark.parametrize("cut", range(len(CUTS)))
def test_the_store_screens_every_check_and_changes_no_answer(tokenizer, cut, sampler, monkeypatch):
    fed: list[tuple[ConstraintState, int, bool]] = []
    advance = ConstraintState._advance

    def recording(state, token):
        fed.append((state, token, state.fed == 1))
        return advance(state, token)

    monkeypatch.setattr(ConstraintState, "_advance", recording)
    screened_table = TokenTable.from_tokenizer(tokenizer)
    plain_table = TokenTable.from_tokenizer(tokenizer, screened=False)
    assert screened_table.stores is not None and plain_table.stores is None
    args = FimArgs(*CUTS[cut][:2], CUTS[cut][2], top_k=8)
    screened = RequestConstraint(args, screened_table, sampler=sampler)
    plain = RequestConstraint(args, plain_table, sampler=sampler)
    assert screened.states[-1].store is not None and plain.states[-1].store is None
    rng = random.Random(cut)
    size = screened_table.size
    full_masks = 0
    for _ in range(6):
        # a row's candidates, best first; now and then none of them passes: the full mask
        candidates = rng.sample(range(size), 8) if rng.random() < 0.6 else sorted(plain.banned_ids)[:1]
        scores = sorted((rng.gauss(0, 3) for _ in candidates), reverse=True)
        kept = scores if sampler is not None else ()
        answers = [r.allowed(candidates, (), kept) for r in (plain, screened)]
        assert sorted(answers[0]) == sorted(answers[1])
        full_masks += not set(answers[0]) & set(candidates)
        token = next((t for t in answers[0] if t not in plain.stop_ids), None)
        if token is None:
            break
        for request in (plain, screened):
            request.sync(len(request.ids), [token])
    assert full_masks
    screened_feeds = [(s, t, first) for s, t, first in fed if s.store is not None]
    assert screened_feeds and all(first or s.admits(t) for s, t, first in screened_feeds)
    assert len(screened_feeds) < len(fed) - len(screened_feeds)  # fewer tokens checked
