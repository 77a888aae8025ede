"""Short ways to finish: text that turns a checker's middle into a complete program.

Generation under a token budget (paper 002) needs to know how to end well when the budget
runs out. From the parser state we find the cheapest way to close every open rule (a
shortest-path search over the Earley items and their origins, with each symbol weighted by
the length of its shortest yield), spell it with short lexemes, and keep the candidates that
the exact checker confirms. With a suffix, every point of that plan is tried as the end of the
middle, since the suffix usually closes what the middle opened.
"""

from __future__ import annotations

import heapq
import itertools
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import cache, cached_property

from .earley import EarleySet
from .layer_protocol import Branch, Layer, LayoutT, LexicalLayer, ParseState
from .refutation import lex
from .regex_dfa import DEAD

#: what declared layout terminals cost, in characters of text
_LAYOUT_COST = {"_NEWLINE": 1, "_INDENT": 4, "_DEDENT": 0}
_INDENT_UNIT = "    "
#: how many of the cheapest left contexts of each grammar item bridges may start from
_CONTEXTS_PER_ITEM = 6


class Planner:
    """Shortest yields of a grammar's symbols, and cheapest closings of Earley states."""

    def __init__(self, layer: LexicalLayer) -> None:
        self.layer = layer
        g = layer.grammar
        self.grammar = g
        dfa = layer.dfa
        self.spelling: dict[int, str] = {}
        cost: dict[int, float] = {}
        for i, terminal in enumerate(g.terminals):
            text = (
                terminal.literal
                if terminal.literal is not None
                else dfa.shortest_completion(layer.every_terminal_start, 1 << i)
            )
            if text is not None and not terminal.ignored:
                self.spelling[i] = text
                cost[i] = len(text) + 1
        for name in g.declared:
            sym = g.symbol_id[name]
            self.spelling[sym] = ""
            cost[sym] = _LAYOUT_COST.get(name, 1)
        self.rule_of: dict[int, int] = {}
        self._openers: dict[tuple[int, bool], list[tuple[int, ...]]] = {}
        self.layout_terminals = {g.symbol_id[name] for name in g.declared} | set(
            layer.terminal_ids(layer.newline_mask)
        )
        self._states_after: dict[tuple[int, ...], EarleySet | None] = {(): layer.recognizer.initial}
        literal = {i: t.literal for i, t in enumerate(g.terminals)}
        self.bracket_terminal = {text: i for i, text in literal.items() if text in ("(", "[", "{")}
        self.bracket_or_operator = {i for i, text in literal.items() if text in _NOISE}
        self.connector_terminals = [
            i
            for i, t in enumerate(g.terminals)
            if (t.literal or t.name) in _CONNECTOR_SYMBOLS and i in self.spelling
        ]
        self._fix_nonterminals(cost)
        self.cost = cost
        inf = float("inf")
        self.rest = [0.0] * len(g.next_symbol)
        for d in range(len(g.next_symbol) - 1, -1, -1):
            sym = g.next_symbol[d]
            self.rest[d] = 0.0 if sym < 0 else cost.get(sym, inf) + self.rest[d + 1]

    def _fix_nonterminals(self, cost: dict[int, float]) -> None:
        g = self.grammar
        changed = True
        while changed:
            changed = False
            for rule, lhs in enumerate(g.rule_lhs):
                d, total = g.rule_first_item[rule], 0.0
                while g.next_symbol[d] >= 0:
                    total += cost.get(g.next_symbol[d], float("inf"))
                    d += 1
                if total < cost.get(lhs, float("inf")):
                    cost[lhs] = total
                    self.rule_of[lhs] = rule
                    changed = True

    @cached_property
    def first_after(self) -> list[int]:
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

    @cached_property
    def left_contexts(self) -> dict[int, list[tuple[int, ...]]]:
        """For each item reachable from the start, the terminals of the few cheapest texts
        that reach it from the beginning of a file: where a bridge to a suffix can start.
        (Several, because an item shared by many rules, like a block's body, is reached
        cheapest through one of them and the suffix may need another.)"""
        g, cost = self.grammar, self.cost
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
                context = tuple(self.expand(consumed))
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
            first_after, cost, layout = self.first_after, self.cost, self.layout_terminals
            distinct = {
                ctx
                for d, ctxs in self.left_contexts.items()
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
        return not (terminals and terminals[0] in self.layout_terminals) and not any(
            t in self.bracket_or_operator for t in terminals
        )

    def state_after(self, terminals: tuple[int, ...]) -> EarleySet | None:
        """The recognizer's state after ``terminals`` from the start of a file (memoised), or None."""
        states = self._states_after
        if terminals not in states:
            before = self.state_after(terminals[:-1])
            states[terminals] = None if before is None else self.layer.recognizer.scan(before, terminals[-1:])
        return states[terminals]

    def closing_items(self, state: EarleySet) -> list[int] | None:
        """The items (dot positions) whose remaining symbols, in order, close ``state`` most
        cheaply: innermost first, up to the start rule (none if the state is complete and has
        nothing open). None if the state cannot be closed."""
        item_lhs, rest = self.grammar.item_lhs, self.rest
        # (cost, tie-break, origin set, nonterminal completed there, items on the way)
        frontier: list[tuple[float, int, EarleySet | None, int, _Path]] = []
        count = 0
        for items in state.waiting.values():
            for d_next, origin in items:
                d = d_next - 1
                heapq.heappush(frontier, (rest[d], count, origin, item_lhs[d], (d, None)))
                count += 1
        seen: set[tuple[int, int]] = set()
        while frontier:
            c, _, origin, lhs, path = heapq.heappop(frontier)
            if origin is None:
                return _unwind(path)
            key = (id(origin), lhs)
            if key in seen:
                continue
            seen.add(key)
            for d_next, parent_origin in origin.waiting.get(lhs, ()):
                heapq.heappush(
                    frontier, (c + rest[d_next], count, parent_origin, item_lhs[d_next], (d_next, path))
                )
                count += 1
            for d_next in origin.prediction.advance.get(lhs, ()):
                heapq.heappush(frontier, (c + rest[d_next], count, origin, item_lhs[d_next], (d_next, path)))
                count += 1
        # nothing left open: a state that already ends a whole text (JSON after its one value)
        return [] if state.accepting else None

    def terminals(self, items: list[int]) -> list[int]:
        """The terminals of the cheapest yield of each item's remaining symbols, in order."""
        g = self.grammar
        symbols: list[int] = []
        for d in items:
            while g.next_symbol[d] >= 0:
                symbols.append(g.next_symbol[d])
                d += 1
        return self.expand(symbols)

    def expand(self, symbols: Iterable[int]) -> list[int]:
        """The terminals of the cheapest yield of ``symbols``, in order."""
        g = self.grammar
        out: list[int] = []
        stack = list(symbols)[::-1]
        while stack:
            sym = stack.pop()
            if g.is_terminal(sym):
                out.append(sym)
                continue
            d = g.rule_first_item[self.rule_of[sym]]
            expansion: list[int] = []
            while g.next_symbol[d] >= 0:
                expansion.append(g.next_symbol[d])
                d += 1
            stack.extend(reversed(expansion))
        return out


#: a chain of items, the last one first: ``(item, the chain before it)``
_Path = tuple[int, "_Path"] | None


def _unwind(path: _Path) -> list[int]:
    items = []
    while path is not None:
        d, path = path
        items.append(d)
    items.reverse()
    return items


@cache
def planner_for(layer: LexicalLayer) -> Planner:
    return Planner(layer)


def _finish_lexeme(layer: Layer[LayoutT], branch: Branch[LayoutT]) -> list[tuple[str, EarleySet, LayoutT]]:
    """Ways to end the symbol in progress cheaply: (added text, parser, layout) each. An
    indentation being typed may be padded to any column the parser could want next."""
    parser, layout, state, lexeme, _ = branch
    dfa = layer.dfa
    allowed = layer.allowed(parser, layout)
    newline_mask = layer.newline_mask
    last_line = lexeme[lexeme.rfind("\n") + 1 :]
    in_newline = layer.token_mask(state) & newline_mask
    if in_newline and ("#" in last_line or ("\n" in lexeme and not last_line.strip())):
        # a comment ends at the end of its line; a line's indentation may be padded to any
        # column the parser could want next, or the line left blank
        column = 0 if "#" in last_line else len(last_line.expandtabs(8))
        columns = layer.indent_columns(layout)
        targets = sorted(set(columns) | {0, (columns[-1] if columns else 0) + len(_INDENT_UNIT)})
        additions = ["\n" + " " * t for t in targets]
        if "#" not in last_line:
            additions += [" " * (t - column) for t in sorted(set(targets) | {column}) if t >= column]
    elif layer.token_mask(state) & allowed:
        additions = [""]
    else:
        completion = dfa.shortest_completion(state, allowed)
        if completion == "":  # a hard keyword, allowed only as the name it begins
            completion = dfa.shortest_completion(dfa.run("_", state), allowed)
            completion = None if completion is None else "_" + completion
        additions = [] if completion is None else [completion]
    options = _ended(layer, branch, additions)
    if not options and not in_newline:
        # the lexeme's shape is complete but its content is not (an f-string's open
        # replacement field, an escape short of digits): repair, then complete
        for repair in _REPAIRS:
            repaired = dfa.run(repair, state)
            completion = None if repaired == DEAD else dfa.shortest_completion(repaired, allowed)
            options = [] if completion is None else _ended(layer, branch, [repair + completion])
            if options:
                break
    return options


#: text that may make a lexeme's content valid before it is closed
_REPAIRS = ("}", ")}", "]}", "0", "00", "0000", "00000000")


def _ended(
    layer: Layer[LayoutT], branch: Branch[LayoutT], additions: list[str]
) -> list[tuple[str, EarleySet, LayoutT]]:
    """``(added text, parser, layout)`` for each addition that ends the branch's lexeme."""
    parser, layout, state, lexeme, _ = branch
    options = []
    for added in additions:
        end = layer.dfa.run(added, state)
        if end == DEAD:
            continue
        ended = layer.end_symbol(parser, layout, end, lexeme + added)
        if ended is not None:
            after, layout_after = ended
            options.append((added, after, layout_after))
    return options


def _spell(
    planner: Planner, layer: Layer[LayoutT], terminals: list[int], layout: LayoutT, lead: str, spaced: bool
) -> list[str]:
    """Text for ``terminals`` after ``lead`` (``layout``: the layer's state before them): one
    candidate ending after each terminal. An f-string is closed with the quote it was opened
    with."""
    names = planner.grammar.symbol_names
    columns = layer.indent_columns(layout)
    quotes = layer.open_quotes(layout)
    pieces, out = [lead], [lead]
    line_start = False
    for sym in terminals:
        name = names[sym]
        if name == "_NEWLINE":
            pieces.append("\n")
            line_start, spaced = True, False
        elif name == "_INDENT":
            columns.append((columns[-1] if columns else 0) + len(_INDENT_UNIT))
            continue
        elif name == "_DEDENT":
            if columns:
                columns.pop()
            continue
        else:
            if line_start:
                pieces.append(" " * (columns[-1] if columns else 0))
            elif spaced:
                pieces.append(" ")
            spelling = planner.spelling[sym]
            if layer.string_start_mask >> sym & 1:
                quotes.append(spelling.lstrip("fFrRtT"))
            elif layer.string_end_mask >> sym & 1 and quotes:
                spelling = quotes.pop()
            pieces.append(spelling)
            line_start, spaced = False, True
        out.append("".join(pieces))
    return out


def finishing_candidates(checker: ParseState[LayoutT]) -> list[str]:
    """Texts that may finish ``checker``'s middle, shortest first (not yet verified)."""
    layer = checker.layer
    planner = planner_for(layer)
    found: set[str] = set()
    for branch in checker.branches:
        _, _, _, lexeme, _ = branch
        for added, parser, layout in _finish_lexeme(layer, branch):
            items = planner.closing_items(parser)
            if items is None:
                continue
            text = lexeme + added
            spaced = bool(text) and not text[-1].isspace()
            found.update(_spell(planner, layer, planner.terminals(items), layout, added, spaced))
    return sorted(found, key=lambda t: (len(t), t))


#: characters that open or extend a symbol the suffix may close (a string, a comment, a name)
_OPENERS = [chr(c) for c in range(33, 127)] + ['"""', "'''", "\n"]


def _joiners(checker: ParseState[LayoutT]) -> list[str]:
    """Single symbols the parser could take next, spelled, and single characters that may
    open a symbol the suffix closes: bridges toward a suffix."""
    layer = checker.layer
    planner = planner_for(layer)
    mask = 0
    for parser, layout, *_ in checker.branches:
        mask |= layer.allowed(parser, layout)
    out = []
    for sym, text in planner.spelling.items():
        if text and mask >> sym & 1:
            out.append(text)
    return list(dict.fromkeys(out + _OPENERS))


def _openers_for(suffix: str) -> list[str]:
    """Openers of the strings the suffix's start could be closing (``'``, ``b"``, ``'''`` ...),
    and a comment opener (a comment can swallow the rest of the suffix's first line)."""
    out = ["#"]
    start = suffix[:200]
    for quote in ("'", '"'):
        if quote in start:
            for opener in (quote, quote * 3):
                out += [opener] + [p + opener for p in ("b", "r", "f", "rb", "fr")]
    return out


def _header_joiners(checker: ParseState[LayoutT]) -> list[str]:
    """A block header on a new line at each column the layout knows: a suffix that starts
    with an indented block needs a header to hang from."""
    columns = {0}
    for _, layout, *_ in checker.branches:
        stack = checker.layer.indent_columns(layout)
        columns.update(stack)
        columns.add((stack[-1] if stack else 0) + len(_INDENT_UNIT))
    return ["\n" + " " * col + "if A:" for col in sorted(columns)]


class _Search:
    """Candidate checks under an optional time limit."""

    def __init__(self, seconds: float | None) -> None:
        self.until = None if seconds is None else time.monotonic() + seconds

    def expired(self) -> bool:
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


def shortest_finish(
    checker: ParseState[LayoutT], suffix_head: str | None, limit: int = 64, seconds: float | None = None
) -> str | None:
    """A short text ``t`` with ``checker.feed(t).is_complete()`` (suffix included), or None when none is
    found (within ``seconds``, if given); ``suffix_head``: the part of the suffix parsed per middle (see
    :class:`~.right_quotient.SuffixPlan`), None without a suffix. Tries the cheapest closing of the open
    rules cut at every point; with a suffix also one more symbol, character or block header after each
    cut point, then one more symbol followed by an opener of a string the suffix may close; then the
    start of a construct the suffix goes on with (``def f(`` before a suffix that begins ``) -> int:``)
    on a new line at each column the layout knows."""
    search = _Search(seconds)
    candidates = finishing_candidates(checker)[:limit]
    found = search.first_complete(checker, candidates)
    if found is not None or suffix_head is None:
        return found
    bases = [(text, base) for text in candidates if (base := checker.feed(text)) is not None]
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
    openers = _openers_for(suffix_head)
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


def _head_starts(
    layer: LexicalLayer, head: str, in_brackets: bool
) -> list[tuple[tuple[str, ...], list[int]]]:
    """How a bridge can meet the head: ``(texts that may end the bridge, terminal bitmasks
    the grammar reads next)``. Either the head starts with its own symbols (the bridge ends
    with nothing or a space), or inside a comment or a string the bridge opens (with a
    quote the head closes). ``in_brackets``: line breaks do not end the head's first line."""
    text = head.lstrip(" \t")
    starts: list[tuple[tuple[str, ...], list[int]]]
    if not text or text[0] in "\n#\\":
        starts = [(("",), [])]
    else:
        # inside brackets the head's symbols tell more about the opener (a parameter list)
        symbols = _line_terminals(layer, text, limit=24 if in_brackets else 8, across_lines=in_brackets)
        starts = [(("", " "), symbols)]
        if layer.newline_mask:  # the head's first line may end a comment the bridge opens
            starts.append((("#", " #"), []))
    string = layer.string_mask
    for quote in ("'''", '"""', "'", '"'):
        at = head.find(quote)
        if not string or at < 0 or (len(quote) == 1 and "\n" in head[:at]):
            continue
        after = [string] + _line_terminals(layer, head[at + len(quote) :], limit=7)
        starts.append((tuple(prefix + quote for prefix in ("", "b", "r", "f", "rb", "fr")), after))
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


_CLOSES = {")": "(", "]": "[", "}": "{"}
#: the text that opens each bracket in any expression context
_WRAPPERS = {")": "A(", "]": "A[", "}": "{A:"}


def _unmatched_closers(layer: LexicalLayer, head: str, window: int = 20_000) -> list[str]:
    """Brackets the head closes that it did not open, innermost first: the bridge must open
    them. A head that begins inside a string is read from its closing quote."""
    text = head[:window]
    first_line = len(text.split("\n", 1)[0])
    symbols = list(lex(layer, text))
    if any(not mask and begin < first_line for begin, _, mask in symbols):
        # the first line does not lex: a string the bridge opens ends in it
        quote = min((i for i in (text.find("'"), text.find('"')) if i >= 0), default=-1)
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


def _open_brackets(planner: Planner, terminals: tuple[int, ...]) -> str | None:
    """The brackets ``terminals`` leave open, innermost first (None if they close one they
    did not open)."""
    stack = []
    for sym in terminals:
        literal = planner.grammar.terminals[sym].literal if sym < len(planner.grammar.terminals) else None
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
    planner: Planner, openers: Iterable[tuple[int, ...]], terminals: list[int], closers: list[str]
) -> Iterator[tuple[str, tuple[int, ...], int]]:
    """``(wrapper, opener, number of its own brackets)``, lazily, for each opener whose own
    open brackets are the first ones the head closes, and after which the grammar (layout
    aside) reads ``terminals`` as far as those brackets reach; the wrapper opens the rest."""
    layer = planner.layer
    scan, ids = layer.recognizer.scan, layer.terminal_ids
    for opener in openers:
        own = _open_brackets(planner, opener)
        if own is None or len(own) > len(closers) or any(_CLOSES[c] != o for c, o in zip(closers, own)):
            continue
        state = planner.state_after(opener)
        for mask in _before_unopened_closer(layer, terminals, len(own)):
            if state is None:
                break
            state = scan(state, ids(mask))
        if state is not None:
            yield "".join(_WRAPPERS[c] for c in reversed(closers[len(own) :])), opener, len(own)


