"""Earley recognizer with persistent, immutable item sets.

An :class:`EarleySet` is one state of the recognizer. It never changes after it is built, and
items point at the sets they started in (their *origin*) by reference rather than by chart
index, so the chart is a DAG of sets: scanning a terminal builds a new set and leaves the old
one usable, which makes forking a parse O(1). The structure works over any transition system,
not just a string: a set can be scanned from several predecessors or with several terminals.

Two standard refinements keep sets small:

* Predicted items (dot at the start, origin = this set) are not stored per set. They depend
  only on which nonterminals the set predicts, so they live in a shared, memoised
  :class:`Prediction` keyed by that set of nonterminals.
* Nullable symbols are stepped over as soon as an item is added (Aycock and Horspool), so no
  completion ever has to look back into the set being built.

And one that makes a completion cheap: what advancing a set's predicted items over a symbol
leads to (the items reached, and the chain of unit completions at that set, ``atom -> NAME``,
``primary -> atom`` and so on up the expression grammar) depends only on the prediction and the
symbol, so it is worked out once per pair (:class:`Chain`) and replayed from then on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import native
from .grammar import Grammar

_EMPTY: tuple[()] = ()
#: predictions a recognizer keeps (a long-running server meets ever new sets of predicted
#: nonterminals); past it the oldest is dropped: the sets built with it keep it, only sharing
#: it with later sets is lost. Whole files of the standard library need a few hundred.
PREDICTIONS_LIMIT = 4096


class Chain:
    """What advancing a prediction's items over one symbol leads to, closed over completions at
    the predicting set: the dotted items reached that still wait for a symbol, and the
    nonterminals completed there (whose kernel items in the set then advance). Replaying it
    gives the same items as following the completions one by one."""

    __slots__ = ("completed", "items")

    def __init__(self, items: tuple[int, ...], completed: tuple[int, ...]) -> None:
        self.items = items
        self.completed = completed


class Prediction:
    """The predicted items shared by every set that predicts the same nonterminals.

    Building one walks the predicted nonterminals only (``Grammar.predicts``); the items that
    advance over a symbol are gathered when that symbol is first asked for (:meth:`advanced`),
    in the order a walk over the items would have met them: most symbols never are."""

    __slots__ = ("_advance", "_rank", "_rule_starts", "chains", "terminals")

    def __init__(self, grammar: Grammar, roots: frozenset[int]) -> None:
        predicts, first_terminals = grammar.predicts, grammar.first_terminals
        rank: dict[int, int] = {}  # predicted nonterminal -> when the walk met it
        stack = list(roots)
        terminals = 0
        while stack:
            lhs = stack.pop()
            if lhs in rank:
                continue
            rank[lhs] = len(rank)
            terminals |= first_terminals.get(lhs, 0)
            for sym in predicts.get(lhs, _EMPTY):
                if sym not in rank:
                    stack.append(sym)
        self._rank = rank
        self._rule_starts = grammar.rule_starts
        #: symbol -> the items (dot moved past it) whose origin is the predicting set
        self._advance: dict[int, tuple[int, ...]] = {}
        #: bitmask of terminals some predicted item can scan next
        self.terminals = terminals
        #: symbol -> its :class:`Chain` (filled in as symbols are met, :meth:`Recognizer.chain`)
        self.chains: dict[int, Chain] = {}

    def advanced(self, symbol: int) -> tuple[int, ...]:
        """The predicted items that read ``symbol`` first, the dot moved past it (origin: the
        predicting set); empty if none. Ordered by when the walk met their nonterminal."""
        found = self._advance.get(symbol)
        if found is None:
            rank = self._rank
            met = [(rank[lhs], d) for lhs, d in self._rule_starts.get(symbol, ()) if lhs in rank]
            met.sort()
            found = self._advance[symbol] = tuple([d for _, d in met])
        return found


class EarleySet:
    """One immutable recognizer state: kernel items indexed by the symbol they wait for."""

    __slots__ = ("__weakref__", "_expected", "accepting", "prediction", "waiting")

    def __init__(self, waiting: Waiting, prediction: Prediction, accepting: bool) -> None:
        #: symbol -> [(item after the symbol, origin set)] for kernel items expecting it: a
        #: dict, or where the closure runs in C its ``Items``, which reads the same
        self.waiting = waiting
        self.prediction = prediction
        #: the start symbol has been completed from the initial set
        self.accepting = accepting
        self._expected = -1

    def signature(self) -> Signature:
        """Equal for sets with the same kernel items over the same origin sets, which
        therefore accept the same continuations (origins compared by identity)."""
        waiting = self.waiting
        if not isinstance(waiting, dict):  # the C closure's Items: its pairs, sorted, as bytes
            key: bytes = waiting.signature_key()  # type: ignore[attr-defined]
            return self.accepting, key
        return self.accepting, frozenset((d, id(origin)) for items in waiting.values() for d, origin in items)


#: a kernel item: the dotted item after the awaited symbol, and the set it began in (None:
#: the augmented start rule, whose completion means a whole program)
Item = tuple[int, EarleySet | None]
#: a set's kernel items by the symbol they wait for (:attr:`EarleySet.waiting`)
Waiting = Mapping[int, Sequence[Item]]
#: what :meth:`EarleySet.signature` returns (the kernel's key: a frozenset of (item, origin
#: identity) pairs, or those pairs as bytes where the closure runs in C)
Signature = tuple[bool, frozenset[tuple[int, int]] | bytes]


class Recognizer:
    """Builds and advances :class:`EarleySet` states for one grammar."""

    def __init__(self, grammar: Grammar, initial: EarleySet | None = None, c_closure: bool = True) -> None:
        """``initial``: the set to start from (default: the start of a whole text);
        ``c_closure``: close sets in C where it is built (False: always the Python loop, the
        reference the differential test holds the C one to)."""
        self.grammar = grammar
        self._predictions: dict[frozenset[int], Prediction] = {}  # oldest first
        #: the most predictions kept (:data:`PREDICTIONS_LIMIT`)
        self.predictions_limit = PREDICTIONS_LIMIT
        self._n_terminals = grammar.n_terminals
        #: terminal -> its bit, built once (``1 << t`` past 62 bits is a new object each time)
        self._bits = [1 << t for t in range(grammar.n_terminals)]
        #: bits of an item or symbol id: :meth:`_close` keys (item, origin) as one int
        self._id_bits = max(len(grammar.next_symbol), len(grammar.symbol_names)).bit_length()
        #: the C twin of :meth:`_close`'s loop (``_earley.c``), or None: the loop below runs
        self._native_closure = _native_closure(grammar) if c_closure else None
        #: the C closure's scan and :meth:`chain`, its callback, bound once: a method named on
        #: an ``Any`` is looked up on its type at every call, and ``self.chain`` makes a new
        #: bound method each time
        self._c_scan = None if self._native_closure is None else self._native_closure.scan
        self._chain = self.chain
        #: ``_earley.Items.terminal_mask``, called as a function (None where it is not built)
        module = native.closure_extension()
        self._items_terminal_mask: Any = None if module is None else module.Items.terminal_mask
        self.initial = self._close([(grammar.start_item, None)]) if initial is None else initial

    @property
    def uses_c_closure(self) -> bool:
        """Whether this recognizer closes its sets in C (``_earley.c``)."""
        return self._native_closure is not None

    def prediction(self, roots: frozenset[int]) -> Prediction:
        """The shared prediction of ``roots`` (memoised, at most ``predictions_limit`` kept)."""
        predictions = self._predictions
        pred = predictions.get(roots)
        if pred is None:
            while predictions and len(predictions) >= self.predictions_limit:
                del predictions[next(iter(predictions))]  # the oldest
            pred = predictions[roots] = Prediction(self.grammar, roots)
        return pred

    def expected_terminals(self, state: EarleySet) -> int:
        """Bitmask of terminals ``state`` can scan (cached on the state)."""
        mask = state._expected  # (this module's own: the cache lives on the set)
        if mask < 0:
            mask = state.prediction.terminals
            waiting = state.waiting
            if isinstance(waiting, dict):
                n, bits = self._n_terminals, self._bits
                for sym in waiting:
                    if sym < n:
                        mask |= bits[sym]
            else:  # the C closure's Items: its terminals' bits in one call, not a list of its symbols
                mask |= self._items_terminal_mask(waiting, self._n_terminals)
            state._expected = mask
        return mask

    def chain(self, prediction: Prediction, symbol: int) -> Chain:
        """``prediction``'s :class:`Chain` for ``symbol`` (worked out on first use)."""
        found = prediction.chains.get(symbol)
        if found is not None:
            return found
        g = self.grammar
        next_symbol, skip, item_lhs = g.next_symbol, g.skip, g.item_lhs
        items: list[int] = []
        completed: list[int] = []
        seen: set[int] = set()
        stack = list(prediction.advanced(symbol))
        while stack:
            for d in skip[stack.pop()]:
                if d in seen:
                    continue
                seen.add(d)
                if next_symbol[d] >= 0:
                    items.append(d)
                    continue
                lhs = item_lhs[d]
                if lhs not in completed:
                    completed.append(lhs)
                    stack.extend(prediction.advanced(lhs))
        found = prediction.chains[symbol] = Chain(tuple(items), tuple(completed))
        return found

    def scan(self, state: EarleySet, terminals: tuple[int, ...]) -> EarleySet | None:
        """The state after reading one of ``terminals`` (terminal ids), or None."""
        c_scan = self._c_scan
        if c_scan is not None:
            # (the new set's kernel, the nonterminals it predicts, whether it accepts)
            scanned = c_scan(state, terminals, self._chain)
            return None if scanned is None else EarleySet(scanned[0], self.prediction(scanned[1]), scanned[2])
        seeds: list[Item] = []
        waiting, prediction = state.waiting, state.prediction
        predicted: list[int] = []
        for t in terminals:
            seeds.extend(waiting.get(t, _EMPTY))
            if prediction.advanced(t):
                predicted.append(t)
        if not seeds and not predicted:
            return None
        return self._close(seeds, state, predicted)

    def scan_expecting(self, state: EarleySet, terminals: tuple[int, ...]) -> tuple[EarleySet, int] | None:
        """:meth:`scan`, with the terminals the new set expects (:meth:`expected_terminals`): a
        symbol's end that is the parser's step alone, in one call (``_lexer.c``)."""
        after = self.scan(state, terminals)
        return None if after is None else (after, self.expected_terminals(after))

    def _close(
        self, seeds: list[Item], scanned: EarleySet | None = None, predicted: list[int] | None = None
    ) -> EarleySet:
        """Complete and index ``seeds`` (items of the new set), and ``scanned``'s predicted items
        advanced over each symbol of ``predicted``, into a new :class:`EarleySet`. (Its loop has
        two twins: the C one in ``_earley.c``, which runs where it is built, and one that forgets
        origins, ``refutation.ForgetfulRecognizer._close_forgetting``: a change to one belongs in
        the others; they stay apart because each is the hot path of its own caller.)"""
        if self._native_closure is not None and scanned is None:  # (scan closes in C on its own)
            # (the set's kernel, the nonterminals it predicts, whether it accepts)
            closed = self._native_closure.close(seeds, self._chain)
            return EarleySet(closed[0], self.prediction(closed[1]), closed[2])
        g = self.grammar
        next_symbol, skip, item_lhs = g.next_symbol, g.skip, g.item_lhs
        n_terminals = self._n_terminals
        # (item, origin) and (symbol, origin) keyed as one int, the origin by identity: every
        # origin stays alive while the set is built, and an int hashes without a tuple
        shift = self._id_bits
        seen: set[int] = set()
        done: set[int] = set()
        waiting: dict[int, list[Item]] = {}
        roots: set[int] = set()
        accepting = False
        stack = seeds
        # (set, chain) to replay: the set's predicted items advanced past a symbol, origin the set
        chains: list[tuple[EarleySet, Chain]] = []
        if scanned is not None and predicted:
            chains = [(scanned, self.chain(scanned.prediction, t)) for t in predicted]
        while stack or chains:
            while chains:
                predictor, chain = chains.pop()
                at = id(predictor) << shift
                for d in chain.items:
                    size = len(seen)
                    seen.add(at | d)
                    if len(seen) == size:  # seen before (one boxed key, hashed once)
                        continue
                    sym = next_symbol[d]
                    bucket = waiting.get(sym)
                    if bucket is None:
                        waiting[sym] = [(d + 1, predictor)]
                        if sym >= n_terminals:
                            roots.add(sym)
                    else:
                        bucket.append((d + 1, predictor))
                for lhs in chain.completed:
                    size = len(done)
                    done.add(at | lhs)
                    if len(done) > size:
                        stack.extend(predictor.waiting.get(lhs, _EMPTY))
            if not stack:
                break
            item = stack.pop()
            d0, origin = item
            at = id(origin) << shift
            for d in skip[d0]:
                size = len(seen)
                seen.add(at | d)
                if len(seen) == size:
                    continue
                sym = next_symbol[d]
                if sym >= 0:
                    bucket = waiting.get(sym)
                    if bucket is None:
                        waiting[sym] = [(d + 1, origin)]
                        if sym >= n_terminals:
                            roots.add(sym)
                    else:
                        bucket.append((d + 1, origin))
                    continue
                if origin is None:  # the augmented start rule is complete
                    accepting = True
                    continue
                lhs = item_lhs[d]
                size = len(done)
                done.add(at | lhs)
                if len(done) == size:
                    continue
                stack.extend(origin.waiting.get(lhs, _EMPTY))
                if origin.prediction.advanced(lhs):
                    chains.append((origin, self.chain(origin.prediction, lhs)))
        return EarleySet(waiting, self.prediction(frozenset(roots)), accepting)


def _native_closure(grammar: Grammar) -> Any:
    """The C closure over ``grammar``'s tables (``_earley.Closure``), or None where it is not
    built or ``FIMCONSTRAIN_ENGINE=python`` asks for the sources (:func:`.native.c_extension`)."""
    module = native.closure_extension()
    if module is None:
        return None
    return module.Closure(
        grammar.next_symbol, grammar.item_lhs, grammar.skip, len(grammar.symbol_names), grammar.n_terminals
    )
