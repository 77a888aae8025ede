"""Closing a middle: the shortest texts that finish what it opened (brackets, strings,
blocks, the rule in progress), so that the file is complete.

From the parser state we find the cheapest way to close every open rule: a shortest-path
search over the Earley items and their origins, each symbol weighted by the length of its
shortest yield (a fixpoint over the rules), spelled with short lexemes. This is the budget
finish of paper 002 (a search for a short verified finish, not the intersection with the
regular language of bounded texts that the paper builds). Language-neutral: what a language
writes beyond its terminals' spellings comes from its layer's
:class:`~.layer_protocol.FinishVocabulary`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from functools import cache

from ..automata.earley import EarleySet
from ..automata.regex_dfa import DEAD
from ..layers.layer_protocol import Branch, Layer, LayoutT, LexicalLayer, ParseState


class ClosingPlanner:
    """Shortest yields of a grammar's symbols, and cheapest closings of Earley states."""

    def __init__(self, layer: LexicalLayer) -> None:
        self.layer = layer
        g = layer.grammar
        self.grammar = g
        dfa = layer.dfa
        #: width of one indentation level, as the finish writes it
        self.indent_width = len(layer.finish_vocabulary.indent_unit)
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
        for name in g.declared:  # layout terminals the layer scans: what they cost in text
            sym = g.symbol_id[name]
            self.spelling[sym] = ""
            cost[sym] = self.indent_width if sym in layer.indent else 0 if sym in layer.dedent else 1
        self.rule_of: dict[int, int] = {}
        self.layout_terminals = {g.symbol_id[name] for name in g.declared} | set(
            layer.terminal_ids(layer.newline_mask)
        )
        self._fix_nonterminals(cost)
        self.cost = cost
        inf = float("inf")
        self.rest = [0.0] * len(g.next_symbol)
        for d in range(len(g.next_symbol) - 1, -1, -1):
            sym = g.next_symbol[d]
            self.rest[d] = 0.0 if sym < 0 else cost.get(sym, inf) + self.rest[d + 1]

    def _fix_nonterminals(self, cost: dict[int, float]) -> None:
        """Each nonterminal's cost (the length of its shortest yield) and the rule that gives
        it: a fixpoint over the rules, in the style of Knuth 1977."""
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

    def closing_items(self, state: EarleySet) -> list[int] | None:
        """The items (dot positions) whose remaining symbols, in order, close ``state`` most
        cheaply: innermost first, up to the start rule (none if the state is complete and has
        nothing open). None if the state cannot be closed."""
        item_lhs, rest = self.grammar.item_lhs, self.rest
        # (cost, tie-break, origin set, nonterminal completed there, items on the way)
        frontier: list[tuple[float, int, EarleySet | None, int, _Path | None]] = []
        count = 0
        for items in state.waiting.values():
            for d_next, origin in items:
                d = d_next - 1
                heapq.heappush(frontier, (rest[d], count, origin, item_lhs[d], _Path(d, None)))
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
                    frontier, (c + rest[d_next], count, parent_origin, item_lhs[d_next], _Path(d_next, path))
                )
                count += 1
            for d_next in origin.prediction.advanced(lhs):
                heapq.heappush(
                    frontier, (c + rest[d_next], count, origin, item_lhs[d_next], _Path(d_next, path))
                )
                count += 1
        # nothing left open: a state that already ends a whole text (a single value after it)
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


class _Path:
    """A chain of items, the last one first (a class: mypyc 2.4 crashes on the recursive
    tuple alias this was)."""

    __slots__ = ("before", "item")

    def __init__(self, item: int, before: _Path | None) -> None:
        self.item = item
        self.before = before


def _unwind(path: _Path | None) -> list[int]:
    """The items of a chain, first one first."""
    items = []
    while path is not None:
        items.append(path.item)
        path = path.before
    items.reverse()
    return items


@cache
def closing_planner(layer: LexicalLayer) -> ClosingPlanner:
    """The layer's :class:`ClosingPlanner` (built once per layer)."""
    return ClosingPlanner(layer)


