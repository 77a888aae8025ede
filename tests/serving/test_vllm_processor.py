"""The vLLM logits processor driven as vLLM's Model Runner V2 drives it: loaded by vLLM's own
loader through this package's entry point, requests with their real ``SamplingParams`` added
into recycled slots, rows reordered every step, a request that is not FIM left alone, a row
still prefilling skipped, ``apply`` on a logits tensor, the token history written and
``total_len`` grown as vLLM's post-sampling kernel does.  Every mask is compared with what the
public contract, ``fim_checker``, allows.

vLLM's request buffers need CUDA (pinned memory), so the buffers here are CPU tensors with the
same attributes (``.gpu`` for the device tensor, ``.np`` for the host copy); everything the
processor sees is vLLM's own class.  Tokens whose text is not whole UTF-8 on its own are held at
-inf in the logits (as a previous stage would mask them) and left out of the comparison: the
oracle below judges whole characters only.
"""

from __future__ import annotations

import importlib
import math
import os
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fimconstrain import fim_checker
from fimconstrain.decoding.tokens.fim_formats import TextCodec


def require(name: str):
    """The module; in CI (``CI`` set) its absence fails the test, elsewhere it skips."""
    if os.environ.get("CI"):
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=f"{name} is not installed (CI installs it: see .ci/run)")


require("vllm")
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.worker.gpu.sample.logits_processor import (  # noqa: E402
    LogitsContext,
    build_custom_logits_processors,
)

from fimconstrain.serving.vllm_processor import VllmFimProcessor  # noqa: E402
from fimconstrain.serving.vllm_runner_v2 import FimProcessorV2  # noqa: E402


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """A tiny random FIM model (SantaCoder's tokens)."""
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), context=256)


MAX_REQS, MAX_LEN, TOP_K = 4, 512, 8
#: (prefix, suffix, python version): cuts of the kind the editor sends
CUTS = [
    ("def area(w, h):\n    return (w *", ")\n\nprint(area(2, 3))\n", "3.12"),
    ("import os\nfor name in os.listdir('.'):\n    if name.", ":\n        print(name)\n", "3.11"),
    ("x = [1, 2,", "]\n", "3.8"),
    ("class A:\n    def f(self):\n        ", "\n", "3.14"),
]


class Buffer:
    """A CPU stand-in for vLLM's UVA/staged buffers: ``.gpu`` the tensor, ``.np`` its host view."""

    def __init__(self, *shape: int):
        self.gpu = torch.zeros(shape, dtype=torch.int32)
        self.np = self.gpu.numpy()


class Worker:
    """The parts of vLLM's GPU model runner that a logits processor sees (``RequestState`` slots
    and buffers, ``Sampler.add_request``/``apply_staged_writes``, the post-sampling update)."""

    def __init__(self, tokenizer_dir, workers: int):
        self.device, self.max_num_reqs, self.vocab_size = torch.device("cpu"), MAX_REQS, None
        self.all_token_ids = Buffer(MAX_REQS, MAX_LEN)
        self.prompt_len, self.prefill_len, self.total_len = (
            Buffer(MAX_REQS),
            Buffer(MAX_REQS),
            Buffer(MAX_REQS),
        )
        self.free = list(range(MAX_REQS))
        self.active: dict[int, SamplingParams] = {}
        config = SimpleNamespace(
            model_config=SimpleNamespace(tokenizer=str(tokenizer_dir)),
            additional_config={"fimconstrain": {"workers": workers}},
        )
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        self.vocab_size = len(self.tokenizer) + 3  # the model's rows may outnumber the tokenizer's
        (self.processor,) = build_custom_logits_processors(config, self, is_pooling_model=False)
        self.needs = {}

    def add(self, prompt: list[int], params: SamplingParams) -> int:
        slot = self.free.pop()
        self.prompt_len.np[slot] = self.prefill_len.np[slot] = len(prompt)
        self.total_len.gpu[slot] = len(prompt)
        self.all_token_ids.gpu[slot, : len(prompt)] = torch.tensor(prompt)
        self.needs[slot] = self.processor.add_request(slot, params)
        self.processor.apply_staged_writes()
        self.active[slot] = params
        return slot

    def remove(self, slot: int) -> None:
        del self.active[slot]
        self.free.append(slot)

    def apply(
        self, order: list[int], logits: torch.Tensor, prefilling: set[int] = frozenset()
    ) -> torch.Tensor:
        slots = torch.tensor(order, dtype=torch.int32)
        total = self.total_len.gpu[slots].long()
        pos = torch.tensor([int(t) - 1 - (40 if s in prefilling else 0) for s, t in zip(order, total)])
        ctx = LogitsContext(
            expanded_idx_mapping=slots,
            idx_mapping=slots,
            idx_mapping_np=slots.numpy(),
            expanded_local_pos=torch.zeros(len(order), dtype=torch.int32),
            input_ids=self.all_token_ids.gpu[slots, (total - 1).clamp(min=0)],
            pos=pos,
            seq_lens_upper_bound_np=(pos + 1).numpy(),
        )
        return self.processor.apply(logits.clone(), ctx)

    def commit(self, slot: int, token: int) -> None:
        total = int(self.total_len.gpu[slot])
        self.all_token_ids.gpu[slot, total] = token
        self.total_len.gpu[slot] = total + 1

    def middle(self, slot: int) -> list[int]:
        return self.all_token_ids.gpu[slot, self.prompt_len.np[slot] : self.total_len.gpu[slot]].tolist()


