"""``fimconstrain check FILE [--cursor POS] [--python-version X.Y]``: is a file a valid program,
and if not, where it stops being completable (with ``--cursor``: can the text before the cursor
still be completed). Exit codes: :mod:`.exit_codes` (0 valid, or with ``--cursor`` a prefix
that can be completed; 1 invalid; 2 usage or input error)."""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.positions import cursor_offset, line_starts
from .arguments import HelpFormatter, add_python_version_option, non_negative_int, read_source
from .exit_codes import INVALID, OK, UsageError


def add_check_parser(sub) -> None:
    """The ``check`` subcommand on ``sub`` (an ``add_subparsers`` result)."""
    c = sub.add_parser(
        "check",
        formatter_class=HelpFormatter,
        help="check that a file is a valid program, or that the text before a cursor can be completed",
        description=(
            "Check that FILE is a valid program. If it is not, print FILE:LINE:COL of the first "
            "character after which no continuation can give a valid program (or of the end of the "
            "file, when every prefix is fine but the program is unfinished). With --cursor, split "
            "the file at the cursor and report whether the text before it can still be completed "
            "(this sets the exit code) and whether the whole file is valid."
        ),
    )
    c.add_argument("file", metavar="FILE", help="a UTF-8 source file, or - for standard input")
    c.add_argument(
        "--cursor",
        metavar="POS",
        help="cursor position: a 0-based character offset (the prefix length) or LINE:COL (1-based)",
    )
    c.add_argument("--language", default="python", help="language of the file")
    add_python_version_option(c)
    c.add_argument(
        "--feed-chunk",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="feed the text to the engine N characters at a time from an empty checker, "
        "instead of building the checker from the whole text at once (0: at once)",
    )
    c.set_defaults(func=cmd_check)


# --------------------------------------------------------------------------
# target Python version


def _oldest_newer_accepting(text: str, language: str, checked) -> tuple[int, int] | None:
    """The oldest version newer than ``checked`` at which ``text`` is a valid program, if any
    (a hint for a file that is invalid only because it uses newer syntax)."""
    from ..engine.checker import LANGUAGES
    from ..engine.versions import SUPPORTED

    if language not in LANGUAGES or not LANGUAGES[language][3]:
        return None
    for version in SUPPORTED:
        if version > checked and check_text(text, language, python_version=version).complete:
            return version
    return None


# --------------------------------------------------------------------------
# positions


@dataclass(frozen=True)
class LineColumn:
    """A character offset with its 1-based line and column."""

    offset: int
    line: int
    col: int


class LineIndex:
    """Maps character offsets to (line, col) and back; lines end at \\r\\n, \\r or \\n."""

    def __init__(self, text: str):
        self.text = text
        self.starts = line_starts(text)

    def position(self, offset: int) -> LineColumn:
        from bisect import bisect_right

        offset = max(0, min(offset, len(self.text)))
        i = bisect_right(self.starts, offset) - 1
        return LineColumn(offset, i + 1, offset - self.starts[i] + 1)

    def line_count(self) -> int:
        """Number of lines as an editor counts them (a final newline ends the last line)."""
        n = len(self.starts)
        return n - 1 if n > 1 and self.starts[-1] == len(self.text) else n

    def line_text(self, line: int) -> str:
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")


def parse_cursor(spec: str, text: str) -> int:
    """``--cursor``: ``N`` is a 0-based character offset (the length of the prefix); ``LINE:COL`` is
    1-based (:func:`fimconstrain.engine.positions.cursor_offset`)."""
    from ..engine.errors import FimConstrainError

    try:
        return cursor_offset(text, spec)
    except FimConstrainError as e:
        raise UsageError(f"--{e}") from None


# --------------------------------------------------------------------------
# engine calls


def _engine():
    import fimconstrain  # imported lazily so that `--help` stays fast

    return fimconstrain


def _uncompletable():
    from ..engine.errors import UncompletableError

    return UncompletableError


@dataclass
class CheckVerdict:
    dead_at: int | None  # first offset that makes the text uncompletable, or None
    complete: bool  # text is a complete valid program


