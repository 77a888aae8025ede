"""Run decoding modes over FIM datasets (paper 004 §VII-B): ``fimconstrain eval``.

One JSONL record per (dataset, example, mode) is appended to ``--out``.  A record's key holds
the dataset's content hash, the example, the mode and the settings id (model folder and weights
hash, FIM format, every decoding setting: :mod:`.provenance`), so rerunning the same command
resumes an interrupted run and a run with any other setting runs its own experiments.

Timings are per decoding step (one choice of the next token, the stop token included; paper
Fig. 11 "overhead per generated token"): the model's forward passes, the constraint's checks,
and apart from them the once-per-generation costs: building the checker (``setup_seconds``)
and ending the middle (``ending_seconds``: best-stop cut, finish search).  Checked-unconstrained
is timed as the paper's baseline checks online: one ``ast.parse`` of the file after every step.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..decoding.command_line import (
    HelpFormatter,
    add_model_options,
    non_negative_float,
    non_negative_int,
    positive_int,
    probability,
)
from ..decoding.oracle import ast_parses
from ..engine.errors import InputError
from .benchmarks import add_benchmark_options, benchmark_datasets, limits_of
from .examples import Example
from .inputs import one_line_errors, read_dataset, read_results
from .judging import Judge
from .provenance import (
    Provenance,
    Settings,
    file_sha256,
    model_folder,
    record_key,
    weights_sha256,
)
from .sharding import add_distribution_options

#: the paper's candidate count (§VII-B: "up to the top 50 token candidates")
PAPER_TOP_K = 50
#: the modes an evaluation runs, and what each passes to ``FimDecoder.generate`` (checked is
#: derived from the unconstrained run).  The baselines take the prefix as written (no token
#: healing), as the paper's do.
GENERATE: dict[str, dict] = {
    "unconstrained": dict(mode="unconstrained", heal=False),
    "checked": dict(mode="unconstrained", heal=False),
    "constrained": dict(mode="constrained", finish_in_budget=True),
    "constrained-nofinish": dict(mode="constrained", finish_in_budget=False),
    "paper": dict(
        mode="constrained",
        finish_in_budget=False,
        vocabulary_fallback=False,
        split_ending=False,
        heal=False,
        top_k=PAPER_TOP_K,
    ),
    "prefix": dict(mode="prefix"),
}
MODES = tuple(GENERATE)
#: what ``--modes`` defaults to: all but prefix-only decoding (which needs a token-mask store)
DEFAULT_MODES = tuple(m for m in MODES if m != "prefix")
CONSTRAINED = ("constrained", "constrained-nofinish", "paper")
MODE_HELP = (
    "unconstrained: the model alone (greedy, no token healing); "
    "checked: unconstrained cut to its longest token prefix that parses, timed as one ast.parse per "
    "step (§VII-B); "
    "paper: §VII-B's constrained decoder exactly (top 50 candidates and no more, stuck when none "
    "passes, best-stop cut at the budget, no token healing, no split ending, no finish search); "
    "constrained: the project's decoder (top K, then the whole vocabulary; token healing; the "
    "middle may end inside the model's token; the end-of-middle policy's finish search at the "
    "budget); constrained-nofinish: the same without the finish search; "
    "prefix: constrained by the left context only (the suffix unseen by the constraint), candidates "
    "pre-masked by the token-mask store"
)


# ---------------------------------------------------------------- one example


def sample_id(example_id: str, sample: int) -> str:
    """What a record's key names: the example, and with ``--samples`` which of its samples (the
    first sample's key is the example's, as a greedy run writes it)."""
    return f"{example_id}#{sample}" if sample else example_id


def base_record(
    dataset: dict, example: Example, mode: str, provenance: Provenance, with_context: bool, sample: int = 0
) -> dict:
    """The fields every record has: which task, sample, mode and settings; the context's size and
    whether the file already parses with an empty middle (the trivial floor)."""
    rec = {
        "key": record_key(dataset["sha256"], sample_id(example.id, sample), mode, provenance.settings_id),
        "dataset": dataset["name"],
        "dataset_sha256": dataset["sha256"],
        "kind": example.kind,
        "id": example.id,
        "sample": sample,
        "mode": mode,
        "settings_id": provenance.settings_id,
        "provenance": provenance.to_dict(),
        "top_k": GENERATE[mode].get("top_k", provenance.settings.top_k),
        "path": example.path,
        "sha256": example.sha256,
        "prefix_chars": len(example.prefix),
        "suffix_chars": len(example.suffix),
        "context_chars": len(example.prefix) + len(example.suffix),
        "truth": example.middle,
        "empty_parses": ast_parses(example.prefix + example.suffix),
    }
    if with_context:
        rec.update(prefix=example.prefix, suffix=example.suffix)
    return rec


def result_fields(result, example: Example, middle: str | None = None) -> dict:
    """Outcome and per-step timings of one generation; success is ``ast.parse`` of the file."""
    middle = result.middle if middle is None else middle
    fields = {k: v for k, v in result.to_dict().items() if k not in ("mode", "middle")}
    steps = max(1, result.steps)
    per_step = result.checker_seconds - result.ending_seconds
    fields.update(
        middle=middle,
        success=ast_parses(example.prefix + middle + example.suffix),
        exact=middle == example.middle,
        constraint_seconds=per_step,
        model_ms_per_step=1000 * result.model_seconds / steps,
        constraint_ms_per_step=1000 * per_step / steps,
    )
    return fields


def online_parse_seconds(decoder, result, example: Example) -> list[float]:
    """The checked baseline's work at each step: one timed ``ast.parse`` of the file with the
    middle written so far (the last step, a stop token, checks the whole middle again)."""
    from ..decoding.generate import middle_of

    times = []
    for step in range(result.steps):
        program = example.prefix + middle_of(decoder.codec, result.token_ids[: step + 1]) + example.suffix
        start = time.perf_counter()
        ast_parses(program)
        times.append(time.perf_counter() - start)
    return times


def checked_fields(decoder, result, example: Example) -> dict:
    """Checked-unconstrained from an unconstrained run: its tokens cut to the longest prefix that
    parses (§VII-B; greedy decoding would repeat the same tokens), timed as checking online."""
    from ..decoding.generate import longest_valid_prefix

    middle = longest_valid_prefix(example.prefix, decoder.codec, result.token_ids, example.suffix)
    parses = online_parse_seconds(decoder, result, example)
    fields = result_fields(result, example, middle)
    fields.update(
        raw_middle=result.middle,
        valid=fields["success"],
        derived_from="unconstrained",
        checker_seconds=sum(parses),
        constraint_seconds=sum(parses),
        ending_seconds=0.0,  # checking online, the last step that parsed is known: no cut search
        constraint_ms_per_step=1000 * sum(parses) / max(1, len(parses)),
        parse_ms_per_step=1000 * sum(parses) / max(1, len(parses)),
    )
    return fields


def run_example(
    decoder,
    dataset: dict,
    example: Example,
    modes: Iterable[str],
    provenance: Provenance,
    with_context: bool = False,
    sample: int = 0,
) -> Iterator[dict]:
    """The records of ``example`` for each of ``modes``; checked comes from the unconstrained run.
    Sample ``i`` (``--samples``) decodes with the seed ``--seed`` + ``i``."""
    from ..engine import clear_caches

    modes = [m for m in MODES if m in set(modes)]
    s = provenance.settings
    common = dict(
        max_new_tokens=s.max_new_tokens,
        top_k=s.top_k,
        temperature=s.temperature,
        top_p=s.top_p,
        seed=s.seed + sample,
    )
    base = lambda mode: base_record(dataset, example, mode, provenance, with_context, sample)
    if "unconstrained" in modes or "checked" in modes:
        start = time.perf_counter()
        result = decoder.generate(example.prefix, example.suffix, **{**common, **GENERATE["unconstrained"]})
        wall = time.perf_counter() - start
        if "unconstrained" in modes:
            yield {**base("unconstrained"), **result_fields(result, example), "wall_seconds": wall}
        if "checked" in modes:
            yield {**base("checked"), **checked_fields(decoder, result, example), "wall_seconds": wall}
    for mode in (m for m in modes if m in CONSTRAINED or m == "prefix"):
        clear_caches()  # a cold build each time, so that the one-time cost is measured honestly
        start = time.perf_counter()
        result = decoder.generate(example.prefix, example.suffix, **{**common, **GENERATE[mode]})
        yield {**base(mode), **result_fields(result, example), "wall_seconds": time.perf_counter() - start}


def warm_up(decoder) -> None:
    """Load the grammar and run the model once so that the first experiment's timings are not inflated."""
    decoder.generate("x = (", ")\n", mode="constrained", max_new_tokens=2)


