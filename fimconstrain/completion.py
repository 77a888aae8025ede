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
import time
from functools import lru_cache

from .grammar import Grammar
from .regex_dfa import DEAD

#: what declared layout terminals cost, in characters of text
_LAYOUT_COST = {"_NEWLINE": 1, "_INDENT": 4, "_DEDENT": 0}
_INDENT_UNIT = "    "


class Planner:
    """Shortest yields of a grammar's symbols, and cheapest closings of Earley states."""

    def __init__(self, layer):
        self.layer = layer
        g: Grammar = layer.grammar
        self.grammar = g
        dfa = layer.dfa
        self.spelling: dict[int, str] = {}
        cost: dict[int, float] = {}
        for i, terminal in enumerate(g.terminals):
            text = terminal.literal if terminal.literal is not None else dfa.shortest_completion(dfa.start, 1 << i)
            if text is not None and not terminal.ignored:
                self.spelling[i] = text
                cost[i] = len(text) + 1
        for name in g.declared:
            sym = g.symbol_id[name]
            self.spelling[sym] = ""
            cost[sym] = _LAYOUT_COST.get(name, 1)
        self.rule_of: dict[int, int] = {}
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

    def closing_items(self, state) -> list[int] | None:
        """The items (dot positions) whose remaining symbols, in order, close ``state`` most
        cheaply: innermost first, up to the start rule. None if the state cannot be closed."""
        item_lhs, rest = self.grammar.item_lhs, self.rest
        frontier = []
        count = 0
        for items in state.waiting.values():
            for d_next, origin in items:
                d = d_next - 1
                heapq.heappush(frontier, (rest[d], count, origin, item_lhs[d], (d, None)))
                count += 1
        seen = set()
        while frontier:
            c, _, origin, lhs, path = heapq.heappop(frontier)
            if origin is None:
                return _unwind(path)
            key = (id(origin), lhs)
            if key in seen:
                continue
            seen.add(key)
            for d_next, parent_origin in origin.waiting.get(lhs, ()):
                heapq.heappush(frontier, (c + rest[d_next], count, parent_origin, item_lhs[d_next], (d_next, path)))
                count += 1
            for d_next in origin.prediction.advance.get(lhs, ()):
                heapq.heappush(frontier, (c + rest[d_next], count, origin, item_lhs[d_next], (d_next, path)))
                count += 1
        return None

    def terminals(self, items: list[int]) -> list[int]:
        """The terminals of the cheapest yield of each item's remaining symbols, in order."""
        g = self.grammar
        out: list[int] = []
        symbols: list[int] = []
        for d in items:
            while g.next_symbol[d] >= 0:
                symbols.append(g.next_symbol[d])
                d += 1
        stack = list(reversed(symbols))
        while stack:
            sym = stack.pop()
            if g.is_terminal(sym):
                out.append(sym)
                continue
            d = g.rule_first_item[self.rule_of[sym]]
            expansion = []
            while g.next_symbol[d] >= 0:
                expansion.append(g.next_symbol[d])
                d += 1
            stack.extend(reversed(expansion))
        return out


def _unwind(path) -> list[int]:
    items = []
    while path is not None:
        d, path = path
        items.append(d)
    items.reverse()
    return items


@lru_cache(maxsize=None)
def planner_for(layer) -> Planner:
    return Planner(layer)


def _finish_lexeme(layer, branch: tuple) -> list[tuple[str, object, object]]:
    """Ways to end the symbol in progress cheaply: (added text, parser, layout) each. An
    indentation being typed may be padded to any column the parser could want next."""
    parser, layout, state, lexeme, _ = branch
    dfa = layer.dfa
    allowed = layer.allowed(parser, layout)
    newline_mask = layer.newline_mask
    last_line = lexeme[lexeme.rfind("\n") + 1:]
    in_newline = layer.token_mask(state) & newline_mask
    if in_newline and ("#" in last_line or ("\n" in lexeme and not last_line.strip())):
        # a comment ends at the end of its line; a line's indentation may be padded to any
        # column the parser could want next
        line_break = "\n" if "#" in last_line else ""
        column = 0 if line_break else len(last_line.expandtabs(8))
        columns = layer.indent_columns(layout)
        targets = set(columns) | {(columns[-1] if columns else 0) + len(_INDENT_UNIT)}
        additions = [line_break + " " * (t - column) for t in sorted(targets | {column}) if t >= column]
    elif layer.token_mask(state) & allowed:
        additions = [""]
    else:
        completion = dfa.shortest_completion(state, allowed)
        additions = [] if completion is None else [completion]
    options = []
    for added in additions:
        end = dfa.run(added, state)
        if end == DEAD:
            continue
        ended = layer.end_symbol(parser, layout, end, lexeme + added)
        if ended is not None:
            options.append((added, *ended))
    return options


