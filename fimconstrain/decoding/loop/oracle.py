"""The ground truth of validity: the running interpreter's own ``ast.parse``.

One helper for the decode loop, evaluation, the tests and the benchmarks: what
``ast.parse`` says about a text, warnings silenced (invalid escape sequences
and the like warn but parse).
"""

from __future__ import annotations

import ast
import warnings


def ast_error(text: str) -> Exception | None:
    """What the running interpreter's ``ast.parse`` raises on ``text`` read as a file's
    contents (a leading byte order mark dropped, as CPython drops it from a file), or None
    when it accepts it.

    A SyntaxError for invalid code, a ValueError for NUL characters or lone surrogates (a
    UnicodeError is one), and a RecursionError or MemoryError where nesting overflows the parser.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text[1:] if text.startswith("\ufeff") else text)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as error:
        return error
    return None


def ast_parses(text: str) -> bool:
    """Whether the running interpreter's ``ast.parse`` accepts ``text`` (warnings silenced)."""
    return ast_error(text) is None
