"""One model choice for every front end: the command lines' options, the evaluation's and the
language server's settings all read to the same frozen :class:`ModelChoice`, and opening it is the
one place a model is loaded or a server connected (issue 51)."""

from __future__ import annotations

import sysconfig
from dataclasses import replace
from pathlib import Path

import pytest

from fimconstrain.command_line.complete import build_parser
from fimconstrain.decoding.model_choice import ModelChoice, ModelServer
from fimconstrain.decoding.runtimes.server_api import DEFAULT_TIMEOUT
from fimconstrain.evaluation.runs import eval_parser
from lsp_server.config import Settings


def test_the_complete_options_read_to_one_choice():
    args = build_parser().parse_args(
        [
            "f.py",
            "--cursor",
            "1:1",
            "--model",
            "m.gguf",
            "--threads",
            "2",
            "--context",
            "2048",
            "--format",
            "starcoder",
        ]
    )
    assert ModelChoice.of(args) == ModelChoice(
        model="m.gguf", fim_format="starcoder", threads=2, context=2048, runtime="auto"
    )
    served = build_parser().parse_args(
        [
            "f.py",
            "--cursor",
            "1:1",
            "--server",
            "http://h:1",
            "--server-model",
            "fim",
            "--server-timeout",
            "3",
        ]
    )
    assert ModelChoice.of(served).server == ModelServer("http://h:1", "fim", 3.0)


def test_the_evaluation_options_carry_the_device():
    args = eval_parser().parse_args(["--out", "r.jsonl", "--device", "cuda:1", "--runtime", "transformers"])
    choice = ModelChoice.of(args)
    assert (choice.device, choice.runtime, choice.server) == ("cuda:1", "transformers", None)


def test_the_language_server_reloads_only_when_its_choice_changes():
    from fimconstrain.decoding.models.known_models import auto_model

    settings = Settings()  # (the model auto: the best fetched here, else the shipped one)
    assert settings.model_choice() == ModelChoice(model=auto_model())
    assert replace(settings, max_tokens=8, mode="prefix").model_choice() == settings.model_choice()
    assert replace(settings, threads=1).model_choice() != settings.model_choice()
    served = replace(settings, server="http://h:1", server_model="fim").model_choice()
    assert served.server == ModelServer("http://h:1", "fim", DEFAULT_TIMEOUT)
    assert hash(served) == hash(replace(settings, server="http://h:1", server_model="fim").model_choice())


def test_opening_a_loaded_backend_runs_it_here_with_its_gate(tmp_path):
    pytest.importorskip("transformers")
    from bigram_backend import BigramBackend
    from tiny_model import build_tiny_model
    from transformers import AutoTokenizer

    from fimconstrain.decoding.loop.generate import FimDecoder
    from fimconstrain.decoding.models.confidence import ConfidenceGate

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "tiny"))
    text = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text(encoding="utf-8")
    backend = BigramBackend.train(tokenizer, [text], cuts_per_text=8)
    timings: dict[str, float] = {}
    decoder, gate = ModelChoice().open(backend, timings=timings, window=10**6, prepare=False)
    assert type(decoder) is FimDecoder and decoder.backend is backend
    assert decoder.window == backend.context_window  # (a window is never wider than the model's)
    assert gate == ConfidenceGate.for_model(backend.name or None)
    assert set(timings) == {"import", "load"}
