"""Bridging a middle to its suffix: text after a closing (:mod:`~.closing`) that the suffix
goes on from, when a closing alone does not complete the file.

In order: one more symbol, character or block header after a closing; the start of a
construct the suffix's head goes on with (``def f(`` before ``) -> int:``), from the
cheapest left contexts of the grammar items that can read the head's first symbols; one more
symbol and the opener of a string or comment that the suffix's first line closes. Every
bridge is verified by feeding it. Part of the budget finish (paper 002); language-neutral:
what a language writes beyond its terminals comes from its layer's
:class:`~.layer_protocol.FinishVocabulary`.
"""

from __future__ import annotations

import heapq
import itertools
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import cache

from ..automata.earley import EarleySet
from ..layers.layer_protocol import FinishVocabulary, LayoutT, LexicalLayer, ParseState
from ..quotients.refutation import lex
from .closing import ClosingPlanner, closing_planner

#: how many of the cheapest left contexts of each grammar item bridges may start from
_CONTEXTS_PER_ITEM = 6
#: how many terminals a connector between nested brackets may have
_CONNECTOR_DEPTH = 3
#: closing bracket -> opening bracket
_CLOSES = {")": "(", "]": "[", "}": "{"}
#: characters that open or extend a symbol the suffix may close (a string, a comment, a name)
_CHARACTERS = [chr(c) for c in range(33, 127)]


