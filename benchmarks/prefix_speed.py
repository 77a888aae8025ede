#!/usr/bin/env python3
"""Prefix-path speed on standard-library files of varied sizes, against ast.parse in the same run.

For each file (valid for ast.parse), in one process:

(a) µs per fed character when feeding the whole file to ``fim_checker("", "")``
    in chunks of ``--chunk`` characters (about one token) and one character at
    a time (the first ``--char-cap`` characters);
(b) ms per 1,000 characters to build ``fim_checker(prefix, "")`` from the whole
    file as a prefix, plus ``feed("")`` and ``is_complete()`` so that lazy work
    is counted;
(c) ``ast.parse`` of the same text, as a baseline, and the ratios.

Targets printed beside the figures: ≤ 50 µs per fed character, ≤ 30 ms per
1,000 prefix characters. Timings are the best of ``--repeat`` runs.

    python benchmarks/prefix_speed.py --per-bucket 3 --seed 0
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import warnings

import _common as C

BUCKETS = [(500, 2_000), (2_000, 8_000), (8_000, 32_000), (32_000, 128_000)]
TARGET_FEED_US = 50.0
TARGET_PREFIX_MS = 30.0


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def feed_chunks(fc, text: str, k: int):
    c = fc.fim_checker("", "")
    for i in range(0, len(text), k):
        c = c.feed(text[i : i + k])
        if c is None:
            raise RuntimeError(f"rejected at chunk starting {i}")
    return c


def build_prefix(fc, text: str):
    fc.clear_caches()  # a cold build: fim_checker would otherwise resume from cached checkpoints
    c = fc.fim_checker(text, "")
    c.feed("")
    c.is_complete()
    return c


def ast_parse(text: str):
    import ast

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ast.parse(text)


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=None, workers=False)
    p.add_argument(
        "--per-bucket",
        type=int,
        default=3,
        help="files per size bucket " + ", ".join(f"{a:,}-{b:,}" for a, b in BUCKETS),
    )
    p.add_argument("--chunk", type=int, default=4, help="chunk size for (a)")
    p.add_argument("--char-cap", type=int, default=20_000, help="characters fed one at a time per file")
    p.add_argument("--repeat", type=int, default=1, help="best of N timings")
    args = p.parse_args(argv)
    fc = C.engine_setup()
    import random

    root = (args.root or C.stdlib_root()).resolve()
    files = C.list_py_files(root)
    rng = random.Random(args.seed)
    chosen = []
    by_bucket: dict = {b: [] for b in BUCKETS}
    for f in files:
        size = f.stat().st_size
        for lo, hi in BUCKETS:
            if lo <= size < hi:
                by_bucket[(lo, hi)].append(f)
    for b in BUCKETS:
        pool = by_bucket[b]
        rng.shuffle(pool)
        n = 0
        for f in pool:
            if n >= args.per_bucket:
                break
            text = C.read_utf8(f)
            if text is None or not C.ast_verdict(text)[0]:
                continue
            if args.max_size is not None and len(text) > args.max_size:
                continue
            chosen.append((f, text))
            n += 1
    if args.limit is not None:
        chosen = C.sample(chosen, args.limit, args.seed)
    # warm-up (grammar loading, caches) outside the timings
    build_prefix(fc, "import os\n")
    feed_chunks(fc, "x = 1\n", 2)

    rows, records = [], []
    for f, text in C.progress(chosen, desc="speed", disable=args.no_progress):
        n = len(text)
        rec = {"file": C.rel(f, root), "chars": n}
        try:
            t_ast = best(lambda text=text: ast_parse(text), max(args.repeat, 3))
            t_chunk = best(lambda text=text: feed_chunks(fc, text, args.chunk), args.repeat)
            head = text[: args.char_cap]
            t_char = best(lambda head=head: feed_chunks(fc, head, 1), args.repeat)
            t_prefix = best(lambda text=text: build_prefix(fc, text), args.repeat)
        except Exception as e:
            rec["error"] = C.describe_exc(e)
            records.append(rec)
            print(f"{rec['file']}: {rec['error']}", file=sys.stderr)
            continue
        rec.update(
            {
                "feed_chunk_us_per_char": 1e6 * t_chunk / n,
                "feed_char_us_per_char": 1e6 * t_char / len(head),
                "prefix_ms_per_1k": 1e3 * t_prefix / (n / 1000),
                "ast_ms_per_1k": 1e3 * t_ast / (n / 1000),
            }
        )
        rec["prefix_over_ast"] = t_prefix / t_ast
        # one fed chunk against re-parsing the whole file with ast.parse (the "checked
        # unconstrained" baseline)
        rec["feed_chunk_over_ast_reparse"] = (t_chunk / max(1, -(-n // args.chunk))) / t_ast
        records.append(rec)
        rows.append(
            [
                rec["file"],
                n,
                rec["feed_chunk_us_per_char"],
                rec["feed_char_us_per_char"],
                rec["prefix_ms_per_1k"],
                rec["ast_ms_per_1k"],
                rec["prefix_over_ast"],
                rec["feed_chunk_over_ast_reparse"],
            ]
        )

    headers = [
        "file",
        "chars",
        f"feed/{args.chunk} µs/ch",
        "feed/1 µs/ch",
        "prefix ms/1k",
        "ast ms/1k",
        "prefix÷ast",
        f"{args.chunk}-ch feed÷ast reparse",
    ]
    print()
    print(C.table(rows, headers, align="lrrrrrrr"))
    ok = [r for r in records if "error" not in r]
    if ok:
        tot = sum(r["chars"] for r in ok)

        def wmean(key):  # character-weighted mean
            return sum(r[key] * r["chars"] for r in ok) / tot

        print()
        summary_rows = [
            [
                f"feed, {args.chunk}-char chunks (µs per char)",
                wmean("feed_chunk_us_per_char"),
                statistics.median(r["feed_chunk_us_per_char"] for r in ok),
                max(r["feed_chunk_us_per_char"] for r in ok),
                f"≤ {TARGET_FEED_US:g}",
            ],
            [
                "feed, 1 char at a time (µs per char)",
                wmean("feed_char_us_per_char"),
                statistics.median(r["feed_char_us_per_char"] for r in ok),
                max(r["feed_char_us_per_char"] for r in ok),
                f"≤ {TARGET_FEED_US:g}",
            ],
            [
                "build from prefix (ms per 1,000 chars)",
                wmean("prefix_ms_per_1k"),
                statistics.median(r["prefix_ms_per_1k"] for r in ok),
                max(r["prefix_ms_per_1k"] for r in ok),
                f"≤ {TARGET_PREFIX_MS:g}",
            ],
            [
                "ast.parse (ms per 1,000 chars)",
                wmean("ast_ms_per_1k"),
                statistics.median(r["ast_ms_per_1k"] for r in ok),
                max(r["ast_ms_per_1k"] for r in ok),
                "baseline",
            ],
            [
                "build from prefix ÷ ast.parse",
                wmean("prefix_over_ast"),
                statistics.median(r["prefix_over_ast"] for r in ok),
                max(r["prefix_over_ast"] for r in ok),
                "ratio",
            ],
            [
                f"one {args.chunk}-char feed ÷ ast.parse of whole file",
                wmean("feed_chunk_over_ast_reparse"),
                statistics.median(r["feed_chunk_over_ast_reparse"] for r in ok),
                max(r["feed_chunk_over_ast_reparse"] for r in ok),
                "ratio",
            ],
        ]
        print(
            C.table(
                summary_rows, ["measure", "mean (char-weighted)", "median", "max", "target"], align="lrrrr"
            )
        )
        print(f"\n{len(ok)} files, {tot:,} chars; errors: {len(records) - len(ok)}")
    out = C.write_results(
        "prefix_speed",
        args,
        {
            "targets": {"feed_us_per_char": TARGET_FEED_US, "prefix_ms_per_1k": TARGET_PREFIX_MS},
            "files": records,
        },
    )
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
