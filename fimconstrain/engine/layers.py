"""Language layers: what happens between the lexer and the parser when a symbol ends.

:class:`PlainLayer` serves any grammar whose tokens go straight to the parser (JSON, for one).
:class:`PythonLayer` adds Python's layout: INDENT/DEDENT from an indentation stack, bracket
depth (no logical lines inside brackets), backslash continuations, CPython's string checks.
Both keep their state as small immutable values so branches can share them.
"""

from __future__ import annotations

import ast
import keyword
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Generic

from .earley import EarleySet, Recognizer
from .grammar import Grammar
from .layer_protocol import Branch, LayoutT, Modes
from .regex_dfa import LexerDFA
from .versions import PythonVersion, format_version

_OPENERS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


class BaseLayer(ABC, Generic[LayoutT]):
    """What layers share: the grammar's recognizer and lexer automaton, terminal classes, and
    the behaviour of a language without layout, for layouts of type ``LayoutT`` (a subclass
    says where a file starts and may override the rest). Implements
    :class:`~fimconstrain.engine.layer_protocol.Layer`."""

    #: whether a suffix may be split before a top-level statement line (see right_quotient.py)
    splits_at_top_level = False
    #: terminals that end logical lines (none: no layout)
    newline_mask = 0
    #: the line-break terminal (-1: none) and what is scanned for it, an INDENT and a DEDENT
    newline = -1
    newline_ids: tuple[int, ...] = ()
    indent: tuple[int, ...] = ()
    dedent: tuple[int, ...] = ()
    #: string literal terminals (none told apart)
    string_mask = 0
    #: terminals that open and close strings lexed in modes (none here)
    string_start_mask = string_end_mask = 0
    #: whether a file whose raw text ends in ``\r\n`` is read with one more line break
    crlf_end_adds_newline = False
    #: the target Python version (None: a language without versions)
    version: PythonVersion | None = None

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.recognizer = Recognizer(grammar)
        self.dfa = LexerDFA([t.pattern for t in grammar.terminals], [t.flags for t in grammar.terminals])
        self.ignore_mask = _mask(i for i, t in enumerate(grammar.terminals) if t.ignored)
        #: a lexer state that knows every terminal, whatever the mode (to spell terminals)
        self.every_terminal_start = self.dfa.start
        #: the lexer state of the lexeme a file starts inside (none: the DFA's start)
        self.initial_lexeme = self.dfa.start
        #: bracket terminal bitmask -> +1 (opens) or -1 (closes); none without layout
        self.bracket_delta: dict[int, int] = {}
        self._ids: dict[int, tuple[int, ...]] = {}

    @abstractmethod
    def initial_branch(self) -> Branch[LayoutT]:
        """The branch at the start of a file."""

    @abstractmethod
    def open_layouts(self, indents: list[str], depth: int) -> list[LayoutT]:
        """Layouts a text may start from when what came before it is unknown and left
        ``depth`` brackets open; ``indents``: its newline lexemes that begin measured lines
        (see :mod:`fimconstrain.engine.refutation`)."""

    def describe(self) -> str:
        """The language, in words, for messages."""
        return f"another grammar ({type(self).__name__})"

    def indent_columns(self, layout: LayoutT) -> list[int]:
        """Columns of the open indentation levels, outermost first (none without layout)."""
        return []

    def at_statement_boundary(self, branch: Branch[LayoutT]) -> bool:
        """Whether ``branch`` stands at the start of a top-level line with nothing pending."""
        return False

    def lex_start(self, layout: LayoutT) -> int:
        """The lexer state a new symbol starts from (one mode: the DFA's start)."""
        return self.dfa.start

    def mode_start(self, modes: Modes, depth: int) -> int:
        """The lexer state for a mode stack (one mode: the DFA's start)."""
        return self.dfa.start

    def open_quotes(self, layout: LayoutT) -> list[str]:
        """The quotes of the strings lexed in modes that are open, outermost first (none)."""
        return []

    def next_modes(self, modes: Modes, mask: int, text: str, depth: int) -> Modes | None:
        """The mode stack after a symbol (one mode: nothing to keep)."""
        return modes

    def terminal_ids(self, mask: int) -> tuple[int, ...]:
        """The terminal ids of a bitmask (memoised)."""
        ids = self._ids.get(mask)
        if ids is None:
            ids = self._ids[mask] = tuple(i for i in range(mask.bit_length()) if mask >> i & 1)
        return ids

    def token_mask(self, lexeme_state: int) -> int:
        """Terminals a finished lexeme can be."""
        return self.dfa.accept[lexeme_state]

    def allowed(self, parser: EarleySet, layout: LayoutT) -> int:
        """Bitmask of terminals that may be lexed next in this parser/layout state."""
        return self.recognizer.expected_terminals(parser) | self.ignore_mask

    def end_symbol(
        self, parser: EarleySet, layout: LayoutT, lexeme_state: int, text: str
    ) -> tuple[EarleySet, LayoutT] | None:
        """Feed the symbol that just ended; ``(parser, layout)`` after it, or None if rejected."""
        mask = self.token_mask(lexeme_state) & self.allowed(parser, layout)
        if not mask:
            return None
        if mask & self.ignore_mask:
            return parser, layout
        after = self.recognizer.scan(parser, self.terminal_ids(mask))
        return None if after is None else (after, layout)

    def end_of_input(self, parser: EarleySet, layout: LayoutT, lexeme_state: int, text: str) -> bool:
        """Whether ending the input here (after this last symbol) gives a complete program."""
        if lexeme_state == self.dfa.start:
            return parser.accepting
        ended = self.end_symbol(parser, layout, lexeme_state, text)
        return ended is not None and ended[0].accepting

    def next_terminals(self, parser: EarleySet, layout: LayoutT, terminal: int) -> int:
        """Terminals that may be lexed after a lexeme ends as ``terminal`` here."""
        if 1 << terminal & self.ignore_mask:
            return self.allowed(parser, layout)
        after = self.recognizer.scan(parser, (terminal,))
        return 0 if after is None else self.recognizer.expected_terminals(after) | self.ignore_mask