class BridgePlanner:
    """Where a bridge can start: the cheapest left contexts of grammar items (the terminals
    that reach them from the start of a file), by the terminals that may follow them."""

    def __init__(self, closing: ClosingPlanner) -> None:
        self.closing = closing
        self.layer = layer = closing.layer
        self.grammar = g = closing.grammar
        vocabulary = layer.finish_vocabulary
        self._openers: dict[tuple[int, bool], list[tuple[int, ...]]] = {}
        #: (:meth:`_first_after`, :meth:`_left_contexts`), worked out once (:meth:`prepare`)
        self._contexts: tuple[list[int], dict[int, list[tuple[int, ...]]]] | None = None
        self._states_after: dict[tuple[int, ...], EarleySet | None] = {(): layer.recognizer.initial}
        literal = {i: t.literal for i, t in enumerate(g.terminals)}
        self.bracket_terminal = {text: i for i, text in literal.items() if text in _CLOSES.values()}
        self.bracket_or_operator = {i for i, text in literal.items() if text in vocabulary.context_noise}
        self.connector_terminals = [
            i
            for i, t in enumerate(g.terminals)
            if (t.literal or t.name) in vocabulary.connector_symbols and i in closing.spelling
        ]

    def prepare(self) -> tuple[list[int], dict[int, list[tuple[int, ...]]]]:
        """The grammar-wide tables, worked out on the first call (:meth:`_first_after`,
        :meth:`_left_contexts`: about 0.1 s compiled for Python): a server calls it at load, so
        that no search, whose time limit cannot cut it short, pays for it. (Kept by hand:
        mypyc's classes have no ``__dict__`` for ``functools.cached_property`` to cache in,
        which then worked them out again at every new opener.)"""
        if self._contexts is None:
            self._contexts = (self._first_after(), self._left_contexts())
        return self._contexts

    def _first_after(self) -> list[int]:
        """For each item, the terminals (bitmask) its remaining symbols can begin with."""
        g = self.grammar
        first = {sym: 1 << sym for sym in range(g.n_terminals)}
        changed = True
        while changed:
            changed = False
            for rule, lhs in enumerate(g.rule_lhs):
                d, mask = g.rule_first_item[rule], 0
                while (sym := g.next_symbol[d]) >= 0:
                    mask |= first.get(sym, 0)
                    if sym not in g.nullable:
                        break
                    d += 1
                if mask | first.get(lhs, 0) != first.get(lhs, 0):
                    first[lhs] = mask | first.get(lhs, 0)
                    changed = True
        out = [0] * len(g.next_symbol)
        for d in range(len(g.next_symbol) - 1, -1, -1):
            sym = g.next_symbol[d]
            if sym >= 0:
                out[d] = first.get(sym, 0) | (out[d + 1] if sym in g.nullable else 0)
        return out

    def _left_contexts(self) -> dict[int, list[tuple[int, ...]]]:
        """For each item reachable from the start, the terminals of the few cheapest texts
        that reach it from the beginning of a file: where a bridge to a suffix can start.
        (Several, because an item shared by many rules, like a block's body, is reached
        cheapest through one of them and the suffix may need another.)"""
        g, cost = self.grammar, self.closing.cost
        found: dict[int, list[tuple[int, ...]]] = {}  # item -> symbols consumed on the way (distinct)
        frontier: list[tuple[float, int, int, tuple[int, ...]]] = [(0.0, 0, g.start_item, ())]
        count = 1
        while frontier:
            c, _, d, consumed = heapq.heappop(frontier)
            known = found.setdefault(d, [])
            if len(known) == _CONTEXTS_PER_ITEM or consumed in known:
                continue
            known.append(consumed)
            nxt = g.next_symbol[d]
            if nxt < 0 or nxt not in cost:
                continue
            heapq.heappush(frontier, (c + cost[nxt], count, d + 1, consumed + (nxt,)))
            count += 1
            for rule in g.rules_of.get(nxt, ()):
                heapq.heappush(frontier, (c, count, g.rule_first_item[rule], consumed))
                count += 1
        contexts: dict[int, list[tuple[int, ...]]] = {}
        for d, sequences in found.items():
            expanded: list[tuple[int, ...]] = []
            contexts[d] = expanded
            for consumed in sequences:
                context = tuple(self.closing.expand(consumed))
                if context not in expanded:
                    expanded.append(context)
        return contexts

    def openers(self, first_mask: int, ends_line: bool) -> list[tuple[int, ...]]:
        """Cheapest left contexts of the items that can go on with a terminal in ``first_mask``,
        shortest first, each once: those that end with a layout terminal (a line break, an
        indentation) or those that do not."""
        key = (first_mask, ends_line)
        found = self._openers.get(key)
        if found is None:
            first_after, left_contexts = self.prepare()
            cost, layout = self.closing.cost, self.closing.layout_terminals
            distinct = {
                ctx
                for d, ctxs in left_contexts.items()
                if first_after[d] & first_mask
                for ctx in ctxs
                if (bool(ctx) and ctx[-1] in layout) == ends_line
            }
            found = self._openers[key] = sorted(distinct, key=lambda ctx: (sum(cost[t] for t in ctx), ctx))
        return found

    def plain_context(self, terminals: tuple[int, ...]) -> bool:
        """Whether a left context starts on its first line and uses no bracket, operator or
        separator: the contexts that differ in what may follow a bracket opened after them
        (``def A``, ``if``, ``A =``, ``try: A\\nexcept``)."""
        return not (terminals and terminals[0] in self.closing.layout_terminals) and not any(
            t in self.bracket_or_operator for t in terminals
        )

    def state_after(self, terminals: tuple[int, ...]) -> EarleySet | None:
        """The recognizer's state after ``terminals`` from the start of a file (memoised), or None."""
        states = self._states_after
        if terminals not in states:
            before = self.state_after(terminals[:-1])
            states[terminals] = None if before is None else self.layer.recognizer.scan(before, terminals[-1:])
        return states[terminals]


@cache
def bridge_planner(layer: LexicalLayer) -> BridgePlanner:
    """The layer's :class:`BridgePlanner` (built once per layer)."""
    return BridgePlanner(closing_planner(layer))


class TimedSearch:
    """Candidate checks under an optional time limit."""

    def __init__(self, seconds: float | None) -> None:
        self.until = None if seconds is None else time.monotonic() + seconds

    def expired(self) -> bool:
        """Whether the time limit (if any) has passed."""
        return self.until is not None and time.monotonic() > self.until

    def first_complete(self, base: ParseState[LayoutT], texts: Iterable[str]) -> str | None:
        """The first text of ``texts`` that completes ``base``, or None (also when time is up)."""
        for text in texts:
            if self.expired():
                return None
            after = base.feed(text)
            if after is not None and after.is_complete():
                return text
        return None


