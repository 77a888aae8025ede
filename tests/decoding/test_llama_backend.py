"""The llama.cpp backend (GGUF files) and the exporter that writes the shipped model as one.

The shipped model's GGUF is the exporter's output for its checkpoint, written once into the cache; its
tokenizer, rebuilt from the file, splits text as the checkpoint's and as llama.cpp's; and greedy
decoding through llama.cpp writes the same middles as through transformers in every mode, with
token healing, the names guide and the mask-store pre-filter on, at held-out cursors. Without
llama-cpp-python the llama.cpp tests are skipped, except under CI (the ``CI`` variable set), where
``scripts/llama_toolchain.sh`` installs it and they fail without it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("gguf")

from conftest import require_llama_cpp

from fimconstrain.decoding.loop.options import MODES, DecodeOptions
from fimconstrain.decoding.models import gguf_export
from fimconstrain.decoding.models import loading as models
from fimconstrain.decoding.models.gguf_export import ExportError, export_gguf
from fimconstrain.decoding.models.loading import (
    DEFAULT_MODEL_DIR,
    default_gguf,
    load_model,
    runtime_for,
)
from fimconstrain.engine.errors import FimConstrainError


@pytest.fixture(scope="module")
def llama():
    """The shipped model on llama.cpp."""
    require_llama_cpp()
    return load_model(default_gguf())


@pytest.fixture(scope="module")
def hf():
    pytest.importorskip("torch")
    return load_model(runtime="transformers", progress=False)


def heldout_cursors(count: int, seed: int = 0) -> list[tuple[str, str]]:
    """``count`` (prefix, suffix) cuts of files the shipped model never trained on, half at a
    line's indentation and half inside a line."""
    info = json.loads((DEFAULT_MODEL_DIR / "training.json").read_text("utf-8"))
    root = Path(info["stdlib"])
    if not root.is_dir():
        root = Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    files = sorted(p for p in (root / path for path in info["heldout_paths"]) if p.is_file())
    rng = random.Random(seed)
    cuts = []
    for n, path in enumerate(rng.sample(files, min(count, len(files)))):
        text = path.read_text("utf-8", errors="replace")
        lines = [
            i for i in range(1, min(len(text), 6000)) if text[i - 1] == "\n" and text[i : i + 4] == "    "
        ]
        if not lines:
            continue
        start = rng.choice(lines)
        cut = start + 4 if n % 2 == 0 else min(len(text), start + 4 + rng.randrange(1, 12))
        cuts.append((text[:cut], text[cut:]))
    return cuts


def test_the_shipped_models_gguf_is_written_once_into_the_cache_as_its_export(tmp_path, monkeypatch):
    """The package ships the checkpoint alone; llama.cpp's copy is its export, written on first
    use into the cache, found there afterwards, and written again for retrained weights."""
    pytest.importorskip("gguf")
    shipped = tmp_path / "default_model"
    shutil.copytree(DEFAULT_MODEL_DIR, shipped)
    monkeypatch.setattr(models, "DEFAULT_MODEL_DIR", shipped)
    monkeypatch.setattr(models, "DEFAULT_WEIGHTS", shipped / "model.safetensors")
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path / "cache"))
    exports = []
    monkeypatch.setattr(gguf_export, "export_gguf", lambda *a: exports.append(a) or export_gguf(*a))
    first = default_gguf()
    assert first.is_relative_to(tmp_path / "cache") and len(exports) == 1
    assert first.read_bytes() == export_gguf(shipped, tmp_path / "model.gguf").read_bytes()
    assert default_gguf() == first and len(exports) == 1
    os.utime(shipped / "model.safetensors", ns=(0, 0))  # (as when retrained weights replace them)
    assert default_gguf() != first and len(exports) == 2


def test_the_exporter_refuses_other_architectures(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ExportError, match="GPTBigCode"):
        export_gguf(tmp_path, tmp_path / "x.gguf")
    with pytest.raises(ExportError, match="dtype"):
        export_gguf(DEFAULT_MODEL_DIR, tmp_path / "x.gguf", dtype="q4")


