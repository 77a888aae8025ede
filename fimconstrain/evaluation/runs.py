"""``fimconstrain eval``: run decoding modes over FIM datasets (paper 004 §VII-B), resumably.

The command: its options, its inputs (datasets or benchmarks, the records already in ``--out``),
and the run of the missing experiments in this process or, with ``--ray``, on Ray actors
(:mod:`.ray_runs`); what an experiment writes is :mod:`.records`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..command_line.arguments import (
    HelpFormatter,
    add_model_options,
    non_negative_float,
    non_negative_int,
    positive_int,
    probability,
)
from ..decoding.models.loading import DEFAULT_MODEL_DIR
from ..engine.errors import InputError
from .benchmarks import add_benchmark_options, benchmark_datasets, limits_of
from .datasets import read_examples
from .examples import Example
from .experiments import missing_experiments, nothing_to_do, open_decoder, run_example, warm_up, write_records
from .inputs import one_line_errors, read_results
from .judging import Judge
from .modes import DEFAULT_MODES, MODE_HELP, MODES, PAPER_TOP_K
from .provenance import file_sha256
from .ray_runs import run_on_ray
from .sharding import add_distribution_options, select_shard


def eval_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain eval`` (the model options are ``fimconstrain complete``'s)."""
    from ..command_line.arguments import add_python_version_option
    from ..engine.versions import format_version
    from .datasets import interpreter_version

    ap = argparse.ArgumentParser(
        prog="fimconstrain eval",
        formatter_class=HelpFormatter,
        description="Run decoding modes over FIM datasets (paper 004 §VII-B); one JSONL record per "
        "experiment. Resumable: rerunning the same command skips the records already in --out; "
        "any other dataset content, model, FIM format or decoding setting runs its own records.",
        epilog=f"Modes: {MODE_HELP}. Exit codes: 0 done, 2 usage or input error.",
    )
    ap.add_argument(
        "datasets", nargs="*", type=Path, help="dataset JSONL files (fimconstrain dataset); or --benchmark"
    )
    ap.add_argument("--out", type=Path, required=True, help="results JSONL (appended to)")
    ap.add_argument(
        "-n",
        type=positive_int,
        default=None,
        metavar="N",
        help="the first N examples of each dataset (default: all)",
    )
    ap.add_argument(
        "--modes",
        nargs="+",
        choices=MODES,
        default=list(DEFAULT_MODES),
        metavar="MODE",
        help=f"{', '.join(MODES)} (default: all but prefix)",
    )
    add_benchmark_options(ap)
    add_model_options(ap, threads=1)
    # the shipped checkpoint under transformers, as every recorded result was measured: on
    # llama.cpp it is `--runtime llama`
    ap.set_defaults(model=str(DEFAULT_MODEL_DIR))
    ap.add_argument("--device", default="cpu", help="torch device for the model, e.g. cuda or cuda:1")
    ap.add_argument(
        "--max-new-tokens", type=positive_int, default=64, metavar="N", help="token budget (paper: 500)"
    )
    ap.add_argument(
        "--top-k",
        type=positive_int,
        default=PAPER_TOP_K,
        metavar="K",
        help="constrained/constrained-nofinish: candidates checked before the whole vocabulary is "
        f"scanned (the paper mode always checks the top {PAPER_TOP_K} and no more)",
    )
    ap.add_argument(
        "--temperature", type=non_negative_float, default=0.0, metavar="T", help="0: greedy, as in the paper"
    )
    ap.add_argument("--top-p", type=probability, default=1.0, metavar="P", help="nucleus mass when sampling")
    ap.add_argument("--seed", type=non_negative_int, default=0, help="sampling seed (sample i: seed + i)")
    ap.add_argument(
        "--samples",
        type=positive_int,
        default=1,
        metavar="N",
        help="samples per example and mode, for pass@k (needs --temperature > 0 when N > 1); raising N "
        "later resumes, running only the new samples",
    )
    ap.add_argument(
        "--shape",
        choices=("cursor", "free"),
        default="cursor",
        help="constrained: cursor, one line or a block as the cursor asks (the editor's rule: code after "
        "the cursor on its line asks for one line); free, no line policy (paper 004 §VII-B)",
    )
    ap.add_argument("--with-context", action="store_true", help="store prefix and suffix in every record")
    add_distribution_options(ap)
    add_python_version_option(
        ap, format_version(interpreter_version()), "this interpreter's, whose ast.parse judges success"
    )
    return ap


@one_line_errors("fimconstrain eval")
def main_eval(argv: list[str] | None = None) -> int:
    """Run the experiments that are not in ``--out`` yet (torch threads restored after)."""
    import torch

    ap = eval_parser()
    args = ap.parse_args(argv)
    if not args.datasets and not args.benchmark:
        ap.error("give dataset files, or --benchmark NAME (with --data DIR)")
    if args.samples > 1 and args.temperature == 0:
        ap.error("--samples N > 1 needs --temperature > 0 (greedy decoding repeats one sample)")
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return run_all(args)
    finally:
        torch.set_num_threads(threads)


def done_keys(path: Path) -> set[str]:
    """Keys of the records already in ``path``; a line cut short by an interrupted run is dropped."""
    if not path.exists():
        return set()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])
    try:
        return {rec["key"] for rec in read_results(path)}
    except InputError as error:
        raise InputError(f"--out: {error}") from None


def read_datasets(args: argparse.Namespace) -> list[tuple[dict, list[Example]]]:
    """Each dataset (name, path, content hash) with its first ``-n`` examples, and with
    ``--shard`` only this shard's examples (:func:`.sharding.select_shard`)."""
    datasets = []
    for path in args.datasets:
        if path.resolve() == args.out.resolve():
            raise InputError(f"{path}: given as a dataset and as --out; results need a file of their own")
        examples = read_examples(path)[: args.n]
        datasets.append(({"name": path.stem, "path": str(path), "sha256": file_sha256(path)}, examples))
    datasets += benchmark_datasets(args)
    return select_shard(datasets, args.shard) if args.shard else datasets


def run_all(args: argparse.Namespace) -> int:
    """Check the inputs, then run every missing experiment here or, with ``--ray``, on Ray actors."""
    datasets = read_datasets(args)
    done = done_keys(args.out)
    return run_on_ray(args, datasets, done) if args.ray else run_here(args, datasets, done)


def run_here(args: argparse.Namespace, datasets: list, done: set[str]) -> int:
    """Load the model, then run and append every missing record in this process."""
    provenance, decoder = open_decoder(args)
    sid = provenance.settings_id
    jobs = missing_experiments(datasets, args.modes, done, sid, args.samples)
    total = sum(len(todo) for _, _, todo, _ in jobs)
    if total == 0:
        return nothing_to_do(args, datasets, sid)
    warm_up(decoder)
    with Judge(datasets, limits_of(args), args.exec_workers) as judge:
        batches = (
            list(run_example(decoder, ds, ex, todo, provenance, args.with_context, sample))
            for ds, ex, todo, sample in jobs
        )
        write_records(args.out, judge.judged(batches), total, args.threads)
    print(
        f"{total} experiments run (settings {sid}: model {provenance.model}, "
        f"format {provenance.fim_format}), {len(done)} records were already in {args.out}",
        file=sys.stderr,
    )
    return 0