def bridge_to_suffix(
    checker: ParseState[LayoutT], closings: list[str], suffix_head: str, search: TimedSearch
) -> str | None:
    """A short text that completes ``checker`` (suffix included) where none of ``closings``
    (the closing candidates, shortest first) does alone: after the shortest closings that
    feed, one more symbol, character or block header; then the start of a construct the
    suffix's head goes on with (``def f(`` before ``) -> int:``) on a new line at each column
    the layout knows; then one more symbol followed by an opener of a string the suffix may
    close. None when none is found (in time)."""
    bases = [(text, base) for text in closings if (base := checker.feed(text)) is not None]
    best: str | None = None
    for text, base in bases:
        if (best is not None and len(text) >= len(best)) or search.expired():
            break
        joiners = [glue + j for j in _joiners(base) for glue in ("", " ")] + _header_joiners(base)
        tail = search.first_complete(base, sorted(joiners, key=len))
        if tail is not None and (best is None or len(text + tail) < len(best)):
            best = text + tail
    if best is not None:
        return best
    found = _bridge(bases[:8], suffix_head, search)
    if found is not None:
        return found
    openers = _string_openers(checker.layer.finish_vocabulary, suffix_head)
    for text, base in bases[:16]:
        for symbol in _joiners(base)[:64]:
            middle = base.feed(" " + symbol)
            if middle is None:
                continue
            tail = search.first_complete(middle, [glue + o for o in openers for glue in (" ", "")])
            if tail is not None:
                return text + " " + symbol + tail
            if search.expired():
                return None
    return None


def _joiners(checker: ParseState[LayoutT]) -> list[str]:
    """Single symbols the parser could take next, spelled, and single characters (and long
    string quotes, and a line break) that may open a symbol the suffix closes: bridges
    toward a suffix."""
    layer = checker.layer
    spelling = closing_planner(layer).spelling
    mask = 0
    for parser, layout, *_ in checker.branches:
        mask |= layer.allowed(parser, layout)
    out = []
    for sym, text in spelling.items():
        if text and mask >> sym & 1:
            out.append(text)
    long_quotes = [quote for quote in layer.finish_vocabulary.quotes if len(quote) > 1]
    return list(dict.fromkeys(out + _CHARACTERS + long_quotes + ["\n"]))


def _string_openers(vocabulary: FinishVocabulary, suffix: str) -> list[str]:
    """Openers of the strings the suffix's start could be closing (``'``, ``b"``, ``'''`` ...),
    and a comment opener (a comment can swallow the rest of the suffix's first line)."""
    out = [vocabulary.line_comment] if vocabulary.line_comment else []
    start = suffix[:200]
    for quote in vocabulary.quotes:
        if len(quote) == 1 and quote in start:
            for opener in sorted((q for q in vocabulary.quotes if q[0] == quote), key=len):
                out += [prefix + opener for prefix in vocabulary.string_prefixes]
    return out


def _header_joiners(checker: ParseState[LayoutT]) -> list[str]:
    """A block header on a new line at each column the layout knows: a suffix that starts
    with an indented block needs a header to hang from."""
    vocabulary = checker.layer.finish_vocabulary
    if not vocabulary.block_header:
        return []
    columns = {0}
    for _, layout, *_ in checker.branches:
        stack = checker.layer.indent_columns(layout)
        columns.update(stack)
        columns.add((stack[-1] if stack else 0) + len(vocabulary.indent_unit))
    return ["\n" + " " * col + vocabulary.block_header for col in sorted(columns)]


def _head_starts(
    layer: LexicalLayer, head: str, in_brackets: bool
) -> list[tuple[tuple[str, ...], list[int]]]:
    """How a bridge can meet the head: ``(texts that may end the bridge, terminal bitmasks
    the grammar reads next)``. Either the head starts with its own symbols (the bridge ends
    with nothing or a space), or inside a comment or a string the bridge opens (with a
    quote the head closes). ``in_brackets``: line breaks do not end the head's first line."""
    vocabulary = layer.finish_vocabulary
    comment = vocabulary.line_comment
    text = head.lstrip(" \t")
    starts: list[tuple[tuple[str, ...], list[int]]]
    if not text or text[0] in "\n\\" or (comment and text.startswith(comment)):
        starts = [(("",), [])]  # a line break, an escape or a continuation, a comment
    else:
        # inside brackets the head's symbols tell more about the opener (a parameter list)
        symbols = _line_terminals(layer, text, limit=24 if in_brackets else 8, across_lines=in_brackets)
        starts = [(("", " "), symbols)]
        if comment:  # the head's first line may end a comment the bridge opens
            starts.append(((comment, " " + comment), []))
    string = layer.string_mask
    for quote in vocabulary.quotes:
        at = head.find(quote)
        if not string or at < 0 or (len(quote) == 1 and "\n" in head[:at]):
            continue
        after = [string] + _line_terminals(layer, head[at + len(quote) :], limit=7)
        starts.append((tuple(prefix + quote for prefix in vocabulary.string_prefixes), after))
    return starts


