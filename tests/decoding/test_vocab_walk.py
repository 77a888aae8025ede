"""The exact whole-vocabulary walk (``fimconstrain/decoding/masks/vocab_walk.py``, its C
extension ``fimconstrain/engine/_walk.c``): the same verdict as feeding every token's text to
the checker, bit for bit, for every token it decides, at held-out cuts over the shipped model's
vocabulary and a larger one, and after random text; the same whole masks with it as without it;
and the fallback to Python when it is not built or stale, with one line saying so."""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from stdlib_cursors import STDLIB, stdlib_cursors
from vocab_walk_twin import TwinModule, prepare_py, walk_py

import fimconstrain
from fimconstrain.decoding.masks import vocab_walk as vw
from fimconstrain.decoding.tokens.fim_formats import TextCodec
from fimconstrain.engine import native
from fimconstrain.engine.layers.layer_protocol import READS_ESCAPES, READS_NOTHING, READS_TEXT
from fimconstrain.engine.walk_ends import reduction_key

REPO = Path(__file__).resolve().parents[2]
TOKENIZER = REPO / "fimconstrain" / "default_model" / "tokenizer.json"
NATIVE = native.walk_extension()
needs_native = pytest.mark.skipif(
    NATIVE is None and not os.environ.get("CI"), reason="the C vocabulary walk is not built here"
)
#: held-out files (the shipped model never trained on the standard library)
FILES = ("ast.py", "json/decoder.py", "textwrap.py", "string.py")


@pytest.fixture(scope="module")
def codec() -> TextCodec:
    from transformers import AutoTokenizer

    return TextCodec(AutoTokenizer.from_pretrained(TOKENIZER.parent))


@pytest.fixture(scope="module")
def larger(codec) -> list[str | None]:
    """A vocabulary five times the shipped one: its texts, 32,768 concatenations of two of them
    (long tokens that end and start several symbols: ``"):\\n    "``, ``" = self"``) and 2,048
    with carriage returns between or after them (read as the line breaks they stand for)."""
    pieces = codec.pieces()
    texts = [p for p in pieces if p]
    rng = random.Random(62)
    breaks = ("\r", "\r\n", "\r\r\n", "\n\r")
    return [
        *pieces,
        *(rng.choice(texts) + rng.choice(texts) for _ in range(32768)),
        *(rng.choice(texts) + rng.choice(breaks) + rng.choice(("", *texts)) for _ in range(2048)),
    ]


def _left_to_caller(pieces: list[str | None]) -> int:
    """The tokens a walk leaves undecided whatever the cut: no text, or a byte order mark."""
    return sum(p is None or "\ufeff" in p for p in pieces)


