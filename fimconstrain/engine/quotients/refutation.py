"""Whether a text can occur inside some program at all: an Earley parse that may begin anywhere.

A suffix that no middle can join must be reported up front, not discovered by a checker that
never completes. Any middle that the prefix allows can close what it opened and start afresh,
so a (prefix, suffix) pair is joinable exactly when the prefix is viable and the suffix ends
*some* program. This module refutes the second half for the suffix's head:

* the grammar's layout terminals (newlines, indents, dedents) are erased, so a valid program's
  symbols still parse: the test can only lose power, never reject what is valid;
* the parse starts from a *universal* set holding every item of the grammar, each waiting as if
  begun before the text: whatever came before, its items are among these;
* the cursor may split a symbol (a name, an operator), or stand inside a string or a comment,
  so the head is read from each place its first whole symbol may begin, and only when every
  reading dies is the head refuted;
* a reading that survives this is read once more with the real lexer and layout over the
  full grammar's universal set, from every layout the text could start in (brackets open as
  many as it closes unopened; the current line at any column its own lines use, with the
  columns below it open), which catches indentation that no program can have.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any, Generic, NamedTuple

from .. import lexer
from ..automata.earley import EarleySet, Item, Recognizer
from ..automata.grammar import Grammar
from ..automata.regex_dfa import DEAD
from ..layers.layer_protocol import Branch, Layer, LayoutT, LexicalLayer, Modes

#: how much of the head is read, without and with layout (the refutation stays sound; it
#: only looks less far)
WINDOW_CHARS = 2000
LAYOUT_WINDOW_CHARS = 500
#: past this many readings of where the head's first symbol begins, no verdict (cost bound)
MAX_READINGS = 48
#: how many transitions a :class:`ForgetfulRecognizer` remembers before starting afresh
MEMO_LIMIT = 200_000
_QUOTES = ("'''", '"""', "'", '"')
#: a line break and the indentation after it
_LINE_INDENT = re.compile(r"\n[ \t\f]*")


def lex(layer: LexicalLayer, text: str, start: int = 0) -> Iterator[tuple[int, int, int]]:
    """``(begin, end, terminal bitmask)`` of each lexeme of ``text`` from ``start`` by longest
    match, ignored ones included, in the lexing mode of what came before (f-strings read as
    PEP 701 tokenizes them); ends with ``(at, at, 0)`` where nothing lexes."""
    dfa = layer.dfa
    trans, final = dfa.trans, dfa.final
    deltas = layer.bracket_delta
    at, depth = start, 0
    modes: Modes = ()
    while at < len(text):
        state = layer.mode_start(modes, depth)
        end, accepted = at, DEAD  # the longest lexeme so far ends at ``end`` in ``accepted``
        for i in range(at, len(text)):
            ch = text[i]
            nxt = trans[state].get(ch)
            state = dfa.step(state, ch) if nxt is None else nxt
            if state == DEAD:
                break
            if final[state]:
                end, accepted = i + 1, state
        if end == at:
            yield at, at, 0
            return
        mask = layer.token_mask(accepted)
        yield at, end, mask
        depth += deltas.get(mask, 0)
        after = layer.next_modes(modes, mask, text[at:end], depth)
        if after is None:
            yield end, end, 0
            return
        modes, at = after, end


