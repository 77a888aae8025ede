"""The model-backend seam, proved by a second runtime: a pure-numpy bigram FIM model (no torch
model, no transformers call) runs every decoding mode, the editor's policy, the language
server's completer and the evaluation's experiments unchanged. And ``fimconstrain complete`` under
a ``requires-python = ">=3.10"`` never writes 3.12 syntax, however much the model wants it."""

from __future__ import annotations

import sysconfig
import time
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("transformers")

from bigram_backend import BigramBackend

import fimconstrain
from fimconstrain.decoding.loop.generate import FimDecoder
from fimconstrain.decoding.loop.options import MODES, DecodeOptions
from fimconstrain.decoding.loop.validity import parses

#: code a bigram learns PEP 695 generics from: after ``def config`` comes ``[T]``
GENERIC = "def config[T](value: T) -> T:\n    return value\n\n\n"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """The tiny model's byte-level BPE tokenizer (SantaCoder's FIM tokens); its weights unused."""
    from tiny_model import build_tiny_model
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("bigram_tok")))


@pytest.fixture(scope="module")
def bigram(tokenizer) -> BigramBackend:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [(stdlib / name).read_text(encoding="utf-8") for name in ("textwrap.py", "string.py")]
    return BigramBackend.train(tokenizer, texts, cuts_per_text=64)


@pytest.fixture(scope="module")
def generic(tokenizer) -> BigramBackend:
    """A bigram that has seen little but PEP 695 generics."""
    return BigramBackend.train(tokenizer, [GENERIC * 20], cuts_per_text=200)


def test_the_backend_imports_no_torch_model(bigram):
    assert "torch" not in type(bigram).__module__
    logits = bigram.start().prefill([1, 2, 3])
    assert logits is not None and logits.shape == (bigram.vocab_size,) and logits.dtype.name == "float32"


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_runs_through_the_bigram(bigram, mode, tmp_path, monkeypatch):
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))  # prefix mode builds a mask store
    decoder = FimDecoder(bigram)
    prefix, suffix = "def area(w, h):\n    return (w *", "\n\nprint(area(2, 3))\n"
    for temperature in (0.0, 1.0):
        result = decoder.generate(
            prefix, suffix, DecodeOptions(mode=mode, max_new_tokens=12, temperature=temperature, seed=1)
        )
        assert result.generated > 0 and result.model_seconds >= 0
        if mode == "constrained":
            assert result.valid and parses(prefix + result.middle + suffix)
        if mode in ("constrained", "prefix"):
            assert fimconstrain.fim_checker(prefix, suffix if mode == "constrained" else "").feed(
                result.middle
            ), result.middle


def test_the_editor_policy_and_the_lsp_engine_run_through_the_bigram(bigram):
    from lsp_server.completer import Completer, Job
    from lsp_server.config import Settings

    completer = Completer()
    loaded = completer.load(Settings(max_tokens=12, finish_search=True), backend=bigram)
    assert loaded.name == "bigram"
    prefix, suffix = "import string\n\n\ndef shout(text):\n    return ", "\n"
    job = Job("file:///a.py", time.monotonic() + 60, True, python_version=(3, 11))
    items = completer.complete(job, prefix, suffix, Settings(max_tokens=12, finish_search=True), 3)
    assert job.generated > 0 and job.used_version == (3, 11)
    for middle in items:
        assert middle.strip() and parses(prefix + middle + suffix)


def test_the_evaluation_runs_through_the_bigram(bigram):
    from fimconstrain.evaluation.examples import Example
    from fimconstrain.evaluation.experiments import run_example
    from fimconstrain.evaluation.modes import DEFAULT_MODES
    from fimconstrain.evaluation.provenance import Provenance, RunSettings

    example = Example("e1", "boundary", "a.py", "0" * 64, "x = (1 +", " 2", ")\nprint(x)\n")
    provenance = Provenance("bigram", "0" * 64, bigram.fim_format.name, RunSettings(max_new_tokens=8))
    records = list(
        run_example(FimDecoder(bigram), {"name": "d", "sha256": "1" * 64}, example, DEFAULT_MODES, provenance)
    )
    assert [r["mode"] for r in records] == list(DEFAULT_MODES)
    assert all(r["steps"] > 0 for r in records)
    assert all(r["success"] for r in records if r["mode"] in ("constrained", "constrained-nofinish"))


def test_requires_python_keeps_3_12_syntax_out(generic, tmp_path):
    """Under ``requires-python = ">=3.10"`` the middle after ``def config`` is 3.10 syntax, though
    the model's favourite is a PEP 695 type parameter list (which it writes without the file)."""
    from fimconstrain.command_line.complete import complete_file
    from fimconstrain.engine.positions import cursor_offset

    text = "import os\n\n\ndef config():\n    return os.sep\n"
    cursor = "4:11"  # after "def config"
    loose = tmp_path / "loose" / "mod.py"
    loose.parent.mkdir()
    loose.write_text(text)
    wanted = complete_file(loose, cursor, generic, progress=False, finish_search=True)
    assert wanted.version == (3, 14) and wanted.result.middle.startswith("[")  # it would, if let

    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "p"\nrequires-python = ">=3.10"\n')
    path = project / "pkg" / "mod.py"
    path.write_text(text)
    for temperature in (0.0, 1.0):
        done = complete_file(
            path, cursor, generic, progress=False, finish_search=True, temperature=temperature
        )
        assert done.version == (3, 10) and "requires-python '>=3.10'" in done.version_source
        middle = done.result.middle
        offset = cursor_offset(text, cursor)
        prefix, suffix = text[:offset], text[offset:]
        assert prefix.endswith("def config") and done.result.valid
        assert fimconstrain.fim_checker(prefix, suffix, python_version="3.10").feed(middle).is_complete()
