"""Cut fuzzer: cut a file at two places and check the engine against ``ast.parse``.

A file F (a real standard-library file put through validity-preserving
transforms, or a generated snippet, perhaps mutated) is split into
prefix / middle / suffix; the engine must accept exactly when ast.parse does
(see ``check``). Used by ``tests/engine/test_cut_fuzz.py`` (bounded, hypothesis) and
``benchmarks/cut_fuzz.py`` (the long run). Generators are functions of a
``random.Random`` so both drive the same code; ``stdlib_cases`` /
``snippet_cases`` wrap them as hypothesis strategies (a drawn seed, replayable).
"""

from __future__ import annotations

import io
import itertools
import random
import re
import time
import tokenize
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from math import gcd

from conftest import ast_ok, fc, read_utf8, sample_stdlib, uncompletable

from fimconstrain.engine.positions import NEWLINE

# ================================================================ source layout (tokenize)

_FSTART = getattr(tokenize, "FSTRING_START", -1)
_FEND = getattr(tokenize, "FSTRING_END", -1)
_TSTART = getattr(tokenize, "TSTRING_START", -1)
_TEND = getattr(tokenize, "TSTRING_END", -1)


@dataclass
class Tok:
    type: int
    string: str
    start: int  # absolute offsets
    end: int
    srow: int  # 1-based rows
    erow: int
    depth: int  # bracket depth before the token


@dataclass
class Layout:
    """Where the tokens of a '\\n'-terminated source are: what the transforms need."""

    src: str
    line_starts: list[int]  # offset of each row (index row-1)
    toks: list[Tok]
    string_spans: list[tuple[int, int]]  # strings (f-strings whole) and comments
    row_in_string: set[int]  # rows whose first character is inside a string
    row_depth: dict[int, int]  # bracket depth at the start of each row
    row_after_backslash: set[int]  # rows continuing a backslash-continued line

    inside: bytearray = field(default_factory=bytearray)  # 1: in a span, 2: strictly inside it

    def in_span(self, off: int) -> bool:
        return 0 <= off < len(self.inside) and self.inside[off] > 0

    def strictly_inside(self, off: int) -> bool:
        return 0 <= off < len(self.inside) and self.inside[off] > 1

    def row_text(self, row: int) -> str:
        a = self.line_starts[row - 1]
        b = self.line_starts[row] if row < len(self.line_starts) else len(self.src)
        return self.src[a:b]


def layout(src: str) -> Layout | None:
    """Tokenize ``src`` (line breaks must be '\\n'); None if tokenize fails or '\\r' is present."""
    if "\r" in src:
        return None
    starts = [0]
    for k, ch in enumerate(src):
        if ch == "\n":
            starts.append(k + 1)
    if starts[-1] == len(src) and len(starts) > 1:
        starts.pop()

    def off(rc):
        r, c = rc
        return starts[r - 1] + c if r - 1 < len(starts) else len(src)

    toks: list[Tok] = []
    spans: list[tuple[int, int]] = []
    depth = 0
    fstack: list[int] = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(src).readline):
            a, b = off(t.start), off(t.end)
            toks.append(Tok(t.type, t.string, a, b, t.start[0], t.end[0], depth))
            if t.type in (_FSTART, _TSTART):
                fstack.append(a)
            elif t.type in (_FEND, _TEND) and fstack:
                s = fstack.pop()
                if not fstack:
                    spans.append((s, b))
            elif t.type in (tokenize.STRING, tokenize.COMMENT) and not fstack:
                spans.append((a, b))
            if t.type == tokenize.OP and not fstack:
                if t.string in "([{":
                    depth += 1
                elif t.string in ")]}":
                    depth -= 1
    except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
        return None
    row_in_string = set()
    for a, b in spans:
        ra = _row_of(starts, a)
        rb = _row_of(starts, max(a, b - 1))
        row_in_string.update(range(ra + 1, rb + 1))
    row_depth: dict[int, int] = {}
    k = 0
    d = 0
    for row in range(1, len(starts) + 1):
        while k < len(toks) and toks[k].erow < row:
            t = toks[k]
            d = (
                t.depth
                + (1 if t.type == tokenize.OP and t.string in "([{" else 0)
                - (1 if t.type == tokenize.OP and t.string in ")]}" else 0)
            )
            k += 1
        row_depth[row] = max(d, 0)
    inside = bytearray(len(src) + 1)
    for a, b in spans:
        inside[a] = max(inside[a], 1)
        inside[a + 1 : b] = b"\x02" * max(b - a - 1, 0)
    lay = Layout(src, starts, toks, spans, row_in_string, row_depth, set(), inside)
    for row in range(1, len(starts)):
        text = lay.row_text(row)
        if text.endswith("\\\n") and not lay.in_span(starts[row - 1] + len(text) - 2):
            lay.row_after_backslash.add(row + 1)
    return lay


def _row_of(starts: list[int], off: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= off:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


def _apply_edits(src: str, edits: list[tuple[int, int, str]]) -> str:
    """Replace src[a:b] by text for each (a, b, text); edits must not overlap."""
    out = src
    for a, b, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:a] + text + out[b:]
    return out


def _edits_keeping_validity(src: str, edits: list[tuple[int, int, str]]) -> str:
    """All edits if the result parses, else each edit that keeps it parsing (checked one at a time)."""
    if not edits:
        return src
    out = _apply_edits(src, edits)
    if ast_ok(out):
        return out
    kept: list[tuple[int, int, str]] = []
    for e in edits:
        trial = _apply_edits(src, kept + [e])
        if ast_ok(trial):
            kept.append(e)
    return _apply_edits(src, kept)


def _valid_or(new: str, old: str) -> str:
    return new if new != old and ast_ok(new) else old


def _rng(seed: int, src: str) -> random.Random:
    return random.Random((seed << 32) ^ zlib.crc32(src.encode("utf-8", "surrogatepass")))


_LEAD = re.compile(r"[ \t\f]*")

# ================================================================ transforms (str -> str, valid stays valid)
# Each is deterministic in (src, seed); a result ast.parse rejects is never returned (the
# transform falls back to the sites that keep the file valid, or to src unchanged).


