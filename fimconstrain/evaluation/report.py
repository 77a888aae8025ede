"""Tables I/II, the failure analysis and the timing of paper 004 §VII from ``fimconstrain eval``
records: ``fimconstrain report``.

* Tables I and II (§VII-C): rows unconstrained ✓ / unconstrained ✗ but checked ✓ / checked ✗,
  columns constrained ✓ / ✗, once per constrained mode; under each, exact matches per mode and
  the trivial floor (the file already parses with an empty middle).
* The failure analysis (§VII-C1): the constrained failures split into "the parser said complete
  but ast.parse rejected", "budget ran out before the middle connected to the suffix" and "no
  candidate passed", each with how many unconstrained / checked got right.
* Timing (§VII-D) per decoding step and per constrained mode: model step, constraint, one-time
  build, and apart from them the once-per-generation ending (finish search); checked as its mean
  ``ast.parse`` per step; Fig. 11 (:mod:`.plots`).
* For the field's benchmarks (HumanEval-infilling, SAFIM): pass@k from the executed tests beside
  the published numbers, and the constraint's paired effect (:mod:`.benchmark_report`).

Records of different settings (model, format, decoding; :mod:`.provenance`) are never pooled:
with more than one settings id in the input, each must be given a ``--label``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from ..command_line.arguments import HelpFormatter
from ..engine.errors import InputError
from .benchmark_report import benchmark_summary, format_benchmark
from .inputs import one_line_errors, read_results
from .modes import CONSTRAINED, MODE_NOTES, MODES
from .plots import draw_fig11
from .provenance import differences

NAMES = {"boundary": "Stack-Boundary", "randspan": "Stack-RandSpan"}
TITLES = {"boundary": "Table I: Stack-Boundary", "randspan": "Table II: Stack-RandSpan"}
ROWS = ("Unconstrained ✓", "Unconstrained ✗", "Checked Unconstrained ✗")
ROW_NOTE = (
    "Rows as in the paper: unconstrained ✓; unconstrained ✗ but checked-unconstrained ✓; "
    "checked-unconstrained ✗ (so unconstrained ✗ too)."
)
#: §VII-C1's failure cases, by how the constrained generation stopped
FAILURES = {
    "parser said complete, ast.parse rejected": ("eos", "split", "best-stop", "finished"),
    "never connected: budget ran out": ("budget",),
    "never connected: no candidate passed (stuck)": ("stuck",),
}


# ---------------------------------------------------------------- grouping


def labelled(records: list[dict], labels: dict[str, str]) -> dict[str, list[dict]]:
    """The records by label: one group per settings id, named by ``labels`` (id -> name) or by the
    id when there is only one; different settings without labels are refused."""
    provenances = {r["settings_id"]: r["provenance"] for r in records}
    if len(provenances) > 1 and not labels:
        raise InputError(
            f"the results come from {len(provenances)} different settings; they are not pooled. "
            f"Name each with --label ID=NAME to report them side by side:\n{differences(provenances)}"
        )
    unknown = sorted(set(labels) - set(provenances))
    unnamed = sorted(set(provenances) - set(labels)) if labels else []
    if unknown or unnamed:
        raise InputError(
            ("--label names settings not in the results: " + ", ".join(unknown) if unknown else "")
            + ("; " if unknown and unnamed else "")
            + ("these settings have no --label: " + ", ".join(unnamed) if unnamed else "")
        )
    if len(set(labels.values())) != len(labels):
        raise InputError("--label: two settings got the same name")
    groups: dict[str, list[dict]] = defaultdict(list)
    for rec in records:
        groups[labels.get(rec["settings_id"], rec["settings_id"])].append(rec)
    for label, recs in groups.items():
        contents = defaultdict(set)
        for rec in recs:
            contents[rec["dataset"]].add(rec["dataset_sha256"])
        for name, hashes in contents.items():
            if len(hashes) > 1:
                raise InputError(
                    f"dataset {name!r} appears with {len(hashes)} different contents under settings "
                    f"{label}; report the results of each content from its own file"
                )
    return dict(groups)


def by_dataset(records: list[dict]) -> dict[str, dict[str, dict[str, dict]]]:
    """dataset -> mode -> example id -> record, of each example's first sample (the paper's tables
    count one generation per example)."""
    out: dict[str, dict[str, dict[str, dict]]] = defaultdict(lambda: defaultdict(dict))
    for rec in records:
        if rec.get("sample", 0) == 0:
            out[rec["dataset"]][rec["mode"]][rec["id"]] = rec
    return out


# ---------------------------------------------------------------- tables


def table_counts(by_mode: dict[str, dict[str, dict]], constrained: str) -> dict | None:
    """The paper's table over the examples every needed mode ran: rows unconstrained ✓ / ✗ (checked
    ✓) / checked ✗, columns constrained ✓ / ✗; plus exact matches and the empty-middle floor."""
    needed = ("unconstrained", "checked", constrained)
    if not all(by_mode.get(m) for m in needed):
        return None
    ids = sorted(set.intersection(*(set(by_mode[m]) for m in needed)))
    counts: dict = {row: [0, 0] for row in ROWS}
    for i in ids:
        unc, chk, con = (by_mode[m][i] for m in needed)
        row = ROWS[0] if unc["success"] else ROWS[1] if chk["success"] else ROWS[2]
        counts[row][0 if con["success"] else 1] += 1
    return {
        "rows": counts,
        "n": len(ids),
        "exact": {m: sum(by_mode[m][i]["exact"] for i in ids) for m in needed},
        "empty_parses": sum(by_mode[constrained][i]["empty_parses"] for i in ids),
    }


def format_table(title: str, table: dict) -> str:
    """The table as the paper lays it out, with row and column totals, then the exact matches
    and the empty-middle floor."""
    head = ["", "Constrained ✓", "Constrained ✗", "Total"]
    body = [[row, ok, bad, ok + bad] for row, (ok, bad) in table["rows"].items()]
    body.append(["Total", sum(r[1] for r in body), sum(r[2] for r in body), sum(r[3] for r in body)])
    widths = [max(len(str(r[c])) for r in [head] + body) for c in range(4)]

    def line(r: list) -> str:
        cells = (str(v).ljust(w) if c == 0 else str(v).rjust(w) for c, (v, w) in enumerate(zip(r, widths)))
        return "| " + " | ".join(cells) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    n = table["n"]
    exact = ", ".join(f"{mode} {count}/{n}" for mode, count in table["exact"].items())
    notes = [
        f"Exact match (middle = the deleted text): {exact}",
        f"Empty-middle floor (the file already parses with nothing filled in): {table['empty_parses']}/{n}",
    ]
    return "\n".join([title, line(head), rule] + [line(r) for r in body] + notes)


def failure_breakdown(by_mode: dict[str, dict[str, dict]], constrained: str) -> dict | None:
    """§VII-C1: the constrained failures by cause, each with how many unconstrained got right and
    how many more checked-unconstrained did."""
    if not by_mode.get(constrained):
        return None
    out = {}
    failed = [r for r in by_mode[constrained].values() if not r["success"]]
    for cause, stops in FAILURES.items():
        cases = [r for r in failed if r["stopped"] in stops]
        unc = [by_mode.get("unconstrained", {}).get(r["id"]) for r in cases]
        chk = [by_mode.get("checked", {}).get(r["id"]) for r in cases]
        out[cause] = {
            "cases": len(cases),
            "unconstrained ✓": sum(bool(u and u["success"]) for u in unc),
            "checked ✓ (unconstrained ✗)": sum(
                bool(c and c["success"] and not (u and u["success"])) for u, c in zip(unc, chk)
            ),
        }
    other = len(failed) - sum(v["cases"] for v in out.values())
    if other:
        out["other (cancelled, line)"] = {
            "cases": other,
            "unconstrained ✓": 0,
            "checked ✓ (unconstrained ✗)": 0,
        }
    return {"failed": len(failed), "of": len(by_mode[constrained]), "causes": out}


def format_failures(title: str, breakdown: dict) -> str:
    lines = [f"{title}: {breakdown['failed']} of {breakdown['of']} failed"]
    width = max(len(c) for c in breakdown["causes"])
    for cause, v in breakdown["causes"].items():
        lines.append(
            f"  {cause:<{width}}  {v['cases']:>5}   unconstrained ✓ {v['unconstrained ✓']:>4}   "
            f"checked ✓ further {v['checked ✓ (unconstrained ✗)']:>4}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- rates and timing


def success_rates(records: list[dict]) -> dict:
    """Per dataset and mode: experiments, successes, exact matches, budget hits, mean steps, stops."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for rec in records:
        groups[rec["dataset"], rec["mode"]].append(rec)
    return {
        f"{ds}/{mode}": {
            "n": len(rs),
            "success": sum(r["success"] for r in rs),
            "rate": sum(r["success"] for r in rs) / len(rs),
            "exact": sum(r["exact"] for r in rs),
            "mean_steps": statistics.fmean(r["steps"] for r in rs),
            "stopped": dict(sorted(Counter(r["stopped"] for r in rs).items())),
        }
        for (ds, mode), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], MODES.index(kv[0][1])))
    }


