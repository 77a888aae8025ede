"""The ``fimconstrain`` command: its subcommands, dispatched (``check`` here; the others, whose
modules load torch and models, imported on use), and what an error becomes (one line and exit
code 2 for a user's mistake, a traceback and 3 only for a bug: :mod:`.command_line.exit_codes`).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable

from .command_line.arguments import HelpFormatter
from .command_line.check import add_check_parser
from .command_line.exit_codes import INTERNAL, INTERRUPTED, USAGE, UsageError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fimconstrain",
        description=(
            "Constrained fill-in-the-middle with the fimconstrain engine: syntax checks and completions."
        ),
        epilog="Exit codes: 0 ok, 1 invalid, 2 usage or input error, 3 internal error.",
        formatter_class=HelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_check_parser(sub)
    for name, (_, _, summary) in DELEGATED.items():
        sub.add_parser(name, help=summary + f" (see: fimconstrain {name} --help)", add_help=False)
    return p


#: subcommands with their own argument parsers, imported on use (they load torch and models)
DELEGATED = {
    "complete": (
        "fimconstrain.command_line.complete",
        "main_complete",
        "fill in the code at a cursor with a FIM model",
    ),
    "dataset": (
        "fimconstrain.evaluation.datasets",
        "main_build",
        "build Stack-Boundary / Stack-RandSpan datasets, or HumanEval-infilling / SAFIM ones",
    ),
    "eval": (
        "fimconstrain.evaluation.runs",
        "main_eval",
        "run decoding experiments on datasets or benchmarks, tests executed (resumable)",
    ),
    "report": (
        "fimconstrain.evaluation.report",
        "main_report",
        "print Tables I and II, the failure analysis and timing; draw Fig. 11",
    ),
    "export-gguf": (
        "fimconstrain.decoding.models.gguf_export",
        "main_export",
        "write a GPTBigCode checkpoint (the shipped model's architecture) as a GGUF file for llama.cpp",
    ),
    "merge": (
        "fimconstrain.evaluation.sharding",
        "main_merge",
        "join the results of eval --shard runs in single-run order",
    ),
    "model": (
        "fimconstrain.command_line.model",
        "main_model",
        "fetch a known model by name (e.g. qwen2.5-coder-0.5b) into the cache, or list them",
    ),
}


def _run_delegated(name: str, argv: list[str]) -> int:
    """Run a subcommand whose module (and its torch imports) is loaded only now."""
    import importlib

    module, function, _ = DELEGATED[name]
    return getattr(importlib.import_module(module), function)(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv``; None means this process is the program (``sys.argv``),
    and it then ends without a final garbage collection (see :func:`_freeze_for_exit`)."""
    as_program = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv and argv[0] in DELEGATED:
            return _guarded(f"fimconstrain {argv[0]}", lambda: _run_delegated(argv[0], argv[1:]))
        args = build_parser().parse_args(argv)
        return _guarded("fimconstrain", lambda: args.func(args))
    finally:
        if as_program:
            _freeze_for_exit()


def _freeze_for_exit() -> None:
    """Put every live object in the collector's permanent generation, so that the interpreter's
    last collections skip them: with torch and a model loaded that saves about a second at exit."""
    import gc

    gc.freeze()


def _guarded(prog: str, run: Callable[[], int]) -> int:
    """``run()``'s exit code; a user's mistake (bad input, a file that cannot be opened) or Ctrl-C
    is one line on standard error, and only a bug prints a traceback (exit code 3)."""
    from .engine.errors import FimConstrainError, InputError

    try:
        return run()
    except UsageError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except InputError as e:
        print(f"{prog}: input error: {e}", file=sys.stderr)
        return USAGE
    except FimConstrainError as e:
        print(f"{prog}: {type(e).__name__}: {e}", file=sys.stderr)
        return USAGE
    except Exception as e:
        if isinstance(e, OSError) and e.filename is not None:  # a path given on the command line
            print(f"{prog}: {e.filename}: {e.strerror or e}", file=sys.stderr)
            return USAGE
        traceback.print_exc()
        print(
            f"{prog}: internal error ({type(e).__name__}); please report it with the input file",
            file=sys.stderr,
        )
        return INTERNAL


if __name__ == "__main__":
    sys.exit(main())
