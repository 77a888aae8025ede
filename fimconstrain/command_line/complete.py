"""``fimconstrain complete``: fill in the code at a cursor of a file with a FIM model.

Arguments are parsed and the file read before torch is imported, so a mistake is reported at
once; the run then says where its time went (imports, model load, generation). The completion
itself is the library's :func:`~fimconstrain.decoding.completion.complete_text`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..decoding.completion import CursorCompletion, complete_text
from ..decoding.editor.python_version import AUTO, normalize_setting
from ..decoding.loop.options import MODES, SEMANTIC_DEFAULT
from ..decoding.model_choice import ModelChoice
from ..decoding.models.known_models import AUTO as AUTO_MODEL
from ..decoding.models.known_models import auto_note
from ..decoding.runtimes.server_api import ModelServerError
from ..engine.errors import FimConstrainError
from ..engine.positions import cursor_offset
from ..engine.versions import NEWEST, OLDEST, format_version
from .arguments import (
    HelpFormatter,
    add_model_options,
    add_server_options,
    non_negative_float,
    non_negative_int,
    positive_int,
    probability,
    read_source,
)
from .exit_codes import INVALID, OK, USAGE

if TYPE_CHECKING:
    from ..decoding.runtimes.backend import ModelBackend


#: the options of ``complete`` that are :class:`~fimconstrain.decoding.loop.options.DecodeOptions`
#: fields of the same names
DECODE_FIELDS = (
    "mode",
    "max_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "finish_in_budget",
    "best_stop",
    "prefilter",
    "finish_search",
    "semantic",
)


def complete_file(
    path: str | Path, cursor: str | int, model: ModelChoice | ModelBackend | None = None, **options: Any
) -> CursorCompletion:
    """Fill the middle of the file at ``path`` (``"-"``: standard input) at ``cursor``;
    ``model`` and ``options``: those of :func:`~fimconstrain.decoding.completion.complete_text`."""
    _, text = read_source(str(path))
    where = Path.cwd() if str(path) == "-" else Path(path)
    return complete_text(text, cursor_offset(text, cursor), model, path=where, **options)


def build_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain complete`` (no torch imported)."""
    ap = argparse.ArgumentParser(
        prog="fimconstrain complete",
        description="Fill in the code at a cursor so that the whole file stays valid Python. The defaults "
        "are the editor's (the language server runs the same policy): one line or a block as the cursor "
        "asks, the Python version of the file's project, no text the model did not write.",
        formatter_class=HelpFormatter,
        epilog="Exit codes: 0 the completed file is valid, 1 it is not, 2 usage or input error.",
    )
    ap.add_argument("file", help="a Python file (UTF-8), or - for standard input")
    ap.add_argument("--cursor", required=True, help="LINE:COL (1-based) or a 0-based character offset")
    add_model_options(ap)
    add_server_options(ap)
    ap.add_argument(
        "--mode",
        choices=MODES,
        default="constrained",
        help="constrained: prefix + middle + suffix stays valid; prefix: the text before the cursor "
        "only; checked: unconstrained, then cut to the longest valid prefix; unconstrained: the model alone",
    )
    ap.add_argument("--max-new-tokens", type=positive_int, default=64, metavar="N", help="token budget")
    ap.add_argument(
        "--multiline",
        choices=("auto", "always", "never"),
        default="auto",
        help="a block or one line: auto decides from the cursor's context, as the editor does",
    )
    ap.add_argument(
        "--temperature", type=non_negative_float, default=0.0, metavar="T", help="0 for greedy decoding"
    )
    ap.add_argument(
        "--top-p", type=probability, default=1.0, metavar="P", help="nucleus mass when sampling, in (0, 1]"
    )
    ap.add_argument(
        "--top-k",
        type=positive_int,
        default=64,
        metavar="K",
        help="candidates checked against the constraint before scanning the whole vocabulary",
    )
    ap.add_argument("--seed", type=non_negative_int, default=0, help="sampling seed")
    ap.add_argument(
        "--no-finish",
        dest="finish_in_budget",
        action="store_false",
        help="constrained: when the budget runs out, do not end the middle by the end-of-middle policy",
    )
    ap.add_argument(
        "--no-best-stop",
        dest="best_stop",
        action="store_false",
        help="constrained: when the budget runs out, do not cut at the likeliest point where the file "
        "was valid",
    )
    ap.add_argument(
        "--prefilter",
        action="store_true",
        help="constrained: mask each step with the token-mask store before the exact check",
    )
    ap.add_argument(
        "--semantic",
        action=argparse.BooleanOptionalAction,
        default=SEMANTIC_DEFAULT,
        help="constrained and prefix modes: names the file defines and attributes jedi resolves guide "
        "the choice among valid tokens (soft: an unknown name is only ruled out where that is sure)",
    )
    ap.add_argument(
        "--finish-search",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="constrained: a middle cut short may be completed by the checker's finish search (off, as "
        "in the editor: only the model's own text is shown)",
    )
    ap.add_argument(
        "--python-version",
        type=_version_setting,
        default=AUTO,
        metavar="auto|X.Y",
        help=f"target Python, {format_version(OLDEST)} to {format_version(NEWEST)}: that version's syntax "
        "is valid, newer syntax is not; auto: the lower bound of requires-python in the nearest "
        "pyproject.toml above the file (standard input: above the current folder), else the newest. "
        "A file that parses only at a newer version is completed as that one, as in the editor",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return ap


def _version_setting(text: str) -> str:
    """argparse type of ``--python-version``: ``auto`` or a supported ``X.Y``."""
    try:
        return normalize_setting(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main_complete(argv: list[str] | None = None) -> int:
    """Run ``fimconstrain complete``; exit 0 when the completed file parses, 1 when not, 2 on bad input."""
    args = build_parser().parse_args(argv)
    timings: dict[str, float] = {}
    choice = ModelChoice.of(args)
    if args.model == AUTO_MODEL and choice.server is None:
        print(f"fimconstrain complete: {auto_note(choice.model)}", file=sys.stderr)
    try:
        done = complete_file(
            args.file,
            args.cursor,
            choice,
            python_version=args.python_version,
            multiline=args.multiline,
            order=args.order,
            progress=not args.json,
            timings=timings,
            **{name: getattr(args, name) for name in DECODE_FIELDS},
        )
    except (FimConstrainError, ModelServerError) as error:
        print(f"fimconstrain complete: {error}", file=sys.stderr)
        return USAGE
    result = done.result
    version = format_version(done.version)
    if args.json:
        extra = dict(
            shown=done.shown,
            python_version=version,
            python_version_source=done.version_source,
            runtime=done.runtime,
        )
        print(json.dumps({**result.to_dict(), **extra, "timings": timings}))
    else:
        if result.valid:  # a middle that leaves the file invalid is never printed as the answer
            sys.stdout.write(result.middle if result.middle.endswith("\n") else result.middle + "\n")
        shown = (
            ""
            if done.shown
            else "; the editor would show nothing (blank, invalid, unlikely or not the model's)"
        )
        print(
            f"# {'valid' if result.valid else 'INVALID'} Python {version} ({done.version_source}); "
            f"{result.mode}{f' ({done.note})' if done.note else ''}, {result.tokens} tokens{shown}\n"
            f"# stopped: {result.stopped}: {result.stopped.explanation}\n"
            f"# time: import {timings['import']:.2f} s, model load {timings['load']:.2f} s ({done.runtime}), "
            f"generate {timings['generate']:.2f} s (model {result.model_ms_per_token:.1f} ms/token, "
            f"constraint {result.checker_ms_per_token:.2f} ms/token, "
            f"setup {1000 * result.setup_seconds:.0f} ms)",
            file=sys.stderr,
        )
    return OK if result.valid else INVALID
