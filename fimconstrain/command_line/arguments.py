"""What the command lines take in: argument types with their ranges, the model options (read
back as one :meth:`~fimconstrain.decoding.model_choice.ModelChoice.of`), the Python version, and
the source file.

Torch-free on purpose: ``fimconstrain --help``, ``complete --help`` and ``check`` parse their
arguments and read their file before anything heavy is imported. A bad value is argparse's
one-line error with exit code 2; a file that cannot be a Python source is an
:class:`~fimconstrain.engine.errors.InputError` naming the place.
"""

from __future__ import annotations

import argparse
import math
import sys
from bisect import bisect_right

from ..decoding.model_choice import ModelServer
from ..decoding.tokens.fim_formats import get_format
from ..engine.errors import FimConstrainError, InputError
from ..engine.positions import line_starts
from ..engine.versions import NEWEST, OLDEST, PythonVersion, format_version, parse_python_version


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each option's default, except where there is none to show (None, or a
    flag's False): the option's own text says what happens then."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False or action.help is None:
            return action.help or ""
        return super()._get_help_string(action) or ""


def _number(kind, text: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {'an integer' if kind is int else 'a number'}"
        ) from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _checked(kind, ok, requirement: str):
    """An argparse type: a ``kind`` number for which ``ok`` holds, else "must be <requirement>"."""

    def parse(text: str):
        value = _number(kind, text)
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {requirement}, not {value:g}")
        return value

    return parse


def fim_format_name(text: str) -> str:
    """An argparse type: a FIM format's name or alias (:data:`..decoding.tokens.fim_formats.FORMATS`), checked
    before any model is loaded."""
    try:
        get_format(text)
    except FimConstrainError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def add_server_options(ap: argparse.ArgumentParser) -> None:
    """The options that send the prompt to a model server instead of loading a model here."""
    ap.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="an OpenAI-compatible completions server (http://host:port) runs --model instead of this "
        "process, whose tokenizer is read here: each token is constrained here from the server's "
        "likeliest ones (its log-probabilities); vLLM with fimconstrain installed constrains the "
        "middle itself; a server that tells no log-probabilities is checked (its middle cut to the "
        "longest valid prefix)",
    )
    ap.add_argument(
        "--server-model",
        default=None,
        metavar="NAME",
        help="the server's model (default: the first it serves)",
    )
    ap.add_argument(
        "--server-timeout",
        type=positive_float,
        default=ModelServer.timeout,
        metavar="SECONDS",
        help="how long to wait for the server's next token",
    )


def add_model_options(ap: argparse.ArgumentParser, runtime: str = "auto", threads: int | None = None) -> None:
    """The options that choose the model, its runtime and how its prompt is built (``complete``
    and ``eval`` take the same ones; ``runtime`` and ``threads`` are the command's defaults)."""
    from ..decoding.models.known_models import AUTO, KNOWN_MODELS
    from ..decoding.models.loading import RUNTIMES

    ap.add_argument(
        "--model",
        default=AUTO,
        help="model directory, cached Hugging Face id, .gguf file (run by llama.cpp), a known model's "
        f"name ({', '.join(KNOWN_MODELS)}; fetch it first with `fimconstrain model get NAME`), or "
        f"{AUTO}: the first of those that is fetched, else the shipped demo model (default: {AUTO})",
    )
    ap.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default=runtime,
        help="what runs the model: llama.cpp for a .gguf file; auto also runs the shipped model's GGUF "
        "copy on llama.cpp when llama-cpp-python is installed, else transformers",
    )
    ap.add_argument(
        "--threads",
        type=positive_int,
        default=threads,
        help="CPU threads of the model, recorded with the timings"
        + ("" if threads else " (default: every core under llama.cpp, torch's default under transformers)"),
    )
    ap.add_argument(
        "--context",
        type=positive_int,
        default=None,
        metavar="TOKENS",
        help="llama.cpp's window (default: the model's, at most 8192)",
    )
    ap.add_argument(
        "--format",
        dest="fim_format",
        default=None,
        type=fim_format_name,
        help="FIM format name (default: detected from the model)",
    )
    ap.add_argument(
        "--order",
        choices=("psm", "spm"),
        default=None,
        help="prompt order: prefix-suffix or suffix-prefix (default: the FIM format's, docs/models.md)",
    )
    ap.add_argument("--trust-remote-code", action="store_true", help="run a model's own code (trusted only)")


positive_int = _checked(int, lambda value: value >= 1, "at least 1")
non_negative_int = _checked(int, lambda value: value >= 0, "0 or more")
non_negative_float = _checked(float, lambda value: value >= 0, "0 or more")
positive_float = _checked(float, lambda value: value > 0, "more than 0")
#: a nucleus mass
probability = _checked(float, lambda value: 0 < value <= 1, "in (0, 1]")


def _where(text: str, offset: int) -> str:
    starts = line_starts(text)
    line = bisect_right(starts, offset) - 1
    return f"{line + 1}:{offset - starts[line] + 1}"


def read_source(path: str) -> tuple[str, str]:
    """``(display name, text)`` of a UTF-8 source file, ``-`` for standard input. A leading byte
    order mark is dropped (as CPython drops it); undecodable bytes and NUL characters are an
    :class:`InputError` at their line and column."""
    if path == "-":
        name, data = "<stdin>", sys.stdin.buffer.read()
    else:
        name = path
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as error:
            raise InputError(f"{name}: cannot read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        good = data[: error.start].decode("utf-8", errors="replace")
        raise InputError(
            f"{name}:{_where(good, len(good))}: not valid UTF-8 (byte 0x{data[error.start]:02x} at byte "
            f"offset {error.start}); fimconstrain reads UTF-8 only"
        ) from None
    text = text.removeprefix("\ufeff")
    nul = text.find("\0")
    if nul >= 0:
        raise InputError(
            f"{name}:{_where(text, nul)}: NUL character (a Python source cannot contain one)", offset=nul
        )
    return name, text


def python_version_arg(value: str) -> PythonVersion:
    """argparse ``type`` of ``--python-version``: ``"3.12"`` as ``(3, 12)``; a bad or unsupported
    value is a usage error (exit code 2) that names the supported range."""
    try:
        return parse_python_version(value)
    except InputError:
        raise argparse.ArgumentTypeError(
            f"expected a Python version from {format_version(OLDEST)} to {format_version(NEWEST)} "
            f"such as {format_version(NEWEST)}, not {value!r}"
        ) from None


def add_python_version_option(
    parser: argparse.ArgumentParser,
    default: str | None = None,
    default_note: str = "the newest, so that valid code of any version is accepted",
) -> None:
    """``--python-version X.Y`` (default: ``default``, else the newest supported version)."""
    parser.add_argument(
        "--python-version",
        type=python_version_arg,
        default=default or format_version(NEWEST),
        metavar="X.Y",
        help=f"target Python version, {format_version(OLDEST)} to {format_version(NEWEST)}: the syntax "
        f"that version's ast.parse accepts is valid, newer syntax is not "
        f"(default: %(default)s, {default_note})",
    )