def check_text(
    text: str, language: str, start_checker=None, start: int = 0, feed_chunk: int = 0, python_version=None
) -> CheckVerdict:
    """Check ``text`` (from ``start``, continuing ``start_checker`` if given) as the syntax of
    ``python_version`` (default: the newest)."""
    fc = _engine()
    if start_checker is None and feed_chunk <= 0:
        # fast path: hand the whole text to the engine as a prefix
        try:
            c = fc.fim_checker(text, "", language=language, python_version=python_version)
        except _uncompletable():
            c = None
        if c is not None:
            return CheckVerdict(None, bool(c.is_complete()))
    checker = (
        start_checker
        if start_checker is not None
        else fc.fim_checker("", "", language=language, python_version=python_version)
    )
    from ..engine.rejection import first_rejection

    dead, checker = first_rejection(checker, text, start, chunk=feed_chunk if feed_chunk > 0 else 256)
    if dead is not None:
        return CheckVerdict(dead, False)
    return CheckVerdict(None, bool(checker.is_complete()))


# --------------------------------------------------------------------------
# output


def _caret_block(index: LineIndex, pos: LineColumn) -> str:
    line = index.line_text(pos.line)
    # keep tabs so that the caret lines up with the source line as a terminal shows it
    pad = "".join(ch if ch == "\t" else " " for ch in line[: pos.col - 1])
    return f"    {line}\n    {pad}^"


def _describe_dead(name: str, index: LineIndex, offset: int, what: str) -> str:
    pos = index.position(offset)
    ch = index.text[offset] if offset < len(index.text) else ""
    return (
        f"{name}:{pos.line}:{pos.col}: error: invalid syntax at {ch!r}: "
        f"{what} up to here cannot be completed to a valid program\n" + _caret_block(index, pos)
    )


def _describe_eof(name: str, index: LineIndex) -> str:
    pos = index.position(len(index.text))
    return (
        f"{name}:{pos.line}:{pos.col}: error: unexpected end of file: "
        f"the text can still be completed, but it is not a complete program"
    )


def _version_note(name: str, text: str, args) -> None:
    """After an invalid verdict: say so when the file is valid at a newer Python version."""
    from ..engine.versions import format_version

    newer = _oldest_newer_accepting(text, args.language, args.python_version)
    if newer is not None:
        print(
            f"{name}: note: valid as Python {format_version(newer)} and newer; checked as "
            f"{format_version(args.python_version)} (--python-version)"
        )


def cmd_check(args) -> int:
    name, text = read_source(args.file)
    index = LineIndex(text)
    fc = _engine()
    version = args.python_version

    if args.cursor is None:
        v = check_text(text, args.language, feed_chunk=args.feed_chunk, python_version=version)
        if v.complete:
            print(f"{name}: ok: valid program ({len(text)} characters, {index.line_count()} lines)")
            return OK
        if v.dead_at is not None:
            print(_describe_dead(name, index, v.dead_at, "the text"))
        else:
            print(_describe_eof(name, index))
        _version_note(name, text, args)
        return INVALID

    cut = parse_cursor(args.cursor, text)
    cpos = index.position(cut)
    prefix = text[:cut]
    where = f"{name}:{cpos.line}:{cpos.col}"

    # 1. the prefix (text before the cursor) on its own
    pv = check_text(prefix, args.language, feed_chunk=args.feed_chunk, python_version=version)
    if pv.dead_at is not None:
        print(f"{where}: cursor: prefix ({cut} characters) cannot be completed")
        print(_describe_dead(name, index, pv.dead_at, "the prefix"))
        print(f"{name}: whole file: invalid")
        _version_note(name, text, args)
        return INVALID
    print(
        f"{where}: cursor: prefix ({cut} characters) can be completed"
        + (" (and is already complete)" if pv.complete else "")
    )

    # 2. prefix + rest: continue from the prefix checker (feed is pure)
    try:
        c = fc.fim_checker(prefix, "", language=args.language, python_version=version)
    except _uncompletable():  # pragma: no cover - disagrees with step 1
        c = None
    if c is None:
        wv = check_text(text, args.language, python_version=version)
    else:
        wv = check_text(
            text,
            args.language,
            start_checker=c,
            start=cut,
            feed_chunk=args.feed_chunk,
            python_version=version,
        )
    if wv.complete:
        print(f"{name}: whole file: ok: valid program")
    elif wv.dead_at is not None:
        print(f"{name}: whole file: invalid")
        print(_describe_dead(name, index, wv.dead_at, "the text"))
    else:
        print(f"{name}: whole file: invalid")
        print(_describe_eof(name, index))
    if not wv.complete:
        _version_note(name, text, args)
    return OK
