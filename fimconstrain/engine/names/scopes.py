"""The file-local name provider: the bare names visible at the cursor (paper 003 §3.1 and
appendix C.1, whose SQL engine keeps a stack of scopes to resolve aliases; here Python's).

The prefix and the suffix are read once with the forgiving scanner (:mod:`.py_tokens`) and
the statement reader (:mod:`.name_positions`), which also say where names are bound. Scopes
follow indentation: a ``def``/``class`` statement opens a scope holding the lines indented
deeper than it. Visible at the cursor: the builtins, the module's names, the names of every
enclosing function, and a class body's names only directly in that body (Python's rule:
methods do not see them, their headers do). Bindings after the cursor count too (the suffix's part of the same
scopes), and so do names the middle binds (the caller passes them in :class:`NamePoint`).

Over-approximation is the safe direction: comprehension variables and lambda parameters count
for the whole enclosing scope, a blank cursor line may continue any enclosing block, and every
name of an ``import`` statement counts. The set is not ``confident`` when the module can gain
names this reading cannot see (``from m import *``, ``globals()``, ``exec``).
"""

from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass, field
from functools import lru_cache

from .name_positions import ALWAYS, Reader
from .provider import NamePoint, NameSet
from .py_tokens import NAME, NEWLINE, Token, scan

#: builtins of Pythons newer than the one running, and the names every module or class body has
_EXTRA = {
    "aiter", "anext", "EncodingWarning", "BaseExceptionGroup", "ExceptionGroup",
    "PythonFinalizationError", "__name__", "__file__", "__doc__", "__package__", "__spec__",
    "__loader__", "__builtins__", "__path__", "__annotations__", "__debug__", "__module__",
    "__qualname__", "__class__", "__dict__", "__all__", "__version__",
}  # fmt: skip
ALWAYS_VISIBLE = frozenset(
    set(dir(builtins)) | _EXTRA | set(keyword.kwlist) | set(getattr(keyword, "softkwlist", ()))
)
_DYNAMIC = {"globals", "exec"}  # names whose calls can bind module names unseen
_CALLED = re.compile(r"[ \t]*\(")
_DEF = re.compile(r"[ \t]+def\b")


@dataclass
class _Scope:
    indent: int  # the column of the statement that opened it (-1: the module)
    kind: str  # "module", "def", "class"
    names: set[str] = field(default_factory=set)
    visible: bool = False  # encloses the cursor


class _Binder:
    """Walks tokens statement by statement, keeping a stack of open scopes and recording
    the names bound in each."""

    def __init__(self, text: str):
        self.text = text
        self.stack = [_Scope(-1, "module", visible=True)]
        self.reader = Reader()
        self.pending: tuple[Token, frozenset[str], int] | None = None  # a name waiting for its follow
        self.after_import = False  # a ``from`` statement's ``import`` has been read
        self.dynamic = False

    def column(self, at: int) -> int:
        return at - self.text.rfind("\n", 0, at) - 1

    def feed(self, tokens: list[Token]) -> None:
        for token in tokens:
            self.feed_one(token)

    def feed_one(self, token: Token) -> None:
        reader = self.reader
        if self.pending is not None:
            name, binds, depth = self.pending
            self.pending = None
            if binds is ALWAYS or token.text in binds:
                self.bind(name.text, depth)
        if token.kind == NEWLINE:
            self.reader = reader.step(token)
            return
        if reader.at_statement_start:
            self.start_statement(token)
        if token.kind == NAME and not keyword.iskeyword(token.text):
            if token.text in _DYNAMIC and reader.kind not in ("import", "from") and self._called(token):
                self.dynamic = True
            position = reader.position()
            if position.binds and not position.attribute and self.binds_here(reader):
                self.pending = (token, position.binds, len(reader.frames))
        elif token.text == "import" and reader.kind == "from":
            self.after_import = True
        elif token.text == "*" and reader.kind == "from" and self.after_import:
            self.dynamic = True
        self.reader = reader.step(token)

    def binds_here(self, reader: Reader) -> bool:
        """Whether a binding in this statement names a variable (not a ``from`` module path,
        a dotted import or a ``del``)."""
        if reader.kind == "from":
            return self.after_import
        if reader.kind == "import":
            return reader.prev is None or reader.prev.text != "."
        return reader.kind not in ("del", "nonlocal")

    def start_statement(self, token: Token) -> None:
        indent = self.column(token.start)
        while len(self.stack) > 1 and self.stack[-1].indent >= indent:
            self.stack.pop()
        self.after_import = False
        if token.text in ("def", "class") or (token.text == "async" and self._next_is_def(token)):
            self.stack.append(_Scope(indent, "class" if token.text == "class" else "def"))

    def _next_is_def(self, token: Token) -> bool:
        return _DEF.match(self.text, token.end) is not None

    def _called(self, token: Token) -> bool:
        prev = self.reader.prev
        return (prev is None or prev.text != ".") and _CALLED.match(self.text, token.end) is not None

    def bind(self, name: str, depth: int) -> None:
        kind = self.reader.kind
        if kind == "global":
            self.stack[0].names.add(name)
        elif kind in ("def", "class") and depth == 1 and len(self.stack) > 1:
            self.stack[-2].names.add(name)  # the def's or class's own name: its enclosing scope
        else:
            self.stack[-1].names.add(name)

    def finish(self) -> None:
        """Settle a name waiting for its follow at the end of the text."""
        if self.pending is not None:
            name, binds, depth = self.pending
            self.pending = None
            if binds is ALWAYS:
                self.bind(name.text, depth)


@dataclass(frozen=True)
class FileScopes:
    """The names visible at the cursor between ``prefix`` and ``suffix`` (see the module)."""

    visible: frozenset[str]
    confident: bool

    @classmethod
    def read(cls, prefix: str, suffix: str) -> FileScopes:
        return _read(prefix, suffix)

    def names(self, point: NamePoint) -> NameSet:
        """:class:`NameProvider` for bare names: the visible names, the middle's own and
        the builtins; attributes are not this provider's (unknown)."""
        if point.receiver is not None:
            return NameSet(None)
        return _with_middle(self, point.bound_in_middle)


@lru_cache(maxsize=64)
def _with_middle(scopes: FileScopes, bound: frozenset[str]) -> NameSet:
    return NameSet(scopes.visible | bound, scopes.confident)


@lru_cache(maxsize=16)
def _read(prefix: str, suffix: str) -> FileScopes:
    binder = _Binder(prefix)
    binder.feed(list(scan(prefix)))
    binder.finish()
    # a class body's names: in the body, and in the header of a def directly in it (defaults
    # and annotations are evaluated in the class's scope)
    seen_from = binder.stack[-2] if binder.reader.kind in ("def", "class") else binder.stack[-1]
    for scope in binder.stack:
        scope.visible = scope.kind != "class" or scope is seen_from
    chain = list(binder.stack)
    # the suffix's first line ends the cursor's statement, unless that line is blank so far
    cursor_line = prefix[prefix.rfind("\n") + 1 :]
    if cursor_line.strip():
        rest = suffix[suffix.find("\n") + 1 :] if "\n" in suffix else ""
    else:
        rest = cursor_line + suffix  # keeps the columns of its first line
    binder.text, binder.reader, binder.after_import = rest, Reader(), False
    binder.feed(list(scan(rest)))
    binder.finish()
    names = set(ALWAYS_VISIBLE)
    for scope in chain:
        if scope.visible:
            names |= scope.names
    return FileScopes(frozenset(names), not binder.dynamic)