def test_the_rebuilt_tokenizer_splits_code_as_the_checkpoint_and_llama_cpp(llama):
    from transformers import AutoTokenizer

    checkpoint = AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR)
    for prefix, suffix in heldout_cursors(12, seed=1):
        text = prefix + suffix
        ours = llama.tokenizer.encode(text, add_special_tokens=False)
        assert ours == checkpoint.encode(text, add_special_tokens=False)
        assert ours == llama.llama.tokenize(text.encode(), add_bos=False, special=False)
    assert llama.fim_format.name == "santacoder"  # from the file's FIM token ids
    assert llama.context_window == 1024 and llama.vocab_size == 8192


def test_a_format_the_table_lacks_comes_from_the_file_markers(llama):
    from fimconstrain.decoding.runtimes.llama_backend import gguf_fim_format

    vocab = llama.tokenizer.get_vocab()
    metadata = {
        "tokenizer.ggml.fim_pre_token_id": str(vocab["<fim-suffix>"]),  # not santacoder's roles
        "tokenizer.ggml.fim_suf_token_id": str(vocab["<fim-prefix>"]),
        "tokenizer.ggml.fim_mid_token_id": str(vocab["<fim-middle>"]),
        "tokenizer.ggml.eos_token_id": str(vocab["<|endoftext|>"]),
    }
    fmt = gguf_fim_format(llama.tokenizer, metadata)
    assert fmt.name == "gguf"
    assert fmt.marker_ids(llama.tokenizer) == {
        "PRE": vocab["<fim-suffix>"],
        "SUF": vocab["<fim-prefix>"],
        "MID": vocab["<fim-middle>"],
    }
    assert fmt.stop_ids(llama.tokenizer) == {vocab["<|endoftext|>"]}
    assert gguf_fim_format(llama.tokenizer, {}).name == "santacoder"  # no keys: from the vocabulary


@pytest.mark.parametrize("mode", MODES)
def test_greedy_middles_match_transformers_in_every_mode(llama, hf, mode, tmp_path, monkeypatch):
    from fimconstrain.decoding.loop.generate import FimDecoder

    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))  # prefix mode and the pre-filter build masks
    ours, theirs = FimDecoder(llama), FimDecoder(hf)
    options = replace(
        DecodeOptions.editor(False, max_new_tokens=24), mode=mode, prefilter=mode != "unconstrained"
    )
    for prefix, suffix in heldout_cursors(4, seed=2):
        a = ours.generate(prefix, suffix, options)
        b = theirs.generate(prefix, suffix, options)
        assert (a.middle, a.stopped, a.tokens) == (b.middle, b.stopped, b.tokens)


def test_a_prefill_reuses_the_cache_of_the_shared_prompt_prefix(llama):
    import numpy as np

    ids = llama.tokenizer.encode("def area(width, height):\n    return width * height\n")
    first = llama.start()
    fresh = first.prefill(ids)
    first.step(ids[0])
    second = llama.start()
    again = second.prefill(ids)
    assert second.reused == len(ids) - 1  # all but the last token, whose logits are wanted
    # the last token read alone, not in a batch: llama.cpp's f16 kernels differ in the last digits
    assert np.allclose(fresh, again, atol=1e-2) and fresh.argmax() == again.argmax()


def test_a_prefill_that_may_stop_reads_pieces_of_about_a_quarter_second(llama, monkeypatch):
    """How late a deadline is seen: pieces sized by the reading rate measured, within the range."""
    from fimconstrain.decoding.runtimes import llama_backend

    ids = llama.tokenizer.encode("def area(width, height):\n    return width * height\n" * 12)
    llama.start().prefill(ids)
    low, high = llama_backend.PREFILL_CHUNK_RANGE
    assert llama.read_rate is not None and low <= llama.prefill_chunk() <= high
    monkeypatch.setattr(llama, "read_rate", 4 / llama_backend.PREFILL_SLICE_SECONDS)  # a slow machine
    assert llama.prefill_chunk() == low
    asked = []
    session = llama.start()
    session.prefill([ids[-1], *ids], lambda: asked.append(len(session.ids)) or False)  # (nothing shared)
    assert asked[0] == low  # (then pieces as long as the rate measured on them says)
    slow = 4 / llama_backend.PREFILL_SLICE_SECONDS
    rate = llama.read_rate
    assert rate is not None and rate != slow
    assert llama.prefill_chunk() == max(low, min(high, int(rate * llama_backend.PREFILL_SLICE_SECONDS)))


