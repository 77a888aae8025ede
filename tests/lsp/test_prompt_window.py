"""The editor's prompt window: ``promptWindow`` and ``suffixTokens`` reach the decoder, and a
request after a few characters typed at the cursor reads only the prompt's changed tail (the
suffix) on llama.cpp, the rest coming from the key/value cache. Nothing here asserts on timings.
Without llama-cpp-python the llama.cpp test is skipped, except under CI (the ``CI`` variable set).
"""

from __future__ import annotations

import ast
import os
import time

import pytest

from lsp_server.config import Settings, update


def test_the_prompt_window_settings_parse_and_bad_values_are_ignored():
    settings, problems = update(Settings(), {"fimconstrain": {"promptWindow": 512, "suffixTokens": 32}})
    assert (settings.prompt_window, settings.suffix_tokens) == (512, 32) and problems == []
    settings, problems = update(settings, {"promptWindow": None, "suffix_tokens": None})
    assert (settings.prompt_window, settings.suffix_tokens) == (None, None) and problems == []
    settings, problems = update(settings, {"promptWindow": 3, "suffixTokens": -1})
    assert (settings.prompt_window, settings.suffix_tokens) == (None, None) and len(problems) == 2
    assert Settings().to_dict()["promptWindow"] == Settings.prompt_window


def _gguf():
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("llama-cpp-python is not installed")
        pytest.skip("llama-cpp-python is not installed")
    from fimconstrain.decoding.models.loading import default_gguf

    return default_gguf()


#: a document longer than the window: forty functions, the cursor in the middle of them
HEAD = "".join(f"def f{i}(x):\n    return x * {i} + {i * i}\n\n\n" for i in range(40))
TAIL = "".join(f"def g{i}(y):\n    return y - {i}\n\n\n" for i in range(40))


def test_a_slow_model_gets_the_window_it_reads_within_the_first_requests_share_of_the_deadline():
    from lsp_server.completer import FIRST_READ_SHARE, MIN_FITTED_WINDOW, fitted_window

    settings = Settings()  # promptWindow 1024, deadlineMs 3000, maxTokens 64
    assert fitted_window(settings, 8192, None) == settings.prompt_window  # (not timed: as set)
    assert fitted_window(settings, 8192, 5000.0) == settings.prompt_window  # a fast model
    assert fitted_window(settings, 512, 5000.0) == 512  # never past the model's window
    slow = 200.0  # tokens a second: 360 in 60% of 3 s, and the middle's 64 tokens of room
    assert fitted_window(settings, 8192, slow) == int(slow * FIRST_READ_SHARE * 3) + 64 == 424
    assert fitted_window(settings, 8192, 20.0) == MIN_FITTED_WINDOW
    assert fitted_window(update(settings, {"deadlineMs": 6000})[0], 8192, slow) == 784


def test_the_reading_rate_is_measured_once_per_model_and_settings(tmp_path, monkeypatch):
    """A restart reuses the rate measured at an earlier load (no prefill); another model file,
    a changed file or other settings are measured again."""
    from types import SimpleNamespace

    from lsp_server import completer

    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path / "cache"))
    measured: list[str] = []

    def reading_rate(backend):
        measured.append(backend.name)
        return 100.0 + len(measured)

    monkeypatch.setattr(completer, "reading_rate", reading_rate)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    backend = SimpleNamespace(name=str(model))
    settings = Settings(model=str(model), threads=2)
    assert completer.remembered_rate(backend, settings) == 101.0
    assert completer.remembered_rate(backend, settings) == 101.0 and len(measured) == 1
    assert completer.remembered_rate(backend, update(settings, {"threads": 1})[0]) == 102.0
    os.utime(model, ns=(1, 1))  # another file, for all the rate knows
    assert completer.remembered_rate(backend, settings) == 103.0
    (tmp_path / "cache" / completer.RATES_FILE).write_text("{cut")  # damaged: measured again
    assert completer.remembered_rate(backend, settings) == 104.0
    assert completer.remembered_rate(backend, settings) == 104.0 and len(measured) == 4


def test_the_window_reaches_the_decoder_and_typing_reads_only_the_changed_tail():
    from lsp_server.completer import Completer, Job

    settings = Settings(model=str(_gguf()), threads=1, prompt_window=256, suffix_tokens=24, semantic=False)
    completer = Completer()
    loaded = completer.load(settings)
    decoder = loaded.decoder
    assert decoder.window == 256 and decoder.cut.suffix_tokens == 24
    backend = decoder.backend

    def ask(prefix: str) -> tuple[int, int]:
        """The prompt tokens read and reused by a request at the end of ``prefix``."""
        read, reused = backend.prompt_read, backend.prompt_reused
        job = Job("file:///w.py", time.monotonic() + 120, single_line=True)
        for middle in completer.complete(job, prefix, "\n\n\n" + TAIL, settings, 1):
            ast.parse(prefix + middle + "\n\n\n" + TAIL)
        return backend.prompt_read - read, backend.prompt_reused - reused

    prefix = HEAD + "def h(z):\n    return z"
    first, _ = ask(prefix)
    typed, kept = ask(prefix + " +")  # two characters typed at the cursor
    # the window: at most 256 - the middle's room; the edit reads the suffix (24 tokens, 3
    # markers) and the prefix's last few tokens again, never the prefix cut at the window's start
    assert first > 24 + 3
    assert typed <= 24 + 3 + 6 and kept >= 256 - 64 - 24 - 3 - 6 - 64  # (a stride may fall)

    # no window setting: the model's whole window
    completer.load(Settings(model=str(_gguf()), threads=1, prompt_window=None, semantic=False))
    assert completer.loaded.decoder.window == completer.loaded.decoder.backend.context_window


def test_in_spm_order_typing_reads_only_the_prompts_last_tokens_again():
    """Suffix first (``<PRE><SUF> suffix <MID> prefix``), a character typed at the cursor changes
    only the prompt's end: the suffix and the markers come from the key/value cache."""
    from fimconstrain.decoding.loop.generate import FimDecoder
    from fimconstrain.decoding.loop.options import DecodeOptions
    from fimconstrain.decoding.models.loading import load_model
    from fimconstrain.decoding.tokens.fim_formats import PromptCut

    backend = load_model(str(_gguf()), runtime="llama", threads=1, progress=False)
    decoder = FimDecoder(backend, order="spm", window=256, cut=PromptCut(24))
    options = DecodeOptions.editor(single_line=True, max_new_tokens=8, semantic=False)

    def ask(prefix: str) -> tuple[int, int]:
        read, reused = backend.prompt_read, backend.prompt_reused
        decoder.generate(prefix, "\n\n\n" + TAIL, options)
        return backend.prompt_read - read, backend.prompt_reused - reused

    prefix = HEAD + "def h(z):\n    return z"
    first, _ = ask(prefix)
    typed, kept = ask(prefix + " +")
    assert first > 24 + 3 and typed <= 6 and kept >= first - 6