def fim_params(i: int, eos: int, **sampling) -> SamplingParams:
    """A FIM request for ``CUTS[i]`` (checked as vLLM's frontend checks it at admission)."""
    prefix, suffix, version = CUTS[i]
    extra = {"fim_prefix": prefix, "fim_suffix": suffix, "fim_python_version": version, "fim_top_k": TOP_K}
    params = SamplingParams(max_tokens=64, extra_args=extra, stop_token_ids=[eos], **sampling)
    VllmFimProcessor.validate_params(params)
    return params


def expected_allowed(codec, cut, middle, logits_row, stops, specials, whole, vocab) -> set[int]:
    """What ``fim_checker`` allows after ``middle``: the passing tokens among the row's top
    ``TOP_K`` finite logits, else every passing token (a stop token when the file is complete)."""
    prefix, suffix, version = cut
    text = codec.decode(middle)
    after = fim_checker(prefix, suffix, python_version=version).feed(text)
    assert after is not None

    def passes(token: int) -> bool:
        if token in stops:
            return after.is_complete()
        if token in specials or token not in whole:
            return False
        return after.feed(codec.decode([*middle, token])[len(text) :]) is not None

    values, ids = torch.topk(logits_row, TOP_K)
    top = [t for t, v in zip(ids.tolist(), values.tolist()) if np.isfinite(v)]
    passing = {t for t in top if passes(t)}
    return passing or {t for t in range(vocab) if passes(t)}


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "2-worker-pool"])
def test_masks_equal_what_fim_checker_allows(tiny_dir, workers):
    worker = Worker(tiny_dir, workers)
    assert type(worker.processor) is FimProcessorV2  # found through the entry point
    tok, codec = worker.tokenizer, TextCodec(worker.tokenizer)
    eos = tok.eos_token_id
    stops, specials = {eos}, set(tok.all_special_ids) | set(tok.added_tokens_decoder)  # markers too
    whole = {t for t in range(len(tok)) if "\ufffd" not in codec.decode([t])} - specials
    prompt = tok.encode("<fim-prefix>x<fim-suffix>y<fim-middle>")
    rng, gen = random.Random(0), torch.Generator().manual_seed(0)

    cut_of = {worker.add(prompt, fim_params(0, eos)): 0, worker.add(prompt, fim_params(1, eos)): 1}
    plain = worker.add(prompt, SamplingParams(max_tokens=12))
    assert worker.needs[plain] is False and all(worker.needs[s] for s in cut_of)
    next_cut, checked_rows = 2, 0
    for step in range(10):
        order = list(worker.active)
        rng.shuffle(order)  # vLLM reorders rows every step
        logits = torch.randn((len(order), worker.vocab_size), generator=gen)
        logits[:, sorted(set(range(worker.vocab_size)) - whole - stops)] = float("-inf")
        prefilling = {order[0]} if step == 3 else set()
        masked = worker.apply(order, logits, prefilling)
        for row, slot in enumerate(order):
            if slot not in cut_of or slot in prefilling:
                assert torch.equal(masked[row], logits[row]), "a row the processor must leave alone"
                continue
            allowed = {
                t for t in torch.isfinite(masked[row]).nonzero().flatten().tolist() if t in whole | stops
            }
            middle = worker.middle(slot)
            want = expected_allowed(
                codec, CUTS[cut_of[slot]], middle, logits[row], stops, specials, whole, len(tok)
            )
            assert allowed == want, (CUTS[cut_of[slot]], codec.decode(middle))
            assert torch.equal(masked[row][list(allowed)], logits[row][list(allowed)])  # never raised
            checked_rows += 1
        for row, slot in enumerate(order):
            if slot in prefilling:
                continue
            token = int(torch.argmax(masked[row]))
            if token in stops or len(worker.middle(slot)) >= 6:
                worker.remove(slot)  # finished: the slot goes back to the free list
                cut_of.pop(slot, None)
                if next_cut < len(CUTS):  # and a new request reuses it
                    cut_of[worker.add(prompt, fim_params(next_cut, eos))] = next_cut
                    next_cut += 1
            else:
                worker.commit(slot, token)
    assert next_cut == len(CUTS) and checked_rows >= 20
    worker.processor.checker.close()


