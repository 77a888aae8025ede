"""``python -m fimconstrain.evaluation dataset|eval|report ...``: the evaluation's three commands
without the rest of the command line (each is also ``fimconstrain <command>``)."""

from __future__ import annotations

import argparse
import importlib
import sys

from ..command_line.arguments import HelpFormatter

#: command -> (module, function, summary)
COMMANDS = {
    "dataset": (
        ".datasets",
        "main_build",
        "build, rebuild or verify Stack-Boundary / Stack-RandSpan; write or check a benchmark's subset",
    ),
    "eval": (".runs", "main_eval", "run decoding modes on datasets or benchmarks (resumable)"),
    "report": (
        ".report",
        "main_report",
        "print Tables I and II, the failure analysis and timing; draw Fig. 11",
    ),
    "merge": (".sharding", "main_merge", "join the results of eval --shard runs in single-run order"),
}


def main(argv: list[str] | None = None) -> int:
    """Run one command on ``argv`` (``sys.argv`` when None); its own ``--help`` lists its options."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        module, function, _ = COMMANDS[argv[0]]
        return getattr(importlib.import_module(module, __package__), function)(argv[1:])
    ap = argparse.ArgumentParser(
        prog="python -m fimconstrain.evaluation",
        formatter_class=HelpFormatter,
        description="Paper 004 §VII's evaluation: datasets, runs, reports.",
        epilog="Example: dataset --kind boundary --preset paper --out b.jsonl; eval b.jsonl --out r.jsonl; "
        "report r.jsonl --out-dir results/",
    )
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, _, summary) in COMMANDS.items():
        sub.add_parser(name, help=f"{summary} (see: {name} --help)", add_help=False)
    ap.parse_args(argv)
    return 2  # unreachable: a known command was run above, anything else is argparse's error


if __name__ == "__main__":
    sys.exit(main())
