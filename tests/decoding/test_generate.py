"""FIM decoding with models: formats, offline loading, the constrained decode loop, the LogitsProcessor.

Models here are a tiny randomly initialised GPTBigCode and a byte-level BPE
tokenizer trained in the fixture on a few standard-library files, so the tests
need no network and run in seconds; one test uses the shipped default model
when it is present.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
import numpy as np  # noqa: E402

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import fimconstrain  # noqa: E402
from fimconstrain.decoding.loop.constraint import ConstraintState  # noqa: E402
from fimconstrain.decoding.loop.generate import FimDecoder  # noqa: E402
from fimconstrain.decoding.loop.logits_processor import TransformersFimProcessor  # noqa: E402
from fimconstrain.decoding.loop.options import Controls  # noqa: E402
from fimconstrain.decoding.loop.validity import longest_valid_prefix, middle_of, parses  # noqa: E402
from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR, ModelNotFoundError, load_model  # noqa: E402
from fimconstrain.decoding.tokens.fim_formats import (  # noqa: E402
    FORMATS,
    FimFormatError,
    TextCodec,
    build_prompt,
    detect_format,
    get_format,
    split_budget,
)

# (prefix, suffix) pairs: an open expression, a statement to fill inside a block, a call's arguments
CASES = [
    ("def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"),
    ("values = [1, 2,", "]\ntotal = sum(values)\n"),
    (
        "class Point:\n    def __init__(self, x, y):\n        self.x = x\n",
        "\n    def norm(self):\n        return self.x\n",
    ),
    ("import os\nname = os.path.join(", ")\n"),
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """A random 2-layer GPTBigCode and a 600-token byte-level BPE tokenizer with SantaCoder's FIM tokens."""
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), context=256)


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_model(tiny_dir)


class _Steered(torch.nn.Module):
    """Wraps a causal LM and rewrites its logits at each step with ``steer(logits, step)``."""

    def __init__(self, model):
        super().__init__()
        self.inner, self.config, self.calls = model, model.config, 0

    @property
    def device(self):
        return self.inner.device

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        self.steer(out.logits, self.calls)
        self.calls += 1
        return out


class _EosFirst(_Steered):
    """The stop token always has the highest logit (the worst case for EOS checks)."""

    def __init__(self, model, eos: int):
        super().__init__(model)
        self.eos = eos

    def steer(self, logits, step):
        logits[..., self.eos] = logits.max() + 100.0


class _Scripted(_Steered):
    """The model emits ``script`` token by token, and never a stop token."""

    def __init__(self, model, script: list[int], eos: int):
        super().__init__(model)
        self.script, self.eos = script, eos

    def steer(self, logits, step):
        top = logits.max() + 100.0
        logits[..., self.eos] = logits.min() - 100.0
        if step < len(self.script):
            logits[..., self.script[step]] = top


# ---------------------------------------------------------------- formats


def _fake_tokenizer(tokens):
    return SimpleNamespace(get_vocab=lambda: {t: i for i, t in enumerate(tokens)})


