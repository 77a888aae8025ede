"""Constraint wall time per decoding step of a serving batch, in one process and over a pool of
worker processes that own the requests (fimconstrain/serving/pool.py).

First the logits are recorded: for each of ``--cuts`` real cuts (six lines of a standard-library
file taken out; one file per cut) one forward pass of the shipped model over the FIM prompt and
the author's middle gives the logits at every step of writing that middle (a path the constraint
accepts throughout), of which the top ``--top-k`` are kept (the rest of each row is set below
them: the full-mask fallback still sees every token).
Then each step of a batch is replayed with the vLLM processor's own step
(``serving.batch.constrain``: ``topk`` over the dense ``[batch, vocab]`` logits, the rows'
checks (RowQuery: the token committed at the last step and the candidates), the boolean mask).
Timed: that per step, steps 1..S (step 0 waits for the requests' checkers to be built: the
one-time cost, not timed).

Each batch is timed under the requests' sampler settings (``--samplers``): ``mask`` checks
every one of the top ``k`` candidates (the whole top-k mask: what plain sampling and top_p
need), ``greedy`` and ``min_p`` stop where the sampler could pick nothing further down
(fimconstrain/serving/support.py; the same sampled distribution).  Ratios are against the
in-process whole mask measured in the same run at the same batch; beside each median, the
mean and the slowest step (where a request's first complete middle or a garbage collection
lands).  Beside each step's time, the rows' checks alone (``checks ms/step``): the rest is the
step's tensor work on the CPU (``topk`` over the dense logits and the mask), which a GPU does
where vLLM serves.  A pool cannot beat the number of cores: on a 2-core machine the curve
stops at 2 workers.  The set-up's objects are frozen out of Python's collector before the
replays, as vLLM's engine does once it has started (``freeze_gc_heap``), so that a full pass
here scans what the replays made, as it would there.

    python benchmarks/batch_constraint.py --cuts 128 --steps 16 --workers 1 2
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS_DIR, list_py_files, read_utf8, stdlib_root, table, write_results

from fimconstrain.decoding.loop.generate import FimDecoder
from fimconstrain.decoding.models.loading import load_model
from fimconstrain.decoding.tokens.fim_formats import build_prompt
from fimconstrain.engine import FimConstrainError, fim_checker
from fimconstrain.serving.batch import InlineChecker, RowQuery, constrain
from fimconstrain.serving.pool import ConstraintPool
from fimconstrain.serving.requests import FimArgs, TokenTable
from fimconstrain.serving.support import SamplerSupport

MIDDLE_LINES = 6
MIN_CHARS, MAX_CHARS = 2000, 20000  # file sizes (the prompt keeps what fits the window)
VERSION = "3.14"  # the decoder's default, as recorded
#: --samplers: the requests' sampler bound (None: the whole top-k mask)
SAMPLERS = {"mask": None, "greedy": SamplerSupport(greedy=True), "min_p": SamplerSupport(min_p=0.05)}


def cuts(count: int, seed: int) -> list[tuple[str, str, str]]:
    """(prefix, middle, suffix): ``MIDDLE_LINES`` lines taken out of the middle of each of
    ``count`` files."""
    import random

    rng, out = random.Random(seed), []
    files = list_py_files(stdlib_root())
    rng.shuffle(files)
    for path in files:
        text = read_utf8(path)
        if not text or not MIN_CHARS <= len(text) <= MAX_CHARS:
            continue
        lines = text.splitlines(keepends=True)
        index = rng.randrange(len(lines) // 4, 3 * len(lines) // 4)
        start = sum(map(len, lines[:index]))
        end = start + sum(map(len, lines[index : index + MIDDLE_LINES]))
        out.append((text[:start], text[start:end], text[end:]))
        if len(out) == count:
            break
    return out


def record(decoder: FimDecoder, cut: tuple[str, str, str], steps: int, keep: int):
    """The author's middle as tokens (a path the constraint accepts at every step) and the
    model's top ``keep`` logits at each of its first ``steps + 1`` positions (ids, values);
    None when the middle is shorter or the context is not a valid cut (it starts in a string)."""
    prefix, middle, suffix = cut
    tokens = decoder.codec.encode(middle)[: steps + 1]
    try:
        fim_checker(prefix, suffix, python_version=VERSION)
    except FimConstrainError:
        return None
    if len(tokens) <= steps:
        return None
    assert decoder.window is not None and decoder.fim_format is not None
    prompt = build_prompt(decoder.fim_format, decoder.codec, prefix, suffix, decoder.window - steps - 1)
    with torch.inference_mode():
        logits = decoder.backend.model(input_ids=torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 :]
    top = torch.topk(logits.float(), keep)
    return tokens, top.indices, top.values


def dense(recorded: list, step: int, vocab: int) -> torch.Tensor:
    """The batch's logits at ``step``: each row's recorded top values, the rest below them."""
    out = torch.full((len(recorded), vocab), -1e4)
    for row, (_, ids, values) in enumerate(recorded):
        out[row, ids[step]] = values[step]
    return out


class TimedChecks:
    """A batch checker whose ``check`` calls are timed: the rows' checks alone, without the
    step's tensor work (``topk`` and the mask over the dense logits, which a GPU does where vLLM
    serves)."""

    def __init__(self, checker):
        self.checker = checker
        self.seconds = 0.0

    def check(self, rows: list[RowQuery]) -> list[list[int]]:
        start = time.perf_counter()
        try:
            return self.checker.check(rows)
        finally:
            self.seconds += time.perf_counter() - start


def replay(
    checker,
    recorded: list,
    steps: int,
    top_k: int,
    vocab: int,
    cut_list: list,
    sampler: SamplerSupport | None = None,
) -> tuple[list[float], list[float]]:
    """Seconds per step 1..steps for the batch ``recorded`` (step 0 untimed: checkers built),
    and of each the rows' checks (:class:`TimedChecks`)."""
    for key in range(len(recorded)):
        checker.add(key, FimArgs(*cut_list[key], VERSION, top_k), (), sampler)
    times, checks = [], []
    timed = TimedChecks(checker)
    for step in range(steps + 1):
        logits = dense(recorded, step, vocab)
        timed.seconds = 0.0
        start = time.perf_counter()
        rows = [
            RowQuery(key, step - 1 if step else 0, (tokens[step - 1],) if step else (), (), ())
            for key, (tokens, _, _) in enumerate(recorded)
        ]
        constrain(timed, logits, rows, [top_k] * len(rows), [sampler] * len(rows))
        if step:
            times.append(time.perf_counter() - start)
            checks.append(timed.seconds)
    for key in range(len(recorded)):
        checker.remove(key)
    return times, checks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuts", type=int, default=128, help="real cuts recorded (the largest batch)")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="pool sizes to time")
    ap.add_argument("--steps", type=int, default=16, help="decoding steps timed per batch")
    ap.add_argument("--top-k", type=int, default=64, help="candidates per row (FimDecoder's default)")
    ap.add_argument(
        "--samplers",
        nargs="+",
        choices=list(SAMPLERS),
        default=list(SAMPLERS),
        help="the requests' sampler: the whole top-k mask, greedy, min_p 0.05",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out", type=Path, default=None, help=f"JSON (default: {RESULTS_DIR}/batch_constraint.json)"
    )
    args = ap.parse_args()
    torch.set_num_threads(1)

    loaded = load_model(runtime="transformers")
    decoder = FimDecoder(loaded)
    vocab = loaded.model.config.vocab_size
    cut_list, recorded = [], []
    for cut in cuts(args.cuts * 3, args.seed):
        found = record(decoder, cut, args.steps, args.top_k)
        if found is not None:
            cut_list.append((cut[0], cut[2]))
            recorded.append(found)
        if len(recorded) == args.cuts:
            break
    print(f"recorded {len(recorded)} cuts x {args.steps} steps (vocabulary {vocab}), {os.cpu_count()} CPUs")

    rows, results = [], []
    inline = InlineChecker(TokenTable.from_tokenizer(loaded.tokenizer))
    pools = {n: ConstraintPool(loaded.tokenizer, n) for n in args.workers}
    gc.collect()
    gc.freeze()
    try:
        for batch in (b for b in args.batches if b <= len(recorded)):
            batch_args = (recorded[:batch], args.steps, args.top_k, vocab, cut_list)
            measured = {("mask", 0): replay(inline, *batch_args)}
            base = statistics.median(measured["mask", 0][0])
            for name in args.samplers:
                for n, checker in [(0, inline), *pools.items()]:
                    if (name, n) not in measured:
                        measured[name, n] = replay(checker, *batch_args, SAMPLERS[name])
                    steps = measured[name, n][0]
                    t, checks = map(statistics.median, measured[name, n])
                    mean, slowest = statistics.fmean(steps), max(steps)
                    results.append(
                        {
                            "batch": batch,
                            "sampler": name,
                            "workers": n,
                            "ms_per_step": 1000 * t,
                            "check_ms_per_step": 1000 * checks,
                            "mean_ms_per_step": 1000 * mean,
                            "max_ms_per_step": 1000 * slowest,
                        }
                    )
                    where = f"{n} workers" if n else "in-process"
                    rows.append(
                        [
                            batch,
                            name,
                            where,
                            f"{1000 * t:.2f}",
                            f"{1000 * mean:.2f} / {1000 * slowest:.1f}",
                            f"{1000 * checks:.2f}",
                            f"{1000 * t / batch:.3f}",
                            f"{base / t:.2f}",
                        ]
                    )
    finally:
        for pool in pools.values():
            pool.close()
    headers = [
        "batch",
        "sampler",
        "checker",
        "ms/step (median)",
        "mean / slowest",
        "checks ms/step",
        "ms/row",
        "speed-up vs in-process mask",
    ]
    print(table(rows, headers))
    out = write_results("batch_constraint", args, {"cpus": os.cpu_count(), "results": results})
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
