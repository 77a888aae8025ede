"""What kind of name is written at a point: read, bound, or either, decided by what follows.

Paper 003 (§3.1) splits a completion engine into a context-free layer and a context-sensitive
one that sees the partial program's structure. This is the structure the name providers need:
walking a statement's tokens (:mod:`.py_tokens`), :class:`Reader` says of the next identifier

* whether it is an attribute (after ``.``, with its receiver's offsets) or a bare name;
* ``escapes``: what may follow it for it to be legitimate although no provider knows it. An
  empty set is a read (``x + |``, ``return |``). ``None`` is a binding position (assignment and
  loop targets, ``def``/``class`` names, parameters, import names and aliases, comprehension
  variables, ``global``, ``del``, patterns) or one this reader cannot classify: never
  constrained. Otherwise the name binds, or is a keyword argument, when followed by one of
  them: ``=``, ``,``, ``:``, ``)``, ``]`` for a statement's targets, ``:=`` for a walrus, ``=``
  for a keyword argument of a call (of any callable: parameters are not looked up);
* ``hard``: a read that nothing later in the statement can bind, so a confident provider may
  exclude an unknown name there. Inside parentheses, brackets and braces a name may be a
  comprehension variable whose ``for`` comes after it (``[x.y for x in z]``): not hard;
* ``binds``: the follows that make it a new name of its scope, or a new attribute of its
  receiver (``self.x =``); a keyword argument does not; ``ALWAYS`` for binding positions.

The reader errs towards "unconstrained": a position it is unsure of gets ``None``. Readers are
immutable, so the decode loop can fork one for each candidate token.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, replace

from .py_tokens import NAME, NEWLINE, NUMBER, OP, STRING, Token

TARGET_FOLLOWS = frozenset({"=", ",", ":", ")", "]"})
WALRUS = frozenset({":="})
KWARG = frozenset({"=", ":="})
CHAINED = frozenset({"="})
NOTHING: frozenset[str] = frozenset()
ALWAYS = frozenset({"*"})  # ``binds`` of a binding position: whatever follows

_BINDING_KEYWORDS = {"def", "class", "as", "import", "global", "nonlocal", "for", "lambda", "del"}
_READ_KEYWORDS = {
    "return", "yield", "await", "assert", "raise", "not", "and", "or", "in", "is", "else",
    "with", "except", "if", "elif", "while", "from",
}  # fmt: skip
_BINDING_STATEMENTS = {"import", "from", "global", "nonlocal", "case", "del"}
_COMPOUND = {
    "def", "class", "if", "elif", "else", "while", "for", "with", "try", "except", "finally", "case",
}  # fmt: skip
_OPERAND_KEYWORDS = {"None", "True", "False"}
_CLOSERS = {")", "]", "}"}
_COMPREHENSIONS = {"call", "group", "brace"}  # brackets that may hold a comprehension


@dataclass(frozen=True)
class Position:
    """The next identifier's kind: see the module's docstring."""

    attribute: bool
    escapes: frozenset[str] | None
    binds: frozenset[str]
    hard: bool = False
    receiver: tuple[int, int] | None = None  # an attribute's receiver: offsets in the text read

    @property
    def checked(self) -> bool:
        """Whether a provider's answer matters here at all."""
        return self.escapes is not None


UNCHECKED = Position(False, None, NOTHING)
BINDING = Position(False, None, ALWAYS)


@dataclass(frozen=True)
class _Frame:
    """One open bracket, or the statement itself at the bottom."""

    role: str  # "stmt", "call", "sub", "group", "brace", "params", "tparams"
    target: bool = False  # among a statement's assignment targets (parenthesised ones too)
    mode: str = ""  # "for": loop variables until ``in``; "lambda": parameters until ``:``; "value"
    chain: int = -1  # where the expression before the bracket began (restored when it closes)


def is_operand(token: Token | None) -> bool:
    """Whether ``token`` ends an operand (a name, literal or closing bracket)."""
    if token is None:
        return False
    if token.kind == NAME:
        return not keyword.iskeyword(token.text) or token.text in _OPERAND_KEYWORDS
    return token.kind in (NUMBER, STRING) or token.text in _CLOSERS


def _augmented(op: str) -> bool:
    return len(op) >= 2 and op.endswith("=") and op not in ("==", "<=", ">=", "!=")