def mode_timing(records: list[dict]) -> dict:
    """One mode's timing per decoding step, and its once-per-generation costs."""
    steps = sum(r["steps"] for r in records)
    model_s = sum(r["model_seconds"] for r in records)
    constraint_s = sum(r["constraint_seconds"] for r in records)
    fractions = [r["constraint_seconds"] / r["model_seconds"] for r in records if r["model_seconds"] > 0]
    endings = [r["ending_seconds"] for r in records if r["ending_seconds"] > 0]
    return {
        "experiments": len(records),
        "steps": steps,
        "model_ms_per_step": 1000 * model_s / max(1, steps),
        "constraint_ms_per_step": 1000 * constraint_s / max(1, steps),
        "overhead_fraction": constraint_s / model_s if model_s > 0 else None,
        "median_overhead_fraction": statistics.median(fractions) if fractions else None,
        "setup_ms_mean": 1000 * statistics.fmean(r["setup_seconds"] for r in records),
        "setup_ms_per_1000_chars": 1e6
        * sum(r["setup_seconds"] for r in records)
        / max(1, sum(r["context_chars"] for r in records)),
        "endings": len(endings),
        "ending_ms_mean": 1000 * statistics.fmean(endings) if endings else 0.0,
        "ending_ms_median": 1000 * statistics.median(endings) if endings else 0.0,
        "ending_ms_max": 1000 * max(endings) if endings else 0.0,
    }