class InfixRecognizer(Generic[LayoutT]):
    """The layer's grammar with layout erased, parsed from the universal set."""

    def __init__(self, layer: Layer[LayoutT]) -> None:
        g = layer.grammar
        self.full_universal = _universal(layer.recognizer)
        erased = {g.symbol_id[name] for name in g.declared} | set(layer.terminal_ids(layer.newline_mask))
        rules: list[tuple[str, tuple[str, ...]]] = []
        for rule in range(1, len(g.rule_lhs)):  # rule 0 is the augmented start
            d, rhs = g.rule_first_item[rule], list[str]()
            while g.next_symbol[d] >= 0:
                if g.next_symbol[d] not in erased:
                    rhs.append(g.symbol_names[g.next_symbol[d]])
                d += 1
            rules.append((g.symbol_names[g.rule_lhs[rule]], tuple(rhs)))
        start = g.symbol_names[g.next_symbol[g.start_item]]
        self.grammar = Grammar(g.terminals, g.declared, rules, start)
        erased_recognizer = Recognizer(self.grammar)
        self.universal = _universal(erased_recognizer)
        self.recognizer = ForgetfulRecognizer(erased_recognizer, self.universal)
        self.layer = layer
        self.skipped = layer.ignore_mask | layer.newline_mask
        # the layer's own lexer and layout over a forgetful parse of the full grammar
        self.layout_layer = layer.with_recognizer(ForgetfulRecognizer(layer.recognizer, self.full_universal))

    def dies_at(self, text: str, start: int, end: int, must_end: bool) -> int | None:
        """Where reading ``text[start:end]`` from the universal set first fails (the offset of
        the symbol it cannot take, or of text that does not lex), or None if it never does.
        With ``must_end`` (``end`` is the end of the file) the text must also end a program."""
        state, recognizer, layer = self.universal, self.recognizer, self.layer
        for begin, stop, mask in lex(self.layer, text, start):
            if stop > end or (not mask and begin >= end):
                return None  # past the window: no verdict
            if not mask:
                return begin
            if mask & self.skipped:
                continue
            after = recognizer.scan(state, layer.terminal_ids(mask))
            if after is None:
                return begin
            state = after
        if must_end and state is not self.universal and not state.accepting:
            return end
        return None

    def layout_dies_at(self, text: str, start: int, end: int, must_end: bool) -> int | None:
        """Like :meth:`dies_at`, with the layer's own lexer and layout over the full grammar,
        from every layout ``text[start:]`` may begin in (None: some branch lives)."""
        layer = self.layout_layer
        piece = text[start:end]
        reading = read_brackets(self.layer, piece)
        # the middle may end in a backslash, making the piece's first line break a continuation
        after_backslash = (
            layer.dfa.run("\\", layer.dfa.start) if start == 0 and piece.startswith("\n") else DEAD
        )
        continued = read_brackets(self.layer, "\\" + piece) if after_backslash != DEAD else None
        branches: list[Branch[LayoutT]] = []
        # as many brackets open as the piece closes unopened, or more (closed after it)
        for depth in (-reading.lowest, 1 - reading.lowest):
            branches += [
                (self.full_universal, layout, layer.dfa.start, "", ())
                for layout in layer.open_layouts(reading.measured_lines(depth), depth)
            ]
            if continued is not None:
                branches += [
                    (self.full_universal, layout, after_backslash, "\\", ())
                    for layout in layer.open_layouts(continued.measured_lines(depth), depth)
                ]
        at = 0
        while at < len(piece):
            after = lexer.advance(layer, branches, piece[at : at + 64])
            if not after:
                for i, ch in enumerate(piece[at : at + 64]):  # where, to the character
                    branches = lexer.advance(layer, branches, ch)
                    if not branches:
                        return start + at + i
            branches, at = after, at + 64
        if must_end and not lexer.complete(layer, branches):
            return end
        return None


class BracketReading(NamedTuple):
    """One layout-free lexing of a text (:func:`read_brackets`): its bracket depths, counted
    from 0 before it, and its line breaks."""

    lowest: int  #: the lowest depth reached (the brackets it closes that it did not open, negated)
    depth: int  #: the depth where lexing stopped
    stopped: int | None  #: where the text stopped lexing (None: it lexed to its end)
    newlines: list[tuple[int, str]]  #: each newline lexeme, with the depth at it
    unlexed_lines: list[str]  #: line breaks and indentation past where lexing stopped

    def measured_lines(self, depth: int) -> list[str]:
        """The newline lexemes after which the tokenizer measures indentation: those at bracket
        depth 0, given ``depth`` brackets open before the text. Past text that does not lex,
        every line counts (more layouts: the refutation only weakens)."""
        return [lexeme for at, lexeme in self.newlines if at + depth <= 0] + self.unlexed_lines