def crlf(src: str, seed: int = 0) -> str:
    """Every line break becomes '\\r\\n'; for seeds 3 mod 4 the file also ends in a backslash and
    '\\r\\n' where that is valid (3.11 accepts it, not after a bare '\\n')."""
    out = src.replace("\r\n", "\n").replace("\n", "\r\n")
    if seed % 4 == 3:
        tail = out.rstrip("\r\n") + "\r\n" + _rng(seed, src).choice(["\\\r\n", " \\\r\n"])
        if ast_ok(tail):
            return tail
        tail = out.rstrip("\r\n") + " \\\r\n"
        if ast_ok(tail):
            return tail
    return _valid_or(out, src)


def lone_cr(src: str, seed: int = 0) -> str:
    """Line breaks become a lone '\\r' (except after a backslash: 3.11 rejects '\\\\\\r')."""
    text = src.replace("\r\n", "\n")
    out = re.sub(r"(?<!\\)\n", "\r", text)
    return _valid_or(out, src)


def mixed_eol(src: str, seed: int = 0) -> str:
    """Each line break independently '\\n', '\\r\\n' or '\\r' (never '\\r' after a backslash)."""
    rng = _rng(seed, src)
    text = src.replace("\r\n", "\n")
    parts = text.split("\n")
    out = [parts[0]]
    for p in parts[1:]:
        prev = out[-1]
        eol = rng.choice(["\n", "\r\n"] if prev.endswith("\\") else ["\n", "\r\n", "\r"])
        out.append(eol)
        out.append(p)
    return _valid_or("".join(out), src)


