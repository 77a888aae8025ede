#!/usr/bin/env python3
"""Run one benchmark script at a baseline git revision and at the working tree, in one run.

The baseline is checked out into a temporary git worktree; the script then runs alternately
(baseline, current, baseline, current, ... ``--rounds`` times) with ``PYTHONPATH`` pointing
at each tree, so both see the same machine load; where the working tree runs the compiled engine, the
baseline's is compiled first. Each run's output goes to the terminal under
a header, and its JSON result (the script's ``--out``) is kept under
``benchmarks/results/ab/<script>.<side>.<round>.json`` for side-by-side reading.

    python benchmarks/ab.py --baseline a86cb30 fim_speed.py -- --per-bucket 3 --seed 0

With ``--same-script`` both sides run the working tree's script (for a benchmark the baseline
does not have; it must use only what both packages offer).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def run(tree: Path, script: Path, args: list[str], out: Path) -> int:
    """Run the benchmark ``script`` against ``tree``'s package, in ``tree``: a process it starts
    with ``python -m`` (the names guide's jedi worker) imports the package of the folder it runs
    in. An argument naming a path of this checkout is made absolute, so it means the same on
    both sides."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    absolute = [str(REPO / arg) if (REPO / arg).exists() else arg for arg in args]
    command = [sys.executable, str(script), *absolute, "--out", str(out)]
    return subprocess.run(command, cwd=tree, env=env).returncode


def _own_grammars(tree: Path) -> None:
    """Make ``tree``'s package read ``tree``'s grammars: installed, ``fimconstrain.grammars`` maps
    to the working tree's ``grammars/``, which a baseline's layers may not match."""
    link = tree / "fimconstrain" / "grammars"
    if not link.exists():
        link.symlink_to(tree / "grammars", target_is_directory=True)


def _own_engine(tree: Path) -> None:
    """Compile ``tree``'s engine in place where the working tree runs a compiled one, so that both
    sides run the same kind of engine (a new worktree has no build: it would run the sources)."""
    if not any((REPO / "fimconstrain" / "engine").rglob("*.so")):
        return
    print("ab: compiling the baseline's engine (about a minute)", file=sys.stderr, flush=True)
    build = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    subprocess.run(build, cwd=tree, check=True, stdout=subprocess.DEVNULL)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--baseline", required=True, help="git revision to compare against (e.g. a commit or main~3)"
    )
    p.add_argument("--rounds", type=int, default=1, help="alternating runs per side")
    p.add_argument(
        "--same-script",
        action="store_true",
        help="run the working tree's script on both sides (a benchmark newer than the baseline)",
    )
    p.add_argument("script", help="a script in benchmarks/ that takes --out")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments, after --")
    args = p.parse_args(argv)
    script_args = args.args[1:] if args.args[:1] == ["--"] else args.args
    results = HERE / "results" / "ab"
    results.mkdir(parents=True, exist_ok=True)
    status = 0
    with tempfile.TemporaryDirectory(prefix="fimconstrain-ab-") as scratch:
        baseline = Path(scratch) / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(baseline), args.baseline], cwd=REPO, check=True
        )
        _own_grammars(baseline)
        _own_engine(baseline)
        try:
            for round_ in range(1, args.rounds + 1):
                for side, tree in (("baseline", baseline), ("current", REPO)):
                    label = args.baseline if side == "baseline" else "working tree"
                    print(f"\n===== {args.script} · {side} ({label}) · round {round_} =====", flush=True)
                    out = results / f"{Path(args.script).stem}.{side}.{round_}.json"
                    script = (REPO if args.same_script else tree) / "benchmarks" / args.script
                    status |= run(tree, script, script_args, out)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=REPO, check=False)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