#: brackets and operators: left contexts with these differ only in ways a nested opener ignores
_NOISE = {"(", "[", "{", "+", "-", "~", "*", "**", "@", "not", "await", "lambda", ";", ","}
#: terminals a connector inside brackets may use: enough for ``A: A[``, ``A.A(``, ``A=A(``, ``A for A in A(``
_CONNECTOR_SYMBOLS = {"NAME", ":", "=", ".", ",", "->", "in", "for"}
_CONNECTOR_DEPTH = 3


def _connectors(planner: Planner, state: EarleySet, goal: int, limit: int = 3) -> list[tuple[int, ...]]:
    """Up to ``limit`` shortest terminal sequences (at most :data:`_CONNECTOR_DEPTH` of
    :data:`_CONNECTOR_SYMBOLS`) after which ``state`` can read the grammar terminal ``goal``."""
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
    planner: Planner, closers: list[str], first: int, limit: int = 96
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


def _spell_opener(planner: Planner, terminals: tuple[int, ...], column: int, wrapper: str = "") -> str:
    """``terminals`` spelled as text that starts at ``column`` of a fresh line, with
    ``wrapper`` (brackets the head closes) where the head will go on."""
    names, pieces, line_start = planner.grammar.symbol_names, [], False
    if wrapper and not (terminals and terminals[-1] in planner.layout_terminals):
        pieces.append(wrapper)
    for sym in terminals:
        name = names[sym]
        if name == "_NEWLINE":
            pieces.append("\n")
            line_start = True
        elif name in ("_INDENT", "_DEDENT"):
            column += len(_INDENT_UNIT) if name == "_INDENT" else -len(_INDENT_UNIT)
        else:
            pieces.append(" " * column if line_start else " " if pieces else "")
            pieces.append(planner.spelling[sym])
            line_start = False
    if wrapper and line_start:
        pieces.append(" " * column + wrapper)
    return "".join(pieces)


