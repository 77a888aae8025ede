#!/usr/bin/env python3
"""Membership on the standard library: does the engine agree with ast.parse on whole files?

For every ``.py`` file of the running Python's standard library (tests
included, site-packages skipped):

* files ``ast.parse`` accepts must be accepted: ``fim_checker("", "").feed(src)``
  is not None and ``.is_complete()`` is True (completeness);
* files ``ast.parse`` rejects should be rejected (soundness);
* files that are not UTF-8 are listed separately.

Every disagreement, exception and timeout is listed with the file and the
first failing offset (line:col), found by re-feeding in chunks and then one
character at a time from the last good checker.

    python benchmarks/stdlib_membership.py                 # all files, 2 workers
    python benchmarks/stdlib_membership.py --limit 50 --seed 1
    python benchmarks/stdlib_membership.py --mode prefix   # fim_checker(src, "").is_complete()
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _common as C

MODE = "feed"
TIMEOUT = 120.0
ROOT = Path(".")


def check_file(path: Path) -> dict:
    r: dict = {"file": C.rel(path, ROOT)}
    src = C.read_utf8(path)
    if src is None:
        r["status"] = "undecodable"
        return r
    r["chars"] = len(src)
    ok, msg, line = C.ast_verdict(src)
    r["ast_ok"] = ok
    if not ok:
        r["ast_msg"], r["ast_line"] = msg, line
    fc = C.engine_setup()
    t0 = time.perf_counter()
    try:
        with C.time_limit(TIMEOUT):
            if MODE == "prefix":
                try:
                    c = fc.fim_checker(src, "")
                except C.uncompletable_error():
                    c = None
            else:
                c = fc.fim_checker("", "").feed(src)
            ours = c is not None and bool(c.is_complete())
            r["seconds"] = time.perf_counter() - t0
            r["ours_ok"] = ours
            if ok and not ours:
                # completeness failure: where does it go wrong?
                dead, _ = C.first_dead_offset(fc.fim_checker("", ""), src)
                off = len(src) if dead is None else dead
                r["dead_at"] = dead
                r["line"], r["col"] = C.line_col(src, off)
                r["context"] = C.context_line(src, off)
                r["why"] = "rejected while feeding" if dead is not None else "fed fully but not complete at EOF"
    except C.Timeout:
        r["status"] = "timeout"
        r["seconds"] = time.perf_counter() - t0
        return r
    except Exception as e:  # noqa: BLE001
        r["status"] = "exception"
        r["error"] = C.describe_exc(e)
        r["seconds"] = time.perf_counter() - t0
        return r
    if ok:
        r["status"] = "accepted" if ours else "false-reject"
    else:
        r["status"] = "rejected" if not ours else "false-accept"
    return r


def _init(mode: str, timeout: float, root: Path):
    global MODE, TIMEOUT, ROOT
    MODE, TIMEOUT, ROOT = mode, timeout, root
    C.engine_setup()


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=None)
    p.add_argument("--mode", choices=["feed", "prefix"], default="feed",
                   help="feed: fim_checker('', '').feed(src); prefix: fim_checker(src, '')")
    args = p.parse_args(argv)
    root, files = C.select_files(args)
    print(f"{len(files)} files under {root} (mode {args.mode}, {args.workers} workers, {args.timeout:g} s per file)", file=sys.stderr)

    t0 = time.perf_counter()
    results = list(C.run_pool(check_file, files, workers=args.workers, desc="membership", disable=args.no_progress,
                              init=lambda: _init(args.mode, args.timeout, root)))
    wall = time.perf_counter() - t0
    results.sort(key=lambda r: r["file"])

    def count(status, ast_ok=None):
        return sum(1 for r in results if r["status"] == status and (ast_ok is None or r.get("ast_ok") == ast_ok))

    acc = [r for r in results if r.get("ast_ok") is True]
    rej = [r for r in results if r.get("ast_ok") is False]
    rows = [
        ["ast.parse accepts", len(acc), count("accepted"), count("false-reject"), count("exception", True), count("timeout", True)],
        ["ast.parse rejects", len(rej), count("rejected"), count("false-accept"), count("exception", False), count("timeout", False)],
    ]
    print()
    print(C.table(rows, ["files", "n", "agree", "disagree", "exception", "timeout"]))
    undec = [r for r in results if r["status"] == "undecodable"]
    chars = sum(r.get("chars", 0) for r in results if "seconds" in r)
    secs = sum(r.get("seconds", 0.0) for r in results)
    print(f"\nundecodable (not UTF-8): {len(undec)}")
    for r in undec:
        print(f"  {r['file']}")
    print(f"completeness: {count('accepted')}/{len(acc)} accepted ({C.pct(count('accepted'), len(acc))}); "
          f"soundness on whole files: {count('rejected')}/{len(rej)} rejected")
    print(f"engine time {secs:.1f} s for {chars:,} chars ({1e6 * secs / max(chars, 1):.1f} µs/char); wall {wall:.1f} s")

    bad = [r for r in results if r["status"] in ("false-reject", "false-accept", "exception", "timeout")]
    if bad:
        print(f"\nexceptions to the expected verdict ({len(bad)}):")
        for r in bad:
            if r["status"] == "false-reject":
                print(f"  {r['file']}:{r['line']}:{r['col']}: FALSE REJECT ({r['why']}): {r['context']}")
            elif r["status"] == "false-accept":
                print(f"  {r['file']}:{r.get('ast_line')}: FALSE ACCEPT (ast.parse: {r.get('ast_msg')})")
            elif r["status"] == "exception":
                print(f"  {r['file']}: EXCEPTION {r['error']}")
            else:
                print(f"  {r['file']}: TIMEOUT after {r['seconds']:.0f} s ({r.get('chars', 0):,} chars)")
    out = C.write_results("stdlib_membership", args, {
        "summary": {
            "files": len(results), "ast_accepts": len(acc), "ast_rejects": len(rej), "undecodable": len(undec),
            "accepted": count("accepted"), "false_reject": count("false-reject"),
            "rejected": count("rejected"), "false_accept": count("false-accept"),
            "exceptions": count("exception"), "timeouts": count("timeout"),
            "engine_seconds": secs, "wall_seconds": wall, "chars": chars,
        },
        "problems": bad,
        "undecodable": [r["file"] for r in undec],
        "files": results,
    })
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
