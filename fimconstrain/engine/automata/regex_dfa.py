"""One lazily determinised DFA that runs many terminal regexes side by side, for the incremental lexer.

Patterns are parsed by Python's own regex parser, compiled to Thompson NFAs that are tagged with their
pattern index, and determinised on demand one concrete character at a time (memoised in ``trans``).
"""

from __future__ import annotations

import importlib
import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

from fimconstrain.engine.errors import GrammarError

# The standard library's regex parser: ``re._parser`` from 3.11, ``sre_parse`` before (typeshed
# knows only the old names; an import by name, since mypyc compiles one branch of a version test)
_NEW_NAMES = sys.version_info >= (3, 11)
_sre: Any = importlib.import_module("re._constants" if _NEW_NAMES else "sre_constants")
_sre_parse: Any = importlib.import_module("re._parser" if _NEW_NAMES else "sre_parse")


DEAD = 0
#: non-ASCII characters whose transition a DFA state remembers (a long-running server reads
#: ever new ones); past it a state's further non-ASCII characters are stepped anew each time
#: (ASCII is always remembered: at most 128 per state)
NON_ASCII_TRANSITIONS = 512

_FLAG_BITS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE, "u": re.UNICODE}

CharTest = Callable[[str], bool]
#: the argument of a node of the stdlib regex parser's tree; its shape depends on the opcode
#: (a code point for LITERAL, ``(lo, hi, body)`` for MAX_REPEAT, ...), which the parser's
#: own types do not tie together, so it is read per opcode below
_NodeArg = Any


def _is_word(ch: str) -> bool:
    """Python identifier character (deliberately wider than ``re``'s ``\\w``: includes combining marks)."""
    return ch == "_" or ch.isalnum() or ("a" + ch).isidentifier()


# category constant -> (positive predicate, negated?)
_CATEGORIES: dict[object, tuple[CharTest, bool]] = {
    _sre.CATEGORY_DIGIT: (str.isdecimal, False),
    _sre.CATEGORY_NOT_DIGIT: (str.isdecimal, True),
    _sre.CATEGORY_SPACE: (str.isspace, False),
    _sre.CATEGORY_NOT_SPACE: (str.isspace, True),
    _sre.CATEGORY_WORD: (_is_word, False),
    _sre.CATEGORY_NOT_WORD: (_is_word, True),
    _sre.CATEGORY_LINEBREAK: ("\n".__eq__, False),
    _sre.CATEGORY_NOT_LINEBREAK: ("\n".__eq__, True),
}


def _category_test(category: object, ascii_only: bool) -> CharTest:
    """Predicate for a ``\\d``/``\\s``/``\\w``-style category (restricted to ASCII under the ``a`` flag)."""
    base, negated = _CATEGORIES[category]
    positive = (lambda ch: ch < "\x80" and base(ch)) if ascii_only else base
    return (lambda ch: not positive(ch)) if negated else positive


def _case_variants(ch: str, ascii_only: bool) -> set[str]:
    """Single characters that ``ch`` is identified with under case-insensitive matching."""
    if ascii_only and ch >= "\x80":
        return {ch}
    return {v for v in (ch, ch.lower(), ch.upper(), ch.casefold()) if len(v) == 1}


def _first_member(test: CharTest, hints: Iterable[str]) -> str | None:
    """A representative member of a char class: printable ASCII first, then hints, then any code point."""
    for cp in range(32, 127):
        if test(chr(cp)):
            return chr(cp)
    for ch in sorted(hints):
        if test(ch):
            return ch
    return next((chr(cp) for cp in range(0x110000) if test(chr(cp))), None)


class _CharSet:
    """An NFA transition label: a single literal ``char`` (fast dict dispatch) or a ``test`` predicate."""

    __slots__ = ("char", "pick", "test")

    def __init__(self, char: str | None, test: CharTest, pick: str | None):
        self.char = char
        self.test = test
        self.pick = pick  # representative member, None if the set is empty


class _CharSets:
    """Builds (and shares between patterns) the char sets of LITERAL / NOT_LITERAL / ANY / IN nodes."""

    def __init__(self) -> None:
        self._cache: dict[tuple[object, object, int], _CharSet] = {}

    def get(self, op: object, av: _NodeArg, flags: int, source: str) -> _CharSet:
        if op == _sre.IN:
            av = tuple(av)
        key = (op, av, flags & (re.IGNORECASE | re.ASCII | re.DOTALL))
        cs = self._cache.get(key)
        if cs is None:
            cs = self._cache[key] = _build_charset(op, av, flags, source)
        return cs


