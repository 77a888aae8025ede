"""The paper's evaluation (004 §VII): run decoding modes over FIM datasets, then print Tables I/II and plots.

``main_eval`` writes one JSONL record per (dataset, example, mode) and skips
records already in its output, so an interrupted run resumes where it stopped.
``main_report`` reads those records and prints the tables (rows: unconstrained
✓ / ✗ and checked-unconstrained ✗; columns: constrained ✓ / ✗), success
rates, the constraint's per-token cost against the model's step time, and
draws PNG plots of one-time and per-token overhead against context size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..decoding.oracle import ast_parses
from .datasets import Example, read_examples

#: record modes: unconstrained, checked-unconstrained, constrained with budget-aware finish on / off
MODES = ("unconstrained", "checked", "constrained", "constrained-nofinish")
CONSTRAINED = ("constrained", "constrained-nofinish")
NAMES = {"boundary": "Stack-Boundary", "randspan": "Stack-RandSpan"}
TITLES = {"boundary": "Table I: Stack-Boundary", "randspan": "Table II: Stack-RandSpan"}
ROW_NOTE = (
    "Rows as in the paper: unconstrained ✓; unconstrained ✗ but checked-unconstrained ✓; "
    "checked-unconstrained ✗ (so unconstrained ✗ too)."
)
ROWS = ("Unconstrained ✓", "Unconstrained ✗", "Checked Unconstrained ✗")


# ---------------------------------------------------------------- running


@dataclass
class EvalOptions:
    """Decoding settings shared by every mode (paper: greedy, top-50 candidates)."""

    max_new_tokens: int = 64
    top_k: int = 50
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    with_context: bool = False


def record_key(dataset: str, example_id: str, mode: str) -> str:
    return f"{dataset}|{example_id}|{mode}"


def base_record(dataset: str, example: Example, mode: str, opts: EvalOptions) -> dict:
    """The fields every record has: which task, which mode, the context's size (and texts if asked)."""
    rec = {
        "key": record_key(dataset, example.id, mode),
        "dataset": dataset,
        "kind": example.kind,
        "id": example.id,
        "mode": mode,
        "path": example.path,
        "sha256": example.sha256,
        "prefix_chars": len(example.prefix),
        "suffix_chars": len(example.suffix),
        "context_chars": len(example.prefix) + len(example.suffix),
        "truth": example.middle,
        "max_new_tokens": opts.max_new_tokens,
        "top_k": opts.top_k,
        "temperature": opts.temperature,
    }
    if opts.with_context:
        rec.update(prefix=example.prefix, suffix=example.suffix)
    return rec


def result_fields(result, example: Example, max_new_tokens: int) -> dict:
    """Outcome and timings of one generation; success is ``ast.parse`` of the reassembled file."""
    fields = {k: v for k, v in result.to_dict().items() if k != "mode"}
    fields.update(
        success=ast_parses(example.prefix + result.middle + example.suffix),
        exact=result.middle == example.middle,
        hit_budget=result.stopped in ("budget", "best-stop", "finished") or result.tokens >= max_new_tokens,
        constraint_seconds=result.checker_seconds,
        overhead_fraction=result.checker_seconds / result.model_seconds if result.model_seconds > 0 else None,
    )
    return fields


def checked_fields(decoder, result, example: Example, max_new_tokens: int) -> dict:
    """Checked-unconstrained from an unconstrained run: cut its tokens to the longest prefix that
    parses (§VII-B).

    Greedy decoding is deterministic, so a second run would give the same tokens.
    ``parse_ms`` is one ``ast.parse`` of the whole file (best of 3): what checking online costs per token.
    """
    from ..decoding.generate import longest_valid_prefix

    start = time.perf_counter()
    middle = longest_valid_prefix(
        example.prefix, decoder.codec, result.token_ids, example.suffix, healed=result.healed
    )
    cut_seconds = time.perf_counter() - start
    parse_ms = 1000 * parse_seconds(example.prefix + result.middle + example.suffix)
    fields = result_fields(result, example, max_new_tokens)
    fields.update(
        raw_middle=result.middle,
        middle=middle,
        checker_seconds=cut_seconds,
        constraint_seconds=cut_seconds,
        parse_ms=parse_ms,
        derived_from="unconstrained",
        success=ast_parses(example.prefix + middle + example.suffix),
        exact=middle == example.middle,
        overhead_fraction=cut_seconds / result.model_seconds if result.model_seconds > 0 else None,
    )
    fields["valid"] = fields["success"]
    return fields


