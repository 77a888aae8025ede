"""How a middle ends: one policy for the decode loop, the editor and batch evaluation.

What the model produced may be complete, cut short (a deadline, the one-line policy, the
token budget) or stray. :func:`finish_middle` turns it into a middle that makes the whole
file valid, or nothing: cut to one line if asked; kept as it is when the checker reports the
program complete; else completed with the checker's shortest finish (the budget finish,
docs/references.md [S9]), trying shorter cuts of it when none is found; optionally without a
tail that repeats the text after the cursor. When neither an end nor a valid prefix is found,
:func:`rescue_middle` finishes a cut of it at a line break whatever the finish writes.

A finish should only close what is open: a cut whose finish would invent a name, a literal or
an operator nobody typed (a placeholder ``A``, a ``0``, ``)<``) gives way to a shorter cut that
needs none; only when no cut does is the longest cut's inventing finish taken (batch decoding,
where a valid file is the measure). The editor asks for no finish at all (``finish=False``):
an item that only the finish search made valid is not shown.
"""

from __future__ import annotations

import io
import re
import time
import tokenize
from collections.abc import Callable
from dataclasses import dataclass

from ...engine.positions import NEWLINE, last_line
from ..tokens.fim_formats import REPLACEMENT


def single_line_end(text: str) -> int | None:
    """Where a one-line middle ends: its first line break (None: not reached yet). A middle
    that begins with one ends there, empty: a one-line item never adds a line, which would
    leave the cursor's line as it was and start another."""
    m = NEWLINE.search(text)
    return m.start() if m else None


def keeps_line_break(prefix: str, suffix: str) -> bool:
    """Whether a one-line middle at this cursor is a whole line with its line break: nothing
    before the cursor on its line and code after it (a line inserted above that code, as the
    single-line benchmarks cut it); anywhere else a one-line middle ends before its first break."""
    rest = NEWLINE.split(suffix, maxsplit=1)[0]
    return not last_line(prefix) and bool(rest.strip())


def line_end_in(middle: str, start: int, keeps_break: bool) -> str | None:
    """``middle`` cut at its one-line end when a line breaks in it at or after ``start`` (where
    the last token's text began): before the break, or just after it with ``keeps_break``
    (:func:`keeps_line_break`); None when no line breaks there."""
    m = NEWLINE.search(middle, start)
    if m is None:
        return None
    return middle[: m.end() if keeps_break else m.start()]


def block_ends_in(prefix: str, middle: str, start: int) -> list[str]:
    """Where a block ends: when a line of ``middle`` whose first non-blank character is at or
    after ``start`` is indented less than the block's first line (the first non-blank line after
    the cursor, or the cursor's own when only blanks precede it), the middle before that line,
    with its last line break and without, in that order; [] when no line ends the block there.
    The editor's end of a block on a new line, and SAFIM's block truncation."""
    line = last_line(prefix)
    text, offset = line + middle, len(line)
    block: int | None = None
    for m in re.finditer(r"[^\r\n]*(?:\r\n|\r|\n|$)", text):
        code = m.group().rstrip("\r\n")
        if not code.strip() or (m.start() == 0 and line.strip()):
            continue  # blank, or the header the cursor follows on its line
        width = len(code) - len(code.lstrip(" \t"))
        if block is None:
            block = width
        elif width < block and m.start() + width >= offset + start:
            kept = text[offset : m.start()].rstrip(" \t\r\n")
            brk = NEWLINE.match(text, offset + len(kept))
            return [kept + brk.group(), kept] if brk else [kept]
        if m.end() == len(text):
            break
    return []


def says_nothing(middle: str) -> bool:
    """Whether ``middle`` is only blanks and a comment: as a line of its own it adds no code."""
    code = middle.strip()
    return not code or (code.startswith("#") and "\n" not in code and "\r" not in code)


def hides_rest_of_line(prefix: str, middle: str, suffix: str) -> bool:
    """Whether ``middle`` ends inside a comment that swallows code after the cursor on its line
    (``def f(x):  # note`` before ``add(self):``): valid, and what nobody would accept."""
    rest = NEWLINE.split(suffix, maxsplit=1)[0]
    if not rest.strip():
        return False
    line = last_line(prefix + middle)
    if "#" not in line:
        return False
    try:
        for token in tokenize.generate_tokens(io.StringIO(line + rest).readline):
            if token.type == tokenize.COMMENT:
                return token.start[1] < len(line) + len(rest) - len(rest.lstrip())
    except (tokenize.TokenError, SyntaxError):  # a line that opens a bracket or string: no comment seen
        pass
    return False


