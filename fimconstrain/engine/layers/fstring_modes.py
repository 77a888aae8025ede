"""The lexing modes of f- and t-strings (PEP 701): which terminals the lexer knows inside a
string's literal text, a replacement field or its format spec, and the mode stack each symbol
leaves behind. Before 3.12 an f-string was one token parsed again inside: the checks that
made are here too.

The Python layer (:mod:`~.python_layer`) keeps the mode stack as the fourth part of its
layout and asks this module for the lexer state each mode starts from.
"""

from __future__ import annotations

import re

from ..automata.grammar import Grammar
from ..automata.regex_dfa import LexerDFA
from ..versions import PythonVersion
from .base_layer import bitmask
from .layer_protocol import Modes
from .lexeme_checks import fstring_text_ok

#: mode frames: literal text, a replacement field's expression, its format spec, and (before
#: 3.12) the field right after its conversion. A frame is ``(_TEXT, quote, raw)`` or
#: ``(_FIELD | _SPEC | _CONVERTED, quote, bracket depth the field opened at)``, ``quote``
#: being the innermost string's.
_TEXT, _FIELD, _SPEC, _CONVERTED = 0, 1, 2, 3
#: 3.12 and 3.13, a one-quote string's format spec: after a line break in its text (CPython's
#: tokenizer has gone back to its regular mode, so only blanks, comments and fields may follow
#: before the closing brace), and (3.13) after a field in it (a line break no longer may come)
_SPEC_LINES, _SPEC_AFTER_FIELD = 4, 5
_SPECS = (_SPEC, _SPEC_LINES, _SPEC_AFTER_FIELD)

#: what CPython's regular mode skips: blanks, line breaks, comments (ended by a line break) and
#: backslash continuations
_REGULAR_BLANKS = re.compile(r"(?:[ \t\f\n]|#[^\n]*\n|\\\n)*")

#: each quote's part of the grammar's f-string terminal names (``FTEXT_S``, ``FEND_TD``)
_KINDS = {"'": "S", '"': "D", "'''": "TS", '"""': "TD"}


