"""The per-vocabulary structures cached on disk (the decoder's tables, the mask store, the
tokenizer rebuilt from a GGUF file): what is read back equals what is built fresh, and a
stale or damaged file is built again, never trusted."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
from tokenizer_training import SPECIAL_TOKENS, stdlib_texts, train_byte_level_bpe

import fimconstrain
from fimconstrain.decoding.loop.decode_vocabulary import DecodeVocabulary
from fimconstrain.decoding.masks.store import MaskStore
from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR, default_gguf
from fimconstrain.decoding.tokens.fim_formats import (
    _UNICODE_TO_BYTE,
    TextCodec,
    detect_format,
    special_token_ids,
)
from fimconstrain.decoding.tokens.healing_index import HealingIndex, HealingTable
from fimconstrain.decoding.tokens.token_bytes import vocabulary

PREFIXES = ["", "import os\n", "def f(x):\n    return x", "s = 'abc", "if a:\n    b = [1,\n"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Every cache of these tests in a folder of its own."""
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 600-token byte-level BPE trained here (StarCoder's FIM tokens), as transformers wraps it."""
    from transformers import PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tokenizer") / "bpe.json"
    train_byte_level_bpe(stdlib_texts(limit=60), 600, path)
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=SPECIAL_TOKENS[0])


@pytest.fixture(scope="module")
def shipped():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR, local_files_only=True)


@pytest.fixture(params=["small", "shipped"])
def tokenizer(request):
    return request.getfixturevalue(request.param)


def backend_of(tokenizer, extra: int = 3):
    """What :class:`DecodeVocabulary` reads of a model backend; the logits ``extra`` ids wider than
    the tokenizer."""
    return SimpleNamespace(
        tokenizer=tokenizer,
        vocab_size=len(tokenizer) + extra,
        fim_format=detect_format(tokenizer),
        special_ids=frozenset(special_token_ids(tokenizer)),
        context_window=1024,
    )


def test_token_bytes_read_at_once_are_those_read_character_by_character(tokenizer):
    backend = tokenizer.backend_tokenizer
    vocab = vocabulary(tokenizer, len(tokenizer) + 2)
    special = set(backend.get_added_tokens_decoder())
    expected = [
        None if token in special else bytes(_UNICODE_TO_BYTE.get(ch, 0) for ch in backend.id_to_token(token))
        for token in range(len(tokenizer))
    ]
    assert list(vocab.pieces) == expected + [None, None]
    assert vocab.fingerprint() == vocab.fingerprint()


def test_codec_tables_are_those_of_each_token(tokenizer):
    codec = TextCodec(tokenizer)
    fresh = TextCodec(tokenizer)
    fresh.use_token_bytes(vocabulary(tokenizer).pieces)
    by_token = [codec.piece(t) for t in range(len(tokenizer))]
    assert codec.pieces() == by_token == fresh.pieces()
    tails = codec.tails()
    for token, text in enumerate(by_token):
        if text and len(text) > 1 and tails[token] >= 0:
            assert by_token[tails[token]] == text[1:]
    assert fresh.tails() == tails


def test_the_tables_read_back_equal_those_built_fresh(tokenizer, cache):
    built = DecodeVocabulary(backend_of(tokenizer))
    index = built.healing_index(built.width)
    path = built.cache_path()
    assert path.exists() and path.parent == cache / "vocab"
    assert path.stem == vocabulary(tokenizer, built.width).fingerprint()  # the mask store's key
    fresh = HealingIndex(TextCodec(tokenizer), built.width)  # no cache at all
    read = DecodeVocabulary(backend_of(tokenizer))
    again = read.healing_index(read.width)
    for other in (fresh, again):
        assert (other.texts, other.ids, list(other.always)) == (index.texts, index.ids, list(index.always))
    assert read.codec._tails == TextCodec(tokenizer).tails()  # handed over from the file
    narrower = read.healing_index(len(tokenizer) - 10)
    expected = HealingIndex(TextCodec(tokenizer), len(tokenizer) - 10)
    assert (narrower.texts, narrower.ids, list(narrower.always)) == (
        expected.texts,
        expected.ids,
        list(expected.always),
    )
    for healing in ["retu", "pa", "+", " us", "é"]:
        assert np.array_equal(again.mask(healing), fresh.mask(healing))


