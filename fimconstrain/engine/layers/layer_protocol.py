"""What the engine needs from a language: the :class:`Layer` protocol and the types it speaks.

A language is a grammar plus a *layer*: what happens between the lexer and the parser when a
symbol ends (Python's indentation and brackets, JSON's nothing). The lexer, the checker, the
suffix refutation, the finish search and the mask store see a language only through this
protocol; :mod:`~.base_layer` and :mod:`~.python_layer` have the two layers there are. What the
finish search writes beyond the grammar's terminals (a block header, a comment, string quotes) is a
layer's :class:`FinishVocabulary`.

Each layer keeps its own state beside the parser's as a small immutable, hashable value, its
*layout* (``None`` for JSON, ``(indents, depth, line_open, fstrings)`` for Python): the
protocol is generic in that type. Callers that hold a layer of any language (a checker built
from a language name) see ``Layer[Any]``: the layout is the layer's own business.

The module ends with :class:`ParseState`, what the suffix planning, the rejection search, the
prefix cache and the finish search need of a checker: they take it through this protocol, so
``checker.py`` imports them and none of them imports it back.

:class:`LexicalLayer` is the part that does not touch layouts (the grammar, the lexer
automaton, lexing modes): enough to lex a text or plan a grammar-level search.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..automata.earley import EarleySet, Recognizer
from ..automata.grammar import Grammar
from ..automata.regex_dfa import LexerDFA
from ..versions import PythonVersion

if TYPE_CHECKING:
    from typing_extensions import Self

#: what a symbol's end reads of an ASCII text (:meth:`Layer.end_reads_text`): nothing (every
#: ASCII text ending in that lexer state ends alike), only its backslashes (a string's escapes:
#: every ASCII text without one ends alike), or the text
READS_NOTHING, READS_ESCAPES, READS_TEXT = 0, 1, 2

#: a layer's layout type (``None`` for :class:`~.base_layer.PlainLayer`,
#: :data:`~.python_layer.PythonLayout`)
LayoutT = TypeVar("LayoutT")

#: the lexer-automaton states of symbols a branch already ended, advanced over the text since
Guards = tuple[int, ...]

#: one lexer branch (see :mod:`fimconstrain.engine.lexer`):
#: ``(parser, layout, lexeme_state, lexeme, guards)``. A plain tuple, not a NamedTuple: the
#: lexer builds one per branch per character, and tuple displays are much cheaper. Read it by
#: unpacking, with these names.
Branch = tuple[EarleySet, LayoutT, int, str, Guards]

#: one group of symbols whose end is the parser's step alone (:meth:`Layer.plain_ends`):
#: ``(terminals, scans, layout after, lexer start after, terminals allowed beside the parser's)``
PlainEnd = tuple[int, bool, LayoutT, int, int]
PlainEnds = tuple[PlainEnd[LayoutT], ...]

#: a lexing-mode frame ``(kind, quote, extra)`` (Python's f-string modes; see ``fstring_modes.py``)
ModeFrame = tuple[int, str, int]
#: a stack of lexing modes, innermost last (empty: ordinary code)
Modes = tuple[ModeFrame, ...]


@dataclass(frozen=True)
class FinishVocabulary:
    """The text the finish search (:mod:`~.closing`, :mod:`~.bridging`) writes in a language
    beyond the spellings of its terminals, and the lexical facts it reads a suffix with. The
    defaults fit a language without layout, comments or reserved words (JSON)."""

    #: one level of indentation, as a finish writes it (empty: indentation means nothing)
    indent_unit: str = ""
    #: the shortest line that opens an indented block (empty: none)
    block_header: str = ""
    #: how a line that opens a block ends (empty: no blocks)
    block_opener: str = ""
    #: what begins a comment that runs to the end of its line (empty: none)
    line_comment: str = ""
    #: the delimiters strings open and close with, longest first
    quotes: tuple[str, ...] = ("'", '"')
    #: the prefixes a string's opening quote may take (``""``: none)
    string_prefixes: tuple[str, ...] = ("",)
    #: text that may make a lexeme's content valid before it is closed (an escape short of
    #: digits, an open replacement field), tried in order when nothing else ends the lexeme
    lexeme_repairs: tuple[str, ...] = ()
    #: text that turns a reserved word into a name when added (empty: no reserved words)
    reserved_word_escape: str = ""
    #: closing bracket -> the text that opens it in any expression context (none: a bridge
    #: opens only the brackets its own construct opens)
    bracket_wrappers: Mapping[str, str] = field(default_factory=dict)
    #: brackets and operators (literals): left contexts with these differ only in ways a
    #: nested opener ignores
    context_noise: frozenset[str] = frozenset("([{")
    #: terminals (literals, or names of terminals without one) that a connector between
    #: nested brackets may use (none: brackets nest directly)
    connector_symbols: frozenset[str] = frozenset()


class LexicalLayer(Protocol):
    """The layout-free part of a layer: grammar, lexer automaton, terminal classes, modes."""

    grammar: Grammar
    #: the layer's recognizer (replaceable: the refutation reads with a forgetful one)
    recognizer: Recognizer
    dfa: LexerDFA
    #: terminals that are lexed but never reach the parser (spaces, comments)
    ignore_mask: int
    #: terminals that end logical lines (0 without layout)
    newline_mask: int
    #: the line-break terminal (-1 without layout) and the terminals scanned for it, for an
    #: INDENT and for a DEDENT (empty without layout)
    newline: int
    newline_ids: tuple[int, ...]
    indent: tuple[int, ...]
    dedent: tuple[int, ...]
    #: string literal terminals (0 if none are told apart)
    string_mask: int
    #: terminals that open and close strings lexed in modes (f-strings), 0 if none
    string_start_mask: int
    string_end_mask: int
    #: bracket terminal bitmask -> +1 (opens) or -1 (closes); empty without layout
    bracket_delta: dict[int, int]
    #: a lexer state that knows every terminal, whatever the mode (to spell terminals)
    every_terminal_start: int
    #: the lexer state of the lexeme a file starts inside (Python: a line break before it)
    initial_lexeme: int
    #: whether a suffix may be split before a top-level statement line (see right_quotient.py)
    splits_at_top_level: bool
    #: whether a file whose raw text ends in ``\r\n`` is read with one more line break
    crlf_end_adds_newline: bool
    #: what the finish search writes in this language beyond its terminals
    finish_vocabulary: FinishVocabulary

    def __hash__(self) -> int:
        """Layers are hashable (by identity): grammar-level tables are cached per layer."""
        ...

    @property
    def version(self) -> PythonVersion | None:
        """The target Python version (None for languages without versions)."""
        ...

    def describe(self) -> str:
        """The language, in words, for messages (``"Python 3.12"``)."""
        ...

    def terminal_ids(self, mask: int) -> tuple[int, ...]:
        """The terminal ids of a bitmask."""
        ...

    def token_mask(self, lexeme_state: int) -> int:
        """Terminals a finished lexeme can be."""
        ...

    def mode_start(self, modes: Modes, depth: int) -> int:
        """The lexer state for a mode stack at bracket ``depth``."""
        ...

    def next_modes(self, modes: Modes, mask: int, text: str, depth: int) -> Modes | None:
        """The mode stack after a symbol (``depth``: the bracket depth after it); None when
        the symbol may not come there."""
        ...


class Layer(LexicalLayer, Protocol[LayoutT]):
    """What the lexer, the checker and the layers above need from a language, for layouts
    of type ``LayoutT``: filtering, and what happens when a symbol ends."""

    def initial_branch(self, file_start: bool = True) -> Branch[LayoutT]:
        """The branch at the start of a file, or (``file_start`` false) where a text starts
        that follows a complete file's top-level statements (a suffix's tail)."""
        ...

    def with_recognizer(self, recognizer: Recognizer) -> Self:
        """A layer like this one (built anew: its own lexer automaton) that parses with
        ``recognizer``; the refutation reads layout over a forgetful one."""
        ...

    def allowed(self, parser: EarleySet, layout: LayoutT) -> int:
        """Bitmask of terminals that may be lexed next in this parser/layout state."""
        ...

    def end_symbol(
        self, parser: EarleySet, layout: LayoutT, lexeme_state: int, text: str
    ) -> tuple[EarleySet, LayoutT] | None:
        """Feed the symbol that just ended; return ``(parser, layout)`` or None if rejected."""
        ...

    def end_and_next(
        self, parser: EarleySet, layout: LayoutT, lexeme_state: int, text: str
    ) -> tuple[EarleySet, LayoutT, int, int] | None:
        """:meth:`end_symbol`, with :meth:`lex_start` and :meth:`allowed` after it: what the C
        lexer (``_lexer.c``) asks where a symbol ends, in one call."""
        ...

    def plain_ends(self, layout: LayoutT) -> PlainEnds[LayoutT]:
        """Where a symbol's end in ``layout`` is the parser's step alone, so that the C lexer
        takes it without asking :meth:`end_and_next`: groups ``(terminals, scans, after, start,
        extra)``, each saying that an ASCII symbol (not an ignored one) that may only be some of
        ``terminals`` ends as ``recognizer.scan`` of them, followed by layout ``after``, where
        the next symbol starts in lexer state ``start`` and ``extra`` is allowed beside the
        parser's terminals; where ``scans`` is false, with the parser and layout as they are
        (the rest unread). The first group that holds the symbol's terminals answers."""
        ...

    def ignore_unchanged(self, layout: LayoutT) -> bool:
        """Whether a symbol that may be an ignored terminal (a space, a comment) ends in
        ``layout`` as :meth:`end_symbol` answers when it takes one: the parser and layout as
        they were (the C lexer ends such symbols itself where this holds)."""
        ...

    def end_reads_text(self, parser: EarleySet, layout: LayoutT, lexeme_state: int) -> int:
        """What of an ASCII text ending in ``lexeme_state`` :meth:`end_symbol` may read here:
        :data:`READS_NOTHING` (any two end alike: the vocabulary walk asks once for them all),
        :data:`READS_ESCAPES` (any two without a backslash end alike: asked once for those) or
        :data:`READS_TEXT`."""
        ...

    def end_of_input(self, parser: EarleySet, layout: LayoutT, lexeme_state: int, text: str) -> bool:
        """Whether ending the input here (after this last symbol) gives a complete program."""
        ...

    def lex_start(self, layout: LayoutT) -> int:
        """The lexer state a symbol starting in this layout starts from (its lexing mode)."""
        ...

    def next_terminals(self, parser: EarleySet, layout: LayoutT, terminal: int) -> int:
        """Terminals that may be lexed after a lexeme ends as ``terminal`` here: a superset
        (after a line break, an INDENT and every number of DEDENTs are all tried)."""
        ...

    def indent_columns(self, layout: LayoutT) -> list[int]:
        """Columns of the open indentation levels, outermost first (none without layout)."""
        ...

    def open_quotes(self, layout: LayoutT) -> list[str]:
        """The quotes of the strings lexed in modes that are open, outermost first."""
        ...

    def at_statement_boundary(self, branch: Branch[LayoutT]) -> bool:
        """Whether ``branch`` stands at the start of a top-level line with nothing pending."""
        ...

    def open_layouts(self, indents: list[str], depth: int) -> list[LayoutT]:
        """Layouts a text may start from when what came before it is unknown and left
        ``depth`` brackets open; ``indents``: its newline lexemes that begin measured lines."""
        ...


class ParseState(Protocol[LayoutT]):
    """The branches after a text, in one language: what the engine's helpers need of a
    :class:`~.checker.Checker` (which is the one implementation)."""

    @property
    def layer(self) -> Layer[LayoutT]:
        """The language layer the branches are read with."""
        ...

    @property
    def branches(self) -> list[Branch[LayoutT]]:
        """The live lexer branches."""
        ...

    def feed(self, text: str) -> Self | None:
        """The state after ``text`` more (pure), or None when no continuation can complete it."""
        ...

    def is_complete(self) -> bool:
        """Whether the text so far (suffix included) is a complete program."""
        ...


#: a concrete parse state type, for helpers that hand back what they were given
StateT = TypeVar("StateT", bound=ParseState[Any])
