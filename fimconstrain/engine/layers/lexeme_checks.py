"""CPython's checks on lexemes its tokenizer has already read: what the grammar's regular
expressions let through and CPython still rejects (bad escapes, non-ASCII bytes, names).

The Python layer (:mod:`~.python_layer`, :mod:`~.fstring_modes`) applies them when a symbol
ends, so that the checker accepts exactly what ``ast.parse`` accepts.
"""

from __future__ import annotations

import ast
import warnings


def identifier_ok(text: str) -> bool:
    """CPython's check on non-ASCII names, on the characters as written (a combining mark
    cannot start a name; ``¹`` is no identifier character even though NFKC makes it ``1``)."""
    return text.isidentifier()


#: the escapes whose decoding can fail (a truncated ``\x``, ``\u`` or ``\U``, a code point past
#: U+10FFFF, a malformed or unknown ``\N{...}``); every other escape decodes, or only warns
_FALLIBLE_STR_ESCAPES = ("\\x", "\\u", "\\U", "\\N")
_FALLIBLE_BYTES_ESCAPES = ("\\x",)


def string_ok(text: str) -> bool:
    """CPython rejects some string lexemes after tokenizing them: bad escapes such as
    ``'\\x1'`` and non-ASCII bytes. Those it may reject are parsed by CPython itself; an
    f-string (before 3.12 one lexeme, its fields included) always is."""
    quote = min((i for i in (text.find("'"), text.find('"')) if i >= 0), default=0)
    prefix = text[:quote].lower()
    is_bytes = "b" in prefix
    if is_bytes and not text.isascii():
        return _parses(text)
    if "\\" not in text:
        return True
    if "f" in prefix:
        return _parses(text)
    if "r" in prefix:  # (a raw string decodes no escape)
        return True
    fallible = _FALLIBLE_BYTES_ESCAPES if is_bytes else _FALLIBLE_STR_ESCAPES
    return _parses(text) if any(escape in text for escape in fallible) else True


def _parses(text: str) -> bool:
    """Whether CPython parses the string lexeme ``text`` (its warnings ignored)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text, mode="eval")
        except (SyntaxError, ValueError):
            return False
    return True


def fstring_text_ok(text: str, quote: str, raw: int) -> bool:
    """CPython's checks on the escapes of an f-string's literal text or format spec (raw text
    has none): the text, braces unescaped, must be a valid plain string literal. A lone
    backslash before a field is a character of its own (an invalid escape: a warning, not an
    error)."""
    if raw or "\\" not in text:
        return True
    body = text.replace("{{", "{").replace("}}", "}")
    if (len(body) - len(body.rstrip("\\"))) % 2:
        body = body[:-1]
    return string_ok(quote + body + quote)
