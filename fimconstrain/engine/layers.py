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

from .earley import EarleySet, Recognizer
from .grammar import Grammar
from .regex_dfa import LexerDFA

_OPENERS = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


class PlainLayer:
    """Tokens go to the parser as lexed; ignored terminals are dropped."""

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        self.recognizer = Recognizer(grammar)
        self.dfa = LexerDFA([t.pattern for t in grammar.terminals], [t.flags for t in grammar.terminals])
        self.ignore_mask = _mask(i for i, t in enumerate(grammar.terminals) if t.ignored)
        #: a lexer state that knows every terminal, whatever the mode (to spell terminals)
        self.every_terminal_start = self.dfa.start
        self._ids: dict[int, tuple[int, ...]] = {}

    #: whether a suffix may be split before a top-level statement line (see context.py)
    splits_at_top_level = False
    #: terminals that end logical lines (none: this layer has no layout)
    newline_mask = 0
    #: terminals that open and close strings lexed in modes (none here)
    string_start_mask = string_end_mask = 0
    #: bracket terminal bitmask -> +1 (opens) or -1 (closes); none without layout
    bracket_delta: dict[int, int] = {}
    #: whether a file whose raw text ends in ``\r\n`` is read with one more line break
    crlf_end_adds_newline = False

    def indent_columns(self, layout) -> list[int]:
        """Columns of the open indentation levels, outermost first (none without layout)."""
        return []

    def initial_branch(self) -> tuple:
        return (self.recognizer.initial, None, self.dfa.start, "", ())

    def at_statement_boundary(self, branch: tuple) -> bool:
        """Whether ``branch`` stands at the start of a top-level line with nothing pending."""
        return False

    def lex_start(self, layout) -> int:
        """The lexer state a new symbol starts from (one mode: the DFA's start)."""
        return self.dfa.start

    def mode_start(self, modes: tuple, depth: int) -> int:
        """The lexer state for a mode stack (one mode: the DFA's start)."""
        return self.dfa.start

    def open_quotes(self, layout) -> list[str]:
        """The quotes of the strings lexed in modes that are open, outermost first (none)."""
        return []

    def next_modes(self, modes: tuple, mask: int, text: str, depth: int) -> tuple | None:
        """The mode stack after a symbol (one mode: nothing to keep)."""
        return modes

    def open_layouts(self, indents: list[str], depth: int) -> list:
        """Layouts a text may start from when what came before it is unknown and left
        ``depth`` brackets open; ``indents``: its newline lexemes that begin measured lines
        (see :mod:`fimconstrain.engine.refutation`)."""
        return [None]

    def terminal_ids(self, mask: int) -> tuple[int, ...]:
        """The terminal ids of a bitmask (memoised)."""
        ids = self._ids.get(mask)
        if ids is None:
            ids = self._ids[mask] = tuple(i for i in range(mask.bit_length()) if mask >> i & 1)
        return ids

    def token_mask(self, lexeme_state: int) -> int:
        """Terminals a finished lexeme can be."""
        return self.dfa.accept[lexeme_state]

    def allowed(self, parser: EarleySet, layout) -> int:
        return self.recognizer.expected_terminals(parser) | self.ignore_mask

    def end_symbol(self, parser: EarleySet, layout, lexeme_state: int, text: str):
        mask = self.token_mask(lexeme_state) & self.allowed(parser, layout)
        if not mask:
            return None
        if mask & self.ignore_mask:
            return parser, layout
        parser = self.recognizer.scan(parser, self.terminal_ids(mask))
        return None if parser is None else (parser, layout)

    def end_of_input(self, parser: EarleySet, layout, lexeme_state: int, text: str) -> bool:
        if lexeme_state == self.dfa.start:
            return parser.accepting
        ended = self.end_symbol(parser, layout, lexeme_state, text)
        return ended is not None and ended[0].accepting


def _mask(indices) -> int:
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


def _indent_columns(text: str) -> tuple[int, int]:
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


