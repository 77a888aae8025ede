"""A model server as a model backend (:mod:`fimconstrain.decoding.runtimes.server_backend`): the one decode
loop runs over an OpenAI-compatible server, so its greedy middles are the ones made here with the
same model, whether the server names tokens by id (vLLM) or by text (llama-cpp-python's), and
however few alternatives it tells (the loop asks again with ``logit_bias``). A server that tells
no log-probabilities is checked, and says so; a stopped request hangs up; a server that is down,
refuses or falls silent is one :class:`ModelServerError`. The server here runs a bigram model of
this package (``openai_server.py``); the real servers are in ``test_real_servers.py`` and
``tests/serving/test_vllm_engine.py``."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("transformers")

from bigram_backend import BigramBackend
from openai_server import OpenAIServer
from stdlib_cursors import STDLIB, stdlib_cursors

from fimconstrain.decoding.loop.generate import FimDecoder
from fimconstrain.decoding.loop.options import Controls, DecodeOptions
from fimconstrain.decoding.loop.result import StopReason
from fimconstrain.decoding.loop.server_decoder import ServerDecoder
from fimconstrain.decoding.runtimes.server_api import ModelServerError
from fimconstrain.decoding.runtimes.server_backend import ServerBackend

#: prompt and middle, the same for both decoders (a server that names no window gets 2048)
WINDOW = 512


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("server_tok"))


@pytest.fixture(scope="module")
def bigram(tiny_dir) -> BigramBackend:
    """A bigram model, its many exact ties (pairs it never saw) broken by a little noise: the
    order of tied tokens is the one thing a server may tell otherwise."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    texts = [(STDLIB / name).read_text(encoding="utf-8") for name in ("textwrap.py", "string.py")]
    model = BigramBackend.train(tokenizer, texts, cuts_per_text=64)
    model.log_probs += np.random.default_rng(0).normal(0, 1e-2, model.log_probs.shape).astype(np.float32)
    return model


@pytest.fixture
def serve(bigram):
    servers: list[OpenAIServer] = []

    def make(**settings) -> OpenAIServer:
        servers.append(OpenAIServer(bigram, **settings))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def cursors(count: int, seed: int = 0) -> list[tuple[str, str]]:
    """Cursors in stdlib files the model never read (:func:`stdlib_cursors`)."""
    return stdlib_cursors(("shlex.py", "fnmatch.py", "colorsys.py"), count, seed)


def nameable(model: BigramBackend, ids: list[int]) -> bool:
    """Whether every token of ``ids`` is whole UTF-8 (a server can name it by its text)."""
    return all("\ufffd" not in model.tokenizer.decode([token]) for token in ids)


def through(server: OpenAIServer, bigram: BigramBackend, timeout: float = 5.0) -> ServerDecoder:
    backend = ServerBackend(server.url, bigram.tokenizer, bigram.fim_format, timeout=timeout)
    return ServerDecoder(backend, window=WINDOW, prepare=False)


@pytest.mark.parametrize(("naming", "top"), [("id", 20), ("text", 20), ("id", 2)])
def test_greedy_middles_through_a_server_are_the_ones_made_here(
    serve, bigram, naming, top, tmp_path, monkeypatch
):
    """Constrained, and as the editor asks (one line or a block, healed), on 12 cursors: the same
    tokens and middles; with 2 alternatives told, the loop asked again with ``logit_bias``. (The
    names guide is off: jedi answers within a time limit, so its verdicts vary with the load.)"""
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))
    server = serve(naming=naming, top=top)
    there = through(server, bigram)
    assert (there.backend.info.by_id, there.backend.steered) == (naming == "id", True)
    here = FimDecoder(bigram, window=WINDOW, prepare=False)
    asked = [
        DecodeOptions(max_new_tokens=24, semantic=False),
        DecodeOptions.editor(True, max_new_tokens=24, semantic=False),
        DecodeOptions.editor(False, max_new_tokens=24, semantic=False),
    ]
    unnameable = 0
    for prefix, suffix in cursors(4):
        for options in asked:
            want = here.generate(prefix, suffix, options)
            got = there.generate(prefix, suffix, options)
            assert got.mode == want.mode and got.valid
            if naming == "text" and not nameable(bigram, want.token_ids):
                unnameable += 1  # (a server that names tokens by text cannot name one cut inside a character)
                continue
            if want.stopped == StopReason.BEST_STOP:  # (it weighs the stop token's probability,
                # which a server tells only among its likeliest tokens: the same tokens, cut elsewhere)
                ran = min(len(got.token_ids), len(want.token_ids))
                assert got.token_ids[:ran] == want.token_ids[:ran]
            else:
                assert (got.token_ids, got.middle, got.stopped) == (want.token_ids, want.middle, want.stopped)
    assert unnameable <= 3
    reasked = [body for body in server.bodies if body.get("logit_bias")]
    assert reasked if top == 2 else True
    streamed = [body for body in server.bodies if body.get("stream")]
    assert streamed and all(body["temperature"] == 0 for body in streamed)


