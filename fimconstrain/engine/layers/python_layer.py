"""Python's layer: INDENT and DEDENT from an indentation stack, bracket depth, backslash
continuations, f-string modes and CPython's checks on lexemes, between the lexer and the
parser of ``grammars/python.lark`` (paper 004 §VI: whitespace-sensitive languages; §VI-C:
no logical lines inside brackets). Also Python's :class:`~.layer_protocol.FinishVocabulary`.
"""

from __future__ import annotations

import keyword
from typing import TYPE_CHECKING

from ..automata.earley import EarleySet
from ..automata.grammar import Grammar
from ..versions import PythonVersion, format_version
from .ast_checks import DONE, AstChecks, AstState
from .base_layer import BaseLayer, bitmask
from .fstring_modes import FStringModes, open_quotes
from .layer_protocol import (
    READS_ESCAPES,
    READS_NOTHING,
    READS_TEXT,
    Branch,
    FinishVocabulary,
    Modes,
    PlainEnd,
    PlainEnds,
)
from .lexeme_checks import identifier_ok, string_ok

if TYPE_CHECKING:
    from typing_extensions import Self

#: an indentation level: ``(column, column with tabs as 1)``
Columns = tuple[int, int]
#: the open indentation levels above column 0, outermost first
Indents = tuple[Columns, ...]
#: Python's layout: ``(indents, bracket depth, line_open, f-string mode stack, the state of the
#: checks ast.parse makes after parsing)`` (:mod:`~.ast_checks`)
PythonLayout = tuple[Indents, int, bool, Modes, AstState]


#: bracket literal -> +1 (opens) or -1 (closes)
_BRACKETS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}

#: what the finish search writes in Python beyond the spellings of terminals (``A`` is the
#: shortest NAME)
PYTHON_FINISH = FinishVocabulary(
    indent_unit="    ",
    block_header="if A:",
    block_opener=":",
    line_comment="#",
    quotes=("'''", '"""', "'", '"'),
    string_prefixes=("", "b", "r", "f", "rb", "fr"),
    # an f-string's open replacement field, an escape short of digits (``'\\x4'``)
    lexeme_repairs=("}", ")}", "]}", "0", "00", "0000", "00000000"),
    reserved_word_escape="_",
    bracket_wrappers={")": "A(", "]": "A[", "}": "{A:"},
    context_noise=frozenset(
        {"(", "[", "{", "+", "-", "~", "*", "**", "@", "not", "await", "lambda", ";", ","}
    ),
    # enough for ``A: A[``, ``A.A(``, ``A=A(``, ``A for A in A(``
    connector_symbols=frozenset({"NAME", ":", "=", ".", ",", "->", "in", "for"}),
)


def _last_line(text: str) -> list[str]:
    """The physical lines of a newline lexeme's last logical line: the last line and the
    backslash-continuation lines right before it."""
    lines = text.split("\n")
    start = len(lines) - 1
    while start > 1 and lines[start - 1].strip(" \t\f") == "\\":
        start -= 1
    return lines[start:]


