"""One serving request's constraint (:mod:`fimconstrain.serving.requests`) with the token-mask
store screening its checks and without it: the same allowed tokens for the top-``k`` check,
the bounded samplers' check and the full mask, and no token the store rules out is fed to the
checker past a state's first candidate."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

from fimconstrain import fim_checker
from fimconstrain.decoding.loop.constraint import ConstraintState
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
    from tiny_model import build_tiny_model
    from transformers import AutoTokenizer

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


@pytest.fixture(scope="module")
def table(tokenizer) -> TokenTable:
    return TokenTable.from_tokenizer(tokenizer)


#: what a model that never wants to stop writes: it opens brackets and calls, and goes on
OPENERS = ["(", " (", "[", " f(", "x", " +", ",", " and", " 1", " lambda"]


def write_on(request: RequestConstraint, codec, rng: random.Random, steps: int) -> tuple[str, bool]:
    """Greedy decoding for ``steps`` tokens (a stop token counts as one) by a model whose best
    tokens are :data:`OPENERS` and some random ones, never a stop token: the middle, and
    whether it ended with a stop token."""
    openers = [codec.encode(text, leading_space=False)[0] for text in OPENERS]
    for _ in range(steps):
        candidates = openers + rng.sample(range(request.table.size), 24)
        token = request.allowed(candidates)[0]
        if token in request.stop_ids:
            return codec.decode(request.ids), True
        request.sync(len(request.ids), [token])
    return codec.decode(request.ids), False


@pytest.mark.parametrize("budget", [3, 6, 12, 24])
def test_a_budgeted_request_ends_with_a_stop_token_where_the_file_parses(table, budget):
    """Paper 002 on the server: with ``max_tokens`` known, the middle ends inside it with a
    stop token and the file parses; without it the same model reaches the limit mid-structure."""
    unfinished = 0
    for index, (prefix, suffix, version) in enumerate(CUTS):
        bounded = RequestConstraint(FimArgs(prefix, suffix, version, budget=budget), table)
        middle, stopped = write_on(bounded, table.codec, random.Random(index), budget)
        assert stopped, f"cut {index}: the budget ran out before a stop token ({middle!r})"
        after = fim_checker(prefix, suffix, python_version=version).feed(middle)
        assert after is not None and after.is_complete(), (index, middle)
        free = RequestConstraint(FimArgs(prefix, suffix, version), table)
        middle, stopped = write_on(free, table.codec, random.Random(index), budget)
        after = fim_checker(prefix, suffix, python_version=version).feed(middle)
        unfinished += not stopped and not after.is_complete()
    assert unfinished >= len(CUTS) // 2  # the model alone would not have ended in time


def test_a_request_from_sampling_params_carries_its_max_tokens():
    params = SimpleNamespace(extra_args={"fim_prefix": "x = (", "fim_suffix": ")\n"}, max_tokens=32)
    args = FimArgs.of_request(params)
    assert args is not None and (args.prefix, args.suffix, args.budget) == ("x = (", ")\n", 32)
    assert FimArgs.of_request(SimpleNamespace(extra_args={}, max_tokens=32)) is None


@pytest.mark.parametrize(
    "prefix, suffix, writes, invents",
    [
        ("x = ", "\n", (" +", " -"), True),
        ("def f(a, b=", "):\n    pass\n", (" +", " -"), True),
        ("x = (1", "\n", ("(", "["), False),
    ],
)
def test_a_finish_that_invents_ends_with_the_stop_token_the_request_named(
    table, prefix, suffix, writes, invents
):
    """Where the budget end has to write a finish that invents (a placeholder name where only an
    expression ends the line), a request that named an ``invented_stop`` ends with it, and the
    same middle ends with an ordinary stop token where it named none; a finish that only closes
    what is open ends with an ordinary stop token either way."""
    marker = min(table.special_ids - table.stop_ids)
    openers = [table.codec.encode(text, leading_space=False)[0] for text in writes]
    ends = []
    for named in (marker, None):
        args = FimArgs(prefix, suffix, "3.12", budget=4, invented_stop=named)
        request = RequestConstraint(args, table, extra_stops=() if named is None else (marker,))
        for _ in range(4):
            token = request.allowed(openers)[0]
            if token in request.stop_ids or token == named:  # (vLLM stops at its stop_token_ids)
                break
            request.sync(len(request.ids), [token])
        middle = table.codec.decode(request.ids)
        after = fim_checker(prefix, suffix, python_version="3.12").feed(middle)
        assert after is not None and after.is_complete(), middle
        ends.append((middle, token))
    (marked_middle, marked_stop), (middle, stop) = ends
    assert marked_middle == middle
    assert stop in table.stop_ids
    assert marked_stop == (marker if invents else stop)


def test_an_invented_stop_must_be_one_of_the_request_s_stop_tokens():
    extra = {"fim_prefix": "x = ", "fim_suffix": "\n", "fim_invented_stop": 7}
    with pytest.raises(ValueError, match="stop_token_ids"):
        FimArgs.of_request(SimpleNamespace(extra_args=extra, max_tokens=8, stop_token_ids=[]))
    args = FimArgs.of_request(SimpleNamespace(extra_args=extra, max_tokens=8, stop_token_ids=[7]))
    assert args is not None and args.invented_stop == 7
    with pytest.raises(ValueError, match="token id"):
        FimArgs.from_extra_args({**extra, "fim_invented_stop": "<fim_prefix>"})
