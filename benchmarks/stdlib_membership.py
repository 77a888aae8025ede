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

With ``--python-version V`` (3.8 .. 3.14) it checks version V's own standard library (pyenv's
``lib/python3.X``, or pyodide's ``python_stdlib.zip`` for 3.14; see ``benchmarks/oracles.py``) with
the engine targeting V (``fim_checker(..., python_version=V)``), and the verdicts come from V's
interpreter rather than the running one (``--root`` then is ignored):

    python benchmarks/stdlib_membership.py --python-version 3.14 --limit 100
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _common as C
import oracles

MODE = "feed"
TIMEOUT = 120.0
ROOT = Path(".")
VERSION = None  # None: the engine's default target, verdicts from the running interpreter


def check_file(task) -> dict:
    """``task``: a file (verdict from the running ast.parse), or ``(name, src or None, (ok, msg,
    line))`` with the verdict of ``VERSION``'s interpreter."""
    if isinstance(task, tuple):
        name, src, verdict = task
        r: dict = {"file": name}
    else:
        r = {"file": C.rel(task, ROOT)}
        src = C.read_utf8(task)
        verdict = None
    if src is None:
        r["status"] = "undecodable"
        return r
    r["chars"] = len(src)
    ok, msg, line = verdict if verdict is not None else C.ast_verdict(src)
    r["ast_ok"] = ok
    if not ok:
        r["ast_msg"], r["ast_line"] = msg, line
    fc = C.engine_setup()
    kw = {} if VERSION is None else {"python_version": VERSION}
    t0 = time.perf_counter()
    try:
        with C.time_limit(TIMEOUT):
            if MODE == "prefix":
                try:
                    c = fc.fim_checker(src, "", **kw)
                except C.uncompletable_error():
                    c = None
            else:
                c = fc.fim_checker("", "", **kw).feed(src)
            ours = c is not None and bool(c.is_complete())
            r["seconds"] = time.perf_counter() - t0
            r["ours_ok"] = ours
            if ok and not ours:
                # completeness failure: where does it go wrong?
                dead, _ = C.first_dead_offset(fc.fim_checker("", "", **kw), src)
                r.update(C.where_rejected(src, dead))
    except C.Timeout:
        r["status"] = "timeout"
        r["seconds"] = time.perf_counter() - t0
        return r
    except Exception as e:
        r["status"] = "exception"
        r["error"] = C.describe_exc(e)
        r["seconds"] = time.perf_counter() - t0
        return r
    if ok:
        r["status"] = "accepted" if ours else "false-reject"
    else:
        r["status"] = "rejected" if not ours else "false-accept"
    return r


def _init(mode: str, timeout: float, root: Path, version=None):
    global MODE, TIMEOUT, ROOT, VERSION
    MODE, TIMEOUT, ROOT, VERSION = mode, timeout, root, version
    C.engine_setup()


def version_tasks(args) -> tuple[str, list[tuple]]:
    """``(where, tasks)`` for ``--python-version``: V's own standard library, sampled like
    ``select_files``, each decodable file with V's interpreter's verdict."""
    v = oracles.norm_version(args.python_version)
    where = str(oracles.stdlib_location(v))
    files = []
    for name, data in oracles.stdlib_sources(v):
        try:
            src = data.decode("utf-8")
        except UnicodeDecodeError:
            src = None
        if args.max_size is not None and (src is None or len(src) > args.max_size):
            continue
        files.append((name, src))
    files = C.sample(files, args.limit, args.seed)
    decodable = [src for _, src in files if src is not None]
    verdicts = iter(oracles.details(v, decodable))
    tasks = []
    for name, src in files:
        if src is None:
            tasks.append((name, None, None))
            continue
        ok, msg = next(verdicts)
        line = None
        if msg and "(line " in msg:
            try:
                line = int(msg.rsplit("(line ", 1)[1].rstrip(")"))
            except ValueError:
                pass
        tasks.append((name, src, (ok, msg, line)))
    return where, tasks


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=None)
    p.add_argument(
        "--mode",
        choices=["feed", "prefix"],
        default="feed",
        help="feed: fim_checker('', '').feed(src); prefix: fim_checker(src, '')",
    )
    p.add_argument(
        "--python-version",
        default=None,
        metavar="V",
        help="check version V's own standard library at V, verdicts from V's interpreter (3.8 .. 3.14)",
    )
    args = p.parse_args(argv)
    version = None
    if args.python_version:
        version = oracles.norm_version(args.python_version)
        try:
            where, files = version_tasks(args)
        except oracles.OracleMissing as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        root = Path(where)
        print(f"Python {version}: {oracles.find(version).describe()}", file=sys.stderr)
    else:
        root, files = C.select_files(args)
    print(
        f"{len(files)} files under {root} "
        f"(mode {args.mode}, {args.workers} workers, {args.timeout:g} s per file)",
        file=sys.stderr,
    )

    t0 = time.perf_counter()
    results = list(
        C.run_pool(
            check_file,
            files,
            workers=args.workers,
            desc="membership",
            disable=args.no_progress,
            init=lambda: _init(args.mode, args.timeout, root, version),
        )
    )
    wall = time.perf_counter() - t0
    results.sort(key=lambda r: r["file"])

    def count(status, ast_ok=None):
        return sum(
            1 for r in results if r["status"] == status and (ast_ok is None or r.get("ast_ok") == ast_ok)
        )

    acc = [r for r in results if r.get("ast_ok") is True]
    rej = [r for r in results if r.get("ast_ok") is False]
    rows = [
        [
            "ast.parse accepts",
            len(acc),
            count("accepted"),
            count("false-reject"),
            count("exception", True),
            count("timeout", True),
        ],
        [
            "ast.parse rejects",
            len(rej),
            count("rejected"),
            count("false-accept"),
            count("exception", False),
            count("timeout", False),
        ],
    ]
    print()
    print(C.table(rows, ["files", "n", "agree", "disagree", "exception", "timeout"]))
    undec = [r for r in results if r["status"] == "undecodable"]
    chars = sum(r.get("chars", 0) for r in results if "seconds" in r)
    secs = sum(r.get("seconds", 0.0) for r in results)
    print(f"\nundecodable (not UTF-8): {len(undec)}")
    for r in undec:
        print(f"  {r['file']}")
    print(
        f"completeness: {count('accepted')}/{len(acc)} accepted ({C.pct(count('accepted'), len(acc))}); "
        f"soundness on whole files: {count('rejected')}/{len(rej)} rejected"
    )
    print(
        f"engine time {secs:.1f} s for {chars:,} chars "
        f"({1e6 * secs / max(chars, 1):.1f} µs/char); wall {wall:.1f} s"
    )

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
    name = "stdlib_membership" if version is None else f"stdlib_membership_{version}"
    out = C.write_results(
        name,
        args,
        {
            "python_version": version,
            "oracle": oracles.find(version).describe()
            if version
            else f"running interpreter {sys.version.split()[0]}",
            "summary": {
                "files": len(results),
                "ast_accepts": len(acc),
                "ast_rejects": len(rej),
                "undecodable": len(undec),
                "accepted": count("accepted"),
                "false_reject": count("false-reject"),
                "rejected": count("rejected"),
                "false_accept": count("false-accept"),
                "exceptions": count("exception"),
                "timeouts": count("timeout"),
                "engine_seconds": secs,
                "wall_seconds": wall,
                "chars": chars,
            },
            "problems": bad,
            "undecodable": [r["file"] for r in undec],
            "files": results,
        },
    )
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