def closing_candidates(checker: ParseState[LayoutT]) -> list[str]:
    """Texts that may finish ``checker``'s middle, shortest first (not yet verified): for each
    branch, a short end of the symbol in progress, then the cheapest closing of its parser
    state, cut after each of its terminals."""
    layer = checker.layer
    planner = closing_planner(layer)
    found: set[str] = set()
    for branch in checker.branches:
        _, _, _, lexeme, _ = branch
        for added, parser, layout in _lexeme_ends(layer, planner, branch):
            items = planner.closing_items(parser)
            if items is None:
                continue
            text = lexeme + added
            spaced = bool(text) and not text[-1].isspace()
            found.update(_spell(planner, layer, planner.terminals(items), layout, added, spaced))
    return sorted(found, key=lambda t: (len(t), t))


def _lexeme_ends(
    layer: Layer[LayoutT], planner: ClosingPlanner, branch: Branch[LayoutT]
) -> list[tuple[str, EarleySet, LayoutT]]:
    """Ways to end the symbol in progress cheaply: (added text, parser, layout) each. An
    indentation being typed may be padded to any column the parser could want next."""
    parser, layout, state, lexeme, _ = branch
    dfa, vocabulary = layer.dfa, layer.finish_vocabulary
    allowed = layer.allowed(parser, layout)
    last_line = lexeme[lexeme.rfind("\n") + 1 :]
    in_newline = layer.token_mask(state) & layer.newline_mask
    comment = vocabulary.line_comment
    in_comment = bool(comment) and comment in last_line
    if in_newline and (in_comment or ("\n" in lexeme and not last_line.strip())):
        # a comment ends at the end of its line; a line's indentation may be padded to any
        # column the parser could want next, or the line left blank
        column = 0 if in_comment else len(last_line.expandtabs(8))
        columns = layer.indent_columns(layout)
        targets = sorted(set(columns) | {0, (columns[-1] if columns else 0) + planner.indent_width})
        additions = ["\n" + " " * t for t in targets]
        if not in_comment:
            additions += [" " * (t - column) for t in sorted(set(targets) | {column}) if t >= column]
    elif layer.token_mask(state) & allowed:
        additions = [""]
    else:
        completion = dfa.shortest_completion(state, allowed)
        escape = vocabulary.reserved_word_escape
        if completion == "" and escape:  # a reserved word, allowed only as the name it begins
            completion = dfa.shortest_completion(dfa.run(escape, state), allowed)
            completion = None if completion is None else escape + completion
        additions = [] if completion is None else [completion]
    options = _ended(layer, branch, additions)
    if not options and not in_newline:
        # the lexeme's shape is complete but its content is not (an escape short of digits):
        # repair, then complete
        for repair in vocabulary.lexeme_repairs:
            repaired = dfa.run(repair, state)
            completion = None if repaired == DEAD else dfa.shortest_completion(repaired, allowed)
            options = [] if completion is None else _ended(layer, branch, [repair + completion])
            if options:
                break
    return options


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
    planner: ClosingPlanner,
    layer: Layer[LayoutT],
    terminals: list[int],
    layout: LayoutT,
    lead: str,
    spaced: bool,
) -> list[str]:
    """Text for ``terminals`` after ``lead`` (``layout``: the layer's state before them): one
    candidate ending after each terminal. A string lexed in modes (an f-string) is closed with
    the quote it was opened with."""
    columns = layer.indent_columns(layout)
    quotes = layer.open_quotes(layout)
    string_quotes = layer.finish_vocabulary.quotes
    newline, indent, dedent = layer.newline, layer.indent, layer.dedent
    pieces, out = [lead], [lead]
    line_start = False
    for sym in terminals:
        if sym == newline:
            pieces.append("\n")
            line_start, spaced = True, False
        elif sym in indent:
            columns.append((columns[-1] if columns else 0) + planner.indent_width)
            continue
        elif sym in dedent:
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
                quotes.append(next((q for q in string_quotes if spelling.endswith(q)), spelling))
            elif layer.string_end_mask >> sym & 1 and quotes:
                spelling = quotes.pop()
            pieces.append(spelling)
            line_start, spaced = False, True
        out.append("".join(pieces))
    return out