def _accepted(checker, text: str) -> tuple[str, object]:
    """The longest prefix of ``text`` the checker accepts, and the checker after it."""
    after = checker.feed(text)
    if after is not None:
        return text, after
    lo, hi = 0, len(text)  # feed is monotone: bisect on the length of the accepted prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if checker.feed(text[:mid]) is not None:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo], checker.feed(text[:lo])


def _complete(checker, text: str) -> bool:
    after = checker.feed(text)
    return after is not None and after.is_complete()


def finish_middle(
    checker,
    middle: str,
    single_line: bool = False,
    suffix: str = "",
    tries: int = 8,
    seconds: float = 0.15,
    drop_repeats: bool = True,
    finish: bool = True,
    acceptable: Callable[[str], bool] | None = None,
) -> str | None:
    """A middle built from ``middle`` that ``checker`` (made for prefix and suffix) reports complete, or None.

    ``middle`` is cut to one line when ``single_line``; a middle that is not complete
    gets the checker's shortest finish, and when none is found, so do shorter cuts of
    it (at line and word boundaries, longest first, ``tries`` of them within about
    ``seconds``).  With ``drop_repeats``, a middle that repeats the text after the cursor
    (``suffix``) loses the repetition when that keeps the file valid.  Blank results are None.
    Without ``finish`` only cuts that are complete as they are count; with ``acceptable``, only
    middles it accepts.
    """
    middle = middle.rstrip(REPLACEMENT)
    if single_line:
        end = single_line_end(middle)
        if end is not None:
            middle = middle[:end]
    text, after = _accepted(checker, middle)
    if after is None:
        return None
    give_up = time.perf_counter() + seconds
    cuts = _cut_points(text, tries) if finish else _line_cuts(text)
    last_resort = None  # the longest cut's finish that invents: only when nothing else works
    fuses = bool(suffix) and _word(suffix[0])  # a middle's last name would run into the suffix's first
    for cut in cuts:
        done, invented = _finished(checker, text[:cut], finish)
        if (
            done is not None
            and done.strip()
            and not (fuses and _word(done[-1]))
            and (acceptable is None or acceptable(done))
        ):
            if not invented:
                return drop_repetition(checker, done, suffix) if drop_repeats else done
            last_resort = last_resort or done
        if time.perf_counter() > give_up:
            break
    return last_resort


#: the line cuts :func:`rescue_middle` tries at most (the longest, and the empty middle last)
RESCUE_CUTS = 16


def rescue_middle(checker, middle: str, seconds: float) -> str | None:
    """The last resort when no end of ``middle`` passes :func:`finish_middle` and no prefix of it
    is valid (the model wrote on past the span, out of the blocks the suffix continues): its
    longest cut at a line break, the empty middle last, that the checker's shortest finish
    completes, whatever the finish writes (a placeholder name, a comment over the code after
    the cursor). A stop that leaves the file invalid is never the answer; such a middle is
    never shown in an editor. None when none of :data:`RESCUE_CUTS` cuts is finished, each
    searched for at most ``seconds`` (a bound on the work, not a share of a total: the same
    middle is rescued alike however busy the machine)."""
    text, after = _accepted(checker, middle.rstrip(REPLACEMENT))
    if after is None:
        return None
    breaks = {cut for m in NEWLINE.finditer(text) for cut in (m.start(), m.end())}
    cuts = sorted(breaks | {len(text)}, reverse=True)[: RESCUE_CUTS - 1]
    for cut in [*cuts, 0] if cuts[-1] else cuts:
        done, _ = _finished(checker, text[:cut], seconds=seconds)
        if done is not None:
            return done
    return None


def _finished(
    checker, text: str, finish: bool = True, seconds: float | None = None
) -> tuple[str | None, bool]:
    """``text``, or (with ``finish``) ``text`` plus its :func:`planned_finish` (searched for at
    most ``seconds``, if given), if that completes the program; and whether that finish invents
    something (:func:`invents`)."""
    after = checker.feed(text)
    if after is None:
        return None, False
    if after.is_complete():
        return text, False
    if not finish:
        return None, False
    planned = planned_finish(after, seconds)
    return (None, False) if planned is None else (text + planned.text, planned.invents)


