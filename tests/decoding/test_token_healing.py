"""Token healing at the left edge: the prompt ends before the prefix's last token, the first
generated tokens write it again, and the middle is what comes after it (a cursor that splits a
token, ``retu|``, must not make the model start from a boundary it never saw). Also the
per-token confidence each result carries."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import fimconstrain  # noqa: E402
from fimconstrain.decoding.loop.constraint import ConstraintState, healed_tail, rest_of_healing  # noqa: E402
from fimconstrain.decoding.loop.generate import FimDecoder  # noqa: E402
from fimconstrain.decoding.loop.options import MODES  # noqa: E402
from fimconstrain.decoding.loop.validity import middle_of  # noqa: E402
from fimconstrain.decoding.models.loading import load_model  # noqa: E402
from fimconstrain.decoding.tokens.fim_formats import build_prompt  # noqa: E402

PREFIXES = ["def f(items):\n    retu", "import os\nname = os.pa", "x = value_of", "total = 1 +"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_model import build_tiny_model

    return load_model(build_tiny_model(tmp_path_factory.mktemp("tiny_model"), context=256))


@pytest.fixture(scope="module")
def decoder(tiny):
    return FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)


class _Scripted(torch.nn.Module):
    """The model emits ``script`` token by token, then the stop token."""

    def __init__(self, model, script: list[int], eos: int):
        super().__init__()
        self.inner, self.config, self.calls = model, model.config, 0
        self.script, self.eos = script, eos

    @property
    def device(self):
        return self.inner.device

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        logits = out.logits
        wanted = self.script[self.calls] if self.calls < len(self.script) else self.eos
        logits[..., wanted] = logits.max() + 100.0
        self.calls += 1
        return out


def test_rest_of_healing():
    assert rest_of_healing("retu", "re") == "tu"
    assert rest_of_healing("retu", "retu") == ""
    assert rest_of_healing("retu", "return x") == ""
    assert rest_of_healing("retu", "x") is None
    assert rest_of_healing("retu", "ret ") is None


@pytest.mark.parametrize("prefix", PREFIXES, ids=repr)
def test_healed_text_is_the_prefix_last_token(decoder, prefix):
    tail = healed_tail(decoder.codec, prefix)
    assert tail and prefix.endswith(tail)
    assert decoder.codec.decode(decoder.codec.encode(prefix)[-1:]) == tail


@pytest.mark.parametrize("prefix", ["", "x = 1\n", "def f():\n", "if x:\n        "], ids=repr)
def test_nothing_is_healed_at_a_file_or_line_start(decoder, prefix):
    """(This tokenizer writes the last prefix's line break and indentation as one token.)"""
    assert healed_tail(decoder.codec, prefix) == ""


@pytest.mark.parametrize("prefix", ["total = ", "for x in ", "f(a, ", "def f():\n    ", "f(a,\n  "], ids=repr)
def test_blanks_after_code_on_the_line_and_indentation_are_healed(decoder, prefix):
    """A lone space after code, or a line's indentation, is a token the model would not have
    seen there (its words carry their own space): the prompt ends before it and the model
    writes it with the next word."""
    tail = healed_tail(decoder.codec, prefix)
    assert tail and not tail.strip() and prefix.endswith(tail)
    assert decoder.codec.decode(decoder.codec.encode(prefix)[-1:]) == tail


def test_the_prompt_ends_before_the_healed_text(decoder):
    prefix, suffix = PREFIXES[0], "\n"
    tail = healed_tail(decoder.codec, prefix)
    fmt, codec = decoder.fim_format, decoder.codec
    healed_prompt = build_prompt(fmt, codec, prefix[: -len(tail)], suffix)
    plain_prompt = build_prompt(fmt, codec, prefix, suffix)
    assert healed_prompt != plain_prompt
    result = decoder.generate(prefix, suffix, mode="unconstrained", max_new_tokens=4)
    assert result.prompt_tokens == len(healed_prompt)


def test_the_constraint_makes_the_tokens_write_the_healed_text_first(decoder):
    prefix, suffix = "def f(items):\n    retu", "\n"
    tail = healed_tail(decoder.codec, prefix)
    state = ConstraintState(fimconstrain.fim_checker(prefix, suffix), decoder.codec, healing=tail)
    assert not state.can_end()  # nothing may end before the healed text is written again
    for token in decoder.codec.encode(tail + "rn items"):
        state = state.child(token)
        assert state is not None
    assert state.healing == "" and state.can_end()
    stray = decoder.codec.encode("x")[0]
    assert ConstraintState(state.checker, decoder.codec, healing=tail).child(stray) is None


@pytest.mark.parametrize(
    ("prefix", "rest"),
    [("def f(items):\n    retu", "rn len(items)"), ("def f(items):\n    ", "return len(items)")],
    ids=["split word", "indentation"],
)
def test_a_scripted_model_completes_the_healed_text(tiny, prefix, rest):
    """The model writes the healed text again with what follows, split as its tokenizer splits
    it (the indentation's last blank goes with the word: ``   `` + `` return``)."""
    suffix = "\n"
    probe = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    tail = healed_tail(probe.codec, prefix)
    script = probe.codec.encode(tail + rest)
    eos = next(iter(probe.vocabulary.stop_ids))
    decoder = FimDecoder.from_model(_Scripted(tiny.model, script, eos), tiny.tokenizer, tiny.fim_format)
    result = decoder.generate(prefix, suffix, mode="constrained", max_new_tokens=len(script) + 2)
    assert (result.healed, result.middle, result.stopped) == (tail, rest, "eos")
    assert result.valid


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_returns_only_what_follows_the_healed_text(decoder, mode):
    prefix, suffix = "import os\nname = os.pa", "\nprint(name)\n"
    result = decoder.generate(prefix, suffix, mode=mode, max_new_tokens=8)
    assert result.healed == healed_tail(decoder.codec, prefix)
    written = decoder.codec.decode(result.token_ids)
    assert written.startswith(result.healed) or not result.middle
    if result.raw_middle is None and result.stopped in ("eos", "budget"):
        assert result.middle == middle_of(decoder.codec, result.token_ids, result.healed)
    if mode != "unconstrained" and mode != "checked":
        assert fimconstrain.fim_checker(prefix, suffix if mode != "prefix" else "").feed(result.middle)


def test_healing_can_be_turned_off(decoder):
    prefix = PREFIXES[1]
    result = decoder.generate(prefix, "\n", mode="constrained", max_new_tokens=4, heal=False)
    assert result.healed == ""


@pytest.mark.parametrize("mode", MODES)
def test_each_token_carries_the_model_log_probability(decoder, mode):
    """The item's confidence: one log-probability per token, from the model's own distribution."""
    result = decoder.generate("x = [1, 2", "]\n", mode=mode, max_new_tokens=6)
    assert len(result.logprobs) == len(result.token_ids)
    assert all(lp <= 0.0 for lp in result.logprobs)
    if result.logprobs:
        assert result.mean_logprob == pytest.approx(sum(result.logprobs) / len(result.logprobs))


def test_the_middle_never_fuses_with_a_name_after_the_cursor(decoder):
    """``def |add(self)``: a middle that ends in a name character would make one name with
    ``add``; the constraint does not let it end there."""
    prefix, suffix = "class A:\n    def ", "add(self):\n        return 1\n"
    checker = fimconstrain.fim_checker(prefix, suffix)
    state = ConstraintState(checker, decoder.codec, word_suffix=True)
    for token in decoder.codec.encode("x"):
        state = state.child(token)
    assert state is not None and not state.can_end()  # `def xadd(self)` is valid, but fused
    result = decoder.generate(prefix, suffix, mode="constrained", max_new_tokens=12)
    assert not (result.middle and ("a" + result.middle[-1]).isidentifier())


def test_no_end_of_middle_cut_fuses_with_the_suffix():
    from fimconstrain.decoding.loop.end_of_middle import finish_middle

    checker = fimconstrain.fim_checker("x = ", "value\n")
    assert finish_middle(checker, "other", suffix="value\n") is None
    assert finish_middle(checker, "other + ", suffix="value\n") == "other + "


def test_the_healing_index_keeps_every_token_that_can_write_the_healed_text(decoder):
    """A token is left out of a healing step's walk only when its own text neither starts the
    healed text nor starts with it: exactly those ``rest_of_healing`` refuses."""
    codec = decoder.codec
    size = len(decoder.tokenizer) + 3  # the model may have more rows than the tokenizer tokens
    index = decoder.vocabulary.healing_index(size)
    for healing in ["retu", "pa", "value_of", "+", "na", "é", " us", " ", "    ", "\n", "z", "\U0010ffff"]:
        kept = set(np.flatnonzero(index.mask(healing)).tolist())
        assert set(range(len(decoder.tokenizer), size)) <= kept  # ids the tokenizer does not know
        for token in range(len(decoder.tokenizer)):
            text = codec.decode([token])
            judged = bool(text) and "\ufffd" not in text
            assert (token in kept) == (not judged or rest_of_healing(healing, text) is not None), (
                healing,
                text,
            )
        assert set(index.writers(healing).tolist()) | set(index.always) == kept


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_healing_steps_walk_only_what_can_heal_and_choose_the_same(decoder, monkeypatch, temperature):
    """With the index, decoding chooses the very tokens the walk over the whole vocabulary
    chose, and checks fewer candidates."""
    from fimconstrain.decoding.tokens.healing_index import HealingIndex

    runs = {}
    for use_index in (True, False):
        if not use_index:  # every token kept: the walk over the whole vocabulary
            monkeypatch.setattr(HealingIndex, "writers", lambda self, healing: range(self.vocab_size))
        fresh = FimDecoder(decoder.backend)
        runs[use_index] = [
            fresh.generate(prefix, "\n", max_new_tokens=6, temperature=temperature, seed=3, semantic=False)
            for prefix in PREFIXES
        ]
    for with_index, without in zip(runs[True], runs[False]):
        assert with_index.token_ids == without.token_ids and with_index.middle == without.middle
    assert sum(r.candidates_checked for r in runs[True]) < sum(r.candidates_checked for r in runs[False])
