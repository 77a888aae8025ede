#!/usr/bin/env python3
"""Version differential: the engine at each target version against that version's interpreter.

For every version 3.8 .. 3.14 that has an interpreter (``benchmarks/oracles.py``), the cases
are that interpreter's own syntax test cases (``benchmarks/syntax_cases.py``: string constants,
doctest snippets and whole files from its Lib/test; 3.13's for a 3.14 without Lib/test) plus the
hand-written corpus ``benchmarks/data/modern_snippets.txt``. Each case is judged by

* the oracle: that version's ``ast.parse(src)`` (cached under benchmarks/results/oracle_cache/);
* the engine: ``fim_checker("", "", python_version=v).feed(src)`` is not None and
  ``.is_complete()``.

Per version it reports completeness (oracle accepts → engine accepts; target >= 99.9%) and
soundness (oracle rejects → engine rejects; target >= 99.5%), with counts; an exception or a
timeout counts against the engine on either side. Every disagreement goes to the JSON result
(``benchmarks/results/version_differential.json``), the first ``--show`` per version are printed
with their text, and the disagreements are grouped into categories (the test file or the
snippet family they come from; for false accepts also ast.parse's message).

    python benchmarks/version_differential.py                      # every version found, 2 workers
    python benchmarks/version_differential.py 3.12 3.14 --show 30
    python benchmarks/version_differential.py --snippets-only --limit 200 --seed 1
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

import _common as C
import oracles
import syntax_cases

TIMEOUT = 20.0


# ---------------------------------------------------------------- engine side


def engine_verdict(version: str, src: str) -> bool:
    """The engine's verdict on a whole source at ``version`` (feed, then is_complete)."""
    import fimconstrain

    c = fimconstrain.fim_checker("", "", python_version=version).feed(src)
    return c is not None and bool(c.is_complete())


def check_batch(batch: list) -> list[dict]:
    """``[(version, index, src, oracle_ok), ...]`` → one record per case."""
    fc = C.engine_setup()
    out = []
    for version, index, src, oracle_ok in batch:
        r: dict = {"version": version, "index": index}
        t0 = time.perf_counter()
        try:
            with C.time_limit(TIMEOUT):
                ours = engine_verdict(version, src)
                r["ours"] = ours
                if oracle_ok and not ours:
                    try:
                        dead, _ = C.first_dead_offset(fc.fim_checker("", "", python_version=version), src)
                    except Exception:
                        dead = None
                    r.update(C.where_rejected(src, dead))
            r["status"] = (
                ("accepted" if ours else "false-reject")
                if oracle_ok
                else ("false-accept" if ours else "rejected")
            )
        except C.Timeout:
            r["status"] = "timeout"
        except Exception as e:
            r["status"] = "exception"
            r["error"] = C.describe_exc(e)
        r["seconds"] = time.perf_counter() - t0
        out.append(r)
    return out


def _init(timeout: float):
    global TIMEOUT
    TIMEOUT = timeout
    C.engine_setup()


# ---------------------------------------------------------------- categories


def family(origin: str) -> str:
    """'snippet:fstring-nested-4' → 'snippet:fstring'; '3.12:test_syntax.py:doctest' → 'test_syntax.py'."""
    if origin.startswith("snippet:"):
        name = origin.split(":", 1)[1]
        for long in (
            "type-params",
            "type-param",
            "type-statement",
            "type-alias",
            "except-star",
            "except-unparenthesised",
        ):
            if name.startswith(long):
                return "snippet:" + long
        return "snippet:" + name.split("-")[0]
    parts = origin.split(":")
    return parts[1] if len(parts) > 1 else origin


def oracle_message_kind(msg: str | None) -> str:
    return re.sub(r" \(line \d+\)$", "", msg or "?")


# ---------------------------------------------------------------- main


