"""The Earley recognizer (``engine/automata/earley.py``) against a textbook chart parser.

The recognizer shares predictions between sets, steps over nullable symbols as items are added
and replays a completion's unit chain from the prediction (``Recognizer.chain``). The reference
here does none of that: a chart of sets of ``(item, origin index)``, each closed by predicting,
completing and stepping over nullables until nothing changes. Random token sequences, most
of them kept viable, are read by both; after every token the two must agree on whether it was
taken, on the terminals that may come next and on whether a whole text has been read.
"""

from __future__ import annotations

import random

import pytest

from fimconstrain.engine.automata.earley import Recognizer
from fimconstrain.engine.automata.grammar import Grammar, Terminal

Rules = list[tuple[str, tuple[str, ...]]]

#: expressions with operators and calls (unit chains ``atom -> factor -> term -> expr``), left
#: recursion, nullable symbols before, inside and after others, and an ambiguous statement rule
EXPRESSIONS: Rules = [
    ("start", ("stmts",)),
    ("stmts", ("stmt",)),
    ("stmts", ("stmts", "stmt")),
    ("stmt", ("expr", "mark", ";")),
    ("stmt", ("mark", ";")),
    ("stmt", ("expr", "expr", ";")),
    ("mark", ()),
    ("mark", ("?",)),
    ("expr", ("term",)),
    ("expr", ("expr", "+", "term")),
    ("term", ("factor",)),
    ("term", ("term", "*", "factor")),
    ("factor", ("atom",)),
    ("factor", ("-", "factor")),
    ("atom", ("NAME",)),
    ("atom", ("(", "expr", ")")),
    ("atom", ("atom", "(", "args", ")")),
    ("args", ()),
    ("args", ("arglist", "mark")),
    ("arglist", ("expr",)),
    ("arglist", ("arglist", ",", "expr")),
]
#: a cycle of unit rules, nullable left corners and right recursion
CYCLES: Rules = [
    ("start", ("a",)),
    ("a", ("b",)),
    ("a", ("NAME",)),
    ("b", ("a",)),
    ("b", ("c", "b", "c")),
    ("b", ("(", "a", ")")),
    ("c", ()),
    ("c", ("-",)),
    ("a", ("NAME", "a")),
]
TERMINALS = ["NAME", ";", "+", "*", "-", "(", ")", ",", "?"]


def make_grammar(rules: Rules) -> Grammar:
    terminals = [Terminal(name, pattern, "", None, False) for name, pattern in zip(TERMINALS, TERMINALS)]
    return Grammar(terminals, [], rules, "start")


class ChartParser:
    """Earley's algorithm as in the textbooks, over the same item tables: no shared
    predictions, no chains; each set closed to a fixed point."""

    def __init__(self, g: Grammar) -> None:
        self.g = g
        self.chart: list[set[tuple[int, int]]] = [self.close({(g.start_item, 0)}, 0)]

    def close(self, items: set[tuple[int, int]], here: int) -> set[tuple[int, int]]:
        g = self.g
        items = set(items)
        changed = True
        while changed:
            changed = False
            for d, origin in list(items):
                sym = g.next_symbol[d]
                new: set[tuple[int, int]] = set()
                if sym >= g.n_terminals:  # predict, and step over a nullable symbol
                    new |= {(g.rule_first_item[rule], here) for rule in g.rules_of.get(sym, [])}
                    if sym in g.nullable:
                        new.add((d + 1, origin))
                elif sym < 0 and d != g.start_item + 1:  # complete at the origin set
                    lhs = g.item_lhs[d]
                    before = items if origin == here else self.chart[origin]
                    new |= {(d2 + 1, o2) for d2, o2 in before if g.next_symbol[d2] == lhs}
                if not new <= items:
                    items |= new
                    changed = True
        return items

    def scan(self, terminal: int) -> bool:
        moved = {(d + 1, o) for d, o in self.chart[-1] if self.g.next_symbol[d] == terminal}
        if not moved:
            return False
        self.chart.append(self.close(moved, len(self.chart)))
        return True

    def expected(self) -> int:
        mask = 0
        for d, _ in self.chart[-1]:
            sym = self.g.next_symbol[d]
            if 0 <= sym < self.g.n_terminals:
                mask |= 1 << sym
        return mask

    def accepting(self) -> bool:
        return (self.g.start_item + 1, 0) in self.chart[-1]


@pytest.mark.parametrize("rules", [EXPRESSIONS, CYCLES], ids=["expressions", "cycles"])
def test_the_recognizer_agrees_with_a_chart_parser_token_by_token(rules: Rules) -> None:
    g = make_grammar(rules)
    rng = random.Random(7)
    recognizer = Recognizer(g)
    steps = accepted_texts = rejected_tokens = 0
    for _ in range(300):
        reference = ChartParser(g)
        state = recognizer.initial
        assert recognizer.expected_terminals(state) == reference.expected()
        assert state.accepting == reference.accepting()
        for _ in range(rng.randrange(1, 40)):
            expected = [t for t in range(len(TERMINALS)) if reference.expected() >> t & 1]
            pick_any = rng.random() < 0.15 or not expected
            terminal = rng.randrange(len(TERMINALS)) if pick_any else rng.choice(expected)
            after = recognizer.scan(state, (terminal,))
            taken = reference.scan(terminal)
            assert (after is not None) == taken, (TERMINALS[terminal], len(reference.chart))
            steps += 1
            if not taken:
                rejected_tokens += 1
                continue  # both stay where they were
            assert after is not None
            state = after
            assert recognizer.expected_terminals(state) == reference.expected()
            assert state.accepting == reference.accepting()
            accepted_texts += state.accepting
    # the sequences reached both verdicts many times (the comparison was not vacuous)
    assert steps > 3_000 and rejected_tokens > 100 and accepted_texts > 100


def test_a_set_scanned_with_several_terminals_is_their_union() -> None:
    """Scanning ``(t1, t2)`` at once (a lexeme that may be either) leaves the terminals either
    one leaves, and accepts when either does."""
    g = make_grammar(EXPRESSIONS)
    recognizer = Recognizer(g)
    name, minus = TERMINALS.index("NAME"), TERMINALS.index("-")
    state = recognizer.initial
    both = recognizer.scan(state, (name, minus))
    one, other = recognizer.scan(state, (name,)), recognizer.scan(state, (minus,))
    assert both is not None and one is not None and other is not None
    assert recognizer.expected_terminals(both) == (
        recognizer.expected_terminals(one) | recognizer.expected_terminals(other)
    )
    assert both.accepting == (one.accepting or other.accepting)
