"""Whether a candidate's text keeps the names of the middle resolvable (paper 003 §3.2-3.3).

Synchromesh checks a token by running the completion engine over the partial program and
matching what the token adds against the provider's answer, with a derivative test for an
identifier still being written. :class:`NameCheck` does this for one generation: it keeps the
file's text so far, a statement reader (:mod:`.name_positions`) after all but its last token,
and the names the middle has bound. :meth:`NameCheck.verdict` looks only at identifiers whose
standing a candidate can change (the last token, if it is a name, and the names the candidate
writes) and reports a *transition*: a name that could still resolve before the candidate and
cannot after it. A name that was already unresolvable (the user typed it; an earlier step let
it through) is not held against later tokens, so one unknown name never steers the rest.

At a read, an identifier being written resolves while some known name starts with it (or it
may become a string's prefix, ``rb"``), a finished one when it is known. Where the name may
yet be a binding or a keyword argument (its position has escapes) nothing is held against it
until what follows is written: then it resolves when it is known or the follow is one of the
escapes (``x =`` binds, ``f(key=`` is a keyword argument). A failure is ``excluded`` only
where the provider is confident and the position is a read nothing later can bind (``hard``);
elsewhere it is a soft failure the decode loop reranks by.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from .name_positions import ALWAYS, Position, Reader
from .provider import UNKNOWN, NamePoint, NameProvider, NameSet
from .py_tokens import ERROR, NAME, NEWLINE, OP, STRING_PREFIXES, Token, is_name_char, scan


@dataclass(frozen=True)
class Verdict:
    """What a candidate does to the middle's names: ``fails`` when it makes a name
    unresolvable, ``excluded`` when a confident provider rules the candidate out."""

    fails: bool = False
    excluded: bool = False
    name: str = ""  # the name that fails (for reports)
    attribute: bool = False


RESOLVES = Verdict()

#: a character that may be part of a name: a word character, or any beyond ASCII (a superset)
_NAME_LIKE = re.compile(r"[\w\x80-\U0010ffff]")


def _statement_tail(tokens: list[Token]) -> int:
    """Index of the first token of the last logical line (bracket depth only; the reader
    handles ``;`` and compound statements)."""
    depth, start = 0, 0
    for i, token in enumerate(tokens):
        if token.kind == OP and token.text in "([{":
            depth += 1
        elif token.kind == OP and token.text in ")]}":
            depth = max(0, depth - 1)
        elif token.kind == NEWLINE and depth == 0:
            start = i + 1
    return start


@dataclass(frozen=True)
class NameMark:
    """A :class:`NameCheck`'s reading at one point of the middle (:meth:`NameCheck.mark`)."""

    text: str
    reader: Reader
    tail_start: int
    bound: frozenset[str]
    bound_attributes: dict[str, frozenset[str]]


