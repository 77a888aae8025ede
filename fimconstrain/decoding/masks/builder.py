"""Building the token-mask store (paper 000 §3.3, Appendix 8.1; paper 001 §3; newline groups for
paper 004 §VI's indentation): per lexer-automaton state, the bitsets of the tokens read from it.
Only a store missing from the cache is built, so the building lives apart from the runtime store.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...engine.automata.regex_dfa import DEAD, LexerDFA
from ...engine.layers.layer_protocol import Layer
from ..tokens.token_bytes import TokenBytes, split_utf8

#: token text that may open an f-string or t-string (its quote, or the quote and the prefix
#: letters a lexeme in progress lacks): after it the lexer reads in another mode
_STRING_MODE_OPENER = re.compile(r"""^[rRfFtT]{0,2}['"]|[fFtT][rR]?['"]|[rR][fFtT]['"]""")
#: per newline state, how many groups of indentation-changing tokens are judged exactly
NEWLINE_GROUPS = 16


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


class StoreBuilder:
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
