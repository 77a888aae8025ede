"""A model that is not one: each bad file or folder given as ``--model`` is one line on standard
error that says what is wrong with it, exit code 2 (``fimconstrain complete``), never a traceback;
the language server says the same line in its status (tests/lsp/test_lsp_server.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fimconstrain.decoding.runtimes.llama_backend import read_gguf_metadata

pytestmark = pytest.mark.time_limit(300)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def complete_with(model: Path) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "fimconstrain", "complete", str(EXAMPLES / "inventory.py"), "--cursor", "30:9"]
        + ["--model", str(model)],
        capture_output=True,
        cwd=REPO,
        timeout=300,
    )
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def gguf_header(metadata: dict[str, str]) -> bytes:
    """A GGUF (version 3) header with ``metadata`` as string values and no tensors."""
    import struct

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(metadata))
    for key, value in metadata.items():
        k, v = key.encode(), value.encode()
        out += struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v
    return out


@pytest.mark.parametrize(
    "content, says",
    [
        (bytes(range(256)) * 64, "not a GGUF file"),
        (b"", "not a GGUF file"),
        (b"GGUF\x03\x00\x00\x00" + b"\xff" * 40, "cut or damaged GGUF file"),
        (gguf_header({"general.architecture": "llama"})[:-3], "cut or damaged GGUF file"),
    ],
    ids=["random bytes", "empty", "garbage after the magic", "metadata cut short"],
)
def test_a_file_that_is_no_gguf_is_one_line(tmp_path, content, says):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(content)
    read = read_gguf_metadata(bad)
    assert isinstance(read, str) and says in read
    rc, err = complete_with(bad)
    assert rc == 2 and says in _one_line(err) and str(bad) in err


def test_a_gguf_llama_cpp_cannot_load_names_its_architecture(tmp_path):
    pytest.importorskip("llama_cpp")
    bad = tmp_path / "model.gguf"
    bad.write_bytes(gguf_header({"general.architecture": "no-such-architecture"}))
    assert read_gguf_metadata(bad) == {"general.architecture": "no-such-architecture"}  # (read whole)
    rc, err = complete_with(bad)
    line = _one_line(err)
    assert rc == 2 and "llama.cpp could not load it" in line and "no-such-architecture" in line


@pytest.mark.parametrize(
    "files, says",
    [
        ({}, "holds no config.json and no weights and no tokenizer files"),
        ({"config.json": json.dumps({"model_type": "gpt2"})}, "holds no weights and no tokenizer files"),
    ],
    ids=["empty folder", "a config alone"],
)
def test_a_folder_without_a_checkpoint_is_one_line(tmp_path, files, says):
    pytest.importorskip("transformers")
    folder = tmp_path / "model"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    rc, err = complete_with(folder)
    assert rc == 2 and says in _one_line(err)


@pytest.fixture(scope="module")
def checkpoint_without_fim_tokens(tmp_path_factory) -> Path:
    """The tiny model (``scripts/tiny_model.py``) with SantaCoder's FIM markers renamed: tokens
    like any other, so that its vocabulary holds no format's markers."""
    pytest.importorskip("torch")
    from tiny_model import build_tiny_model

    folder = build_tiny_model(tmp_path_factory.mktemp("no_fim") / "model", layers=1)
    for path in folder.glob("*.json"):
        path.write_text(path.read_text("utf-8").replace("<fim-", "<no-fim-"), "utf-8")
    return folder


NO_FIM_TOKENS = "no known FIM marker tokens in its vocabulary"


def test_a_checkpoint_without_fim_tokens_is_one_line(checkpoint_without_fim_tokens):
    rc, err = complete_with(checkpoint_without_fim_tokens)
    line = _one_line(err)  # (said before the weights load: no progress bar)
    assert rc == 2 and NO_FIM_TOKENS in line and "not a fill-in-the-middle model" in line
    assert str(checkpoint_without_fim_tokens) in line


def test_a_gguf_without_fim_tokens_is_one_line(checkpoint_without_fim_tokens, tmp_path):
    """No ``tokenizer.ggml.fim_*`` keys in the metadata, and no markers in the vocabulary."""
    pytest.importorskip("gguf")
    pytest.importorskip("llama_cpp")
    from fimconstrain.decoding.models.gguf_export import export_gguf

    gguf = export_gguf(checkpoint_without_fim_tokens, tmp_path / "model.gguf")
    metadata = read_gguf_metadata(gguf)
    assert not isinstance(metadata, str) and not any(".fim_" in key for key in metadata)
    rc, err = complete_with(gguf)
    line = _one_line(err)
    assert rc == 2 and NO_FIM_TOKENS in line and str(gguf) in line