def _lex(layer: LexicalLayer, text: str) -> Iterator[tuple[int, str]]:
    """``(terminal bitmask, lexeme)`` of the symbols of ``text`` by longest match, layout and
    ignored symbols left out, up to the first text that does not lex."""
    for begin, end, mask in lex(layer, text):
        if not mask:
            return
        if not mask & layer.ignore_mask:
            yield mask, text[begin:end]


def _line_terminals(layer: LexicalLayer, text: str, limit: int = 8, across_lines: bool = False) -> list[int]:
    """The symbols of the first logical line of ``text`` (a string may span lines) as terminal
    bitmasks, up to ``limit``; with ``across_lines`` (inside brackets) its line breaks are
    kept too, for :func:`_before_unopened_closer` to pass over while the brackets are open."""
    out = []
    for mask, _ in _lex(layer, text):
        if mask & layer.newline_mask and not across_lines:
            break
        out.append(mask)
        if len(out) == limit:
            break
    return out


def _unmatched_closers(layer: LexicalLayer, head: str, window: int = 20_000) -> list[str]:
    """Brackets the head closes that it did not open, innermost first: the bridge must open
    them. A head that begins inside a string is read from its closing quote."""
    text = head[:window]
    first_line = len(text.split("\n", 1)[0])
    symbols = list(lex(layer, text))
    if any(not mask and begin < first_line for begin, _, mask in symbols):
        # the first line does not lex: a string the bridge opens ends in it
        quote = min((i for q in layer.finish_vocabulary.quotes if (i := text.find(q)) >= 0), default=-1)
        symbols = list(lex(layer, text, quote + 1)) if quote >= 0 else symbols
    stack: list[str] = []
    closers: list[str] = []
    for begin, end, mask in symbols:
        lexeme = text[begin:end]
        if not mask:  # where the text stops lexing
            break
        if lexeme in "([{":
            stack.append(lexeme)
        elif lexeme in _CLOSES:
            if stack:
                stack.pop()
            else:
                closers.append(lexeme)
    return closers


def _open_brackets(planner: BridgePlanner, terminals: tuple[int, ...]) -> str | None:
    """The brackets ``terminals`` leave open, innermost first (None if they close one they
    did not open)."""
    stack = []
    grammar_terminals = planner.grammar.terminals
    for sym in terminals:
        literal = grammar_terminals[sym].literal if sym < len(grammar_terminals) else None
        if literal in ("(", "[", "{"):
            stack.append(literal)
        elif literal in _CLOSES and (not stack or stack.pop() != _CLOSES[literal]):
            return None
    return "".join(reversed(stack))


def _before_unopened_closer(layer: LexicalLayer, terminals: list[int], owned: int) -> list[int]:
    """``terminals`` up to the first that closes a bracket neither they nor the ``owned``
    brackets open before them opened (one a wrapper opens, which the check leaves out), or
    to a line break outside brackets; line breaks inside brackets left out."""
    deltas, depth, out = layer.bracket_delta, owned, []
    for mask in terminals:
        if mask & layer.newline_mask:
            if depth <= 0:
                break
            continue
        depth += deltas.get(mask, 0)
        if depth < 0:
            break
        out.append(mask)
    return out


