#!/usr/bin/env python3
"""How the suffix refutation grows with a long single line: the curve, and a dict baseline.

Each case is one line ``x = [e, e, ..., e]`` (or a sum, a tuple, a call, a string of ``n``
pieces) cut mid-line, right after its first element, so the suffix holds the rest of the line:
``fim_checker(prefix, suffix)`` builds, which refutes the suffix's head up front (see
``fimconstrain/engine/quotients/refutation.py``). Every timing is a fresh process (a cold build:
grammar tables are loaded before the clock starts, the infix parse's memo is empty), best of
``--repeat``. In the same run the baseline is a dict display of the same number of elements, the
shape the old exact refutation already handled in linear time. Prints ms per size, µs per
element, the growth against the smallest size (linear growth: about size / smallest) and the
ratio to the dict baseline; the goal is ≤ 50 ms at 300 elements. The refutation reads at most
the head's first ``infix.WINDOW_CHARS`` characters (with layout, ``LAYOUT_WINDOW_CHARS``), so
past those the curve is flat by design, and a suffix with more than ``MAX_READINGS`` quotes of a
kind gets no verdict at all (the string shape).

    python benchmarks/refutation_speed.py --sizes 100 300 1000 3000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import _common as C

GOAL_MS_AT_300 = 50.0

#: shape -> (the text before the cut, one element after the first, the closing text)
SHAPES = {
    "list": ("x = [1, ", "1, ", "1]\n"),
    "sum": ("x = (1 + ", "1 + ", "1)\n"),
    "tuple": ("x = 1, ", "1, ", "1\n"),
    "call": ("f(a, ", "a, ", "a)\n"),
    "string": ("x = ['s', ", "'s', ", "'s']\n"),
    "dict": ("x = {1: 1, ", "1: 1, ", "1: 1}\n"),  # the baseline
}

_CHILD = r"""
import sys, time
import fimconstrain
prefix, suffix = sys.stdin.read().split("\0")
fimconstrain.fim_checker("x = 1", "y = 2\n")  # grammar tables outside the clock
start = time.perf_counter()
fimconstrain.fim_checker(prefix, suffix)
print(time.perf_counter() - start)
"""


def case(shape: str, elements: int) -> tuple[str, str]:
    before, element, closing = SHAPES[shape]
    return before, element * (elements - 2) + closing


def cold_ms(prefix: str, suffix: str, repeat: int) -> float:
    """Best of ``repeat`` fresh-process builds, in ms."""
    best = float("inf")
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=prefix + "\0" + suffix,
            capture_output=True,
            text=True,
            check=True,
        )
        best = min(best, float(done.stdout) * 1000)
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 3000], help="elements per line")
    p.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    p.add_argument("--repeat", type=int, default=3, help="best of N fresh processes")
    p.add_argument(
        "--out", type=Path, default=None, help="JSON result file (default: benchmarks/results/NAME.json)"
    )
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    sizes = sorted(args.sizes)
    shapes = [s for s in args.shapes if s != "dict"] + ["dict"]

    ms = {}
    tasks = [(shape, n) for shape in shapes for n in sizes]
    for shape, n in C.progress(tasks, desc="cases", unit="case", disable=args.no_progress):
        ms[shape, n] = cold_ms(*case(shape, n), args.repeat)

    rows = []
    for shape in shapes:
        for n in sizes:
            t = ms[shape, n]
            rows.append(
                [
                    shape,
                    n,
                    f"{t:.1f}",
                    f"{1000 * t / n:.1f}",
                    f"{t / ms[shape, sizes[0]]:.2f}",
                    f"{n / sizes[0]:.0f}",
                    f"{t / ms['dict', n]:.2f}",
                ]
            )
    print(C.table(rows, ["shape", "elements", "ms", "µs/element", "growth", "linear growth", "vs dict"]))
    at_300 = {shape: ms[shape, 300] for shape in shapes if (shape, 300) in ms}
    if at_300:
        worst = max(at_300, key=at_300.get)
        verdict = "met" if at_300[worst] <= GOAL_MS_AT_300 else "MISSED"
        print(
            f"\nworst at 300 elements: {worst} {at_300[worst]:.1f} ms "
            f"(goal ≤ {GOAL_MS_AT_300:.0f} ms: {verdict})"
        )
    C.write_results("refutation_speed", args, {"ms": {f"{s}/{n}": t for (s, n), t in ms.items()}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
