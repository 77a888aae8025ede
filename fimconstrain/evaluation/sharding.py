"""An evaluation spread over machines or processes: ``eval --shard I/N`` on machines without Ray
(``eval --ray`` is :mod:`.ray_runs`), and ``merge`` to join the shards' results into the file a
single run would have written.

Paper 004 §VII ran its evaluation on 8 GPUs.  Each experiment's record depends only on its
example, its mode and the settings (greedy or seeded decoding, a fresh checker per constrained
mode), never on which process ran it, so the examples can be dealt out: shard ``I`` of ``N``
takes every ``N``-th example (counted over all the datasets in order, from the ``I``-th), which
spreads each dataset's files over the shards.  ``merge`` puts the records back in the
single-process order (dataset, example, mode) and says how much of the work is there, so it is
also the progress report across shards.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..command_line.arguments import HelpFormatter, positive_int
from ..engine.errors import InputError
from .examples import Example
from .inputs import one_line_errors, read_dataset, read_results
from .provenance import file_sha256

#: fields that measure time, which differ between any two runs (all others are the same)
TIMING_FIELDS = frozenset(
    {
        "model_seconds",
        "prefill_seconds",
        "checker_seconds",
        "setup_seconds",
        "ending_seconds",
        "constraint_seconds",
        "wall_seconds",
        "model_ms_per_token",
        "checker_ms_per_token",
        "model_ms_per_step",
        "constraint_ms_per_step",
        "parse_ms_per_step",
    }
)


def shard_spec(text: str) -> tuple[int, int]:
    """``I/N`` with 1 <= I <= N, as (I, N) (an argparse type)."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected I/N, e.g. 1/4") from None
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"{text!r}: I must be from 1 to N")
    return index, count


def add_distribution_options(ap: argparse.ArgumentParser) -> None:
    """``--shard``, ``--ray``, ``--actors`` and ``--ray-address`` for ``fimconstrain eval``."""
    ap.add_argument(
        "--shard",
        type=shard_spec,
        default=None,
        metavar="I/N",
        help="run only shard I of N (every N-th example from the I-th); join the shards' --out "
        "files with `fimconstrain merge`",
    )
    ap.add_argument("--ray", action="store_true", help="spread the examples over Ray actors (one model each)")
    ap.add_argument(
        "--actors",
        type=positive_int,
        default=None,
        metavar="N",
        help="with --ray: actors (default: one per GPU with --device cuda, else one per CPU)",
    )
    ap.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="with --ray: the cluster to join (e.g. auto); default: a local Ray",
    )


def select_shard(
    datasets: list[tuple[dict, list[Example]]], shard: tuple[int, int]
) -> list[tuple[dict, list[Example]]]:
    """The examples of shard ``(I, N)``: those whose position over all the datasets is I-1 mod N."""
    index, count = shard
    out, position = [], 0
    for dataset, examples in datasets:
        mine = [ex for offset, ex in enumerate(examples, position) if offset % count == index - 1]
        out.append((dataset, mine))
        position += len(examples)
    return out


def without_timings(record: dict) -> dict:
    """A record without the fields that measure time: what two runs of an experiment share."""
    return {k: v for k, v in record.items() if k not in TIMING_FIELDS}


def merge(datasets: Sequence[Path], shards: Sequence[Path]) -> tuple[list[dict], int]:
    """The shards' records in single-run order (datasets as given, examples in file order, modes
    in the order records came), one per key, and how many examples of the datasets have none.
    Two records with one key that differ in more than timings, or a record of another dataset,
    are an :class:`InputError`."""
    order: dict[tuple[str, str], int] = {}
    for path in datasets:
        sha = file_sha256(path)
        for example in read_dataset(path):
            order.setdefault((sha, example["id"]), len(order))
    records: dict[str, dict] = {}
    for path in shards:
        for rec in read_results(path):
            where = (rec["dataset_sha256"], rec["id"])
            if where not in order:
                raise InputError(f"{path}: record {rec['key']} is of none of the datasets given")
            seen = records.get(rec["key"])
            if seen is not None and without_timings(seen) != without_timings(rec):
                raise InputError(f"{path}: record {rec['key']} differs from an earlier one with its key")
            records.setdefault(rec["key"], rec)
    arrival = {key: n for n, key in enumerate(records)}
    merged = sorted(records.values(), key=lambda r: (order[r["dataset_sha256"], r["id"]], arrival[r["key"]]))
    covered = {(r["dataset_sha256"], r["id"]) for r in merged}
    return merged, len(order) - len(covered)


def merge_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="fimconstrain merge",
        formatter_class=HelpFormatter,
        description="Join the --out files of `fimconstrain eval --shard I/N` runs into one results file "
        "in the order a single run writes (datasets, examples, modes); says how much is there.",
        epilog="Exit codes: 0 merged (every example has records), 1 merged with examples missing, "
        "2 usage or input error.",
    )
    ap.add_argument("shards", nargs="+", type=Path, help="the shards' results files")
    ap.add_argument(
        "--datasets", nargs="+", type=Path, required=True, help="the dataset files, as given to eval"
    )
    ap.add_argument("--out", type=Path, required=True, help="the merged results (overwritten)")
    return ap


@one_line_errors("fimconstrain merge")
def main_merge(argv: list[str] | None = None) -> int:
    args = merge_parser().parse_args(argv)
    if args.out.resolve() in {p.resolve() for p in [*args.shards, *args.datasets]}:
        raise InputError(f"{args.out}: --out is one of the inputs; merge into a new file")
    records, missing = merge(args.datasets, args.shards)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for rec in records:
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    left = f"; {missing} examples have no records yet (shards still running?)" if missing else ""
    print(f"{len(records)} records from {len(args.shards)} files -> {args.out}{left}", file=sys.stderr)
    return 1 if missing else 0
