"""The model ``auto`` (the default of ``complete``, the language server and the VS Code extension):
the first known model fetched on this machine, else the shipped demo, said in one line; nothing
is downloaded."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fimconstrain.decoding.model_choice import ModelChoice
from fimconstrain.decoding.models.known_models import (
    AUTO,
    KNOWN_MODELS,
    auto_model,
    auto_note,
    cached_path,
)

pytestmark = pytest.mark.time_limit(300)

REPO = Path(__file__).resolve().parents[2]


def fetched(name: str) -> None:
    """Make ``name`` look fetched in the cache: its file at its full size (sparse: no bytes)."""
    model = KNOWN_MODELS[name]
    path = cached_path(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(model.size)


def test_auto_is_the_first_known_model_fetched_else_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))
    assert auto_model() is None
    assert ModelChoice.of(argparse.Namespace(model=AUTO)).model is None
    names = list(KNOWN_MODELS)
    first, last = names[0], names[-1]
    fetched(last)
    assert auto_model() == last
    fetched(first)
    assert auto_model() == first
    assert ModelChoice.of(argparse.Namespace(model=AUTO)).model == first
    assert ModelChoice.of(argparse.Namespace(model=None)).model is None  # (None: the shipped one)


def test_the_note_says_which_and_how_to_get_a_real_one():
    first = next(iter(KNOWN_MODELS))
    assert first in auto_note(first) and "\n" not in auto_note(first)
    demo = auto_note(None)
    assert "demo" in demo and f"fimconstrain model get {first}" in demo and "\n" not in demo


def test_the_server_and_the_command_line_default_to_auto():
    pytest.importorskip("pygls")
    from fimconstrain.command_line.complete import build_parser
    from lsp_server.config import Settings

    assert Settings().model == AUTO
    assert build_parser().parse_args(["x.py", "--cursor", "1:1"]).model == AUTO


@pytest.mark.slow
def test_complete_on_a_machine_without_a_fetched_model_runs_the_demo_and_says_so(tmp_path):
    env = {**os.environ, "FIMCONSTRAIN_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "fimconstrain", "complete", str(REPO / "examples" / "inventory.py")]
    command += ["--cursor", "30:9", "--max-new-tokens", "8"]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode in (0, 1), run.stderr
    notes = [line for line in run.stderr.splitlines() if "model auto:" in line]
    assert len(notes) == 1 and "shipped demo model" in notes[0]