def _bits(data: bytes, n: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")[:n].astype(bool)


def _check(
    checker, pieces: list[str | None], module, only: np.ndarray | None = None, by_id: bool = False
) -> tuple[int, int]:
    """The walk against feeding every token (of ``only``, a bool vector, when given: asked as a
    bitset, or ``by_id`` as token ids), and the C walk against the Python twin; (tokens
    decided, tokens undecided)."""
    walk = vw.vocab_walk(checker.layer, pieces)
    asked: dict = {}
    if only is not None and by_id:
        asked["asked"] = np.flatnonzero(only).astype(np.int32)
    elif only is not None:
        asked["only"] = np.packbits(only, bitorder="little").tobytes()
    while True:  # (a walk that meets lexer states the table lacks grows it for the next)
        known = len(walk.sids)
        answer = walk.walk(checker, module or TwinModule, **asked)
        _verify(checker, pieces, *answer, only)
        if len(walk.sids) == known:
            break
    if module is not None:
        assert answer == walk.walk(checker, TwinModule, **asked)
    return _verify(checker, pieces, *answer, only)


def _verify(
    checker, pieces: list[str | None], passing: bytes, undecided: bytes, only: np.ndarray | None = None
) -> tuple[int, int]:
    """A walk's answer against feeding every token it decides (of ``only``); (decided, undecided)."""
    passes, open_ = _bits(passing, len(pieces)), _bits(undecided, len(pieces))
    assert not (passes & open_).any()
    if only is not None:  # the others that a walk read are told, the others are left
        open_ = open_ | (~only[: len(pieces)] & ~passes)
    decided = np.flatnonzero(~open_)
    fed = np.array([checker.feed(pieces[t]) is not None for t in decided.tolist()], dtype=bool)
    wrong = decided[fed != passes[decided]]
    assert not len(wrong), [(pieces[t], bool(passes[t])) for t in wrong[:10]]
    return len(decided), int(open_.sum())


@needs_native
@pytest.mark.parametrize("version", ["3.8", "3.12", "3.14"])
def test_the_walk_is_the_checker_at_held_out_cuts(codec, version):
    pieces = codec.pieces()
    for prefix, suffix in stdlib_cursors(FILES, 3, seed=int(version[2:])):
        checker = fimconstrain.fim_checker(prefix, suffix, python_version=version)
        decided, undecided = _check(checker, pieces, NATIVE)
        # undecided: only the tokens without a text of their own (or with a byte order mark),
        # so that no fallback hides a wrong answer
        assert undecided <= _left_to_caller(pieces) + 2 and decided > 0.95 * len(pieces)
        # asked about some tokens only (the store's admitted ones): the rest of the trie is left out
        only = np.random.default_rng(len(prefix)).random(len(pieces)) < 0.1
        _check(checker, pieces, NATIVE, only)
        # ... or a top-k row's few, by id
        few = np.zeros(len(pieces), dtype=bool)
        few[np.random.default_rng(len(suffix)).choice(len(pieces), 64, replace=False)] = True
        _check(checker, pieces, NATIVE, few, by_id=True)


@needs_native
def test_the_walk_is_the_checker_over_a_larger_vocabulary(larger):
    for prefix, suffix in stdlib_cursors(FILES, 2, seed=5):
        checker = fimconstrain.fim_checker(prefix, suffix)
        decided, undecided = _check(checker, larger, NATIVE)
        assert decided > 0.95 * len(larger) and undecided <= _left_to_caller(larger) + 2


@needs_native
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.integers(0, 10**6),
    text=st.text(alphabet=st.sampled_from(list("ab_1 .,:()[]{}'\"\\#=+-*\nfr\t\u00e9")), max_size=12),
)
def test_the_walk_is_the_checker_after_random_text(codec, cut, text):
    """After random text at a random point of a held-out file (in strings, comments, f-strings,
    half-written numbers and names), over the shipped vocabulary's texts of up to 3 characters
    and a sample of the rest (a small trie: many examples)."""
    source = (STDLIB / "textwrap.py").read_text()
    checker = fimconstrain.fim_checker(source[: cut % 5000], "").feed(text)
    assume(checker is not None and not checker.pending_cr)
    pieces = codec.pieces()
    sample = [p if p and (len(p) <= 3 or t % 7 == 0) else None for t, p in enumerate(pieces)]
    _check(checker, _SAMPLES.setdefault(len(pieces), sample), NATIVE)


#: the sampled vocabulary of the random-text test, one list (one walk built) for all examples
_SAMPLES: dict[int, list[str | None]] = {}


@needs_native
def test_states_the_table_lacks_leave_their_tokens_undecided_then_grow_it(codec):
    """A walk built from no lexer state but those of the checker's branches meets new symbols'
    start states it has no dense id for: the tokens below them are undecided (and the others
    still right), and the next walk has those states."""
    prefix, suffix = stdlib_cursors(FILES, 1, seed=11)[0]
    checker = fimconstrain.fim_checker(prefix, suffix)
    pieces = codec.pieces()
    walk, twin = (vw.VocabWalk(checker.layer, pieces, states=[]) for _ in range(2))
    untexted = int(_bits(walk.undecided, len(pieces)).sum())
    before = len(walk.sids)
    answer = walk.walk(checker, NATIVE)
    assert answer == twin.walk(checker, TwinModule)
    _, first = _verify(checker, pieces, *answer)
    assert len(walk.sids) > before and first > untexted
    answer = walk.walk(checker, NATIVE)
    assert answer == twin.walk(checker, TwinModule)
    _, second = _verify(checker, pieces, *answer)
    assert second < first


@needs_native
def test_an_error_where_a_symbol_ends_comes_out_of_the_walk(codec, monkeypatch):
    """An exception in Python where a lexeme ends (a time limit, a bug) leaves the C walk as it
    is, not swallowed; the next walk is whole again."""
    checker = fimconstrain.fim_checker("x = foo(1, ", ")\n")
    walk = vw.vocab_walk(checker.layer, codec.pieces())
    layer = checker.layer

    class Stop(Exception):
        pass

    def failing(*args):
        raise Stop

    monkeypatch.setattr(layer, "end_and_next", failing, raising=False)
    with pytest.raises(Stop):
        walk.walk(checker, NATIVE)
    monkeypatch.undo()
    _check(checker, codec.pieces(), NATIVE)


