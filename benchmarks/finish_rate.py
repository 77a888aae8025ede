#!/usr/bin/env python3
"""How often the budget finish (``Checker.shortest_finish``) turns a stray middle into a valid file.

Decoding under a token budget ends with the checker's shortest finish (issue 4, paper 002),
so its success rate bounds constrained FIM's. For Stack-Boundary and Stack-RandSpan cuts of
real files (as in fim_groundtruth.py) the middle is text that went astray, as a small model's
does: a piece of another file fed character by character up to its first rejection (``stray``),
or a part of the true middle (``partial``). A finish counts when ``ast.parse`` accepts
prefix + middle + finish + suffix.

    python benchmarks/finish_rate.py --limit 150 --cuts 2 --seed 0
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter

import _common as C
from fim_groundtruth import cuts


def stray_text(sources: list[str], rng: random.Random) -> str:
    source = rng.choice(sources)
    at = rng.randrange(len(source))
    return source[at : at + rng.randint(20, 300)]


def feed_until_rejected(checker, text: str):
    """The checker after the longest prefix of ``text`` it accepts, and that prefix."""
    offset, last = C.first_dead_offset(checker, text)
    return last, text if offset is None else text[:offset]


def check_file(task) -> dict:
    path, seed, count, seconds, others = task
    fc = C.engine_setup()
    rng = random.Random(f"{seed}:{path}")
    source = C.read_utf8(path)
    out = {"file": str(path), "trials": Counter(), "finished": Counter(), "seconds": [], "failures": []}
    if source is None or not source.strip() or not C.ast_verdict(source)[0]:
        return out
    donors = [text for p in others if (text := C.read_utf8(p))] or [source]
    for style, a, b in cuts(source, rng, count):
        prefix, truth, suffix = source[:a], source[a:b], source[b:]
        try:
            start = fc.fim_checker(prefix, suffix)
        except (fc.UncompletableError, fc.InputError):
            continue
        for kind in ("stray", "partial"):
            text = stray_text(donors, rng) if kind == "stray" else truth[: rng.randint(0, len(truth))]
            checker, middle = feed_until_rejected(start, text)
            began = time.perf_counter()
            finish = checker.shortest_finish(seconds=seconds)
            out["seconds"].append(time.perf_counter() - began)
            key = f"{style}/{kind}"
            out["trials"][key] += 1
            if finish is not None and C.ast_verdict(prefix + middle + finish + suffix)[0]:
                out["finished"][key] += 1
            else:
                out["failures"].append(
                    {
                        "style": style,
                        "kind": kind,
                        "start": a,
                        "end": b,
                        "middle": middle,
                        "finish": finish,
                        "suffix": suffix[:80],
                    }
                )
    return out


def main() -> None:
    parser = C.base_parser(__doc__.splitlines()[0], limit_default=150)
    parser.add_argument("--cuts", type=int, default=2, help="cut pairs (boundary + randspan) per file")
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="time limit of one finish search (as generate uses)"
    )
    args = parser.parse_args()
    root, files = C.select_files(args)
    rng = random.Random(args.seed)
    tasks = [
        (path, args.seed, args.cuts, args.seconds, rng.sample(files, min(3, len(files)))) for path in files
    ]
    trials, finished, seconds, failures = Counter(), Counter(), [], []
    for result in C.run_pool(check_file, tasks, workers=args.workers, desc="files", disable=args.no_progress):
        trials.update(result["trials"])
        finished.update(result["finished"])
        seconds += result["seconds"]
        failures += [dict(f, file=C.rel(result["file"], root)) for f in result["failures"]]
    rows = [
        [key, f"{finished[key]}/{trials[key]}", C.pct(finished[key], trials[key])] for key in sorted(trials)
    ]
    total, done = sum(trials.values()), sum(finished.values())
    rows.append(["all", f"{done}/{total}", C.pct(done, total)])
    print(C.table(rows, ["cut/middle", "finished", "rate"]))
    if seconds:
        ordered = sorted(seconds)
        print(
            f"finish search: mean {statistics.mean(seconds) * 1000:.0f} ms, median "
            f"{ordered[len(ordered) // 2] * 1000:.0f} ms, "
            f"p95 {ordered[int(len(ordered) * 0.95)] * 1000:.0f} ms, "
            f"max {ordered[-1] * 1000:.0f} ms"
        )
    for f in failures[:20]:
        print(
            "NOT FINISHED",
            f["file"],
            f["style"],
            f["kind"],
            f["start"],
            "(found, invalid)" if f["finish"] is not None else "",
            repr(f["middle"][-50:]),
            "|",
            repr(f["suffix"][:40]),
        )
    path = C.write_results(
        "finish_rate",
        args,
        {"trials": dict(trials), "finished": dict(finished), "seconds": seconds, "failures": failures},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
