"""Complete a Python file at a cursor with a FIM model: the engine behind ``fimconstrain complete``.

``complete_file(path, "LINE:COL")`` loads the model (the shipped default one unless told
otherwise, always offline), splits the file at the cursor and fills the middle;
``main_complete(argv)`` is the command line around it. Arguments are parsed and the file read
before torch is imported, so a mistake is reported at once; the run then says where its time
went (imports, model load, generation).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..engine.errors import FimConstrainError
from ..engine.versions import add_python_version_option, parse_python_version
from .command_line import (
    MODES,
    SEMANTIC_DEFAULT,
    HelpFormatter,
    add_model_options,
    non_negative_float,
    non_negative_int,
    positive_int,
    probability,
    read_source,
)
from .positions import cursor_offset

#: what ``stopped:`` says about how the middle ended (printed under it; README, "Command line")
STOPPED = {
    "eos": "the model ended the middle (constrained modes allow that only when the file is valid)",
    "split": "the model's last token ran on into the text after the cursor; the middle ends inside it",
    "line": "one line was asked for, and it ended",
    "budget": "--max-new-tokens ran out; the middle is as generated, or cut back to its longest valid "
    "prefix when nothing ended it validly: try a larger --max-new-tokens",
    "best-stop": "--max-new-tokens ran out; the middle is cut where the file was last valid and the "
    "model likeliest to stop",
    "finished": "--max-new-tokens ran out; the middle was ended by the end-of-middle policy (a cut of "
    "it, closed with brackets and the like)",
    "stuck": "no token the model offered kept the file valid; the middle ends there, as for budget",
    "cancelled": "stopped from outside (the language server: a newer request, or the deadline)",
}


def complete_file(path: str | Path, cursor: str | int, model=None, **options):
    """Fill the middle of the file at ``path`` (``"-"``: standard input) at ``cursor``;
    returns a :class:`~fimconstrain.decoding.generate.FimResult`. ``options``: those of
    :func:`complete_text`."""
    _, text = read_source(str(path))
    return complete_text(text, cursor_offset(text, cursor), model, **options)


def complete_text(
    text: str,
    offset: int,
    model=None,
    mode: str = "constrained",
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 64,
    seed: int | None = 0,
    fim_format: str | None = None,
    order: str = "psm",
    trust_remote_code: bool = False,
    progress: bool = True,
    python_version=None,
    timings: dict[str, float] | None = None,
    **options,
):
    """Fill the middle of ``text`` at character ``offset``.

    ``model`` is a :class:`~fimconstrain.decoding.models.LoadedModel`, a directory or cached hub
    id, or None for the shipped default model. ``python_version`` (``"3.12"`` or ``(3, 12)``;
    default: the newest) is the syntax the middle must keep valid. ``timings``, if given, gets
    the seconds spent importing the model stack, loading the model and generating.
    ``options`` go to :meth:`~fimconstrain.decoding.generate.FimDecoder.generate`.
    """
    python_version = parse_python_version(python_version)  # a bad version fails before the model loads
    spent = {} if timings is None else timings
    start = time.perf_counter()
    from .generate import FimDecoder
    from .models import LoadedModel, load_model

    spent["import"] = time.perf_counter() - start
    start = time.perf_counter()
    if not isinstance(model, LoadedModel):
        model = load_model(model, fim_format=fim_format, trust_remote_code=trust_remote_code)
    decoder = FimDecoder(
        model.model, model.tokenizer, model.fim_format, order=order, python_version=python_version
    )
    spent["load"] = time.perf_counter() - start
    start = time.perf_counter()
    result = decoder.generate(
        text[:offset],
        text[offset:],
        mode=mode,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        progress=progress,
        **options,
    )
    spent["generate"] = time.perf_counter() - start
    return result


def build_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain complete`` (no torch imported)."""
    ap = argparse.ArgumentParser(
        prog="fimconstrain complete",
        description="Fill in the code at a cursor so that the whole file stays valid Python.",
        formatter_class=HelpFormatter,
        epilog="Exit codes: 0 the completed file is valid, 1 it is not, 2 usage or input error.",
    )
    ap.add_argument("file", help="a Python file (UTF-8), or - for standard input")
    ap.add_argument("--cursor", required=True, help="LINE:COL (1-based) or a 0-based character offset")
    add_model_options(ap)
    ap.add_argument(
        "--mode",
        choices=MODES,
        default="constrained",
        help="constrained: prefix + middle + suffix stays valid; prefix: the text before the cursor "
        "only; checked: unconstrained, then cut to the longest valid prefix; unconstrained: the model alone",
    )
    ap.add_argument("--max-new-tokens", type=positive_int, default=128, metavar="N", help="token budget")
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
    add_python_version_option(ap)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return ap


def main_complete(argv: list[str] | None = None) -> int:
    """Run ``fimconstrain complete``; exit 0 when the completed file parses, 1 when not, 2 on bad input."""
    args = build_parser().parse_args(argv)
    timings: dict[str, float] = {}
    try:
        _, text = read_source(args.file)
        offset = cursor_offset(text, args.cursor)
        result = complete_text(
            text,
            offset,
            model=args.model,
            mode=args.mode,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            seed=args.seed,
            fim_format=args.fim_format,
            order=args.order,
            trust_remote_code=args.trust_remote_code,
            progress=not args.json,
            python_version=args.python_version,
            timings=timings,
            finish_in_budget=args.finish_in_budget,
            best_stop=args.best_stop,
            prefilter=args.prefilter,
            semantic=args.semantic,
        )
    except FimConstrainError as error:
        print(f"fimconstrain complete: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**result.to_dict(), "timings": timings}))
    else:
        sys.stdout.write(result.middle if result.middle.endswith("\n") else result.middle + "\n")
        print(
            f"# {'valid' if result.valid else 'INVALID'} Python ({result.mode}, stopped: {result.stopped}); "
            f"{result.tokens} tokens, model {result.model_ms_per_token:.1f} ms/token, "
            f"constraint {result.checker_ms_per_token:.2f} ms/token, "
            f"setup {1000 * result.setup_seconds:.0f} ms\n"
            f"# stopped: {result.stopped}: {STOPPED.get(result.stopped, '')}\n"
            f"# time: import {timings['import']:.2f} s, model load {timings['load']:.2f} s, "
            f"generate {timings['generate']:.2f} s",
            file=sys.stderr,
        )
    return 0 if result.valid else 1