def damage(path, how: str) -> None:
    """Spoil a cache file: cut it short, overwrite it with noise, or rewrite its header."""
    if how == "cut":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif how == "noise":
        path.write_bytes(os.urandom(4096))
    else:  # a file of another format or vocabulary, well formed
        with np.load(path) as f:
            arrays = {k: f[k] for k in f.files}
        meta = json.loads(str(arrays.pop("meta")))
        meta[how] = "something else" if how == "vocab" else 0
        np.savez(path, meta=np.array(json.dumps(meta)), **arrays)


@pytest.mark.parametrize("how", ["cut", "noise", "format", "vocab"])
def test_a_damaged_or_stale_tables_file_is_built_again(small, how):
    built = DecodeVocabulary(backend_of(small))
    index = built.healing_index(built.width)
    path = built.cache_path()
    damage(path, how)
    read = DecodeVocabulary(backend_of(small))
    again = read.healing_index(read.width)
    assert (again.texts, again.ids, list(again.always)) == (index.texts, index.ids, list(index.always))
    assert read.codec.tails() == TextCodec(small).tails()
    with np.load(path) as f:  # written again, whole
        assert json.loads(str(f["meta"])) == json.loads(json.dumps(read._header()))


def test_a_table_that_does_not_fit_is_refused(small):
    table = HealingTable.build(TextCodec(small))
    arrays = table.arrays()
    assert HealingTable.from_arrays(table.known, arrays) == table
    with pytest.raises(ValueError):
        HealingTable.from_arrays(table.known + 1, arrays)
    with pytest.raises(ValueError):
        HealingTable.from_arrays(table.known, {**arrays, "heal_ends": arrays["heal_ends"] + 1})


# ---------------------------------------------------------------- the mask store


@pytest.fixture(scope="module")
def store_tokenizer(small):
    return small


def masks_of(store):
    return masks_of_version(store, None)


def masks_of_version(store, version):
    return [store.mask(fimconstrain.fim_checker(prefix, python_version=version)) for prefix in PREFIXES]


def test_the_store_last_used_read_beside_the_checkers_equals_one_loaded(store_tokenizer, cache):
    vocab = vocabulary(store_tokenizer)
    assert MaskStore.last_used(vocab) is None
    built = MaskStore.load_or_build(vocab, progress=False, python_version="3.12")
    saved = MaskStore.last_used(vocab)
    assert saved is not None and saved.path == MaskStore.cache_path(vocab, python_version="3.12")
    attached = MaskStore.attach(saved)
    assert attached.layer is built.layer  # the checkers' own layer
    for a, b in zip(masks_of_version(attached, "3.12"), masks_of_version(built, "3.12")):
        assert np.array_equal(a, b)
    MaskStore.load_or_build(vocab, progress=False, python_version="3.9")
    assert MaskStore.last_used(vocab).meta["python_version"] == "3.9"
    os.utime(MaskStore.cache_path(vocab, python_version="3.9"), (1, 1))  # read long ago
    assert MaskStore.last_used(vocab).meta["python_version"] == "3.12"
    stale = dict(saved.meta, grammar="another")
    with pytest.raises(ValueError, match="another grammar"):
        MaskStore.attach(type(saved)(saved.path, saved.data, stale))


@pytest.mark.parametrize("how", ["cut", "noise", "vocab"])
def test_a_damaged_or_stale_store_is_built_again(store_tokenizer, how):
    vocab = vocabulary(store_tokenizer)
    built = MaskStore.load_or_build(vocab, progress=False)
    path = MaskStore.cache_path(vocab)
    damage(path, how)
    assert MaskStore.last_used(vocab) is None
    again = MaskStore.load_or_build(vocab, progress=False)
    for a, b in zip(masks_of(again), masks_of(built)):
        assert np.array_equal(a, b)
    assert MaskStore.last_used(vocab) is not None  # written again