@pytest.mark.parametrize("version", ["3.8", "3.12", "3.14"])
def test_an_end_said_not_to_read_its_text_answers_alike_for_every_ascii_text(codec, version):
    """The layer's ``end_reads_text`` on every symbol end of whole walks at held-out cuts: where
    it says an end reads nothing of its text, every ASCII text ending there gets the same answer
    (the walk asks once for them all); where it says the end reads only the escapes (a string),
    every ASCII text without a backslash does; and the walk that asks for each text gives the
    same answers as the one that asks once."""
    seen: dict[tuple[int, int, int], object] = {}
    shared = {READS_NOTHING: 0, READS_ESCAPES: 0}

    class AskingEach:
        """The twin, asking Python at every text."""

        prepare = staticmethod(prepare_py)

        @staticmethod
        def walk(tables, roots, lexemes, allowed, on_end, passing, undecided, only=None, asked=None):
            def each(ctx: int, q: int, text: str):
                answer, reads = on_end(ctx, q, text)
                if reads in shared and text.isascii() and (reads == READS_NOTHING or "\\" not in text):
                    shared[reads] += 1
                    assert seen.setdefault((ctx, q, reads), answer) == answer, text
                return answer, READS_TEXT

            seen.clear()
            return walk_py(tables, roots, lexemes, allowed, each, passing, undecided, only, asked)

    _walk_held_out_cuts(codec, version, 1, AskingEach)
    assert shared[READS_NOTHING] > 0
    # (where the AST checks read every symbol, 3.8's soft keywords, a string's end reads it all)
    layer = fimconstrain.fim_checker("", python_version=version).layer
    assert shared[READS_ESCAPES] > 0 or layer.track_keywords


@pytest.mark.parametrize("version", ["3.8", "3.12", "3.14"])
def test_every_end_answers_as_the_layer_s_end_and_next(codec, version):
    """``WalkEnds.on_end`` answers a plain end (the layer's ``plain_ends``) and an ignored one
    without ``end_and_next``: on every symbol end of whole walks at held-out cuts, its answer is
    that of ``end_and_next`` (rejected alike; else a context whose parser has the same key,
    the same layout, start state and allowed terminals), and every kind of end is met."""
    kinds = {"plain": 0, "ignored": 0, "rejected": 0}

    class Comparing:
        """The twin, every answer compared with the layer's own."""

        prepare = staticmethod(prepare_py)

        @staticmethod
        def walk(tables, roots, lexemes, allowed, on_end, passing, undecided, only=None, asked=None):
            ends = on_end.__self__
            layer = ends.layer

            def compared(ctx: int, q: int, text: str):
                reply = on_end(ctx, q, text)
                parser, layout = ends.contexts[ctx]
                state = ends.sids[q]
                expected = layer.end_and_next(parser, layout, state, text)
                terminals = layer.token_mask(state) & layer.allowed(parser, layout)
                if reply[0] is None:
                    kinds["rejected"] += 1
                    assert expected is None, text
                elif isinstance(reply[0], tuple):
                    kinds["ignored" if terminals & layer.ignore_mask else "plain"] += 1
                    c, start, allowed_bytes = reply[0]
                    after, layout_after = ends.contexts[c]
                    assert expected is not None, text
                    assert reduction_key(layer.grammar, after) == reduction_key(layer.grammar, expected[0])
                    assert (layout_after, ends.sids[start]) == (expected[1], expected[2])
                    assert allowed_bytes == expected[3].to_bytes(len(allowed_bytes), "little")
                return reply

            return walk_py(tables, roots, lexemes, allowed, compared, passing, undecided, only, asked)

    _walk_held_out_cuts(codec, version, 2, Comparing)
    assert all(kinds.values()), kinds


def _walk_held_out_cuts(codec, version: str, seed: int, module) -> None:
    """Whole walks by ``module`` (the twin with its ``on_end`` watched) at held-out cuts, each
    the same as the twin's own."""
    pieces = codec.pieces()
    for prefix, suffix in stdlib_cursors(FILES, 3, seed=int(version[2:]) + seed):
        checker = fimconstrain.fim_checker(prefix, suffix, python_version=version)
        walk = vw.vocab_walk(checker.layer, pieces)
        _check(checker, pieces, None)  # (the dense table grown to every state the cut meets)
        assert walk.walk(checker, module) == walk.walk(checker, TwinModule)


def test_the_python_twin_is_the_checker(codec):
    """The walk in Python (what the C is compared with) against feeding every token."""
    prefix, suffix = stdlib_cursors(FILES, 1, seed=9)[0]
    _check(fimconstrain.fim_checker(prefix, suffix), codec.pieces(), None)