def load(version: str, *, limit: int | None, seed: int, with_tests: bool, with_snippets: bool):
    cases = []
    if with_tests:
        try:
            cases += syntax_cases.test_cases(version)
        except oracles.OracleMissing as e:
            print(f"{version}: no test cases ({e})", file=sys.stderr)
    cases = C.sample(cases, limit, seed)
    if with_snippets:
        cases += syntax_cases.snippets()
    return syntax_cases._dedupe(cases)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument(
        "versions", nargs="*", default=list(oracles.VERSIONS), help="versions to check (default: all found)"
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (sampling)")
    p.add_argument(
        "--limit", type=int, default=None, help="sample N test cases per version (the snippets always all)"
    )
    p.add_argument("--snippets-only", action="store_true", help="only the hand-written corpus")
    p.add_argument("--tests-only", action="store_true", help="only the interpreters' test cases")
    p.add_argument("--workers", type=int, default=2, help="worker processes")
    p.add_argument("--timeout", type=float, default=20.0, help="per-case time limit in seconds")
    p.add_argument("--batch", type=int, default=40, help="cases per worker task")
    p.add_argument("--show", type=int, default=10, help="print the first N disagreements per version")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON result file (default: benchmarks/results/version_differential.json)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = p.parse_args(argv)

    versions, missing = [], {}
    for v in args.versions:
        v = oracles.norm_version(v)
        try:
            print(f"{v}: {oracles.find(v).describe()}", file=sys.stderr)
            versions.append(v)
        except oracles.OracleMissing as e:
            missing[v] = str(e)
            print(f"{v}: SKIPPED: {e}", file=sys.stderr)

    per_version, tasks = {}, []
    for v in versions:
        cases = load(
            v,
            limit=args.limit,
            seed=args.seed,
            with_tests=not args.snippets_only,
            with_snippets=not args.tests_only,
        )
        t0 = time.perf_counter()
        verdicts = oracles.details(v, [c.src for c in cases])
        print(f"{v}: {len(cases)} cases, oracle {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        per_version[v] = (cases, verdicts)
        items = [(v, i, c.src, ok) for i, (c, (ok, _)) in enumerate(zip(cases, verdicts))]
        tasks += [items[k : k + args.batch] for k in range(0, len(items), args.batch)]

    t0 = time.perf_counter()
    records: dict[str, list] = {v: [None] * len(per_version[v][0]) for v in versions}
    for batch in C.run_pool(
        check_batch,
        tasks,
        workers=args.workers,
        desc="differential",
        disable=args.no_progress,
        unit="batch",
        init=lambda: _init(args.timeout),
    ):
        for r in batch:
            records[r["version"]][r["index"]] = r
    wall = time.perf_counter() - t0

    rows, summary, disagreements = [], {}, {}
    for v in versions:
        cases, verdicts = per_version[v]
        recs = records[v]
        acc = [i for i, (ok, _) in enumerate(verdicts) if ok]
        rej = [i for i, (ok, _) in enumerate(verdicts) if not ok]
        good_acc = sum(1 for i in acc if recs[i]["status"] == "accepted")
        good_rej = sum(1 for i in rej if recs[i]["status"] == "rejected")
        errors = sum(1 for r in recs if r["status"] in ("exception", "timeout"))
        rows.append(
            [
                v,
                len(cases),
                len(acc),
                good_acc,
                C.pct(good_acc, len(acc)),
                len(rej),
                good_rej,
                C.pct(good_rej, len(rej)),
                errors,
            ]
        )
        bad = []
        for i, r in enumerate(recs):
            if r["status"] in ("accepted", "rejected"):
                continue
            ok, msg = verdicts[i]
            bad.append(
                {
                    **r,
                    "oracle": ok,
                    "oracle_msg": msg,
                    "origin": cases[i].origin,
                    "family": family(cases[i].origin),
                    "src": cases[i].src,
                }
            )
        disagreements[v] = bad
        summary[v] = {
            "interpreter": oracles.find(v).describe(),
            "cases": len(cases),
            "oracle_accepts": len(acc),
            "engine_accepts_of_those": good_acc,
            "completeness": good_acc / len(acc) if acc else None,
            "oracle_rejects": len(rej),
            "engine_rejects_of_those": good_rej,
            "soundness": good_rej / len(rej) if rej else None,
            "exceptions_or_timeouts": errors,
            "false_reject_families": Counter(b["family"] for b in bad if b["oracle"]).most_common(),
            "false_accept_families": Counter(b["family"] for b in bad if not b["oracle"]).most_common(),
            "false_accept_messages": Counter(
                oracle_message_kind(b["oracle_msg"]) for b in bad if not b["oracle"]
            ).most_common(),
        }

    for v in versions:
        bad = disagreements[v]
        if not bad:
            continue
        print(f"\n== {v}: {len(bad)} disagreements (first {min(args.show, len(bad))})")
        for b in bad[: args.show]:
            text = b["src"] if len(b["src"]) <= 300 else b["src"][:300] + "…"
            if b["status"] == "false-reject":
                head = f"FALSE REJECT at {b['line']}:{b['col']} ({b['why']}): {b['context']}"
            elif b["status"] == "false-accept":
                head = f"FALSE ACCEPT (ast.parse: {b['oracle_msg']})"
            else:
                verdict = "accepts" if b["oracle"] else "rejects"
                head = f"{b['status'].upper()} (oracle {verdict}) {b.get('error', '')}"
            print(f"  [{b['origin']}] {head}\n      {text!r}")
        s = summary[v]
        print(
            "  false rejects by family: " + ", ".join(f"{k} {n}" for k, n in s["false_reject_families"][:8])
        )
        print(
            "  false accepts by family: " + ", ".join(f"{k} {n}" for k, n in s["false_accept_families"][:8])
        )
    print()
    print(
        C.table(
            rows,
            [
                "version",
                "cases",
                "oracle ok",
                "we accept",
                "completeness",
                "oracle rejects",
                "we reject",
                "soundness",
                "exc/timeout",
            ],
            align="lrrrrrrrr",
        )
    )
    for v, why in missing.items():
        print(f"{v}: skipped ({why})")
    print(f"engine wall {wall:.1f} s ({args.workers} workers)")
    out = C.write_results(
        "version_differential",
        args,
        {
            "targets": {"completeness": 0.999, "soundness": 0.995},
            "summary": summary,
            "missing": missing,
            "wall_seconds": wall,
            "disagreements": disagreements,
        },
    )
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