def read_brackets(layer: LexicalLayer, text: str) -> BracketReading:
    """Read ``text`` with the layer's lexer (its modes, no layout) for its brackets and lines."""
    deltas, newline = layer.bracket_delta, layer.newline_mask
    depth = lowest = 0
    newlines: list[tuple[int, str]] = []
    for begin, stop, mask in lex(layer, text):
        if not mask:
            return BracketReading(lowest, depth, begin, newlines, _LINE_INDENT.findall(text, begin))
        depth += deltas.get(mask, 0)
        lowest = min(lowest, depth)
        if mask & newline:
            newlines.append((depth, text[begin:stop]))
    return BracketReading(lowest, depth, None, newlines, [])


class ForgetfulRecognizer(Recognizer):
    """A recognizer whose sets forget where their items began: after each scan every origin
    becomes the universal set, which holds every item and so accepts at least what the true
    origin would (a sound over-approximation for refuting). Sets then differ only in their
    dotted items, finitely many, so they are interned and transitions memoised: reading costs
    a dictionary lookup per symbol once a pattern repeats, linear in the text however long
    its lists are, where an exact parse from the universal set keeps one item per possible
    start (a statement may begin after any comma once layout is erased) and grows cubically.

    A new transition completes symbols at the universal set, which pushes every item of the
    grammar that waits for them; what that adds depends on the symbol alone, so it is closed
    once per symbol (:meth:`_completed_at_universal`) and merged from then on."""

    def __init__(self, recognizer: Recognizer, universal: EarleySet, c_closure: bool = True) -> None:
        """``c_closure``: close in C where it is built (False: the Python loop, the reference)."""
        super().__init__(recognizer.grammar, initial=universal, c_closure=c_closure)
        self._universal = universal
        #: (accepting, the forgotten items' keys: a frozenset, or sorted as bytes in C) -> its set
        self._interned: dict[tuple[bool, frozenset[int] | bytes], EarleySet] = {}
        self._scanned: dict[tuple[EarleySet, tuple[int, ...]], EarleySet | None] = {}
        #: symbol -> (the forgotten items completing it at the universal set adds, whether
        #: that completes a whole program)
        self._at_universal: dict[int, tuple[dict[int, None], bool]] = {}

    def scan(self, state: EarleySet, terminals: tuple[int, ...]) -> EarleySet | None:
        key = (state, terminals)  # sets compare by identity; the key keeps the set alive
        scanned, universal = self._scanned, self._universal
        # (the universal set, which no scan gives, says "not seen yet": one lookup, and no
        # KeyError caught, which in compiled code costs a traceback)
        known = scanned.get(key, universal)
        if known is not universal:
            return known
        closure = self._native_closure
        if closure is not None:
            # (accepting, the kept items' key, the kept items in the order met) or None
            found = closure.scan_forgetting(state, terminals, self._universal, self._completed_at_universal)
            after = None if found is None else self._intern(found[0], found[1], found[2])
        else:
            seeds: list[Item] = []
            waiting, prediction = state.waiting, state.prediction
            for t in terminals:
                seeds.extend(waiting.get(t, ()))
                for d in prediction.advanced(t):
                    seeds.append((d, state))
            after = self._close_forgetting(seeds) if seeds else None
        if len(scanned) > MEMO_LIMIT:
            scanned.clear()
            self._interned.clear()
        scanned[key] = after
        return after

    def _close_forgetting(self, seeds: list[Item]) -> EarleySet:
        """The exact closure of ``seeds`` (as :meth:`Recognizer.scan` builds it, in the loop of
        ``earley.Recognizer._close``, whose twin this is: a change to one belongs in the other,
        and in ``_earley.c``'s ``scan_forgetting``, its C twin), its origins then forgotten,
        interned. A forgotten item is keyed ``(dot) << 1 | (no origin)``."""
        g = self.grammar
        next_symbol, skip, item_lhs = g.next_symbol, g.skip, g.item_lhs
        universal = self._universal
        shift = self._id_bits
        seen: set[int] = set()
        done: set[int] = set()
        kept: dict[int, None] = {}  # forgotten items, in the order met
        accepting = False
        stack = seeds
        while stack:
            d0, origin = stack.pop()
            at = id(origin) << shift
            for d in skip[d0]:
                size = len(seen)
                seen.add(at | d)
                if len(seen) == size:  # seen before (one boxed key, hashed once)
                    continue
                if next_symbol[d] >= 0:
                    kept[(d + 1) << 1 | (origin is None)] = None
                    continue
                if origin is None:  # the augmented start rule is complete
                    accepting = True
                    continue
                lhs = item_lhs[d]
                size = len(done)
                done.add(at | lhs)
                if len(done) == size:
                    continue
                if origin is universal:
                    added, accepts = self._completed_at_universal(lhs)
                    kept.update(added)
                    accepting = accepting or accepts
                    continue
                stack.extend(origin.waiting.get(lhs, ()))
                for d2 in origin.prediction.advanced(lhs):
                    stack.append((d2, origin))
        return self._intern(accepting, frozenset(kept), kept)

    def _intern(
        self, accepting: bool, key: frozenset[int] | bytes, kept: dict[int, None] | bytes
    ) -> EarleySet:
        """The one set of the forgotten items ``kept`` (in the order met; ``key`` says which they
        are), accepting or not: its kernel made in C where ``kept`` comes from C (as bytes, see
        ``_earley.c``'s ``Closure.forgotten``), else as a dict."""
        interned = self._interned.get((accepting, key))
        if interned is None:
            closure = self._native_closure
            if isinstance(kept, bytes) and closure is not None:
                # (the set's Items, the nonterminals it waits for)
                made = closure.forgotten(kept, self._universal)
                interned = EarleySet(made[0], self.prediction(made[1]), accepting)
            else:
                next_symbol, universal = self.grammar.next_symbol, self._universal
                waiting: dict[int, list[Item]] = {}
                for k in kept:
                    dot = k >> 1
                    waiting.setdefault(next_symbol[dot - 1], []).append((dot, None if k & 1 else universal))
                roots = frozenset(sym for sym in waiting if sym >= self.grammar.n_terminals)
                interned = EarleySet(waiting, self.prediction(roots), accepting)
            self._interned[accepting, key] = interned
        return interned

    def _completed_at_universal(self, lhs: int) -> tuple[dict[int, None], bool]:
        """What completing ``lhs`` at the universal set adds (every item waiting for it there,
        closed, forgotten), and whether that completes a whole program; built once."""
        known = self._at_universal.get(lhs)
        if known is None:
            closed = self._close(list(self._universal.waiting.get(lhs, ())))
            added = {
                dot << 1 | (origin is None): None
                for items in closed.waiting.values()
                for dot, origin in items
            }
            known = self._at_universal[lhs] = (added, closed.accepting)
        return known