class PlainLayer(BaseLayer[None]):
    """Tokens go to the parser as lexed; ignored terminals are dropped. No layout (``None``)."""

    def initial_branch(self) -> Branch[None]:
        return (self.recognizer.initial, None, self.dfa.start, "", ())

    def open_layouts(self, indents: list[str], depth: int) -> list[None]:
        return [None]


def _mask(indices: Iterable[int]) -> int:
    mask = 0
    for i in indices:
        mask |= 1 << i
    return mask


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


#: f-string mode frames (the fourth part of a layout): literal text, a replacement field's
#: expression, its format spec, and (before 3.12) the field right after its conversion
_TEXT, _FIELD, _SPEC, _CONVERTED = 0, 1, 2, 3

#: an indentation level: ``(column, column with tabs as 1)``
Columns = tuple[int, int]
#: the open indentation levels above column 0, outermost first
Indents = tuple[Columns, ...]
#: Python's layout: ``(indents, bracket depth, line_open, f-string mode stack)``
PythonLayout = tuple[Indents, int, bool, Modes]


class PythonLayer(BaseLayer[PythonLayout]):
    """Python's layout on top of the grammar in ``grammars/python.lark``.

    Layout state is ``(indents, depth, line_open, fstrings)``: the indentation stack above
    column 0 as ``(column, column_with_tabs_as_1)`` pairs, the bracket depth, whether a logical
    line has started since the last NEWLINE, and the f-string mode stack (PEP 701's tokenizer
    modes). A frame is ``(_TEXT, quote, raw)`` inside an f-string's literal text, or
    ``(_FIELD | _SPEC, quote, depth)`` inside a replacement field opened at bracket ``depth``
    (its expression, or its format spec), ``quote`` being the innermost string's. The lexer
    reads each mode with that mode's terminals only (:meth:`lex_start`).
    """

    INITIAL_LAYOUT: PythonLayout = ((), 0, False, ())
    #: CPython's tokenizer limits ("too many nested parentheses", "too many levels of indentation")
    MAX_BRACKET_DEPTH = 200
    MAX_INDENT_LEVELS = 99

    version: PythonVersion

    def __init__(self, grammar: Grammar, version: PythonVersion) -> None:
        super().__init__(grammar)
        self.version = version
        term = grammar.terminal_id
        self._init_fstring_modes(grammar)
        self.newline = term("_NEWLINE")
        self.indent = (term("_INDENT"),)
        self.dedent = (term("_DEDENT"),)
        self.newline_ids = (self.newline,)
        self.newline_mask = 1 << self.newline
        self.name_mask = 1 << term("NAME") | 1 << term("CAPTURE_NAME")
        self.string_mask = 1 << term("STRING") | 1 << term("BYTES")
        dfa = self.dfa
        self.continuation_mask = dfa.accept[dfa.run("\\\n")] & self.ignore_mask
        hard = set(keyword.kwlist)
        self.hard_keyword_mask = _mask(i for i, t in enumerate(grammar.terminals) if t.literal in hard)
        self.bracket_delta = {
            1 << i: _OPENERS[t.literal] for i, t in enumerate(grammar.terminals) if t.literal in _OPENERS
        }
        # Files start at the beginning of a line: lex as if a newline came first, so leading
        # blank lines, comments and indentation are one NEWLINE lexeme like any other.
        self.initial_lexeme = dfa.restrict(dfa.run("\n"), self.newline_mask)
        self.stack_limit_in_specs = 2 if version >= (3, 12) else 1
        # Before 3.12 the tokenizer's newline translation (translate_newlines in tokenizer.c)
        # appended a line break after a final \r\n, so a backslash may end such a file.
        self.crlf_end_adds_newline = version < (3, 12)
        self._token_masks: dict[int, int] = {}

    def _init_fstring_modes(self, grammar: Grammar) -> None:
        """One lexer start state per f-string mode, each knowing only that mode's terminals.
        The DFA's own ``start`` becomes the mode outside f-strings, so everything that lexes
        ordinary code (the finish search, the suffix refutation, the mask store) sees it."""
        dfa, names = self.dfa, {t.name: i for i, t in enumerate(grammar.terminals)}
        literal = {t.literal: i for i, t in enumerate(grammar.terminals) if t.literal is not None}

        def bits(*wanted: str) -> int:
            return _mask(names[n] if n in names else literal[n] for n in wanted if n in names or n in literal)

        kinds = {"'": "S", '"': "D", "'''": "TS", '"""': "TD"}
        in_fstrings = bits(
            "FCONVERSION",
            "FSPEC_START",
            *(
                f"{p}{k}"
                for k in kinds.values()
                for p in ("FTEXT_", "RFTEXT_", "FQUOTES_", "FEND_", "FSPEC_", "RFSPEC_")
            ),
        )
        ordinary = (1 << len(grammar.terminals)) - 1 & ~in_fstrings
        full = self.every_terminal_start
        dfa.start = dfa.restrict(full, ordinary)
        self.field_start = dfa.restrict(
            full, ordinary & ~bits(":", ":=") | bits("FSPEC_START", "FCONVERSION")
        )
        self.text_starts: dict[tuple[str, int], int] = {}  # (quote, raw) -> lexer state
        self.spec_starts: dict[tuple[str, int], int] = {}  # (quote, raw) -> lexer state
        for quote, kind in kinds.items():
            quotes = bits(f"FQUOTES_{kind}")
            for raw in (False, True):
                r = "R" if raw else ""
                text = bits(f"{r}FTEXT_{kind}", f"FEND_{kind}", "{") | quotes
                self.text_starts[quote, raw] = dfa.restrict(full, text)
                self.spec_starts[quote, raw] = dfa.restrict(full, bits(f"{r}FSPEC_{kind}", "{", "}") | quotes)
        self.string_start_mask = bits("FSTRING_START", "TSTRING_START")
        self.string_end_mask = bits(*(f"FEND_{k}" for k in kinds.values()))
        # literal text whose escapes CPython decodes (raw text's it does not)
        self.text_mask = bits(*(f"{p}{k}" for k in kinds.values() for p in ("FTEXT_", "RFTEXT_", "FSPEC_")))
        self.spec_start_bit = bits("FSPEC_START")
        self.conversion_bit = bits("FCONVERSION")
        self.open_brace = bits("{")
        self.close_brace = bits("}")

    splits_at_top_level = True

    def describe(self) -> str:
        return f"Python {format_version(self.version)}"

    def lex_start(self, layout: PythonLayout) -> int:
        """The lexer state a new symbol starts from: the mode of the innermost f-string frame."""
        return self.mode_start(layout[3], layout[1])

    def open_quotes(self, layout: PythonLayout) -> list[str]:
        """The quotes of the f-strings open in ``layout``, outermost first."""
        return [frame[1] for frame in layout[3] if frame[0] == _TEXT]

    def mode_start(self, fstrings: Modes, depth: int) -> int:
        """The lexer state for f-string mode stack ``fstrings`` at bracket ``depth``."""
        if not fstrings:
            return self.dfa.start
        kind, quote, extra = fstrings[-1]
        if kind == _TEXT:
            return self.text_starts[quote, extra]
        if kind == _SPEC:
            return self.spec_starts[quote, _raw(fstrings)]
        return self.field_start if depth == extra else self.dfa.start  # _FIELD, _CONVERTED

    def initial_branch(self) -> Branch[PythonLayout]:
        return (self.recognizer.initial, self.INITIAL_LAYOUT, self.initial_lexeme, "\n", ())

    def indent_columns(self, layout: PythonLayout) -> list[int]:
        return [col for col, _ in layout[0]]

    def at_statement_boundary(self, branch: Branch[PythonLayout]) -> bool:
        _, layout, lexeme_state, text, guards = branch
        return (
            not guards
            and not layout[1]
            and not layout[3]
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
        layouts: set[PythonLayout] = {((), depth, True, ())}
        for top in sorted(columns - {(0, 0)}):
            below: list[Columns] = []
            for col, alt in sorted(columns):
                if (
                    0 < col < top[0]
                    and alt < top[1]
                    and (not below or (col > below[-1][0] and alt > below[-1][1]))
                ):
                    below.append((col, alt))
            layouts.add((tuple(below) + (top,), depth, True, ()))
            if any(col != alt for col, alt in columns):  # tabs may make some columns below clash
                layouts.add(((top,), depth, True, ()))
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
        mask = self.recognizer.expected_terminals(parser) | self.ignore_mask
        if layout[1] or not layout[2]:
            mask |= self.newline_mask
        return mask

    def end_symbol(
        self, parser: EarleySet, layout: PythonLayout, lexeme_state: int, text: str
    ) -> tuple[EarleySet, PythonLayout] | None:
        mask = self.token_mask(lexeme_state) & self.allowed(parser, layout)
        if not mask:
            return None
        fstrings = layout[3]
        if fstrings and self.version < (3, 12) and not self._old_fstring_ok(fstrings, mask, text):
            return None
        if mask & self.ignore_mask:
            return parser, layout
        indents, depth, line_open, _ = layout
        if mask == self.newline_mask:
            if depth:
                return parser, layout
            if line_open:
                closed = self.recognizer.scan(parser, self.newline_ids)
                if closed is None:
                    return None
                parser = closed
            return self._indentation(parser, indents, line_indentation(text))
        if mask & self.name_mask and not text.isascii() and not _identifier_ok(text):
            mask &= ~self.name_mask
            if not mask:
                return None
        if mask & self.string_mask and not _string_ok(text):
            mask &= ~self.string_mask
            if not mask:
                return None
        if mask & self.text_mask and not _fstring_text_ok(text, quote=fstrings[-1][1], raw=_raw(fstrings)):
            return None
        delta = self.bracket_delta.get(mask)
        if delta:
            depth += delta
            if depth < 0 or depth > self.MAX_BRACKET_DEPTH:
                return None
        if fstrings or mask & self.string_start_mask:  # (the test spares the call outside f-strings)
            modes = self.next_modes(fstrings, mask, text, depth)
            if modes is None:
                return None
            fstrings = modes
        after = self.recognizer.scan(parser, self.terminal_ids(mask))
        if after is None:
            return None
        return after, (indents, depth, True, fstrings)

    def next_terminals(self, parser: EarleySet, layout: PythonLayout, terminal: int) -> int:
        """Terminals that may be lexed after a lexeme ends as ``terminal`` here: a superset,
        since after a line break an INDENT and every number of DEDENTs are all tried."""
        bit = 1 << terminal
        if bit & self.ignore_mask:
            return self.allowed(parser, layout)
        rec = self.recognizer
        indents, depth, line_open, _ = layout
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
        if mask & self.string_start_mask:
            quote = text.lstrip("fFrRtT")
            return fstrings + ((_TEXT, quote, "r" in text[: -len(quote)].lower()),)
        kind, quote, extra = fstrings[-1]
        if mask & self.string_end_mask:
            return fstrings[:-1]
        if mask == self.open_brace and kind in (_TEXT, _SPEC):
            if kind == _SPEC:  # a field in a format spec: only so many levels
                nested = 0
                for frame in reversed(fstrings):
                    if frame[0] == _TEXT:
                        break
                    nested += frame[0] == _SPEC
                if nested > self.stack_limit_in_specs:
                    return None
            return fstrings + ((_FIELD, quote, depth),)
        if mask == self.close_brace and (kind == _SPEC or depth + 1 == extra):
            return fstrings[:-1]
        if mask == self.spec_start_bit:
            return fstrings[:-1] + ((_SPEC, quote, extra),)
        if mask == self.conversion_bit and self.version < (3, 12):
            return fstrings[:-1] + ((_CONVERTED, quote, extra),)
        return fstrings

    def _old_fstring_ok(self, fstrings: Modes, mask: int, text: str) -> bool:
        """Before 3.12 an f-string was one string token, parsed again inside: its fields hold no
        backslash (nor do strings nested in them), no comment, no line break inside a one-quote
        string (however deeply nested), no quote of an enclosing string, and a conversion is
        followed at once by ':' or '}'."""
        kind = fstrings[-1][0]
        frames = fstrings if kind in (_FIELD, _CONVERTED) else fstrings[:-1]
        for frame in frames:
            if frame[0] == _TEXT and (frame[1] in text if len(frame[1]) == 3 else frame[1][0] in text):
                return False
        in_field = in_one_quote_field = one_quote = False
        for frame in frames:
            if frame[0] == _TEXT:
                one_quote = one_quote or len(frame[1]) == 1
            elif frame[0] in (_FIELD, _CONVERTED):
                in_field, in_one_quote_field = True, in_one_quote_field or one_quote
        if (in_field and "\\" in text) or (in_one_quote_field and "\n" in text):
            return False
        if kind in (_TEXT, _SPEC):
            return True
        if mask & self.newline_mask and "#" in text:  # a comment (a '#' in a string is fine)
            return False
        return not (kind == _CONVERTED and mask & self.ignore_mask)

    def _indentation(
        self, parser: EarleySet, indents: Indents, columns: Columns
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
        return parser, (indents, 0, False, ())

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
        indents, depth, line_open, fstrings = layout
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


def _identifier_ok(text: str) -> bool:
    """CPython's check on non-ASCII names, on the characters as written (a combining mark
    cannot start a name; ``¹`` is no identifier character even though NFKC makes it ``1``)."""
    return text.isidentifier()


def _raw(fstrings: Modes) -> int:
    """Whether the innermost f-string open in ``fstrings`` is raw (its text frame says)."""
    return next(frame[2] for frame in reversed(fstrings) if frame[0] == _TEXT)


def _fstring_text_ok(text: str, quote: str, raw: int) -> bool:
    """CPython's checks on the escapes of an f-string's literal text or format spec (raw text
    has none): the text, braces unescaped, must be a valid plain string literal. A lone
    backslash before a field is a character of its own (an invalid escape: a warning, not an
    error)."""
    if raw or "\\" not in text:
        return True
    body = text.replace("{{", "{").replace("}}", "}")
    if (len(body) - len(body.rstrip("\\"))) % 2:
        body = body[:-1]
    return _string_ok(quote + body + quote)


def _string_ok(text: str) -> bool:
    """CPython rejects some string lexemes after tokenizing them: bad escapes such as
    ``'\\x1'`` and non-ASCII bytes."""
    quote = min((i for i in (text.find("'"), text.find('"')) if i >= 0), default=0)
    prefix = text[:quote].lower()
    if "\\" not in text and ("b" not in prefix or text.isascii()):
        return True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text, mode="eval")
        except (SyntaxError, ValueError):
            return False
    return True
