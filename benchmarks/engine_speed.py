#!/usr/bin/env python3
"""The engine's speed in units of the standard library's pure-Python tokenizer, same run.

Held-out real files (editor_quality's: installed packages outside the shipped model's training
set) are each cut once, a few whole lines removed at a random line, and timed in one process:

* tokenizer: ``tokenize.generate_tokens`` over the whole file (best of 3), the unit: µs per
  character. Every figure below is a ratio to it, so that machines and load cancel out;
* FIM build: ``fim_checker(prefix, suffix)`` plus ``feed("")`` after ``clear_caches()``, per
  character of context (prefix + suffix);
* FIM feed: the removed lines fed to that checker in 4-character chunks, per character;
* prefix build: ``fim_checker(text, "")`` of the whole file after ``clear_caches()``, per character;
* prefix feed: the whole file fed to ``fim_checker("", "")`` in 4-character chunks, per character.

Pooled over files (total time over total characters). Prints which engine ran (compiled or
the sources; ``FIMCONSTRAIN_ENGINE=python`` forces the sources), a table, writes JSON.

    python benchmarks/engine_speed.py --limit 20
    python benchmarks/ab.py --baseline <rev> --same-script engine_speed.py -- --limit 20
"""

from __future__ import annotations

import argparse
import io
import random
import time
import tokenize
from pathlib import Path

import _common as C
from editor_quality import held_out_files

import fimconstrain

CHUNK = 4
#: the native core's targets (issue 62), as ratios to the tokenizer
TARGETS = {"fim_feed": 5.0, "fim_build": 2.0, "prefix_feed": 1.5}


def tokenizer_seconds(text: str) -> float:
    """Best of three runs of the standard library's tokenizer over ``text``."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _tok in tokenize.generate_tokens(io.StringIO(text).readline):
            pass
        best = min(best, time.perf_counter() - start)
    return best


def feed_seconds(checker, text: str) -> float:
    start = time.perf_counter()
    for i in range(0, len(text), CHUNK):
        checker = checker.feed(text[i : i + CHUNK])
        if checker is None:
            raise AssertionError(f"rejected a piece of a valid file at {i}")
    return time.perf_counter() - start


def cut(text: str, rng: random.Random) -> tuple[str, str, str]:
    """``(prefix, middle, suffix)``: one to three whole lines removed at a random line."""
    lines = text.splitlines(keepends=True)
    at = rng.randrange(len(lines))
    span = rng.randint(1, 3)
    return "".join(lines[:at]), "".join(lines[at : at + span]), "".join(lines[at + span :])


def measure(path: Path, rng: random.Random) -> dict | None:
    text = C.read_utf8(path)
    if text is None or not C.ast_verdict(text)[0] or not text.strip():
        return None
    prefix, middle, suffix = cut(text, rng)
    if not middle:
        return None
    row = {"file": path.name, "chars": len(text), "tokenizer_s": tokenizer_seconds(text)}
    fimconstrain.clear_caches()
    start = time.perf_counter()
    checker = fimconstrain.fim_checker(prefix, suffix).feed("")
    row["fim_build_s"], row["context_chars"] = time.perf_counter() - start, len(prefix) + len(suffix)
    row["fim_feed_s"], row["middle_chars"] = feed_seconds(checker, middle), len(middle)
    fimconstrain.clear_caches()
    start = time.perf_counter()
    fimconstrain.fim_checker(text, "").feed("")
    row["prefix_build_s"] = time.perf_counter() - start
    row["prefix_feed_s"] = feed_seconds(fimconstrain.fim_checker("", ""), text)
    return row


def summarize(rows: list[dict]) -> dict:
    """Pooled µs per character of each measure, and each as a ratio to the tokenizer's."""
    chars = sum(r["chars"] for r in rows)
    unit = sum(r["tokenizer_s"] for r in rows) / chars * 1e6
    per_char = {
        "fim_build": sum(r["fim_build_s"] for r in rows) / sum(r["context_chars"] for r in rows) * 1e6,
        "fim_feed": sum(r["fim_feed_s"] for r in rows) / sum(r["middle_chars"] for r in rows) * 1e6,
        "prefix_build": sum(r["prefix_build_s"] for r in rows) / chars * 1e6,
        "prefix_feed": sum(r["prefix_feed_s"] for r in rows) / chars * 1e6,
    }
    return {
        "files": len(rows),
        "chars": chars,
        "tokenizer_us_per_char": unit,
        "us_per_char": per_char,
        "ratio_to_tokenizer": {k: v / unit for k, v in per_char.items()},
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, help="files to cut (default: editor_quality's held-out packages)")
    p.add_argument("--limit", type=int, default=20, help="files")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="JSON output (default: benchmarks/results/engine_speed.json)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)

    rng = random.Random(args.seed)
    fimconstrain.fim_checker("x = 1\n", "").feed("y")  # grammar tables and lexer warm, as in a server
    rows = []
    for path in C.progress(
        held_out_files(args.root, args.limit, args.seed), desc="files", disable=args.quiet
    ):
        row = measure(path, rng)
        if row is not None:
            rows.append(row)
    if not rows:
        raise SystemExit("no usable files")
    summary = summarize(rows)
    print(f"engine: {fimconstrain.ENGINE_BUILD}")
    print(
        f"{summary['files']} files, {summary['chars']:,} characters; "
        f"tokenizer {summary['tokenizer_us_per_char']:.3f} µs per character (the unit)"
    )
    table = [
        [
            name,
            f"{summary['us_per_char'][name]:.3f}",
            f"{summary['ratio_to_tokenizer'][name]:.1f}x",
            f"<= {TARGETS[name]:g}x" if name in TARGETS else "",
        ]
        for name in ("fim_feed", "fim_build", "prefix_feed", "prefix_build")
    ]
    print(C.table(table, ["measure", "µs per char", "tokenizer units", "target"]))
    C.write_results(
        "engine_speed", args, {"engine": str(fimconstrain.ENGINE_BUILD), "summary": summary, "rows": rows}
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