def _universal(recognizer: Recognizer) -> EarleySet:
    """The set holding every item of the recognizer's grammar, each begun before the text
    (its origin the set itself); the start rule's item has no origin: completing it means
    "a whole program". It is accepting: what came before may itself be a whole program, so a
    text that adds nothing but ignored symbols (a JSON suffix ``"\n"``) may end one."""
    g = recognizer.grammar
    universal = EarleySet({}, recognizer.prediction(frozenset()), True)
    waiting: dict[int, list[Item]] = {}
    for d, sym in enumerate(g.next_symbol):
        if sym >= 0:
            waiting.setdefault(sym, []).append((d + 1, None if d == g.start_item else universal))
    universal.waiting = waiting  # (its items begin at itself: the set exists before them)
    return universal


def infix_recognizer(layer: Layer[LayoutT]) -> InfixRecognizer[LayoutT]:
    """The infix recognizer of ``layer`` (built once per layer)."""
    return _infix_recognizer(layer)


@cache
def _infix_recognizer(layer: Layer[Any]) -> InfixRecognizer[Any]:
    return InfixRecognizer(layer)


def first_symbol_starts(layer: LexicalLayer, head: str, most: int = MAX_READINGS) -> list[int]:
    """Where the head's first whole symbol may begin, likeliest first: at the cursor; after the
    rest of a name or number, or of an operator, that the cursor split; at the end of the first
    line (the cursor inside a comment, which may run to the end of the file); after a closing
    quote (the cursor inside a string). Every quote counts (the first ``most`` of each kind),
    not only the first: nested strings (PEP 701 f-strings nest the same quotes to any depth)
    close before the one the cursor is in."""
    starts = [0]
    match = _WORD.match(head)  # (it matches the empty string: always a match)
    word = match.end() if match else 0
    if word:
        starts.append(word)
    starts += [len(tail) for tail in _literal_tails(layer) if head.startswith(tail)]
    if _has_comments(layer):
        line_end = head.find("\n")
        starts.append(len(head) if line_end < 0 else line_end)  # a comment ends there
    quotes: list[int] = []
    for quote in _QUOTES:  # the first ``most`` of each kind hold the first ``most`` of all
        found, at = 0, head.find(quote)
        while at >= 0 and found <= most:
            backslashes = len(head[:at]) - len(head[:at].rstrip("\\"))
            if backslashes % 2 == 0 or backslashes == at:  # an escaped quote closes nothing (unless
                # the cursor may have split the escape: only backslashes before it)
                quotes.append(at + len(quote))
                found += 1
            at = head.find(quote, at + 1)
    return list(dict.fromkeys(starts + sorted(quotes)))