def _build_charset(op: object, av: _NodeArg, flags: int, source: str) -> _CharSet:
    """The char set matched by one single-character regex node under ``flags``."""
    icase, ascii_only = bool(flags & re.IGNORECASE), bool(flags & re.ASCII)
    if op == _sre.ANY:
        test: CharTest = (lambda ch: True) if flags & re.DOTALL else "\n".__ne__
        return _CharSet(None, test, _first_member(test, ()))
    if op == _sre.LITERAL and not icase:
        return _CharSet(chr(av), chr(av).__eq__, chr(av))
    if op == _sre.IN:
        member, hints, negate = _class_member(av, ascii_only, source)
    else:  # LITERAL under IGNORECASE, or NOT_LITERAL
        member, hints, negate = chr(av).__eq__, [chr(av)], op == _sre.NOT_LITERAL
    if icase:
        exact = member
        member = lambda ch: any(exact(v) for v in _case_variants(ch, ascii_only))
    test = (lambda ch: not member(ch)) if negate else member
    return _CharSet(None, test, _first_member(test, hints))


def _class_member(
    items: Sequence[tuple[object, _NodeArg]], ascii_only: bool, source: str
) -> tuple[CharTest, list[str], bool]:
    """Membership predicate of a ``[...]`` class (before negation), hint chars, and whether it is negated."""
    lits: set[str] = set()
    ranges: list[tuple[str, str]] = []
    cats: list[CharTest] = []
    negate = False
    for op, av in items:
        if op == _sre.NEGATE:
            negate = True
        elif op == _sre.LITERAL:
            lits.add(chr(av))
        elif op == _sre.RANGE:
            ranges.append((chr(av[0]), chr(av[1])))
        elif op == _sre.CATEGORY:
            cats.append(_category_test(av, ascii_only))
        else:
            raise GrammarError(
                f"terminal pattern {source!r}: unsupported construct {op} in a character class"
            )
    frozen = frozenset(lits)
    hints = [*frozen, *(lo for lo, _ in ranges)]
    if not ranges and not cats:
        return frozen.__contains__, hints, negate

    def member(ch: str) -> bool:
        return ch in frozen or any(lo <= ch <= hi for lo, hi in ranges) or any(f(ch) for f in cats)

    return member, hints, negate


class _NFA:
    """Thompson NFA for all patterns together; every state is owned by exactly one pattern."""

    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edge: list[tuple[_CharSet, int] | None] = []
        self.owner: list[int] = []
        self.finals: dict[int, int] = {}  # final state -> pattern index
        self.starts: list[int] = []

    def new_state(self, owner: int) -> int:
        self.eps.append([])
        self.edge.append(None)
        self.owner.append(owner)
        return len(self.owner) - 1


class _PatternCompiler:
    """Compiles one parsed pattern into the shared NFA, back to front (each node gets its continuation)."""

    def __init__(self, nfa: _NFA, charsets: _CharSets, index: int, source: str):
        self.nfa, self.charsets, self.index, self.source = nfa, charsets, index, source

    def compile(self, flags: int) -> None:
        try:
            parsed = _sre_parse.parse(self.source, flags)
        except re.error as exc:
            raise GrammarError(f"terminal pattern {self.source!r} is not a valid regex: {exc}") from exc
        final = self.nfa.new_state(self.index)
        self.nfa.finals[final] = self.index
        self.nfa.starts.append(self.seq(parsed, parsed.state.flags, final))

    def seq(self, items: _sre_parse.SubPattern, flags: int, nxt: int) -> int:
        for op, av in reversed(items.data):
            nxt = self.node(op, av, flags, nxt)
        return nxt

    def node(self, op: object, av: _NodeArg, flags: int, nxt: int) -> int:
        if op in (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN):
            return self.char(self.charsets.get(op, av, flags, self.source), nxt)
        if op == _sre.BRANCH:
            return self.fork([self.seq(alt, flags, nxt) for alt in av[1]])
        if op == _sre.SUBPATTERN:
            _group, add_flags, del_flags, body = av
            return self.seq(body, (flags | add_flags) & ~del_flags, nxt)
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            lo, hi, body = av
            return self.repeat(lo, hi, body, flags, nxt)
        what = f"{op} {av}" if op == _sre.AT else str(op)
        raise GrammarError(f"terminal pattern {self.source!r}: unsupported regex construct {what}")

    def char(self, cs: _CharSet, nxt: int) -> int:
        s = self.nfa.new_state(self.index)
        if cs.pick is not None:  # an empty class leaves a dead end
            self.nfa.edge[s] = (cs, nxt)
        return s

    def fork(self, targets: list[int]) -> int:
        s = self.nfa.new_state(self.index)
        self.nfa.eps[s] = targets
        return s

    def repeat(self, lo: int, hi: int, body: _sre_parse.SubPattern, flags: int, nxt: int) -> int:
        cur = nxt
        if hi == _sre.MAXREPEAT:
            cur = self.fork([])
            self.nfa.eps[cur] = [self.seq(body, flags, cur), nxt]
        else:  # nested optionals (x(x(x)?)?)? keep epsilon closures small
            for _ in range(hi - lo):
                cur = self.fork([self.seq(body, flags, cur), nxt])
        for _ in range(lo):
            cur = self.seq(body, flags, cur)
        return cur


