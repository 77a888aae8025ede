#!/usr/bin/env python3
"""A newcomer's first commands: how long ``fimconstrain --help`` and ``check`` take against an
interpreter that does nothing, and where the time of one ``fimconstrain complete`` goes.

Each command runs as a whole process several times, in turns; the baseline (``python -c pass``)
is measured in the same run, and every figure is also given as a multiple of it. The
``complete`` split comes from its own ``--json`` timings (imports, model load, generation); the
rest of its wall time is the interpreter, argument parsing and exit. A separate probe splits the
model load into the model code transformers imports on first use and reading the weights.

    python benchmarks/cli_startup.py --runs 7 --complete-runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _common as C

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "fimconstrain"]
COMPLETE = ["complete", "examples/inventory.py", "--cursor", "30:9"]
QUICK = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "fimconstrain --help": [*CLI, "--help"],
    "fimconstrain complete --help": [*CLI, "complete", "--help"],
    "fimconstrain check examples/inventory.py": [*CLI, "check", "examples/inventory.py"],
}
#: what `complete` does before generating, with the model load split in two
LOAD_PROBE = """
import json, time
start = time.perf_counter()
import transformers
from fimconstrain.decoding.loop.generate import FimDecoder
from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR, load_model
imported = time.perf_counter()
config = transformers.AutoConfig.from_pretrained(DEFAULT_MODEL_DIR, local_files_only=True)
getattr(transformers, config.architectures[0])
code = time.perf_counter()
model = load_model(runtime="transformers")
FimDecoder(model)
done = time.perf_counter()
print(json.dumps({"import": imported - start, "model code": code - imported, "weights": done - code}))
"""


def wall(argv: list[str]) -> tuple[float, str]:
    """Seconds one process takes from start to exit, and what it printed."""
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, cwd=REPO, check=True)
    return time.perf_counter() - start, proc.stdout.decode()


def quick_runs(runs: int) -> dict[str, list[float]]:
    """Wall seconds of each quick command, ``runs`` times, in turns (so drift hits all alike)."""
    seconds: dict[str, list[float]] = {name: [] for name in QUICK}
    for _ in range(runs):
        for name, argv in QUICK.items():
            seconds[name].append(wall(argv)[0])
    return seconds


def complete_runs(runs: int) -> list[dict[str, float]]:
    """``complete``'s wall time and its own import / load / generate split, per run."""
    splits = []
    for _ in range(runs):
        seconds, out = wall([*CLI, *COMPLETE, "--json"])
        timings = json.loads(out)["timings"]
        rest = seconds - sum(timings[k] for k in ("import", "load", "generate"))
        splits.append({"wall": seconds, **timings, "rest": rest})
    return splits


def load_probes(runs: int) -> list[dict[str, float]]:
    """The model load split into transformers' model code import and the weights, per run."""
    return [json.loads(wall([sys.executable, "-c", LOAD_PROBE])[1]) for _ in range(runs)]


def median_of(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(row[key] for row in rows) for key in rows[0]}


def report(quick: dict[str, list[float]], splits: list[dict], probes: list[dict]) -> None:
    """Print the table of wall times against the baseline, then the two splits."""
    base = statistics.median(next(iter(quick.values())))
    walls = {**quick, f"fimconstrain {' '.join(COMPLETE)}": [s["wall"] for s in splits]}
    rows = [
        [name, min(s), statistics.median(s), max(s), statistics.median(s) / base] for name, s in walls.items()
    ]
    print(C.table(rows, ["command", "min s", "median s", "max s", "x baseline"]))
    m, p = median_of(splits), median_of(probes)
    print(
        f"\ncomplete (median of {len(splits)}): wall {m['wall']:.2f} s = imports {m['import']:.2f} s"
        f" + model load {m['load']:.2f} s + generate {m['generate']:.2f} s"
        f" + interpreter, arguments and exit {m['rest']:.2f} s"
    )
    print(
        f"model load, split (probe, median of {len(probes)}): model code transformers imports on first "
        f"use {p['model code']:.2f} s + weights, tokenizer and decoder {p['weights']:.2f} s"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--runs", type=int, default=7, help="runs of each quick command")
    p.add_argument("--complete-runs", type=int, default=3, help="runs of complete, and of the load probe")
    p.add_argument(
        "--out", type=Path, default=None, help="JSON result file (default: benchmarks/results/NAME.json)"
    )
    args = p.parse_args(argv)
    quick = quick_runs(args.runs)
    splits = complete_runs(args.complete_runs)
    probes = load_probes(args.complete_runs)
    report(quick, splits, probes)
    out = C.write_results("cli_startup", args, {"quick": quick, "complete": splits, "load_probe": probes})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
