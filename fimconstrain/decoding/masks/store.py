"""Token-mask store (paper 000, SynCode's DFA mask store) for whole-vocabulary masks.

For a (grammar, vocabulary) pair it precomputes, for every lexer-automaton state ``q`` a lexeme in
progress can be in, which tokens can be read from ``q``: as bitsets (``uint64`` words, token ``t``
is bit ``t % 64`` of word ``t // 64``). At decoding time the checker's branches give the state,
the terminals the parser allows now (accept sequences of length 1) and, per terminal that may end
the lexeme, the terminals the parser allows after it (length 2); the mask is an OR of a few stored
bitsets. The mask is sound: a superset of the tokens ``checker.feed`` accepts (see
``docs/mask-store.md``); use it for prefix-only decoding, or as a pre-filter before the exact check.
This module is the store at run time; it is built in :mod:`.builder` and kept on disk by :mod:`.cache`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ...cache_folder import cache_root
from ...engine.automata.earley import EarleySet
from ...engine.layers.layer_protocol import Layer
from ...engine.layers.python_layer import line_indentation
from ...engine.prefix_cache import LRU
from ...engine.versions import VersionLike
from ..tokens.token_bytes import TokenBytes, vocabulary
from .builder import StoreBuilder
from .cache import (
    FILE_KEYS,
    STORE_VERSION,
    SavedStore,
    grammar_key,
    read_store,
    store_file,
    store_layer,
    store_version_tag,
)

log = logging.getLogger(__name__)

#: composed masks kept for reuse (each is vocabulary/8 bytes), and as many unions of ``fresh``
#: rows; past it a memo is cleared (a long-running server meets ever new parser answers)
MEMO_SIZE = 2048
#: parser states whose end-of-lexeme answers are kept (a decode visits a few per step)
NEXT_MEMO_STATES = 256


# ---------------------------------------------------------------- the store at run time


class _Entry:
    """What the store holds for one lexer state, as the hot path reads it."""

    __slots__ = ("cont", "cont_terminals", "ext", "newline_ext", "newline_groups", "token_mask", "zero")

    def __init__(self, zero: int):
        self.cont: list[tuple[int, int]] = []  # (terminal bit, row)
        self.cont_terminals = 0  # the terminals of ``cont``'s rows, as one bitmask
        self.token_mask = 0  # terminals the lexeme is if it ends here
        self.zero = zero  # row of tokens that start a new lexeme (-1: none)
        self.ext: dict[int, list[tuple[int, int]]] = {}  # terminal -> [(next terminal bit, row)]
        self.newline_groups: list[tuple[str | None, int]] = []  # (text added to the newline, row)
        self.newline_ext: list[tuple[int, int]] = []  # ext rows of the newline terminal


class MaskStore:
    """Whole-vocabulary token masks for a checker's state.

    Families of stored bitsets, per lexer state ``q`` (the lexeme in progress):

    * ``cont[q, a]``: tokens read entirely inside the lexeme, which can still become terminal ``a``;
    * ``zero[q]``: tokens that cannot extend the lexeme at all (it ends before the token) and lex;
      what they start with is ``fresh[b]``: tokens whose first non-ignored lexeme can be ``b``
      (so the length-2 sequence ``(a, b)`` reads ``zero[q] & fresh[b]``);
    * ``ext[q, a, b]``: tokens that extend the lexeme, end it as ``a`` inside the token (at the
      last point maximal munch allows), and go on with a lexeme that can be ``b``.
    """

    def __init__(self, layer: Layer[Any], vocab_size: int, data: dict, meta: dict):
        self.layer = layer
        self.vocab_size = vocab_size
        self.meta = meta
        #: the target Python version (``"3.12"``) the store was built for; None for JSON
        self.python_version: str | None = meta.get("python_version")
        self._data = data
        self.rows = data["rows"]
        self.words = self.rows.shape[1]
        self.all_text = self.rows[meta["text_tokens"]]
        self.newline_first = self.rows[meta["newline_first"]]
        self.always = self.rows[meta["always"]] if meta["always"] else None
        self.plain = self.rows[meta["plain"]]
        self._fresh_rows = data["fresh"]
        self._entries = self._index(data, meta.get("nl_keys", []))
        self._local = self._locate(meta["paths"])
        self._fresh_memo: dict[int, np.ndarray] = {}
        self._mask_memo: dict[tuple, np.ndarray] = {}
        self._dead = data["dead"].tolist()
        self._sure_memo: dict[tuple[int, ...], np.ndarray] = {}
        # per parser state, by identity: the state is held with its memo (a compiled engine's
        # states take no weak references), the least recently used dropped past NEXT_MEMO_STATES
        self._next_memo: LRU[int, tuple[object, dict]] = LRU(NEXT_MEMO_STATES)
        self.fallbacks = 0  # masks answered with every text token (a state the store lacks)

    # -- construction

    @classmethod
    def build(
        cls,
        tokenizer,
        language: str = "python",
        progress: bool = True,
        vocab_size: int | None = None,
        python_version: VersionLike | None = None,
    ) -> MaskStore:
        """Build the store for ``tokenizer`` (a tokenizers/transformers tokenizer or a
        :class:`~fimconstrain.decoding.tokens.token_bytes.TokenBytes`) and a language's grammar
        at a target Python version (``"3.12"`` or ``(3, 12)``; default: the newest). Its masks
        are for checkers of that version only."""
        started = time.perf_counter()
        tag = store_version_tag(language, python_version)
        layer = store_layer(language, tag)
        vocab = tokenizer if isinstance(tokenizer, TokenBytes) else vocabulary(tokenizer, vocab_size)
        built = StoreBuilder(layer, vocab, progress).build()
        meta = {
            "version": STORE_VERSION,
            "language": language,
            "python_version": tag,
            "grammar": grammar_key(layer),
            "vocab": vocab.fingerprint(),
            "vocab_size": vocab.size,
            "terminals": [t.name for t in layer.grammar.terminals],
            "build_seconds": time.perf_counter() - started,
            **{k: built[k] for k in ("paths", "nl_keys", "newline_first", "text_tokens", "always", "plain")},
        }
        data = {k: built[k] for k in FILE_KEYS}
        return cls(layer, vocab.size, data, meta)

    @classmethod
    def attach(cls, saved: SavedStore) -> MaskStore:
        """The store of ``saved``, bound to the shared layer of its language and version (the
        one checkers use); ValueError if that layer's grammar is not the one it was built for."""
        meta = saved.meta
        layer = store_layer(meta["language"], meta.get("python_version"))
        if meta.get("grammar") != grammar_key(layer):
            raise ValueError(f"{saved.path}: mask store for another grammar or store version")
        return cls(layer, meta["vocab_size"], saved.data, meta)

    @staticmethod
    def last_used(
        vocab: TokenBytes, language: str = "python", cache_dir: Path | str | None = None
    ) -> SavedStore | None:
        """The arrays of the store of ``vocab`` read or written last in the cache (its Python
        version is the one a project completes as: each read touches the file), checked as
        :meth:`load` checks them but for the grammar, which :meth:`attach` checks; None when
        there is none or it is not usable. Reads no layer, so a thread beside the checkers may
        call it (a layer's lexer automaton grows as checkers lex: no other thread may step it)."""
        folder = Path(cache_dir) if cache_dir is not None else cache_root() / "masks"
        found: list[tuple[float, Path]] = []
        for path in folder.glob(f"{language}-*-{vocab.fingerprint()}.npz"):
            try:
                found.append((path.stat().st_mtime, path))
            except OSError:
                continue
        if not found:
            return None
        path = max(found)[1]
        try:
            with np.load(path, allow_pickle=False) as f:
                tag = json.loads(str(f["meta"])).get("python_version")
            return read_store(path, language, store_version_tag(language, tag), None, vocab)
        except Exception as error:  # (a damaged zip, a missing array, another store...)
            log.info("mask store %s not used (%s)", path, error)
            return None

    @classmethod
    def load_or_build(
        cls,
        tokenizer,
        language: str = "python",
        cache_dir: Path | str | None = None,
        progress: bool = True,
        vocab_size: int | None = None,
        python_version: VersionLike | None = None,
    ) -> MaskStore:
        """The cached store for (grammar, Python version, tokenizer), built and saved on a miss."""
        vocab = tokenizer if isinstance(tokenizer, TokenBytes) else vocabulary(tokenizer, vocab_size)
        tag = store_version_tag(language, python_version)
        path = cls.cache_path(vocab, language, cache_dir, tag)
        if path.exists():
            try:
                return cls.load(path, language, vocab, tag)
            except Exception as error:  # a stale or damaged file (a cut zip, another store...)
                log.info("mask store %s not used (%s): building it again", path, error)
        store = cls.build(vocab, language, progress, python_version=tag)
        store.save(path)
        return store

    @staticmethod
    def cache_path(
        vocab: TokenBytes,
        language: str = "python",
        cache_dir: Path | str | None = None,
        python_version: VersionLike | None = None,
    ) -> Path:
        """``<cache>/<language>-<version>-<grammar hash>-<vocabulary fingerprint>.npz`` (no
        version part for a language without versions)."""
        tag = store_version_tag(language, python_version)
        return store_file(cache_dir, language, tag, grammar_key(store_layer(language, tag)), vocab)

    def save(self, path: Path | str) -> Path:
        """Write the store as one uncompressed ``.npz`` (atomically)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp.npz")
        np.savez(tmp, meta=np.array(json.dumps(self.meta)), **self._data)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(
        cls,
        path: Path | str,
        language: str | None = None,
        vocab: TokenBytes | None = None,
        python_version: VersionLike | None = None,
    ) -> MaskStore:
        """Read a saved store; ValueError if it was built for another grammar, store format,
        Python version (when ``python_version`` is given; else the one it was built for is
        used) or (when ``vocab`` is given) vocabulary."""
        if language is None or (python_version is None and store_version_tag(language) is not None):
            with np.load(path, allow_pickle=False) as f:  # (what the file says it is for)
                meta = json.loads(str(f["meta"]))
            language = language or meta["language"]
            python_version = meta.get("python_version") if python_version is None else python_version
        tag = store_version_tag(language, python_version)
        key = grammar_key(store_layer(language, tag))
        return cls.attach(read_store(Path(path), language, tag, key, vocab))

    def _index(self, data: dict, nl_keys: list[str]) -> list[_Entry]:
        """Per local state, its stored rows as Python lists (what the hot path reads)."""
        entries = [_Entry(int(z)) for z in data["zero"].tolist()]
        for q, t1, row in data["cont"].tolist():
            entries[q].cont.append((1 << t1, row))
            entries[q].cont_terminals |= 1 << t1
        newline = self.layer.newline
        for q, g, row in data["nl_groups"].tolist():
            entries[q].newline_groups.append((None if g < 0 else nl_keys[g], row))
        for q, t1, t2, row in data["ext"].tolist():
            e = entries[q]
            if t1 == newline and e.newline_groups:
                e.newline_ext.append((1 << t2, row))
            else:
                e.ext.setdefault(t1, []).append((1 << t2, row))
        return entries

    def _locate(self, paths: list) -> dict[int, int]:
        """Runtime DFA state id -> local state, by running each state's access string."""
        dfa = self.layer.dfa
        roots = [dfa.start, self.layer.initial_lexeme]
        local = {}
        for q, (root, text) in enumerate(paths):
            if root >= 0:
                sid = dfa.run(text, roots[root])
                local[sid] = q
                self._entries[q].token_mask = self.layer.token_mask(sid)
        return local

    # -- masks

    def mask(self, checker, held: int = 0) -> np.ndarray:
        """Bitset (``uint64`` words, read-only) of the tokens that may come next: a superset of
        those ``checker.feed`` accepts. ``held``: the decoder holds back part of a character
        (every text token is allowed then). Stop tokens are never in it (ask ``is_complete``)."""
        self._check_layer(checker)
        if held:
            return self.all_text
        out = None
        for branch in checker.branches:
            m = self._branch_mask(branch)
            out = m if out is None else out | m
        if out is None:
            return self.rows[0]
        if checker.pending_cr:
            out = out | self.newline_first
        if self.always is not None:
            out = out | self.always
        return out

    def sure(self, checker) -> np.ndarray:
        """Bitset of tokens ``checker.feed`` certainly accepts (a subset of them): plain tokens
        (``builder._plain_tokens``) that a branch without guards reads through, either

        * entirely inside its lexeme in progress, ending where a terminal the parser allows is
          still ahead (each state on the way can reach it too), or
        * ending that lexeme before their first character (which the lexeme cannot take, so
          no guard is set) and then entirely inside the next lexeme, likewise.

        That one branch survives whatever the others do; a mask walk takes these tokens
        without feeding them (``docs/optimizations.md``)."""
        self._check_layer(checker)
        out = self.rows[0]
        if checker.pending_cr:  # the checker drops a token's leading \n: not read as it is
            return out
        layer = self.layer
        accept = layer.dfa.accept
        for parser, layout, sid, text, guards in checker.branches:
            q = self._local.get(sid)
            if guards or q is None or layer.open_quotes(layout):
                continue
            e = self._entries[q]
            allowed = layer.allowed(parser, layout) & e.cont_terminals
            if allowed:
                out = out | self._sure_rows(q, allowed)
            if accept[sid] and self._dead[q]:
                then, start = self._ending(parser, layout, sid, text)
                allowed = then & self._entries[start].cont_terminals if start > 0 else 0
                if allowed:
                    out = out | self._sure_rows(start, allowed, self._dead[q])
        return out

    def _sure_rows(self, q: int, allowed: int, first: int = 0) -> np.ndarray:
        """The plain tokens of ``cont[q, a]`` for the terminals ``a`` in ``allowed``, and of row
        ``first`` if given (memoised)."""
        key = (q, allowed, first)
        hit = self._sure_memo.get(key)
        if hit is None:
            picked = [row for bit, row in self._entries[q].cont if bit & allowed]
            hit = np.bitwise_or.reduce(self.rows[picked], axis=0) & self.plain
            if first:
                hit &= self.rows[first]
            hit.setflags(write=False)
            if len(self._sure_memo) >= MEMO_SIZE:
                self._sure_memo.clear()
            self._sure_memo[key] = hit
        return hit

    def _check_layer(self, checker) -> None:
        """ValueError unless ``checker`` reads the grammar and version this store was built for."""
        if checker.layer is not self.layer:
            raise ValueError(
                f"mask store for {self._describe(self.layer)}, checker for {self._describe(checker.layer)}"
            )

    @staticmethod
    def _describe(layer: Layer[Any]) -> str:
        return layer.describe()

    def allowed(self, checker, held: int = 0) -> np.ndarray:
        """The mask as a bool vector over token ids (length ``vocab_size``)."""
        return unpack(self.mask(checker, held), self.vocab_size)

    def prefilter(self, checker, candidate_ids: Iterable[int], held: int = 0) -> list[int]:
        """The candidates that may pass the exact check, in their order (cheap superset filter);
        ids outside the vocabulary's text tokens (stop tokens, padding) are dropped."""
        ids = np.asarray(
            candidate_ids if isinstance(candidate_ids, np.ndarray) else list(candidate_ids), dtype=np.int64
        ).reshape(-1)
        ids = ids[(ids >= 0) & (ids < self.vocab_size)]
        words = self.mask(checker, held)
        keep = (words[ids >> 6] >> (ids & 63).astype(np.uint64)) & np.uint64(1)
        return ids[keep.astype(bool)].tolist()

    def _branch_mask(self, branch: tuple) -> np.ndarray:
        """The mask of one lexer branch: the parser's answers are gathered first (memoised per
        parser state), then the rows they select are ORed (memoised per answer)."""
        parser, layout, sid, text, _ = branch
        q = self._local.get(sid)
        if q is None or self.layer.open_quotes(layout):  # inside an f-string: other lexing modes
            self.fallbacks += 1
            return self.all_text
        e = self._entries[q]
        allowed = self.layer.allowed(parser, layout)
        after = self._ending(parser, layout, sid, text)[0] if e.zero > 0 and e.token_mask & allowed else 0
        ext_next = tuple(self._next(parser, layout, t1) if allowed >> t1 & 1 else 0 for t1 in e.ext)
        nl_next: tuple[int, ...] = ()
        if e.newline_groups and allowed & self.layer.newline_mask:
            nl_next = tuple(
                self._after_newline(parser, layout, text + key)
                if key is not None
                else self._next(parser, layout, self.layer.newline)
                for key, _ in e.newline_groups
            )
        key = (q, allowed, after, ext_next, nl_next)
        hit = self._mask_memo.get(key)
        if hit is None:
            hit = self._compose(e, allowed, after, ext_next, nl_next)
            if len(self._mask_memo) >= MEMO_SIZE:
                self._mask_memo.clear()
            self._mask_memo[key] = hit
        return hit

    def _compose(self, e: _Entry, allowed: int, after: int, ext_next: tuple, nl_next: tuple) -> np.ndarray:
        """OR of the stored bitsets for one state and the accept sequences the parser allows."""
        rows = self.rows
        picked = [row for bit, row in e.cont if bit & allowed]
        for pairs, nxt in zip(e.ext.values(), ext_next):
            if nxt:
                picked.extend(row for bit, row in pairs if bit & nxt)
        out = np.bitwise_or.reduce(rows[picked], axis=0) if picked else rows[0].copy()
        if after:
            out |= rows[e.zero] & self._fresh(after)
        by_next: dict[int, list[int]] = {}
        for (_, row), nxt in zip(e.newline_groups, nl_next):
            if nxt:
                by_next.setdefault(nxt, []).append(row)
        for nxt, group_rows in by_next.items():
            then = [row for bit, row in e.newline_ext if bit & nxt]
            if then:
                out |= np.bitwise_or.reduce(rows[group_rows], axis=0) & np.bitwise_or.reduce(
                    rows[then], axis=0
                )
        out.setflags(write=False)
        return out

    def _fresh(self, terminals: int) -> np.ndarray:
        """OR of ``fresh[b]`` over the terminals ``b`` in a bitmask (memoised)."""
        hit = self._fresh_memo.get(terminals)
        if hit is None:
            picked = [r for t, r in enumerate(self._fresh_rows.tolist()) if r > 0 and terminals >> t & 1]
            hit = np.bitwise_or.reduce(self.rows[picked], axis=0) if picked else self.rows[0]
            if len(self._fresh_memo) >= MEMO_SIZE:
                self._fresh_memo.clear()
            self._fresh_memo[terminals] = hit
        return hit

    def _memo_for(self, parser) -> dict:
        held = self._next_memo.get(id(parser))
        if held is None:
            held = (parser, {})
            self._next_memo.put(id(parser), held)
        return held[1]

    def _ending(self, parser, layout, sid: int, text: str) -> tuple[int, int]:
        """The terminals allowed after the lexeme in progress ends right here, exactly as the
        layer ends it (indentation, brackets, keywords, string checks), and the local state the
        next lexeme starts from (-1: one the store lacks); memoised per parser state."""
        memo = self._memo_for(parser)
        key = (layout, sid, text)
        hit = memo.get(key)
        if hit is None:
            ended = self.layer.end_symbol(parser, layout, sid, text)
            if ended is None:
                hit = (0, -1)
            else:
                hit = (self.layer.allowed(*ended), self._local.get(self.layer.lex_start(ended[1]), -1))
            memo[key] = hit
        return hit

    def _after_newline(self, parser, layout, text: str) -> int:
        """Terminals allowed after a newline lexeme ``text`` ends (its last line's indentation
        decides INDENT/DEDENT); memoised per parser state and indentation."""
        memo = self._memo_for(parser)
        key = ("newline", layout, line_indentation(text))
        hit = memo.get(key)
        if hit is None:
            layer = self.layer
            ended = layer.end_symbol(parser, layout, layer.initial_lexeme, text)
            hit = memo[key] = 0 if ended is None else layer.allowed(*ended)
        return hit

    def _next(self, parser, layout, terminal: int) -> int:
        """Terminals that may start the next lexeme if the one in progress ends as ``terminal``
        (memoised per parser state)."""
        memo = self._memo_for(parser)
        key = (terminal, layout)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = next_terminals(self.layer, parser, layout, terminal)
        return hit

    def stats(self) -> dict:
        """Sizes, for reports."""
        d = self._data
        return {
            "states": len(self._entries) - 1,
            "rows": int(self.rows.shape[0]),
            "bytes": int(sum(a.nbytes for a in d.values())),
            "cont": len(d["cont"]),
            "ext": len(d["ext"]),
            "zero": int((d["zero"] > 0).sum()),
            "fresh": int((d["fresh"] > 0).sum()),
            "vocab_size": self.vocab_size,
            "build_seconds": self.meta.get("build_seconds"),
        }