@dataclass(frozen=True)
class Finish:
    """A text that completes the file after a middle, and whether it writes something nobody
    typed (:func:`invents`: a placeholder name, a literal), which an editor never shows."""

    text: str
    invents: bool


#: the blanks the finish search puts before a closing symbol (``( ) )``): each costs a character
#: here and a token on a server
_SPACED_CLOSING = re.compile(r"[ \t]+(?=[)\]}:,])")


def planned_finish(after, seconds: float | None = None) -> Finish | None:
    """The finish of the middle ``after`` has read (a checker; ``Finish("", False)`` when the file
    is complete now): the checker's shortest finish (the budget finish, docs/references.md [S9]:
    closings first, names and literals as the last resort), searched for at most ``seconds``, drawn
    as tight as still completes the file (no blanks before its closing symbols, none in front).
    The one plan of an ending, for the decode loop here and the budget end on a server
    (:mod:`fimconstrain.serving.budget`); None when none is found."""
    if after.is_complete():
        return Finish("", False)
    try:
        closing = after.shortest_finish(seconds=seconds)
    except Exception:  # the finisher is a heuristic search; never let it break a request
        return None
    if closing is None:
        return None
    tight = closing.lstrip(" \t")
    for candidate in dict.fromkeys((_SPACED_CLOSING.sub("", tight), tight, closing)):
        done = after.feed(candidate)
        if done is not None and done.is_complete():
            return Finish(candidate, invents(candidate))
    return None


#: what a finish may write: blanks, closing brackets, ``:`` and ``,``, and ``pass`` as the body
#: of a block the middle opened
_CLOSING_ONLY = re.compile(r"(?:[\s)\]}:,]|\bpass\b)*")


def invents(finish: str) -> bool:
    """Whether a finish writes something nobody typed: a name, a literal, an operator or a
    keyword that says something (``else A``, ``0)``, ``)<``); a finish may only close what
    is open."""
    return _CLOSING_ONLY.fullmatch(finish) is None


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_" or (ord(ch) > 127 and ("a" + ch).isidentifier())


def _cut_points(text: str, limit: int) -> list[int]:
    """Lengths to try, longest first: the whole text, then every boundary that is not inside a
    word, blanks before it dropped (a finish then closes right after the last word)."""
    cuts = [len(text)]
    for i in range(len(text) - 1, 0, -1):
        if len(cuts) >= limit:
            break
        if _word(text[i - 1]) and _word(text[i]):
            continue
        cut = len(text[:i].rstrip(" \t"))
        if cut and cut not in cuts:
            cuts.append(cut)
    return cuts


def _line_cuts(text: str) -> list[int]:
    """The whole text, then the ends of its lines, longest first: what the model wrote, in
    whole lines (a line cut inside would show a fragment)."""
    ends = [m.end() for m in NEWLINE.finditer(text) if m.end() < len(text)]
    return [len(text), *reversed(ends)]


def drop_repetition(checker, middle: str, suffix: str) -> str:
    """``middle`` without a tail that repeats the text after the cursor, if the file stays valid without it.

    A tail counts as repeated when it spells the rest of the cursor's line (at least two
    non-blank characters) or whole lines that the suffix starts with.
    """
    if not suffix or not middle:
        return middle
    rest_of_line = NEWLINE.split(suffix, maxsplit=1)[0]
    cuts: list[int] = []
    if len(rest_of_line.strip()) >= 2 and middle.endswith(rest_of_line) and len(middle) > len(rest_of_line):
        cuts.append(len(middle) - len(rest_of_line))
    body = suffix.lstrip("\r\n")
    for m in NEWLINE.finditer(middle):
        tail = middle[m.start() :].lstrip("\r\n")
        if len(tail.strip()) < 2 or not body.startswith(tail):
            continue
        end = len(tail)
        if end == len(body) or body[end] in "\r\n":  # the repetition covers whole lines
            cuts.append(m.start())
    for cut in sorted(set(cuts)):  # keep as little as possible: the longest repeated tail first
        kept = middle[:cut]
        if kept.strip() and _complete(checker, kept):
            return kept
    return middle