def line_indentation(text: str) -> Columns:
    """Indentation of the line a newline lexeme ends on, as CPython's tokenizer measures it:
    tabs to multiples of 8, and tabs as 1 (both are compared, to reject inconsistent tabs);
    when the line starts with backslash continuations, the column of the first backslash
    that is not at column 0 counts."""
    col = alt = continued = 0
    for line in _last_line(text):
        for ch in line:
            if ch == " ":
                col += 1
                alt += 1
            elif ch == "\t":
                col = (col // 8 + 1) * 8
                alt += 1
            elif ch == "\f":
                col = alt = 0
            elif ch == "\\":
                continued = continued or col
    return (continued, continued) if continued else (col, alt)


def _ends_in_continuation(text: str) -> bool:
    """Whether a newline lexeme's last line break is a backslash continuation."""
    return len(_last_line(text)) > 1


class PythonLayer(BaseLayer[PythonLayout]):
    """Python's layout on top of the grammar in ``grammars/python.lark``.

    Layout state is ``(indents, depth, line_open, fstrings, checks)``: the indentation stack
    above column 0 as ``(column, column_with_tabs_as_1)`` pairs, the bracket depth, whether a
    logical line has started since the last NEWLINE, the f-string mode stack (PEP 701's
    tokenizer modes, :mod:`~.fstring_modes`) and the state of the checks ``ast.parse`` makes
    after parsing (:mod:`~.ast_checks`). The lexer reads each mode with that mode's terminals
    only (:meth:`lex_start`).
    """

    #: CPython's tokenizer limits ("too many nested parentheses", "too many levels of indentation")
    MAX_BRACKET_DEPTH = 200
    MAX_INDENT_LEVELS = 99

    splits_at_top_level = True
    finish_vocabulary = PYTHON_FINISH
    __slots__ = (
        "_token_masks",
        "ast_checks",
        "bracket_mask",
        "continuation_mask",
        "crlf_end_adds_newline",
        "dedent",
        "fstring_modes",
        "hard_keyword_mask",
        "ignore_newline_mask",
        "indent",
        "name_mask",
        "newline",
        "newline_ids",
        "newline_mask",
        "old_fstrings",
        "plain_mask",
        "special_mask",
        "string_end_mask",
        "string_mask",
        "string_start_mask",
        "text_mask",
        "track_keywords",
        "version",
    )

    def __init__(self, grammar: Grammar, version: PythonVersion) -> None:
        super().__init__(grammar)
        self.version = version
        term = grammar.terminal_id
        self.newline = term("_NEWLINE")
        self.indent = (term("_INDENT"),)
        self.dedent = (term("_DEDENT"),)
        self.newline_ids = (self.newline,)
        self.newline_mask = 1 << self.newline
        modes = self.fstring_modes = FStringModes(
            grammar, self.dfa, version, self.newline_mask, self.ignore_mask
        )
        self.string_start_mask, self.string_end_mask = modes.start_mask, modes.end_mask
        self.text_mask = modes.text_mask
        self.name_mask = 1 << term("NAME") | 1 << term("CAPTURE_NAME")
        self.string_mask = 1 << term("STRING") | 1 << term("BYTES")
        dfa = self.dfa
        self.continuation_mask = dfa.accept[dfa.run("\\\n")] & self.ignore_mask
        # Keywords are never NAMEs; nor is '__debug__' where the grammar spells it as a word of
        # its own (before 3.9: see `any_name` in the grammar).
        hard = set(keyword.kwlist) | {"__debug__"}
        self.hard_keyword_mask = bitmask(i for i, t in enumerate(grammar.terminals) if t.literal in hard)
        self.bracket_delta = {
            1 << i: _BRACKETS[t.literal] for i, t in enumerate(grammar.terminals) if t.literal in _BRACKETS
        }
        #: the brackets' bits, tested before the symbol's mask is looked up in ``bracket_delta``
        #: (an AND that finds nothing is cheaper than hashing a 127-bit mask)
        self.bracket_mask = bitmask(i for i, t in enumerate(grammar.terminals) if t.literal in _BRACKETS)
        #: the terminals :meth:`end_symbol` has more to say of than the parser's step: ignored ones,
        #: line breaks, strings, f-string text and starts, brackets
        self.special_mask = (
            self.ignore_mask
            | self.newline_mask
            | self.string_mask
            | self.text_mask
            | self.string_start_mask
            | self.bracket_mask
        )
        #: the terminals whose end is the parser's step alone outside f-strings (:meth:`plain_ends`)
        self.plain_mask = ((1 << grammar.n_terminals) - 1) & ~self.special_mask
        #: what a line break may add to the allowed terminals, with the ignored ones
        self.ignore_newline_mask = self.ignore_mask | self.newline_mask
        # Files start at the beginning of a line: lex as if a newline came first, so leading
        # blank lines, comments and indentation are one NEWLINE lexeme like any other.
        self.initial_lexeme = dfa.restrict(dfa.run("\n"), self.newline_mask)
        # Before 3.12 the tokenizer's newline translation (translate_newlines in tokenizer.c)
        # appended a line break after a final \r\n, so a backslash may end such a file.
        self.crlf_end_adds_newline = version < (3, 12)
        #: f-strings lexed by the rules before PEP 701 (3.12)
        self.old_fstrings = version < (3, 12)
        self._token_masks: dict[int, int] = {}
        self.ast_checks = AstChecks(grammar, version, self.name_mask)
        #: whether every symbol moves the checks on (else only while the module's leading
        #: statements are read)
        self.track_keywords = self.ast_checks.keywords

    def _rebuilt(self) -> Self:
        assert self.version is not None
        return type(self)(self.grammar, self.version)

    def describe(self) -> str:
        assert self.version is not None
        return f"Python {format_version(self.version)}"

    def lex_start(self, layout: PythonLayout) -> int:
        """The lexer state a new symbol starts from: the mode of the innermost f-string frame."""
        return self.mode_start(layout[3], layout[1])

    def open_quotes(self, layout: PythonLayout) -> list[str]:
        """The quotes of the f-strings open in ``layout``, outermost first."""
        return open_quotes(layout[3])

    def mode_start(self, fstrings: Modes, depth: int) -> int:
        """The lexer state for f-string mode stack ``fstrings`` at bracket ``depth``."""
        return self.fstring_modes.start(fstrings, depth) if fstrings else self.dfa.start

    def initial_branch(self, file_start: bool = True) -> Branch[PythonLayout]:
        layout: PythonLayout = ((), 0, False, (), self.ast_checks.initial(file_start))
        return (self.recognizer.initial, layout, self.initial_lexeme, "\n", ())

    def indent_columns(self, layout: PythonLayout) -> list[int]:
        return [col for col, _ in layout[0]]

    def at_statement_boundary(self, branch: Branch[PythonLayout]) -> bool:
        _, layout, lexeme_state, text, guards = branch
        return (
            not guards
            and not layout[1]
            and not layout[3]
            and not self.ast_checks.in_leading_statements(layout[4])
            and text.endswith("\n")
            and self.token_mask(lexeme_state) == self.newline_mask
        )

    def open_layouts(self, indents: list[str], depth: int) -> list[PythonLayout]:
        """Layouts a text may start from in the middle of a line when what came before is
        unknown: ``depth`` brackets open; the line indented at any column that a line of the
        text itself uses (or 0), with every such column below it on the stack, since what
        came before may have opened any blocks it likes. ``indents`` are the text's newline
        lexemes that begin lines the tokenizer measures (not inside brackets or continued)."""
        columns = {(0, 0)}
        for lexeme in indents:
            columns.add(line_indentation(lexeme))
        checks = self.ast_checks.open_state(depth)
        layouts: set[PythonLayout] = {((), depth, True, (), checks)}
        for top in sorted(columns - {(0, 0)}):
            below: list[Columns] = []
            for col, alt in sorted(columns):
                if (
                    0 < col < top[0]
                    and alt < top[1]
                    and (not below or (col > below[-1][0] and alt > below[-1][1]))
                ):
                    below.append((col, alt))
            layouts.add((tuple(below) + (top,), depth, True, (), checks))
            if any(col != alt for col, alt in columns):  # tabs may make some columns below clash
                layouts.add(((top,), depth, True, (), checks))
        return sorted(layouts)

    def token_mask(self, lexeme_state: int) -> int:
        """Terminals a finished lexeme can be: hard keywords are never NAMEs."""
        mask = self._token_masks.get(lexeme_state)
        if mask is None:
            mask = self.dfa.accept[lexeme_state]
            if mask & self.hard_keyword_mask:
                mask &= ~self.name_mask
            self._token_masks[lexeme_state] = mask
        return mask

    def allowed(self, parser: EarleySet, layout: PythonLayout) -> int:
        extra = self.ignore_newline_mask if layout[1] or not layout[2] else self.ignore_mask
        return self.recognizer.expected_terminals(parser) | extra

    def end_symbol(
        self, parser: EarleySet, layout: PythonLayout, lexeme_state: int, text: str
    ) -> tuple[EarleySet, PythonLayout] | None:
        mask = self.token_mask(lexeme_state) & self.allowed(parser, layout)
        if not mask:
            return None
        fstrings = layout[3]
        if fstrings and self.old_fstrings and not self.fstring_modes.old_fstring_ok(fstrings, mask, text):
            return None
        # (one test spares the ones below for a name, a number or an operator: each test of a
        # mask wider than a machine word makes a new int)
        special = mask & self.special_mask
        if special and mask & self.ignore_mask:
            return parser, layout
        indents, depth, line_open, _, checks = layout
        if special and mask == self.newline_mask:
            if depth:
                return parser, layout
            if line_open:
                closed = self.recognizer.scan(parser, self.newline_ids)
                if closed is None:
                    return None
                parser = closed
                checks = self.ast_checks.statement_end(checks)
            return self._indentation(parser, indents, line_indentation(text), checks)
        if not text.isascii() and mask & self.name_mask and not identifier_ok(text):
            mask &= ~self.name_mask
            if not mask:
                return None
        delta = None
        if special:
            if mask & self.string_mask and not string_ok(text):
                mask &= ~self.string_mask
                if not mask:
                    return None
            if mask & self.text_mask and not self.fstring_modes.text_ok(fstrings, text):
                return None
            delta = self.bracket_delta.get(mask) if mask & self.bracket_mask else None
            if delta:
                depth += delta
                if depth < 0 or depth > self.MAX_BRACKET_DEPTH:
                    return None
        if fstrings or (special and mask & self.string_start_mask):  # (spares the call outside f-strings)
            modes = self.fstring_modes.after(fstrings, mask, text, depth)
            if modes is None:
                return None
            fstrings = modes
        after = self.recognizer.scan(parser, self.terminal_ids(mask))
        if after is None:
            return None
        if self.track_keywords or checks[0] != DONE:  # (the test spares the call)
            checked = self.ast_checks.after_symbol(checks, parser, after, mask, text, delta or 0)
            if checked is None:
                return None
            checks = checked
        return after, (indents, depth, True, fstrings, checks)

    def plain_ends(self, layout: PythonLayout) -> PlainEnds[PythonLayout]:
        """Outside f-strings and the AST checks, as :meth:`end_symbol` answers: a symbol that may
        be none of the special terminals (:attr:`special_mask`) or one bracket is scanned, and
        the line is open after it, a bracket's depth changed; inside brackets a line break
        changes nothing. Every next symbol starts in the DFA's start state."""
        indents, depth, line_open, fstrings, checks = layout
        if fstrings or self.track_keywords or checks[0] != DONE:
            return ()
        start = self.dfa.start
        same_depth = layout if line_open else (indents, depth, True, fstrings, checks)
        ends: list[PlainEnd[PythonLayout]] = [
            (self.plain_mask, True, same_depth, start, self._ignored_at(depth))
        ]
        for bracket, delta in self.bracket_delta.items():
            if 0 <= depth + delta <= self.MAX_BRACKET_DEPTH:
                after = (indents, depth + delta, True, fstrings, checks)
                ends.append((bracket, True, after, start, self._ignored_at(depth + delta)))
        if depth and self.newline_mask & (self.newline_mask - 1) == 0:  # (one terminal: see end_symbol)
            ends.append((self.newline_mask, False, layout, start, 0))
        return tuple(ends)

    def _ignored_at(self, depth: int) -> int:
        """What :meth:`allowed` adds to the parser's terminals on an open line at ``depth``."""
        return self.ignore_newline_mask if depth else self.ignore_mask

    def ignore_unchanged(self, layout: PythonLayout) -> bool:
        """Except inside an f-string lexed by the rules before 3.12, whose text is checked
        first (:meth:`end_symbol`)."""
        return not (layout[3] and self.old_fstrings)

    def end_reads_text(self, parser: EarleySet, layout: PythonLayout, lexeme_state: int) -> int:
        """What :meth:`end_symbol` reads of an ASCII text here, step for step: the text in an
        f-string, a line break outside brackets (its indentation) or while the AST checks read
        symbols; a string's escapes alone (``string_ok`` passes every string without a
        backslash); nothing of a name, a number or an operator elsewhere."""
        mask = self.token_mask(lexeme_state) & self.allowed(parser, layout)
        if not mask:
            return READS_NOTHING
        if layout[3]:
            return READS_TEXT
        if mask & self.ignore_mask:
            return READS_NOTHING
        if mask == self.newline_mask:
            return READS_NOTHING if layout[1] else READS_TEXT
        if self.track_keywords or layout[4][0] != DONE or mask & (self.text_mask | self.string_start_mask):
            return READS_TEXT
        return READS_ESCAPES if mask & self.string_mask else READS_NOTHING

    def next_terminals(self, parser: EarleySet, layout: PythonLayout, terminal: int) -> int:
        """Terminals that may be lexed after a lexeme ends as ``terminal`` here: a superset,
        since after a line break an INDENT and every number of DEDENTs are all tried."""
        bit = 1 << terminal
        if bit & self.ignore_mask:
            return self.allowed(parser, layout)
        rec = self.recognizer
        indents, depth, line_open, _, _ = layout
        if terminal == self.newline:
            if depth:
                return self.allowed(parser, layout)
            if line_open:
                closed = rec.scan(parser, self.newline_ids)
                if closed is None:
                    return 0
                parser = closed
            out = rec.expected_terminals(parser)
            indented = rec.scan(parser, self.indent)
            if indented is not None:
                out |= rec.expected_terminals(indented)
            for _ in indents:
                dedented = rec.scan(parser, self.dedent)
                if dedented is None:
                    break
                parser = dedented
                out |= rec.expected_terminals(parser)
            return out | self.ignore_mask | self.newline_mask
        depth += self.bracket_delta.get(bit, 0)
        if depth < 0:
            return 0
        after = rec.scan(parser, (terminal,))
        if after is None:
            return 0
        out = rec.expected_terminals(after) | self.ignore_mask
        return out | self.newline_mask if depth else out

    def next_modes(self, fstrings: Modes, mask: int, text: str, depth: int) -> Modes | None:
        """The f-string mode stack after a symbol (``depth``: the bracket depth after it); None
        when the symbol opens a field nested deeper than CPython allows."""
        if not fstrings and not mask & self.string_start_mask:
            return fstrings
        return self.fstring_modes.after(fstrings, mask, text, depth)

    def _indentation(
        self, parser: EarleySet, indents: Indents, columns: Columns, checks: AstState
    ) -> tuple[EarleySet, PythonLayout] | None:
        """Compare a new line's indentation with the stack; scan INDENT or DEDENTs."""
        col, alt = columns
        top, top_alt = indents[-1] if indents else (0, 0)
        if col == top:
            if alt != top_alt:
                return None  # inconsistent use of tabs and spaces
        elif col > top:
            if alt <= top_alt or len(indents) == self.MAX_INDENT_LEVELS:
                return None
            indented = self.recognizer.scan(parser, self.indent)
            if indented is None:
                return None
            parser, indents = indented, indents + (columns,)
        else:
            while indents and col < indents[-1][0]:
                indents = indents[:-1]
                dedented = self.recognizer.scan(parser, self.dedent)
                if dedented is None:
                    return None
                parser = dedented
            top, top_alt = indents[-1] if indents else (0, 0)
            if col != top or alt != top_alt:
                return None  # unindent does not match any outer indentation level
        return parser, (indents, 0, False, (), checks)

    def end_of_input(self, parser: EarleySet, layout: PythonLayout, lexeme_state: int, text: str) -> bool:
        mask = self.token_mask(lexeme_state) & self.allowed(parser, layout)
        if not mask or mask & self.continuation_mask:
            return False  # a backslash continuation may not end the file
        if mask & self.newline_mask and _ends_in_continuation(text):
            return False
        if not mask & self.newline_mask:
            ended = self.end_symbol(parser, layout, lexeme_state, text)
            if ended is None:
                return False
            parser, layout = ended
        indents, depth, line_open, fstrings, _ = layout
        if depth or fstrings:
            return False
        state: EarleySet | None = parser
        if line_open:
            state = self.recognizer.scan(parser, self.newline_ids)
        for _ in indents:
            if state is None:
                return False
            state = self.recognizer.scan(state, self.dedent)
        return state is not None and state.accepting
