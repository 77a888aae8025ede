"""Load a Lark grammar file into the flat, integer-indexed form the recognizer runs on.

Lark's own loader parses the ``.lark`` syntax and expands EBNF into plain BNF rules; everything
after that (symbol numbering, nullable sets, dotted-rule tables) is ours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from lark.exceptions import GrammarError as LarkGrammarError
from lark.lexer import Pattern, PatternStr
from lark.load_grammar import GrammarBuilder

from ..errors import GrammarError

AUGMENTED_START = "$start"


@dataclass(frozen=True)
class Terminal:
    """A lexed terminal: its regex source, flags, and the literal it spells if it is a string."""

    name: str
    pattern: str
    flags: str
    literal: str | None
    ignored: bool


class Grammar:
    """A context-free grammar as flat integer tables.

    Symbols are numbered terminals first (``0 .. n_terminals-1``, lexed ones before declared
    ones such as ``_INDENT``), then nonterminals. Rules are stored as *dotted items*: item ``d``
    is a rule with its dot at one position, ``next_symbol[d]`` is the symbol after the dot
    (``-1`` at the end) and ``d + 1`` is the same rule with the dot moved one step right.
    """

    def __init__(
        self,
        terminals: list[Terminal],
        declared: list[str],
        rules: list[tuple[str, tuple[str, ...]]],
        start: str,
    ) -> None:
        self.terminals = terminals
        self.declared = declared
        names = [t.name for t in terminals] + declared
        self.n_terminals = len(names)
        nonterminals = list(dict.fromkeys([AUGMENTED_START] + [lhs for lhs, _ in rules]))  # in order met
        self.symbol_names = names + nonterminals
        self.symbol_id = {name: i for i, name in enumerate(self.symbol_names)}
        if start not in self.symbol_id:
            raise GrammarError(f"start rule {start!r} is not defined")
        for lhs, rhs in rules:
            for sym in rhs:
                if sym not in self.symbol_id:
                    raise GrammarError(f"rule {lhs!r} uses undefined symbol {sym!r}")
        all_rules = [(AUGMENTED_START, (start,))] + rules
        self.start_symbol = self.symbol_id[AUGMENTED_START]

        self.rule_lhs: list[int] = []
        self.rule_first_item: list[int] = []
        self.next_symbol: list[int] = []
        self.item_lhs: list[int] = []
        self.rules_of: dict[int, list[int]] = {}
        for lhs_name, rhs_names in all_rules:
            lhs_id = self.symbol_id[lhs_name]
            rule = len(self.rule_lhs)
            self.rule_lhs.append(lhs_id)
            self.rule_first_item.append(len(self.next_symbol))
            self.rules_of.setdefault(lhs_id, []).append(rule)
            for sym in rhs_names:
                self.next_symbol.append(self.symbol_id[sym])
                self.item_lhs.append(lhs_id)
            self.next_symbol.append(-1)
            self.item_lhs.append(lhs_id)
        self.nullable = self._nullable_symbols()
        self.skip = self._nullable_skips()
        self.start_item = self.rule_first_item[0]
        #: nonterminal -> the nonterminals its rules may start with (nullable symbols stepped
        #: over), each time one is met, in item order; nonterminal -> bitmask of the terminals
        #: its rules may start with; symbol -> ``(nonterminal, item past the symbol)`` for each
        #: rule start that reads the symbol first, in item order
        self.predicts, self.first_terminals, self.rule_starts = self._prediction_tables()

    def is_terminal(self, symbol: int) -> bool:
        return 0 <= symbol < self.n_terminals

    def _nullable_symbols(self) -> frozenset[int]:
        nullable: set[int] = set()
        changed = True
        while changed:
            changed = False
            for rule, lhs in enumerate(self.rule_lhs):
                if lhs in nullable:
                    continue
                d = self.rule_first_item[rule]
                while self.next_symbol[d] in nullable:
                    d += 1
                if self.next_symbol[d] == -1:
                    nullable.add(lhs)
                    changed = True
        return frozenset(nullable)

    def _nullable_skips(self) -> list[tuple[int, ...]]:
        """For each item, the items reached by stepping over nullable symbols (itself first)."""
        skips: list[tuple[int, ...]] = []
        for d in range(len(self.next_symbol)):
            chain = [d]
            while self.next_symbol[chain[-1]] in self.nullable:
                chain.append(chain[-1] + 1)
            skips.append(tuple(chain))
        return skips

    def _prediction_tables(
        self,
    ) -> tuple[dict[int, tuple[int, ...]], dict[int, int], dict[int, list[tuple[int, int]]]]:
        """What predicting a nonterminal brings, per nonterminal and per symbol, so that a
        prediction (``earley.Prediction``) walks nonterminals, not items."""
        predicts: dict[int, tuple[int, ...]] = {}
        first_terminals: dict[int, int] = {}
        rule_starts: dict[int, list[tuple[int, int]]] = {}
        for lhs, rules in self.rules_of.items():
            predicted: list[int] = []
            terminals = 0
            for rule in rules:
                for d in self.skip[self.rule_first_item[rule]]:
                    sym = self.next_symbol[d]
                    if sym < 0:
                        continue
                    rule_starts.setdefault(sym, []).append((lhs, d + 1))
                    if sym < self.n_terminals:
                        terminals |= 1 << sym
                    else:
                        predicted.append(sym)
            predicts[lhs] = tuple(predicted)
            first_terminals[lhs] = terminals
        return predicts, first_terminals, rule_starts

    def terminal_id(self, name: str) -> int:
        sym = self.symbol_id.get(name)
        if sym is None or not self.is_terminal(sym):
            raise GrammarError(f"grammar has no terminal {name!r}")
        return sym


def _pattern_source(pattern: Pattern) -> str:
    # typed ``str`` here: the compiled engine's build runs before lark (and its types) is installed
    value: str = pattern.value
    return re.escape(value) if isinstance(pattern, PatternStr) else value


def parse_lark(text: str, start: str, source: str = "<grammar>") -> Grammar:
    """Compile Lark grammar text into a :class:`Grammar`; unused terminals are kept (they act
    as error lexemes that take part in longest match but are never accepted)."""
    try:
        builder = GrammarBuilder(False, [])
        builder.load_grammar(text, source)
        lark_grammar = builder.build()
        keep = {name for name, *_ in lark_grammar.term_defs}
        term_defs, rule_defs, ignore = lark_grammar.compile([start], keep)
    except LarkGrammarError as exc:
        raise GrammarError(f"{source}: {exc}") from exc
    except Exception as exc:  # lark raises plain exceptions for some malformed input
        raise GrammarError(f"{source}: cannot load grammar: {exc}") from exc
    ignored = set(ignore)
    # names as plain ``str``: lark's are tokens, whose Python-level ``__eq__`` every table lookup
    # would call
    terminals = [
        Terminal(
            name=str(t.name),
            pattern=_pattern_source(t.pattern),
            flags="".join(sorted(t.pattern.flags)),
            literal=t.pattern.value if isinstance(t.pattern, PatternStr) else None,
            ignored=t.name in ignored,
        )
        for t in term_defs
    ]
    lexed = {t.name for t in terminals}
    rules = [(str(r.origin.name), tuple(str(s.name) for s in r.expansion)) for r in rule_defs]
    declared = sorted(
        {str(s.name) for r in rule_defs for s in r.expansion if s.is_term and s.name not in lexed}
    )
    return Grammar(terminals, declared, rules, start)


#: a version gate at the end of a grammar line: ``//@ >=3.12``, ``//@ <3.12`` or both
_GATE = re.compile(r"//@((?:\s*(?:>=|<)\s*\d+\.\d+)+)\s*$")
_GATE_TERM = re.compile(r"(>=|<)\s*(\d+)\.(\d+)")


def apply_version_gates(text: str, version: tuple[int, int] | None) -> str:
    """Keep the lines of a grammar whose gate admits ``version`` (all lines when None).

    One grammar file serves every version: a line ending in ``//@ >=3.12`` exists from 3.12
    on, one ending in ``//@ <3.12`` before it. The gate is a Lark comment, so the file
    stays loadable as it is; a dropped line becomes blank (line numbers in errors hold)."""
    if version is None:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        gate = _GATE.search(line)
        if gate is None:
            continue
        for op, major, minor in _GATE_TERM.findall(gate.group(1)):
            bound = (int(major), int(minor))
            if (version >= bound) != (op == ">="):
                lines[i] = ""
                break
    return "\n".join(lines)


@cache
def load_builtin(name: str, start: str, version: tuple[int, int] | None = None) -> Grammar:
    """Load one of the grammars shipped in ``fimconstrain.grammars`` at a target ``version``
    (its version gates applied; cached per process)."""
    try:
        folder = resources.files("fimconstrain.grammars")
    except ModuleNotFoundError:  # running from a source checkout that is not installed
        folder = Path(__file__).resolve().parents[3] / "grammars"
    try:
        text = folder.joinpath(f"{name}.lark").read_text("utf-8")
    except FileNotFoundError as exc:
        raise GrammarError(f"no built-in grammar named {name!r}") from exc
    return parse_lark(apply_version_gates(text, version), start, source=f"{name}.lark")


def load_file(path: Path, start: str, version: tuple[int, int] | None = None) -> Grammar:
    """Load a Lark grammar file (its version gates applied for ``version``, if given)."""
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise GrammarError(f"cannot read grammar file {str(path)!r}: {exc}") from exc
    return parse_lark(apply_version_gates(text, version), start, source=path.name)
