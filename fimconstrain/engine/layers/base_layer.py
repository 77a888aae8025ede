"""The base of language layers, and the layer of a language without layout.

A layer is what happens between the lexer and the parser when a symbol ends (paper 004 §V:
the lexer hands the parser lexemes; §VI: a whitespace-sensitive language adds its layout
there). :class:`BaseLayer` holds what every layer shares; :class:`PlainLayer` sends tokens to
the parser as lexed (JSON). Layouts are small immutable values so branches can share them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import TYPE_CHECKING, Generic

from ..automata.earley import EarleySet, Recognizer
from ..automata.grammar import Grammar
from ..automata.regex_dfa import LexerDFA
from ..versions import PythonVersion
from .layer_protocol import READS_NOTHING, Branch, FinishVocabulary, LayoutT, Modes, PlainEnds

if TYPE_CHECKING:
    from typing_extensions import Self


class BaseLayer(ABC, Generic[LayoutT]):
    """What layers share: the grammar's recognizer and lexer automaton, terminal classes, and
    the behaviour of a language without layout, for layouts of type ``LayoutT`` (a subclass
    says where a file starts and may override the rest). Implements
    :class:`~fimconstrain.engine.layers.layer_protocol.Layer`."""

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
    string_start_mask = 0
    string_end_mask = 0
    #: whether a file whose raw text ends in ``\r\n`` is read with one more line break
    crlf_end_adds_newline = False
    #: the target Python version (None: a language without versions)
    version: PythonVersion | None = None
    #: what the finish search writes beyond the terminals: nothing of any language's own
    finish_vocabulary = FinishVocabulary()

    # Slots, here and in subclasses that read attributes per character: a slot reads at one
    # speed, while a shallow copy (the suffix refutation makes one) leaves the original's
    # attribute dict in a form CPython 3.11 reads some 20% slower.
    __slots__ = (
        "_ids",
        "bracket_delta",
        "dfa",
        "every_terminal_start",
        "grammar",
        "ignore_mask",
        "initial_lexeme",
        "recognizer",
    )

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.recognizer = Recognizer(grammar)
        self.dfa = LexerDFA([t.pattern for t in grammar.terminals], [t.flags for t in grammar.terminals])
        self.ignore_mask = bitmask(i for i, t in enumerate(grammar.terminals) if t.ignored)
        #: a lexer state that knows every terminal, whatever the mode (to spell terminals)
        self.every_terminal_start = self.dfa.start
        #: the lexer state of the lexeme a file starts inside (none: the DFA's start)
        self.initial_lexeme = self.dfa.start
        #: bracket terminal bitmask -> +1 (opens) or -1 (closes); none without layout
        self.bracket_delta: dict[int, int] = {}
        self._ids: dict[int, tuple[int, ...]] = {}

    def with_recognizer(self, recognizer: Recognizer) -> Self:
        """A layer like this one (built anew: its own lexer automaton) that parses with
        ``recognizer``. Built, not copied: a compiled layer has no ``copy.copy``."""
        layer = self._rebuilt()
        layer.recognizer = recognizer
        return layer

    def _rebuilt(self) -> Self:
        """A new layer of this class over the same grammar (a subclass whose constructor takes
        more says how to build it)."""
        return type(self)(self.grammar)

    @abstractmethod
    def initial_branch(self, file_start: bool = True) -> Branch[LayoutT]:
        """The branch at the start of a file, or (``file_start`` false) where a text starts
        that follows a complete file's top-level statements (a suffix's tail)."""

    @abstractmethod
    def open_layouts(self, indents: list[str], depth: int) -> list[LayoutT]:
        """Layouts a text may start from when what came before it is unknown and left
        ``depth`` brackets open; ``indents``: its newline lexemes that begin measured lines
        (see :mod:`fimconstrain.engine.quotients.refutation`)."""

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

    def end_and_next(
        self, parser: EarleySet, layout: LayoutT, lexeme_state: int, text: str
    ) -> tuple[EarleySet, LayoutT, int, int] | None:
        """:meth:`end_symbol`, with the lexer state the next symbol starts from
        (:meth:`lex_start`) and the terminals allowed after it (:meth:`allowed`)."""
        ended = self.end_symbol(parser, layout, lexeme_state, text)
        if ended is None:
            return None
        after, layout_after = ended
        return after, layout_after, self.lex_start(layout_after), self.allowed(after, layout_after)

    def plain_ends(self, layout: LayoutT) -> PlainEnds[LayoutT]:
        """No group: every end is asked of :meth:`end_and_next` (a subclass that overrides
        :meth:`end_symbol` says where its ends are still the parser's step alone)."""
        return ()

    def ignore_unchanged(self, layout: LayoutT) -> bool:
        """Always: :meth:`end_symbol` leaves the parser and layout as they were for an ignored
        terminal."""
        return True

    def end_reads_text(self, parser: EarleySet, layout: LayoutT, lexeme_state: int) -> int:
        """Nothing: this layer's :meth:`end_symbol` reads the lexer state, not the text (a
        layer whose ``end_symbol`` reads the text says where, or the vocabulary walk answers
        wrongly there)."""
        return READS_NOTHING

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

    __slots__ = ()

    def initial_branch(self, file_start: bool = True) -> Branch[None]:
        return (self.recognizer.initial, None, self.dfa.start, "", ())

    def plain_ends(self, layout: None) -> PlainEnds[None]:
        """Every symbol the parser does not ignore: :meth:`end_symbol` scans it, nothing else (a
        subclass that overrides :meth:`end_symbol` says where this still holds)."""
        every = (1 << self.grammar.n_terminals) - 1
        return ((every & ~self.ignore_mask, True, None, self.dfa.start, self.ignore_mask),)

    def open_layouts(self, indents: list[str], depth: int) -> list[None]:
        return [None]


def bitmask(indices: Iterable[int]) -> int:
    """The bitmask with the bits ``indices`` set (terminal ids to a terminal bitmask)."""
    mask = 0
    for i in indices:
        mask |= 1 << i
    return mask