@pytest.mark.parametrize(
    "name, tokens",
    [
        ("santacoder", ["<fim-prefix>", "<fim-suffix>", "<fim-middle>", "<|endoftext|>"]),
        ("starcoder", ["<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<file_sep>"]),
        ("codellama", ["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"]),
        ("deepseek", ["<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"]),
        ("qwen", ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>"]),
        ("codestral", ["[SUFFIX]", "[PREFIX]", "</s>"]),
    ],
)
def test_format_detected_from_vocabulary(name, tokens):
    assert detect_format(_fake_tokenizer(["a", "b"] + tokens)).name == name


def test_format_by_name_and_errors(tiny):
    assert get_format("StarCoder2") is FORMATS["starcoder"]
    assert get_format("qwen2.5-coder") is FORMATS["qwen"]
    with pytest.raises(FimFormatError, match="unknown FIM format"):
        get_format("gpt-17")
    with pytest.raises(FimFormatError, match="no known FIM marker"):
        detect_format(_fake_tokenizer(["a", "<s>"]))
    with pytest.raises(FimFormatError, match="no PRE token"):
        FORMATS["starcoder"].marker_ids(tiny.tokenizer)  # hyphens, not underscores, in this vocabulary


def test_prompt_layouts(tiny):
    tok, fmt = tiny.tokenizer, tiny.fim_format
    codec = TextCodec(tok)
    pre, mid, suf = (tok.convert_tokens_to_ids(t) for t in ("<fim-prefix>", "<fim-middle>", "<fim-suffix>"))
    psm = build_prompt(fmt, codec, "x = (", ")\n")
    assert psm == [pre] + codec.encode("x = (") + [suf] + codec.encode(")\n") + [mid]
    spm = build_prompt(fmt, codec, "x = (", ")\n", order="spm")
    assert spm == [pre, suf] + codec.encode(")\n") + [mid] + codec.encode("x = (")
    cut = build_prompt(fmt, codec, "a = 1\n" * 50, "b = 2\n" * 50, max_tokens=23)
    assert len(cut) == 23
    assert tok.decode(cut[1 : cut.index(suf)]).endswith("a = 1\n")
    assert tok.decode(cut[cut.index(suf) + 1 : -1]).startswith("b = 2")


def _sentencepiece_like_tokenizer():
    """A Llama-style tokenizer (Metaspace with a dummy prefix, byte fallback) with CodeLlama's FIM tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}}
    for piece in [*"▁abcdefghijklmnopqrstuvwxyz=()+:,0123456789\n", "▁x", "▁="]:
        vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(
        models.BPE(vocab=vocab, merges=[("▁", "x"), ("▁", "=")], byte_fallback=True, unk_token="<unk>")
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        additional_special_tokens=["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"],
    )


def test_sentencepiece_codec_and_codellama_prompt():
    tok = _sentencepiece_like_tokenizer()
    codec = TextCodec(tok)
    assert codec.dummy_prefix
    assert tok.convert_ids_to_tokens(codec.encode("x = 1", leading_space=False))[0] == "x"
    assert tok.convert_ids_to_tokens(codec.encode("x = 1"))[0] == "▁x"
    assert codec.decode(tok.encode(" x", add_special_tokens=False)) == " x"  # the leading space is kept
    fmt = detect_format(tok)
    assert fmt.name == "codellama"
    prompt = tok.convert_ids_to_tokens(build_prompt(fmt, codec, "f(", ")\n"))
    # Meta's "<PRE> {pre} <SUF>{suf} <MID>": the prefix gets SentencePiece's leading space, the suffix none
    assert prompt == ["<s>", "▁<PRE>", "▁", "f", "(", "▁<SUF>", ")", "\n", "▁<MID>"]
    assert fmt.stop_ids(tok) == {tok.convert_tokens_to_ids("▁<EOT>"), tok.eos_token_id}
    euro = tok.encode("\u20ac", add_special_tokens=False)[1:]  # byte-fallback tokens <0xE2> <0x82> <0xAC>
    assert [codec.unfinished_char(euro[:n]) for n in range(4)] == [b"", b"\xe2", b"\xe2\x82", b""]
    assert all(codec.piece(token) is None for token in range(len(tok)))  # only the decoder can tell


def test_split_budget():
    assert split_budget(10, 10, 100) == (10, 10)
    assert split_budget(100, 5, 50) == (45, 5)
    assert split_budget(5, 100, 50) == (5, 45)
    assert split_budget(100, 100, 51) == (25, 26)
    assert split_budget(3, 3, -4) == (0, 0)


# ---------------------------------------------------------------- loading


def test_load_refuses_to_download(monkeypatch):
    attempts = []

    def no_network(self, address):
        attempts.append(address)
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(
        ModelNotFoundError, match=r"never downloads.*hf download fimconstrain-tests/no-such-model"
    ):
        load_model("fimconstrain-tests/no-such-model")
    assert attempts == []


def test_load_hub_id_from_local_cache(tiny_dir, tmp_path):
    """A hub id resolves offline through the Hugging Face cache layout (refs/main -> snapshots/<commit>)."""
    repo = tmp_path / "hub" / "models--fimconstrain-tests--tiny"
    shutil.copytree(tiny_dir, repo / "snapshots" / ("0" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    code = (
        "from fimconstrain.decoding.models.loading import load_model\n"
        "m = load_model('fimconstrain-tests/tiny'); "
        "print(m.fim_format.name, m.context_window)"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["santacoder", "256"]


def test_load_missing_directory(tmp_path):
    with pytest.raises(ModelNotFoundError, match="is missing"):
        load_model(tmp_path / "nothing-here")


def test_load_tiny_model(tiny, tiny_dir):
    assert tiny.fim_format.name == "santacoder"
    assert tiny.context_window == 256
    assert not tiny.model.training
    assert tiny.name == str(tiny_dir)


# ---------------------------------------------------------------- decoding


def test_kv_cache_matches_full_forward(tiny):
    """One cached forward per token gives the logits of a full forward over everything so far."""
    ids = build_prompt(tiny.fim_format, TextCodec(tiny.tokenizer), *CASES[0])
    session = tiny.start()
    logits = session.prefill(ids)
    with torch.no_grad():
        for token in [17, 300, 5, 599, 42]:
            full = tiny.model(input_ids=torch.tensor([ids])).logits[0, -1].numpy()
            assert np.allclose(logits, full, atol=1e-5)
            ids.append(token)
            logits = session.step(token)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_constrained_middle_stays_completable(tiny, case, temperature):
    prefix, suffix = CASES[case]
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    result = decoder.generate(
        prefix, suffix, mode="constrained", max_new_tokens=30, temperature=temperature, top_p=0.95, seed=case
    )
    assert result.tokens > 0 and result.candidates_checked >= result.tokens
    assert fimconstrain.fim_checker(prefix, suffix).feed(result.middle) is not None
    assert result.valid == parses(prefix + result.middle + suffix)
    if result.stopped == "eos":
        assert result.valid


@pytest.mark.parametrize("case", range(len(CASES)))
def test_finish_in_budget_ends_valid(tiny, case):
    """With the end-of-middle policy on, a middle the budget cut off is finished (cut back first
    if need be), so the result is valid whenever some valid end was found; off, it is left as
    generated. The tokens decoded are the same either way."""
    prefix, suffix = CASES[case]
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    kwargs = dict(mode="constrained", max_new_tokens=12, temperature=1.0, seed=case, best_stop=False)
    on = decoder.generate(prefix, suffix, **kwargs)
    off = decoder.generate(prefix, suffix, finish_in_budget=False, **kwargs)
    assert on.token_ids == off.token_ids
    if on.stopped == "finished":
        assert on.valid and fimconstrain.fim_checker(prefix, suffix).feed(on.middle).is_complete()
    if off.stopped == "eos":
        assert on.stopped == "eos" and on.middle == off.middle


def test_should_stop_cancels_within_one_step(tiny):
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    calls = []
    result = decoder.generate(
        "x = ",
        "\n",
        mode="constrained",
        max_new_tokens=30,
        controls=Controls(should_stop=lambda: calls.append(1) or len(calls) > 3),
    )
    assert result.stopped == "cancelled" and result.tokens <= 3


@pytest.mark.parametrize("case", CASES + [("x = (1 +", "\n")])
def test_eos_only_when_complete(tiny, case):
    """With EOS always ranked first, decoding stops at the first token boundary where the file parses."""
    prefix, suffix = case
    decoder = FimDecoder.from_model(
        _EosFirst(tiny.model, tiny.tokenizer.eos_token_id), tiny.tokenizer, tiny.fim_format
    )
    for seed in range(3):
        result = decoder.generate(
            prefix,
            suffix,
            mode="constrained",
            max_new_tokens=40,
            temperature=1.0,
            seed=seed,
            finish_in_budget=False,
        )
        ids, healed = result.token_ids, result.healed
        assert middle_of(decoder.codec, ids, healed) == result.middle
        for n in range(len(ids)):  # EOS was refused at every earlier step, so none of these may parse
            written = decoder.codec.decode(ids[:n])
            if written.startswith(healed):
                assert not parses(prefix + written[len(healed) :] + suffix), (seed, n)
        assert result.stopped in ("eos", "budget")
        assert result.valid == (result.stopped == "eos")


def test_eos_accepted_at_once_when_complete(tiny):
    decoder = FimDecoder.from_model(
        _EosFirst(tiny.model, tiny.tokenizer.eos_token_id), tiny.tokenizer, tiny.fim_format
    )
    for mode in ("constrained", "unconstrained"):
        result = decoder.generate("x = 1", "\n", mode=mode, max_new_tokens=10, heal=False)
        assert (result.middle, result.stopped, result.valid, result.tokens) == ("", "eos", True, 0)


def test_budget_cuts_at_the_best_valid_stop(tiny):
    """No stop token within the budget: the middle is cut where the file was complete (§VII-B)."""
    codec = TextCodec(tiny.tokenizer)
    script = codec.encode(" + 2") + codec.encode(" + (")
    eos = tiny.tokenizer.eos_token_id
    results = {}
    for best_stop in (True, False):
        decoder = FimDecoder.from_model(_Scripted(tiny.model, script, eos), tiny.tokenizer, tiny.fim_format)
        results[best_stop] = decoder.generate(
            "x = 1",
            "\n",
            mode="constrained",
            max_new_tokens=len(script),
            finish_in_budget=False,
            best_stop=best_stop,
            heal=False,  # the script starts at the prompt's end
        )
    assert results[False].stopped == "budget" and results[False].middle == " + 2 + ("
    assert not results[False].valid
    cut = results[True]
    assert cut.stopped == "best-stop" and cut.valid
    assert cut.middle == " + 2"  # the only complete point (the stop token's probability is 0 everywhere)


def test_a_stray_middle_is_finished_by_the_end_of_middle_policy(tiny):
    """A middle the budget leaves open ends through ``end_of_middle.finish_middle``: a cut of
    what was decoded plus the checker's shortest finish, and the file is valid."""
    codec = TextCodec(tiny.tokenizer)
    script = codec.encode("x = 1\n") + codec.encode("y = (")
    decoder = FimDecoder.from_model(
        _Scripted(tiny.model, script, tiny.tokenizer.eos_token_id), tiny.tokenizer, tiny.fim_format
    )
    result = decoder.generate("", "\n", mode="constrained", max_new_tokens=len(script), best_stop=False)
    assert result.stopped == "finished" and result.valid
    assert result.token_ids == script and result.middle.startswith("x = 1\n")


def test_single_line_stops_at_the_end_of_the_line(tiny):
    codec = TextCodec(tiny.tokenizer)
    script = codec.encode("y = 2\n") + codec.encode("z = 3\n")
    decoder = FimDecoder.from_model(
        _Scripted(tiny.model, script, tiny.tokenizer.eos_token_id), tiny.tokenizer, tiny.fim_format
    )
    result = decoder.generate(
        "x = 1\n", "\n", mode="constrained", max_new_tokens=len(script), single_line=True
    )
    assert result.stopped == "line" and result.valid and result.middle == "y = 2"
    assert len(result.token_ids) <= len(codec.encode("y = 2\n"))


class _Preferring(_Steered):
    """At step ``i`` the model prefers the tokens of ``steps[i]`` in that order (the first most),
    and never a stop token."""

    def __init__(self, model, steps: list[list[int]], eos: int):
        super().__init__(model)
        self.steps, self.eos = steps, eos

    def steer(self, logits, step):
        top = logits.max() + 100.0
        logits[..., self.eos] = logits.min() - 100.0
        for rank, token in enumerate(self.steps[step] if step < len(self.steps) else []):
            logits[..., token] = top - rank


def _preferring(tiny, *steps: str | tuple[str, ...]) -> FimDecoder:
    """A decoder whose model writes ``steps``: a text is written token by token, a tuple's texts
    (one token each; ``<eos>`` the stop token) are that step's preferences, best first."""
    codec = TextCodec(tiny.tokenizer)
    script: list[list[int]] = []
    for step in steps:
        if isinstance(step, str):
            script.extend([token] for token in codec.encode(step))
        else:
            eos = tiny.tokenizer.eos_token_id
            script.append([eos if text == "<eos>" else _one_token(codec, text) for text in step])
    model = _Preferring(tiny.model, script, tiny.tokenizer.eos_token_id)
    return FimDecoder.from_model(model, tiny.tokenizer, tiny.fim_format)


def _one_token(codec: TextCodec, text: str) -> int:
    (token,) = codec.encode(text)
    return token


def test_a_line_break_where_the_file_does_not_parse_gives_way(tiny):
    """Mid-line, the model's line break after ``b +`` would leave ``f(a, b +)``: it gives way to
    the next candidate, and the line runs on to its nearest valid end."""
    decoder = _preferring(tiny, "b", " +", ("\n", " c"), ("\n",))
    result = decoder.generate(
        "x = f(a, ", ")\n", mode="constrained", max_new_tokens=8, single_line=True, heal=False
    )
    assert (result.middle, result.stopped, result.valid) == ("b + c", "line", True)


def test_a_whole_line_cursor_keeps_its_line_break(tiny):
    """At the start of a line that holds code, a one-line middle is a line of its own, break included."""
    decoder = _preferring(tiny, "    y = x", ("\n",))
    result = decoder.generate(
        "def f(x):\n", "    return x\n", mode="constrained", max_new_tokens=12, single_line=True, heal=False
    )
    assert (result.middle, result.stopped, result.valid) == ("    y = x\n", "line", True)


def test_a_whole_line_of_only_a_comment_gives_way(tiny):
    """A line of its own that is only a comment adds nothing: its line break gives way (here until
    the patience runs out, and the middle ends with the line of code after it)."""
    refused = ("\n", " a")
    decoder = _preferring(tiny, "    #", " b", refused, refused, refused, ("\n",), "    y = x", ("\n",))
    result = decoder.generate(
        "def f(x):\n", "    return x\n", mode="constrained", max_new_tokens=16, single_line=True, heal=False
    )
    assert (result.middle, result.stopped) == ("    # b a a a\n    y = x\n", "line")


def test_a_whole_line_middle_does_not_stop_blank(tiny):
    """At the start of a line that holds code, the model's stop token passes only once the middle
    says something (the empty middle is valid here, and useless)."""
    decoder = _preferring(tiny, ("<eos>", "    "), ("<eos>", "y"), " =", " x", ("<eos>", "\n"))
    result = decoder.generate(
        "def f(x):\n", "    return x\n", mode="constrained", max_new_tokens=8, single_line=True, heal=False
    )
    assert (result.middle, result.stopped, result.valid) == ("    y = x\n", "line", True)


def test_a_whole_line_goes_back_to_a_likelier_alternative(tiny):
    """Before a line indented deeper, the model's ``y = x`` needs a block opener no text on its
    line can give: its line break is refused, the comment it would write next could not help, and
    the middle goes back to the step where ``if`` was its second choice."""
    choice = (" ", " if")  # (after "   ": the model likes "    y" better than "    if")
    decoder = _preferring(tiny, "   ", choice, "y = x", ("\n", " #"), choice, " x:", ("\n",))
    prefix, suffix = "def f(x):\n", "        return x\n"
    result = decoder.generate(
        prefix, suffix, mode="constrained", max_new_tokens=12, single_line=True, heal=False
    )
    assert (result.middle, result.stopped, result.valid, result.rewinds) == ("    if x:\n", "line", True, 1)
    decoder = _preferring(tiny, "   ", choice, "y = x", ("\n", " #"))
    kept = decoder.generate(
        prefix, suffix, mode="constrained", max_new_tokens=12, single_line=True, heal=False, line_retries=0
    )
    assert "if" not in kept.middle and kept.rewinds == 0  # (without going back: no block opener)


#: a model that ends a header with ``:`` and then wants a line break, the step's second choice a
#: space, for as many steps as the one-line rule's patience: the break is refused until then
HEADER_THEN_PATIENT_BREAKS = ((":",), ("\n", " "), ("\n", " "), ("\n", " "), ("\n",))


def test_a_middle_no_line_completes_spans_lines(tiny):
    """``match x`` needs its cases on lines of their own: after the patience runs out the line
    breaks anyway, and the middle ends at the first line break where the file is complete."""
    decoder = _preferring(
        tiny,
        *HEADER_THEN_PATIENT_BREAKS,
        "    case",
        " 1",
        ":",
        ("\n",),
        "        pass",
        ("\n",),
    )
    result = decoder.generate(
        "match x",
        "\ny = 1\n",
        mode="constrained",
        max_new_tokens=24,
        single_line=True,
        heal=False,
        python_version="3.12",
    )
    assert result.valid and result.stopped == "line"
    assert result.middle.startswith(":") and result.middle.endswith("pass") and "case 1:" in result.middle


def test_a_line_end_that_would_comment_out_the_code_after_the_cursor_counts_as_none(tiny):
    """The code after the cursor (``        else:``) needs the middle to span lines; the only
    one-line finish the search finds would comment it out, an end the line rule never takes:
    so after the patience runs out the line breaks, and the middle ends on the line that lets
    the ``else:`` follow."""
    decoder = _preferring(
        tiny,
        *HEADER_THEN_PATIENT_BREAKS,
        "        if b",
        ":",
        ("\n",),
        "            b -= 1",
        ("\n",),
        "    return",
    )
    prefix, suffix = "def g(a, b):\n    while a", "        else:\n            b = 1\n    return b\n"
    result = decoder.generate(
        prefix, suffix, mode="constrained", max_new_tokens=30, single_line=True, heal=False
    )
    assert result.valid and not result.unshowable and "#" not in result.middle
    assert result.middle.endswith("        if b:\n            b -= 1\n")


def test_a_block_ends_before_a_line_that_leaves_it(tiny):
    """A block middle ends where the model's next line is indented less than the block's first
    line (and the file is complete without it): not the ``if __name__`` the model runs on into;
    before a suffix that begins with a line break, without its own last one."""
    for suffix, middle in [("\n", "    y = x\n    return y"), ("z = 1\n", "    y = x\n    return y\n")]:
        decoder = _preferring(tiny, "    y = x", ("\n",), "    return y", ("\n",), ("\n",), "if", " x", ":")
        result = decoder.generate(
            "def f(x):\n", suffix, mode="constrained", max_new_tokens=20, end_of_block=True, heal=False
        )
        assert (result.middle, result.stopped, result.valid) == (middle, "block", True)


def test_a_middle_no_cut_completes_is_finished_by_the_search_and_not_shown(tiny):
    """The editor asks for no finish search, but a stop that leaves the file invalid is never the
    answer: the search ends it as the last resort, and an editor does not show that middle."""
    from fimconstrain.decoding.editor.policy import shows
    from fimconstrain.decoding.loop.options import DecodeOptions
    from fimconstrain.decoding.models.confidence import ConfidenceGate

    decoder = _preferring(tiny, ("(",), ("(",), ("(",), ("(",))
    options = DecodeOptions.editor(single_line=True, max_new_tokens=4, semantic=False)
    result = decoder.generate("x = f(", "\n", options, heal=False)
    assert result.valid and result.unshowable and result.middle.startswith("((((")
    assert not shows(result, ConfidenceGate())


def test_a_middle_with_no_valid_prefix_or_end_is_rescued_at_a_line(tiny):
    """Random-span's defect: the suffix begins inside a block (``        else:``) and the model
    runs on in one expression until the budget; no prefix of its middle is valid and every
    finish the search finds comments out the ``else:``, which the policy refuses. The rescue
    takes such a finish rather than leave the file invalid, and the middle is not shown."""
    prefix = "def g(a, b):\n    while a * "
    suffix = "        else:\n            b = 1\n    return b\n"
    decoder = _preferring(tiny, "b if a else b if a else b if a else b if a else b")
    result = decoder.generate(prefix, suffix, mode="constrained", max_new_tokens=12, heal=False)
    assert result.stopped == "budget" and result.valid and result.unshowable
    assert result.middle.startswith("b if a else b") and parses(prefix + result.middle + suffix)


def test_token_running_into_the_suffix_is_cut(tiny):
    """A token that closes the string and then writes the suffix's own ``)`` ends the middle inside it."""
    codec = TextCodec(tiny.tokenizer)
    (token,) = codec.encode("')")
    decoder = FimDecoder.from_model(
        _Scripted(tiny.model, [token], tiny.tokenizer.eos_token_id), tiny.tokenizer, tiny.fim_format
    )
    result = decoder.generate("x = f('a", ")\n", mode="constrained", max_new_tokens=5, heal=False)
    assert (result.middle, result.stopped, result.valid) == ("'", "split", True)


def test_no_split_ending_in_paper_mode(tiny):
    """Without ``split_ending`` (paper 004 §VII-B) the token that runs into the suffix is only a
    candidate: it fails the check, and the middle never ends inside it."""
    codec = TextCodec(tiny.tokenizer)
    (token,) = codec.encode("')")
    decoder = FimDecoder.from_model(
        _Scripted(tiny.model, [token], tiny.tokenizer.eos_token_id), tiny.tokenizer, tiny.fim_format
    )
    result = decoder.generate(
        "x = f('a", ")\n", mode="constrained", max_new_tokens=5, heal=False, split_ending=False
    )
    assert result.stopped != "split" and not result.middle.startswith("')")


def _insisting_on_a_bracket(tiny) -> tuple[FimDecoder, dict]:
    """A decoder whose model always prefers ``)``, and options that check only its favourite
    before scanning the rest (for ``x = [`` it never passes)."""
    (token,) = TextCodec(tiny.tokenizer).encode(")")
    decoder = FimDecoder.from_model(
        _Scripted(tiny.model, [token] * 8, tiny.tokenizer.eos_token_id), tiny.tokenizer, tiny.fim_format
    )
    common = dict(
        mode="constrained", max_new_tokens=4, top_k=1, heal=False, finish_in_budget=False, split_ending=False
    )
    return decoder, common


def test_no_vocabulary_fallback_stops_when_the_top_k_fail(tiny):
    """Without ``vocabulary_fallback`` only the top ``top_k`` are checked: a rejected favourite
    with ``top_k=1`` stops the middle at once ("stuck", one step), where the scan goes on."""
    decoder, common = _insisting_on_a_bracket(tiny)
    paper = decoder.generate("x = [", "]\n", vocabulary_fallback=False, **common)
    assert (paper.stopped, paper.steps, paper.candidates_checked, paper.tokens) == ("stuck", 1, 1, 0)
    scanned = decoder.generate("x = [", "]\n", **common)
    assert scanned.candidates_checked > 1 and scanned.steps > 1


class _Feeds:
    """Records every token fed to a checker, per constraint state; ``unscreened`` takes the
    token-mask store out of every state (the checks as they were without it)."""

    def __init__(self, monkeypatch, unscreened: bool = False):
        self.fed: list[tuple[ConstraintState, int, bool]] = []  # (state, token, the state's first)
        advance = ConstraintState._advance

        def recording(state, token):
            self.fed.append((state, token, state.fed == 1))
            return advance(state, token)

        monkeypatch.setattr(ConstraintState, "_advance", recording)
        if unscreened:
            monkeypatch.setattr(ConstraintState, "mask", lambda state: None)

    def ruled_out(self) -> list[int]:
        """Tokens fed after their state's first candidate that the state's store rules out."""
        return [token for state, token, first in self.fed if not first and not state.admits(token)]


def test_a_scan_past_the_top_k_reads_only_what_the_mask_store_allows(tiny, monkeypatch):
    """The scan of the whole vocabulary walks only the tokens the token-mask store allows, and
    no token it rules out is fed to the checker: the same middle as the walk that checks every
    token, with fewer checks."""
    decoder, common = _insisting_on_a_bracket(tiny)
    with monkeypatch.context() as patch:
        _Feeds(patch, unscreened=True)
        unfiltered = decoder.generate("x = [", "]\n", **common)
    feeds = _Feeds(monkeypatch)
    narrowed = decoder.generate("x = [", "]\n", **common)
    assert (narrowed.middle, narrowed.steps) == (unfiltered.middle, unfiltered.steps)
    assert narrowed.candidates_checked < unfiltered.candidates_checked
    assert narrowed.candidates_checked == len(feeds.fed)  # (no stop token came up)
    assert feeds.fed and not feeds.ruled_out()


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize(
    "settings",
    [
        dict(temperature=0.0, top_k=64),
        dict(temperature=1.0, top_k=8),
        dict(temperature=1.0, top_k=2, semantic=True),
        dict(temperature=0.8, top_k=4, heal=False, vocabulary_fallback=False),
    ],
    ids=["greedy", "sampled", "semantic", "paper-like"],
)
def test_the_mask_store_screens_every_check_and_changes_no_choice(tiny, case, settings, monkeypatch):
    """Every walk of the decode loop (greedy, sampled, the names guide's, the top ``k`` only)
    feeds no token that the store rules out past a state's first candidate, and chooses the
    tokens it chooses without the store."""
    prefix, suffix = CASES[case]
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    common = dict(mode="constrained", max_new_tokens=12, seed=case, finish_in_budget=False, **settings)
    with monkeypatch.context() as patch:
        _Feeds(patch, unscreened=True)
        unscreened = decoder.generate(prefix, suffix, **common)
    feeds = _Feeds(monkeypatch)
    screened = decoder.generate(prefix, suffix, **common)
    assert screened.token_ids == unscreened.token_ids and screened.middle == unscreened.middle
    assert screened.candidates_checked <= unscreened.candidates_checked
    assert not feeds.ruled_out()


def test_steps_count_the_stop_token(tiny):
    """A middle of n tokens ended by the stop token took n + 1 decoding steps."""
    decoder = FimDecoder.from_model(
        _EosFirst(tiny.model, tiny.tokenizer.eos_token_id), tiny.tokenizer, tiny.fim_format
    )
    result = decoder.generate("x = 1\n", "", mode="constrained", max_new_tokens=8, heal=False)
    assert result.stopped == "eos" and result.steps == result.generated + 1 == 1


def test_sampling_is_seeded(tiny):
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    prefix, suffix = CASES[1]
    runs = [
        decoder.generate(prefix, suffix, max_new_tokens=15, temperature=1.0, seed=s).middle for s in (3, 3, 4)
    ]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_checked_mode_cuts_to_longest_valid_prefix(tiny):
    codec = TextCodec(tiny.tokenizer)
    ids = codec.encode(" 2)") + codec.encode(" + (")
    assert longest_valid_prefix("x = (1 +", codec, ids, "\n") == " 2)"
    assert longest_valid_prefix("x = (1 +", codec, codec.encode(" +"), "\n") == " +"  # none valid: all of it
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    result = decoder.generate(*CASES[0], mode="checked", max_new_tokens=20)
    assert result.raw_middle.startswith(result.middle)
    assert result.valid or result.middle == result.raw_middle


@pytest.mark.parametrize("version", ["3.12", "3.14"])
def test_a_constrained_cut_judges_by_the_prefix_checker(tiny, version):
    """At another version than the running one, a constrained run judges middles by reading on
    from its checker after the prefix: the same verdict as :func:`parses` of the whole file, and
    the same longest valid prefix."""
    from fimconstrain.decoding.loop.options import DecodeOptions
    from fimconstrain.decoding.loop.run import Run

    codec = TextCodec(tiny.tokenizer)
    decoder = FimDecoder(tiny)
    prefix, suffix = "def f[T](x: T) -> T:\n    y = (x +", "\n    return y\n"
    run = Run(decoder.vocabulary, prefix, suffix, DecodeOptions(), 0, (3, int(version[2:])))
    run.start_constraint(suffix)
    for middle in [" 1)", " 1", " 1))", ")", " [1][0])", " 1)\n    z = 2", " 1)\nz = 2", " f'{x!r}')", ""]:
        assert run.valid(middle) == parses(prefix + middle + suffix, run.version), middle
    ids = codec.encode(" 1)") + codec.encode(" + (")
    assert longest_valid_prefix(prefix, codec, ids, suffix, run.version, valid=run.valid) == " 1)"
    assert longest_valid_prefix(prefix, codec, ids, suffix, run.version) == " 1)"


@pytest.mark.parametrize("healing", ["", "re"])
def test_a_runs_middles_are_the_decoders(tiny, healing):
    """A run's middle for its tokens plus a candidate, read on from the kept middle where the
    state ends on whole characters, is always the decoder's middle of those tokens, through
    characters split over tokens and text healed at the prefix's end."""
    from fimconstrain.decoding.loop.options import DecodeOptions
    from fimconstrain.decoding.loop.run import Run
    from fimconstrain.decoding.loop.validity import middle_of

    codec = TextCodec(tiny.tokenizer)
    decoder = FimDecoder(tiny)
    prefix, suffix = "def f(x):\n    " + healing, "\n"
    run = Run(decoder.vocabulary, prefix, suffix, DecodeOptions(), 0, (3, 12), healing)
    run.start_constraint(suffix)
    vocab = tiny.tokenizer.get_vocab()
    split = [vocab["Ã"], vocab["©"]]  # é as two byte tokens
    for piece in ["return", " x", " +", " 'caf"]:
        for token in [*codec.encode(piece), *split]:
            assert run.middle_text([*run.ids, token]) == middle_of(codec, [*run.ids, token], healing)
            nxt = run.state.child(token)
            if nxt is not None:
                run.ids.append(token)
                run.state = nxt
                assert run.middle_text(run.ids) == middle_of(codec, run.ids, healing)
    assert run.middle_text(run.ids).count("é") >= 2  # (the split character was taken)


def test_partial_utf8_is_held_back(tiny):
    vocab = tiny.tokenizer.get_vocab()
    byte = {b: vocab[ch] for b, ch in zip((0xC3, 0xA9, 0xE2, 0x82, 0xAC), "Ã©âĤ¬")}
    codec = TextCodec(tiny.tokenizer)
    in_string = ConstraintState(fimconstrain.fim_checker('s = "', '"\n'), codec)
    half = in_string.child(byte[0xC3])
    assert half is not None and half.held == 1
    assert half.can_end()  # ending here leaves U+FFFD in the string: valid
    whole = half.child(byte[0xA9])
    assert whole is not None and not whole.held and whole.can_end()
    assert codec.decode(list(whole.ids)) == "\u00e9"
    in_code = ConstraintState(fimconstrain.fim_checker("x = 1 + ", "\n"), codec)
    assert not in_code.child(byte[0xC3]).can_end()  # U+FFFD is no operand
    name = in_code.child(byte[0xC3]).child(byte[0xA9])  # é starts a name: valid
    assert name is not None and name.can_end()
    assert in_code.child(byte[0xA9]) is None  # a lone continuation byte is U+FFFD for good
    euro = in_code.child(byte[0xE2]).child(byte[0x82])  # could still be a letter such as 中
    assert euro is not None and euro.held
    assert euro.child(byte[0xAC]) is None  # € is no identifier character


def test_a_tokens_piece_is_the_text_it_adds(tiny):
    """Under a byte-level decoder a token's piece (its bytes read as UTF-8) is exactly the text
    it adds after text that ends on a whole character, or on bytes that never become one; a
    token whose bytes are not whole characters, and an added token, have none."""
    tok = tiny.tokenizer
    codec = TextCodec(tok)
    byte = {b: tok.get_vocab()[ch] for b, ch in zip((0xC3, 0xA9), "Ã©")}
    contexts = [[], codec.encode("def f(x):\n    return x"), [byte[0xC3], byte[0xA9]], [byte[0xA9]]]
    pieces = 0
    for token in range(len(tok)):
        piece = codec.piece(token)
        if token in tok.all_special_ids or token in tok.added_tokens_decoder:
            assert piece is None
        if piece is None:
            continue
        pieces += 1
        for ids in contexts:
            assert codec.decode(ids + [token]) == codec.decode(ids) + piece, (ids, token)
    assert codec.piece(byte[0xC3]) is None and codec.piece(byte[0xA9]) is None
    assert codec.piece(len(tok)) is None  # an id past the tokenizer's (a model's padded logits)
    assert pieces > len(tok) // 2


@pytest.mark.parametrize("version", ["3.8", "3.14"])
def test_verdicts_without_states_match_the_states(tiny, version, tmp_path):
    """``passes`` (the mask's walk, no state built) says the same as ``child`` for every token
    of the vocabulary, at cuts in code, in a string, after a held-back byte and while healing;
    with the token-mask store as well, which rules tokens out unchecked and vouches for others
    (:meth:`.MaskStore.sure`), and the unscreened walk is the reference."""
    from fimconstrain.decoding.loop.constraint import passing_candidates, passing_tokens
    from fimconstrain.decoding.masks.store import MaskStore, unpack

    codec = TextCodec(tiny.tokenizer)
    store = MaskStore.load_or_build(
        tiny.tokenizer, cache_dir=tmp_path, progress=False, python_version=version
    )
    byte = tiny.tokenizer.get_vocab()["Ã"]
    stops = {tiny.tokenizer.eos_token_id}
    banned = {*tiny.tokenizer.all_special_ids, *tiny.tokenizer.added_tokens_decoder}  # as decoders ban them
    vocab = range(len(codec.tokenizer))
    vouched = 0
    for prefix, suffix in [
        ("x = foo(1, ", ")\n"),
        ('s = "ab', 'c"\n'),
        ("if x:\n    y = 1\n", "z = 2\n"),
        ("def f(a, b):\n    return a", " + b\n"),
        ("import os.", "path\n"),
        ("x = [1, 2", "]\n"),
    ]:
        checker = fimconstrain.fim_checker(prefix, suffix, python_version=version)
        roots = [ConstraintState(checker, codec), ConstraintState(checker, codec, healing="  ")]
        held = roots[0].child(byte)
        roots += [held] if held is not None else []
        for root in roots:
            states = [t for t, _ in passing_candidates(root, vocab, stops, banned)]
            for with_store, whole in [(None, False), (store, False), (store, True)]:
                fresh = ConstraintState(
                    root.checker, codec, root.ids, root.held, root.healing, store=with_store
                )
                walked = list(passing_tokens(fresh, vocab, stops, banned, whole))
                assert walked == states, (prefix, with_store, whole)
            if not root.healing and not root.held:
                vouched += len(np.flatnonzero(unpack(store.sure(root.checker), store.vocab_size)))
    assert vouched  # the store did vouch for tokens, so the walk with it took the shortcut


def test_a_top_k_row_is_told_by_one_walk_as_by_the_states(tiny):
    """A row of fewer than ``VECTORISED_FROM`` candidates (a serving step's top-k), with stop,
    banned and already-known tokens among them, passes the same tokens as the states do; where
    the C vocabulary walk is built it tells the row in one walk asked about its tokens by id."""
    from fimconstrain.decoding.loop.constraint import VECTORISED_FROM, passing_candidates, passing_tokens
    from fimconstrain.decoding.masks.vocab_walk import native_walk

    codec = TextCodec(tiny.tokenizer)
    stops = {tiny.tokenizer.eos_token_id}
    banned = {*tiny.tokenizer.all_special_ids, *tiny.tokenizer.added_tokens_decoder} - stops
    rng = np.random.default_rng(7)
    walked = 0
    for prefix, suffix in [
        ("x = foo(1, ", ")\n"),
        ('s = "ab', 'c"\n'),
        ("def f(a, b):\n    return a", " + b\n"),
    ]:
        checker = fimconstrain.fim_checker(prefix, suffix)
        for _ in range(8):
            row = [*stops, *list(banned)[:2], *rng.choice(len(codec.tokenizer), 60, replace=False).tolist()]
            rng.shuffle(row)
            assert len(row) < VECTORISED_FROM
            expected = [t for t, _ in passing_candidates(ConstraintState(checker, codec), row, stops, banned)]
            state = ConstraintState(checker, codec)
            state.child(row[-1])  # a known child: its verdict is the state's own
            assert list(passing_tokens(state, row, stops, banned, whole=True)) == expected
            walked += state.walked
    assert walked > 0 or native_walk() is None


@pytest.mark.parametrize(
    "prefix, suffix",
    [("def f(a, b):\n    return a +", "\n"), ("x = foo(1,", ")\n"), ("if x", ":\n    pass\n")],
)
def test_tokens_vouched_after_their_first_character(tiny, tmp_path, prefix, suffix, monkeypatch):
    """A token whose text is a character and then another token's text (`` b``: a blank, then
    ``b``) passes on the store's word for that other token after the character
    (:meth:`.TextCodec.tail`); the walk's verdicts stay those of the walk without a store.
    (The whole walk in Python: the C vocabulary walk, where built, decides such tokens itself.)"""
    from fimconstrain.decoding.loop.constraint import passing_tokens
    from fimconstrain.decoding.masks import vocab_walk

    monkeypatch.setattr(vocab_walk, "native_walk", lambda: None)
    from fimconstrain.decoding.masks.store import MaskStore, unpack

    codec = TextCodec(tiny.tokenizer)
    store = MaskStore.load_or_build(tiny.tokenizer, cache_dir=tmp_path, progress=False)
    banned = {*tiny.tokenizer.all_special_ids, *tiny.tokenizer.added_tokens_decoder}
    vocab = [t for t in range(len(codec.tokenizer)) if t not in banned]
    checker = fimconstrain.fim_checker(prefix, suffix)
    expected = list(passing_tokens(ConstraintState(checker, codec), vocab, set(), banned))
    vouched_whole = len(np.flatnonzero(unpack(store.sure(checker), store.vocab_size)))
    for whole in (False, True):  # screened from the second token on, or from the first
        state = ConstraintState(checker, codec, store=store)
        assert list(passing_tokens(state, vocab, set(), banned, whole)) == expected
        # some passed on the word for their text after the first character
        assert state.vouched > vouched_whole
    assert any(codec.tail(t) >= 0 and codec.decode([t])[0] == " " for t in expected)


# ---------------------------------------------------------------- LogitsProcessor


def _passing(tokenizer, prefix, suffix, token):
    text = tokenizer.decode([token])
    if token == tokenizer.eos_token_id:
        return fimconstrain.fim_checker(prefix, suffix).is_complete()
    if token in tokenizer.all_special_ids or token in tokenizer.added_tokens_decoder:
        return False
    return fimconstrain.fim_checker(prefix, suffix).feed(text) is not None


@pytest.mark.parametrize("k", [1, 5, 40])
@pytest.mark.parametrize("store", [True, None], ids=["screened", "unscreened"])
def test_logits_processor_masks_to_first_k_passing(tiny, k, store):
    """The first ``k`` passing tokens, with the token-mask store screening the walk or without it."""
    prefix, suffix = "values = [1, 2", "]\n"  # complete already; no non-ASCII character can come next
    tok = tiny.tokenizer
    scores = torch.randn(2, len(tok), generator=torch.Generator().manual_seed(k))
    proc = TransformersFimProcessor(tok, prefix, suffix, prompt_length=3, k=k, mask_store=store)
    assert (proc.store is not None) == bool(store)
    out = proc(torch.zeros(2, 3, dtype=torch.long), scores.clone())
    for row in range(2):
        order = torch.argsort(scores[row], descending=True).tolist()
        expected = [t for t in order if _passing(tok, prefix, suffix, t)][:k]
        kept = torch.isfinite(out[row]).nonzero().flatten().tolist()
        assert sorted(kept) == sorted(expected)
        assert torch.equal(out[row, kept], scores[row, kept])


def test_logits_processor_with_generate(tiny):
    prefix, suffix = CASES[3]
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    prompt = build_prompt(tiny.fim_format, decoder.codec, prefix, suffix)
    proc = TransformersFimProcessor(tiny.tokenizer, prefix, suffix, prompt_length=len(prompt), k=1)
    with torch.no_grad():
        out = tiny.model.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            logits_processor=[proc],
            max_new_tokens=25,
            do_sample=False,
            pad_token_id=tiny.tokenizer.pad_token_id,
        )
    new = out[0, len(prompt) :].tolist()
    ended = tiny.tokenizer.eos_token_id in new
    middle = decoder.codec.decode(new[: new.index(tiny.tokenizer.eos_token_id)] if ended else new)
    assert fimconstrain.fim_checker(prefix, suffix).feed(middle) is not None
    assert not ended or parses(prefix + middle + suffix)
    direct = decoder.generate(
        prefix, suffix, max_new_tokens=25, finish_in_budget=False, best_stop=False, heal=False
    )
    assert direct.middle == middle  # the processor and the decode loop agree (greedy, k=1)


