#!/usr/bin/env python3
"""FIM ground truth on real files: original middles must be accepted, broken ones rejected.

Cuts are the datasets' (paper 004 §VII-A, ``fimconstrain.evaluation.datasets.file_cuts``):
Stack-Boundary deletes from inside one symbol up to another symbol at the same indentation level,
Stack-RandSpan deletes a random span of at most 100 characters. For each cut:

* the original middle is fed in random 1-8 character chunks: it must never be rejected and
  must be complete at its end;
* a mutated middle (one character inserted, deleted or replaced) is checked the same way and
  compared with ``ast.parse`` of the whole file: a mutant Python rejects must be rejected
  (fed to None or not complete), a mutant Python accepts must be accepted.

    python benchmarks/fim_groundtruth.py --limit 400 --cuts 6 --seed 0
    python benchmarks/fim_groundtruth.py --root /path/to/site-packages --limit 300
"""

from __future__ import annotations

import random
from collections import Counter

import _common as C

from fimconstrain.evaluation.datasets import file_cuts

MUTATION_CHARS = "()[]{}:;,.=+-*/%<>!&|^~@'\"#\\ \n\tabcxyz019_"


def cuts(source: str, rng: random.Random, count: int):
    """(style, start, end) cut positions: up to ``count`` Stack-Boundary and ``count``
    Stack-RandSpan cuts as the datasets define them, alternating."""
    boundary = file_cuts(source, "boundary", rng, count)
    randspan = file_cuts(source, "randspan", rng, count)
    for i in range(max(len(boundary), len(randspan))):
        if i < len(boundary):
            yield ("boundary", *boundary[i])
        if i < len(randspan):
            yield ("randspan", *randspan[i])


def run_middle(fc, prefix: str, middle: str, suffix: str, rng: random.Random) -> tuple[bool, str]:
    """Feed ``middle`` in random chunks; (accepted, how it ended)."""
    try:
        checker = fc.fim_checker(prefix, suffix)
    except (fc.UncompletableError, fc.InputError):
        return False, "prefix rejected"
    i = 0
    while i < len(middle):
        n = rng.randint(1, 8)
        checker = checker.feed(middle[i : i + n])
        if checker is None:
            return False, f"rejected at middle offset {i}..{i + n}"
        i += n
    return (True, "complete") if checker.is_complete() else (False, "not complete at the end")


def mutate(middle: str, rng: random.Random) -> tuple[str, str]:
    pos = rng.randrange(len(middle) + 1)
    kind = rng.choice(["insert", "delete", "replace"]) if pos < len(middle) else "insert"
    char = rng.choice(MUTATION_CHARS)
    if kind == "insert":
        return middle[:pos] + char + middle[pos:], kind
    if kind == "delete":
        return middle[:pos] + middle[pos + 1 :], kind
    return middle[:pos] + char + middle[pos + 1 :], kind


def check_file(task) -> dict:
    path, seed, count = task
    fc = C.engine_setup()
    rng = random.Random(f"{seed}:{path}")
    source = C.read_utf8(path)
    out = {"file": str(path), "cuts": 0, "misses": [], "mutants": Counter(), "mutant_misses": []}
    if source is None or not source.strip() or not C.ast_verdict(source)[0]:
        return out
    try:
        with C.time_limit(300):
            for style, a, b in cuts(source, rng, count):
                prefix, middle, suffix = source[:a], source[a:b], source[b:]
                out["cuts"] += 1
                ok, how = run_middle(fc, prefix, middle, suffix, rng)
                if not ok:
                    out["misses"].append(
                        {"style": style, "start": a, "end": b, "how": how, "middle": middle[:200]}
                    )
                mutant, kind = mutate(middle, rng)
                python_ok, message, _ = C.ast_verdict(prefix + mutant + suffix)
                ours, how = run_middle(fc, prefix, mutant, suffix, rng)
                label = "valid" if python_ok else "invalid"
                out["mutants"][f"{label}_total"] += 1
                if ours == python_ok:
                    continue
                out["mutants"][f"{label}_wrong"] += 1
                out["mutant_misses"].append(
                    {
                        "style": style,
                        "kind": kind,
                        "python": python_ok,
                        "message": message,
                        "how": how,
                        "start": a,
                        "middle": middle[:120],
                        "mutant": mutant[:120],
                    }
                )
    except C.Timeout as exc:
        out["error"] = str(exc)
    return out


def main() -> None:
    parser = C.base_parser(__doc__.splitlines()[0], limit_default=400)
    parser.add_argument("--cuts", type=int, default=6, help="cut pairs (boundary + randspan) per file")
    args = parser.parse_args()
    root, files = C.select_files(args)
    tasks = [(path, args.seed, args.cuts) for path in files]
    total, misses, mutants, mutant_misses, errors = 0, [], Counter(), [], []
    for result in C.run_pool(check_file, tasks, workers=args.workers, desc="files", disable=args.no_progress):
        total += result["cuts"]
        misses += [dict(m, file=C.rel(result["file"], root)) for m in result["misses"]]
        mutants.update(result["mutants"])
        mutant_misses += [dict(m, file=C.rel(result["file"], root)) for m in result["mutant_misses"]]
        if "error" in result:
            errors.append((C.rel(result["file"], root), result["error"]))

    accepted = total - len(misses)
    invalid, valid = mutants["invalid_total"], mutants["valid_total"]
    caught = invalid - mutants["invalid_wrong"]
    print(
        C.table(
            [
                ["original middles accepted", f"{accepted}/{total}", C.pct(accepted, total), ">= 99.9%"],
                ["broken mutants rejected", f"{caught}/{invalid}", C.pct(caught, invalid), ">= 98%"],
                [
                    "valid mutants accepted",
                    f"{valid - mutants['valid_wrong']}/{valid}",
                    C.pct(valid - mutants["valid_wrong"], valid),
                    "100%",
                ],
            ],
            ["measure", "count", "rate", "target"],
        )
    )
    for m in misses[:20]:
        print("MISSED ORIGINAL", m["file"], m["style"], m["start"], m["how"], repr(m["middle"][:80]))
    for m in mutant_misses[:20]:
        print(
            "MUTANT",
            "accepted" if not m["python"] else "rejected",
            m["file"],
            m["kind"],
            m["message"],
            repr(m["mutant"][:80]),
        )
    for name, error in errors:
        print("ERROR", name, error)
    path = C.write_results(
        "fim_groundtruth",
        args,
        {
            "cuts": total,
            "original_misses": misses,
            "mutants": dict(mutants),
            "mutant_misses": mutant_misses,
            "errors": errors,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
