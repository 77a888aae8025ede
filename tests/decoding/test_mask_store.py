"""The token-mask store: sound against the exact checker on real files, cached on disk, and
the helpers that apply it (prefix-only logits, FIM pre-filter)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import read_utf8, sample_stdlib
from mask_decoding import mask_logits, pack, prefiltered, prefix_logits
from tokenizer_training import stdlib_texts, train_byte_level_bpe

import fimconstrain
from fimconstrain.decoding.masks.builder import Alphabet
from fimconstrain.decoding.masks.store import MaskStore, unpack
from fimconstrain.decoding.tokens.token_bytes import (
    TokenBytes,
    split_utf8,
    token_steps,
    vocabulary,
)

VOCAB_SIZE = 4096


def from_strings(tokens: list[str | None]) -> TokenBytes:
    """A vocabulary given as token texts (None for special tokens)."""
    return TokenBytes(tuple(None if t is None else t.encode("utf-8") for t in tokens))


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
    """A 4k byte-level BPE trained on part of the standard library (a few seconds)."""
    path = tmp_path_factory.mktemp("tokenizer") / "bpe.json"
    return train_byte_level_bpe(stdlib_texts(limit=400), VOCAB_SIZE, path)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("masks")


@pytest.fixture(scope="session")
def store(tokenizer, cache_dir):
    return MaskStore.load_or_build(tokenizer, cache_dir=cache_dir, progress=False)


def token_variants(vocab, alphabet: Alphabet) -> list[tuple[str, ...]]:
    """What each token can add to the text: a token ending inside a UTF-8 character may become
    any character of each class (as the decoder holds it back until it is whole)."""
    out = []
    for piece in vocab.pieces:
        if piece is None:
            out.append(())
            continue
        text, tail = split_utf8(piece)
        out.append(tuple(text + ch for ch in alphabet.non_ascii.values()) if tail else (text,))
    return out


def exact_allowed(checker, variants) -> np.ndarray:
    """Bool vector: tokens the exact checker accepts next."""
    return np.array([any(checker.feed(v) is not None for v in vs) for vs in variants], dtype=bool)


def positions(tokenizer, n_files: int, per_file: int, seed: int):
    """(file text, cut offset) pairs: half at token boundaries of the file's own tokenization
    (where decoding stands), half at any character (mid-lexeme)."""
    rng = random.Random(seed)
    for path in sample_stdlib(n_files, 60_000, seed, min_bytes=2_000):
        text = read_utf8(path)
        ends = np.cumsum([len(p) for p in tokenizer.encode(text).tokens])
        for k in range(per_file):
            cut = int(ends[rng.randrange(len(ends))]) if k % 2 else rng.randrange(len(text))
            if text[:cut].isascii():  # byte offsets of BPE pieces equal char offsets
                yield text, cut


@pytest.mark.time_limit(120)
def test_sound_and_tight_on_stdlib(tokenizer, store):
    """Every token the exact checker accepts at real positions is in the mask; few others are."""
    vocab = vocabulary(tokenizer)
    variants = token_variants(vocab, Alphabet(store.layer.dfa))
    masked = accepted = 0
    for text, cut in positions(tokenizer, n_files=8, per_file=5, seed=1):
        checker = fimconstrain.fim_checker(text[:cut])
        mask = store.allowed(checker)
        exact = exact_allowed(checker, variants)
        missed = np.flatnonzero(exact & ~mask)
        assert not len(missed), (repr(text[max(0, cut - 60) : cut]), [vocab.pieces[t] for t in missed[:10]])
        masked += int(mask.sum())
        accepted += int(exact.sum())
    assert masked and (masked - accepted) / masked < 0.05


def test_sound_with_a_suffix(tokenizer, store):
    """FIM checkers have the same branches on the prefix side: the mask stays a superset."""
    vocab = vocabulary(tokenizer)
    variants = token_variants(vocab, Alphabet(store.layer.dfa))
    for text, cut in positions(tokenizer, n_files=2, per_file=3, seed=2):
        end = min(len(text), cut + 200)
        checker = fimconstrain.fim_checker(text[:cut], text[end:])
        assert not (exact_allowed(checker, variants) & ~store.allowed(checker)).any()


@pytest.mark.time_limit(120)
def test_vouched_tokens_pass_on_stdlib(tokenizer, store):
    """Every token the store vouches for (:meth:`MaskStore.sure`) at real positions, with and
    without a suffix, is accepted by the exact checker, and lies inside the mask; and the
    store vouches for a good share of the accepted tokens (what a mask walk need not feed)."""
    vocab = vocabulary(tokenizer)
    texts = [None if p is None else p.decode("utf-8", errors="replace") for p in vocab.pieces]
    vouched = accepted = 0
    for text, cut in positions(tokenizer, n_files=8, per_file=6, seed=3):
        for checker in (
            fimconstrain.fim_checker(text[:cut]),
            fimconstrain.fim_checker(*(text[:cut], text[cut:])),
        ):
            sure = unpack(store.sure(checker), store.vocab_size)
            assert not (sure & ~store.allowed(checker)).any()
            wrong = [texts[t] for t in np.flatnonzero(sure) if checker.feed(texts[t]) is None]
            assert not wrong, (repr(text[max(0, cut - 60) : cut]), wrong[:10])
            vouched += int(sure.sum())
            accepted += sum(checker.feed(t) is not None for t in texts if t)
    assert vouched > accepted // 2, (vouched, accepted)


def test_vouching_needs_a_branch_read_as_it_is():
    """Hand-picked: a name goes on (``b`` after ``x = b``) or starts after a comma (``b`` after
    ``f(a,``); ``0x`` after ``x = 1`` is refused and not vouched for (``10`` would be the
    longer lexeme); blanks first, a ``\r`` or a pending ``\r`` leave it to the checker."""
    tokens = ["0x", "0", "x", "b", " b", "b)", "\rb", "bb"]
    store = small_store(tokens)

    def vouched(checker):
        return {t for t, ok in zip(tokens, unpack(store.sure(checker), store.vocab_size)) if ok}

    after_number = fimconstrain.fim_checker("x = 1")
    assert vouched(after_number) == {"0"} and after_number.feed("0x") is None
    assert {"b", "bb", "x"} <= vouched(fimconstrain.fim_checker("f(a,"))
    assert {"b", "bb"} <= vouched(fimconstrain.fim_checker("x = b"))
    for checker in (fimconstrain.fim_checker("f(a,"), fimconstrain.fim_checker("x = b")):
        assert not {" b", "b)", "\rb"} & vouched(checker)
        assert all(checker.feed(t) is not None for t in vouched(checker))
    pending = fimconstrain.fim_checker("x = b").feed("\r")
    assert pending is not None and pending.pending_cr and not vouched(pending)


def test_cache_round_trip(tokenizer, store, cache_dir):
    """The saved store reloads (from the same path, keyed by grammar and vocabulary) and gives
    the same masks."""
    vocab = vocabulary(tokenizer)
    path = MaskStore.cache_path(vocab, "python", cache_dir)
    assert path.exists() and path.stat().st_size < 20_000_000
    again = MaskStore.load_or_build(tokenizer, cache_dir=cache_dir, progress=False)
    assert again.meta["vocab"] == store.meta["vocab"] == vocab.fingerprint()
    for prefix in ["", "import os\n", "def f(x):\n    return x", "s = 'abc", "if a:\n    b = [1,\n"]:
        checker = fimconstrain.fim_checker(prefix)
        assert np.array_equal(again.mask(checker), store.mask(checker))
    with pytest.raises(ValueError):
        MaskStore.load(path, vocab=from_strings(["a", "b"]))


def test_cache_key_follows_the_vocabulary(tokenizer, cache_dir):
    vocab = vocabulary(tokenizer)
    other = from_strings(["x", "y", None])
    assert MaskStore.cache_path(vocab, "python", cache_dir) != MaskStore.cache_path(
        other, "python", cache_dir
    )


def small_store(tokens, language="python", python_version=None):
    return MaskStore.build(
        from_strings(tokens), language=language, progress=False, python_version=python_version
    )


def allowed_texts(store, tokens, checker, held=0):
    return {t for t, ok in zip(tokens, store.allowed(checker, held)) if ok}


def test_small_vocabulary_masks():
    """Hand-picked tokens: keyword vs name, the second terminal, indentation after a newline."""
    tokens = [
        "x",
        " =",
        " 1",
        ")",
        "(",
        "def",
        " f",
        "():",
        ":",
        "\n",
        "    ",
        " return",
        "return",
        "\n    return",
        " pass",
        "'",
        "'a'",
        "#",
        "\0",
        None,
        "\n\n",
    ]
    store = small_store(tokens)
    c = fimconstrain.fim_checker("x")
    got = allowed_texts(store, tokens, c)
    assert {"x", " =", "\n", "(", "\n\n"} <= got
    assert not {" 1", ")", "\0", None} & got
    c = fimconstrain.fim_checker("def f")
    got = allowed_texts(store, tokens, c)
    assert {"():", "("} <= got and " =" not in got
    c = fimconstrain.fim_checker("def f():\n")
    got = allowed_texts(store, tokens, c)
    assert "    " in got and " return" in got  # more indentation, then the body
    assert "return" not in got  # the body must be indented


def test_unfinished_utf8_and_held_characters():
    """A token ending inside a character is allowed where some character could go; while the
    decoder holds part of a character every text token is allowed."""
    store = MaskStore.build(TokenBytes((b"x", b"=", b" ", b"\xc3", b"\xe2\x82")), progress=False)
    c = fimconstrain.fim_checker("s = '")
    assert store.allowed(c)[3:].all()  # inside a string any character fits
    c = fimconstrain.fim_checker("x = 1")
    bits = store.allowed(c)
    assert bits[3] == (
        c.feed("é") is not None or c.feed("\u00a0") is not None or c.feed("\u20ac") is not None
    )
    assert store.allowed(c, held=1).all()


def byte_level_tokenizer(pieces: list[bytes]):
    """A transformers tokenizer whose tokens are ``pieces`` under GPT-2's byte-level mapping
    (no merges: built to decode hand-picked tokens, not to encode)."""
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    kept = [*range(33, 127), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    extra = [b for b in range(256) if b not in kept]
    char = {**{b: chr(b) for b in kept}, **{b: chr(256 + n) for n, b in enumerate(extra)}}
    vocab = {"".join(char[b] for b in piece): t for t, piece in enumerate(pieces)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def test_a_stray_byte_before_an_unfinished_character_stays_text():
    """A byte-level BPE learns tokens such as ``\\x98\\xf0\\x9d\\x94`` (the end of 𝔘, the start of
    the next) from runs of such characters. After whole text its first byte is U+FFFD for good
    and only the unfinished character is held back (one U+FFFD, as lossy UTF-8 decodes it): in
    a name no continuation mends the first, so the exact check refuses the token, and every
    token it passes is in the store's mask. (It held back both, saw 𝔘 continue the name and
    passed a token the mask rightly lacks.)"""
    from fimconstrain.decoding.loop.constraint import ConstraintState
    from fimconstrain.decoding.tokens.fim_formats import TextCodec

    pieces = [b"x", b" =", b" ab", b" '", b"\xf0\x9d\x94", b"\x98", b"\x98\xf0\x9d\x94", b"\xcc", b"\x80"]
    tok = byte_level_tokenizer(pieces)
    store = MaskStore.build(vocabulary(tok), progress=False)
    codec = TextCodec(tok)
    for prefix in ("x = ab", "x =", "x = 'ab", "x = 1"):
        state = ConstraintState(fimconstrain.fim_checker(prefix), codec)
        mask = store.allowed(state.checker)
        missed = [pieces[t] for t in range(len(pieces)) if state.child(t) is not None and not mask[t]]
        assert not missed, (prefix, missed)
    stray, start, end, mark = 6, 4, 5, 7
    name = ConstraintState(fimconstrain.fim_checker("x = ab"), codec)
    assert name.child(stray) is None  # ab\ufffd: no name
    twice = name.child(start).child(stray)  # ab𝔘, then the start of another 𝔘
    assert twice is not None and twice.held == 1 and twice.child(end).checker.feed("\n") is not None
    assert name.child(mark).child(pieces.index(b"\x80")).held == 0  # ab + a combining grave
    in_string = ConstraintState(fimconstrain.fim_checker("x = 'ab"), codec).child(stray)
    assert in_string is not None and in_string.held == 1 and in_string.final_checker().feed("'") is not None


def test_pending_carriage_return():
    """After a lone \\r the checker drops a following \\n: tokens starting with \\n stay allowed."""
    tokens = ["x", "\r", "\n", "\nx", "("]
    store = small_store(tokens)
    c = fimconstrain.fim_checker("x = 1").feed("\r")
    assert c.pending_cr
    got = allowed_texts(store, tokens, c)
    for t in tokens:
        if c.feed(t) is not None:
            assert t in got


def test_prefilter_keeps_order_and_every_passing_candidate(tokenizer, store):
    vocab = vocabulary(tokenizer)
    checker = fimconstrain.fim_checker("import os\n\ndef main(argv):\n    x = f(argv)")
    ranked = list(range(vocab.size))[::-1]
    kept = store.prefilter(checker, ranked + [vocab.size + 5, -1])
    assert kept == sorted(kept, reverse=True)
    passing = [
        t
        for t in ranked
        if vocab.pieces[t] is not None
        and split_utf8(vocab.pieces[t])[1] == b""
        and checker.feed(split_utf8(vocab.pieces[t])[0]) is not None
    ]
    assert set(passing) <= set(kept)
    assert len(kept) < vocab.size // 2  # after an expression most tokens are ruled out
    stop = tokenizer.token_to_id("<|endoftext|>")
    lazy = list(prefiltered(store, checker, ranked, passthrough=[stop]))
    assert lazy[:1] == [kept[0]] and stop in lazy


def test_logit_helpers(store):
    checker = fimconstrain.fim_checker("x = 1\n")
    logits = np.zeros(store.vocab_size + 3)
    out = prefix_logits(store, checker, logits, stop_ids=[store.vocab_size + 1])
    allowed = store.allowed(checker)
    assert (
        np.isneginf(out[: store.vocab_size][~allowed]).all() and (out[: store.vocab_size][allowed] == 0).all()
    )
    assert out[store.vocab_size + 1] == 0 and np.isneginf(out[store.vocab_size])  # complete: stop allowed
    open_checker = fimconstrain.fim_checker("x = (")
    out = prefix_logits(store, open_checker, logits, stop_ids=[store.vocab_size + 1])
    assert np.isneginf(out[store.vocab_size + 1])
    assert np.array_equal(unpack(pack(allowed), len(allowed)), allowed)
    assert np.isneginf(mask_logits(np.zeros(4), np.array([True, False, True, False]), also=[3])[1])


def test_plain_grammar(tmp_path):
    """The store works for a grammar without a layout layer (JSON)."""
    tokens = ["{", "}", '"a"', '":', " ", ",", "1", "[", "]", "true", "tr", "ue", '"', "a"]
    store = small_store(tokens, language="json")
    for prefix in ['{"a": [1, tr', '{"a"', "[", '["a', "{"]:
        c = fimconstrain.fim_checker(prefix, language="json")
        got = allowed_texts(store, tokens, c)
        assert {t for t in tokens if c.feed(t) is not None} <= got


def test_vocabulary_bytes_and_steps(tokenizer):
    """Token bytes under the byte-level scheme, unfinished characters held back, fingerprints."""
    vocab = vocabulary(tokenizer)
    ids = tokenizer.encode("x = 'é€'\n").ids
    assert b"".join(vocab.pieces[t] for t in ids) == "x = 'é€'\n".encode()
    steps = list(token_steps(vocab, ids))
    assert "".join(text for text, _ in steps) == "x = 'é€'\n" and steps[-1][1] == 0
    assert split_utf8(b"a\xe2\x82") == ("a", b"\xe2\x82")
    assert split_utf8(b"\x80a") == ("\ufffd" + "a", b"")
    assert vocab.pieces[tokenizer.token_to_id("<|endoftext|>")] is None
    assert vocab.fingerprint() == vocabulary(tokenizer).fingerprint() != from_strings(["a"]).fingerprint()
    assert vocabulary(tokenizer, size=vocab.size + 7).pieces[-1] is None


# ---------------------------------------------------------------- per Python version


ALIAS_TOKENS = ["type", " X", " =", " int", "\n", "x", " ", "match", ":", "[", "T", "]"]


def test_cache_is_keyed_by_python_version(tmp_path):
    """One store file per target version (name and metadata), each loaded only for its own
    version; a language without versions has none in its name."""
    vocab = from_strings(ALIAS_TOKENS)
    paths = {v: MaskStore.cache_path(vocab, "python", tmp_path, v) for v in ("3.11", "3.12", (3, 12))}
    assert paths["3.12"] == paths[(3, 12)] != paths["3.11"]
    assert "-3.11-" in paths["3.11"].name and "-3.12-" in paths["3.12"].name
    assert MaskStore.cache_path(vocab, "python", tmp_path) == MaskStore.cache_path(
        vocab, "python", tmp_path, "3.14"
    )
    assert "3." not in MaskStore.cache_path(vocab, "json", tmp_path).name
    old = MaskStore.load_or_build(vocab, cache_dir=tmp_path, progress=False, python_version="3.11")
    new = MaskStore.load_or_build(vocab, cache_dir=tmp_path, progress=False, python_version="3.12")
    assert paths["3.11"].exists() and paths["3.12"].exists()
    assert (old.python_version, new.python_version) == ("3.11", "3.12")
    assert old.meta["python_version"] == "3.11" and new.meta["python_version"] == "3.12"
    assert MaskStore.load(paths["3.12"]).python_version == "3.12"  # no version asked: the stored one
    with pytest.raises(ValueError, match=r"3\.12"):
        MaskStore.load(paths["3.12"], "python", vocab, "3.11")
    # a file without a version (written before stores were per version) is built again
    with np.load(paths["3.12"], allow_pickle=False) as f:
        import json

        meta, data = json.loads(str(f["meta"])), {k: f[k] for k in f.files if k != "meta"}
    del meta["python_version"]
    np.savez(paths["3.12"], meta=np.array(json.dumps(meta)), **data)
    with pytest.raises(ValueError):
        MaskStore.load(paths["3.12"], "python", vocab, "3.12")
    again = MaskStore.load_or_build(vocab, cache_dir=tmp_path, progress=False, python_version="3.12")
    assert MaskStore.load(paths["3.12"]).python_version == again.python_version == "3.12"


def test_masks_follow_the_version():
    """`type X = ...` (3.12): the 3.12 store lets ` X` follow `type`, as the exact check does;
    a store refuses a checker of another version."""
    s311 = small_store(ALIAS_TOKENS, python_version="3.11")
    s312 = small_store(ALIAS_TOKENS, python_version="3.12")
    c312 = fimconstrain.fim_checker("type", python_version="3.12")
    c311 = fimconstrain.fim_checker("type", python_version="3.11")
    assert c312.feed(" X") is not None and c311.feed(" X") is None
    assert " X" in allowed_texts(s312, ALIAS_TOKENS, c312)
    for store, checker in ((s311, c311), (s312, c312)):  # sound at each version
        got = allowed_texts(store, ALIAS_TOKENS, checker)
        assert {t for t in ALIAS_TOKENS if checker.feed(t) is not None} <= got
    with pytest.raises(ValueError, match=r"Python 3\.12.*Python 3\.11"):
        s312.mask(c311)


def test_memos_stay_bounded_and_a_tiny_bound_changes_no_mask(tokenizer, store, monkeypatch):
    """The composed masks and the unions of ``fresh`` rows are memoised up to ``MEMO_SIZE``
    each (a long-running server meets ever new parser answers); with a bound of 1 every mask
    is the same."""
    import fimconstrain.decoding.masks.store as mask_store

    checkers = [fimconstrain.fim_checker(text[:cut]) for text, cut in positions(tokenizer, 6, 4, seed=5)]
    normal = [store.mask(c).copy() for c in checkers]
    assert len(store._mask_memo) <= mask_store.MEMO_SIZE and len(store._fresh_memo) <= mask_store.MEMO_SIZE
    monkeypatch.setattr(mask_store, "MEMO_SIZE", 1)
    store._mask_memo.clear()
    store._fresh_memo.clear()
    for checker, want in zip(checkers, normal):
        assert np.array_equal(store.mask(checker), want)
        assert len(store._mask_memo) <= 1 and len(store._fresh_memo) <= 1