# ---------------------------------------------------------------- default model and command line


needs_default = pytest.mark.skipif(
    not (DEFAULT_MODEL_DIR / "config.json").exists(), reason="the default model has not been trained"
)


@needs_default
def test_default_model_completes_a_file(tmp_path):
    from fimconstrain.command_line.complete import complete_file
    from fimconstrain.engine.positions import cursor_offset

    path = tmp_path / "sample.py"
    path.write_text(
        "import os\n\n\ndef list_python_files(folder):\n    result = []\n"
        "    for name in sorted(os.listdir(folder)):\n        if name.endswith('.py'):\n"
        "            result.append(name)\n    return result\n"
    )
    result = complete_file(path, "6:5", max_new_tokens=48, progress=False).result  # cursor before "for"
    text = path.read_text()
    offset = cursor_offset(text, "6:5")
    assert text[offset:].startswith("for name")
    prefix, suffix = text[:offset], text[offset:]
    assert result.tokens > 0
    assert fimconstrain.fim_checker(prefix, suffix).feed(result.middle) is not None
    assert result.valid == parses(prefix + result.middle + suffix)
    assert result.stopped != "eos" or result.valid
    assert result.model_seconds > 0 and result.checker_seconds > 0


def test_cursor_offset():
    from fimconstrain.engine.positions import cursor_offset

    text = "ab\r\ncd\nef"
    assert [cursor_offset(text, c) for c in ("1:1", "1:3", "2:1", "3:2", "4", 0)] == [0, 2, 4, 8, 4, 0]
    for bad in ("4:1", "1:4", "x", 99):
        with pytest.raises(fimconstrain.FimConstrainError):
            cursor_offset(text, bad)


