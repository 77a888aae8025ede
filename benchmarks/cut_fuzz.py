#!/usr/bin/env python3
"""The cut fuzzer, long run: N cases per category; the engine must agree with ast.parse.

Each case is a file cut at two places into prefix / middle / suffix (see
``tests/engine/cut_fuzz.py``): a standard-library file after one validity-preserving
transform (one category per transform), after none ('plain') or after several
('combined'); or a generated snippet, as is ('snippets_valid') or mutated
('snippets_mutated'). Prints a table (cases, valid / invalid files,
disagreements, slow cases) and every disagreement, minimised; exits 1 when
there are disagreements. Cases are reproducible: case k of category C under
``--seed S`` is ``case_in_category(C, random.Random(f"S:C:k"))``.

    python benchmarks/cut_fuzz.py --examples 200
    python benchmarks/cut_fuzz.py --examples 2000 --categories backslashes,combined --seed 3
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict

import _common as C

cf = C.cut_fuzz_module()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--examples", type=int, default=200, help="cases per category")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-bytes", type=int, default=6000, help="largest stdlib file sampled")
    p.add_argument("--files", type=int, default=160, help="stdlib files in the sample")
    p.add_argument(
        "--categories",
        default=",".join(cf.CATEGORIES),
        help="comma-separated subset of: " + ", ".join(cf.CATEGORIES),
    )
    p.add_argument("--slow", type=float, default=2.0, help="report a case slower than this (s) as slow")
    p.add_argument("--timeout", type=float, default=30.0, help="give up on one case after this (s)")
    p.add_argument(
        "--minimise", type=float, default=10.0, help="seconds to minimise each disagreement (0: off)"
    )
    p.add_argument("--max-minimise", type=int, default=60, help="minimise at most this many disagreements")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)

    cats = [c.strip() for c in args.categories.split(",") if c.strip()]
    unknown = [c for c in cats if c not in cf.CATEGORIES]
    if unknown:
        p.error(f"unknown categories {unknown}; choose from {cf.CATEGORIES}")
    C.engine_setup()
    files = cf.stdlib_sample(args.files, args.max_bytes)
    print(
        f"{len(files)} stdlib files <= {args.max_bytes} bytes; "
        f"{args.examples} cases x {len(cats)} categories; "
        f"seed {args.seed}; Python {sys.version.split()[0]}",
        file=sys.stderr,
    )

    tally = cf.Tally(slow_after=args.slow)
    found: list[tuple[str, str, cf.Case]] = []  # (category, message, case)
    slow: list[tuple[str, float, str, cf.Case]] = []
    t_start = time.monotonic()
    bar = C.progress(
        None, total=args.examples * len(cats), desc="cut fuzz", disable=args.no_progress, unit="case"
    )
    for cat in cats:
        for k in range(args.examples):
            case = cf.case_in_category(cat, random.Random(f"{args.seed}:{cat}:{k}"), files)
            case.origin += f" [case {args.seed}:{cat}:{k}]"
            t0 = time.perf_counter()
            try:
                # a Timeout (BaseException) passes cut_fuzz's crash handler (except Exception)
                with C.time_limit(args.timeout, "the case"):
                    before = len(tally.messages)
                    msg = cf.check(*case.triple(), stats=tally, category=cat)
                if msg:
                    found.append((cat, tally.messages[before][1], case))
            except C.Timeout:
                tally.add(cat, cf.ast_ok(case.text), None, args.timeout + 1)
            dt = time.perf_counter() - t0
            if dt > args.slow:
                slow.append((cat, dt, "timeout" if dt >= args.timeout else "slow", case))
            bar.update(1)
            if found or slow:
                bar.set_postfix(disagreements=len(found), slow=len(slow))
    bar.close()
    elapsed = time.monotonic() - t_start

    # ------------------------------------------------ the table
    rows = []
    for cat in cats:
        c = tally.counts[cat]
        rows.append([cat, c["cases"], c["valid"], c["invalid"], c["disagreements"], c["slow"]])
    rows.append(["total", *(sum(r[i] for r in rows) for i in range(1, 6))])
    print()
    print(C.table(rows, ["category", "cases", "valid files", "invalid files", "disagreements", "slow"]))
    print(f"\n{elapsed:.1f} s ({1000 * elapsed / max(tally.total('cases'), 1):.1f} ms/case)")

    # ------------------------------------------------ slow cases
    if slow:
        print(f"\nslow cases (> {args.slow:g} s): {len(slow)}")
        for cat, dt, what, case in slow:
            print(
                f"  [{cat}] {what} {dt:.1f} s  {case.origin}\n    {cf._short(case.prefix, 160)}, "
                f"{cf._short(case.middle, 160)}, {cf._short(case.suffix, 160)}"
            )

    # ------------------------------------------------ disagreements, minimised and grouped
    if found:
        print(f"\ndisagreements: {len(found)}")
        groups: dict[str, dict] = defaultdict(dict)  # kind -> repro -> [(category, case)]
        for n, (cat, msg, case) in enumerate(found):
            small = None
            if args.minimise > 0 and n < args.max_minimise:
                try:
                    with C.time_limit(args.minimise + args.timeout, "minimising"):
                        small = cf.minimise(*case.triple(), budget=args.minimise)
                except C.Timeout:
                    pass
            if small is not None:
                repro = f"minimised: {small!r}"
            else:
                repro = "(" + ", ".join(cf._short(x, 200) for x in case.triple()) + ")"
            groups[cf.kind_of(msg)].setdefault(repro, []).append((cat, case))
        for kind, repros in sorted(groups.items()):
            print(f"\n== {kind} ({len(repros)} distinct)")
            for repro, hits in repros.items():
                cat, case = hits[0]
                more = f" (+{len(hits) - 1} more with this repro)" if len(hits) > 1 else ""
                print(f"  [{cat}] {case.origin}{more}\n    {repro}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
