#!/usr/bin/env python3
"""The token-mask store as a pre-filter in constrained FIM sampling (issue 6, part b).

Constrained decoding walks the model's candidates in sampling order (Gumbel keys) and lets the
exact FIM checker confirm each. With ``prefilter`` every step is first masked with the store's
bitsets: a sound mask only removes tokens the checker would reject, so the same tokens must be
chosen, with fewer exact checks. For Stack-Boundary and Stack-RandSpan cuts of real files this
decodes each cut twice (same seed) and reports whether the outputs agree, candidates checked per
token, and the constraint's time per token (mask included) both ways.

    python benchmarks/fim_prefilter.py --limit 20 --max-new-tokens 48 --temperature 0.8
"""

from __future__ import annotations

import random
import statistics

import _common as C
from fim_groundtruth import cuts


def main() -> None:
    parser = C.base_parser(__doc__.splitlines()[0], limit_default=20, workers=False)
    parser.add_argument(
        "--model", default=None, help="model folder or cached hub id (default: the shipped model)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--top-k", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    import torch

    from fimconstrain.decoding.loop.generate import FimDecoder
    from fimconstrain.decoding.models.loading import load_model

    torch.set_num_threads(args.threads)
    loaded = load_model(args.model)
    decoder = FimDecoder(loaded)
    decoder.mask_store()  # built or loaded once, outside the timings
    _root, files = C.select_files(args)
    rng = random.Random(args.seed)
    rows = {False: [], True: []}
    same = total = 0
    for path in C.progress(files, desc="files", disable=args.no_progress):
        source = C.read_utf8(path)
        if not source or len(source) > 60_000 or not C.ast_verdict(source)[0]:
            continue
        for _style, a, b in cuts(source, rng, 1):
            results = {}
            for prefilter in (False, True):
                results[prefilter] = result = decoder.generate(
                    source[:a],
                    source[b:],
                    mode="constrained",
                    max_new_tokens=args.max_new_tokens,
                    temperature=args.temperature,
                    top_p=args.top_p,
                    top_k=args.top_k,
                    seed=a,
                    prefilter=prefilter,
                )
                rows[prefilter].append(
                    (
                        result.checker_ms_per_token,
                        result.candidates_checked / max(1, result.generated),
                        result.model_ms_per_token,
                    )
                )
            total += 1
            same += results[False].token_ids == results[True].token_ids
    table = []
    for prefilter in (False, True):
        ms, checked, model_ms = zip(*rows[prefilter]) if rows[prefilter] else ((0,), (0,), (0,))
        table.append(
            [
                "prefilter" if prefilter else "exact checks only",
                statistics.mean(ms),
                statistics.median(ms),
                statistics.mean(checked),
                statistics.mean(model_ms),
            ]
        )
    print(
        C.table(
            table,
            [
                "constrained sampling",
                "constraint ms/token (mean)",
                "median",
                "candidates/token",
                "model ms/token",
            ],
        )
    )
    base, masked = table[0][1], table[1][1]
    print(f"same tokens with and without the pre-filter: {same}/{total}")
    print(f"constraint time with the pre-filter: {masked / base:.2f}x of exact checks only" if base else "")
    path = C.write_results(
        "fim_prefilter", args, {"cuts": total, "same": same, "rows": {str(k): v for k, v in rows.items()}}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