_INDENTATION = re.compile(r"\n[ \t]+")


def _column_hint(head: str) -> int:
    """The column the line a bridge ends on most likely has: that of the head's next code
    line, one level less when the head's first line opens a block."""
    first, _, rest = head.partition("\n")
    opens_block = first.split("#", 1)[0].rstrip().endswith(":")
    for line in rest.split("\n"):
        code = line.lstrip(" ")
        if code and not code.startswith("#"):
            column = len(line) - len(code)
            return max(0, column - len(_INDENT_UNIT)) if opens_block else column
    return 0


def _bridge(
    bases: list[tuple[str, ParseState[LayoutT]]], head: str, search: _Search, limit: int = 48
) -> str | None:
    """The shortest verified ``base text + bridge`` where the bridge begins a construct the
    suffix's head goes on with: the cheapest left context of every grammar item that can be
    followed by the head's first symbol, on the same line, on a new line at each column the
    layout knows or one deeper (under an ``if``), inside the brackets the head closes, before
    the head's first symbol or a string it closes."""
    if not bases:
        return None
    layer = bases[0][1].layer
    planner = planner_for(layer)
    closers = _unmatched_closers(layer, head)
    head_column = len(head) - len(head.lstrip(" "))
    column_hint = _column_hint(head)
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
    candidates = []
    for text, base in bases:
        columns = {0}
        for _, layout, *_ in base.branches:
            columns.update(layer.indent_columns(layout))
        # on the same line; on a new line at each column the layout knows, or one deeper (after
        # a block header); deeper ones each under an ``if`` of its own (the levels a head that
        # starts indented dedents to must be open)
        deeper = max(columns) + len(_INDENT_UNIT)
        starts = (
            [("", 0), (" ", 0)]
            + [("\n" + " " * col, col) for col in sorted(columns)]
            + [("\n" + " " * deeper, deeper)]
        )
        ladder, col = "\n", max(columns)
        while col == max(columns) or col + len(_INDENT_UNIT) < head_column:
            ladder += " " * col + "if A:\n"
            col += len(_INDENT_UNIT)
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