def parse_seconds(program: str, repeat: int = 3) -> float:
    """The fastest of ``repeat`` timed ``ast.parse`` calls (one slow outlier, e.g. a GC pause,
    is not the cost)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        ast_parses(program)
        best = min(best, time.perf_counter() - start)
    return best


def run_example(
    decoder, dataset: str, example: Example, modes: Iterable[str], opts: EvalOptions
) -> Iterator[dict]:
    """The records of ``example`` for each mode in ``modes``; checked comes from the unconstrained run."""
    from ..engine import clear_caches

    modes = [m for m in MODES if m in set(modes)]
    common = dict(
        max_new_tokens=opts.max_new_tokens,
        top_k=opts.top_k,
        temperature=opts.temperature,
        top_p=opts.top_p,
        seed=opts.seed,
    )
    if "unconstrained" in modes or "checked" in modes:
        start = time.perf_counter()
        result = decoder.generate(example.prefix, example.suffix, mode="unconstrained", **common)
        wall = time.perf_counter() - start
        if "unconstrained" in modes:
            yield {
                **base_record(dataset, example, "unconstrained", opts),
                **result_fields(result, example, opts.max_new_tokens),
                "wall_seconds": wall,
            }
        if "checked" in modes:
            yield {
                **base_record(dataset, example, "checked", opts),
                **checked_fields(decoder, result, example, opts.max_new_tokens),
                "wall_seconds": wall,
            }
    for mode in (m for m in modes if m in CONSTRAINED):
        finish = mode == "constrained"  # budget-aware finish on, or off for constrained-nofinish
        clear_caches()  # a cold build each time, so the one-time cost is measured honestly
        start = time.perf_counter()
        result = decoder.generate(
            example.prefix, example.suffix, mode="constrained", finish_in_budget=finish, **common
        )
        yield {
            **base_record(dataset, example, mode, opts),
            **result_fields(result, example, opts.max_new_tokens),
            "finish": finish,
            "wall_seconds": time.perf_counter() - start,
        }


def done_keys(path: Path) -> set[str]:
    """Keys of the records already in ``path``; a line cut short by an interrupted run is dropped."""
    if not path.exists():
        return set()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])
    return {rec["key"] for rec in read_records([path])}


def read_records(paths: Iterable[Path]) -> list[dict]:
    """Every record of the JSONL files (a later record with the same key replaces an earlier one)."""
    by_key: dict[str, dict] = {}
    for path in paths:
        with Path(path).open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                by_key[rec["key"]] = rec
    return list(by_key.values())


def warm_up(decoder) -> None:
    """Load the grammar and run the model once so that the first experiment's timings are not inflated."""
    decoder.generate("x = (", ")\n", mode="constrained", max_new_tokens=2)