def test_complete_command_json(tiny_dir, tmp_path, capsys):
    from fimconstrain.command_line.complete import main_complete

    path = tmp_path / "f.py"
    path.write_text("def f(x):\n    return x\n")
    code = main_complete(
        [str(path), "--cursor", "2:12", "--model", str(tiny_dir), "--max-new-tokens", "8", "--json"]
    )
    record = json.loads(capsys.readouterr().out)
    assert code == (0 if record["valid"] else 1)
    assert record["mode"] == "constrained" and record["tokens"] <= 8
    assert main_complete([str(path), "--cursor", "9:1", "--model", str(tiny_dir)]) == 2
    assert "outside the file" in capsys.readouterr().err


@pytest.mark.parametrize("case", range(3))
def test_prefix_mode_uses_the_mask_store(tiny, case, tmp_path, monkeypatch):
    """mode="prefix": the left context alone constrains; the mask store pre-filters candidates."""
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))
    prefix, suffix = CASES[case]
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    result = decoder.generate(
        prefix, suffix, mode="prefix", max_new_tokens=20, temperature=1.0, seed=case, finish_in_budget=False
    )
    checker = fimconstrain.fim_checker(prefix, "").feed(result.middle)
    assert checker is not None
    if result.stopped == "eos":
        assert checker.is_complete()
    assert decoder.mask_store().vocab_size == tiny.model.config.vocab_size