def test_bad_arguments_fail_at_admission():
    for extra in (
        {"fim_prefix": 3},
        {"fim_prefix": "x", "fim_top_k": 0},
        {"fim_prefix": "x", "fim_python_version": "2.7"},
        {"fim_prefix": "x", "fim_python_version": 3.12},
    ):
        with pytest.raises(ValueError, match="fim_"):
            VllmFimProcessor.validate_params(SamplingParams(extra_args=extra))
    VllmFimProcessor.validate_params(SamplingParams(extra_args={"other": 1}))  # not FIM: fine


def sampler_keeps(logits_row: torch.Tensor, params: SamplingParams) -> set[int]:
    """The tokens vLLM's sampler can pick from ``logits_row`` (temperature, then min_p, then
    top_k and top_p; greedy takes the best): a reference written from vLLM's definitions."""
    finite = torch.isfinite(logits_row)
    if params.temperature == 0.0:
        return {int(torch.argmax(logits_row))}
    probs = torch.softmax(logits_row.double() / params.temperature, dim=-1)
    keep = finite & (probs >= params.min_p * probs.max())
    if params.top_k > 0:
        kth = torch.topk(torch.where(keep, probs, -1.0), min(params.top_k, int(keep.sum()))).values[-1]
        keep &= probs >= kth
    if params.top_p < 1.0:
        kept = torch.where(keep, probs, 0.0)
        kept /= kept.sum()
        order = torch.argsort(kept)
        below = torch.cumsum(kept[order], 0) <= 1.0 - params.top_p
        below[-1] = False  # the best always stays
        keep[order[below]] = False
    return set(keep.nonzero().flatten().tolist())


#: sampler settings, and whether the check may stop early under them (``top_p`` alone may not:
#: its nucleus depends on the mass of every allowed token)
SAMPLERS = {
    "greedy": (SamplingParams(temperature=0.0), True),
    "top_k": (SamplingParams(temperature=0.8, top_k=3), True),
    "top_k+top_p": (SamplingParams(temperature=0.7, top_k=4, top_p=0.8), True),
    "min_p": (SamplingParams(temperature=1.0, min_p=0.3), True),
    "top_p": (SamplingParams(temperature=0.7, top_p=0.8), False),
}


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "2-worker-pool"])
@pytest.mark.parametrize("name", list(SAMPLERS))
def test_a_bounded_sampler_checks_fewer_tokens_and_samples_the_same(tiny_dir, workers, name):
    """With greedy, top_k or min_p the mask may keep fewer tokens than the whole top-k mask,
    never other ones, and the sampler keeps exactly the same tokens from either; top_p alone
    gets the whole mask."""
    worker = Worker(tiny_dir, workers)
    tok, codec = worker.tokenizer, TextCodec(worker.tokenizer)
    eos = tok.eos_token_id
    stops, specials = {eos}, set(tok.all_special_ids) | set(tok.added_tokens_decoder)
    whole = {t for t in range(len(tok)) if "\ufffd" not in codec.decode([t])} - specials
    prompt = tok.encode("<fim-prefix>x<fim-suffix>y<fim-middle>")
    gen, (base, bounded) = torch.Generator().manual_seed(1), SAMPLERS[name]
    sampling = {
        "temperature": base.temperature,
        "top_k": base.top_k,
        "top_p": base.top_p,
        "min_p": base.min_p,
    }
    cut_of = {worker.add(prompt, fim_params(i, eos, **sampling)): i for i in range(2)}
    fewer = 0
    for _ in range(6):
        order = list(worker.active)
        logits = 4 * torch.randn((len(order), worker.vocab_size), generator=gen)  # peaked, as a model's
        logits[:, sorted(set(range(worker.vocab_size)) - whole - stops)] = float("-inf")
        masked = worker.apply(order, logits)
        for row, slot in enumerate(order):
            middle = worker.middle(slot)
            want = expected_allowed(
                codec, CUTS[cut_of[slot]], middle, logits[row], stops, specials, whole, len(tok)
            )
            allowed = set(torch.isfinite(masked[row]).nonzero().flatten().tolist())
            assert allowed <= want
            fewer += len(allowed) < len(want)
            full = logits[row].clone()
            full[sorted(set(range(worker.vocab_size)) - want)] = float("-inf")
            assert sampler_keeps(masked[row], base) == sampler_keeps(full, base)
            token = int(torch.argmax(masked[row]))
            if token not in stops:
                worker.commit(slot, token)
    assert (fewer > 0) == bounded  # the bound spared checks where it may
    worker.processor.checker.close()


