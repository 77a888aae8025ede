"""Branching incremental lexer (paper 004, section V-A).

The lexer state is a small list of *branches*. Each branch is a tuple (a
:data:`~fimconstrain.engine.layers.layer_protocol.Branch`; the language is a
:class:`~fimconstrain.engine.layers.layer_protocol.Layer`)

    (parser, layout, lexeme_state, lexeme, guards)

``parser`` is an Earley state, ``layout`` the language layer's state (indentation, brackets),
``lexeme_state`` the lexer-automaton state of the symbol in progress, and ``guards`` the
automaton states of symbols this branch already ended, advanced over the characters read since.
After each character a branch splits into the branch where the symbol in progress goes on and
the branch where it ended just before this character. An ended symbol is only right if no
longer lexeme exists (leftmost-longest lexing), so a guard that reaches an accepting state,
meaning a longer match appeared, deletes its branch; a guard that dies is dropped.

Symbols the parser cannot take die as soon as the lexeme in progress can no longer become one
the parser allows (``f(a andy`` is rejected at ``andy`` once ``and`` is ruled out).
"""

from __future__ import annotations

from typing import Any

from . import native
from .automata.earley import Signature
from .automata.regex_dfa import DEAD
from .layers.layer_protocol import Branch, Guards, Layer, LayoutT

__all__ = ["Branch", "Layer", "advance", "advance_in_python", "branch_key", "complete"]

#: what :func:`branch_key` returns
BranchKey = tuple[Signature, LayoutT, int, str, Guards]


#: each layer's C lexer's ``advance`` (``_lexer.c``'s ``Lexer``, the method bound: one call, no
#: lookup), or False where it does not serve, made on a layer's first text (a process has few
#: layers: a grammar and version each)
_C_ADVANCE: dict[Layer[Any], Any] = {}
_C_LEXERS_KEPT = 16


def advance(layer: Layer[LayoutT], branches: list[Branch[LayoutT]], text: str) -> list[Branch[LayoutT]]:
    """Read ``text`` character by character; return the surviving branches (maybe none): in C
    where the extension serves (:func:`c_lexer_for`), else :func:`advance_in_python`."""
    c_advance: Any = _C_ADVANCE.get(layer)
    if c_advance is None:
        c_lexer = c_lexer_for(layer)
        c_advance = False if c_lexer is False else c_lexer.advance
        if len(_C_ADVANCE) >= _C_LEXERS_KEPT:
            _C_ADVANCE.pop(next(iter(_C_ADVANCE)), None)  # the oldest (another thread may have gone first)
        _C_ADVANCE[layer] = c_advance
    if c_advance is not False:
        result: list[Branch[LayoutT]] = c_advance(branches, text)
        return result
    return advance_in_python(layer, branches, text)


def c_lexer_for(layer: Layer[Any]) -> Any:
    """A new C lexer of ``layer``, or False where ``_lexer.c`` is not built or
    ``FIMCONSTRAIN_ENGINE=python`` asks for the sources (:func:`.native.c_extension`)."""
    module = native.lexer_extension()
    return False if module is None else module.Lexer(layer, max(1, (layer.grammar.n_terminals + 63) // 64))


def advance_in_python(
    layer: Layer[LayoutT], branches: list[Branch[LayoutT]], text: str
) -> list[Branch[LayoutT]]:
    """:func:`advance` in Python: the reference that ``_lexer.c`` twins, and the fallback.

    Branches never interact, so each is read on its own, depth first: while its symbol goes
    on, a character costs one automaton step, and a bitmask test when the state changes (the
    parser and layout, and so the terminals allowed, stay fixed, and the lexeme is sliced out
    of ``text`` only when it ends); where the symbol may end, the branch that ends it is put
    on a stack and read later. Popping that stack (last in, first out) returns the survivors
    in the order a character-by-character sweep gives: the branch that goes on before the one
    that ends.

    Twin note: ``_lexer.c`` runs these rules for one text, and ``_walk.c`` (with its Python
    twin, ``tests/decoding/vocab_walk_twin.py``) over a whole vocabulary's character trie: a
    change here belongs there too."""
    dfa = layer.dfa
    trans, ascii_trans, final, live = dfa.trans, dfa.ascii_trans, dfa.final, dfa.live
    # (methods called where they are used: a bound method made per call of ``advance`` costs
    # more than it saves when a piece of text ends a symbol or two)
    n = len(text)
    survivors: list[Branch[LayoutT]] = []
    # branches still to read, each with the offset in ``text`` of its next character and the
    # terminals allowed there (-1: not worked out yet)
    pending: list[tuple[Branch[LayoutT], int, int]] = [(branch, 0, -1) for branch in reversed(branches)]
    while pending:
        (parser, layout, state, lexeme, guards), i, allowed_here = pending.pop()
        begin = i  # the lexeme read so far is ``lexeme + text[begin:i]``
        if allowed_here < 0:
            allowed_here = layer.allowed(parser, layout)
        tested = -1  # the last state found live under ``allowed_here`` (none yet)
        alive = True
        while i < n:
            ch = text[i]
            code = ord(ch)
            if guards:
                kept = []
                for g in guards:
                    g2 = ascii_trans[g][code] if code < 128 else trans[g].get(ch, -1)
                    if g2 < 0:
                        g2 = dfa.step(g, ch)
                    if g2 == DEAD:
                        continue
                    if final[g2]:  # a guard saw a longer match: this branch is wrong
                        alive = False
                        break
                    kept.append(g2)
                if not alive:
                    break
                guards = tuple(kept)
            nxt = ascii_trans[state][code] if code < 128 else trans[state].get(ch, -1)
            if nxt < 0:
                nxt = dfa.step(state, ch)
            # the symbol in progress ended before ch, and ch starts a new one (unless lexeme
            # + ch is itself a lexeme: longest match says keep going)
            if final[state] and not final[nxt]:
                ended = layer.end_symbol(parser, layout, state, lexeme + text[begin:i])
                if ended is not None:
                    parser2, layout2 = ended
                    start = layer.lex_start(layout2)
                    fresh = ascii_trans[start][code] if code < 128 else trans[start].get(ch, -1)
                    if fresh < 0:
                        fresh = dfa.step(start, ch)
                    allowed_after = layer.allowed(parser2, layout2) if fresh != DEAD else 0
                    if live[fresh] & allowed_after:
                        guards2 = guards + (nxt,) if nxt != DEAD else guards
                        pending.append(((parser2, layout2, fresh, ch, guards2), i + 1, allowed_after))
            # the symbol in progress continues with ch (a state that loops on ch was tested
            # already: long names, spaces, comments and strings skip the bitmask test)
            if nxt != tested:
                if nxt == DEAD or not live[nxt] & allowed_here:
                    alive = False
                    break
                tested = nxt
            state = nxt
            i += 1
        if alive:
            survivors.append((parser, layout, state, lexeme + text[begin:n], guards))
    return survivors


def complete(layer: Layer[LayoutT], branches: list[Branch[LayoutT]]) -> bool:
    """Whether some branch, ended here, is a complete program."""
    end_of_input = layer.end_of_input
    return any(end_of_input(parser, layout, state, lexeme) for parser, layout, state, lexeme, _ in branches)


def branch_key(branch: Branch[LayoutT]) -> BranchKey[LayoutT]:
    """A hashable key equal for branches that behave the same on any further input."""
    parser, layout, state, lexeme, guards = branch
    return parser.signature(), layout, state, lexeme, guards
