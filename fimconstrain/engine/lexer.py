"""Branching incremental lexer (paper 004, section V-A).

The lexer state is a small list of *branches*. Each branch is a tuple (a
:data:`~fimconstrain.engine.layer_protocol.Branch`; the language is a
:class:`~fimconstrain.engine.layer_protocol.Layer`)

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

from .earley import Signature
from .layer_protocol import Branch, Guards, Layer, LayoutT
from .regex_dfa import DEAD

__all__ = ["Branch", "Layer", "advance", "branch_key", "complete"]

#: what :func:`branch_key` returns
BranchKey = tuple[Signature, LayoutT, int, str, Guards]


def advance(layer: Layer[LayoutT], branches: list[Branch[LayoutT]], text: str) -> list[Branch[LayoutT]]:
    """Read ``text`` character by character; return the surviving branches (maybe none)."""
    dfa = layer.dfa
    trans, accept, live = dfa.trans, dfa.accept, dfa.live
    step = dfa.step
    allowed, end_symbol, lex_start = layer.allowed, layer.end_symbol, layer.lex_start
    for ch in text:
        survivors: list[Branch[LayoutT]] = []
        for parser, layout, state, lexeme, guards in branches:
            if guards:
                kept = []
                longer = False
                for g in guards:
                    g2 = trans[g].get(ch)
                    if g2 is None:
                        g2 = step(g, ch)
                    if g2 == DEAD:
                        continue
                    if accept[g2]:
                        longer = True
                        break
                    kept.append(g2)
                if longer:  # a guard saw a longer match: this branch is wrong
                    continue
                guards = tuple(kept)
            # (a) the symbol in progress continues with ch
            nxt = trans[state].get(ch)
            if nxt is None:
                nxt = step(state, ch)
            if nxt != DEAD and live[nxt] & allowed(parser, layout):
                survivors.append((parser, layout, nxt, lexeme + ch, guards))
            # (b) the symbol in progress ended before ch, and ch starts a new one
            if not accept[state]:
                continue
            if accept[nxt]:
                continue  # lexeme + ch is itself a lexeme: longest match says keep going
            ended = end_symbol(parser, layout, state, lexeme)
            if ended is None:
                continue
            parser2, layout2 = ended
            start = lex_start(layout2)
            fresh = trans[start].get(ch)
            if fresh is None:
                fresh = step(start, ch)
            if fresh == DEAD:
                continue
            if live[fresh] & allowed(parser2, layout2):
                if nxt != DEAD:
                    guards = guards + (nxt,)
                survivors.append((parser2, layout2, fresh, ch, guards))
        branches = survivors
        if not branches:
            break
    return branches


def complete(layer: Layer[LayoutT], branches: list[Branch[LayoutT]]) -> bool:
    """Whether some branch, ended here, is a complete program."""
    end_of_input = layer.end_of_input
    return any(end_of_input(parser, layout, state, lexeme) for parser, layout, state, lexeme, _ in branches)


def branch_key(branch: Branch[LayoutT]) -> BranchKey[LayoutT]:
    """A hashable key equal for branches that behave the same on any further input."""
    parser, layout, state, lexeme, guards = branch
    return parser.signature(), layout, state, lexeme, guards
