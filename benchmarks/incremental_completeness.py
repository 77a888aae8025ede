#!/usr/bin/env python3
"""Incremental completeness: random cuts, then the rest fed in random 1-8 character chunks.

For random files that ``ast.parse`` accepts and random cut points, build
``fim_checker(prefix, "")`` and feed the rest of the file in chunks of random
length (``--min-chunk``..``--max-chunk``). A valid file must never be rejected
on the way (``feed`` returning None) and must be complete at the end. Reports
the rejection rate (per trial and per fed character), the rate of trials that
end not complete, exceptions and timeouts, with examples.

    python benchmarks/incremental_completeness.py --limit 100 --cuts 3 --seed 0
"""

from __future__ import annotations

import random
import sys
import time

import _common as C


def run_file(task) -> dict:
    path, seed = task
    r: dict = {"file": C.rel(path, C.ROOT), "trials": []}
    src = C.valid_source(path, r)
    if src is None:
        return r
    fc = C.engine_setup()
    Unc = C.uncompletable_error()
    rng = random.Random(seed)
    lo, hi = C.OPTS["min_chunk"], C.OPTS["max_chunk"]
    for _ in range(C.OPTS["cuts"]):
        cut = rng.randint(0, len(src))
        t: dict = {"cut": cut, "outcome": "complete", "fed": 0}
        t0 = time.perf_counter()
        try:
            with C.time_limit(C.OPTS["timeout"]):
                try:
                    c = fc.fim_checker(src[:cut], "")
                except Unc as e:
                    t["outcome"] = "prefix-rejected"
                    t["offset"] = getattr(e, "offset", None)
                    t["message"] = str(e)
                    c = None
                t["build_seconds"] = time.perf_counter() - t0
                pos = cut
                while c is not None and pos < len(src):
                    k = rng.randint(lo, hi)
                    piece = src[pos : pos + k]
                    nxt = c.feed(piece)
                    if nxt is None:
                        # locate the exact character inside the chunk
                        for i, ch in enumerate(piece):
                            nxt = c.feed(ch)
                            if nxt is None:
                                pos += i
                                break
                            c = nxt
                        t["outcome"] = "rejected"
                        t["offset"] = pos
                        t["chunk"] = piece
                        c = None
                        break
                    c = nxt
                    pos += len(piece)
                t["fed"] = pos - cut
                if c is not None and not c.is_complete():
                    t["outcome"] = "not-complete"
                    t["offset"] = len(src)
        except C.Timeout:
            t["outcome"] = "timeout"
        except Exception as e:
            t["outcome"] = "exception"
            t["error"] = C.describe_exc(e)
        t["seconds"] = time.perf_counter() - t0
        if "offset" in t and t["offset"] is not None:
            t["line"], t["col"] = C.line_col(src, t["offset"])
            t["context"] = C.context_line(src, t["offset"])
        t["cut_line"], t["cut_col"] = C.line_col(src, cut)
        r["trials"].append(t)
    return r


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=100)
    p.add_argument("--cuts", type=int, default=3, help="random cut points per file")
    p.add_argument("--min-chunk", type=int, default=1)
    p.add_argument("--max-chunk", type=int, default=8)
    p.add_argument("--examples", type=int, default=10, help="failures to print")
    args = p.parse_args(argv)
    if args.max_size is None:
        args.max_size = 100_000
    root, files = C.select_files(args)
    opts = {
        "cuts": args.cuts,
        "min_chunk": args.min_chunk,
        "max_chunk": args.max_chunk,
        "timeout": args.timeout,
    }
    print(
        f"{len(files)} files (≤ {args.max_size:,} chars) under {root}, {args.cuts} cuts each, chunks "
        f"{args.min_chunk}-{args.max_chunk}",
        file=sys.stderr,
    )
    results, wall = C.run_file_pool(run_file, files, args, opts, root, "incremental")
    used = [r for r in results if r["status"] == "ok"]
    trials = [(r, t) for r in used for t in r["trials"]]
    outcomes: dict[str, int] = {}
    for _, t in trials:
        outcomes[t["outcome"]] = outcomes.get(t["outcome"], 0) + 1
    fed = sum(t["fed"] for _, t in trials)
    n = len(trials)
    rows = [[k, v, C.pct(v, n)] for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1])]
    print()
    print(C.table(rows, ["outcome", "trials", "share"], align="lrr"))
    rejected = outcomes.get("rejected", 0) + outcomes.get("prefix-rejected", 0)
    print(
        f"\nfiles used {len(used)} (skipped: {len(results) - len(used)} undecodable or rejected by ast.parse)"
    )
    print(f"trials {n}, characters fed {fed:,}")
    print(
        f"rejection rate {C.pct(rejected, n)} of trials "
        f"({rejected / max(fed, 1) * 1e6:.2f} per million fed chars); "
        f"not complete at end {C.pct(outcomes.get('not-complete', 0), n)}; "
        f"exceptions {outcomes.get('exception', 0)}, timeouts {outcomes.get('timeout', 0)}"
    )
    feed_secs = sum(t["seconds"] - t.get("build_seconds", 0.0) for _, t in trials)
    build_secs = sum(t.get("build_seconds", 0.0) for _, t in trials)
    cut_chars = sum(t["cut"] for _, t in trials)
    print(
        f"engine: {1e6 * feed_secs / max(fed, 1):.1f} µs per fed char, "
        f"{1e3 * build_secs / max(cut_chars / 1000, 1e-9):.1f} ms per 1,000 prefix chars; wall {wall:.1f} s"
    )
    bad = [(r, t) for r, t in trials if t["outcome"] != "complete"]
    if bad:
        print(f"\nexamples ({min(len(bad), args.examples)} of {len(bad)}):")
        for r, t in bad[: args.examples]:
            loc = f"{r['file']}:{t.get('line', '?')}:{t.get('col', '?')}"
            extra = t.get("error") or t.get("context") or t.get("message") or ""
            print(f"  {loc}: {t['outcome']} (cut at {t['cut_line']}:{t['cut_col']}): {extra}")
    out = C.write_results(
        "incremental_completeness",
        args,
        {
            "summary": {
                "files": len(used),
                "trials": n,
                "fed_chars": fed,
                "outcomes": outcomes,
                "rejection_rate": rejected / n if n else None,
                "not_complete_rate": outcomes.get("not-complete", 0) / n if n else None,
                "wall_seconds": wall,
            },
            "failures": [{"file": r["file"], **t} for r, t in bad],
        },
    )
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