class MaskStores:
    """The stores of one tokenizer, one per target Python version, each loaded (built and cached
    on disk the first time) when first asked for: what a server's requests share. A store that
    cannot be built is logged once and None: the checks then go unscreened, as exact as before."""

    def __init__(self, tokenizer, language: str = "python", vocab_size: int | None = None):
        self.tokenizer, self.language, self.vocab_size = tokenizer, language, vocab_size
        self._vocab: TokenBytes | None = None
        self._stores: dict[str | None, MaskStore | None] = {}

    def get(self, python_version: VersionLike | None = None) -> MaskStore | None:
        """The store for ``python_version`` (default: the newest)."""
        tag = store_version_tag(self.language, python_version)
        if tag not in self._stores:
            try:
                if self._vocab is None:
                    tokenizer = self.tokenizer
                    self._vocab = (
                        tokenizer
                        if isinstance(tokenizer, TokenBytes)
                        else vocabulary(tokenizer, self.vocab_size)
                    )
                store = MaskStore.load_or_build(
                    self._vocab, self.language, progress=False, python_version=tag
                )
            except Exception as error:  # a vocabulary the store cannot read: check without it
                log.warning("no token-mask store for Python %s (%s): checks go unscreened", tag, error)
                store = None
            self._stores[tag] = store
        return self._stores[tag]


def next_terminals(layer: Layer[Any], parser: EarleySet, layout: Any, terminal: int) -> int:
    """Bitmask of terminals that may be lexed after a lexeme ends as ``terminal`` in this
    state (a superset: INDENT and every number of DEDENTs are all tried after a newline)."""
    return layer.next_terminals(parser, layout, terminal)


def unpack(words: np.ndarray, size: int) -> np.ndarray:
    """A bitset of ``uint64`` words as a bool vector of length ``size``."""
    return np.unpackbits(words.view(np.uint8), bitorder="little", count=size).view(bool)


def mask_logits(logits, allowed: np.ndarray, also: Iterable[int] = ()):
    """``logits`` (numpy, last axis = vocabulary) with every token outside ``allowed``
    (a bool vector) and ``also`` (e.g. stop tokens that may end the program now) set to -inf."""
    keep = np.zeros(logits.shape[-1], dtype=bool)
    n = min(len(allowed), len(keep))
    keep[:n] = allowed[:n]
    keep[list(also)] = True
    out = np.array(logits, dtype=float, copy=True)
    out[..., ~keep] = -np.inf
    return out
