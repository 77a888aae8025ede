#!/usr/bin/env python3
"""Runtime parity: the shipped model greedy on transformers and on llama.cpp, the same middles?

Held-out editor cursors (``editor_quality.py``'s files and cuts) are completed greedily in every
decoding mode (unconstrained, checked, constrained, prefix) with the editor's options and no
deadline, once by the checkpoint under transformers and once by its GGUF copy under llama.cpp;
reported per mode: how many middles (and stop reasons) are the same, and the model's time per
token on each runtime. Needs llama-cpp-python (``bash scripts/llama_toolchain.sh``).

    python benchmarks/runtime_parity.py --limit 20 --per-file 3
"""

from __future__ import annotations

import random
import sys
from dataclasses import replace

import _common as C
import editor_quality as EQ


def main(argv=None) -> int:
    from fimconstrain.decoding.editor.policy import wants_multiline
    from fimconstrain.decoding.loop.generate import FimDecoder
    from fimconstrain.decoding.loop.options import MODES, DecodeOptions
    from fimconstrain.decoding.models.loading import default_gguf, load_model

    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=20, workers=False)
    p.add_argument("--per-file", type=int, default=3, help="cursors per file")
    p.add_argument("--max-tokens", type=int, default=64, help="new tokens per middle")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    requests = []
    for index, path in enumerate(EQ.held_out_files(args.root, args.limit, args.seed)):
        text = path.read_text("utf-8", errors="replace")
        if EQ.parses(text):
            requests += EQ.cursors(text, rng, args.per_file, index % len(EQ.KINDS))
    decoders = {
        "transformers": FimDecoder(load_model(runtime="transformers", progress=False)),
        "llama": FimDecoder(load_model(default_gguf())),
    }
    summary: dict[str, dict] = {}
    rows: list[dict] = []
    for mode in MODES:
        same = 0
        seconds = {name: 0.0 for name in decoders}
        tokens = {name: 0 for name in decoders}
        for kind, prefix, suffix, _truth in C.progress(
            requests, desc=mode, disable=args.no_progress, unit="cut"
        ):
            editor = DecodeOptions.editor(not wants_multiline(prefix, suffix), max_new_tokens=args.max_tokens)
            options = replace(editor, mode=mode)
            results = {name: d.generate(prefix, suffix, options) for name, d in decoders.items()}
            for name, result in results.items():
                seconds[name] += result.model_seconds
                tokens[name] += result.generated
            a, b = results["transformers"], results["llama"]
            equal = (a.middle, a.stopped) == (b.middle, b.stopped)
            same += equal
            rows.append(
                {"mode": mode, "kind": kind, "same": equal, "transformers": a.middle, "llama": b.middle}
            )
        summary[mode] = {
            "cursors": len(requests),
            "same": same,
            **{
                f"{name}_model_ms_per_token": 1000 * seconds[name] / max(1, tokens[name]) for name in decoders
            },
        }
    print(f"{'mode':14} {'cursors':>7} {'same':>5} {'transformers ms/t':>18} {'llama.cpp ms/t':>15}")
    for mode, s in summary.items():
        print(
            f"{mode:14} {s['cursors']:7d} {s['same']:5d} {s['transformers_model_ms_per_token']:18.2f} "
            f"{s['llama_model_ms_per_token']:15.2f}"
        )
    out = C.write_results("runtime_parity", args, {"summary": summary, "rows": rows})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