def eval_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain eval``."""
    ap = argparse.ArgumentParser(
        prog="fimconstrain eval",
        description="Run decoding modes over FIM datasets; one JSONL record per experiment, "
        "resumable (records already in --out are skipped).",
    )
    ap.add_argument("datasets", nargs="+", type=Path, help="dataset JSONL files (fimconstrain dataset)")
    ap.add_argument("--out", type=Path, required=True, help="results JSONL (appended to)")
    ap.add_argument("-n", type=int, default=None, help="first N examples of each dataset (default: all)")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument(
        "--model", default=None, help="model folder or cached hub id (default: the shipped model)"
    )
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=50, help="candidates checked before a full scan (paper: 50)")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy, as in the paper")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (timings are reported for this)"
    )
    ap.add_argument("--with-context", action="store_true", help="store prefix and suffix in every record")
    from ..engine.versions import add_python_version_option, format_version
    from .datasets import interpreter_version

    add_python_version_option(
        ap, format_version(interpreter_version()), "this interpreter's, whose ast.parse judges success"
    )
    return ap


def main_eval(argv: list[str] | None = None) -> int:
    """Run the experiments that are not in ``--out`` yet, with a progress bar (torch threads
    restored after)."""
    import torch

    args = eval_parser().parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return run_all(args)
    finally:
        torch.set_num_threads(threads)


def run_all(args: argparse.Namespace) -> int:
    """Load the model, then run and append every missing (dataset, example, mode) record."""
    from tqdm import tqdm

    from ..decoding.generate import FimDecoder
    from ..decoding.models import load_model
    from ..engine.errors import FimConstrainError
    from ..engine.versions import format_version

    done = done_keys(args.out)
    todo = [(path.stem, ex) for path in args.datasets for ex in read_examples(path)[: args.n]]
    missing = {
        (ds, ex.id): [m for m in args.modes if record_key(ds, ex.id, m) not in done] for ds, ex in todo
    }
    total = sum(map(len, missing.values()))
    if total == 0:
        print(
            f"nothing to do: all {len(todo) * len(args.modes)} experiments are in {args.out}", file=sys.stderr
        )
        return 0
    try:
        loaded = load_model(args.model)
    except FimConstrainError as error:
        print(f"fimconstrain eval: {error}", file=sys.stderr)
        return 2
    decoder = FimDecoder(
        loaded.model, loaded.tokenizer, loaded.fim_format, python_version=args.python_version
    )
    opts = EvalOptions(
        args.max_new_tokens, args.top_k, args.temperature, args.top_p, args.seed, args.with_context
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    warm_up(decoder)
    with (
        args.out.open("a", encoding="utf-8") as out,
        tqdm(
            total=total, unit="run", desc="evaluating", mininterval=0.1 if sys.stderr.isatty() else 30
        ) as bar,
    ):
        for dataset, example in todo:
            for rec in run_example(decoder, dataset, example, missing[dataset, example.id], opts):
                rec["model"] = loaded.name
                rec["python_version"] = format_version(decoder.version_for())
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                out.flush()
                bar.update(1)
                bar.set_postfix(dataset=dataset, mode=rec["mode"], refresh=False)
    print(f"{total} experiments run, {len(done)} were already in {args.out}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------- report


def table_counts(by_mode: dict[str, dict[str, dict]], constrained: str) -> dict | None:
    """The paper's table: rows unconstrained ✓ / ✗ (checked ✓) / checked ✗, columns constrained ✓ / ✗."""
    needed = ("unconstrained", "checked", constrained)
    if not all(by_mode.get(m) for m in needed):
        return None
    ids = set.intersection(*(set(by_mode[m]) for m in needed))
    counts = {row: [0, 0] for row in ROWS}
    for i in ids:
        row = (
            ROWS[0]
            if by_mode["unconstrained"][i]["success"]
            else ROWS[1]
            if by_mode["checked"][i]["success"]
            else ROWS[2]
        )
        counts[row][0 if by_mode[constrained][i]["success"] else 1] += 1
    return counts


def format_table(title: str, counts: dict) -> str:
    """The table as the paper lays it out, with row and column totals."""
    head = ["", "Constrained ✓", "Constrained ✗", "Total"]
    body = [[row, ok, bad, ok + bad] for row, (ok, bad) in counts.items()]
    body.append(["Total", sum(r[1] for r in body), sum(r[2] for r in body), sum(r[3] for r in body)])
    widths = [max(len(str(r[c])) for r in [head] + body) for c in range(4)]
    line = lambda r: (
        "| "
        + " | ".join(
            str(v).ljust(w) if c == 0 else str(v).rjust(w) for c, (v, w) in enumerate(zip(r, widths))
        )
        + " |"
    )
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([title, line(head), rule] + [line(r) for r in body])


