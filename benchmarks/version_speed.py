#!/usr/bin/env python3
"""Does the versioned grammar cost speed? The same code at two target versions, one run.

For standard-library files that both versions accept, in one process and interleaved (so the
machine's load falls on both alike): the cold build of ``fim_checker(text, "")`` in ms per
1,000 characters, and ``feed`` one character at a time (the first ``--char-cap``
characters) in µs per character, at ``--new`` (default 3.14: PEP 701 f-string modes, type
parameters, t-strings) and ``--old`` (default 3.11). Prints per-file figures, the totals and
the ratio new / old (target ≤ 1.10). Timings are thread CPU time, best of ``--repeat``.

    python benchmarks/version_speed.py --limit 30 --seed 0
"""

from __future__ import annotations

import _common as C

TARGET_RATIO = 1.10


def build(fc, text: str, version: str):
    fc.clear_caches()  # a cold build: fim_checker would otherwise resume from cached checkpoints
    checker = fc.fim_checker(text, "", python_version=version)
    return checker.is_complete()


def feed_chars(fc, text: str, version: str):
    checker = fc.fim_checker("", "", python_version=version)
    for ch in text:
        checker = checker.feed(ch)
    return checker is not None


def best_cpu(func, *args, repeat: int) -> float:
    """Lowest thread CPU time of ``repeat`` calls, in µs."""
    return min(C.timed(func, *args)[1] for _ in range(repeat))


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=30, workers=False)
    p.add_argument("--new", default="3.14", help="target version measured")
    p.add_argument("--old", default="3.11", help="baseline target version")
    p.add_argument("--char-cap", type=int, default=4_000, help="characters fed one at a time per file")
    p.add_argument("--repeat", type=int, default=3, help="best of N timings")
    args = p.parse_args(argv)
    fc = C.engine_setup()
    root, files = C.select_files(args)
    versions = (args.new, args.old)
    for version in versions:  # grammar tables and lexer states outside the timings
        build(fc, "import os\nx = f'{os.sep!r:>{3}}'\n", version)

    totals = {v: {"build_us": 0.0, "chars": 0, "feed_us": 0.0, "fed": 0} for v in versions}
    rows, records = [], []
    for path in C.progress(files, desc="files", disable=args.no_progress):
        record = {"file": C.rel(path, root)}
        text = C.valid_source(path, record)
        if text is None or len(text) < 200 or not all(feed_chars(fc, text[:200], v) for v in versions):
            continue
        head = text[: args.char_cap]
        for version in versions:
            record[version] = {
                "build_ms_per_1k": best_cpu(build, fc, text, version, repeat=args.repeat) / len(text),
                "feed_us_per_char": best_cpu(feed_chars, fc, head, version, repeat=args.repeat) / len(head),
            }
            totals[version]["build_us"] += record[version]["build_ms_per_1k"] * len(text)
            totals[version]["chars"] += len(text)
            totals[version]["feed_us"] += record[version]["feed_us_per_char"] * len(head)
            totals[version]["fed"] += len(head)
        records.append(record)
        rows.append(
            [record["file"], len(text)]
            + [record[v][k] for k in ("build_ms_per_1k", "feed_us_per_char") for v in versions]
        )

    new, old = (totals[v] for v in versions)
    if not records:
        print("no file accepted at both versions")
        return 1
    build_ratio = (new["build_us"] / new["chars"]) / (old["build_us"] / old["chars"])
    feed_ratio = (new["feed_us"] / new["fed"]) / (old["feed_us"] / old["fed"])
    headers = (
        ["file", "chars"] + [f"build ms/1k {v}" for v in versions] + [f"feed µs/char {v}" for v in versions]
    )
    print(C.table(rows, headers))
    print()
    print(
        C.table(
            [
                [
                    "build, ms per 1,000 chars",
                    old["build_us"] / old["chars"],
                    new["build_us"] / new["chars"],
                    build_ratio,
                ],
                ["feed, µs per char", old["feed_us"] / old["fed"], new["feed_us"] / new["fed"], feed_ratio],
            ],
            ["all files", args.old, args.new, f"ratio (target ≤ {TARGET_RATIO:.2f})"],
        )
    )
    summary = {
        "files": len(records),
        "build_ratio": build_ratio,
        "feed_ratio": feed_ratio,
        "target_ratio": TARGET_RATIO,
        "totals": totals,
    }
    out = C.write_results("version_speed", args, {"summary": summary, "files": records})
    print(f"\nwrote {out}")
    return 0 if max(build_ratio, feed_ratio) <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