def test_a_server_that_tells_no_log_probabilities_is_checked_and_says_so(
    serve, bigram, tiny_dir, tmp_path, capsys
):
    from fimconstrain.command_line.complete import main_complete

    server = serve(naming=None)
    decoder = through(server, bigram)
    assert not decoder.backend.steered and "no log-probabilities" in decoder.mode_note("constrained")
    here = FimDecoder(bigram, window=WINDOW, prepare=False)
    for prefix, suffix in cursors(2, seed=1):
        got = decoder.generate(prefix, suffix, DecodeOptions(max_new_tokens=16))
        want = here.generate(prefix, suffix, DecodeOptions(max_new_tokens=16, mode="checked", heal=False))
        assert (got.mode, got.middle, got.valid) == ("checked", want.middle, want.valid)
    source = tmp_path / "a.py"
    source.write_text("def f(a, b):\n    return a\n", encoding="utf-8")
    code = main_complete([str(source), "--cursor", "2:13", "--server", server.url, "--model", str(tiny_dir)])
    summary = capsys.readouterr().err
    assert code in (0, 1) and "checked (the server tells no log-probabilities" in summary


def test_a_stopped_request_hangs_up_at_once(serve, bigram):
    server = serve(pause=0.1)
    decoder = through(server, bigram)
    start = time.monotonic()
    stop = Controls(should_stop=lambda: time.monotonic() - start > 0.35)
    result = decoder.generate(
        "def f(a, b):\n    return ", "\n", DecodeOptions(max_new_tokens=60, mode="unconstrained"), stop
    )
    assert result.stopped == StopReason.CANCELLED and result.generated < 60
    assert server.hung_up.wait(3), "the server never saw the connection close"


def test_a_server_that_is_down_refuses_falls_silent_or_reads_text_otherwise_is_one_error(serve, bigram):
    from fimconstrain.decoding.models.loading import load_tokenizer

    server = serve()
    url = server.url
    server.close()
    with pytest.raises(ModelServerError, match="cannot be reached"):
        ServerBackend(url, bigram.tokenizer, bigram.fim_format, timeout=2)
    refusing = serve()
    decoder = through(refusing, bigram)
    refusing.refuse = "prompt too long"
    with pytest.raises(ModelServerError, match=r"^model server http://\S+: HTTP 400: prompt too long$"):
        decoder.generate("x = ", "\n")
    with pytest.raises(ModelServerError, match="stopped answering"):
        through(serve(pause=3.0), bigram, timeout=0.5).generate("x = ", "\n")
    with pytest.raises(ModelServerError, match="does not serve"):
        ServerBackend(serve().url, bigram.tokenizer, bigram.fim_format, model="other", timeout=2)
    with pytest.raises(ModelServerError, match="does not read text as the local tokenizer"):
        ServerBackend(serve().url, *load_tokenizer(), timeout=2)  # (the shipped model's)


def test_the_language_servers_engine_says_once_that_the_server_is_gone(serve, bigram, tiny_dir):
    """The language server's engine on a model server (the model's tokenizer read here): the
    items made in process; when the server stops answering, none and one message in
    ``server_error`` (the status), cleared when it is back."""
    pytest.importorskip("pygls")
    from lsp_server.completer import Completer, Job
    from lsp_server.config import Settings

    prefix, suffix = "def f(a, b):\n    return ", "\n"
    server = serve()
    settings = Settings(model=str(tiny_dir), server=server.url, finish_search=False, semantic=False)
    local = Settings(model=str(tiny_dir), finish_search=False, semantic=False)
    completer, here = Completer(), Completer()
    loaded = completer.load(settings)
    here.load(local, backend=bigram)
    assert loaded.name == f"test-coder at {server.url}" and loaded.fim_format == bigram.fim_format.name

    def complete(completer: Completer, settings: Settings) -> list[str]:
        from fimconstrain.decoding.editor.policy import ShownItems

        completer.shown = ShownItems()  # (asked afresh: not answered from the items kept at the cursor)
        return completer.complete(
            Job("file:///a.py", time.monotonic() + 10, True), prefix, suffix, settings, 1
        )

    assert complete(completer, settings) == complete(here, local) and completer.server_error is None
    server.refuse = "the model is reloading"
    assert complete(completer, settings) == [] and "the model is reloading" in (completer.server_error or "")
    server.refuse = None
    assert complete(completer, settings) == complete(here, local) and completer.server_error is None
