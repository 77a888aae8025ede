"""Where a symbol ends in a whole-vocabulary walk (``_walk.c``), the layer's answer in the walk's
terms: the walk calls :meth:`WalkEnds.on_end` a few hundred times a mask, so this lives in the
engine, compiled, rather than beside the walk's tables in ``decoding/masks/vocab_walk.py``
(docs/optimizations.md, "The native vocabulary walk").

Most symbols that end are names, numbers, operators and brackets, whose end is the parser's step
alone: where the layer's ``plain_ends`` groups hold a symbol's terminals (and for a symbol the
parser ignores where ``ignore_unchanged`` holds), the end is answered here as ``_lexer.c``
answers it, without ``end_reads_text`` and ``end_and_next`` (docs/optimizations.md, "A child
read in one record; a token's one place; plain ends answered in the walk").

A *context* is a parser state and layout, numbered in the order met; contexts whose parser
states accept the same continuations and whose layouts are equal share a number, so the walk's
memo, keyed by context, serves both. A parser state whose kernel is one item is compared by
that item's deterministic reduction path, followed to its top (:func:`reduction_key`), so that
a run of unary operators (``------``, ``~~~~``: a deeper expression each) is one context, not
one per sign.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from .automata.earley import EarleySet, Item
from .automata.grammar import Grammar
from .layers.layer_protocol import READS_NOTHING, Layer, PlainEnds

#: the most steps a reduction path is followed (a grammar's unit cycles would loop)
REDUCTION_STEPS = 64

#: what a symbol's end gives the walk: None (rejected), -2 (undecided: no dense start state),
#: or (context, dense start state, allowed terminals as little-endian words)
EndAnswer = tuple[int, int, bytes] | int | None
#: the walk's question where a symbol ends: the answer, and what of the text it read (the
#: layer's :data:`~.layers.layer_protocol.READS_NOTHING`: it holds for every ASCII text of that
#: lexer state in that context; ``READS_ESCAPES``: for every one without a backslash)
EndReply = tuple[EndAnswer, int]


class WalkEnds:
    """One walk's contexts and the layer's answers where its symbols end."""

    def __init__(self, layer: Layer[Any], dense_of: dict[int, int], sids: list[int], words: int) -> None:
        """``dense_of`` and ``sids``: the walk's dense ids of lexer states and the states by
        dense id (the walk's own, read here: it grows them only between walks); ``words``:
        64-bit words of a terminal mask."""
        self.layer = layer
        self.dense_of = dense_of
        self.sids = sids
        self.nbytes = 8 * words
        #: (parser, layout) by context id, and each context's allowed terminals as bytes and as
        #: an int; its layout's plain ends (None: not asked yet)
        self.contexts: list[tuple[EarleySet, Any]] = []
        self.allowed: list[bytes] = []
        self.allowed_mask: list[int] = []
        self.plain: list[PlainEnds[Any] | None] = []
        #: the layer's plain ends by layout (most ends meet a new context, few a new layout, and
        #: the layer builds a layout's groups anew at every call)
        self.plain_of: dict[Any, PlainEnds[Any]] = {}
        self.context_ids: dict[Hashable, int] = {}
        #: lexer states a symbol started from that the dense automaton does not have yet
        self.unknown: set[int] = set()

    def context(self, parser: EarleySet, layout: Any, allowed: int = -1) -> int:
        """The id of context (``parser``, ``layout``), numbered on first sight; ``allowed``: its
        terminals, where the caller has them (-1: asked of the layer)."""
        key = (reduction_key(self.layer.grammar, parser), layout)
        known = self.context_ids.get(key)
        if known is not None:
            return known
        c = self.context_ids[key] = len(self.contexts)
        self.contexts.append((parser, layout))
        if allowed < 0:
            allowed = self.layer.allowed(parser, layout)
        self.allowed.append(allowed.to_bytes(self.nbytes, "little"))
        self.allowed_mask.append(allowed)
        self.plain.append(None)
        return c

    def on_end(self, ctx: int, q: int, text: str) -> EndReply:
        """The end of the symbol ``text`` in lexer state ``q`` (dense) of context ``ctx``, and
        what of an ASCII text it read (the layer's word, or a plain end's, which reads none)."""
        layer = self.layer
        parser, layout = self.contexts[ctx]
        sid = self.sids[q]
        terminals = layer.token_mask(sid) & self.allowed_mask[ctx]
        if not terminals:
            return None, READS_NOTHING
        if terminals & layer.ignore_mask:
            if layer.ignore_unchanged(layout):
                return self._started(ctx, layer.lex_start(layout)), READS_NOTHING
        elif text.isascii():
            plain = self.plain[ctx]
            if plain is None:
                plain = self.plain_of.get(layout)
                if plain is None:
                    plain = self.plain_of[layout] = layer.plain_ends(layout)
                self.plain[ctx] = plain
            for group, scans, layout_after, start, extra in plain:
                if terminals & ~group:
                    continue
                if not scans:  # (the parser as it is)
                    same = self.context(parser, layout_after, self.allowed_mask[ctx])
                    return self._started(same, start), READS_NOTHING
                scanned = layer.recognizer.scan_expecting(parser, layer.terminal_ids(terminals))
                if scanned is None:
                    return None, READS_NOTHING
                after, expected = scanned
                context = self.context(after, layout_after, expected | extra)
                return self._started(context, start), READS_NOTHING
        reads = layer.end_reads_text(parser, layout, sid)
        ended = layer.end_and_next(parser, layout, sid, text)
        if ended is None:
            return None, reads
        after, layout_after, start, allowed = ended
        return self._started(self.context(after, layout_after, allowed), start), reads

    def _started(self, ctx: int, start: int) -> EndAnswer:
        """The answer where a symbol ended into context ``ctx`` and the next starts in lexer
        state ``start``: -2 (undecided) where the walk has no dense id for that state."""
        d = self.dense_of.get(start)
        if d is None:
            self.unknown.add(start)
            return -2
        return ctx, d, self.allowed[ctx]


def reduction_key(grammar: Grammar, parser: EarleySet) -> Hashable:
    """A key equal for parser states that accept the same continuations: for a kernel of one
    item, whether the state accepts, the symbol the item waits for and the top of the item's
    deterministic reduction path (Leo's, paper 004 section IV); for any other kernel, its
    :meth:`~.automata.earley.EarleySet.signature`. While an item is complete after its symbol
    and its origin holds exactly one item waiting for the item's left-hand side (kernel or
    predicted), completing the symbol here completes the item and then advances that one alone,
    so the one advanced stands for it (the closure reads nothing else on the way). After
    ``a = -`` and ``a = --`` the kernels differ (``factor: '-' . factor`` begun after ``=`` or
    after the first ``-``) and their tops are the same item. A prefix operator's set is such a
    kernel of one item; following every item of a larger kernel cost more than the lexeme ends
    it saved. Origins compare by identity, as in the signature."""
    waiting = parser.waiting
    if len(waiting) == 1:
        for symbol, items in waiting.items():
            if len(items) == 1:
                return parser.accepting, symbol, _reduction_top(grammar, items[0])
    return parser.signature()


def _reduction_top(grammar: Grammar, item: Item) -> tuple[int, int]:
    """The top of ``item``'s deterministic reduction path (:func:`reduction_key`), as its
    dotted item and its origin's identity."""
    next_symbol, item_lhs = grammar.next_symbol, grammar.item_lhs
    d, origin = item
    steps = 0
    while origin is not None and next_symbol[d] < 0 and steps < REDUCTION_STEPS:
        lhs = item_lhs[d]
        kernel = origin.waiting.get(lhs) or ()
        predicted = origin.prediction.advanced(lhs)
        if len(kernel) + len(predicted) != 1:
            break
        if kernel:
            d, origin = kernel[0]
        else:  # (a predicted item begins in the origin itself)
            d = predicted[0]
        steps += 1
    return d, id(origin)
