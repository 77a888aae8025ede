"""The transformers backend's session: reading the prompt in pieces (``prefill`` with
``should_stop``) gives the same next-token logits as one pass, and a stop between pieces ends it
there; stepping passes the cache by the name the installed transformers takes."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import numpy as np  # noqa: E402

from fimconstrain.decoding.models.loading import load_model  # noqa: E402
from fimconstrain.decoding.runtimes import transformers_backend  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_model import build_tiny_model

    return load_model(build_tiny_model(Path(tmp_path_factory.mktemp("tiny_prefill")), context=512))


def _prompt(n: int) -> list[int]:
    return [(7 * i + 3) % 500 + 10 for i in range(n)]


def test_pieces_give_the_logits_of_one_pass(tiny, monkeypatch):
    monkeypatch.setattr(transformers_backend, "PREFILL_CHUNK", 64)
    prompt = _prompt(300)  # five pieces, the last one short
    whole = tiny.start().prefill(prompt)
    asked = []
    pieces = tiny.start().prefill(prompt, lambda: asked.append(1) or False)
    assert pieces is not None and np.allclose(whole, pieces, atol=1e-4)
    assert len(asked) == 4  # between the five pieces, not before the first


def test_a_stop_between_pieces_ends_the_prompt_there(tiny, monkeypatch):
    monkeypatch.setattr(transformers_backend, "PREFILL_CHUNK", 64)
    stepper = tiny.start()
    calls = []
    real = stepper.feed
    stepper.feed = lambda ids: calls.append(len(ids)) or real(ids)
    assert stepper.prefill(_prompt(300), lambda: True) is None
    assert calls == [64]


def test_the_cache_goes_by_the_name_the_installed_transformers_takes(tiny):
    """transformers 5 renamed ``past_key_values`` to ``cache`` (the old name warns, then goes):
    decoding step by step passes no deprecated argument and gives the logits of one pass."""
    import warnings

    prompt = _prompt(40)
    whole = tiny.start().prefill(prompt)
    stepper = tiny.start()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        stepper.prefill(prompt[:39])
        step = stepper.step(prompt[39])
    assert np.allclose(whole, step, atol=1e-4)
