"""Lines and cursors in source text: where lines break, and a cursor as a character offset.

Lines end at ``\\r\\n``, ``\\r`` or ``\\n`` only, as Python's tokenizer and editors count them
(``str.splitlines`` also splits at form feeds and other characters that Python files contain).
"""

from __future__ import annotations

import re

from .errors import FimConstrainError

#: a line break
NEWLINE = re.compile(r"\r\n|\r|\n")


def last_line(text: str) -> str:
    """The text after the last line break of ``text`` (all of it when there is none): the cursor's
    line before the cursor, for a prefix (not a split of the whole file)."""
    return text[max(text.rfind("\n"), text.rfind("\r")) + 1 :]


def line_starts(text: str) -> list[int]:
    """Offsets at which each line begins (the first is 0; a final line break starts an empty line)."""
    return [0] + [m.end() for m in NEWLINE.finditer(text)]


def cursor_offset(text: str, cursor: str | int) -> int:
    """Character offset of ``cursor``: ``LINE:COL`` (1-based, as editors show it) or a 0-based offset
    (the length of the prefix); raises :class:`~fimconstrain.FimConstrainError` when it is neither
    or lies outside ``text``."""
    spec = cursor if isinstance(cursor, int) else str(cursor).strip()
    if isinstance(spec, int) or re.fullmatch(r"[0-9]+", spec):
        offset = int(spec)
        if not 0 <= offset <= len(text):
            raise FimConstrainError(f"cursor offset {offset} is outside the file (0..{len(text)})")
        return offset
    m = re.fullmatch(r"([0-9]+):([0-9]+)", spec)
    if not m:
        raise FimConstrainError(f"cursor {cursor!r} is neither LINE:COL nor a character offset")
    line, col = int(m.group(1)), int(m.group(2))
    starts = line_starts(text)
    if not 1 <= line <= len(starts):
        raise FimConstrainError(f"cursor line {line} is outside the file (1..{len(starts)})")
    end = starts[line] if line < len(starts) else len(text)
    width = len(text[starts[line - 1] : end].rstrip("\r\n"))
    if not 1 <= col <= width + 1:
        raise FimConstrainError(f"cursor column {col} is outside line {line} (1..{width + 1})")
    return starts[line - 1] + col - 1