def _wrapped_openers(
    planner: BridgePlanner, openers: Iterable[tuple[int, ...]], terminals: list[int], closers: list[str]
) -> Iterator[tuple[str, tuple[int, ...], int]]:
    """``(wrapper, opener, number of its own brackets)``, lazily, for each opener whose own
    open brackets are the first ones the head closes, and after which the grammar (layout
    aside) reads ``terminals`` as far as those brackets reach; the wrapper opens the rest
    (openers that would need a wrapper the language has not are left out)."""
    layer = planner.layer
    wrappers = layer.finish_vocabulary.bracket_wrappers
    recognizer = layer.recognizer
    for opener in openers:
        own = _open_brackets(planner, opener)
        if own is None or len(own) > len(closers) or any(_CLOSES[c] != o for c, o in zip(closers, own)):
            continue
        rest = closers[len(own) :]
        if any(c not in wrappers for c in rest):
            continue
        state = planner.state_after(opener)
        for mask in _before_unopened_closer(layer, terminals, len(own)):
            if state is None:
                break
            state = recognizer.scan(state, layer.terminal_ids(mask))
        if state is not None:
            yield "".join(wrappers[c] for c in reversed(rest)), opener, len(own)


def _connectors(planner: BridgePlanner, state: EarleySet, goal: int, limit: int = 3) -> list[tuple[int, ...]]:
    """Up to ``limit`` shortest terminal sequences (at most :data:`_CONNECTOR_DEPTH` of the
    connector terminals) after which ``state`` can read the grammar terminal ``goal``."""
    recognizer, alphabet = planner.layer.recognizer, planner.connector_terminals
    found: list[tuple[int, ...]] = []
    frontier: list[tuple[tuple[int, ...], EarleySet]] = [((), state)]
    for depth in range(_CONNECTOR_DEPTH + 1):
        deeper: list[tuple[tuple[int, ...], EarleySet]] = []
        for sequence, current in frontier:
            expected = recognizer.expected_terminals(current)
            if expected >> goal & 1:
                found.append(sequence)
                if len(found) == limit:
                    return found
            if depth == _CONNECTOR_DEPTH:
                continue
            for sym in alphabet:
                if expected >> sym & 1 and (after := recognizer.scan(current, (sym,))) is not None:
                    deeper.append((sequence + (sym,), after))
        frontier = deeper
    return found


def _nested_openers(
    planner: BridgePlanner, closers: list[str], first: int, limit: int = 96
) -> Iterator[tuple[int, ...]]:
    """Openers that open every bracket the head closes, nested: the cheapest left contexts
    of a place where the outermost bracket may open (``def A``, ``if``, ``except``, ``A``),
    that bracket, then for each inner one a short connector and the bracket (``A: A[``),
    then a connector to the head's first symbol (``A`` before ``, int]``). The single
    left contexts of the inner places are too common to reach a parameter list or a header."""
    layer, bracket = planner.layer, planner.bracket_terminal
    opened = [bracket[_CLOSES[c]] for c in reversed(closers)]  # outermost first
    firsts = layer.terminal_ids(first) if first else ()
    contexts = (ctx for ctx in planner.openers(1 << opened[0], False) if planner.plain_context(ctx))
    for context in itertools.islice(contexts, limit):
        partial = [context + (opened[0],)]
        for inner in opened[1:] + [None]:
            grown = []
            for terminals in partial:
                state = planner.state_after(terminals)
                if state is None:
                    continue
                goals = [inner] if inner is not None else firsts
                for goal in goals:
                    for connector in _connectors(planner, state, goal):
                        grown.append(terminals + connector + ((inner,) if inner is not None else ()))
            partial = grown
        yield from partial


def _spell_opener(planner: BridgePlanner, terminals: tuple[int, ...], column: int, wrapper: str = "") -> str:
    """``terminals`` spelled as text that starts at ``column`` of a fresh line, with
    ``wrapper`` (brackets the head closes) where the head will go on."""
    layer, closing = planner.layer, planner.closing
    pieces: list[str] = []
    line_start = False
    if wrapper and not (terminals and terminals[-1] in closing.layout_terminals):
        pieces.append(wrapper)
    for sym in terminals:
        if sym == layer.newline:
            pieces.append("\n")
            line_start = True
        elif sym in layer.indent:
            column += closing.indent_width
        elif sym in layer.dedent:
            column -= closing.indent_width
        else:
            pieces.append(" " * column if line_start else " " if pieces else "")
            pieces.append(closing.spelling[sym])
            line_start = False
    if wrapper and line_start:
        pieces.append(" " * column + wrapper)
    return "".join(pieces)