def _spell(planner: Planner, terminals: list[int], layout, lead: str, spaced: bool) -> list[str]:
    """Text for ``terminals`` after ``lead``: one candidate ending after each terminal."""
    g = planner.grammar
    names = g.symbol_names
    columns = planner.layer.indent_columns(layout)
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
            pieces.append(planner.spelling[sym])
            line_start, spaced = False, True
        out.append("".join(pieces))
    return out


def finishing_candidates(checker) -> list[str]:
    """Texts that may finish ``checker``'s middle, shortest first (not yet verified)."""
    layer = checker._layer
    planner = planner_for(layer)
    found = set()
    for branch in checker._branches:
        for added, parser, layout in _finish_lexeme(layer, branch):
            items = planner.closing_items(parser)
            if items is None:
                continue
            text = branch[3] + added
            spaced = bool(text) and not text[-1].isspace()
            found.update(_spell(planner, planner.terminals(items), layout, added, spaced))
    return sorted(found, key=lambda t: (len(t), t))


#: characters that open or extend a symbol the suffix may close (a string, a comment, a name)
_OPENERS = [chr(c) for c in range(33, 127)] + ['"""', "'''", "\n"]


def _joiners(checker) -> list[str]:
    """Single symbols the parser could take next, spelled, and single characters that may
    open a symbol the suffix closes: bridges toward a suffix."""
    layer = checker._layer
    planner = planner_for(layer)
    mask = 0
    for parser, layout, *_ in checker._branches:
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


def _header_joiners(checker) -> list[str]:
    """A block header on a new line at each column the layout knows: a suffix that starts
    with an indented block needs a header to hang from."""
    columns = {0}
    for _, layout, *_ in checker._branches:
        stack = checker._layer.indent_columns(layout)
        columns.update(stack)
        columns.add((stack[-1] if stack else 0) + len(_INDENT_UNIT))
    return ["\n" + " " * col + "if A:" for col in sorted(columns)]


class _Search:
    """Candidate checks under an optional time limit."""

    def __init__(self, seconds: float | None):
        self.until = None if seconds is None else time.monotonic() + seconds

    def expired(self) -> bool:
        return self.until is not None and time.monotonic() > self.until

    def first_complete(self, base, texts) -> str | None:
        """The first text of ``texts`` that completes ``base``, or None (also when time is up)."""
        for text in texts:
            if self.expired():
                return None
            after = base.feed(text)
            if after is not None and after.is_complete():
                return text
        return None


def shortest_finish(checker, limit: int = 64, seconds: float | None = None) -> str | None:
    """A short text ``t`` with ``checker.feed(t).is_complete()`` (suffix included), or None
    when none is found (within ``seconds``, if given). Tries the cheapest closing of the open
    rules cut at every point; with a suffix also one more symbol, character or block header
    after each cut point, then one more symbol followed by an opener of a string the suffix
    may close."""
    search = _Search(seconds)
    candidates = finishing_candidates(checker)[:limit]
    found = search.first_complete(checker, candidates)
    if found is not None or checker._plan is None:
        return found
    bases = [(text, base) for text in candidates if (base := checker.feed(text)) is not None]
    best = None
    for text, base in bases:
        if (best is not None and len(text) >= len(best)) or search.expired():
            break
        joiners = [glue + j for j in _joiners(base) for glue in ("", " ")] + _header_joiners(base)
        tail = search.first_complete(base, sorted(joiners, key=len))
        if tail is not None and (best is None or len(text + tail) < len(best)):
            best = text + tail
    if best is not None:
        return best
    openers = _openers_for(checker._plan.head)
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
