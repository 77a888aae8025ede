"""A forgiving Python token scanner for the semantic layer (paper 003 §3.1: a name provider
reads the partial program's tokens).

The file around a cursor is never a whole program while a middle is being written: brackets
are open, a string may be unterminated, the suffix starts inside a statement. The standard
library's ``tokenize`` raises on such text (and its indentation errors depend on the
interpreter), so the completion engines read it with this scanner instead: it never raises,
an unterminated string runs to the end of its line (or of the text, for a triple-quoted one),
and a character it does not know is a one-character ``ERROR`` token. Indentation is not
tracked here; readers that need it take the column of a statement's first token.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

NAME, NUMBER, STRING, OP, NEWLINE, ERROR = "NAME", "NUMBER", "STRING", "OP", "NEWLINE", "ERROR"

_STRING_PREFIX = r"(?:[rRbBuUfFtT]{1,2})?"
_PATTERNS = [
    (None, r"[ \t\f]+|\\\r?\n|\\\r|#[^\r\n]*"),  # blanks, a line continuation, a comment
    (NEWLINE, r"\r?\n|\r"),
    (STRING, _STRING_PREFIX + r"'''(?:[^\\]|\\.|\\\Z)*?(?:'''|\Z)"),
    (STRING, _STRING_PREFIX + r'"""(?:[^\\]|\\.|\\\Z)*?(?:"""|\Z)'),
    (STRING, _STRING_PREFIX + r"'(?:[^\\'\r\n]|\\.|\\\Z)*(?:'|(?=[\r\n])|\Z)"),
    (STRING, _STRING_PREFIX + r'"(?:[^\\"\r\n]|\\.|\\\Z)*(?:"|(?=[\r\n])|\Z)'),
    (NUMBER, r"0[xXoObB][0-9a-fA-F_]*|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?[\d_]+)?[jJ]?"),
    (NAME, r"[^\W\d]\w*"),
    (
        OP,
        r"\*\*=|//=|>>=|<<=|\.\.\.|->|:=|\*\*|//|>>|<<|<=|>=|==|!=|[-+*/%@&|^]=|[-+*/%@&|^~<>()\[\]{},:;.=!]",
    ),
    (ERROR, r"[\s\S]"),
]
_SCANNER = re.compile("|".join(f"({pattern})" for _, pattern in _PATTERNS), re.DOTALL)
_KINDS = [kind for kind, _ in _PATTERNS]


class Token(NamedTuple):
    """One token: its kind (``NAME``, ``NUMBER``, ``STRING``, ``OP``, ``NEWLINE``, ``ERROR``), its
    text and where it starts in the scanned text (plus the ``base`` offset given to :func:`scan`)."""

    kind: str
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def scan(text: str, base: int = 0) -> Iterator[Token]:
    """The tokens of ``text`` (blanks, comments and line continuations left out); offsets are
    shifted by ``base``. Never raises."""
    for match in _SCANNER.finditer(text):
        kind = _KINDS[match.lastindex - 1] if match.lastindex else None
        if kind is not None:
            yield Token(kind, match.group(), base + match.start())


#: the prefixes a string literal may start with: a name being written may become one
STRING_PREFIXES = frozenset({"r", "b", "u", "f", "t", "rb", "br", "fr", "rf", "tr", "rt"})


def is_name_char(ch: str) -> bool:
    """Whether ``ch`` can continue an identifier."""
    return ("a" + ch).isidentifier()