def _interleaved(llama, a_ids, b_ids, steps):
    """Session a's logits, step by step, while session b prefills and steps between a's steps."""
    a, b = llama.start(), llama.start()
    seen = [a.prefill(a_ids)]
    b.prefill(b_ids)
    for i in range(steps):
        seen.append(a.step(int(seen[-1].argmax())))
        b.step(b_ids[i % len(b_ids)])
    return a, seen


def _alone(llama, ids, steps):
    session = llama.start()
    seen = [session.prefill(ids)]
    for _ in range(steps):
        seen.append(session.step(int(seen[-1].argmax())))
    return seen


def test_a_session_goes_on_where_it_was_after_another_used_the_context(llama):
    """Sessions may overlap (the server pauses one request for another at a decode step): the
    one paused gets its key/value cache back, copied aside while the other ran, and steps with
    the logits it would have had alone, to the last digit."""
    import numpy as np

    a_ids = llama.tokenizer.encode("def area(width, height):\n    return width")
    b_ids = llama.tokenizer.encode("import os\n\nfor name in os.listdir('.'):\n    print(")
    llama.start().prefill(b_ids[:3])  # the context holds something unrelated to a
    alone = _alone(llama, a_ids, 6)
    llama.start().prefill(b_ids[:3])
    a, interleaved = _interleaved(llama, a_ids, b_ids, 6)
    assert a.resumed == 6 and llama.saved_bytes > 0  # b stepped last: a's cache is kept aside
    assert all(np.array_equal(x, y) for x, y in zip(alone, interleaved, strict=True))
    del a
    assert llama.saved_bytes == 0  # nothing is kept for a session that is gone


def test_without_room_for_a_copy_a_paused_session_reads_its_tokens_again(llama, monkeypatch):
    import numpy as np

    from fimconstrain.decoding.runtimes import llama_backend

    monkeypatch.setattr(llama_backend, "SAVED_STATE_BYTES", 0)
    a_ids = llama.tokenizer.encode("class Point:\n    def __init__(self, x, y):\n        self.x = ")
    b_ids = llama.tokenizer.encode("values = [1, 2, 3]\ntotal = sum(")
    llama.start().prefill(b_ids[:3])
    alone = _alone(llama, a_ids, 5)
    llama.start().prefill(b_ids[:3])
    a, interleaved = _interleaved(llama, a_ids, b_ids, 5)
    assert a.resumed == 5 and llama.saved_bytes == 0
    for x, y in zip(alone, interleaved, strict=True):  # read in a batch: the last digits differ
        assert np.allclose(x, y, atol=1e-2) and x.argmax() == y.argmax()


def test_sessions_on_two_threads_at_once_write_what_they_write_alone(llama):
    """A llama.cpp context is not thread-safe: the backend takes one call at a time, and each
    session finds its own tokens in the context at its call."""
    import threading

    prompts = [
        llama.tokenizer.encode("def mean(values):\n    return sum(values) / "),
        llama.tokenizer.encode("for i in range(10):\n    if i % 2 == 0:\n        print("),
    ]
    alone = [[int(x.argmax()) for x in _alone(llama, ids, 12)] for ids in prompts]
    got: list[list[int]] = [[], []]

    def run(n: int) -> None:
        got[n] = [int(x.argmax()) for x in _alone(llama, prompts[n], 12)]

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert got == alone


def test_runtimes_are_picked_by_file_and_setting():
    assert runtime_for("model.gguf", "auto") == "llama"
    assert runtime_for("some/dir", "auto") == "transformers"
    assert runtime_for(None, "transformers") == "transformers"
    with pytest.raises(FimConstrainError, match=r"llama\.cpp"):
        runtime_for("model.gguf", "transformers")
    with pytest.raises(FimConstrainError, match="export-gguf"):
        runtime_for("some/dir", "llama")
    with pytest.raises(FimConstrainError, match="unknown runtime"):
        runtime_for(None, "onnx")


def test_a_checkpoint_directory_with_its_gguf_copy_runs_on_llama_cpp(llama, tmp_path):
    """``--runtime llama`` with a directory that training or ``export-gguf`` wrote a
    ``model.gguf`` into runs that file; ``auto`` keeps such a directory on transformers."""
    checkpoint = tmp_path / "model"
    checkpoint.mkdir()
    (checkpoint / "model.gguf").symlink_to(default_gguf())
    assert runtime_for(checkpoint, "llama") == "llama"
    assert runtime_for(checkpoint, "auto") == "transformers"
    backend = load_model(checkpoint, runtime="llama")
    assert type(backend).__name__ == "LlamaCppBackend" and backend.name == str(checkpoint / "model.gguf")