def test_a_tie_with_the_last_token_kept_never_settles():
    """Greedy and vLLM's top-k keep every token whose value equals the last one kept, so the
    check goes on past a tie; min_p stops only strictly below its bar (scores: logits at the
    request's temperature)."""
    from fimconstrain.serving.support import SamplerSupport

    greedy, top2, min_p = SamplerSupport(greedy=True), SamplerSupport(top_k=2), SamplerSupport(min_p=0.5)
    assert not greedy.settled([], -1.0)
    assert greedy.settled([4.0], 3.0) and not greedy.settled([4.0], 4.0)
    assert (
        not top2.settled([4.0], 1.0) and top2.settled([4.0, 2.0], 1.0) and not top2.settled([4.0, 2.0], 2.0)
    )
    bar = 4.0 + math.log(0.5)  # a probability half the best's
    assert min_p.settled([4.0], bar - 0.01) and not min_p.settled([4.0], bar)
    for params, bound in [
        (SamplingParams(temperature=0.0), greedy),
        (SamplingParams(temperature=0.5, top_k=2), SamplerSupport(top_k=2, temperature=0.5)),
        (SamplingParams(temperature=1.0, top_p=0.9), None),  # top_p alone: the whole mask
        (SamplingParams(temperature=0.0, logprobs=3), None),  # log-probabilities asked for
    ]:
        assert SamplerSupport.of(params) == bound


def v1_plugins(config) -> list:
    """The installed plugins as Model Runner V1 builds them (``build_logitsprocs`` without its
    built-in processors, which need CUDA pinned memory): loaded by V1's own loader, then built with
    V1's arguments and sorted as its ``LogitsProcessors`` sorts them."""
    from vllm.v1.sample.logits_processor import LogitsProcessors, cached_load_custom_logitsprocs

    classes = cached_load_custom_logitsprocs(None)
    return list(LogitsProcessors(ctor(config, torch.device("cpu"), False) for ctor in classes).all)