_INDENTATION = re.compile(r"\n[ \t]+")


def _column_hint(vocabulary: FinishVocabulary, head: str) -> int:
    """The column the line a bridge ends on most likely has: that of the head's next code
    line, one level less when the head's first line opens a block."""
    comment, opener = vocabulary.line_comment, vocabulary.block_opener
    first, _, rest = head.partition("\n")
    code_of_first = first.split(comment, 1)[0] if comment else first
    opens_block = bool(opener) and code_of_first.rstrip().endswith(opener)
    for line in rest.split("\n"):
        code = line.lstrip(" ")
        if code and not (comment and code.startswith(comment)):
            column = len(line) - len(code)
            return max(0, column - len(vocabulary.indent_unit)) if opens_block else column
    return 0


def _bridge(
    bases: list[tuple[str, ParseState[LayoutT]]], head: str, search: TimedSearch, limit: int = 48
) -> str | None:
    """The shortest verified ``base text + bridge`` where the bridge begins a construct the
    suffix's head goes on with: the cheapest left context of every grammar item that can be
    followed by the head's first symbol, on the same line, on a new line at each column the
    layout knows or one deeper (under a block header), inside the brackets the head closes,
    before the head's first symbol or a string it closes."""
    if not bases:
        return None
    layer = bases[0][1].layer
    vocabulary = layer.finish_vocabulary
    planner = bridge_planner(layer)
    closers = _unmatched_closers(layer, head)
    head_column = len(head) - len(head.lstrip(" "))
    column_hint = _column_hint(vocabulary, head)
    openers = []  # (text before the opener, opener, text after it), cheapest first per kind
    for ends, terminals in _head_starts(layer, head, bool(closers)):
        first = terminals[0] if terminals else layer.newline_mask
        # openers that end a line (before an indented head), and openers whose own brackets the
        # head closes (checked further), are taken apart: the many cheaper ones must not crowd
        # them out
        for ends_line in (False, True):
            taken: Counter[bool] = Counter()
            for wrapper, opener, owned in _wrapped_openers(
                planner, planner.openers(first, ends_line), terminals, closers
            ):
                kind = owned > 0
                if taken[kind] < limit:
                    taken[kind] += 1
                    openers += [(wrapper, opener, end) for end in ends]
                elif taken[not kind] >= limit or not closers:  # both kinds full, or only one
                    break
        if closers:  # every bracket opened by the opener itself, nested (``def A(A: A[A``)
            nested = _nested_openers(planner, closers, first)
            for _, opener, _ in itertools.islice(
                _wrapped_openers(planner, nested, terminals, closers), 2 * limit
            ):
                openers += [("", opener, end) for end in ends]
    unit, header = vocabulary.indent_unit, vocabulary.block_header
    candidates = []
    for text, base in bases:
        columns = {0}
        for _, layout, *_ in base.branches:
            columns.update(layer.indent_columns(layout))
        # on the same line; on a new line at each column the layout knows, or one deeper (after
        # a block header); deeper ones each under a header of its own (the levels a head that
        # starts indented dedents to must be open)
        starts = [("", 0), (" ", 0)] + [("\n" + " " * col, col) for col in sorted(columns)]
        if unit:
            deeper = max(columns) + len(unit)
            starts.append(("\n" + " " * deeper, deeper))
        if unit and header:
            ladder, col = "\n", max(columns)
            while col == max(columns) or col + len(unit) < head_column:
                ladder += " " * col + header + "\n"
                col += len(unit)
                starts.append((ladder + " " * col, col))
        for lead, col in starts:
            for wrapper, opener, end in openers:
                bridge = lead + _spell_opener(planner, opener, col, wrapper) + end
                # shortest first, indentation not counted, the column the head suggests first
                cost = len(text) + len(_INDENTATION.sub("\n", bridge))
                candidates.append((cost, abs(col - column_hint), text, bridge, base))
    candidates.sort(key=lambda c: c[:2])
    for *_, text, bridge, base in candidates:
        if search.expired():
            return None
        after = base.feed(bridge)
        if after is not None and after.is_complete():
            return text + bridge
    return None