class PythonLayer(PlainLayer):
    """Python's layout on top of the grammar in ``grammars/python.lark``.

    Layout state is ``(indents, depth, line_open, fstrings)``: the indentation stack above
    column 0 as ``(column, column_with_tabs_as_1)`` pairs, the bracket depth, whether a logical
    line has started since the last NEWLINE, and the f-string mode stack (PEP 701's tokenizer
    modes). A frame is ``(_TEXT, quote, raw)`` inside an f-string's literal text, or
    ``(_FIELD | _SPEC, quote, depth)`` inside a replacement field opened at bracket ``depth``
    (its expression, or its format spec), ``quote`` being the innermost string's. The lexer
    reads each mode with that mode's terminals only (:meth:`lex_start`).
    """

    INITIAL_LAYOUT = ((), 0, False, ())
    #: CPython's tokenizer limits ("too many nested parentheses", "too many levels of indentation")
    MAX_BRACKET_DEPTH = 200
    MAX_INDENT_LEVELS = 99

    def __init__(self, grammar: Grammar, version: tuple[int, int]):
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

        def bits(*wanted) -> int:
            return _mask(names[n] if n in names else literal[n] for n in wanted if n in names or n in literal)

        kinds = {"'": "S", '"': "D", "'''": "TS", '"""': "TD"}
        in_fstrings = bits(
            "FCONVERSION",
            "FSPEC_START",
            *(
                f"{p}{k}"
                for k in kinds.values()
                for p in ("FTEXT_", "RFTEXT_", "FQUOTES_", "FEND_", "FSPEC_")
            ),
        )
        ordinary = (1 << len(grammar.terminals)) - 1 & ~in_fstrings
        full = self.every_terminal_start
        dfa.start = dfa.restrict(full, ordinary)
        self.field_start = dfa.restrict(
            full, ordinary & ~bits(":", ":=") | bits("FSPEC_START", "FCONVERSION")
        )
        self.text_starts = {}
        self.spec_starts = {}
        for quote, kind in kinds.items():
            quotes = bits(f"FQUOTES_{kind}")
            for raw in (False, True):
                text = bits(("RFTEXT_" if raw else "FTEXT_") + kind, f"FEND_{kind}", "{") | quotes
                self.text_starts[quote, raw] = dfa.restrict(full, text)
            self.spec_starts[quote] = dfa.restrict(full, bits(f"FSPEC_{kind}", "{", "}") | quotes)
        self.string_start_mask = bits("FSTRING_START", "TSTRING_START")
        self.string_end_mask = bits(*(f"FEND_{k}" for k in kinds.values()))
        self.text_mask = bits(*(f"{p}{k}" for k in kinds.values() for p in ("FTEXT_", "RFTEXT_")))
        self.spec_start_bit = bits("FSPEC_START")
        self.conversion_bit = bits("FCONVERSION")
        self.open_brace = bits("{")
        self.close_brace = bits("}")

    splits_at_top_level = True

    def lex_start(self, layout) -> int:
        """The lexer state a new symbol starts from: the mode of the innermost f-string frame."""
        return self.mode_start(layout[3], layout[1])

    def open_quotes(self, layout) -> list[str]:
        """The quotes of the f-strings open in ``layout``, outermost first."""
        return [frame[1] for frame in layout[3] if frame[0] == _TEXT]

    def mode_start(self, fstrings: tuple, depth: int) -> int:
        """The lexer state for f-string mode stack ``fstrings`` at bracket ``depth``."""
        if not fstrings:
            return self.dfa.start
        kind, quote, extra = fstrings[-1]
        if kind == _TEXT:
            return self.text_starts[quote, extra]
        if kind == _SPEC:
            return self.spec_starts[quote]
        return self.field_start if depth == extra else self.dfa.start  # _FIELD, _CONVERTED

    def initial_branch(self) -> tuple:
        return (self.recognizer.initial, self.INITIAL_LAYOUT, self.initial_lexeme, "\n", ())

    def indent_columns(self, layout) -> list[int]:
        return [col for col, _ in layout[0]]

    def at_statement_boundary(self, branch: tuple) -> bool:
        _, layout, lexeme_state, text, guards = branch
        return (
            not guards
            and not layout[1]
            and not layout[3]
            and text.endswith("\n")
            and self.token_mask(lexeme_state) == self.newline_mask
        )

    def open_layouts(self, indents: list[str], depth: int) -> list:
        """Layouts a text may start from in the middle of a line when what came before is
        unknown: ``depth`` brackets open; the line indented at any column that a line of the
        text itself uses (or 0), with every such column below it on the stack, since what
        came before may have opened any blocks it likes. ``indents`` are the text's newline
        lexemes that begin lines the tokenizer measures (not inside brackets or continued)."""
        columns = {(0, 0)}
        for lexeme in indents:
            columns.add(_indent_columns(lexeme))
        layouts = {((), depth, True, ())}
        for top in sorted(columns - {(0, 0)}):
            below = []
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

    def allowed(self, parser: EarleySet, layout) -> int:
        mask = self.recognizer.expected_terminals(parser) | self.ignore_mask
        if layout[1] or not layout[2]:
            mask |= self.newline_mask
        return mask

    def end_symbol(self, parser: EarleySet, layout, lexeme_state: int, text: str):
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
                parser = self.recognizer.scan(parser, self.newline_ids)
                if parser is None:
                    return None
            return self._indentation(parser, indents, _indent_columns(text))
        if mask & self.name_mask and not text.isascii() and not _identifier_ok(text):
            mask &= ~self.name_mask
            if not mask:
                return None
        if mask & self.string_mask and not _string_ok(text):
            mask &= ~self.string_mask
            if not mask:
                return None
        if mask & self.text_mask and not _fstring_text_ok(text, fstrings[-1]):
            return None
        delta = self.bracket_delta.get(mask)
        if delta:
            depth += delta
            if depth < 0 or depth > self.MAX_BRACKET_DEPTH:
                return None
        if fstrings or mask & self.string_start_mask:  # (the test spares the call outside f-strings)
            fstrings = self.next_modes(fstrings, mask, text, depth)
            if fstrings is None:
                return None
        parser = self.recognizer.scan(parser, self.terminal_ids(mask))
        if parser is None:
            return None
        return parser, (indents, depth, True, fstrings)

    def next_modes(self, fstrings: tuple, mask: int, text: str, depth: int) -> tuple | None:
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

    def _old_fstring_ok(self, fstrings: tuple, mask: int, text: str) -> bool:
        """Before 3.12 an f-string was one string token, parsed again inside: its fields hold no
        backslash, no comment, no line break in a one-quote string, no quote of an enclosing
        string, and a conversion is followed at once by ':' or '}'."""
        kind = fstrings[-1][0]
        frames = fstrings if kind in (_FIELD, _CONVERTED) else fstrings[:-1]
        for frame in frames:
            if frame[0] == _TEXT and (frame[1] in text if len(frame[1]) == 3 else frame[1][0] in text):
                return False
        if kind in (_TEXT, _SPEC):
            return True
        if "\\" in text or (len(fstrings[-1][1]) == 1 and "\n" in text):
            return False
        if mask & self.newline_mask and "#" in text:  # a comment (a '#' in a string is fine)
            return False
        return not (kind == _CONVERTED and mask & self.ignore_mask)

    def _indentation(self, parser: EarleySet, indents: tuple, columns: tuple[int, int]):
        """Compare a new line's indentation with the stack; scan INDENT or DEDENTs."""
        col, alt = columns
        top, top_alt = indents[-1] if indents else (0, 0)
        if col == top:
            if alt != top_alt:
                return None  # inconsistent use of tabs and spaces
        elif col > top:
            if alt <= top_alt or len(indents) == self.MAX_INDENT_LEVELS:
                return None
            parser = self.recognizer.scan(parser, self.indent)
            if parser is None:
                return None
            indents = indents + (columns,)
        else:
            while indents and col < indents[-1][0]:
                indents = indents[:-1]
                parser = self.recognizer.scan(parser, self.dedent)
                if parser is None:
                    return None
            top, top_alt = indents[-1] if indents else (0, 0)
            if col != top or alt != top_alt:
                return None  # unindent does not match any outer indentation level
        return parser, (indents, 0, False, ())

    def end_of_input(self, parser: EarleySet, layout, lexeme_state: int, text: str) -> bool:
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
        if line_open:
            parser = self.recognizer.scan(parser, self.newline_ids)
        for _ in indents:
            if parser is None:
                return False
            parser = self.recognizer.scan(parser, self.dedent)
        return parser is not None and parser.accepting


def _identifier_ok(text: str) -> bool:
    """CPython's check on non-ASCII names, on the characters as written (a combining mark
    cannot start a name; ``¹`` is no identifier character even though NFKC makes it ``1``)."""
    return text.isidentifier()


def _fstring_text_ok(text: str, frame: tuple) -> bool:
    """CPython's checks on the escapes of an f-string's literal text (raw text has none): the
    text, braces unescaped, must be a valid plain string literal. A lone backslash before a
    field is a character of its own (an invalid escape: a warning, not an error)."""
    if frame[2] or "\\" not in text:
        return True
    body = text.replace("{{", "{").replace("}}", "}")
    if (len(body) - len(body.rstrip("\\"))) % 2:
        body = body[:-1]
    return _string_ok(frame[1] + body + frame[1])


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
