"""Where a checker first rejects a text: for error messages and up-front refutation."""

from __future__ import annotations

from typing import Any

from .layers.layer_protocol import ParseState, StateT


def first_rejection(
    checker: StateT, text: str, start: int = 0, chunk: int = 256
) -> tuple[int | None, StateT]:
    """Where feeding ``text[start:]`` to ``checker`` is first rejected: ``(offset of the
    character that is rejected, or None, last checker before it)``. Feeds whole chunks and
    goes character by character only inside the chunk that fails."""
    pos = start
    while pos < len(text):
        piece = text[pos : pos + chunk]
        after = checker.feed(piece)
        if after is not None:
            checker, pos = after, pos + len(piece)
            continue
        for i, ch in enumerate(piece):
            after = checker.feed(ch)
            if after is None:
                return pos + i, checker
            checker = after
        pos += len(piece)  # rejected whole but not char by char (a \r\n split): trust the finer answer
    return None, checker


def first_error_offset(checker: ParseState[Any], text: str) -> int:
    """The offset of the first character of ``text`` that ``checker`` rejects (``len(text)``
    when none is)."""
    offset, _ = first_rejection(checker, text)
    return len(text) if offset is None else offset
