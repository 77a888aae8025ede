#!/usr/bin/env python3
"""The README's own command at held-out cuts: does ``fimconstrain complete FILE --cursor L:C --json``
leave the file valid, and what does it print?

A cut removes 5-60 characters of a line of code (from a point inside the line, so the rest of
the line may stay after the cursor, as when a person edits inside a line) in a held-out file
(default: the standard-library files the shipped model never trained on: ``training.json``'s
held-out list or, for a model trained on installed code, all of them), writes the cut file
to a temporary folder and runs the command exactly as a user does, one process per cut.
Reported: exit codes, ``valid``, ``shown``, how each middle stopped, and whether standard output
is empty for an invalid result.

    python benchmarks/complete_cuts.py --limit 6
    python benchmarks/complete_cuts.py --limit 30 --model qwen2.5-coder-0.5b
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import _common as C


def heldout_files(seed: int) -> list[Path]:
    """The standard-library files the shipped model never trained on, shuffled by ``seed``."""
    from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR
    from fimconstrain.evaluation.datasets import heldout_stdlib_files

    files = heldout_stdlib_files(DEFAULT_MODEL_DIR)
    random.Random(seed).shuffle(files)
    return files


def cut(text: str, rng: random.Random) -> tuple[str, int, int, str] | None:
    """(cut text, line, column, removed) for one span of 5-60 characters inside a line of code."""
    lines = text.splitlines(keepends=True)
    for _ in range(50):
        i = rng.randrange(len(lines))
        code = lines[i].rstrip("\r\n")
        body = code.lstrip()
        if len(body) < 8 or body.startswith(("#", '"', "'")):
            continue
        start = len(code) - len(body) + rng.randrange(0, len(body) - 4)
        end = min(len(code), start + rng.randrange(5, 61))
        if end - start < 5:
            continue
        offset = sum(map(len, lines[:i]))
        return text[: offset + start] + text[offset + end :], i + 1, start + 1, code[start:end]
    return None


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=6, workers=False)
    p.add_argument("--model", default=None, help="--model of the command (default: the shipped model)")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    rows, stops, codes = [], Counter(), Counter()
    with tempfile.TemporaryDirectory() as folder:
        for path in heldout_files(args.seed):
            if len(rows) >= args.limit:
                break
            text = C.read_utf8(path)
            if text is None or not 1_000 <= len(text) <= 30_000 or not C.ast_verdict(text)[0]:
                continue
            made = cut(text, rng)
            if made is None:
                continue
            source, line, col, removed = made
            target = Path(folder) / path.name
            target.write_text(source, encoding="utf-8")
            command = [
                sys.executable,
                "-m",
                "fimconstrain",
                "complete",
                str(target),
                "--cursor",
                f"{line}:{col}",
            ]
            command += ["--json"] + (["--model", args.model] if args.model else [])
            done = subprocess.run(command, capture_output=True, text=True)
            codes[done.returncode] += 1
            record = json.loads(done.stdout) if done.stdout.strip() else {}
            stops[record.get("stopped", "none")] += 1
            rows.append(
                {
                    "file": path.name,
                    "cursor": f"{line}:{col}",
                    "removed": removed,
                    "exit": done.returncode,
                    "valid": record.get("valid"),
                    "shown": record.get("shown"),
                    "stopped": record.get("stopped"),
                    "middle": record.get("middle"),
                }
            )
    valid = sum(bool(r["valid"]) for r in rows)
    print(
        C.table(
            [
                [
                    r["file"],
                    r["cursor"],
                    r["exit"],
                    r["valid"],
                    r["shown"],
                    r["stopped"],
                    repr(r["middle"])[:40],
                ]
                for r in rows
            ],
            ["file", "cursor", "exit", "valid", "shown", "stopped", "middle"],
        )
    )
    print(f"cuts {len(rows)}: valid {valid}, exit codes {dict(codes)}, stops {dict(stops)}")
    C.write_results("complete_cuts", args, {"rows": rows, "valid": valid, "cuts": len(rows)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