def _parse_flags(pattern: str, flags: str | None) -> int:
    """Lark-style flag letters to ``re`` flag bits."""
    bits = 0
    for letter in flags or "":
        if letter not in _FLAG_BITS:
            raise GrammarError(f"terminal pattern {pattern!r}: unsupported flag {letter!r}")
        bits |= _FLAG_BITS[letter]
    return bits


#: a compiled NFA state's out-edge: its label and the closure it leads to (None: final)
Edge = tuple[_CharSet, frozenset[int]]


class _Automaton:
    """The patterns compiled to one tagged NFA, as the DFA reads it: per core NFA state its
    pattern bit and out-edge, and the start closure. Immutable, so lexers of the same patterns
    (every layer of a grammar, the suffix refutation's own) share one (:func:`_compile`)."""

    def __init__(self, bit: list[int], out: dict[int, Edge | None], start: frozenset[int]) -> None:
        self.bit = bit
        self.out = out
        self.start = start


@cache
def _compile(patterns: tuple[str, ...], flags: tuple[str | None, ...]) -> _Automaton:
    """The :class:`_Automaton` of ``patterns`` (compiled once per process)."""
    nfa, charsets = _NFA(), _CharSets()
    for index, (pattern, flag_string) in enumerate(zip(patterns, flags)):
        _PatternCompiler(nfa, charsets, index, pattern).compile(_parse_flags(pattern, flag_string))
    coreach = _coreachable(nfa)
    out: dict[int, Edge | None] = {q: None for q in nfa.finals}
    memo: dict[int, frozenset[int]] = {}
    for q, edge in enumerate(nfa.edge):
        if edge is not None and coreach[q]:
            cs, target = edge
            if target not in memo:
                memo[target] = _closure(nfa, coreach, target)
            out[q] = (cs, memo[target])
    start = frozenset().union(*(_closure(nfa, coreach, s) for s in nfa.starts))
    return _Automaton([1 << owner for owner in nfa.owner], out, start)


def _closure(nfa: _NFA, coreach: list[bool], state: int) -> frozenset[int]:
    """Core states (with a char edge, or final) reachable by epsilons that can still reach a final."""
    seen, stack, core = {state}, [state], []
    while stack:
        q = stack.pop()
        if (nfa.edge[q] is not None or q in nfa.finals) and coreach[q]:
            core.append(q)
        for t in nfa.eps[q]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(core)


