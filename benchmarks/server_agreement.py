"""Greedy middles through a model server against the same model in process (issue 50, item 4).

The editor's cursors of ``editor_quality.py`` (held-out installed packages) go to the decode loop
twice: over the model here (llama.cpp, or transformers) and over ``--server`` serving the same
file (llama-cpp-python's ``python -m llama_cpp.server``, or vLLM); greedy, the editor's options
and prompt window. It prints how many middles are the same token for token, where the others part
(the step, and the two tokens' log-probabilities there: a near-tie when they are close), whether
every middle parses, and the time per request both ways (p50, p95, and their ratio). A middle
cut at its best stop (the budget ran out) counts apart when the tokens are the same up to the
shorter one's end: that cut weighs the stop token's probability, which a server tells only
among its likeliest tokens (docs/serving.md).

    python -m llama_cpp.server --model "$(fimconstrain model path qwen2.5-coder-0.5b)" --port 8124 &
    python benchmarks/server_agreement.py --model qwen2.5-coder-0.5b --server http://127.0.0.1:8124

The names guide is off (``--semantic`` turns it on): jedi answers within a time limit, so its
verdicts, and the middles, vary with the machine's load whatever runs the model.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import _common as C  # noqa: F401  (puts the repository on the path)
from editor_quality import cursors, held_out_files, parses


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first position where the two token lists differ, None when they are the same."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", default=None, help="the model here and behind the server (default: the shipped one)"
    )
    ap.add_argument(
        "--server", required=True, metavar="URL", help="the server that serves the same model file"
    )
    ap.add_argument("--runtime", default="llama", choices=("llama", "transformers"), help="what runs it here")
    ap.add_argument(
        "--root", type=Path, default=None, help="files to cut cursors from (default: installed packages)"
    )
    ap.add_argument("--limit", type=int, default=25, help="files")
    ap.add_argument("--per-file", type=int, default=2, help="cursors per file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads here")
    ap.add_argument(
        "--window", type=int, default=256, help="prompt and middle tokens (the editor's fitted window)"
    )
    ap.add_argument("--suffix-tokens", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--semantic", action="store_true", help="with the names guide (jedi)")
    ap.add_argument("--out", type=Path, default=None, help="write every request's record here (JSON)")
    args = ap.parse_args(argv)

    from fimconstrain.decoding.editor.policy import wants_multiline
    from fimconstrain.decoding.loop.generate import FimDecoder
    from fimconstrain.decoding.loop.options import DecodeOptions
    from fimconstrain.decoding.model_choice import ModelChoice, ModelServer
    from fimconstrain.decoding.models.loading import load_model
    from fimconstrain.decoding.tokens.fim_formats import PromptCut

    backend = load_model(args.model, runtime=args.runtime, threads=args.threads, progress=False)
    settings = {"window": args.window, "cut": PromptCut(args.suffix_tokens)}
    here = FimDecoder(backend, **settings)
    there = ModelChoice(server=ModelServer(args.server)).open(backend, **settings).decoder
    print(f"here: {backend.name} ({backend.runtime}); there: {there.backend.name}", file=sys.stderr)
    rng = random.Random(args.seed)
    cuts = []
    for i, path in enumerate(held_out_files(args.root, args.limit, args.seed)):
        text = path.read_text(encoding="utf-8", errors="replace")
        cuts += [(path.name, *cut) for cut in cursors(text, rng, args.per_file, first_kind=i)]
    warm = DecodeOptions.editor(True, max_new_tokens=4, semantic=False)
    for decoder in (here, there):  # (tables, caches: as the language server warms up)
        decoder.generate("def add(a, b):\n    return ", "\n", warm)
    rows = []
    for n, (name, kind, prefix, suffix, _truth) in enumerate(cuts, 1):
        options = DecodeOptions.editor(
            not wants_multiline(prefix, suffix), max_new_tokens=args.max_tokens, semantic=args.semantic
        )
        timed = {}
        for side, decoder in (("here", here), ("there", there)):
            start = time.perf_counter()
            timed[side] = (decoder.generate(prefix, suffix, options), time.perf_counter() - start)
        (a, a_s), (b, b_s) = timed["here"], timed["there"]
        at = first_difference(a.token_ids, b.token_ids)
        shorter = min(len(a.token_ids), len(b.token_ids))
        row = {
            "file": name,
            "kind": kind,
            "same": a.middle == b.middle and at is None,
            # the same tokens up to the shorter one's end, one of them cut at its best stop
            "cut_elsewhere": (a.middle != b.middle or at is not None)
            and "best-stop" in (a.stopped, b.stopped)
            and a.token_ids[:shorter] == b.token_ids[:shorter],
            "stopped": [str(a.stopped), str(b.stopped)],
            "here": a.middle,
            "there": b.middle,
            "parses": [parses(prefix + a.middle + suffix), parses(prefix + b.middle + suffix)],
            "seconds": [a_s, b_s],
            "parted_at": at,
            "logprobs_there": [
                a.logprobs[at] if at is not None and at < len(a.logprobs) else None,
                b.logprobs[at] if at is not None and at < len(b.logprobs) else None,
            ],
        }
        rows.append(row)
        verdict = "same" if row["same"] else "cut elsewhere" if row["cut_elsewhere"] else f"parted at {at}"
        print(
            f"{n}/{len(cuts)} {name} {kind}: {verdict} ({a_s:.2f} s / {b_s:.2f} s)",
            file=sys.stderr,
        )
    same = sum(r["same"] for r in rows)
    here_s = [r["seconds"][0] for r in rows]
    there_s = [r["seconds"][1] for r in rows]
    summary = {
        "requests": len(rows),
        "same": same,
        "cut_elsewhere": sum(r["cut_elsewhere"] for r in rows),
        "parse_here": sum(r["parses"][0] for r in rows),
        "parse_there": sum(r["parses"][1] for r in rows),
        "p50": [statistics.median(here_s), statistics.median(there_s)],
        "p95": [_quantile(here_s, 0.95), _quantile(there_s, 0.95)],
    }
    summary["ratio_p50"] = summary["p50"][1] / summary["p50"][0]
    summary["ratio_p95"] = summary["p95"][1] / summary["p95"][0]
    print(json.dumps(summary, indent=1))
    for r in rows:
        if not r["same"] and not r["cut_elsewhere"]:
            print(
                f"parted: {r['file']} {r['kind']} at token {r['parted_at']}: here {r['here']!r} "
                f"(log-p {r['logprobs_there'][0]}), there {r['there']!r} (log-p {r['logprobs_there'][1]})"
            )
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