def timing(records: list[dict]) -> dict:
    """:func:`mode_timing` for each mode present (constrained modes never pooled)."""
    modes = defaultdict(list)
    for rec in records:
        modes[rec["mode"]].append(rec)
    return {mode: mode_timing(modes[mode]) for mode in MODES if modes.get(mode)}


def format_timing(times: dict) -> str:
    lines = ["Timing per decoding step (one choice of the next token; prefill and one-time costs apart):"]
    for mode, t in times.items():
        if mode == "checked":
            lines.append(
                f"  {mode:<21} ast.parse of the file after every step: "
                f"{t['constraint_ms_per_step']:.3f} ms/step"
            )
            continue
        line = f"  {mode:<21} model {t['model_ms_per_step']:.2f} ms/step"
        if mode in CONSTRAINED:
            frac = t["overhead_fraction"]
            line += (
                f", constraint {t['constraint_ms_per_step']:.3f} ms/step"
                + (
                    f" ({100 * frac:.1f}% of the model's; "
                    f"median run {100 * t['median_overhead_fraction']:.1f}%)"
                    if frac is not None
                    else ""
                )
                + f"; one-time build mean {t['setup_ms_mean']:.1f} ms ({t['setup_ms_per_1000_chars']:.2f} ms "
                f"per 1,000 characters); ending (best stop, finish search) in {t['endings']} runs: mean "
                f"{t['ending_ms_mean']:.1f} ms, median {t['ending_ms_median']:.1f}, "
                f"max {t['ending_ms_max']:.1f}"
            )
        lines.append(line)
    return "\n".join(lines)