class FStringModes:
    """One lexer start state per f-string mode, each knowing only that mode's terminals, and
    the mode stack after each symbol. Building it makes the DFA's own ``start`` the mode
    outside f-strings, so everything that lexes ordinary code (the finish search, the suffix
    refutation, the mask store) sees it."""

    def __init__(
        self, grammar: Grammar, dfa: LexerDFA, version: PythonVersion, newline_mask: int, ignore_mask: int
    ) -> None:
        self.dfa = dfa
        self.newline_mask, self.ignore_mask = newline_mask, ignore_mask
        #: a field nested in a format spec may go this deep (CPython's tokenizer mode stack)
        self.stack_limit_in_specs = 2 if version >= (3, 12) else 1
        #: 3.12 on, a debugging ``=`` in a field nested two format specs deep (``f"{x:{y:{z=}}}"``)
        #: makes CPython's parser fail ("field 'value' is required for Constant", gh-121130: one
        #: spec deep was mended in 3.13 and later 3.12 releases, two deep still fails at 3.14.2)
        self.debug_spec_limit = 2 if version >= (3, 12) else None
        #: before 3.12 a conversion (``!r``) is followed at once by ``:`` or ``}``
        self.conversion_closes_field = version < (3, 12)
        #: 3.12 and 3.13 read a line break in a one-quote format spec as its end
        self.spec_lines = (3, 12) <= version < (3, 14)
        #: 3.13 allows no line break in a one-quote format spec after a field in it
        self.spec_field_ends_lines = version == (3, 13)
        names = {t.name: i for i, t in enumerate(grammar.terminals)}
        literal = {t.literal: i for i, t in enumerate(grammar.terminals) if t.literal is not None}

        def bits(*wanted: str) -> int:
            return bitmask(
                names[n] if n in names else literal[n] for n in wanted if n in names or n in literal
            )

        in_fstrings = bits(
            "FCONVERSION",
            "FSPEC_START",
            *(
                f"{p}{k}"
                for k in _KINDS.values()
                for p in ("FTEXT_", "RFTEXT_", "FQUOTES_", "FEND_", "FSPEC_", "RFSPEC_")
            ),
        )
        ordinary = (1 << len(grammar.terminals)) - 1 & ~in_fstrings
        full = dfa.start
        dfa.start = dfa.restrict(full, ordinary)
        self.field_start = dfa.restrict(
            full, ordinary & ~bits(":", ":=") | bits("FSPEC_START", "FCONVERSION")
        )
        self.text_starts: dict[tuple[str, int], int] = {}  # (quote, raw) -> lexer state
        self.spec_starts: dict[tuple[str, int], int] = {}  # (quote, raw) -> lexer state
        for quote, kind in _KINDS.items():
            quotes = bits(f"FQUOTES_{kind}")
            for raw in (False, True):
                r = "R" if raw else ""
                text = bits(f"{r}FTEXT_{kind}", f"FEND_{kind}", "{") | quotes
                self.text_starts[quote, raw] = dfa.restrict(full, text)
                self.spec_starts[quote, raw] = dfa.restrict(full, bits(f"{r}FSPEC_{kind}", "{", "}") | quotes)
        #: terminals that open (``f"``, ``t'''``) and close f- and t-strings
        self.start_mask = bits("FSTRING_START", "TSTRING_START")
        self.end_mask = bits(*(f"FEND_{k}" for k in _KINDS.values()))
        #: literal text whose escapes CPython decodes (raw text's it does not)
        self.text_mask = bits(*(f"{p}{k}" for k in _KINDS.values() for p in ("FTEXT_", "RFTEXT_", "FSPEC_")))
        self.spec_start_bit = bits("FSPEC_START")
        #: a one-quote string's format spec text
        self.one_quote_spec = bits("FSPEC_S", "FSPEC_D", "RFSPEC_S", "RFSPEC_D")
        self.conversion_bit = bits("FCONVERSION")
        self.open_brace = bits("{")
        self.equals = bits("=")
        self.close_brace = bits("}")

    def start(self, fstrings: Modes, depth: int) -> int:
        """The lexer state for the (non-empty) mode stack ``fstrings`` at bracket ``depth``."""
        kind, quote, extra = fstrings[-1]
        if kind == _TEXT:
            return self.text_starts[quote, extra]
        if kind in _SPECS:
            return self.spec_starts[quote, _raw(fstrings)]
        return self.field_start if depth == extra else self.dfa.start  # _FIELD, _CONVERTED

    def after(self, fstrings: Modes, mask: int, text: str, depth: int) -> Modes | None:
        """The mode stack after the symbol ``text`` (terminals ``mask``; ``depth``: the bracket
        depth after it), read inside f-strings or opening one; None when it opens a field nested
        deeper than CPython allows or puts a debugging ``=`` where CPython's parser fails."""
        if mask & self.start_mask:
            quote = text.lstrip("fFrRtT")
            return fstrings + ((_TEXT, quote, "r" in text[: -len(quote)].lower()),)
        kind, quote, extra = fstrings[-1]
        if mask & self.end_mask:
            return fstrings[:-1]
        if mask == self.open_brace and (kind == _TEXT or kind in _SPECS):
            # a field in a format spec: only so many levels
            if kind != _TEXT and _specs_around(fstrings) > self.stack_limit_in_specs:
                return None
            return fstrings + ((_FIELD, quote, depth),)
        if (
            mask == self.equals
            and kind == _FIELD
            and depth == extra
            and self.debug_spec_limit is not None
            and _specs_around(fstrings) >= self.debug_spec_limit
        ):
            return None
        if mask == self.close_brace and (kind in _SPECS or depth + 1 == extra):
            outer = fstrings[:-1]
            if self.spec_field_ends_lines and outer[-1][0] == _SPEC and len(outer[-1][1]) == 1:
                return outer[:-1] + ((_SPEC_AFTER_FIELD,) + outer[-1][1:],)
            return outer
        if mask & self.one_quote_spec and self.spec_lines:
            return self._spec_lines(fstrings, text)
        if mask == self.spec_start_bit:
            return fstrings[:-1] + ((_SPEC, quote, extra),)
        if mask == self.conversion_bit and self.conversion_closes_field:
            return fstrings[:-1] + ((_CONVERTED, quote, extra),)
        return fstrings

    def _spec_lines(self, fstrings: Modes, text: str) -> Modes | None:
        """3.12 and 3.13: the mode stack after a one-quote format spec's text ``text``. Its first
        line break (not escaped) ends the spec text for CPython's tokenizer, which reads on in
        its regular mode: only blanks, comments and fields may follow before the closing brace
        (else "f-string: expecting '}'"); 3.13 allows no such line break after a field in the
        spec ("unterminated f-string literal")."""
        kind = fstrings[-1][0]
        if kind == _SPEC_LINES:
            return fstrings if _REGULAR_BLANKS.fullmatch(text) else None
        head = _spec_head(text)
        if len(head) == len(text):
            return fstrings
        if kind == _SPEC_AFTER_FIELD or not _REGULAR_BLANKS.fullmatch(text, len(head) + 1):
            return None
        return fstrings[:-1] + ((_SPEC_LINES,) + fstrings[-1][1:],)

    def text_ok(self, fstrings: Modes, text: str) -> bool:
        """CPython's checks on the escapes of literal text or a format spec ``text`` read in
        the innermost f-string of ``fstrings`` (3.12 and 3.13: in a one-quote format spec, the
        text up to its first line break, see :meth:`_spec_lines`)."""
        frame = fstrings[-1]
        if self.spec_lines and frame[0] in _SPECS and len(frame[1]) == 1:
            text = "" if frame[0] == _SPEC_LINES else _spec_head(text)
        return fstring_text_ok(text, quote=frame[1], raw=_raw(fstrings))

    def old_fstring_ok(self, fstrings: Modes, mask: int, text: str) -> bool:
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


def open_quotes(fstrings: Modes) -> list[str]:
    """The quotes of the f-strings open in the mode stack ``fstrings``, outermost first."""
    return [frame[1] for frame in fstrings if frame[0] == _TEXT]


def _specs_around(fstrings: Modes) -> int:
    """How many format specs enclose the innermost replacement field (or spec) of ``fstrings``
    within its own f-string."""
    nested = 0
    for frame in reversed(fstrings):
        if frame[0] == _TEXT:
            break
        nested += frame[0] in _SPECS
    return nested


def _spec_head(text: str) -> str:
    """A format spec's text up to its first line break that no backslash escapes."""
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "\n":
            return text[:i]
        else:
            i += 1
    return text


def _raw(fstrings: Modes) -> int:
    """Whether the innermost f-string open in ``fstrings`` is raw (its text frame says)."""
    return next(frame[2] for frame in reversed(fstrings) if frame[0] == _TEXT)
