#!/usr/bin/env python3
"""FIM speed against context size, beside ast.parse of the whole file per token.

For real standard-library files grouped by size (1k to 100k+ characters), each file is cut
(a few whole lines removed at a random line: a small middle in a large context) and, in one
process:

* cold build: ``fim_checker(prefix, suffix)`` after ``clear_caches()`` (grammar tables warm,
  as in a running server), plus one ``feed("")``;
* edit rebuild: the same request after typing one character at the cursor (cache warm);
* per token: feeding the original middle in 4-character chunks (µs per chunk); an EOS check
  (``is_complete()``) at the end (first, cold) and again after one more token of whitespace
  (the next check, which reuses what the first learned about the suffix);
* baseline: ``ast.parse`` of the whole file, what checked-unconstrained decoding pays per token.

Prints a table of medians, writes JSON and a PNG plot under ``benchmarks/results/``.

    python benchmarks/fim_speed.py --per-bucket 5 --seed 0
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import _common as C
from tqdm import tqdm

import fimconstrain

BUCKETS = [
    (1_000, 2_000),
    (2_000, 5_000),
    (5_000, 10_000),
    (10_000, 20_000),
    (20_000, 50_000),
    (50_000, 100_000),
    (100_000, 250_000),
]
CHUNK = 4


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def cut(source: str, rng: random.Random) -> tuple[str, str, str]:
    """A whole-lines cut: 1-5 whole lines removed after a random line."""
    lines = source.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    j = min(len(lines), i + rng.randint(1, 5))
    a = sum(map(len, lines[:i]))
    b = a + sum(map(len, lines[i:j]))
    return source[:a], source[a:b], source[b:]


def measure(source: str, rng: random.Random) -> dict:
    prefix, middle, suffix = cut(source, rng)
    fimconstrain.clear_caches()

    def build(p=prefix):
        checker = fimconstrain.fim_checker(p, suffix)
        checker.feed("")
        return checker

    cold, checker = timed(build)
    edit, _ = timed(lambda: build(prefix + " "))  # may be rejected later; the build is what counts
    chunks = [middle[i : i + CHUNK] for i in range(0, len(middle), CHUNK)] or [""]
    t0 = time.perf_counter()
    for chunk in chunks:
        checker = checker.feed(chunk)
        if checker is None:
            raise RuntimeError("original middle rejected")
    per_chunk = (time.perf_counter() - t0) / len(chunks)
    first_eos, complete = timed(checker.is_complete)
    if not complete:
        raise RuntimeError("original middle not complete")
    extended = checker.feed("\n" if middle.endswith("\n") else " ")
    eos, _ = timed(extended.is_complete)
    parse, _ = timed(lambda: C.ast_verdict(source))
    return {
        "chars": len(source),
        "cold_ms": cold * 1e3,
        "edit_ms": edit * 1e3,
        "feed_us_per_token": per_chunk * 1e6,
        "first_eos_ms": first_eos * 1e3,
        "eos_ms": eos * 1e3,
        "ast_parse_ms": parse * 1e3,
    }


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["chars"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.loglog(xs, [r["cold_ms"] for r in rows], "o", label="cold build")
    left.loglog(xs, [r["edit_ms"] for r in rows], "x", label="rebuild after an edit")
    left.loglog(xs, [r["ast_parse_ms"] for r in rows], ".", label="ast.parse of the file")
    left.axhline(100, color="grey", ls="--", lw=0.8, label="100 ms target")
    left.set_xlabel("file size (characters)")
    left.set_ylabel("ms")
    left.set_title("one-time cost per request")
    left.legend(fontsize=8)
    right.loglog(xs, [r["feed_us_per_token"] / 1e3 for r in rows], "o", label="feed (per 4-char token)")
    right.loglog(xs, [r["first_eos_ms"] for r in rows], "+", label="first EOS check (is_complete)")
    right.loglog(xs, [r["eos_ms"] for r in rows], "x", label="next EOS check")
    right.loglog(
        xs, [r["ast_parse_ms"] for r in rows], ".", label="ast.parse per token (checked unconstrained)"
    )
    right.set_xlabel("file size (characters)")
    right.set_ylabel("ms per token")
    right.set_title("cost per generated token (model excluded)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=C.stdlib_root(), help="folder of .py files")
    parser.add_argument("--per-bucket", type=int, default=5, help="files per size bucket")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="JSON output path (PNG beside it)")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    files = C.list_py_files(args.root)
    rng.shuffle(files)
    chosen: list[tuple[Path, str]] = []
    for lo, hi in BUCKETS:
        picked = 0
        for path in files:
            if picked == args.per_bucket:
                break
            source = C.read_utf8(path)
            if source and lo <= len(source) < hi and C.ast_verdict(source)[0]:
                chosen.append((path, source))
                picked += 1
    fimconstrain.fim_checker("x = 1\n", "\n")  # load the grammar outside the timings
    rows = []
    for path, source in tqdm(chosen, desc="files", unit="file"):
        row = measure(source, rng)
        row["file"] = C.rel(path, args.root)
        rows.append(row)

    print(
        f"{'size bucket':>16} {'files':>5} {'cold ms':>8} {'edit ms':>8} {'feed us/tok':>11} "
        f"{'EOS1 ms':>8} {'EOS ms':>7} {'ast.parse ms':>12} {'ast/feed':>8}"
    )
    for lo, hi in BUCKETS:
        group = [r for r in rows if lo <= r["chars"] < hi]
        if not group:
            continue
        med = {
            k: statistics.median(r[k] for r in group)
            for k in ("cold_ms", "edit_ms", "feed_us_per_token", "first_eos_ms", "eos_ms", "ast_parse_ms")
        }
        print(
            f"{lo:>7,}-{hi:<8,} {len(group):>5} {med['cold_ms']:>8.1f} {med['edit_ms']:>8.2f} "
            f"{med['feed_us_per_token']:>11.1f} {med['first_eos_ms']:>8.2f} {med['eos_ms']:>7.2f} "
            f"{med['ast_parse_ms']:>12.2f} "
            f"{med['ast_parse_ms'] * 1e3 / med['feed_us_per_token']:>8.1f}"
        )
    ten_k = [r["cold_ms"] for r in rows if 5_000 <= r["chars"] < 20_000]
    if ten_k:
        print(
            f"median cold build for 5k-20k character files: {statistics.median(ten_k):.1f} ms "
            "(target <= 100 ms)"
        )
    path = C.write_results("fim_speed", args, {"rows": rows})
    plot(rows, path.with_suffix(".png"))
    print(f"wrote {path} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()
