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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.errors import FimConstrainError
from ..engine.versions import NEWEST, OLDEST, PythonVersion, format_version
from .command_line import (
    HelpFormatter,
    add_model_options,
    add_server_options,
    non_negative_float,
    non_negative_int,
    positive_int,
    probability,
    read_source,
)
from .confidence import ConfidenceGate
from .editor import Decoder, complete_at_cursor, shows, wants_multiline
from .options import EDITOR_SUFFIX_TOKENS, EDITOR_WINDOW, MODES, SEMANTIC_DEFAULT, DecodeOptions
from .positions import cursor_offset
from .python_version import AUTO, Chooser, normalize_setting
from .result import FimResult
from .server_api import DEFAULT_TIMEOUT, ModelServerError

if TYPE_CHECKING:
    from .backend import ModelBackend


@dataclass
class CursorCompletion:
    """The middle at a cursor, whether the editor would show it, and the version it was checked as."""

    result: FimResult
    #: the editor shows it: valid, not blank, confident enough (:func:`.editor.shows`)
    shown: bool
    version: PythonVersion
    #: why that version: the setting, requires-python of a pyproject.toml, or a newer version
    #: the file parses at
    version_source: str
    #: what ran the model ("transformers", "llama.cpp", "server", ...)
    runtime: str = ""
    #: how a model server made the middle where the loop did not choose its every token ("": it did)
    note: str = ""


def complete_file(path: str | Path, cursor: str | int, model=None, **options) -> CursorCompletion:
    """Fill the middle of the file at ``path`` (``"-"``: standard input) at ``cursor``;
    ``options``: those of :func:`complete_text`."""
    _, text = read_source(str(path))
    where = Path.cwd() if str(path) == "-" else Path(path)
    return complete_text(text, cursor_offset(text, cursor), model, path=where, **options)


def complete_text(
    text: str,
    offset: int,
    model=None,
    *,
    path: Path | None = None,
    python_version: str = AUTO,
    multiline: str = "auto",
    fim_format: str | None = None,
    order: str | None = None,
    trust_remote_code: bool = False,
    runtime: str = "auto",
    threads: int | None = None,
    context: int | None = None,
    server: str | None = None,
    server_model: str | None = None,
    server_timeout: float = DEFAULT_TIMEOUT,
    progress: bool = True,
    timings: dict[str, float] | None = None,
    **changes,
) -> CursorCompletion:
    """Fill the middle of ``text`` at character ``offset`` as the editor would.

    ``model``: a model backend (:mod:`.backend`, e.g. what :func:`.models.load_model` returns),
    a directory, cached hub id or ``.gguf`` file, or None for the shipped default model, loaded on
    ``runtime`` with ``threads`` and ``context`` (:func:`.models.load_model`). ``python_version``:
    ``"auto"`` (requires-python of the nearest pyproject.toml above ``path``, else the newest)
    or ``"3.12"``; ``multiline``: ``auto`` (from the cursor's context), ``always`` or ``never``.
    ``changes``: fields of :class:`.options.DecodeOptions` that differ from the editor's preset
    (:meth:`.options.DecodeOptions.editor`). ``server``: a model server's URL that runs ``model``
    instead of this process (:mod:`.server_backend`: ``server_model`` is the server's name for
    it, else the first it serves; only the tokenizer of ``model`` is read here). ``timings``, if
    given, gets the seconds spent importing the model stack, loading the model (or connecting)
    and generating.
    """
    setting = normalize_setting(python_version)  # a bad version fails before the model loads
    prefix, suffix = text[:offset], text[offset:]
    choice = Chooser().choose(setting, path, named="--python-version")
    options = replace(
        DecodeOptions.editor(single_line=not wants_multiline(prefix, suffix, multiline)),
        python_version=choice.version,
        **changes,
    )
    spent = {} if timings is None else timings
    decoder: Decoder
    note = ""
    if server is not None:
        start = time.perf_counter()
        from .models import load_tokenizer
        from .server_backend import ServerBackend, ServerDecoder

        spent["import"] = time.perf_counter() - start
        start = time.perf_counter()
        if isinstance(model, (str, Path)) or model is None:
            tokenizer, fmt = load_tokenizer(model, fim_format, trust_remote_code)
        else:  # (a loaded backend: its tokenizer and format)
            tokenizer, fmt = model.tokenizer, model.fim_format
        backend = ServerBackend(server, tokenizer, fmt, model=server_model, timeout=server_timeout)
        server_decoder = ServerDecoder(backend, **editor_settings(backend, order))
        decoder, gate, runtime = server_decoder, ConfidenceGate(), backend.runtime
        note = server_decoder.mode_note(options.mode)
        spent["load"] = time.perf_counter() - start
    else:
        decoder, gate, runtime = _load_here(
            model, fim_format, order, trust_remote_code, runtime, threads, context, progress, spent
        )
    start = time.perf_counter()
    completion = complete_at_cursor(
        decoder, prefix, suffix, options, gate=gate, verify_text=text, progress=progress
    )
    spent["generate"] = time.perf_counter() - start
    result = completion.results[0]
    version = completion.version or choice.version
    source = choice.source if version == choice.version else f"the file does not parse as {choice.label}"
    return CursorCompletion(result, shows(result, gate), version, source, runtime, note)


def _load_here(
    model, fim_format, order, trust_remote_code, runtime, threads, context, progress, spent
) -> tuple[Decoder, ConfidenceGate, str]:
    """The decode loop over ``model`` (a backend, or loaded as :func:`.models.load_model` does),
    the model's confidence gate and its runtime; ``spent`` gets the import and load times."""
    start = time.perf_counter()
    from .generate import FimDecoder
    from .models import load_model

    spent["import"] = time.perf_counter() - start
    start = time.perf_counter()
    if model is None or isinstance(model, (str, Path)):
        model = load_model(
            model,
            runtime=runtime,
            fim_format=fim_format,
            trust_remote_code=trust_remote_code,
            threads=threads,
            context=context,
            progress=progress,
        )
    decoder = FimDecoder(model, **editor_settings(model, order))
    gate = ConfidenceGate.for_model(getattr(model, "name", "") or None)
    spent["load"] = time.perf_counter() - start
    return decoder, gate, model.runtime


def editor_settings(backend: ModelBackend, order: str | None) -> dict[str, Any]:
    """The decoder settings of the editor for ``backend``: its prompt window, and a prompt cut
    that typing keeps (:class:`.fim_formats.PromptCut`)."""
    from .fim_formats import PromptCut

    window = min(EDITOR_WINDOW, backend.context_window)
    return {"order": order, "window": window, "cut": PromptCut(EDITOR_SUFFIX_TOKENS)}


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
    try:
        done = complete_file(
            args.file,
            args.cursor,
            args.model,
            python_version=args.python_version,
            multiline=args.multiline,
            fim_format=args.fim_format,
            order=args.order,
            trust_remote_code=args.trust_remote_code,
            runtime=args.runtime,
            threads=args.threads,
            context=args.context,
            server=args.server,
            server_model=args.server_model,
            server_timeout=args.server_timeout,
            progress=not args.json,
            timings=timings,
            mode=args.mode,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            seed=args.seed,
            finish_in_budget=args.finish_in_budget,
            best_stop=args.best_stop,
            prefilter=args.prefilter,
            finish_search=args.finish_search,
            semantic=args.semantic,
        )
    except (FimConstrainError, ModelServerError) as error:
        print(f"fimconstrain complete: {error}", file=sys.stderr)
        return 2
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
    return 0 if result.valid else 1