def test_auto_runs_the_shipped_model_on_llama_cpp_when_installed(llama):
    assert runtime_for(None, "auto") == "llama"
    backend = load_model(runtime="auto")
    assert type(backend).__name__ == "LlamaCppBackend" and backend.name == str(DEFAULT_MODEL_DIR)


def test_without_llama_cpp_a_gguf_is_a_one_line_error(monkeypatch):
    from fimconstrain.decoding.runtimes.llama_backend import LlamaCppMissingError

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now fails
    with pytest.raises(LlamaCppMissingError, match=r"pip install 'fimconstrain\[llama\]'") as error:
        load_model(default_gguf())
    assert "\n" not in str(error.value)


def test_a_missing_gguf_file_is_named(tmp_path):
    require_llama_cpp()
    with pytest.raises(FimConstrainError, match="does not exist"):
        load_model(tmp_path / "absent.gguf")


def test_an_editor_prompt_cut_keeps_its_start_when_characters_are_typed_at_the_cursor(llama):
    """With a :class:`PromptCut` the suffix keeps at most its share and the prefix's cut moves
    in whole strides: a prompt after 1-3 characters typed at the cursor shares all but its tail
    with the one before (the key/value cache reused); cut token by token it shares nothing."""
    from fimconstrain.decoding.tokens.fim_formats import PromptCut, TextCodec, build_prompt

    codec = TextCodec(llama.tokenizer)
    text = "".join(f"def f{i}(x):\n    return x * {i} + {i * i}\n\n\n" for i in range(60))
    suffix = "\n\n\n" + "".join(f"def g{i}(y):\n    return y - {i}\n" for i in range(30))
    cut = PromptCut(suffix_tokens=20, stride=32)

    def shared(a: list[int], b: list[int]) -> int:
        return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

    for end in range(len(text) - 300, len(text), 37):
        prefix = text[:end]
        before = build_prompt(llama.fim_format, codec, prefix, suffix, 200, "psm", cut)
        assert len(before) <= 200 and len(before) > 200 - 32
        for typed in ("x", "ab", " + "):
            after = build_prompt(llama.fim_format, codec, prefix + typed, suffix, 200, "psm", cut)
            if len(after) >= len(before):  # (else a stride fell: once per 32 tokens typed)
                assert shared(before, after) >= len(before) - 20 - 2 - 4
    plain = [build_prompt(llama.fim_format, codec, text[:-40] + t, suffix, 200) for t in ("", "ab")]
    assert shared(*plain) < 10


def test_drafts_from_the_prompt_change_no_greedy_middle_and_are_taken(llama):
    """Prompt lookup drafts (:mod:`fimconstrain.decoding.runtimes.prompt_lookup`; off by default)
    verified in the call of each step: the loop chooses every token from the logits as without
    them, so the same middles come; where the file repeats itself, drafted tokens are taken (no
    call of their own)."""
    from fimconstrain.decoding.loop.generate import FimDecoder
    from fimconstrain.decoding.runtimes.llama_backend import DRAFT_TOKENS

    decoder = FimDecoder(llama)
    options = DecodeOptions.editor(False, max_new_tokens=24)
    repeated = "def area(w, h):\n    return w * h\n\n\ndef volume(w, h, d):\n    return w * h * d\n\n\n"
    cursors = [*heldout_cursors(6, seed=3), (repeated + "def area2(w, h):\n    return ", "\n")]
    before = (llama.drafted, llama.accepted)
    plain = [decoder.generate(prefix, suffix, options) for prefix, suffix in cursors]
    try:
        llama.draft_tokens = 4
        drafted = [decoder.generate(prefix, suffix, options) for prefix, suffix in cursors]
    finally:
        llama.draft_tokens = DRAFT_TOKENS
    assert [(r.middle, r.token_ids) for r in drafted] == [(r.middle, r.token_ids) for r in plain]
    assert llama.drafted > before[0] and llama.accepted > before[1]
