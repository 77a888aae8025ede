"""CPython's checks that ``ast.parse`` makes after the parser: what the grammar accepts and the
target version's ``ast.parse`` still rejects, because the check needs more than a context-free
grammar can carry.

* Before 3.9, a keyword argument given twice in one call, ``f(a=1, *b, a=2)`` ("keyword
  argument repeated": ``ast_for_call`` in CPython 3.8's ``Python/ast.c``; from 3.9 on the
  compiler makes this check, ``ast.parse`` does not).
* From 3.14, ``ast.parse`` runs the future checks (``future_parse`` in ``Python/future.c``): in
  the module's leading ``from __future__ import`` statements, after at most a docstring, every
  imported name must be a feature ("future feature X is not defined"; ``braces``: "not a
  chance"; ``*`` is no feature). A ``from __future__`` import anywhere else is the compiler's
  business, not ``ast.parse``'s.

(Binding ``__debug__`` before 3.9 is rejected by the grammar: see ``any_name`` there.)

Each check is a small state kept in the Python layer's layout (:class:`AstState`) and moved on
by every symbol that ends; it fires when the symbol that makes the program invalid ends (the
second ``a=``, a feature's name), so a text that may still become valid is never rejected. A
text read from an unknown start (a suffix, :meth:`AstChecks.open_state`) checks nothing that
depends on what came before it.
"""

from __future__ import annotations

from ..automata.earley import EarleySet
from ..automata.grammar import Grammar
from ..versions import PythonVersion

#: the names ``from __future__ import`` knows in 3.14 (``Python/future.c``)
FUTURE_FEATURES = frozenset(
    {
        "nested_scopes",
        "generators",
        "division",
        "absolute_import",
        "with_statement",
        "print_function",
        "unicode_literals",
        "barry_as_FLUFL",
        "generator_stop",
        "annotations",
    }
)

# Where the module's leading statements stand, as far as the future checks go:
#: nothing checked any more (past the leading statements, or the start is unknown)
DONE = 0
#: at the start of the module, no statement yet
START = 1
#: between statements, after a docstring or future imports only
BETWEEN = 2
#: the first statement so far: '(' only, then string literals, then ')' (a docstring so far)
DOC_OPEN, DOC_STRINGS, DOC_CLOSE = 3, 4, 5
#: 'from', then 'from __future__'
FROM, FROM_FUTURE = 6, 7
#: 'from __future__ import' and then '(' or ',': a feature's name comes next
FEATURE = 8
#: after a feature's name (or its alias), and after 'as'
AFTER_FEATURE, AS = 9, 10
#: where a leading statement may end (a docstring, a future import)
_LEADING_ENDS = (DOC_STRINGS, DOC_CLOSE, AFTER_FEATURE)

#: kwarg frames: per open bracket, innermost last, the keyword names the call has had so far
KeywordFrames = tuple[tuple[str, ...], ...]
#: ``(future state, keyword frames, name that may be a keyword argument's)``
AstState = tuple[int, KeywordFrames, str]


