"""The exact whole-vocabulary walk: for every token of a vocabulary at once, whether a checker
takes its text (``checker.feed(text) is not None``), by running the branching lexer
(:func:`fimconstrain.engine.lexer.advance`) over a character trie of the tokens' texts: a
prefix that tokens share is read once, and a subtree whose prefix kills every branch is never
read. The C extension ``fimconstrain.engine._walk`` (``_walk.c``) walks; Python ends the symbols
(the layer's ``end_and_next``: ``end_symbol``, ``lex_start`` and ``allowed``, asked by the
engine's compiled :class:`~fimconstrain.engine.walk_ends.WalkEnds`), once per context, lexer
state and text in a walk, or once per context and lexer state for every ASCII text where the
layer says the text does not change the answer (``end_reads_text``: most names, numbers and
operators), or for every one without a backslash where it reads only the escapes (a string).
Its Python twin, the reference the C is tested against, is the tests' own
(``tests/decoding/vocab_walk_twin.py``).

A token may have several texts and passes when one of them does: a token that ends inside a
UTF-8 character is its whole characters followed by each character it may become
(:func:`..loop.constraint.walk_texts`).

The answer is two bitsets over token ids (bit t % 8 of byte t // 8): the tokens that pass, and
the *undecided* ones, which the caller feeds itself: tokens without a text, with a byte order
mark (the checker drops it at the start of a file), and tokens below a symbol whose lexing mode
starts in a lexer state the dense table does not have yet (the table grows by it for the next
walk). Every other token fails. A text is walked as the checker reads it: a ``\\r`` as the line
break it stands for, and a text the checker refuses before lexing (a NUL, a lone surrogate) not
at all.

A :class:`VocabWalk` is built once per layer and vocabulary (:func:`vocab_walk`): the trie, the
characters' classes (:class:`.builder.Alphabet`) and a dense copy of the lexer automaton over
them. Building and growing it steps the layer's shared lazy automaton, as checking does, so it
runs on the thread that checks.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...engine import native
from ...engine.automata.regex_dfa import DEAD
from ...engine.checker import BOM, Checker, is_valid_source_text, translate_line_breaks
from ...engine.layers.layer_protocol import Layer
from ...engine.walk_ends import WalkEnds
from .builder import Alphabet

#: a token's text (its :meth:`.TextCodec.piece`), or the texts one of which it must pass as,
#: or None (the walk leaves it undecided)
TokenTexts = str | tuple[str, ...] | None


def _as_tuple(entry: str | tuple[str, ...]) -> tuple[str, ...]:
    return (entry,) if isinstance(entry, str) else entry


class VocabWalk:
    """A vocabulary's character trie and the layer's lexer automaton as dense tables."""

    def __init__(self, layer: Layer[Any], texts: Sequence[TokenTexts], states: list[int] | None = None):
        """``texts``: each token's text, or the texts one of which it must pass as, or None
        (:data:`TokenTexts`); ``states``: the lexer states the dense automaton starts from, with
        all they reach (default: the start of a symbol and of a file, about 300 states for Python, where every
        state the automaton has made so far may reach 5,000: f-string modes); walks add the
        others they meet."""
        self.layer = layer
        dfa = layer.dfa
        self.alphabet = alphabet = Alphabet(dfa)
        self.words = max(1, (layer.grammar.n_terminals + 63) // 64)
        self.n_tokens = len(texts)
        self.n_bytes = (len(texts) + 63) // 64 * 8
        # a text is read as the checker reads it: its line breaks translated (the walk reads
        # no text after a \r that a line feed may join); one it refuses never passes; a token
        # with a byte order mark is left to the caller (the mark is dropped at a file's start)
        decided = [
            (token, _as_tuple(entry))
            for token, entry in enumerate(texts)
            if entry and not any(BOM in text for text in _as_tuple(entry))
        ]
        walkable = sorted(
            (translate_line_breaks(text), token)
            for token, entry in decided
            for text in entry
            if is_valid_source_text(text)
        )
        # the trie, its nodes numbered in preorder (sorted texts create them in that order)
        children: list[list[tuple[str, int]]] = [[]]
        tokens: list[list[int]] = [[]]
        path: list[int] = [0]
        previous = ""
        for text, token in walkable:
            common = 0
            limit = min(len(text), len(previous))
            while common < limit and text[common] == previous[common]:
                common += 1
            del path[common + 1 :]
            for ch in text[common:]:
                node = len(children)
                children.append([])
                tokens.append([])
                children[path[-1]].append((ch, node))
                path.append(node)
            tokens[path[-1]].append(token)
            previous = text
        n = len(children)
        size = [1] * n
        for node in range(n - 1, -1, -1):
            for _, child in children[node]:
                size[node] += size[child]
        edges = [edge for kids in children for edge in kids]
        self.child_start = np.cumsum([0, *map(len, children)], dtype=np.int32)
        self.edge_cp = np.array([ord(ch) for ch, _ in edges], dtype=np.uint32)
        self.edge_cls = np.array([alphabet.of(ch) for ch, _ in edges], dtype=np.int32)
        self.edge_to = np.array([child for _, child in edges], dtype=np.int32)
        self.tok_start = np.cumsum([0, *map(len, tokens)], dtype=np.int32)
        self.tok_ids = np.array([t for ts in tokens for t in ts], dtype=np.int32)
        self.subtree_end = np.arange(n, dtype=np.int32) + np.array(size, dtype=np.int32)
        self.nodes = n
        # each token's places in ``tok_ids`` (a walk asked about some tokens reads the subtrees
        # that hold one of their places alone)
        by_token = np.argsort(self.tok_ids, kind="stable")
        self.tok_places = by_token.astype(np.int32)
        self.tok_place_start = np.searchsorted(
            self.tok_ids[by_token], np.arange(self.n_tokens + 1), side="left"
        ).astype(np.int32)
        #: the tokens no walk decides (bit t % 8 of byte t // 8)
        undecided = np.ones(self.n_bytes * 8, dtype=bool)
        undecided[[token for token, _ in decided]] = False
        self.undecided = np.packbits(undecided, bitorder="little").tobytes()
        # the dense automaton: DEAD is dense state 0, every state the automaton has is in it
        self.classes = len(alphabet.reps)
        self.dense_of: dict[int, int] = {}
        self.sids: list[int] = []
        self._rows: list[list[int]] = []
        self._tables: tuple[Any, ...] = ()
        #: (module, the tables as it took them): its ``prepare``, once per growth
        self._prepared: tuple[Any, Any] | None = None
        #: one walk at a time (a walk grows the tables that another would be reading)
        self._lock = threading.Lock()
        self.grow([DEAD, *((dfa.start, layer.initial_lexeme) if states is None else states)])

    def grow(self, sids: list[int] | set[int]) -> None:
        """Add ``sids`` and every state they reach over the classes to the dense automaton."""
        dfa, reps, dense_of = self.layer.dfa, self.alphabet.reps, self.dense_of
        queue: deque[int] = deque()

        def dense(sid: int) -> int:
            d = dense_of.get(sid)
            if d is None:
                d = dense_of[sid] = len(self.sids)
                self.sids.append(sid)
                self._rows.append([])
                queue.append(sid)
            return d

        for sid in sids:
            dense(sid)
        if not queue:
            return
        while queue:
            sid = queue.popleft()
            row = self._rows[dense_of[sid]]
            for ch in reps:
                nxt = dfa.trans[sid].get(ch)
                row.append(dense(dfa.step(sid, ch) if nxt is None else nxt))
        w = self.words
        word = (1 << 64) - 1
        live = np.array(
            [[(dfa.live[s] >> (64 * k)) & word for k in range(w)] for s in self.sids], dtype=np.uint64
        )
        self._prepared = None
        self._tables = (
            self.child_start,
            self.edge_cp,
            self.edge_cls,
            self.edge_to,
            self.tok_start,
            self.tok_ids,
            self.subtree_end,
            np.array(self._rows, dtype=np.int32).reshape(-1),
            np.array([dfa.final[s] for s in self.sids], dtype=np.uint8),
            live.reshape(-1),
            self.tok_place_start,
            self.tok_places,
            len(self.sids),
            self.classes,
            w,
        )

    def _prepared_for(self, module: Any) -> Any:
        """The tables as ``module`` reads them (``module.prepare`` checks them once)."""
        prepared = self._prepared
        if prepared is None or prepared[0] is not module:
            prepared = self._prepared = (module, module.prepare(self._tables))
        return prepared[1]

    def walk(
        self, checker: Checker[Any], module: Any, only: bytes | None = None, asked: np.ndarray | None = None
    ) -> tuple[bytes, bytes]:
        """``(passing, undecided)`` for every token after ``checker`` (see the module's note),
        walked by the C extension ``module`` (:func:`.native.walk_extension`); with ``only`` (a
        bitset, as the answer's) or ``asked`` (``int32`` token ids, for a few) for those tokens:
        the walk leaves out the subtrees without one, so that a token not asked about may be
        said to fail when it passes (never the other way)."""
        if checker.pending_cr:
            raise ValueError("the walk reads no text after a carriage return that a line feed may join")
        with self._lock:
            return self._walk(checker, module, only, asked)

    def _walk(
        self, checker: Checker[Any], module: Any, only: bytes | None, asked: np.ndarray | None
    ) -> tuple[bytes, bytes]:
        dense_of = self.dense_of
        branches = checker.branches
        missing = {s for _, _, state, _, guards in branches for s in (state, *guards) if s not in dense_of}
        if missing:
            self.grow(missing)
        ends = WalkEnds(self.layer, dense_of, self.sids, self.words)
        roots = [
            (ends.context(parser, layout), dense_of[state], k, tuple(dense_of[g] for g in guards))
            for k, (parser, layout, state, _, guards) in enumerate(branches)
        ]
        lexemes = [lexeme for _, _, _, lexeme, _ in branches]
        root_allowed = list(ends.allowed)
        passing = bytearray(self.n_bytes)
        undecided = bytearray(self.undecided)
        tables = self._prepared_for(module)
        module.walk(tables, roots, lexemes, root_allowed, ends.on_end, passing, undecided, only, asked)
        if ends.unknown:
            self.grow(ends.unknown)
        return bytes(passing), bytes(undecided)


#: the walks built, newest last: (layer, texts table, walk) (a layer is a grammar and version,
#: of which a process has few)
_WALKS: list[tuple[Layer[Any], Sequence[TokenTexts], VocabWalk]] = []
_WALKS_KEPT = 8


def vocab_walk(layer: Layer[Any], texts: Sequence[TokenTexts]) -> VocabWalk:
    """The walk of ``layer`` over ``texts`` (:meth:`.TextCodec.pieces`, or
    :func:`..loop.constraint.walk_texts`), built once."""
    for known_layer, known_texts, walk in _WALKS:
        if known_layer is layer and known_texts is texts:
            return walk
    walk = VocabWalk(layer, texts)
    _WALKS.append((layer, texts, walk))
    del _WALKS[:-_WALKS_KEPT]
    return walk


def native_walk() -> Any | None:
    """The C walk's module, or None (:func:`.native.walk_extension`: one log line says why)."""
    return native.walk_extension()
