"""What one evaluation record holds: one JSONL line per (dataset, example, sample, mode).

A record's key holds the dataset's content hash, the example, the mode and the settings id
(model folder and weights hash, FIM format, every decoding setting: :mod:`.provenance`), so
rerunning the same command resumes an interrupted run and a run with any other setting runs its
own experiments.

Timings are per decoding step (one choice of the next token, the stop token included; paper
Fig. 11 "overhead per generated token"): the model's forward passes, the constraint's checks,
and apart from them the once-per-generation costs: building the checker (``setup_seconds``)
and ending the middle (``ending_seconds``: best-stop cut, finish search).  Checked-unconstrained
is timed as the paper's baseline checks online: one ``ast.parse`` of the file after every step.
"""

from __future__ import annotations

import time

from ..decoding.loop.options import DecodeOptions
from ..decoding.loop.oracle import ast_parses
from .examples import Example
from .provenance import Provenance, record_key


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
        "top_k": DecodeOptions.evaluation(mode, top_k=provenance.settings.top_k).top_k,
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
    # (each step's constraint time stays out: the record keeps their sum, constraint_seconds)
    fields = {
        k: v for k, v in result.to_dict().items() if k not in ("mode", "middle", "step_checker_seconds")
    }
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
    from ..decoding.loop.validity import middle_of

    times = []
    for step in range(result.steps):
        program = example.prefix + middle_of(decoder.codec, result.token_ids[: step + 1]) + example.suffix
        start = time.perf_counter()
        ast_parses(program)
        times.append(time.perf_counter() - start)
    return times


def truncated_fields(result, example: Example) -> dict:
    """The unconstrained run's middle as the benchmark's harness post-processes it
    (:func:`.truncation.field_truncation`): the field's own baseline."""
    from .truncation import field_truncation

    fields = result_fields(result, example, field_truncation(example, result.middle))
    fields.update(raw_middle=result.middle, derived_from="unconstrained")
    return fields


def checked_fields(decoder, result, example: Example) -> dict:
    """Checked-unconstrained from an unconstrained run: its tokens cut to the longest prefix that
    parses (§VII-B; greedy decoding would repeat the same tokens), timed as checking online."""
    from ..decoding.loop.validity import longest_valid_prefix

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