def success_rates(records: list[dict]) -> dict:
    """Per dataset and mode: experiments, successes, rate, budget hits, mean tokens."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for rec in records:
        groups[rec["dataset"], rec["mode"]].append(rec)
    return {
        f"{ds}/{mode}": {
            "n": len(rs),
            "success": sum(r["success"] for r in rs),
            "rate": sum(r["success"] for r in rs) / len(rs),
            "hit_budget": sum(r["hit_budget"] for r in rs),
            "mean_tokens": statistics.fmean(r["tokens"] for r in rs),
            "stopped": dict(sorted(Counter(r["stopped"] for r in rs).items())),
        }
        for (ds, mode), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], MODES.index(kv[0][1])))
    }


def overhead_summary(records: list[dict]) -> dict:
    """Constraint time per token against the model's step time, and the one-time build cost,
    for constrained runs."""
    cons = [r for r in records if r["mode"] in CONSTRAINED and r["tokens"] > 0 and r["model_seconds"] > 0]
    checked = [r for r in records if r["mode"] == "checked" and "parse_ms" in r]
    if not cons:
        return {}
    tokens = sum(r["tokens"] for r in cons)
    model_s, constraint_s = sum(r["model_seconds"] for r in cons), sum(r["constraint_seconds"] for r in cons)
    setup = [r for r in records if r["mode"] in CONSTRAINED]
    return {
        "experiments": len(cons),
        "tokens": tokens,
        "model_ms_per_token": 1000 * model_s / tokens,
        "constraint_ms_per_token": 1000 * constraint_s / tokens,
        "overhead_fraction": constraint_s / model_s,
        "median_overhead_fraction": statistics.median(
            r["constraint_seconds"] / r["model_seconds"] for r in cons
        ),
        "setup_ms_mean": 1000 * statistics.fmean(r["setup_seconds"] for r in setup),
        "setup_ms_per_1000_chars": 1e6
        * sum(r["setup_seconds"] for r in setup)
        / max(1, sum(r["context_chars"] for r in setup)),
        "checked_parse_ms_per_token": statistics.fmean(r["parse_ms"] for r in checked) if checked else None,
    }


def format_rates(rates: dict, overhead: dict) -> str:
    """Success rates and the overhead figures as plain text."""
    lines = ["Success rates (ast.parse of prefix + middle + suffix):"]
    for name, r in rates.items():
        lines.append(
            f"  {name:<40} {r['success']:>5}/{r['n']:<5} {100 * r['rate']:6.1f}%   "
            f"hit budget {r['hit_budget']:>4}   mean tokens {r['mean_tokens']:5.1f}   stopped: "
            + ", ".join(f"{k} {v}" for k, v in r["stopped"].items())
        )
    if overhead:
        o = overhead
        lines += [
            "",
            "Constraint overhead (constrained modes, model prefill and one-time build excluded):",
            f"  model step {o['model_ms_per_token']:.2f} ms/token, "
            f"constraint {o['constraint_ms_per_token']:.2f} ms/token: "
            f"{100 * o['overhead_fraction']:.1f}% of the model's step time "
            f"(median per experiment {100 * o['median_overhead_fraction']:.1f}%)",
            f"  one-time build: mean {o['setup_ms_mean']:.1f} ms, {o['setup_ms_per_1000_chars']:.2f} ms per "
            f"1,000 characters of context (work the checker defers to its first EOS check counts per token)",
        ]
        if o["checked_parse_ms_per_token"] is not None:
            lines.append(
                f"  checked-unconstrained, checking online: one ast.parse of the file per token = "
                f"{o['checked_parse_ms_per_token']:.2f} ms/token"
            )
    return "\n".join(lines)


def draw_plots(records: list[dict], out_dir: Path) -> list[Path]:
    """PNG scatter plots against context size: one-time build cost, and per-token overhead (paper Fig. 11)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cons = [r for r in records if r["mode"] == "constrained"] or [
        r for r in records if r["mode"] in CONSTRAINED
    ]
    paths = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for kind in sorted({r["kind"] for r in cons}):
        rs = [r for r in cons if r["kind"] == kind]
        ax.scatter(
            [r["context_chars"] for r in rs],
            [1000 * r["setup_seconds"] for r in rs],
            s=12,
            alpha=0.7,
            label=NAMES.get(kind, kind),
        )
    ax.set(
        xlabel="context size (characters of prefix + suffix)",
        ylabel="one-time overhead (ms)",
        title="Building the FIM constraint (once per generation)",
    )
    ax.legend()
    ax.grid(alpha=0.3)
    paths.append(_save(fig, out_dir / "one_time_overhead.png"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    per_token = [r for r in cons if r["tokens"] > 0]
    series = [
        (
            "constrained: constraint time per token",
            per_token,
            lambda r: 1000 * r["constraint_seconds"] / r["tokens"],
        ),
        (
            "checked uncons.: one ast.parse per token",
            [r for r in records if "parse_ms" in r],
            lambda r: r["parse_ms"],
        ),
        ("model step time per token", per_token, lambda r: 1000 * r["model_seconds"] / r["tokens"]),
    ]
    for label, rs, value in series:
        if rs:
            ax.scatter([r["context_chars"] for r in rs], [value(r) for r in rs], s=12, alpha=0.6, label=label)
    ax.set(
        xlabel="context size (characters of prefix + suffix)",
        ylabel="ms per generated token",
        title="Per-token overhead",
        yscale="log",
    )
    ax.legend()
    ax.grid(alpha=0.3)
    paths.append(_save(fig, out_dir / "per_token_overhead.png"))
    return paths


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def report_text(records: list[dict]) -> tuple[str, dict]:
    """The tables, rates and overhead as text, and the same figures as a dict."""
    by_dataset: dict[str, dict[str, dict[str, dict]]] = defaultdict(lambda: defaultdict(dict))
    for rec in records:
        by_dataset[rec["dataset"]][rec["mode"]][rec["id"]] = rec
    parts, tables = [], {}
    for dataset, by_mode in sorted(by_dataset.items()):
        kind = next(iter(next(iter(by_mode.values())).values()))["kind"]
        for constrained in CONSTRAINED:
            counts = table_counts(by_mode, constrained)
            if counts is None:
                continue
            note = "budget-aware finish on" if constrained == "constrained" else "budget-aware finish off"
            title = f"{TITLES.get(kind, dataset)} ({dataset}; constrained = {constrained}, {note})"
            parts.append(format_table(title, counts))
            tables[f"{dataset}/{constrained}"] = counts
    if tables:
        parts.append(ROW_NOTE)
    rates, overhead = success_rates(records), overhead_summary(records)
    parts.append(format_rates(rates, overhead))
    return "\n\n".join(parts) + "\n", {"tables": tables, "success_rates": rates, "overhead": overhead}


def report_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain report``."""
    ap = argparse.ArgumentParser(
        prog="fimconstrain report",
        description="Print Tables I/II, success rates and overhead; draw PNG plots.",
    )
    ap.add_argument("results", nargs="+", type=Path, help="results JSONL files (fimconstrain eval --out)")
    ap.add_argument(
        "--out-dir", type=Path, required=True, help="folder for report.md, summary.json and the plots"
    )
    ap.add_argument("--no-plots", action="store_true")
    return ap


def main_report(argv: list[str] | None = None) -> int:
    """Print the report and write it, its figures as JSON and the plots to ``--out-dir``."""
    args = report_parser().parse_args(argv)
    records = read_records(args.results)
    if not records:
        print("fimconstrain report: no records", file=sys.stderr)
        return 1
    text, summary = report_text(records)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "report.md").write_text(text, encoding="utf-8")
    (args.out_dir / "summary.json").write_text(
        json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    if not args.no_plots:
        for path in draw_plots(records, args.out_dir):
            text += f"plot: {path}\n"
    sys.stdout.write(text)
    return 0