def test_a_decoder_prepares_at_load_what_a_request_reads(shipped, cache):
    """The background thread reads the store of the version last used and the tables; the
    request's store is the one loaded without it."""
    from fimconstrain.decoding.loop.generate import FimDecoder

    backend = backend_of(shipped, extra=0)
    vocab = vocabulary(shipped, backend.vocab_size)
    loaded = MaskStore.load_or_build(vocab, progress=False, python_version="3.11")
    decoder = FimDecoder(backend)
    assert decoder.preparing is not None
    decoder.preparing.join(60)
    assert not decoder.preparing.is_alive()
    assert decoder.vocabulary._healing_table is not None and decoder.codec._piece_table is not None
    assert set(decoder._saved_stores) == {(3, 11)}
    store = decoder.mask_store("3.11")
    assert not decoder._saved_stores
    assert store.meta["vocab"] == loaded.meta["vocab"]
    for a, b in zip(masks_of_version(store, "3.11"), masks_of_version(loaded, "3.11")):
        assert np.array_equal(a, b)
    quiet = FimDecoder(backend, prepare=False)
    assert quiet.preparing is None and quiet.mask_store("3.11").meta == store.meta


# ---------------------------------------------------------------- the tokenizer of a GGUF file


def test_the_tokenizer_of_a_gguf_file_is_cached_by_the_file_identity(cache, tmp_path):
    pytest.importorskip("gguf")
    from fimconstrain.decoding.runtimes.llama_backend import TOKENIZER_PROBE, gguf_identity, gguf_tokenizer

    model = tmp_path / "model.gguf"
    model.write_bytes(default_gguf().read_bytes())
    key = gguf_identity(model)
    assert key is not None and key == gguf_identity(model)
    built = gguf_tokenizer(model)
    files = sorted(p.name for p in (cache / "tokenizers").iterdir())
    assert files == [f"gguf-{key}.json", f"gguf-{key}.settings.json"]
    read = gguf_tokenizer(model)

    def same(a, b):
        assert a.get_vocab() == b.get_vocab()
        assert a.added_tokens_decoder == b.added_tokens_decoder
        assert (a.eos_token_id, a.bos_token_id, a.all_special_ids) == (
            b.eos_token_id,
            b.bos_token_id,
            b.all_special_ids,
        )
        assert a.encode(TOKENIZER_PROBE) == b.encode(TOKENIZER_PROBE)
        assert a.backend_tokenizer.to_str() == b.backend_tokenizer.to_str()

    same(read, built)
    (cache / "tokenizers" / f"gguf-{key}.json").write_text('{"version": "1.0", "cut')  # damaged
    same(gguf_tokenizer(model), built)  # rebuilt, and the file written again
    same(gguf_tokenizer(model), built)
    os.utime(model, ns=(1, 1))  # another file for all the cache knows
    assert gguf_identity(model) != key
    data = bytearray(model.read_bytes())
    data[:4] = b"NOPE"
    model.write_bytes(bytes(data))
    assert gguf_identity(model) is None
    assert gguf_identity(tmp_path / "absent.gguf") is None


def test_the_training_window_is_read_from_the_gguf_metadata(tmp_path):
    """llama.cpp opens a model once, with its training window capped: the window comes from the
    metadata (``<architecture>.context_length``), read without loading the tensors."""
    gguf = pytest.importorskip("gguf")
    from fimconstrain.decoding.runtimes.llama_backend import read_gguf_metadata, training_window

    def gguf_training_window(path):
        read = read_gguf_metadata(path)
        return None if isinstance(read, str) else training_window(read)

    assert gguf_training_window(default_gguf()) == 1024
    path = tmp_path / "long.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_context_length(32768)
    writer.add_array("tokenizer.ggml.tokens", ["a", "b"])
    writer.add_uint64("qwen2.block_count", 24)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    assert gguf_training_window(path) == 32768
    path.write_bytes(path.read_bytes()[:40])  # cut inside the metadata
    assert gguf_training_window(path) is None
    assert gguf_training_window(tmp_path / "absent.gguf") is None
