"""Token-mask store (paper 000, SynCode's DFA mask store) for whole-vocabulary masks.

For a (grammar, vocabulary) pair it precomputes, for every lexer-automaton state ``q`` a lexeme in
progress can be in, which tokens can be read from ``q``: as bitsets (``uint64`` words, token ``t``
is bit ``t % 64`` of word ``t // 64``). At decoding time the checker's branches give the state,
the terminals the parser allows now (accept sequences of length 1) and, per terminal that may end
the lexeme, the terminals the parser allows after it (length 2); the mask is an OR of a few stored
bitsets. The mask is sound: a superset of the tokens ``checker.feed`` accepts (see
``docs/mask-store.md``); use it for prefix-only decoding, or as a pre-filter before the exact check.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...cache_folder import cache_root
from ...engine.earley import EarleySet
from ...engine.layer_protocol import Layer
from ...engine.prefix_cache import LRU
from ...engine.python_layer import line_indentation
from ...engine.regex_dfa import DEAD, LexerDFA
from ...engine.versions import VersionLike, format_version, parse_python_version
from ..tokens.token_bytes import TokenBytes, split_utf8, vocabulary

log = logging.getLogger(__name__)

STORE_VERSION = 3
#: token text that may open an f-string or t-string (its quote, or the quote and the prefix
#: letters a lexeme in progress lacks): after it the lexer reads in another mode
_STRING_MODE_OPENER = re.compile(r"""^[rRfFtT]{0,2}['"]|[fFtT][rR]?['"]|[rR][fFtT]['"]""")
_FILE_KEYS = ("rows", "cont", "zero", "dead", "fresh", "ext", "nl_groups")
#: per newline state, how many groups of indentation-changing tokens are judged exactly
NEWLINE_GROUPS = 16
#: composed masks kept for reuse (each is vocabulary/8 bytes), and as many unions of ``fresh``
#: rows; past it a memo is cleared (a long-running server meets ever new parser answers)
MEMO_SIZE = 2048
#: parser states whose end-of-lexeme answers are kept (a decode visits a few per step)
NEXT_MEMO_STATES = 256


# ---------------------------------------------------------------- alphabet


class Alphabet:
    """Characters grouped into classes that every lexer-automaton state treats alike.

    Two characters are alike when they are the same literal (or neither is one) and every
    character-class test of the lexer's regexes gives them the same answer.
    """

    def __init__(self, dfa: LexerDFA):
        self._literals, self._tests = dfa.char_labels()
        self._ids: dict[tuple, int] = {}
        self._of: dict[str, int] = {}
        self.reps: list[str] = []  # a member of each class (the first one seen)
        self.non_ascii: dict[int, str] = {}  # class -> a non-ASCII member, for classes that have one
        for ch in _probe_chars():
            self.of(ch)

    def of(self, ch: str) -> int:
        """The class of ``ch`` (a new class if no character seen so far is alike)."""
        cid = self._of.get(ch)
        if cid is None:
            sig = (ch if ch in self._literals else None, tuple(test(ch) for test in self._tests))
            cid = self._ids.get(sig)
            if cid is None:
                cid = self._ids[sig] = len(self.reps)
                self.reps.append(ch)
            if ch >= "\x80":
                self.non_ascii.setdefault(cid, ch)
            self._of[ch] = cid
        return cid

    def encode(self, text: str) -> list[int]:
        return [self.of(ch) for ch in text]


def _probe_chars() -> Iterator[str]:
    """Printable ASCII first (nice representatives), the rest of ASCII, then a sweep of
    non-ASCII code points dense where scripts are, sparse beyond (classes only, not states)."""
    yield from map(chr, range(32, 127))
    yield from map(chr, [*range(1, 32), 127])
    yield from map(chr, range(0x80, 0x3000))
    for cp in range(0x3000, 0x110000, 97):
        if not 0xD800 <= cp < 0xE000:
            yield chr(cp)


# ---------------------------------------------------------------- automaton tables


class _TokenAutomaton:
    """The lexer DFA's states reachable inside a lexeme, enumerated over the alphabet's classes.

    Local state 0 is DEAD. Each state is named by its root (0: the empty lexeme, 1: the layer's
    initial lexeme) and a string of class representatives that reaches it, so a store built in
    one process can find the same states in another process's lazily numbered DFA.
    """

    def __init__(self, layer: Layer[Any], alphabet: Alphabet):
        dfa = layer.dfa
        roots = [dfa.start, layer.initial_lexeme]
        reps = alphabet.reps
        local = {DEAD: 0}
        self.paths: list[tuple[int, str]] = [(-1, "")]
        sids = [DEAD]
        queue: deque[int] = deque()
        for r, sid in enumerate(roots):
            if sid not in local:
                local[sid] = len(sids)
                sids.append(sid)
                self.paths.append((r, ""))
                queue.append(sid)
        table: dict[int, list[int]] = {}
        while queue:
            sid = queue.popleft()
            row = []
            root, path = self.paths[local[sid]]
            for _cid, ch in enumerate(reps):
                nxt = dfa.trans[sid].get(ch)
                if nxt is None:
                    nxt = dfa.step(sid, ch)
                if nxt not in local:
                    local[nxt] = len(sids)
                    sids.append(nxt)
                    self.paths.append((root, path + ch))
                    queue.append(nxt)
                row.append(local[nxt])
            table[local[sid]] = row
        n = len(sids)
        self.trans = np.zeros((n, len(reps)), dtype=np.int32)
        for q, row in table.items():
            self.trans[q] = row
        self.sids = sids
        self.live = [dfa.live[s] for s in sids]
        self.accept = [dfa.accept[s] for s in sids]
        self.tmask = [layer.token_mask(s) if s != DEAD else 0 for s in sids]
        self.tmask[0] = self.live[0] = self.accept[0] = 0

    @property
    def size(self) -> int:
        return len(self.sids)


def _bits(mask: int, width: int) -> np.ndarray:
    """A terminal bitmask as a bool vector."""
    return np.array([(mask >> i) & 1 for i in range(width)], dtype=bool)


# ---------------------------------------------------------------- the vocabulary as class strings


class _Variants:
    """Every token's text as class strings; a token that ends inside a UTF-8 character has one
    variant per class that character may fall in. Tokens whose text can never occur in a valid
    program (NUL) and special tokens have none; tokens without text are listed in ``empty``."""

    def __init__(self, vocab: TokenBytes, alphabet: Alphabet):
        owner, codes, texts = [], [], []
        self.newline_first, self.empty = [], []
        for token, piece in enumerate(vocab.pieces):
            if piece is None:
                continue
            text, tail = split_utf8(piece)
            if text.startswith("\n"):  # after a pending \r, the checker drops this \n
                self.newline_first.append(token)
            text = text.replace("\r\n", "\n").replace("\r", "\n")
            if "\0" in text:
                continue
            if not text and not tail:
                self.empty.append(token)
                continue
            base = alphabet.encode(text)
            endings = [[c] for c in sorted(alphabet.non_ascii)] if tail else [[]]
            for end in endings:
                owner.append(token)
                codes.append(base + end)
                texts.append(text + (alphabet.non_ascii[end[0]] if end else ""))
        order = sorted(range(len(codes)), key=lambda i: -len(codes[i]))
        self.owner = np.array([owner[i] for i in order], dtype=np.int64)
        self.codes = [codes[i] for i in order]
        self.texts = [texts[i] for i in order]
        self.lengths = np.array([len(c) for c in self.codes], dtype=np.int64)
        width = int(self.lengths.max()) if len(self.codes) else 0
        self.matrix = np.zeros((len(self.codes), width), dtype=np.int16)
        for i, c in enumerate(self.codes):
            self.matrix[i, : len(c)] = c

    def __len__(self) -> int:
        return len(self.codes)


# ---------------------------------------------------------------- building


class _Builder:
    """Computes the store's bitsets (see :class:`MaskStore` for what each family means)."""

    def __init__(self, layer: Layer[Any], vocab: TokenBytes, progress: bool):
        self.layer = layer
        self.vocab = vocab
        self.progress = progress
        self.alphabet = Alphabet(layer.dfa)
        self.variants = _Variants(vocab, self.alphabet)
        self.auto = _TokenAutomaton(layer, self.alphabet)
        self.n_terms = layer.grammar.n_terminals
        self.words = (vocab.size + 63) // 64
        self._rows: list[np.ndarray] = [np.zeros(self.words, dtype=np.uint64)]
        self._row_ids: dict[bytes, int] = {self._rows[0].tobytes(): 0}

    # -- rows

    def row(self, token_bits: np.ndarray) -> int:
        """Index of the (deduplicated) bitset of a bool vector over tokens; 0 is the empty set."""
        padded = np.zeros(self.words * 64, dtype=bool)
        padded[: len(token_bits)] = token_bits
        words = np.packbits(padded, bitorder="little").view("<u8")
        key = words.tobytes()
        idx = self._row_ids.get(key)
        if idx is None:
            idx = self._row_ids[key] = len(self._rows)
            self._rows.append(words.astype(np.uint64))
        return idx

    def tokens_of(self, variant_sel: np.ndarray) -> np.ndarray:
        """Bool vector over tokens: the owners of the selected variants."""
        bits = np.zeros(self.vocab.size, dtype=bool)
        bits[self.variants.owner[variant_sel]] = True
        return bits

    def _mode_openers(self) -> np.ndarray:
        """Tokens that may open an f-string or t-string inside them. The rows model one lexing
        mode, and what follows such a start is read in another, so they are always allowed
        (a superset stays sound; the exact check decides)."""
        bits = np.zeros(self.vocab.size, dtype=bool)
        if self.layer.string_start_mask:
            for token, piece in enumerate(self.vocab.pieces):
                if piece is not None and _STRING_MODE_OPENER.search(split_utf8(piece)[0]):
                    bits[token] = True
        return bits

    # -- suffixes read from the empty lexeme

    def suffix_sets(self) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """For every variant and offset ``i``: an id of U(text[i:]), the terminals that the first
        non-ignored lexeme of that text can be (in progress or complete, maximal munch; complete
        ones only if the rest lexes), ignored terminals included when only ignored ones fit.
        Returns (offset base per variant, flat ids, id -> terminal mask)."""
        auto = self.auto
        trans = auto.trans.tolist()
        acc, tm, live = auto.accept, auto.tmask, auto.live
        ignore = self.layer.ignore_mask
        start = 1  # local id of the DFA's start state
        interned: dict[int, int] = {0: 0}
        table = [0]
        base = np.zeros(len(self.variants) + 1, dtype=np.int64)
        np.cumsum(self.variants.lengths + 1, out=base[1:])
        flat = np.zeros(int(base[-1]), dtype=np.int32)
        for v, code in enumerate(_bar(self.variants.codes, self.progress, "suffixes", "token")):
            n = len(code)
            u = [0] * (n + 1)
            lexable = [False] * n + [True]
            for i in range(n - 1, -1, -1):
                s, last, j = start, None, i
                while j < n:
                    s = trans[s][code[j]]
                    if not s:
                        break
                    j += 1
                    if acc[s]:
                        last = (j, s)
                out = live[s] if s else 0
                ok = bool(s)
                if last is not None and last[0] < n:
                    j, s_end = last
                    a = tm[s_end]
                    if a & ignore:
                        out |= u[j]
                    if lexable[j]:
                        out |= a & ~ignore
                        ok = True
                u[i] = out
                lexable[i] = ok
            row = flat[base[v] : base[v + 1]]
            for i in range(n):
                uid = interned.get(u[i])
                if uid is None:
                    uid = interned[u[i]] = len(table)
                    table.append(u[i])
                row[i] = uid
        return base, flat, table

    # -- walking every token from every state

    def walk(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Run every variant from each of ``states``: (end state, last accepting position or -1,
        state there). Vectorised over states x variants, one character position at a time."""
        auto, var = self.auto, self.variants
        trans = auto.trans.reshape(-1)
        n_classes = auto.trans.shape[1]
        accepting = np.array([a != 0 for a in auto.accept], dtype=bool)
        cur = np.repeat(states[:, None], len(var), axis=1).astype(np.int32)
        last = np.where(accepting[states], 0, -1)[:, None].repeat(len(var), axis=1).astype(np.int16)
        at = cur.copy()
        neg_lengths = -var.lengths
        for j in range(var.matrix.shape[1]):
            n = int(np.searchsorted(neg_lengths, -j, side="left"))  # variants longer than j
            if n == 0:
                break
            nxt = trans[cur[:, :n] * n_classes + var.matrix[:n, j]]
            cur[:, :n] = nxt
            hit = accepting[nxt]
            last[:, :n][hit] = j + 1
            at[:, :n][hit] = nxt[hit]
        return cur, last, at

    def build(self) -> dict:
        """All bitsets and their index tables, as arrays for :class:`MaskStore`."""
        auto, var, nt = self.auto, self.variants, self.n_terms
        live_b = np.array([_bits(m, nt) for m in auto.live])
        tm_b = np.array([_bits(m, nt) for m in auto.tmask])
        base, uflat, utable = self.suffix_sets()
        u_b = np.array([_bits(m, nt) for m in utable])
        first_uid = uflat[base[:-1]]
        fresh = np.full(nt, -1, dtype=np.int32)
        for t2 in range(nt):
            sel = u_b[first_uid, t2]
            if sel.any():
                fresh[t2] = self.row(self.tokens_of(sel))
        zero = np.full(auto.size, -1, dtype=np.int32)
        dead = self.dead_first()
        cont: list[tuple[int, int, int]] = []
        ext: list[tuple[int, int, int, int]] = []
        self._nl_groups: list[tuple[int, int, int]] = []  # (state, newline key or -1, row)
        self._nl_keys: dict[str, int] = {}  # text added to the newline -> its key
        chunk = 32
        bar = _bar(range(1, auto.size), self.progress, "states", "state")
        for lo in range(1, auto.size, chunk):
            states = np.arange(lo, min(lo + chunk, auto.size))
            end, last, at = self.walk(states)
            for k, q in enumerate(states):
                self._state_rows(
                    int(q), end[k], last[k], at[k], base, uflat, live_b, tm_b, u_b, zero, cont, ext
                )
                bar.update(1)
        bar.close()
        special = {
            "newline_first": self.row(self._token_set(var.newline_first)),
            "text_tokens": self.row(
                self.tokens_of(np.ones(len(var), dtype=bool)) | self._token_set(var.empty)
            ),
            "always": self.row(self._token_set(var.empty) | self._mode_openers()),
            "plain": self.row(self._token_set(_plain_tokens(self.vocab))),
        }
        return {
            "rows": np.stack(self._rows),
            "cont": np.array(cont, dtype=np.int32).reshape(-1, 3),
            "zero": zero,
            "dead": dead,
            "fresh": fresh,
            "ext": np.array(ext, dtype=np.int32).reshape(-1, 4),
            "nl_groups": np.array(self._nl_groups, dtype=np.int32).reshape(-1, 3),
            "nl_keys": list(self._nl_keys),
            "paths": auto.paths,
            **special,
        }

    def dead_first(self) -> np.ndarray:
        """Per state, the row of tokens whose first character the lexeme cannot take (0: none)."""
        first = self.variants.matrix[:, 0]
        return np.array(
            [self.row(self.tokens_of(self.auto.trans[q, first] == 0)) for q in range(self.auto.size)],
            dtype=np.int32,
        )

    def _token_set(self, tokens: list[int]) -> np.ndarray:
        bits = np.zeros(self.vocab.size, dtype=bool)
        bits[tokens] = True
        return bits

    def _state_rows(self, q, end, last, at, base, uflat, live_b, tm_b, u_b, zero, cont, ext) -> None:
        """The rows of one state: continuation (per terminal), split at offset 0, and splits
        after the token extends the lexeme (per terminal pair)."""
        auto, lengths = self.auto, self.variants.lengths
        live_q = auto.live[q]
        alive = end != 0
        for t1 in _ids(live_q):
            sel = alive & live_b[end, t1]
            if sel.any():
                cont.append((q, t1, self.row(self.tokens_of(sel))))
        inside = (last >= 0) & (last < lengths)
        uid = np.zeros(len(lengths), dtype=np.int64)
        uid[inside] = uflat[base[:-1][inside] + last[inside]]
        inside &= uid != 0
        at_zero = inside & (last == 0)
        if at_zero.any() and auto.tmask[q]:
            zero[q] = self.row(self.tokens_of(at_zero))
        later = np.flatnonzero(inside & (last > 0))
        if not len(later):
            return
        t1_bits = tm_b[at[later]]
        u_bits = u_b[uid[later]]
        for t1 in np.flatnonzero(t1_bits.any(axis=0)).tolist():
            pick = later[t1_bits[:, t1]]
            u_pick = u_bits[t1_bits[:, t1]]
            for t2 in np.flatnonzero(u_pick.any(axis=0)):
                ext.append((q, int(t1), int(t2), self.row(self.tokens_of(pick[u_pick[:, t2]]))))
            if t1 == self.layer.newline:
                self._newline_groups(q, pick, last[pick])

    def _newline_groups(self, q: int, picked: np.ndarray, ends: np.ndarray) -> None:
        """Tokens that extend a newline lexeme and end it inside the token, grouped by the text
        they add to it (which decides the new line's indentation): the largest groups get rows
        of their own (group -1 holds the rest)."""
        groups: dict[str, list[int]] = {}
        for v, end in zip(picked.tolist(), ends.tolist()):
            groups.setdefault(self.variants.texts[v][:end], []).append(v)
        ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        rest = [v for _, vs in ranked[NEWLINE_GROUPS:] for v in vs]
        for key, vs in ranked[:NEWLINE_GROUPS]:
            k = self._nl_keys.setdefault(key, len(self._nl_keys))
            self._nl_groups.append((q, k, self.row(self.tokens_of(np.array(vs)))))
        if rest:
            self._nl_groups.append((q, -1, self.row(self.tokens_of(np.array(rest)))))


def _plain_tokens(vocab: TokenBytes) -> list[int]:
    """Tokens whose bytes are whole UTF-8 characters that the checker reads as they are: no
    ``\\r`` (translated), NUL or lone surrogate (refused), byte order mark (dropped at the
    file's start). For these, a ``cont`` row is exact (:meth:`MaskStore.sure`)."""
    plain = []
    for token, piece in enumerate(vocab.pieces):
        if not piece:
            continue
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not any(ch in text for ch in "\r\0\ufeff"):
            plain.append(token)
    return plain


def _bar(items, enabled: bool, desc: str, unit: str):
    from tqdm import tqdm

    return tqdm(
        items, desc=f"mask store: {desc}", unit=unit, disable=not enabled, leave=False, mininterval=0.5
    )


def _ids(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


# ---------------------------------------------------------------- keys and cache


def grammar_key(layer: Layer[Any]) -> str:
    """A hash of what the store depends on: the terminals (patterns, flags, ignored, literal),
    the layer's class and the store format's version. Rules do not matter (they are read at run time)."""
    terms = [(t.name, t.pattern, t.flags, t.ignored, t.literal) for t in layer.grammar.terminals]
    spec = json.dumps([STORE_VERSION, type(layer).__name__, terms, layer.grammar.n_terminals])
    return hashlib.sha256(spec.encode()).hexdigest()[:24]


def store_version_tag(language: str, python_version: VersionLike | None = None) -> str | None:
    """The target Python version a store for ``language`` is built for, as ``"3.12"`` (default:
    the newest), or None for a language without versions (JSON). Stores are per version: the
    parser states they are read with, and the keywords they split tokens at, differ."""
    from ...engine.checker import LANGUAGES

    if language in LANGUAGES and not LANGUAGES[language][3]:
        return None
    return format_version(parse_python_version(python_version))


def _store_layer(language: str, tag: str | None) -> Layer[Any]:
    from ...engine.checker import get_layer

    return get_layer(language, tag)


@dataclass(frozen=True)
class SavedStore:
    """A store's arrays and header as read from its file (:meth:`MaskStore.last_used`), not yet
    bound to the layer the checkers share (:meth:`MaskStore.attach`)."""

    path: Path
    data: dict
    meta: dict


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
        :class:`~fimconstrain.decoding.tokens.token_bytes.TokenBytes`) and a language's grammar at a target Python
        version (``"3.12"`` or ``(3, 12)``; default: the newest). Its masks are for checkers
        of that version only."""
        started = time.perf_counter()
        tag = store_version_tag(language, python_version)
        layer = _store_layer(language, tag)
        vocab = tokenizer if isinstance(tokenizer, TokenBytes) else vocabulary(tokenizer, vocab_size)
        built = _Builder(layer, vocab, progress).build()
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
        data = {k: built[k] for k in _FILE_KEYS}
        return cls(layer, vocab.size, data, meta)

    @classmethod
    def attach(cls, saved: SavedStore) -> MaskStore:
        """The store of ``saved``, bound to the shared layer of its language and version (the
        one checkers use); ValueError if that layer's grammar is not the one it was built for."""
        meta = saved.meta
        layer = _store_layer(meta["language"], meta.get("python_version"))
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
            return _read_store(path, language, store_version_tag(language, tag), None, vocab)
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
        return _store_file(cache_dir, language, tag, grammar_key(_store_layer(language, tag)), vocab)

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
        key = grammar_key(_store_layer(language, tag))
        return cls.attach(_read_store(Path(path), language, tag, key, vocab))

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
        (``_plain_tokens``) that a branch without guards reads through, either

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


def pack(bits: np.ndarray) -> np.ndarray:
    """A bool vector as ``uint64`` words (the store's layout)."""
    padded = np.zeros(-(-len(bits) // 64) * 64, dtype=bool)
    padded[: len(bits)] = bits
    return np.packbits(padded, bitorder="little").view("<u8").astype(np.uint64)


def _store_file(
    cache_dir: Path | str | None, language: str, tag: str | None, key: str, vocab: TokenBytes
) -> Path:
    """``<cache>/<language>-<version>-<grammar key>-<vocabulary fingerprint>.npz``."""
    folder = Path(cache_dir) if cache_dir is not None else cache_root() / "masks"
    name = f"{language}-{tag}-{key}" if tag is not None else f"{language}-{key}"
    return folder / f"{name}-{vocab.fingerprint()}.npz"


def _read_store(
    path: Path, language: str, tag: str | None, key: str | None, vocab: TokenBytes | None
) -> SavedStore:
    """The arrays and header of a saved store, checked: ValueError if it was built for another
    language, Python version, store format, grammar (``key``, when given) or vocabulary
    (``vocab``, when given), or its arrays do not fit its header. Reading it touches the file
    (:meth:`MaskStore.last_used`)."""
    with np.load(path, allow_pickle=False) as f:
        meta = json.loads(str(f["meta"]))
        data = {k: f[k] for k in _FILE_KEYS}
    if meta.get("language") != language:
        raise ValueError(f"{path}: mask store for {meta.get('language')!r}, not {language!r}")
    stored = meta.get("python_version")
    if stored != tag:  # a store from before stores were per version has none: built again
        raise ValueError(f"{path}: mask store for Python {stored}, not {tag}")
    if meta.get("version") != STORE_VERSION or (key is not None and meta.get("grammar") != key):
        raise ValueError(f"{path}: mask store for another grammar or store version")
    if vocab is not None and meta.get("vocab") != vocab.fingerprint():
        raise ValueError(f"{path}: mask store for another vocabulary")
    rows = data["rows"]
    if rows.ndim != 2 or rows.shape[1] != (int(meta["vocab_size"]) + 63) // 64:
        raise ValueError(f"{path}: mask store rows that do not fit its vocabulary")
    try:
        os.utime(path)
    except OSError:
        pass
    return SavedStore(path, data, meta)


# ---------------------------------------------------------------- decoding helpers


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


def prefix_logits(store: MaskStore, checker, logits, stop_ids: Iterable[int] = (), held: int = 0):
    """Prefix-only decoding (``mode=prefix``): the logits with the store's mask applied; stop
    tokens stay only when the program is complete now. The drawn token still goes through
    ``checker.feed`` (the mask is a superset), which also gives the next step's checker."""
    ends = list(stop_ids) if checker.is_complete() else []
    return mask_logits(logits, store.allowed(checker, held), ends)


def prefiltered(
    store: MaskStore, checker, ranked: Iterable[int], passthrough: Iterable[int] = (), held: int = 0
) -> Iterator[int]:
    """``ranked`` token ids (best first) without those the store rules out; ids in
    ``passthrough`` (stop tokens) are always kept. Feed the result to the exact check (FIM)."""
    words = store.mask(checker, held)
    keep = set(passthrough)
    size = store.vocab_size
    for token in ranked:
        if token in keep or (0 <= token < size and int(words[token >> 6]) >> (token & 63) & 1):
            yield token