class AstChecks:
    """The checks of one grammar at one target version (see the module's docstring)."""

    __slots__ = (
        "as_bit",
        "close_bit",
        "comma_bit",
        "eq_bit",
        "eq_id",
        "eq_kwarg_items",
        "from_bit",
        "future",
        "import_bit",
        "keywords",
        "name_mask",
        "open_bit",
        "semicolon_bit",
        "star_bit",
        "string_bit",
    )

    def __init__(self, grammar: Grammar, version: PythonVersion, name_mask: int) -> None:
        #: whether repeated keyword arguments are rejected (before 3.9)
        self.keywords = version < (3, 9)
        #: whether the leading future imports are checked (3.14 on)
        self.future = version >= (3, 14)
        literal = {t.literal: 1 << i for i, t in enumerate(grammar.terminals) if t.literal is not None}
        self.name_mask = name_mask
        self.string_bit = 1 << grammar.terminal_id("STRING")
        self.eq_bit = literal.get("=", 0)
        self.eq_id = self.eq_bit.bit_length() - 1
        self.open_bit, self.close_bit = literal.get("(", 0), literal.get(")", 0)
        self.comma_bit, self.semicolon_bit = literal.get(",", 0), literal.get(";", 0)
        self.star_bit, self.as_bit = literal.get("*", 0), literal.get("as", 0)
        self.from_bit, self.import_bit = literal.get("from", 0), literal.get("import", 0)
        #: the items of the rule `kwarg: NAME "=" expression` with the dot after its "="
        self.eq_kwarg_items = frozenset(_items_after(grammar, "kwarg", "="))

    def initial(self, file_start: bool) -> AstState:
        """The state at the start of a file (``file_start``) or of a text that comes after a
        complete file's top-level statements (a suffix's tail, see right_quotient.py)."""
        return (START if self.future and file_start else DONE, (), "")

    @staticmethod
    def open_state(depth: int) -> AstState:
        """The state of a text that starts inside ``depth`` brackets after unknown text."""
        return (DONE, ((),) * depth, "")

    @staticmethod
    def in_leading_statements(state: AstState) -> bool:
        """Whether what comes next may still be one of the module's leading statements (so
        what follows is not independent of what came before)."""
        return state[0] != DONE

    def statement_end(self, state: AstState) -> AstState:
        """The state after a logical line ends (a NEWLINE outside brackets)."""
        future = state[0]
        if future in (DONE, START, BETWEEN):
            return state
        return (BETWEEN if future in _LEADING_ENDS else DONE, state[1], "")

    def after_symbol(
        self,
        state: AstState,
        parser: EarleySet,
        after: EarleySet,
        mask: int,
        text: str,
        delta: int,
    ) -> AstState | None:
        """The state after a symbol (not a NEWLINE, not ignored) of terminals ``mask`` and text
        ``text`` was scanned from ``parser`` to ``after``; ``delta``: +1 if it opens a
        bracket, -1 if it closes one. None when the symbol makes the program invalid."""
        future, frames, pending = state
        if future != DONE:
            future = self._future(future, mask, text)
            if future < 0:
                return None
        if not self.keywords:
            return (future, frames, "") if future != state[0] else state
        name = ""
        if mask & self.eq_bit and pending and frames:
            items = parser.waiting.get(self.eq_id, ())
            if items and all(d in self.eq_kwarg_items for d, _ in items):
                if pending in frames[-1]:
                    return None  # keyword argument repeated
                frames = frames[:-1] + (frames[-1] + (pending,),)
        elif mask & self.name_mask and frames and self._may_be_keyword(after):
            name = text
        if delta > 0:
            frames = frames + ((),)
        elif delta < 0:
            frames = frames[:-1]
        return future, frames, name

    def _may_be_keyword(self, after: EarleySet) -> bool:
        """Whether the NAME just scanned may be a keyword argument's (an "=" may follow)."""
        items = after.waiting.get(self.eq_id, ())
        return any(d in self.eq_kwarg_items for d, _ in items)

    def _future(self, state: int, mask: int, text: str) -> int:
        """The future checks' state after a symbol; -1 when it imports no feature."""
        if state in (START, BETWEEN) and mask & self.from_bit:
            return FROM
        if state in (START, DOC_OPEN) and mask & self.open_bit:
            return DOC_OPEN
        if state in (START, DOC_OPEN, DOC_STRINGS) and mask & self.string_bit:
            return DOC_STRINGS
        if state in (DOC_STRINGS, DOC_CLOSE) and mask & self.close_bit:
            return DOC_CLOSE
        if state == FROM and mask & self.name_mask and text == "__future__":
            return FROM_FUTURE
        if state == FROM_FUTURE and mask & self.import_bit:
            return FEATURE
        if state == FEATURE:
            if mask & self.star_bit:
                return -1  # "future feature * is not defined"
            if mask & self.name_mask:
                return AFTER_FEATURE if text in FUTURE_FEATURES else -1
            if mask & self.open_bit:
                return FEATURE
            if mask & self.close_bit:  # after a trailing comma
                return AFTER_FEATURE
        if state == AFTER_FEATURE:
            if mask & self.as_bit:
                return AS
            if mask & self.comma_bit:
                return FEATURE
            if mask & self.close_bit:
                return AFTER_FEATURE
        if state == AS and mask & self.name_mask:
            return AFTER_FEATURE
        if mask & self.semicolon_bit and state in _LEADING_ENDS:  # the statement ends
            return BETWEEN
        return DONE


def _items_after(grammar: Grammar, rule_name: str, terminal: str) -> list[int]:
    """The items of ``rule_name``'s rules with the dot just after the literal ``terminal``."""
    lhs = grammar.symbol_id.get(rule_name)
    ids = [i for i, t in enumerate(grammar.terminals) if t.literal == terminal]
    if lhs is None or not ids:
        return []
    out = []
    for rule in grammar.rules_of.get(lhs, []):
        d = grammar.rule_first_item[rule]
        while grammar.next_symbol[d] >= 0:
            if grammar.next_symbol[d] == ids[0]:
                out.append(d + 1)
            d += 1
    return out
