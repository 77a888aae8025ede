"""Loading a model quietly (``load_model(progress=False)``, what the language server does):
transformers' progress bar goes to standard error, which an editor logs as error lines."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from fimconstrain.decoding.models.loading import load_model


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_loading"))


def test_no_progress_bar_without_progress(tiny_dir, capfd):
    load_model(tiny_dir, progress=False)
    assert "Loading weights" not in capfd.readouterr().err


def test_the_bar_shows_by_default(tiny_dir, capfd):
    load_model(tiny_dir)
    assert "Loading weights" in capfd.readouterr().err