def tabs(src: str, seed: int = 0) -> str:
    """Indentation with tabs, consistently per file: each leading run of 8 spaces becomes a tab,
    or (when that is inconsistent, or for odd seeds) each indentation unit (the gcd of the
    logical lines' indentation) becomes a tab."""
    lay = layout(src)
    if lay is None:
        return src
    rows = [r for r in range(1, len(lay.line_starts) + 1) if r not in lay.row_in_string]
    widths = []
    for r in rows:
        m = re.match(r" *", lay.row_text(r))
        rest = lay.row_text(r)[m.end() :]
        if (
            rest.strip()
            and not rest.startswith(("#", "\t", "\f"))
            and lay.row_depth.get(r, 0) == 0
            and r not in lay.row_after_backslash
            and m.end()
        ):
            widths.append(m.end())
    unit = 0
    for w in widths:
        unit = gcd(unit, w)

    def convert(k: int) -> str:
        edits = []
        for r in rows:
            text = lay.row_text(r)
            n = len(text) - len(text.lstrip(" "))
            if n >= k and n < len(text) and text[n] not in "\t\f":
                a = lay.line_starts[r - 1]
                edits.append((a, a + n, "\t" * (n // k) + " " * (n % k)))
        return _apply_edits(src, edits)

    order = [8, unit] if seed % 2 == 0 else [unit, 8]
    for k in order:
        if k:
            out = convert(k)
            if out != src and ast_ok(out):
                return out
    return src


def form_feeds(src: str, seed: int = 0) -> str:
    """Form feeds at line starts (they reset CPython's indentation count), sometimes inside the
    leading whitespace or as a blank line; only sites that keep the file valid."""
    lay = layout(src)
    if lay is None:
        return src
    rng = _rng(seed, src)
    rows = [r for r in range(1, len(lay.line_starts) + 1) if r not in lay.row_in_string]
    if not rows:
        return src
    edits = []
    for r in sorted(set(rng.choice(rows) for _ in range(rng.randint(1, 5)))):
        a = lay.line_starts[r - 1]
        lead = _LEAD.match(lay.row_text(r)).end()
        kind = rng.random()
        if kind < 0.6 or lead == 0:
            edits.append((a, a, "\f" * rng.randint(1, 2)))
        elif kind < 0.8:
            p = rng.randint(0, lead)
            # keep the column: the whitespace after the form feed must re-create it
            edits.append((a, a + lead, lay.row_text(r)[:p] + "\f" + lay.row_text(r)[:lead]))
        else:
            edits.append((a, a, rng.choice(["\f\n", "\f", " \f"]) + ("\n" if rng.random() < 0.5 else "")))
    return _edits_keeping_validity(src, _dedupe(edits))


def _dedupe(edits):
    seen, out = set(), []
    for e in edits:
        if e[0] not in seen:
            seen.add(e[0])
            out.append(e)
    return out


_REAL = {tokenize.NAME, tokenize.NUMBER, tokenize.STRING, tokenize.OP}


def backslashes(src: str, seed: int = 0) -> str:
    """Backslash continuations: split a logical line between two tokens (outside strings and,
    mostly, outside brackets) with ' \\\\\\n' and an arbitrary continuation indentation (less than
    the line, column 0, more, a tab)."""
    lay = layout(src)
    if lay is None:
        return src
    rng = _rng(seed, src)
    toks = lay.toks
    sites = []
    for x, y in itertools.pairwise(toks):
        if x.type not in _REAL or y.type not in _REAL or x.erow != y.srow:
            continue
        if lay.strictly_inside(x.end) or lay.strictly_inside(y.start):
            continue  # inside an f-string (3.12+ tokens) or a string
        gap = src[x.end : y.start]
        if gap.strip(" \t"):
            continue
        if y.depth > 0 and rng.random() < 0.8:
            continue
        sites.append((x, y))
    if not sites:
        return src
    edits = []
    for x, y in rng.sample(sites, min(len(sites), rng.randint(1, 4))):
        row_text = lay.row_text(x.erow)
        ind = row_text[: _LEAD.match(row_text).end()]
        cont = rng.choice(
            ["", "", " ", ind[:-1] if ind else "", ind, ind + "    ", "\t", " " * rng.randint(0, 12)]
        )
        before = rng.choice(["", " ", " ", "  ", "\t"])
        edits.append((x.end, y.start, before + "\\\n" + cont))
    return _edits_keeping_validity(src, _dedupe(edits))


def reindent_brackets(src: str, seed: int = 0) -> str:
    """Lines that continue inside (), [] or {} get arbitrary indentation: column 0, one space, a
    tab, deeper, or a dedent that would be invalid outside brackets."""
    lay = layout(src)
    if lay is None:
        return src
    rng = _rng(seed, src)
    rows = [
        r
        for r in range(2, len(lay.line_starts) + 1)
        if r not in lay.row_in_string and lay.row_depth.get(r, 0) > 0
    ]
    if not rows:
        return src
    p = rng.choice([0.3, 0.7, 1.0])
    edits = []
    for r in rows:
        if rng.random() > p:
            continue
        a = lay.line_starts[r - 1]
        text = lay.row_text(r)
        lead = _LEAD.match(text).end()
        new = rng.choice(
            ["", "", " ", "\t", " " * rng.randint(0, 16), text[: max(lead - 1, 0)], "\t" * rng.randint(1, 3)]
        )
        edits.append((a, a + lead, new))
    return _edits_keeping_validity(src, edits)


def remove_final_newline(src: str, seed: int = 0) -> str:
    """The file without its final line break (seed picks: one break, all trailing breaks, or the
    breaks replaced by trailing blanks)."""
    v = seed % 3
    if v == 0:
        out = src[:-2] if src.endswith("\r\n") else src[:-1] if src.endswith(("\n", "\r")) else src
    elif v == 1:
        out = src.rstrip("\r\n")
    else:
        out = src.rstrip("\r\n") + _rng(seed, src).choice([" ", "  ", "\t", " \f"])
    return _valid_or(out, src)


END_COMMENTS = ["#", "# end", "# a b", "#\\", "# 'quote", '# """', "#:", "# (", "#\f"]


def comment_at_end(src: str, seed: int = 0) -> str:
    """The file ends in a comment: on its own line (maybe indented) or at the end of the last line,
    with or without a final newline."""
    rng = _rng(seed, src)
    comment = rng.choice(END_COMMENTS)
    nl = rng.choice(["", "\n"])
    body = src.rstrip("\r\n")
    if rng.random() < 0.35 and body and not body.endswith("\\"):
        out = body + rng.choice(["  ", " ", "\t", ""]) + comment + nl  # on the last code line
    else:
        out = body + "\n" + rng.choice(["", "", "    ", "  ", "\t", "\n"]) + comment + nl
    return _valid_or(out, src)


# in the order a combination applies them (line breaks last: the others tokenize '\n' text)
TRANSFORMS = {
    "backslashes": backslashes,
    "reindent_brackets": reindent_brackets,
    "tabs": tabs,
    "form_feeds": form_feeds,
    "comment_at_end": comment_at_end,
    "remove_final_newline": remove_final_newline,
    "crlf": crlf,
    "lone_cr": lone_cr,
    "mixed_eol": mixed_eol,
}
EOL_TRANSFORMS = ("crlf", "lone_cr", "mixed_eol")


def apply_transforms(src: str, names, seed: int) -> tuple[str, list[str]]:
    """Apply the named transforms in TRANSFORMS order; return the text and the ones that changed it."""
    applied = []
    for k, name in enumerate(n for n in TRANSFORMS if n in names):
        new = TRANSFORMS[name](src, seed + 7919 * k)
        if new != src:
            applied.append(name)
            src = new
    return src, applied


# ================================================================ cut positions

_CLASSES = {
    "\n": "eol",
    "\r": "eol",
    "\\": "backslash",
    "'": "quote",
    '"': "quote",
    "#": "comment",
    ":": "colon",
    "\t": "blank",
    "\f": "blank",
}
_CLASSES.update({c: "bracket" for c in "()[]{}"})


def interesting_offsets(text: str) -> dict[str, list[int]]:
    """Offsets just before and after line breaks, backslashes, brackets, quotes, comment starts,
    colons, tabs and form feeds, by class; and the two ends ('ends')."""
    out: dict[str, set[int]] = defaultdict(set)
    n = len(text)
    out["ends"].update({0, min(1, n), n, max(n - 1, 0), max(n - 2, 0)})
    for k, ch in enumerate(text):
        cls = _CLASSES.get(ch)
        if cls:
            out[cls].add(k)
            out[cls].add(k + 1)
    return {c: sorted(v) for c, v in sorted(out.items())}


def pick_cuts(text: str, rng: random.Random) -> tuple[int, int]:
    """Two cut positions i <= j: uniform, or next to a special character (the class drawn first,
    so that a rare backslash is as likely as a common line break), often a short middle."""
    n = len(text)
    special = interesting_offsets(text)
    classes = list(special)

    def one() -> int:
        if rng.random() < 0.3:
            return rng.randint(0, n)
        return rng.choice(special[rng.choice(classes)])

    i, j = sorted((one(), one()))
    r = rng.random()
    if r < 0.15:
        j = i
    elif r < 0.45:
        j = min(n, i + rng.randint(0, 4))
    return i, j


# ================================================================ cases


@dataclass
class Case:
    category: str
    prefix: str
    middle: str
    suffix: str
    origin: str = ""

    @property
    def text(self) -> str:
        return self.prefix + self.middle + self.suffix

    def triple(self):
        return (self.prefix, self.middle, self.suffix)


_FILES: dict = {}


def stdlib_sample(n: int = 160, max_bytes: int = 6000, seed: int = 2024) -> list[tuple[str, str]]:
    """A fixed, deterministic sample of small valid stdlib files as (name, text); lines <= 200 chars
    (a long line in the suffix is a known slow path, not what this fuzzer is after)."""
    key = (n, max_bytes, seed)
    if key not in _FILES:
        out = []
        for p in sample_stdlib(2 * n, max_bytes, seed, min_bytes=100):
            text = read_utf8(p)
            if text and max(map(len, text.split("\n"))) <= 200 and "\r" not in text:
                out.append((f"{p.parent.name}/{p.name}", text))
        _FILES[key] = out[:n]
    return _FILES[key]


def stdlib_case(rng: random.Random, transforms=None, files=None) -> Case:
    """A stdlib file, a combination of transforms (random when None), a cut."""
    files = files or stdlib_sample()
    name, src = rng.choice(files)
    if transforms is None:
        r = rng.random()
        names = list(TRANSFORMS)
        if r < 0.1:
            transforms = []
        elif r < 0.55:
            transforms = [rng.choice(names)]
        else:
            transforms = [n for n in names if n not in EOL_TRANSFORMS and rng.random() < 0.35]
            if rng.random() < 0.5:
                transforms.append(rng.choice(EOL_TRANSFORMS))
    seed = rng.randint(0, 2**31)
    text, applied = apply_transforms(src, transforms, seed)
    i, j = pick_cuts(text, rng)
    cat = "plain" if not applied else applied[0] if len(applied) == 1 else "combined"
    return Case(
        cat, text[:i], text[i:j], text[j:], f"{name} +{','.join(applied) or 'none'} seed={seed} cut={i},{j}"
    )


# ---------------------------------------------------------------- snippets

NAMES = ["x", "y", "z", "foo", "bar", "a1", "self", "_x", "ñ", "match", "case", "type"]
NUMBERS = ["0", "1", "42", "1_000", "0x1F", "0o7", "0b101", "1.5", "1e-3", ".5", "2j", "1.5J", "0.", "1E+10"]
STRINGS = [
    "'a'",
    '"b"',
    "r'\\d+'",
    "b'x'",
    "'''t'''",
    '"""doc\nstring"""',
    "u'x'",
    "'it\\'s'",
    "''",
    "'\\n'",
    "'a' 'b'",
    "Rb'\\x'",
]
CONSTS = ["None", "True", "False", "..."]


class SnippetGen:
    """Small random programs from fragments; lines stay short (< 200 chars)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.unit = rng.choice(["    ", "    ", "  ", " ", "\t", "        "])

    # ------------------------------------------------ expressions
    def name(self):
        return self.rng.choice(NAMES)

    def atom(self, quotes="'\""):
        r = self.rng.random()
        if r < 0.4:
            return self.name()
        if r < 0.6:
            return self.rng.choice(NUMBERS)
        if r < 0.8:
            return self.rng.choice(STRINGS)
        if r < 0.9:
            return self.rng.choice(CONSTS)
        return self.fstring(quotes)

    def fstring(self, quotes="'\"", level=0):
        """An f-string whose quote is one of ``quotes``; nested strings use the other quote
        (valid in 3.8-3.11, where a nested string may not reuse an enclosing quote)."""
        rng = self.rng
        c = rng.choice(quotes)
        q = c * rng.choice([1, 1, 3])
        inner = quotes.replace(c, "")
        pre = rng.choice(["f", "f", "F", "rf", "fR", "Rf"])
        parts = []
        for _ in range(rng.randint(0, 3)):
            if rng.random() < 0.3:
                parts.append(rng.choice(["abc", " ", "{{", "}}", "x=", "%d", ":", "é"]))
            else:
                parts.append(self.field(inner, level))
        if len(q) == 3 and level == 0 and rng.random() < 0.3:
            parts.insert(rng.randint(0, len(parts)), "\n")
        return pre + q + "".join(parts) + q

    def field(self, inner, level):
        rng = self.rng
        r = rng.random()
        s = rng.choice(inner) if inner else None
        if r < 0.4 or (s is None and r < 0.75):
            e = self.name()
        elif r < 0.55:
            e = f"{self.name()}.{self.name()}"
        elif r < 0.65 and s:
            e = f"{self.name()}[{s}k{s}]"
        elif r < 0.75:
            e = f"{self.name()} + {rng.choice(NUMBERS)}"
        elif r < 0.85 and s and level == 0:
            e = self.fstring(inner, level + 1)
        elif r < 0.92 or not s:
            e = "(lambda: 1)()"
        else:
            e = " {" + s + "a" + s + ": 1}[" + s + "a" + s + "] "
        if rng.random() < 0.15:
            e += rng.choice(["=", " = "])
        conv = rng.choice(["", "", "", "!r", "!s", "!a"])
        spec = ""
        if rng.random() < 0.4:
            spec = ":" + rng.choice(
                [
                    ">10",
                    ".2f",
                    "{width}",
                    "{w}.{p}",
                    "%Y-%m-%d",
                    ",",
                    "#x",
                    "=^{n}",
                    "",
                    "0{width}d",
                    "{" + self.name() + "!r}",
                ]
            )
        return "{" + e + conv + spec + "}"

    def primary(self, depth=0):
        """An expression that can be an operand: atoms, calls, attributes, subscripts, displays,
        comprehensions, parenthesised expressions."""
        rng = self.rng
        if depth >= 3 or rng.random() < 0.45:
            a = self.atom()
            return a if rng.random() < 0.9 else f"({a})"
        d = depth + 1
        r = rng.random()
        if r < 0.2:
            pos = [
                rng.choice([self.expr(d), self.expr(d), f"*{self.name()}"]) for _ in range(rng.randint(0, 2))
            ]
            kws = [
                rng.choice([f"{self.name()}={self.expr(d)}", f"**{self.name()}"])
                for _ in range(rng.randint(0, 2))
            ]
            func = self.name() if rng.random() < 0.7 else f"{self.name()}.{self.name()}"
            return f"{func}({self.seq(pos + kws)})"
        if r < 0.3:
            base = self.name() if rng.random() < 0.7 else f"({self.expr(d)})"
            return f"{base}.{self.name()}"
        if r < 0.4:
            sub = rng.choice(
                [self.expr(d), "1:2", "::2", ":, 0", "a:b:c", "1:", f"{self.name()}, *{self.name()}"]
            )
            return f"{self.name()}[{sub}]"
        if r < 0.52:
            return "[" + self.seq([self.expr(d) for _ in range(rng.randint(0, 3))]) + "]"
        if r < 0.6:
            items = [self.expr(d) for _ in range(rng.randint(0, 3))]
            return "(" + self.seq(items, trailing=True if len(items) == 1 else None) + ")"
        if r < 0.7:
            items = [
                f"{self.expr(d)}: {self.expr(d)}" if rng.random() < 0.8 else f"**{self.primary(d)}"
                for _ in range(rng.randint(0, 3))
            ]
            return "{" + self.seq(items) + "}"
        if r < 0.8:
            o, c = rng.choice(["[]", "()", "{}"])
            head = f"{self.expr(d)}: {self.expr(d)}" if o == "{" and rng.random() < 0.5 else self.expr(d)
            tail = f"for {self.name()} in {self.primary(d)}" + (
                f" if {self.primary(d)}" if rng.random() < 0.4 else ""
            )
            return o + head + self.sep(" ") + tail + c
        if r < 0.88:
            return f"({self.name()} := {self.expr(d)})"
        if r < 0.94:
            return f"({self.expr(d)})"
        return f"{{{self.seq([self.expr(d) for _ in range(rng.randint(1, 3))])}}}"

    def expr(self, depth=0):
        rng = self.rng
        if depth >= 3 or rng.random() < 0.4:
            return self.primary(depth)
        d = depth + 1
        p = self.primary
        r = rng.random()
        if r < 0.25:
            op = rng.choice(["+", "-", "*", "/", "//", "%", "**", "@", "|", "&", "^", "<<", ">>"])
            return f"{p(d)} {op} {p(d)}"
        if r < 0.35:
            return f"{rng.choice(['-', '+', '~', 'not '])}{p(d)}"
        if r < 0.48:
            op = rng.choice(["<", "<=", "==", "!=", "is", "is not", "in", "not in", ">"])
            return f"{p(d)} {op} {p(d)}"
        if r < 0.58:
            return f"{p(d)} {rng.choice(['and', 'or'])} {p(d)}"
        if r < 0.66:
            return f"{p(d)} if {p(d)} else {self.expr(d)}"
        if r < 0.74:
            params = rng.choice(["", "a", "a, b=1", "*args, **kw", "a, /, b", "*, k"])
            return f"lambda{' ' if params else ''}{params}: {self.expr(d)}"
        if r < 0.8:
            return f"await {p(d)}"
        if r < 0.9:
            return f"{p(d)} + \\\n{self.cont_indent()}{p(d)}"
        return self.fstring()

    def cont_indent(self):
        return self.rng.choice(["", "", " ", "    ", "\t", "  ", " " * self.rng.randint(0, 9)])

    def sep(self, plain=", "):
        """A separator inside brackets: maybe a line break (with a comment) and any indentation."""
        rng = self.rng
        if rng.random() < 0.25:
            comment = rng.choice(["", "", "  # c", " #", "  # )"])
            return plain.rstrip() + comment + "\n" + self.cont_indent()
        return plain

    def seq(self, items, trailing=None):
        """Items joined by separators; a trailing comma when ``trailing`` (sometimes when None)."""
        out = ""
        for k, it in enumerate(items):
            out += it if k == 0 else self.sep() + it
        if trailing is None:
            trailing = self.rng.random() < 0.15
        if items and trailing:
            out += "," + self.sep("")
        return out

    # ------------------------------------------------ patterns
    def pattern(self, depth=0, top=False, closed=False):
        """A match pattern; ``closed``: no or-/as-pattern at the top (an alternative of an or-pattern)."""
        rng = self.rng
        d = depth + 1
        r = rng.random() if depth < 3 else rng.random() * 0.45
        if closed and 0.78 <= r < 0.94:
            r = 0.95
        if r < 0.15:
            return rng.choice(
                [
                    "1",
                    "-1",
                    "1.5",
                    "-0.5",
                    "'s'",
                    'b"x"',
                    "None",
                    "True",
                    "False",
                    "0x10",
                    "2j",
                    "-2j",
                    "'a' 'b'",
                ]
            )
        if r < 0.25:
            return rng.choice(["1+2j", "-1-2j", "1-2j", "-1+2j", "0+0j", "1.5+2.5j", "-0.5-1J"])
        if r < 0.33:
            return self.name() if self.rng.random() < 0.7 else "y"
        if r < 0.41:
            return "_"
        if r < 0.45:
            return rng.choice(["Color.RED", "a.b.c", "mod.CONST", "_m.X", "__a.b"])
        if r < 0.58:
            items = [self.star_or(d) for _ in range(rng.randint(0, 3))]
            o, c = rng.choice(["[]", "()"])
            if o == "(" and len(items) == 1:
                return "(" + items[0] + ",)"
            if top and items and rng.random() < 0.3:
                return ", ".join(items)
            return o + self.seq(items) + c
        if r < 0.68:
            items = []
            for _ in range(rng.randint(0, 3)):
                key = rng.choice(["'k'", "1", "None", "Color.RED", "-1", "1+2j", "b'k'"])
                items.append(f"{key}: {self.pattern(d)}")
            if rng.random() < 0.4:
                items.append("**" + rng.choice(["rest", "kw", "r"]))
            return "{" + self.seq(items) + "}"
        if r < 0.78:
            pos = [self.pattern(d) for _ in range(rng.randint(0, 2))]
            kws = [f"{rng.choice(['x', 'y', 'a', 'b_'])}={self.pattern(d)}" for _ in range(rng.randint(0, 2))]
            return f"{rng.choice(['Point', 'a.B', 'int', 'str', '_P', '_a.B'])}({self.seq(pos + kws)})"
        if r < 0.86:
            return " | ".join(self.pattern(d, closed=True) for _ in range(rng.randint(2, 3)))
        if r < 0.94:
            inner = " | ".join(self.pattern(d, closed=True) for _ in range(rng.choice([1, 1, 2])))
            return f"{inner} as {rng.choice(['y', 'z', 'whole'])}"
        return f"({self.pattern(d)})"

    def star_or(self, d):
        if self.rng.random() < 0.2:
            return "*" + self.rng.choice(["rest", "_", "xs"])
        return self.pattern(d)

    # ------------------------------------------------ statements
    def simple(self):
        rng = self.rng
        rng.random()
        n, e = self.name, self.expr
        choices = [
            lambda: e(),
            lambda: f"{n()} = {e()}",
            lambda: f"{n()}, {n()} = {e()}",
            lambda: f"{n()}: {rng.choice(['int', 'list[str]', 'A | None'])} = {e()}",
            lambda: f"{n()} {rng.choice(['+=', '-=', '*=', '//=', '|=', '>>=', '@=', '**='])} {e()}",
            lambda: f"del {n()}, {n()}[0]",
            lambda: "pass",
            lambda: rng.choice(["break", "continue"]),
            lambda: f"return {e()}" if rng.random() < 0.7 else "return",
            lambda: f"raise {n()}({e()}) from {n()}" if rng.random() < 0.5 else "raise",
            lambda: f"{rng.choice(['global', 'nonlocal'])} {n()}, {n()}",
            lambda: rng.choice(
                [
                    "import os",
                    "import a.b as c, d",
                    "from . import (a,\n b)",
                    "from x import *",
                    "from ..m import y as z",
                    "import os.path",
                ]
            ),
            lambda: f"assert {e()}, {rng.choice(STRINGS)}",
            lambda: f"yield {e()}" if rng.random() < 0.5 else f"{n()} = yield from {e()}",
            lambda: f"print({e()}, end='')",
            lambda: f"{n()} = {n()} = {e()}",
            lambda: f"{n()}[{e()}] = {e()} \\\n{self.cont_indent()}+ 1",
        ]
        s = rng.choice(choices)()
        if rng.random() < 0.1:
            s += "; " + rng.choice(choices)()
        if rng.random() < 0.1:
            s += rng.choice(["  # note", " #", "\t# x", " # :"])
        return s

    def body(self, depth):
        """A block body: one simple statement on the header line, or indented lines."""
        rng = self.rng
        if rng.random() < 0.2:
            return [" " + self.simple()], True
        unit = self.unit if rng.random() < 0.85 else rng.choice(["  ", "   ", "\t", "    "])
        lines = []
        for _ in range(rng.randint(1, 3)):
            for ln in self.statement(depth + 1):
                lines.append(unit + ln)
        return lines, False

    def header(self, head, depth):
        """Lines for `head:` + body."""
        body, inline = self.body(depth)
        if inline:
            return [head + ":" + body[0]]
        if self.rng.random() < 0.1:
            return [head + ":  # why"] + body
        return [head + ":"] + body

    def statement(self, depth=0) -> list[str]:
        rng = self.rng
        if depth >= 3 or rng.random() < 0.4:
            return [self.simple()]
        e, n, p = self.expr, self.name, self.primary
        r = rng.random()
        if r < 0.12:
            out = self.header(f"if {e()}", depth)
            for _ in range(rng.randint(0, 2)):
                out += self.header(f"elif {e()}", depth)
            if rng.random() < 0.5:
                out += self.header("else", depth)
            return out
        if r < 0.2:
            out = self.header(
                f"{rng.choice(['for', 'async for'])} {n()}{rng.choice(['', ', ' + n()])} in {p()}", depth
            )
            if rng.random() < 0.3:
                out += self.header("else", depth)
            return out
        if r < 0.25:
            return self.header(f"while {e()}", depth)
        if r < 0.36:
            out = self.header("try", depth)
            star = rng.choice(["", "", "*"])
            for _ in range(rng.randint(1, 2)):
                out += self.header(
                    rng.choice(
                        [
                            f"except{star} {n()}",
                            f"except{star} ({n()}, {n()}) as {n()}",
                            f"except{star} {n()}.{n()} as e",
                        ]
                        + (["except"] if not star else [])
                    ),
                    depth,
                )
            if rng.random() < 0.3:
                out += self.header("else", depth)
            if rng.random() < 0.3:
                out += self.header("finally", depth)
            return out
        if r < 0.43:
            items = rng.choice(
                [
                    f"{p()} as {n()}",
                    f"{p()}, {p()} as {n()}",
                    f"({p()} as {n()}, {p()})",
                    f"(\n{self.cont_indent()}{p()} as {n()},\n{self.cont_indent()}{p()},\n)",
                ]
            )
            return self.header(f"{rng.choice(['with', 'async with'])} {items}", depth)
        if r < 0.58:
            decos = [
                rng.choice(
                    [
                        "@dec",
                        "@dec(1, k=2)",
                        "@a.b.c",
                        "@(lambda f: f)",
                        "@x[0]",
                        "@ property",
                        "@functools.wraps(f)  # c",
                    ]
                )
                for _ in range(rng.randint(0, 2))
            ]
            params = rng.choice(
                [
                    "",
                    "self",
                    "a, b=1",
                    "a: int, *args: str, **kw",
                    "a, /, b, *, c=3",
                    "*, k",
                    "x=[1,\n 2]",
                    "a,\nb",
                    "self, *a",
                ]
            )
            ret = rng.choice(["", "", " -> None", " -> list[int]", " -> 'A'"])
            return decos + self.header(
                f"{rng.choice(['def', 'def', 'async def'])} {n()}({params}){ret}", depth
            )
        if r < 0.66:
            decos = ["@dataclass"] if rng.random() < 0.3 else []
            bases = rng.choice(["", "()", "(A)", "(A, B, metaclass=M)", "(Generic[T])", "(\n A,\n)"])
            return decos + self.header(f"class {n()}{bases}", depth)
        # match
        subject = rng.choice(["x", "x, y", "(x, y)", "p.attr", "f()", "*a, b", "{'k': 1}", "x[0]", "-x"])
        unit = self.unit
        lines = [f"match {subject}:"]
        for _ in range(rng.randint(1, 3)):
            pat = self.pattern(top=True)
            guard = f" if {p()}" if rng.random() < 0.25 else ""
            case_lines = self.header(f"case {pat}{guard}", depth + 1)
            lines += [unit + ln for ln in case_lines]
        return lines

    def program(self) -> str:
        """A program with every line under 190 characters (a few tries, then a tiny one)."""
        for _ in range(6):
            text = self._program()
            if max(len(ln) for ln in NEWLINE.split(text)) < 190:
                return text
        return "x = 1\n"

    def _program(self) -> str:
        rng = self.rng
        lines = []
        for _ in range(rng.randint(1, 4)):
            lines += self.statement(0)
            if rng.random() < 0.15:
                lines.append(rng.choice(["", "# comment", "    # indented comment", "\f"]))
        text = "\n".join(lines) + "\n"
        # the end of the file
        r = rng.random()
        if r < 0.2:
            text = text.rstrip("\n")
        elif r < 0.35:
            text += rng.choice(END_COMMENTS) + rng.choice(["", "\n"])
        elif r < 0.45:
            text = text.rstrip("\n") + "  " + rng.choice(END_COMMENTS) + rng.choice(["", "\n"])
        elif r < 0.5:  # a backslash at the end of the file (valid in 3.11 only before '\r\n')
            text = (
                text.rstrip("\n") + rng.choice(["", " ", "\n"]) + "\\" + rng.choice(["\r\n", "\n", "", "\r"])
            )
        # line breaks
        r = rng.random()
        if r < 0.15:
            text = text.replace("\n", "\r\n")
        elif r < 0.2:
            text = re.sub(r"(?<!\\)\n", "\r", text)
        return text


MUT_TOKENS = [
    ":",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "\\",
    "\n",
    " ",
    "\t",
    "#",
    "'",
    '"',
    "_",
    "j",
    "*",
    "**",
    "as",
    "if",
    "else",
    "=",
    ",",
    "lambda",
    "await",
    "|",
    "+",
    "-",
    "1",
    "case",
    "match",
    "\\\n",
    "\r",
    "\f",
    ";",
    ".",
    "@",
    "f'",
    "!r",
    ":=",
    "->",
    "yield",
    "    ",
    "\x00",
    "\ud800",
    "\x0b",
]
_TOKEN_RE = re.compile(r"\w+|\s+|[^\w\s]")


# edits aimed at rules that are easy to get wrong (one occurrence of the pattern is rewritten)
TARGETED = [
    (r"(?<=[+-])(\d+(?:\.\d+)?)[jJ]", r"\1"),  # case 1+2j -> case 1+2
    (r"(?<![\w.])(\d+(?:\.\d+)?)([+-])(\d+(?:\.\d+)?[jJ])", r"\3\2\1"),  # 1+2j -> 2j+1
    (r"(?<![\w.])(\d+(?:\.\d+)?[jJ]?)([+-])", r"\1\2\2"),  # 1+2j -> 1++2j
    (r"(?<=[+-])(\d+(?:\.\d+)?[jJ])", r"(\1)"),
    (r" as \w+", " as _"),
    (r"\*\*\w+", "**_"),
    (r"\*\w+", "*_"),
    (r"\*\w+", "*(x)"),
    (r"case (?=\S)", "case _ as y | "),
    (r"(?<![\w.])[A-Za-z_]\w*(?=\.\w)", "_"),  # in a case line: _.X, a value pattern cannot start with _
    (r"(?<![\w.])[A-Za-z_]\w*(?=\()", "_"),  # in a case line: _(...), nor a class pattern
    (r"(?<![\w.])[A-Za-z]\w*(?=\s*[:,)\]}|])", "_"),  # in a case line: a capture becomes a wildcard
    (r"(?<=\w)\(", "(_=1, "),
    (r"!([rsa])", "!x"),
    (r"\{(?=\w)", "{{"),
    (r"(?<=[\w)\]])\}", "}}"),
    (r"\\\n", "\\ \n"),
    (r"\\\n", "\\\n\n"),
    (r"\n(?=[ \t])", "\n\t"),
    (r"\n[ \t]+", "\n"),
    (r":\n", "\n"),
    (r"(?<=\w)=(?=[\w(])", ":="),
    (r"'", '"'),
    (r"\n", "\x00\n"),
    (r"\n", "\r"),
]


def targeted(text: str, rng: random.Random) -> tuple[str, str] | None:
    """Rewrite one occurrence of one TARGETED pattern that occurs in ``text``; None if none does."""
    case_lines = [m.span() for m in re.finditer(r"^[ \t\f]*case\b.*$", text, re.M)]
    rules = []
    for k, (pat, rep) in enumerate(TARGETED):
        found = list(re.finditer(pat, text))
        if rep == "_":  # pattern-only rewrites: in a case line
            found = [m for m in found if any(a <= m.start() < b for a, b in case_lines)]
        if found:
            rules.append((k, rep, found))
    if not rules:
        return None
    in_case = [r for r in rules if r[1] == "_"]
    k, rep, found = rng.choice(in_case if in_case and rng.random() < 0.4 else rules)
    m = rng.choice(found)
    return text[: m.start()] + m.expand(rep) + text[m.end() :], f"targeted{k}@{m.start()}"


def mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One edit that often makes a snippet invalid: delete / duplicate / insert / replace a character
    or a token, a targeted rewrite (TARGETED), or a NUL or a lone surrogate inserted.
    Returns (text, what was done)."""
    toks = [m.span() for m in _TOKEN_RE.finditer(text)] or [(0, 0)]
    kind = rng.choice(
        [
            "del-char",
            "dup-char",
            "ins-char",
            "del-tok",
            "dup-tok",
            "ins-tok",
            "repl-tok",
            "repl-tok",
            "ins-bad",
            "swap",
            "targeted",
            "targeted",
            "targeted",
        ]
    )
    if kind == "targeted":
        done = targeted(text, rng)
        if done:
            return done
        kind = "ins-tok"
    n = len(text)
    if kind == "del-char" and n:
        p = rng.randrange(n)
        return text[:p] + text[p + 1 :], f"{kind}@{p}"
    if kind == "dup-char" and n:
        p = rng.randrange(n)
        return text[:p] + text[p] + text[p:], f"{kind}@{p}"
    if kind == "ins-char":
        p = rng.randint(0, n)
        ch = rng.choice("()[]{}:;,.=+-*/%<>!&|^~@#'\"\\ \t\n_0123456789jJxeE")
        return text[:p] + ch + text[p:], f"{kind}@{p}"
    if kind == "swap" and n >= 2:
        p = rng.randrange(n - 1)
        return text[:p] + text[p + 1] + text[p] + text[p + 2 :], f"{kind}@{p}"
    a, b = rng.choice(toks)
    if kind == "del-tok":
        return text[:a] + text[b:], f"{kind}@{a}"
    if kind == "dup-tok":
        return text[:b] + text[a:b] + text[b:], f"{kind}@{a}"
    if kind == "repl-tok":
        new = rng.choice(MUT_TOKENS + ["_", "_", "y"])
        return text[:a] + new + text[b:], f"{kind}@{a}"
    if kind == "ins-bad":
        p = rng.randint(0, n)
        return text[:p] + rng.choice(["\x00", "\ud800", "\udfff", "\x00\n"]) + text[p:], f"{kind}@{p}"
    p = rng.choice([a, b])
    return text[:p] + rng.choice(MUT_TOKENS) + text[p:], f"ins-tok@{p}"


def snippet_case(rng: random.Random, mutated: bool | None = None) -> Case:
    """A generated snippet (mutated with probability 1/2 when ``mutated`` is None) and a cut."""
    if mutated is None:
        mutated = rng.random() < 0.5
    text = SnippetGen(rng).program()
    how = ""
    if mutated:
        for _ in range(rng.choice([1, 1, 1, 2])):
            text, h = mutate(text, rng)
            how += " " + h
    i, j = pick_cuts(text, rng)
    return Case(
        "snippets_mutated" if mutated else "snippets_valid",
        text[:i],
        text[i:j],
        text[j:],
        f"snippet{how} cut={i},{j}",
    )


CATEGORIES = ["plain", *TRANSFORMS, "combined", "snippets_valid", "snippets_mutated"]


def case_in_category(category: str, rng: random.Random, files=None, tries: int = 8) -> Case:
    """A case of the given category (a transform's name: that transform alone, changing the file;
    'combined': two or more; 'plain': none; 'snippets_valid' / 'snippets_mutated')."""
    if category.startswith("snippets"):
        return snippet_case(rng, mutated=category == "snippets_mutated")
    case = None
    for _ in range(tries):
        if category == "plain":
            case = stdlib_case(rng, [], files)
        elif category == "combined":
            names = rng.sample([n for n in TRANSFORMS if n not in EOL_TRANSFORMS], rng.randint(2, 4))
            if rng.random() < 0.6:
                names.append(rng.choice(EOL_TRANSFORMS))
            case = stdlib_case(rng, names, files)
        else:
            case = stdlib_case(rng, [category], files)
        if case.category == category:
            return case
    return case


# ---------------------------------------------------------------- hypothesis strategies


def _seeded(make):
    """A hypothesis strategy of make(random.Random(seed)); the seed goes into the case's origin so
    that a failure replays outside hypothesis. (Uniform draws: hypothesis's own Random favours
    zeros, which here would mean the first file, no transform and an empty middle.)"""
    from hypothesis import strategies as st

    def build(seed: int) -> Case:
        case = make(random.Random(seed))
        case.origin += f" [rng seed {seed}]"
        return case

    return st.integers(min_value=0, max_value=2**64 - 1).map(build)


def stdlib_cases(transforms=None):
    """Hypothesis strategy: stdlib_case(Random(seed), transforms)."""
    return _seeded(lambda r: stdlib_case(r, transforms))


def snippet_cases(mutated=None):
    """Hypothesis strategy: snippet_case(Random(seed), mutated)."""
    return _seeded(lambda r: snippet_case(r, mutated))


# ================================================================ the check


def outcome(prefix: str, middle: str, suffix: str) -> str:
    """The engine's verdict: 'complete', 'incomplete', 'fed-None', 'raised' or 'crash: ...'."""
    try:
        c = fc().fim_checker(prefix, suffix)
    except uncompletable():
        return "raised"
    except RecursionError:
        return "crash: RecursionError in fim_checker"
    except Exception as e:
        return f"crash: {type(e).__name__}: {str(e)[:120]} in fim_checker"
    try:
        c2 = c.feed(middle)
        if c2 is None:
            return "fed-None"
        return "complete" if c2.is_complete() else "incomplete"
    except Exception as e:
        return f"crash: {type(e).__name__}: {str(e)[:120]} in feed/is_complete"


def _short(s: str, n: int = 300) -> str:
    r = repr(s)
    return r if len(r) <= n else r[: n // 2] + " … " + r[-n // 2 :]


def check(
    prefix: str, middle: str, suffix: str, stats: Tally | None = None, category: str = ""
) -> str | None:
    """None when the engine agrees with ast.parse on prefix+middle+suffix, else one line:
    '<property>: <engine outcome> | (prefix, middle, suffix)'."""
    valid = ast_ok(prefix + middle + suffix)
    t0 = time.perf_counter()
    got = outcome(prefix, middle, suffix)
    dt = time.perf_counter() - t0
    if got.startswith("crash"):
        msg = f"crash ({'valid' if valid else 'invalid'} file): {got}"
    elif valid and got != "complete":
        msg = f"completeness: valid file {got}"
    elif not valid and got == "complete":
        msg = "soundness: invalid file accepted"
    else:
        msg = None
    if msg:
        msg += f" | ({_short(prefix)}, {_short(middle)}, {_short(suffix)})"
    if stats is not None:
        stats.add(category, valid, msg, dt)
    return msg


def kind_of(msg: str) -> str:
    """The class of a disagreement message (the part before ' | ')."""
    return msg.split(" | ", 1)[0]


@dataclass
class Tally:
    """Per-category counts: cases, valid / invalid files, disagreements, slow cases."""

    counts: dict = field(default_factory=lambda: defaultdict(Counter))
    messages: list = field(default_factory=list)
    slow_after: float = 2.0

    def add(self, category: str, valid: bool, msg: str | None, seconds: float = 0.0):
        c = self.counts[category]
        c["cases"] += 1
        c["valid" if valid else "invalid"] += 1
        if msg:
            c["disagreements"] += 1
            self.messages.append((category, msg))
        if seconds > self.slow_after:
            c["slow"] += 1

    def total(self, key: str) -> int:
        return sum(c[key] for c in self.counts.values())


# ================================================================ minimising


def minimise(prefix: str, middle: str, suffix: str, budget: float = 10.0) -> tuple[str, str, str]:
    """Shrink a disagreement, keeping its class: drop runs of lines (halving the run length), then
    runs of tokens, then single characters, from each of the three parts, within ``budget`` s."""
    msg = check(prefix, middle, suffix)
    if msg is None:
        return prefix, middle, suffix
    want = kind_of(msg)
    deadline = time.monotonic() + budget
    parts = [prefix, middle, suffix]

    def still(trial) -> bool:
        m = check(*trial)
        return m is not None and kind_of(m) == want

    splitters = [
        lambda t: t.splitlines(keepends=True),
        lambda t: [m.group() for m in _TOKEN_RE.finditer(t)],
        list,
    ]
    before = None
    while before != parts and time.monotonic() < deadline:  # to a fixpoint
        before = list(parts)
        for split in splitters:
            for k in (1, 0, 2):
                units = split(parts[k])
                size = max(len(units) // 2, 1)
                while size >= 1 and time.monotonic() < deadline:
                    idx, progressed = 0, False
                    while idx < len(units) and time.monotonic() < deadline:
                        trial_units = units[:idx] + units[idx + size :]
                        trial = list(parts)
                        trial[k] = "".join(trial_units)
                        if still(trial):
                            parts, units, progressed = trial, trial_units, True
                        else:
                            idx += size
                    if not progressed:
                        size //= 2
    return tuple(parts)
