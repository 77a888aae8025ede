#!/usr/bin/env python3
"""Fit a model's confidence threshold on held-out cuts (the editor's items below it are not shown).

The cuts are the editor-quality benchmark's kinds (mid-line, new line, block body) taken from
the standard-library files the shipped model never trained on (``training.json``'s held-out list,
or all of them for a model trained on installed code),
never from the benchmark's files (installed packages). ``--model NAME`` fits a known model
(:mod:`fimconstrain.decoding.models.known_models`) on the same files: its threshold goes into its
registry entry (printed; ``--write`` is for the shipped model's ``confidence.json``).
Each request goes through the editor's policy (what the server
runs: :func:`fimconstrain.decoding.editor.policy.complete_at_cursor`) with a gate that
shows everything; an item is good when its edit similarity to the true middle is at least 0.7.
The threshold maximises good items shown minus junk items shown
(:func:`fimconstrain.decoding.models.confidence.fit_threshold`). ``--write`` stores it in the model's
``confidence.json``.

    python scripts/fit_confidence.py --limit 40 --per-file 3 --write
    python scripts/fit_confidence.py --limit 40 --per-file 3 --model qwen2.5-coder-0.5b --window 256
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common, editor_quality
import _common as C
import editor_quality as EQ


def main(argv=None) -> int:
    from fimconstrain.decoding.loop.options import EDITOR_SUFFIX_TOKENS, EDITOR_WINDOW
    from fimconstrain.decoding.models.confidence import FILE_NAME, ConfidenceGate, fit_threshold
    from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR
    from fimconstrain.evaluation.datasets import heldout_stdlib_files

    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=40, workers=False)
    p.add_argument("--per-file", type=int, default=3, help="requests per file")
    p.add_argument("--write", action="store_true", help=f"store the threshold in the model's {FILE_NAME}")
    p.add_argument("--model", default=None, help="a known model's name (default: the shipped model)")
    p.add_argument(
        "--window",
        type=int,
        default=EDITOR_WINDOW,
        help="tokens of prompt and middle, as the server's prompt window (a slow model's is fitted "
        "smaller: the server's log says which)",
    )
    p.add_argument(
        "--suffix-tokens", type=int, default=EDITOR_SUFFIX_TOKENS, help="as the server's suffixTokens"
    )
    p.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: every core)")
    p.add_argument(
        "--deadline-ms",
        type=int,
        default=3000,
        help="per request (the server's default; a slow machine needs more to see enough items)",
    )
    args = p.parse_args(argv)
    if args.write and args.model:
        p.error("--write stores the shipped model's threshold; a known model's goes into its registry entry")
    rng = random.Random(args.seed)
    requests = []
    files = heldout_stdlib_files(DEFAULT_MODEL_DIR)
    random.Random(args.seed).shuffle(files)
    for path in files[: args.limit]:
        text = path.read_text("utf-8", errors="replace")
        if 1_000 <= len(text) <= 30_000 and EQ.parses(text):
            requests += EQ.cursors(text, rng, args.per_file)
    completer = EQ.Completer(
        args.model,
        deadline_ms=args.deadline_ms,
        max_tokens=64,
        window=args.window,
        suffix_tokens=args.suffix_tokens,
        threads=args.threads,
    )
    completer.gate = ConfidenceGate()  # see every item
    scored: list[tuple[float, bool]] = []
    for _kind, prefix, suffix, truth in C.progress(
        requests, desc="fit", disable=args.no_progress, unit="request"
    ):
        items = completer.completion("fim", prefix, suffix).items
        if items:
            good = EQ.edit_similarity(items[0].middle, truth) >= EQ.GOOD
            scored.append((items[0].mean_logprob, good))
    threshold = fit_threshold(scored)
    shown = [good for score, good in scored if score >= threshold]
    print(f"requests {len(requests)}, items {len(scored)}, good {sum(g for _, g in scored)}")
    print(f"threshold (mean token log-probability) {threshold:.3f}: shows {len(shown)}, good {sum(shown)}")
    payload = {"min_mean_logprob": threshold, "items": len(scored), "good": sum(g for _, g in scored)}
    C.write_results("fit_confidence", args, {**payload, "scored": scored})
    if args.write:
        record = {**payload, "fitted_by": "scripts/fit_confidence.py", "args": sys.argv[1:]}
        (DEFAULT_MODEL_DIR / FILE_NAME).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {DEFAULT_MODEL_DIR / FILE_NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