@pytest.mark.parametrize("case", range(len(CASES)))
def test_prefilter_chooses_the_same_tokens_with_fewer_checks(tiny, case, tmp_path, monkeypatch):
    """The mask store only removes candidates the exact FIM check rejects: sampling with the
    pre-filter draws exactly the tokens it draws without, checking no more candidates."""
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))
    prefix, suffix = CASES[case]
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format)
    runs = [
        decoder.generate(
            prefix,
            suffix,
            mode="constrained",
            max_new_tokens=16,
            temperature=1.0,
            seed=case,
            top_k=4,
            prefilter=prefilter,
        )
        for prefilter in (False, True)
    ]
    assert runs[0].token_ids == runs[1].token_ids and runs[0].middle == runs[1].middle
    assert runs[1].candidates_checked <= runs[0].candidates_checked


def test_complete_command_options(tiny_dir, tmp_path, capsys, monkeypatch):
    from fimconstrain.command_line.complete import main_complete

    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))
    path = tmp_path / "f.py"
    path.write_text("def f(x):\n    return (x +\n")
    args = [str(path), "--cursor", "2:16", "--model", str(tiny_dir), "--max-new-tokens", "4", "--json"]
    off = json.loads((main_complete(args + ["--no-finish", "--no-best-stop"]), capsys.readouterr().out)[1])
    on = json.loads((main_complete(args + ["--prefilter", "--finish-search"]), capsys.readouterr().out)[1])
    assert off["stopped"] in ("budget", "eos", "split", "stuck")
    assert on["valid"]  # ended by the policy (a cut, closed by the finish search)