@dataclass(frozen=True)
class Reader:
    """The state after some tokens of a file: the current statement's open brackets, its first
    keyword, and the last two tokens. :meth:`step` returns a new reader."""

    frames: tuple[_Frame, ...] = (_Frame("stmt", target=True),)
    kind: str = ""  # the statement's keyword ("def", "for", ...), "expr", or "" before its first token
    prev: Token | None = None
    prev2: Token | None = None
    chain: int = -1  # where the current primary expression (``a.b(c).d``) began
    chain_lead: str = ""  # the token before it (``as self.x`` binds)
    params_seen: bool = False  # a def statement's parameter list has opened

    @property
    def at_statement_start(self) -> bool:
        return not self.kind

    def step(self, token: Token) -> Reader:
        """The reader after ``token``."""
        text = token.text
        if token.kind == NEWLINE:
            return self if len(self.frames) > 1 else Reader()
        frames, kind = self.frames, self.kind
        if not kind or (kind == "async" and text in ("def", "for", "with")):
            kind = _statement_kind(token)
            if kind != "expr":
                frames = (replace(frames[0], target=False),)
        elif len(frames) == 1 and (text == ";" or (text == ":" and self._ends_header())):
            return Reader()
        top = frames[-1]
        if token.kind == NAME and text == "lambda":
            top = replace(top, mode="lambda")
        elif token.kind == NAME and text == "for" and (top.role != "stmt" or kind == "for"):
            top = replace(top, mode="for")
        elif (text, top.mode) in (("in", "for"), (":", "lambda")):
            top = replace(top, mode="")  # loop variables or lambda parameters end
        elif top.role == "params" and text in (":", "=", ","):
            top = replace(top, mode="" if text == "," else "value")
        elif top.role == "stmt" and top.target and (text in ("=", ":") or _augmented(text)):
            top = replace(top, target=False)
        frames = (*frames[:-1], top)
        chain, lead = self.chain, self.chain_lead
        if is_operand(token) and not is_operand(self.prev) and (self.prev is None or self.prev.text != "."):
            chain, lead = token.start, (self.prev.text if self.prev is not None else "")
        new = Reader(frames, kind, token, self.prev, chain, lead, self.params_seen)
        return new._brackets(token)

    def _brackets(self, token: Token) -> Reader:
        """Open or close a bracket frame for ``token`` (this reader has just read it)."""
        text, frames = token.text, self.frames
        if token.kind != OP:
            return self
        if text in _CLOSERS:
            return replace(self, frames=frames[:-1], chain=frames[-1].chain) if len(frames) > 1 else self
        if text not in ("(", "[", "{"):
            return self
        operand = is_operand(self.prev2)
        if self.kind == "def" and len(frames) == 1 and not self.params_seen:
            role = "tparams" if text == "[" else "params"
            frame = _Frame(role, chain=self.chain)
            return replace(self, frames=(*frames, frame), params_seen=text == "(")
        if self.kind == "class" and len(frames) == 1 and operand:
            role = "tparams" if text == "[" else "call"
        elif text == "{":
            role = "brace"
        elif operand:
            role = "call" if text == "(" else "sub"
        else:
            role = "group"
        chain = self.chain if operand else token.start
        # loop variables and ``as`` targets may be parenthesised: ``for i, (a, b) in``
        binds = frames[-1].mode == "for" or (self.prev2 is not None and self.prev2.text == "as")
        frame = _Frame(role, frames[-1].target and role == "group", "for" if binds else "", chain)
        return replace(self, frames=(*frames, frame), chain=chain)

    def _ends_header(self) -> bool:
        """Whether a ``:`` at the statement's level ends a compound statement's header."""
        return self.kind in _COMPOUND and self.frames[0].mode != "lambda"

    def position(self) -> Position:
        """The kind of an identifier written next (see the module's docstring)."""
        top, prev, kind = self.frames[-1], self.prev, self.kind
        if not kind:
            return Position(False, TARGET_FOLLOWS, TARGET_FOLLOWS)
        if kind in _BINDING_STATEMENTS or top.mode == "for" or top.role == "tparams":
            return BINDING
        if top.mode == "lambda" or (top.role == "params" and top.mode != "value"):
            return BINDING if prev is None or prev.text != "=" else self._read()
        if prev is None:
            return UNCHECKED
        if prev.text == ".":
            return self._attribute(prev)
        if prev.kind == NAME and keyword.iskeyword(prev.text) and prev.text not in _OPERAND_KEYWORDS:
            return self._after_keyword(prev.text)
        if prev.kind != OP or prev.text in _CLOSERS or prev.text in (";", ".", "..."):
            return UNCHECKED  # after an operand only a keyword can come
        return self._after_operator(prev.text)

    def _read(self) -> Position:
        return Position(False, NOTHING, NOTHING, hard=self._hard())

    def _hard(self) -> bool:
        """No comprehension variable bound later in the statement can make a read legitimate."""
        return not any(frame.role in _COMPREHENSIONS for frame in self.frames)

    def _in_targets(self) -> bool:
        return self.frames[-1].target or (self.frames[-1].role == "stmt" and self.frames[0].target)

    def _attribute(self, dot: Token) -> Position:
        if self.chain < 0 or self.chain >= dot.start or self.chain_lead in ("as", "for"):
            return UNCHECKED
        if self._in_targets():
            return Position(True, TARGET_FOLLOWS, TARGET_FOLLOWS, receiver=(self.chain, dot.start))
        return Position(True, NOTHING, NOTHING, hard=self._hard(), receiver=(self.chain, dot.start))

    def _after_keyword(self, word: str) -> Position:
        if word in _BINDING_KEYWORDS:
            return BINDING
        if word in ("if", "elif", "while") and len(self.frames) == 1 and self.kind == word:
            return Position(False, WALRUS, WALRUS)
        return self._read() if word in _READ_KEYWORDS else UNCHECKED

    def _after_operator(self, op: str) -> Position:
        top = self.frames[-1]
        if op in ("(", "[", "{", ","):
            if top.role == "call":
                return Position(False, KWARG, WALRUS)
            if self._in_targets():
                return Position(False, TARGET_FOLLOWS, TARGET_FOLLOWS)
            return self._read() if top.role == "stmt" else Position(False, WALRUS, WALRUS)
        if op in ("*", "**") and not is_operand(self.prev2) and self._in_targets():
            return Position(False, TARGET_FOLLOWS, TARGET_FOLLOWS)
        if op == "=" and top.role == "stmt" and self.kind == "expr":
            return Position(False, CHAINED, CHAINED)
        return self._read()


def _statement_kind(token: Token) -> str:
    """The kind of a statement from its first token: its keyword, or "expr"."""
    if token.kind == NAME and (keyword.iskeyword(token.text) or token.text == "case"):
        return token.text
    return "decorator" if token.text == "@" else "expr"