def format_rates(rates: dict) -> str:
    lines = ["Success rates (ast.parse of prefix + middle + suffix):"]
    for name, r in rates.items():
        lines.append(
            f"  {name:<40} {r['success']:>5}/{r['n']:<5} {100 * r['rate']:6.1f}%   exact {r['exact']:>4}   "
            f"mean steps {r['mean_steps']:5.1f}   stopped: "
            + ", ".join(f"{k} {v}" for k, v in r["stopped"].items())
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- the report


def report_text(groups: dict[str, list[dict]]) -> tuple[str, dict]:
    """The report of every label: text, and the same figures as a dict (``summary.json``)."""
    parts: list[str] = []
    summary: dict = {
        "settings": {},
        "tables": {},
        "failures": {},
        "success_rates": {},
        "timing": {},
        "benchmarks": {},
    }
    for label, records in groups.items():
        first = records[0]
        datasets = {r["dataset"]: r["dataset_sha256"] for r in records}
        summary["settings"][label] = {
            "settings_id": first["settings_id"],
            **first["provenance"],
            "datasets": datasets,
        }
        p = first["provenance"]
        parts.append(
            f"## {label}\nmodel {p['model']} (weights sha256 {p['weights_sha256'][:16]}), FIM format "
            f"{p['fim_format']}, settings {json.dumps(p['settings'])}\n"
            + "\n".join(f"dataset {name}: sha256 {sha}" for name, sha in sorted(datasets.items()))
        )
        for dataset, modes in sorted(by_dataset(records).items()):
            kind = next(iter(next(iter(modes.values())).values()))["kind"]
            for constrained in (m for m in CONSTRAINED if m in modes):
                name = f"{label}/{dataset}/{constrained}"
                table = table_counts(modes, constrained)
                if table is not None:
                    title = (
                        f"{TITLES.get(kind, dataset)} ({dataset}; constrained = {constrained}: "
                        f"{MODE_NOTES[constrained]})"
                    )
                    parts.append(format_table(title, table))
                    summary["tables"][name] = table
                breakdown = failure_breakdown(modes, constrained)
                if breakdown is not None:
                    title = f"Failure analysis (§VII-C1), {NAMES.get(kind, dataset)}, {constrained}"
                    parts.append(format_failures(title, breakdown))
                    summary["failures"][name] = breakdown
        rates, times = success_rates(records), timing(records)
        summary["success_rates"][label], summary["timing"][label] = rates, times
        parts += [format_rates(rates), format_timing(times)]
        benchmarks = benchmark_summary(records)
        if benchmarks["datasets"]:
            summary["benchmarks"][label] = benchmarks
            parts.append(format_benchmark(benchmarks))
    if summary["tables"]:
        parts.append(ROW_NOTE)
    return "\n\n".join(parts) + "\n", summary


def report_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain report``."""
    ap = argparse.ArgumentParser(
        prog="fimconstrain report",
        formatter_class=HelpFormatter,
        description="Print Tables I/II, the failure analysis, success rates and timing per decoding step "
        "(paper 004 §VII), and for HumanEval-infilling / SAFIM records pass@k beside the published numbers "
        "and the constraint's paired effect; write report.md, summary.json and Fig. 11 (PNG 300 dpi, SVG, "
        "PDF).",
        epilog="Exit codes: 0 done, 2 usage or input error (a file that is not results, different "
        "settings without --label).",
    )
    ap.add_argument("results", nargs="+", type=Path, help="results JSONL files (fimconstrain eval --out)")
    ap.add_argument(
        "--out-dir", type=Path, required=True, help="folder for report.md, summary.json and the figure"
    )
    ap.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="ID=NAME",
        help="name the records of settings ID (shown when settings differ); repeat for each",
    )
    ap.add_argument("--no-plots", action="store_true", help="write no figure")
    return ap


def parse_labels(specs: list[str]) -> dict[str, str]:
    labels = {}
    for spec in specs:
        sid, sep, name = spec.partition("=")
        if not sep or not sid or not name:
            raise InputError(f"--label {spec!r}: expected ID=NAME")
        labels[sid] = name
    return labels


@one_line_errors("fimconstrain report")
def main_report(argv: list[str] | None = None) -> int:
    """Print the report and write it, its figures as JSON and Fig. 11 to ``--out-dir``."""
    args = report_parser().parse_args(argv)
    labels = parse_labels(args.label)
    records = [rec for path in args.results for rec in read_results(path)]
    if not records:
        raise InputError(f"{', '.join(map(str, args.results))}: no records")
    by_key = {rec["key"]: rec for rec in records}  # a record run twice (same key) counts once
    groups = labelled(list(by_key.values()), labels)
    text, summary = report_text(groups)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if not args.no_plots:
        written, fig = draw_fig11(groups, args.out_dir)
        summary["fig11"] = fig
        text += "".join(f"figure: {path}\n" for path in written)
        if not written:
            print("fimconstrain report: no figure: no record has decoding steps to time", file=sys.stderr)
    (args.out_dir / "report.md").write_text(text, encoding="utf-8")
    (args.out_dir / "summary.json").write_text(
        json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    sys.stdout.write(text)
    return 0