# ---------------------------------------------------------------- target Python version


def test_python_version_constrains_generation(tiny):
    """The decoder's python_version (or a call's) is the syntax the middle must keep valid:
    `type X = ...` (3.12) cannot be completed as 3.11."""
    prefix, suffix = "type X = ", "\n"
    old = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format, python_version="3.11")
    assert old.python_version == (3, 11)
    with pytest.raises(fimconstrain.UncompletableError):
        old.generate(prefix, suffix, max_new_tokens=4)
    result = old.generate(prefix, suffix, max_new_tokens=6, python_version=(3, 12))  # this call only
    assert fimconstrain.fim_checker(prefix, suffix, python_version="3.12").feed(result.middle) is not None
    assert FimDecoder(tiny).python_version == fimconstrain.NEWEST_PYTHON
    with pytest.raises(fimconstrain.InputError):
        FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format, python_version="2.7")
    with pytest.raises(fimconstrain.UncompletableError):
        TransformersFimProcessor(tiny.tokenizer, prefix, suffix, prompt_length=3, python_version="3.11")
    TransformersFimProcessor(tiny.tokenizer, prefix, suffix, prompt_length=3, python_version="3.12")


def test_mask_store_per_version(tiny, tmp_path, monkeypatch):
    """One mask store per version, each cached in its own file; prefix mode uses the call's."""
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))
    decoder = FimDecoder.from_model(tiny.model, tiny.tokenizer, tiny.fim_format, python_version="3.10")
    default, newer = decoder.mask_store(), decoder.mask_store("3.12")
    assert (default.python_version, newer.python_version) == ("3.10", "3.12")
    assert decoder.mask_store((3, 10)) is default
    assert sorted(p.name.split("-")[1] for p in (tmp_path / "masks").glob("python-*.npz")) == ["3.10", "3.12"]
    prefix = "def first[T](items: list[T]) -> T:\n    return "
    result = decoder.generate(
        prefix, "", mode="prefix", max_new_tokens=6, python_version="3.12", finish_in_budget=False
    )
    assert fimconstrain.fim_checker(prefix, python_version="3.12").feed(result.middle) is not None
    with pytest.raises(fimconstrain.UncompletableError):
        decoder.generate(prefix, "", mode="prefix", max_new_tokens=2)  # type parameters: not 3.10


def test_complete_command_python_version(tiny_dir, tmp_path, capsys):
    from fimconstrain.command_line.complete import main_complete

    path = tmp_path / "alias.py"
    path.write_text("type X = int\ny = \n")
    args = [str(path), "--cursor", "2:5", "--model", str(tiny_dir), "--max-new-tokens", "4", "--json"]
    with pytest.raises(SystemExit) as info:
        main_complete(args + ["--python-version", "3.7"])
    assert info.value.code == 2 and "3.8 to 3.14" in capsys.readouterr().err
    # the file's prefix is 3.12 syntax: completed as the newest version, as the editor does
    assert main_complete(args + ["--python-version", "3.11"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["python_version"] == "3.14" and "does not parse as 3.11" in record["python_version_source"]
    main_complete(args + ["--python-version", "3.12"])
    record = json.loads(capsys.readouterr().out)
    assert fimconstrain.fim_checker("type X = int\ny = ", "\n", python_version="3.12").feed(record["middle"])