#: the rest of a name or a number (with a signed exponent) that began before the cursor
_WORD = re.compile(
    r"[+-]?(?:[\w.]|(?<=[eE])[+-])*"
)  # a leading sign: an exponent's, the "e" before the cursor


@cache
def _has_comments(layer: LexicalLayer) -> bool:
    """Whether the language has ``#`` comments (a skipped symbol may start with ``#``)."""
    state = layer.dfa.run("#")
    return state != DEAD and bool(layer.dfa.live[state] & (layer.ignore_mask | layer.newline_mask))


@cache
def _literal_tails(layer: LexicalLayer) -> tuple[str, ...]:
    """Proper ends of the grammar's punctuation literals (``*`` of ``**``, ``=`` of ``//=``)."""
    tails: set[str] = set()
    for terminal in layer.grammar.terminals:
        literal = terminal.literal
        if literal and len(literal) > 1 and not literal[-1].isalnum():
            tails.update(literal[i:] for i in range(1, len(literal)))
    return tuple(sorted(tails))


def refuted_at(layer: Layer[LayoutT], suffix: str, head_end: int, ends_file: bool) -> int | None:
    """An offset in ``suffix[:head_end]`` (its head) where every reading of it dies (the
    likeliest reading's), when no program can contain it (or end with it, if it
    ``ends_file``); None when some reading survives the head's first ``WINDOW_CHARS``. A
    reading may begin after a quote anywhere in the suffix: a string may run past the head."""
    recognizer = infix_recognizer(layer)
    end = min(head_end, WINDOW_CHARS)
    must_end = ends_file and end == len(suffix)
    first = None
    starts = first_symbol_starts(layer, suffix)
    for start in starts[:MAX_READINGS]:
        if start >= end:
            return None  # a reading that begins beyond the window (a long string): no verdict
        dead = recognizer.dies_at(suffix, start, end, must_end)
        if dead is None:
            layout_end = min(end, start + LAYOUT_WINDOW_CHARS)
            dead = recognizer.layout_dies_at(
                suffix, start, layout_end, must_end and layout_end == len(suffix)
            )
        if dead is None:
            return None
        first = dead if first is None else first
    return first if len(starts) <= MAX_READINGS else None  # readings left untried: no verdict