class LexerDFA:
    """Lazy DFA that runs a list of regex patterns side by side.

    A DFA state is the interned set of live NFA states; ``accept``/``live`` are per-state pattern bitmasks.
    """

    def __init__(self, patterns: Sequence[str], flags: Sequence[str | None] | None = None):
        self.patterns = list(patterns)
        flag_strings = list(flags) if flags is not None else [None] * len(self.patterns)
        if len(flag_strings) != len(self.patterns):
            raise GrammarError("LexerDFA: patterns and flags have different lengths")
        automaton = _compile(tuple(self.patterns), tuple(flag_strings))
        self._bit, self._out = automaton.bit, automaton.out
        self.trans: list[dict[str, int]] = []
        #: per state, the next state of each ASCII character by code (-1: not stepped yet);
        #: the lexer's per-character lookup (an index, where ``trans`` hashes a string)
        self.ascii_trans: list[list[int]] = []
        self.accept: list[int] = []
        #: whether a state accepts some pattern (``accept[state] != 0``: a flag reads faster
        #: than a mask of more than 62 bits, which compiled code holds as an object)
        self.final: list[bool] = []
        self.live: list[int] = []
        self._sets: list[frozenset[int]] = []
        self._edges: list[tuple[dict[str, frozenset[int]], tuple[tuple[CharTest, frozenset[int]], ...]]] = []
        self._ids: dict[frozenset[int], int] = {}
        #: a state remembers every ASCII character's transition, and a non-ASCII one while it
        #: remembers fewer than this many (so at most this + 128 in all)
        self.transitions_limit = 128 + NON_ASCII_TRANSITIONS
        self._intern(frozenset())  # DEAD
        self.start = self._intern(automaton.start)

    def _intern(self, nfa_set: frozenset[int]) -> int:
        """Id of the DFA state for this NFA-state set, creating it (with its grouped out-edges) if new."""
        sid = self._ids.get(nfa_set)
        if sid is not None:
            return sid
        lits: dict[str, frozenset[int]] = {}
        preds: dict[CharTest, frozenset[int]] = {}
        accept = live = 0
        for q in nfa_set:
            live |= self._bit[q]
            out = self._out[q]
            if out is None:
                accept |= self._bit[q]
                continue
            cs, clo = out
            if cs.char is not None:
                prev = lits.get(cs.char)
                lits[cs.char] = clo if prev is None else prev | clo
            else:
                prev = preds.get(cs.test)
                preds[cs.test] = clo if prev is None else prev | clo
        sid = len(self._sets)
        self._ids[nfa_set] = sid
        self._sets.append(nfa_set)
        self._edges.append((lits, tuple(preds.items())))
        self.trans.append({})
        self.ascii_trans.append([-1] * 128)
        self.accept.append(accept)
        self.final.append(accept != 0)
        self.live.append(live)
        return sid

    # -- running ------------------------------------------------------------------------------

    def step(self, state: int, ch: str) -> int:
        """Next state after reading ``ch`` (DEAD if no pattern survives); cached in ``trans[state]``
        (a non-ASCII character only while the state remembers fewer than ``transitions_limit``)."""
        lits, preds = self._edges[state]
        parts = [clo for test, clo in preds if test(ch)]
        hit = lits.get(ch)
        if hit is not None:
            parts.append(hit)
        if not parts:
            nxt = DEAD
        else:
            nxt = self._intern(parts[0] if len(parts) == 1 else frozenset().union(*parts))
        row = self.trans[state]
        if ch < "\x80":
            row[ch] = self.ascii_trans[state][ord(ch)] = nxt
        elif len(row) < self.transitions_limit:
            row[ch] = nxt
        return nxt

    def run(self, text: str, state: int | None = None) -> int:
        """State reached from ``state`` (default: start) after reading all of ``text``."""
        s = self.start if state is None else state
        trans = self.trans
        for ch in text:
            nxt = trans[s].get(ch)
            s = self.step(s, ch) if nxt is None else nxt
        return s

    def restrict(self, state: int, mask: int) -> int:
        """The state with only the patterns in bitmask ``mask`` kept (DEAD if none is left)."""
        bit = self._bit
        return self._intern(frozenset(q for q in self._sets[state] if bit[q] & mask))

    def char_labels(self) -> tuple[frozenset[str], tuple[CharTest, ...]]:
        """What the transitions test characters for: the single characters some edge reads,
        and the character-class tests of the others (each label once, in NFA order). Two
        characters that are the same literal (or neither is one) and that every test answers
        alike are read alike by every state."""
        labels = {id(edge[0]): edge[0] for edge in self._out.values() if edge is not None}.values()
        literals = frozenset(cs.char for cs in labels if cs.char is not None)
        return literals, tuple(cs.test for cs in labels if cs.char is None)

    def shortest_completion(self, state: int, mask: int = -1) -> str | None:
        """A shortest string taking ``state`` to one accepting a pattern in ``mask``; None if impossible.

        Breadth-first search over the NFA, one representative char per transition label.
        """
        bit, out = self._bit, self._out
        frontier = sorted(q for q in self._sets[state] if bit[q] & mask)
        parent: dict[int, tuple[int, str] | None] = dict.fromkeys(frontier)
        queue = deque(frontier)
        while queue:
            q = queue.popleft()
            edge = out[q]
            if edge is None:
                return _spell(parent, q)
            cs, clo = edge
            for t in sorted(clo):
                if t not in parent:
                    parent[t] = (q, cs.pick)  # type: ignore[assignment]
                    queue.append(t)
        return None


def _spell(parent: dict[int, tuple[int, str] | None], q: int) -> str:
    """The characters along the BFS parent chain ending at ``q``."""
    chars = []
    link = parent[q]
    while link is not None:
        q, ch = link
        chars.append(ch)
        link = parent[q]
    return "".join(reversed(chars))


def _coreachable(nfa: _NFA) -> list[bool]:
    """Per NFA state: can a final state be reached from it (through epsilons and char edges)?"""
    preds: list[list[int]] = [[] for _ in nfa.owner]
    for q, targets in enumerate(nfa.eps):
        for t in targets:
            preds[t].append(q)
    for q, edge in enumerate(nfa.edge):
        if edge is not None:
            preds[edge[1]].append(q)
    reach = [False] * len(nfa.owner)
    stack = list(nfa.finals)
    for q in stack:
        reach[q] = True
    while stack:
        for p in preds[stack.pop()]:
            if not reach[p]:
                reach[p] = True
                stack.append(p)
    return reach
