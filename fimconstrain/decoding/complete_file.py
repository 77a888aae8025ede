"""Complete a Python file at a cursor with a FIM model: the engine behind ``fimconstrain complete``.

``complete_file(path, "LINE:COL")`` loads the model (the shipped default one
unless told otherwise, always offline), splits the file at the cursor and
fills the middle; ``main_complete(argv)`` is the command line around it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..engine.errors import FimConstrainError
from .positions import cursor_offset


def complete_file(
    path: str | Path,
    cursor: str | int,
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
    **options,
):
    """Fill the middle of the file at ``path`` at ``cursor``; returns a
    :class:`~fimconstrain.decoding.generate.FimResult`.

    ``model`` is a :class:`~fimconstrain.decoding.models.LoadedModel`, a directory or cached hub
    id, or None for the shipped default model. ``python_version`` (``"3.12"`` or ``(3, 12)``;
    default: the newest) is the syntax the middle must keep valid. ``options`` go to
    :meth:`~fimconstrain.decoding.generate.FimDecoder.generate` (``finish_in_budget``,
    ``best_stop``, ``prefilter``).
    """
    from ..engine.versions import parse_python_version
    from .generate import FimDecoder
    from .models import LoadedModel, load_model

    python_version = parse_python_version(python_version)  # a bad version fails before the model loads
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise FimConstrainError(f"cannot read {path}: {error}") from error
    offset = cursor_offset(text, cursor)
    if not isinstance(model, LoadedModel):
        model = load_model(model, fim_format=fim_format, trust_remote_code=trust_remote_code)
    decoder = FimDecoder(
        model.model, model.tokenizer, model.fim_format, order=order, python_version=python_version
    )
    return decoder.generate(
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


def build_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain complete``."""
    from ..engine.versions import add_python_version_option
    from .generate import MODES

    ap = argparse.ArgumentParser(
        prog="fimconstrain complete",
        description="Fill in the code at a cursor so that the whole file stays valid Python.",
    )
    ap.add_argument("file", help="a Python file (UTF-8)")
    ap.add_argument("--cursor", required=True, help="LINE:COL (1-based) or a 0-based character offset")
    ap.add_argument(
        "--model", default=None, help="model directory or cached Hugging Face id (default: shipped model)"
    )
    ap.add_argument("--mode", choices=MODES, default="constrained")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.0, help="0 for greedy decoding")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument(
        "--top-k", type=int, default=64, help="candidates checked before scanning the whole vocabulary"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", dest="fim_format", default=None, help="FIM format name (default: detected)")
    ap.add_argument("--order", choices=("psm", "spm"), default="psm")
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument(
        "--no-finish",
        dest="finish_in_budget",
        action="store_false",
        help="constrained: when the budget runs out, do not append the shortest valid finish",
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
    add_python_version_option(ap)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return ap


def main_complete(argv: list[str] | None = None) -> int:
    """Run ``fimconstrain complete``; exit 0 when the completed file parses, 1 when not, 2 on bad input."""
    args = build_parser().parse_args(argv)
    try:
        result = complete_file(
            args.file,
            args.cursor,
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
            finish_in_budget=args.finish_in_budget,
            best_stop=args.best_stop,
            prefilter=args.prefilter,
            python_version=args.python_version,
        )
    except FimConstrainError as error:
        print(f"fimconstrain complete: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        sys.stdout.write(result.middle if result.middle.endswith("\n") else result.middle + "\n")
        print(
            f"# {'valid' if result.valid else 'INVALID'} Python ({result.mode}, stopped: {result.stopped}); "
            f"{result.tokens} tokens, model {result.model_ms_per_token:.1f} ms/token, "
            f"constraint {result.checker_ms_per_token:.2f} ms/token, "
            f"setup {1000 * result.setup_seconds:.0f} ms",
            file=sys.stderr,
        )
    return 0 if result.valid else 1