class V1Worker:
    """The parts of vLLM's Model Runner V1 that a logits processor sees: ``build_logitsprocs``
    (entry-point plugins first), a persistent batch whose rows are removed, added and moved as
    ``BatchUpdate`` says, and each request's running output list that the runner appends to."""

    def __init__(self, tokenizer_dir, workers: int):
        from transformers import AutoTokenizer

        config = SimpleNamespace(
            model_config=SimpleNamespace(tokenizer=str(tokenizer_dir)),
            additional_config={"fimconstrain": {"workers": workers}},
            speculative_config=None,
        )
        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        self.vocab_size = len(self.tokenizer) + 3
        (self.processor,) = [p for p in v1_plugins(config) if type(p).__module__.startswith("fimconstrain")]
        self.rows: list[tuple[SamplingParams, list[int]] | None] = []

    def update(self, removed=(), added=(), moved=()) -> None:
        """Apply a batch change here and hand it to the processor, as the runner does."""
        from vllm.v1.sample.logits_processor import BatchUpdate

        for index in removed:
            self.rows[index] = None
        for index, params in added:
            self.rows.extend([None] * (index + 1 - len(self.rows)))
            self.rows[index] = (params, [])
        for a, b, direction in moved:
            self.rows[a], self.rows[b] = (
                (self.rows[b], self.rows[a]) if direction.name == "SWAP" else (None, self.rows[a])
            )
        update = BatchUpdate(
            batch_size=len(self.rows),
            removed=list(removed),
            added=[(i, p, [1, 2], self.rows[i][1]) for i, p in added],
            moved=list(moved),
        )
        self.processor.update_state(update)


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "2-worker-pool"])
def test_model_runner_v1_masks_equal_what_fim_checker_allows(tiny_dir, workers):
    """The plugin under Model Runner V1 (what vLLM runs on a CPU): found through the entry point
    by V1's own loader, rows added, moved, swapped and removed, every mask what ``fim_checker``
    allows after the request's running output, and a request without FIM arguments untouched."""
    from vllm.v1.sample.logits_processor import MoveDirectionality

    from fimconstrain.serving.vllm_runner_v1 import FimProcessorV1

    worker = V1Worker(tiny_dir, workers)
    assert type(worker.processor) is FimProcessorV1
    tok, codec = worker.tokenizer, TextCodec(worker.tokenizer)
    eos = tok.eos_token_id
    stops, specials = {eos}, set(tok.all_special_ids) | set(tok.added_tokens_decoder)
    whole = {t for t in range(len(tok)) if "\ufffd" not in codec.decode([t])} - specials
    gen = torch.Generator().manual_seed(3)
    cut_of = {0: 0, 2: 1}  # batch row -> cut
    worker.update(
        added=[(0, fim_params(0, eos)), (1, SamplingParams(max_tokens=12)), (2, fim_params(1, eos))]
    )
    checked = 0
    for step in range(8):
        if step == 2:  # a swap and a one-way move, as the runner condenses its batch
            worker.update(moved=[(0, 2, MoveDirectionality.SWAP)])
            cut_of = {0: cut_of[2], 2: cut_of[0]}
        if step == 4:
            worker.update(removed=[0], added=[(3, fim_params(2, eos))])
            cut_of = {2: cut_of[2], 3: 2}
        if step == 5:
            worker.update(moved=[(3, 0, MoveDirectionality.UNIDIRECTIONAL)])
            cut_of = {0: cut_of[3], 2: cut_of[2]}
        logits = torch.randn((len(worker.rows), worker.vocab_size), generator=gen)
        logits[:, sorted(set(range(worker.vocab_size)) - whole - stops)] = float("-inf")
        masked = worker.processor.apply(logits.clone())
        for row, entry in enumerate(worker.rows):
            if entry is None:
                continue
            if row not in cut_of:
                assert torch.equal(masked[row], logits[row]), "a request without FIM arguments"
                continue
            output = entry[1]
            allowed = {
                t for t in torch.isfinite(masked[row]).nonzero().flatten().tolist() if t in whole | stops
            }
            want = expected_allowed(
                codec, CUTS[cut_of[row]], output, logits[row], stops, specials, whole, len(tok)
            )
            assert allowed == want, (CUTS[cut_of[row]], codec.decode(output))
            checked += 1
            token = int(torch.argmax(masked[row]))
            if token not in stops:
                output.append(token)  # the runner appends to the request's own list
    assert checked >= 14
    worker.processor.checker.close()


@pytest.mark.parametrize("runner", ["v1", "v2"])
def test_a_processor_that_cannot_be_built_never_breaks_the_engine(runner, caplog, tmp_path):
    """No tokenizer where the config says: each runner's loader still builds the plugin, which
    logs why FIM requests go unconstrained and leaves every row as it is."""
    from fimconstrain.serving.vllm_processor import Passthrough

    config = SimpleNamespace(
        model_config=SimpleNamespace(tokenizer=str(tmp_path / "missing")), speculative_config=None
    )
    with caplog.at_level("ERROR", logger="vllm.fimconstrain"):
        if runner == "v1":
            procs = v1_plugins(config)
        else:
            req_states = SimpleNamespace(
                **{name: None for name in ("all_token_ids", "prompt_len", "prefill_len", "total_len")},
                device=torch.device("cpu"),
                max_num_reqs=MAX_REQS,
                vocab_size=16,
            )
            procs = build_custom_logits_processors(config, req_states, is_pooling_model=False)
    (plugin,) = [p for p in procs if isinstance(p, Passthrough)]
    assert "will NOT be constrained" in caplog.text
    logits = torch.randn(2, 16)
    out = plugin.apply(logits.clone()) if runner == "v1" else plugin.apply(logits.clone(), None)
    assert torch.equal(out, logits) and plugin.add_request(0, fim_params(0, 0)) is False