class NameCheck:
    """The names of one generation: see the module's docstring.

    ``text`` is the file up to where the middle's tokens begin (the prefix, less any end the
    tokens write again); ``names`` answers bare names, ``attributes`` (optional) attributes.
    """

    def __init__(
        self,
        text: str,
        suffix: str,
        names: NameProvider,
        attributes: NameProvider | None = None,
    ):
        self.text, self.suffix = text, suffix
        self.middle_start = len(text)
        self.providers = names, attributes
        self.bound: frozenset[str] = frozenset()
        self.bound_attributes: dict[str, frozenset[str]] = {}  # receiver -> attributes the middle set
        tokens = list(scan(text))
        first = _statement_tail(tokens)
        reader = Reader()
        for token in tokens[first:-1]:
            reader = reader.step(token)
        self.reader = reader
        self.tail_start = tokens[-1].start if tokens and first < len(tokens) else len(text)
        self._tail_ok: bool | None = None
        self._tail_name: bool | None = None

    def mark(self) -> NameMark:
        """Where the names stand now, for :meth:`go_back` (a decoder that takes back tokens)."""
        return NameMark(self.text, self.reader, self.tail_start, self.bound, self.bound_attributes)

    def go_back(self, mark: NameMark) -> None:
        """Make the names what they were at ``mark`` (:meth:`advance` never changes a marked value)."""
        self.text, self.reader, self.tail_start = mark.text, mark.reader, mark.tail_start
        self.bound, self.bound_attributes = mark.bound, mark.bound_attributes
        self._tail_ok = self._tail_name = None

    def _provider_answer(self, position: Position, text: str, start: int) -> NameSet | None:
        """The provider's set for the identifier starting at ``start`` (None: no provider)."""
        names, attributes = self.providers
        if position.attribute:
            if attributes is None or position.receiver is None:
                return None
            receiver = self._receiver(position, text)
            point = NamePoint(text, self.suffix, receiver, self.middle_start, self.bound, start)
            answer = self._ask(attributes, point)
            return answer.union(self.bound_attributes.get(receiver, frozenset()))
        return self._ask(names, NamePoint(text, self.suffix, None, self.middle_start, self.bound, start))

    @staticmethod
    def _ask(provider: NameProvider, point: NamePoint) -> NameSet:
        """The provider's answer; unknown if it fails (a provider never blocks a completion)."""
        try:
            return provider.names(point)
        except Exception:
            return UNKNOWN

    @staticmethod
    def _receiver(position: Position, text: str) -> str:
        assert position.receiver is not None
        return text[position.receiver[0] : position.receiver[1]].strip()

    def _status(
        self, token: Token, follow: Token | None, position: Position, text: str
    ) -> tuple[bool, NameSet | None]:
        """Whether the identifier ``token`` can still resolve, given what follows it in ``text``."""
        answer = self._provider_answer(position, text, token.start)
        if answer is None or not answer.known:
            return True, answer
        escapes = position.escapes or frozenset()
        if follow is not None and follow.kind != ERROR:
            return answer.has(token.text) or follow.text in escapes, answer
        if escapes:
            return True, answer  # what follows may make it a binding or a keyword argument
        if follow is not None or (token.end == len(text) and is_name_char(text[-1])):
            # still being written, or about to become a string's prefix (``rb"``)
            return answer.has_prefix(token.text) or token.text.lower() in STRING_PREFIXES, answer
        return answer.has(token.text), answer

    def _walk(self, text: str) -> list[tuple[Token, Token | None, Position]]:
        """The names from the tail on in ``text``: each with its follow and position."""
        out: list[tuple[Token, Token | None, Position]] = []
        reader = self.reader
        pending: tuple[Token, Position] | None = None
        for token in scan(text[self.tail_start :], self.tail_start):
            if pending is not None:
                out.append((pending[0], token, pending[1]))
                pending = None
            if token.kind == NAME and not keyword.iskeyword(token.text):
                position = reader.position()
                if position.checked or position.binds:
                    pending = (token, position)
            reader = reader.step(token)
        if pending is not None:
            out.append((pending[0], None, pending[1]))
        return out

    def _tail_status(self) -> bool:
        """Whether the last token of the text so far, if it is a name, can still resolve."""
        if self._tail_ok is None:
            self._tail_ok = True
            for token, follow, position in self._walk(self.text):
                if token.start == self.tail_start and position.checked:
                    self._tail_ok = self._status(token, follow, position, self.text)[0]
        return self._tail_ok

    def _tail_is_name(self) -> bool:
        """Whether the text so far ends in a name token (cached)."""
        if self._tail_name is None:
            last = next(scan(self.text[self.tail_start :], self.tail_start), None)
            self._tail_name = last is not None and last.kind == NAME
        return self._tail_name

    def verdict(self, added: str) -> Verdict:
        """What appending ``added`` to the text does to the middle's names. Text with no
        character of a name after text that does not end in one (``)``, ``:``, a line break,
        an indent: a fifth of the candidates judged in the editor benchmark) writes no name and
        leaves the names before it as they were: it resolves without a walk."""
        if not added or (_NAME_LIKE.search(added) is None and not self._tail_is_name()):
            return RESOLVES
        text, before = self.text + added, len(self.text)
        result = RESOLVES
        for token, follow, position in self._walk(text):
            if not position.checked:
                continue
            if token.end <= before and (follow is None or follow.start < before):
                continue  # its standing is as it was
            if token.start < before and not self._tail_status():
                continue  # already unresolvable: not this candidate's doing
            ok, answer = self._status(token, follow, position, text)
            if not ok:
                assert answer is not None
                excluded = answer.confident and position.hard
                if excluded or not result.fails:
                    result = Verdict(True, excluded, token.text, position.attribute)
                if excluded:
                    break
        return result

    def advance(self, added: str) -> None:
        """Append the chosen candidate's text: move the reader on and record new bindings."""
        if not added:
            return
        text = self.text + added
        bound = set()
        tokens = list(scan(text[self.tail_start :], self.tail_start))
        for token, follow, position in self._walk(text):
            if follow is None or not (position.binds is ALWAYS or follow.text in position.binds):
                continue
            if position.attribute:
                receiver = self._receiver(position, text)
                known = self.bound_attributes.get(receiver, frozenset())
                self.bound_attributes = {**self.bound_attributes, receiver: known | {token.text}}
            else:
                bound.add(token.text)
        reader = self.reader
        for token in tokens[:-1]:
            reader = reader.step(token)
        self.text, self.reader = text, reader
        self.tail_start = tokens[-1].start if tokens else self.tail_start
        self._tail_ok = None
        self._tail_name = None
        if bound - self.bound:
            self.bound = self.bound | bound
