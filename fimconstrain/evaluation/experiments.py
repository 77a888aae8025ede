"""Running experiments, shared by ``fimconstrain eval`` in one process (:mod:`.runs`) and on Ray
actors (:mod:`.ray_runs`): loading the decoder, which experiments are missing, running one
example's modes and appending the records."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..decoding.editor.policy import wants_multiline
from ..decoding.loop import jedi_attributes
from ..decoding.loop.options import DecodeOptions
from ..decoding.model_choice import ModelChoice
from .examples import Example
from .modes import CONSTRAINED, MODES
from .provenance import Provenance, RunSettings, model_folder, record_key, weights_sha256
from .records import base_record, checked_fields, result_fields, sample_id, truncated_fields


def open_decoder(args: argparse.Namespace):
    """Load the model and return (provenance, decoder): what a process running experiments needs."""
    from ..engine.versions import format_version

    decoder, _ = ModelChoice.of(args).open(order=args.order, python_version=args.python_version)
    loaded = decoder.backend
    folder = model_folder(loaded.name)
    settings = RunSettings(
        args.max_new_tokens,
        args.top_k,
        args.temperature,
        args.top_p,
        args.seed,
        args.order or loaded.fim_format.order,
        format_version(args.python_version),
        args.device,
        str(getattr(getattr(loaded, "model", None), "dtype", "")) or loaded.runtime,
        args.shape,
    )
    provenance = Provenance(str(folder), weights_sha256(folder), loaded.fim_format.name, settings)
    return provenance, decoder


def warm_up(decoder) -> None:
    """Load the grammar, run the model once and load jedi (the names guide's first answer takes
    a second or more, as the language server's warm-up knows), so that the first experiments'
    timings are not inflated."""
    decoder.generate("x = (", ")\n", mode="constrained", max_new_tokens=2)
    jedi = jedi_attributes.shared()
    if jedi is not None:
        try:
            jedi.warm_up().result(timeout=60)
        except TimeoutError:  # (a jedi that never loads: the guide fails open as it would anyway)
            pass


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


def nothing_to_do(args: argparse.Namespace, datasets: list, sid: str) -> int:
    """Say that every experiment is already in ``--out`` (exit 0)."""
    count = sum(len(examples) for _, examples in datasets) * len(args.modes) * args.samples
    print(f"nothing to do: all {count} experiments (settings {sid}) are in {args.out}", file=sys.stderr)
    return 0


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
    common: dict = dict(
        max_new_tokens=s.max_new_tokens,
        top_k=s.top_k,
        temperature=s.temperature,
        top_p=s.top_p,
        seed=s.seed + sample,
    )
    base = lambda mode: base_record(dataset, example, mode, provenance, with_context, sample)
    if {"unconstrained", "checked", "truncated"} & set(modes):
        start = time.perf_counter()
        options = DecodeOptions.evaluation("unconstrained", **common)
        result = decoder.generate(example.prefix, example.suffix, options)
        wall = time.perf_counter() - start
        if "unconstrained" in modes:
            yield {**base("unconstrained"), **result_fields(result, example), "wall_seconds": wall}
        if "checked" in modes:
            yield {**base("checked"), **checked_fields(decoder, result, example), "wall_seconds": wall}
        if "truncated" in modes:
            yield {**base("truncated"), **truncated_fields(result, example), "wall_seconds": wall}
    for mode in (m for m in modes if m in CONSTRAINED or m == "prefix"):
        clear_caches()  # a cold build each time, so that the one-time cost is measured honestly
        start = time.perf_counter()
        options = DecodeOptions.evaluation(mode, **common, **_shape(mode, s.shape, example))
        result = decoder.generate(example.prefix, example.suffix, options)
        yield {**base(mode), **result_fields(result, example), "wall_seconds": time.perf_counter() - start}


def _shape(mode: str, shape: str, example: Example) -> dict:
    """The project's constrained mode under ``--shape cursor``: one line or a block as the cursor
    asks (:func:`~fimconstrain.decoding.editor.policy.wants_multiline`, the editor's rule); else nothing."""
    if mode != "constrained" or shape != "cursor":
        return {}
    single_line = not wants_multiline(example.prefix, example.suffix)
    return {"single_line": single_line, "end_of_block": not single_line}


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