def test_whole_masks_are_the_same_with_the_walk_and_without(codec, tmp_path, monkeypatch):
    """ConstraintState.passing(whole=True) through the walk and through the Python path: the
    same tokens, and the walk decided most of them."""
    from fimconstrain.decoding.loop.constraint import ConstraintState, passing_tokens
    from fimconstrain.decoding.masks.store import MaskStore

    store = MaskStore.load_or_build(codec.tokenizer, cache_dir=tmp_path, progress=False)
    size = len(codec.tokenizer)
    stops = {codec.tokenizer.eos_token_id}
    banned = {*codec.tokenizer.all_special_ids, *codec.tokenizer.added_tokens_decoder} - stops
    for prefix, suffix in stdlib_cursors(FILES, 2, seed=3):
        checker = fimconstrain.fim_checker(prefix, suffix)

        def mask(module, checker=checker) -> tuple[list[int], int]:
            monkeypatch.setattr(vw, "native_walk", lambda: module)
            state = ConstraintState(checker, codec, store=store)
            return list(passing_tokens(state, range(size), stops, banned, whole=True)), state.walked

        def whole(module, checker=checker) -> list[int]:
            monkeypatch.setattr(vw, "native_walk", lambda: module)
            bits = ConstraintState(checker, codec, store=store).whole_mask(size, stops, banned)
            assert bits is not None and bits.shape == (size,)
            return np.flatnonzero(bits).tolist()

        plain, none_walked = mask(None)
        walked, decided = mask(NATIVE if NATIVE is not None else TwinModule)
        assert walked == plain and none_walked == 0 and decided > 0
        # the same as a bool vector over every id, with the walk and without
        assert whole(None) == plain == whole(NATIVE if NATIVE is not None else TwinModule)


@pytest.mark.parametrize(
    ("prefix", "suffix"),
    [("x = 1  # a note on ", "\ny = 2\n"), ("s = 'caf", "'\n"), ("def f(na", "):\n    pass\n")],
    ids=["comment", "string", "name"],
)
def test_tokens_that_end_inside_a_character_are_walked_as_their_completions(codec, tmp_path, prefix, suffix):
    """A token whose bytes end inside a UTF-8 character passes when one character it may become
    does (walk_texts): the walk decides it, with the same verdict as feeding it."""
    from fimconstrain.decoding.loop.constraint import ConstraintState, passing_tokens, walk_texts
    from fimconstrain.decoding.masks.store import MaskStore

    store = MaskStore.load_or_build(codec.tokenizer, cache_dir=tmp_path, progress=False)
    partial = [t for t, texts in enumerate(walk_texts(codec)) if isinstance(texts, tuple)]
    assert partial
    checker = fimconstrain.fim_checker(prefix, suffix)
    texts = walk_texts(codec)
    answer = vw.vocab_walk(checker.layer, texts).walk(checker, NATIVE if NATIVE is not None else TwinModule)
    passes, open_ = _bits(answer[0], len(texts)), _bits(answer[1], len(texts))
    assert not open_[partial].any()
    fed = [ConstraintState(checker, codec).child(t) is not None for t in partial]
    assert passes[partial].tolist() == fed and any(fed)
    whole = ConstraintState(checker, codec, store=store)
    assert set(passing_tokens(whole, range(len(texts)), set(), set(), whole=True)) >= {
        t for t, ok in zip(partial, fed, strict=True) if ok
    }


def test_a_pending_carriage_return_is_not_walked(codec):
    checker = fimconstrain.fim_checker("x = 1\r", "")
    assert checker.pending_cr
    with pytest.raises(ValueError):
        vw.vocab_walk(checker.layer, codec.pieces()).walk(checker, NATIVE)


def test_a_missing_stale_or_refused_walk_falls_back_with_one_line(monkeypatch, caplog):
    """No build, a build of an older ``_walk.c``, or ``FIMCONSTRAIN_ENGINE=python``: no module,
    and (but where asked for) one log line, once per process, that says why."""
    monkeypatch.setattr(native, "_LOADED", {})
    monkeypatch.setattr(native, "extension_digest", lambda extension, engine_dir=native.ENGINE_DIR: "0" * 64)
    monkeypatch.setattr(
        native, "_read_stamp", lambda: {"walk": "1" * 64, "cache_tag": sys.implementation.cache_tag}
    )
    with caplog.at_level(logging.WARNING, logger="fimconstrain"):
        assert native.walk_extension() is None
        assert native.walk_extension() is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "is older than _walk.c" in lines[0] and "computed in Python" in lines[0]
    monkeypatch.setattr(native, "_read_stamp", lambda: {"cache_tag": sys.implementation.cache_tag})
    assert "is not built" in str(native._load_extension(native.WALK))
    monkeypatch.setattr(
        native, "_read_stamp", lambda: {"walk": "0" * 64, "cache_tag": sys.implementation.cache_tag}
    )
    missing = dataclasses.replace(native.WALK, module="fimconstrain.engine._no_such_walk")
    assert "cannot be loaded" in str(native._load_extension(missing))
    monkeypatch.setenv(native.ENV_VAR, "python")
    assert "FIMCONSTRAIN_ENGINE=python" in str(native._load_extension(native.WALK))
    monkeypatch.setattr(native, "_LOADED", {})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fimconstrain"):
        assert native.walk_extension() is None
    assert not caplog.records  # asked for: nothing to say


@needs_native
def test_the_walk_is_built_from_this_source():
    """Where it is built (CI builds it), it is current and serves."""
    assert NATIVE is not None and native.WALK.abi == NATIVE.ABI