# ---------------------------------------------------------------- command line


def eval_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain eval`` (the model options are ``fimconstrain complete``'s)."""
    from ..engine.versions import add_python_version_option, format_version
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
    add_model_options(ap)
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
        "--threads", type=positive_int, default=1, help="torch CPU threads (recorded with the timings)"
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
    from .sharding import select_shard

    datasets = []
    for path in args.datasets:
        if path.resolve() == args.out.resolve():
            raise InputError(f"{path}: given as a dataset and as --out; results need a file of their own")
        examples = [Example(**e) for e in read_dataset(path)[: args.n]]
        datasets.append(({"name": path.stem, "path": str(path), "sha256": file_sha256(path)}, examples))
    datasets += benchmark_datasets(args)
    return select_shard(datasets, args.shard) if args.shard else datasets


def open_decoder(args: argparse.Namespace):
    """Load the model and return (provenance, decoder): what a process running experiments needs."""
    from ..decoding.generate import FimDecoder
    from ..decoding.models import load_model
    from ..engine.versions import format_version

    loaded = load_model(
        args.model, fim_format=args.fim_format, trust_remote_code=args.trust_remote_code, device=args.device
    )
    folder = model_folder(loaded.name)
    settings = Settings(
        args.max_new_tokens,
        args.top_k,
        args.temperature,
        args.top_p,
        args.seed,
        args.order,
        format_version(args.python_version),
        args.device,
        str(getattr(loaded.model, "dtype", "")),
    )
    provenance = Provenance(str(folder), weights_sha256(folder), loaded.fim_format.name, settings)
    decoder = FimDecoder(
        loaded.model,
        loaded.tokenizer,
        loaded.fim_format,
        order=args.order,
        python_version=args.python_version,
    )
    return provenance, decoder


def missing_experiments(
    datasets: list[tuple[dict, list[Example]]], modes: list[str], done: set[str], sid: str, samples: int = 1
) -> list[tuple[dict, Example, list[str], int]]:
    """(dataset, example, modes not in ``done``, sample) for every sample of every example with
    work left, in run order."""
    jobs = []
    for dataset, examples in datasets:
        for example in examples:
            for sample in range(samples):
                run = sample_id(example.id, sample)
                todo = [m for m in modes if record_key(dataset["sha256"], run, m, sid) not in done]
                if todo:
                    jobs.append((dataset, example, todo, sample))
    return jobs


def write_records(path: Path, batches: Iterable[list[dict]], total: int, threads: int) -> None:
    """Append each batch's records to ``path`` as they come (a killed run keeps what it wrote),
    with a progress bar over experiments."""
    from tqdm import tqdm

    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        path.open("a", encoding="utf-8") as out,
        tqdm(
            total=total, unit="run", desc="evaluating", mininterval=0.1 if sys.stderr.isatty() else 30
        ) as bar,
    ):
        for records in batches:
            for rec in records:
                rec["threads"] = threads
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                out.flush()
                bar.update(1)
                bar.set_postfix(dataset=rec["dataset"], mode=rec["mode"], refresh=False)


def run_all(args: argparse.Namespace) -> int:
    """Check the inputs, load the model, then run and append every missing record (with
    ``--ray``, on Ray actors: :mod:`.ray_runs`)."""
    datasets = read_datasets(args)
    done = done_keys(args.out)
    if args.ray:
        from .ray_runs import run_on_ray

        return run_on_ray(args, datasets, done)
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


def nothing_to_do(args: argparse.Namespace, datasets: list, sid: str) -> int:
    """Say that every experiment is already in ``--out`` (exit 0)."""
    count = sum(len(examples) for _, examples in datasets) * len(args.modes) * args.samples
    print(f"nothing to do: all {count} experiments (settings {sid}) are in {args.out}", file=sys.stderr)
    return 0
