#!/usr/bin/env python3
"""A newcomer's first commands: how long ``fimconstrain --help`` takes, and where the time of
one ``fimconstrain complete`` goes (imports, model load, generation).

Each command runs as a whole process several times; the baseline, measured in the same run, is
an interpreter that does nothing (``python -c pass``). The ``complete`` split comes from its own
``--json`` timings; the rest of its wall time is the interpreter and argument parsing.

    python benchmarks/cli_startup.py --runs 7
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _common as C

REPO = Path(__file__).resolve().parent.parent
COMPLETE = ["complete", "examples/inventory.py", "--cursor", "30:9", "--json"]


def wall(argv: list[str]) -> tuple[float, str]:
    """Seconds one process takes, and what it printed."""
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, cwd=REPO, check=True)
    return time.perf_counter() - start, proc.stdout.decode()


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=None, workers=False)
    p.add_argument("--runs", type=int, default=7, help="runs per command")
    args = p.parse_args(argv)
    cli = [sys.executable, "-m", "fimconstrain"]
    baseline = [wall([sys.executable, "-c", "pass"])[0] for _ in range(args.runs)]
    help_runs = [wall([*cli, "--help"])[0] for _ in range(args.runs)]
    complete_help = [wall([*cli, "complete", "--help"])[0] for _ in range(args.runs)]
    splits = []
    for _ in range(max(1, args.runs // 2)):
        seconds, out = wall([*cli, *COMPLETE])
        splits.append({"wall": seconds, **json.loads(out)["timings"]})
    rows = [
        ["python -c pass (baseline)", *_stats(baseline), 1.0],
        [
            "fimconstrain --help",
            *_stats(help_runs),
            statistics.median(help_runs) / statistics.median(baseline),
        ],
        [
            "fimconstrain complete --help",
            *_stats(complete_help),
            statistics.median(complete_help) / statistics.median(baseline),
        ],
    ]
    print(C.table(rows, ["command", "min s", "median s", "max s", "x baseline"]))
    split = {k: statistics.median(s[k] for s in splits) for k in ("wall", "import", "load", "generate")}
    rest = split["wall"] - split["import"] - split["load"] - split["generate"]
    print(
        f"\nfimconstrain {' '.join(COMPLETE[:4])} (median of {len(splits)}): wall {split['wall']:.2f} s = "
        f"imports {split['import']:.2f} s + model load {split['load']:.2f} s + generate "
        f"{split['generate']:.2f} s + interpreter and arguments {rest:.2f} s"
    )
    out = C.write_results(
        "cli_startup",
        args,
        {"baseline": baseline, "help": help_runs, "complete_help": complete_help, "complete": splits},
    )
    print(f"wrote {out}")
    return 0


def _stats(values: list[float]) -> list[float]:
    return [min(values), statistics.median(values), max(values)]


if __name__ == "__main__":
    sys.exit(main())
