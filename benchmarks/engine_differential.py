#!/usr/bin/env python3
"""The compiled engine against the pure-Python one: identical verdicts and identical masks.

Runs the same work under ``FIMCONSTRAIN_ENGINE=python`` and ``FIMCONSTRAIN_ENGINE=compiled``,
each in a process of its own (a process runs one engine), and compares what they answer:

* verdicts, on the cut fuzzer's cases (``tests/engine/cut_fuzz.py``, every category, ``--cases``
  each): whether ``fim_checker(prefix, suffix)`` is built or which error it raises and where,
  then for every character of the middle fed one at a time whether the checker lives, and
  ``is_complete()`` after every line of the middle and at its end;
* masks, on editor cursors of held-out files (``editor_quality.py``'s): at the cursor and after
  each line of the true middle, which tokens of the shipped model's vocabulary ``feed`` accepts.

Prints the counts compared and every difference; exits 1 when there is one.

    python benchmarks/engine_differential.py --cases 20 --mask-files 5
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import _common as C

REPO = Path(__file__).resolve().parents[1]
TOKENIZER = REPO / "fimconstrain" / "default_model" / "tokenizer.json"


def verdicts(prefix: str, middle: str, suffix: str) -> dict:
    """What the engine says of one cut: the build, each fed character, the completions."""
    import fimconstrain

    try:
        checker = fimconstrain.fim_checker(prefix, suffix)
    except fimconstrain.FimConstrainError as error:
        return {"build": type(error).__name__, "offset": getattr(error, "offset", None)}
    lives, complete = [], []
    for i, ch in enumerate(middle):
        checker = checker.feed(ch)
        lives.append(checker is not None)
        if checker is None:
            break
        if ch == "\n" or i == len(middle) - 1:
            complete.append(checker.is_complete())
    return {"build": "ok", "lives": "".join("1" if x else "0" for x in lives), "complete": complete}


def token_texts() -> list[str]:
    """The shipped model's vocabulary as text (a token that is part of a character: empty)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER))
    texts = [tok.decode([i]) for i in range(tok.get_vocab_size())]
    return ["" if "\ufffd" in t else t for t in texts]


def mask(checker, texts: list[str]) -> tuple[int, str]:
    """How many tokens ``checker`` accepts, and a digest of which."""
    bits = bytes(1 if t and checker.feed(t) is not None else 0 for t in texts)
    return sum(bits), hashlib.sha256(bits).hexdigest()[:16]


def emit(args) -> dict:
    """This process's engine's answers (the child's side)."""
    from editor_quality import cursors, held_out_files

    import fimconstrain

    cf = C.cut_fuzz_module()
    out: dict = {"engine": str(fimconstrain.ENGINE_BUILD), "verdicts": {}, "masks": {}}
    for category in cf.CATEGORIES:
        for k in range(args.cases):
            case = cf.case_in_category(category, random.Random(f"{args.seed}:{category}:{k}"))
            out["verdicts"][f"{category}:{k}"] = verdicts(*case.triple())
    texts = token_texts()
    for path in held_out_files(None, args.mask_files, args.seed):
        text = C.read_utf8(path) or ""
        rng = random.Random(f"{args.seed}:{path.name}")
        for n, (kind, prefix, suffix, truth) in enumerate(cursors(text, rng, args.cursors_per_file)):
            try:
                checker = fimconstrain.fim_checker(prefix, suffix)
            except fimconstrain.FimConstrainError as error:
                out["masks"][f"{path.name}:{n}"] = [type(error).__name__]
                continue
            answers = [mask(checker, texts)]
            for line in truth.splitlines(keepends=True)[:2]:
                checker = checker.feed(line) if checker is not None else None
                answers.append(mask(checker, texts) if checker is not None else "dead")
            out["masks"][f"{path.name}:{n}:{kind}"] = answers
    return out


def run_engine(engine: str, args) -> dict:
    command = [sys.executable, __file__, "--emit", "--cases", str(args.cases), "--seed", str(args.seed)]
    command += ["--mask-files", str(args.mask_files), "--cursors-per-file", str(args.cursors_per_file)]
    done = subprocess.run(
        command, env=dict(os.environ, FIMCONSTRAIN_ENGINE=engine), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the {engine} engine's run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def compare(python: dict, compiled: dict) -> dict:
    """Counts of what was compared and the keys that differ."""
    report: dict = {"python": python["engine"], "compiled": compiled["engine"]}
    for part in ("verdicts", "masks"):
        keys = sorted(set(python[part]) | set(compiled[part]))
        report[part] = len(keys)
        report[f"{part}_differing"] = [k for k in keys if python[part].get(k) != compiled[part].get(k)]
    report["characters"] = sum(len(v.get("lives", "")) for v in python["verdicts"].values())
    report["mask_positions"] = sum(len(v) for v in python["masks"].values() if len(v) > 1)
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=20, help="cut-fuzzer cases per category")
    p.add_argument("--mask-files", type=int, default=5, help="held-out files whose cursors get masks")
    p.add_argument("--cursors-per-file", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--emit", action="store_true", help="(internal) print this engine's answers as JSON")
    p.add_argument(
        "--out", type=Path, help="JSON output (default: benchmarks/results/engine_differential.json)"
    )
    args = p.parse_args(argv)
    if args.emit:
        json.dump(emit(args), sys.stdout)
        return 0
    report = compare(run_engine("python", args), run_engine("compiled", args))
    print(f"{report['python']} against {report['compiled']}")
    print(
        f"verdicts: {report['verdicts']} cut cases ({report['characters']:,} characters fed), "
        f"{len(report['verdicts_differing'])} differ"
    )
    print(
        f"masks: {report['masks']} cursors, {report['mask_positions']} positions over the "
        f"shipped vocabulary, {len(report['masks_differing'])} differ"
    )
    for key in report["verdicts_differing"] + report["masks_differing"]:
        print(f"  differs: {key}")
    C.write_results("engine_differential", args, {"report": report})
    return 1 if report["verdicts_differing"] or report["masks_differing"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
