"""A tiny random FIM model (SantaCoder's tokens) shared by the serving tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    from fimconstrain.evaluation.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), context=256)
