"""The report's "benchmarks of the field" section: executable fill-in-the-middle benchmarks scored
from ``fimconstrain eval`` records.

* HumanEval-infilling (Bavarian et al. 2022, "Efficient Training of Language Models to Fill in
  the Middle"): single-line, multi-line, random-span, random-span-light; a middle passes when the
  completed function passes the task's unit tests.
* SAFIM (Gong et al. 2024, "Evaluation of LLMs on Syntax-Aware Code Fill-in-the-Middle Tasks"),
  Python: block, control (unit tests on stdout), api (match with the ground truth).

pass@k is the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained
on Code"), averaged over tasks. Each constrained (or checked, or prefix) mode is compared with
unconstrained decoding task by task: the mean paired difference of per-task pass rates with a
normal 95% interval, and an exact McNemar test on the tasks where only one of the two passes.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass

#: modes in the order the tables list them; modes not named here come after, by name
MODE_ORDER = (
    "unconstrained",
    "truncated",
    "checked",
    "paper",
    "constrained",
    "constrained-nofinish",
    "prefix",
)
#: the modes compared with unconstrained decoding, in the order the comparisons are listed
PAIRED = ("constrained", "constrained-nofinish", "paper", "checked", "prefix")
BASELINE = "unconstrained"
#: the field's own baseline (the unconstrained middle as the benchmark's harness cuts it): the
#: constrained modes are also paired with it, the comparison that counts (DESIGN.md)
FIELD_BASELINE = "truncated"
KS = (1, 10, 100)
SUBSET_ORDER = (
    "single-line",
    "multi-line",
    "random-span",
    "random-span-light",
    "block",
    "control",
    "api",
)
BENCHMARKS = {
    "humaneval-infilling": "HumanEval-infilling (Bavarian et al. 2022; pass: the task's unit tests pass)",
    "safim": "SAFIM, Python (Gong et al. 2024; block/control: stdout of every unit test, "
    "api: the ground truth modulo whitespace or AST)",
}
#: z of a two-sided 95% normal interval
Z95 = 1.96


@dataclass(frozen=True)
class Anchor:
    """One published number and how it was measured, to place this harness's numbers beside."""

    benchmark: str
    subset: str
    model: str
    percent: float
    metric: str
    note: str


@dataclass(frozen=True)
class Floor:
    """The share of tasks that pass with an empty middle, which the harness must reproduce."""

    benchmark: str
    subset: str
    percent: float
    note: str


_CODE_LLAMA = "PSM, greedy, pass@1 from unit tests (Rozière et al. 2023)"
_FIM90 = (
    "sampled (100-200 samples per task at T=0.2, as the benchmark's README says), pass@1 estimated; "
    "the prompt order as in the paper's table (Bavarian et al. 2022)"
)
_SAFIM = "Gong et al. 2024 Table 4: all languages pooled, best prompt per model, syntax-aware truncation"

ANCHORS: tuple[Anchor, ...] = (
    Anchor("humaneval-infilling", "single-line", "Code Llama 7B", 74.1, "pass@1", _CODE_LLAMA),
    Anchor("humaneval-infilling", "multi-line", "Code Llama 7B", 48.2, "pass@1", _CODE_LLAMA),
    Anchor("humaneval-infilling", "random-span", "Code Llama 7B", 59.7, "pass@1", _CODE_LLAMA),
    Anchor("humaneval-infilling", "single-line", "OpenAI FIM90 6.9B", 75.1, "pass@1", _FIM90),
    Anchor("humaneval-infilling", "multi-line", "OpenAI FIM90 6.9B", 44.1, "pass@1", _FIM90),
    Anchor("humaneval-infilling", "random-span", "OpenAI FIM90 6.9B", 55.1, "pass@1", _FIM90),
    Anchor(
        "humaneval-infilling",
        "single-line",
        "SantaCoder 1.1B",
        44.0,
        "exact match",
        "first-line exact match, not pass@1: bigcode's santacoder_fim task (Allal et al. 2023)",
    ),
    Anchor("safim", "block", "DeepSeekCoder-1.3B", 41.2, "pass@1", _SAFIM),
    Anchor("safim", "control", "DeepSeekCoder-1.3B", 54.1, "pass@1", _SAFIM),
    Anchor("safim", "api", "DeepSeekCoder-1.3B", 62.6, "pass@1", _SAFIM),
    Anchor("safim", "block", "StarCoder 15.5B", 44.1, "pass@1", _SAFIM),
    Anchor("safim", "control", "StarCoder 15.5B", 54.5, "pass@1", _SAFIM),
    Anchor("safim", "api", "StarCoder 15.5B", 68.1, "pass@1", _SAFIM),
    Anchor("safim", "block", "DeepSeekCoder-33B", 60.8, "pass@1", _SAFIM),
    Anchor("safim", "control", "DeepSeekCoder-33B", 71.1, "pass@1", _SAFIM),
    Anchor("safim", "api", "DeepSeekCoder-33B", 75.2, "pass@1", _SAFIM),
)

_FLOOR_NOTE = "with CPython 3.11"
EMPTY_FLOORS: tuple[Floor, ...] = (
    Floor("humaneval-infilling", "single-line", 2.61, _FLOOR_NOTE + ", 27 of 1033 tasks"),
    Floor("humaneval-infilling", "multi-line", 0.95, _FLOOR_NOTE),
    Floor("humaneval-infilling", "random-span", 1.83, _FLOOR_NOTE),
    Floor("humaneval-infilling", "random-span-light", 0.0, _FLOOR_NOTE),
)

COMPARABILITY = (
    "What is comparable: the published numbers are other models under other harness choices, so they "
    "place this run's order of magnitude, not its rank. Code Llama's are greedy in PSM order, comparable "
    "with greedy rows of a run in the same order; FIM90's are pass@1 estimated from sampling at T=0.2, "
    "comparable only with sampled pass@1 (--samples, --temperature), and the PSM and SPM orders can "
    "differ by points. SantaCoder's 44% is first-line exact match (bigcode's and Qwen's single-line "
    "scoring), "
    "to be read against our first-line exact column, never against whole-middle pass@1. SAFIM's "
    "published numbers pool all of its languages and cut each completion by syntax-aware truncation; "
    "ours are the Python subsets alone, and a middle is judged as the model ended it. HumanEval is "
    "public since 2021 and may be in any pretrained model's data; SAFIM "
    "was collected after April 2022 against this. Paired differences are between modes of this one run "
    "and are the comparison to trust."
)


# ---------------------------------------------------------------- statistics


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. 2021's unbiased pass@k from n samples of which c pass: 1 - C(n-c, k) / C(n, k),
    as a product so that large n neither overflows nor loses precision."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mcnemar_p(only_a: int, only_b: int) -> float:
    """Exact two-sided McNemar (sign) test on discordant counts: binomial with p = 1/2."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1))
    return min(1.0, 2 * tail / 2**n)


def paired_difference(diffs: list[float]) -> tuple[float, float, float]:
    """Mean of paired differences and its normal 95% interval (mean ± 1.96·sd/√m); the mean itself
    when every difference is equal."""
    mean = statistics.fmean(diffs)
    if len(set(diffs)) == 1:
        return mean, mean, mean
    half = Z95 * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return mean, mean - half, mean + half


# ---------------------------------------------------------------- summary


def _mode_key(mode: str) -> tuple[int, str]:
    return (MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER), mode)


def _subset_key(item: tuple[str, dict]) -> tuple[str, int, str]:
    info = item[1]
    subset = info["subset"]
    rank = SUBSET_ORDER.index(subset) if subset in SUBSET_ORDER else len(SUBSET_ORDER)
    return (info["benchmark"], rank, item[0])


def _tasks(records: list[dict]) -> dict[str, dict[str, dict[str, dict[int, dict]]]]:
    """dataset -> mode -> task id -> sample -> record; of the same (id, sample) twice the last counts."""
    out: dict[str, dict[str, dict[str, dict[int, dict]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    for rec in records:
        out[rec["dataset"]][rec["mode"]][rec["id"]][rec["sample"]] = rec
    return out


def _last(samples: dict[int, dict]) -> dict:
    """A task's record of the highest sample number."""
    return samples[max(samples)]


def _task_mean(tasks: dict[str, dict[int, dict]], field: str) -> float:
    """The per-task share of samples with ``field`` true, averaged over tasks (tasks weigh equally)."""
    return statistics.fmean(sum(bool(r[field]) for r in s.values()) / len(s) for s in tasks.values())


def _mode_summary(tasks: dict[str, dict[int, dict]]) -> dict:
    """One dataset's figures for one mode."""
    recs = [r for samples in tasks.values() for r in samples.values()]
    counts = [len(s) for s in tasks.values()]
    passed = [sum(bool(r["passed"]) for r in s.values()) for s in tasks.values()]
    wall = sum(r["wall_seconds"] for r in recs)
    return {
        "tasks": len(tasks),
        "records": len(recs),
        "samples_min": min(counts),
        "samples_max": max(counts),
        "pass_at_k": {
            f"pass@{k}": statistics.fmean(pass_at_k(n, c, k) for n, c in zip(counts, passed))
            for k in KS
            if k <= min(counts)
        },
        "syntax_valid": _task_mean(tasks, "success"),
        "exact": _task_mean(tasks, "exact"),
        "first_line_exact": _task_mean(tasks, "first_line_exact"),
        "empty_floor": statistics.fmean(bool(_last(s)["empty_passes"]) for s in tasks.values()),
        "failures": dict(Counter(r["failure"] for r in recs if r["failure"]).most_common()),
        "wall_seconds_total": wall,
        "wall_seconds_mean": wall / len(recs),
    }


def _pass_rate(samples: dict[int, dict]) -> float:
    """c/n of one task."""
    return sum(bool(r["passed"]) for r in samples.values()) / len(samples)


def _paired(
    dataset: str,
    mode: str,
    x: dict[str, dict[int, dict]],
    base: dict[str, dict[int, dict]],
    baseline: str = BASELINE,
) -> dict:
    """``mode`` against ``baseline`` over the tasks both ran (per-task pass rates, sample-0 McNemar)."""
    ids = sorted(set(x) & set(base))
    mean, low, high = paired_difference([_pass_rate(x[i]) - _pass_rate(base[i]) for i in ids])
    first = [(bool(x[i][min(x[i])]["passed"]), bool(base[i][min(base[i])]["passed"])) for i in ids]
    only_mode = sum(a and not b for a, b in first)
    only_base = sum(b and not a for a, b in first)
    return {
        "dataset": dataset,
        "mode": mode,
        "baseline": baseline,
        "tasks": len(ids),
        "difference": mean,
        "ci95": [low, high],
        "only_mode": only_mode,
        "only_baseline": only_base,
        "mcnemar_p": mcnemar_p(only_mode, only_base),
    }


def benchmark_summary(records: list[dict]) -> dict:
    """The benchmark records' figures per dataset and mode, and each mode paired with unconstrained.

    Records without a ``benchmark`` field are skipped; the records of different settings are
    refused (ValueError), as the report never pools them: call once per settings id."""
    records = [r for r in records if r.get("benchmark")]
    settings = sorted({r["settings_id"] for r in records})
    if len(settings) > 1:
        raise ValueError(f"benchmark records of {len(settings)} settings ({', '.join(settings)}); not pooled")
    datasets: dict[str, dict] = {}
    paired: list[dict] = []
    names = {r["dataset"]: (r["benchmark"], r["subset"]) for r in records}
    for dataset, modes in _tasks(records).items():
        floors = {i: bool(_last(s)["empty_passes"]) for tasks in modes.values() for i, s in tasks.items()}
        datasets[dataset] = {
            "benchmark": names[dataset][0],
            "subset": names[dataset][1],
            "tasks": len(floors),
            "empty_passes": sum(floors.values()),
            "empty_floor": sum(floors.values()) / len(floors),
            "modes": {m: _mode_summary(modes[m]) for m in sorted(modes, key=_mode_key)},
        }
        for baseline in (BASELINE, FIELD_BASELINE):
            if baseline in modes:
                paired += [
                    _paired(dataset, m, modes[m], modes[baseline], baseline)
                    for m in PAIRED
                    if m in modes
                    and set(modes[m]) & set(modes[baseline])
                    and (baseline == BASELINE or m != "checked")
                ]
    datasets = dict(sorted(datasets.items(), key=_subset_key))
    order = list(datasets)
    paired.sort(key=lambda p: (order.index(p["dataset"]), p["baseline"] != BASELINE, PAIRED.index(p["mode"])))
    return {"settings_id": settings[0] if settings else None, "datasets": datasets, "paired": paired}


# ---------------------------------------------------------------- text


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table: columns of numbers right-aligned, the others left-aligned."""
    widths = [max(len(r[c]) for r in [head, *rows]) for c in range(len(head))]
    numeric = [all(re.fullmatch(r"[0-9.,/–-]+", r[c]) for r in rows) for c in range(len(head))]

    def line(r: list[str]) -> str:
        cells = (v.rjust(w) if num else v.ljust(w) for v, w, num in zip(r, widths, numeric))
        return "| " + " | ".join(cells) + " |"

    return [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _signed(x: float) -> str:
    return f"{x:+.1f}".replace("-", "−")


def _benchmark_table(datasets: dict[str, dict]) -> list[str]:
    """Rows subset × mode; pass@10 and pass@100 columns only where some row has them."""
    ks = [
        k
        for k in KS
        if any(f"pass@{k}" in m["pass_at_k"] for d in datasets.values() for m in d["modes"].values())
    ]
    head = ["subset", "mode", "tasks", "samples", *(f"pass@{k} %" for k in ks)]
    head += ["syntax-valid %", "exact %", "first-line exact %", "empty floor %", "wall s"]
    rows = []
    for d in datasets.values():
        for mode, m in d["modes"].items():
            low, high = m["samples_min"], m["samples_max"]
            samples = str(low) if low == high else f"{low}-{high}"
            tasks = str(m["tasks"]) if m["tasks"] == d["tasks"] else f"{m['tasks']}/{d['tasks']}"
            rows.append(
                [d["subset"], mode, tasks, samples]
                + [_pct(m["pass_at_k"][f"pass@{k}"]) if f"pass@{k}" in m["pass_at_k"] else "–" for k in ks]
                + [_pct(m[f]) for f in ("syntax_valid", "exact", "first_line_exact", "empty_floor")]
                + [f"{m['wall_seconds_total']:.1f}"]
            )
    return _table(head, rows)


def _details(datasets: dict[str, dict]) -> list[str]:
    """Single-line first-line exact match, the empty floors against the published ones, failure kinds."""
    lines = []
    for d in datasets.values():
        if d["subset"] == "single-line":
            lines.append(
                "First-line exact match on single-line (how bigcode's and Qwen's harnesses score it): "
                + ", ".join(f"{mode} {_pct(m['first_line_exact'])}%" for mode, m in d["modes"].items())
            )
    for d in datasets.values():
        known = [f for f in EMPTY_FLOORS if (f.benchmark, f.subset) == (d["benchmark"], d["subset"])]
        floor = f"{d['empty_passes']}/{d['tasks']} = {100 * d['empty_floor']:.2f}%"
        line = f"Empty-middle floor, {d['subset']}: {floor}"
        for f in known:
            same = round(100 * d["empty_floor"], 2) == f.percent
            line += f" (expected {f.percent:.2f}% {f.note}: {'reproduced' if same else 'differs'})"
        lines.append(line)
    lines.append("Failure kinds and generation time:")
    for d in datasets.values():
        for mode, m in d["modes"].items():
            wall = f"wall {m['wall_seconds_total']:.1f} s, {m['wall_seconds_mean']:.2f} s per record"
            kinds = ", ".join(f"{k} {v}" for k, v in m["failures"].items()) or "none"
            lines.append(f"  {d['subset']}/{mode}: failures {kinds}; {wall}")
    return lines


def _paired_line(p: dict, dataset: dict) -> str:
    low, high = p["ci95"]
    return (
        f"  {p['mode']} − {p['baseline']} on {p['dataset']}: {_signed(100 * p['difference'])} points "
        f"pass@1, 95% CI [{_signed(100 * low)}, {_signed(100 * high)}], "
        f"{p['only_mode']} tasks only {p['mode']} passes, "
        f"{p['only_baseline']} only {p['baseline']}; McNemar p = {p['mcnemar_p']:.3g} "
        f"({p['tasks']} tasks of {dataset['tasks']})"
    )


def _anchor_table(datasets: dict[str, dict]) -> list[str]:
    """The published numbers for the subsets run, with this run's unconstrained figure of the same metric."""
    run = {(d["benchmark"], d["subset"]): d for d in datasets.values()}
    rows = []
    for a in sorted(ANCHORS, key=lambda anchor: SUBSET_ORDER.index(anchor.subset)):
        d = run.get((a.benchmark, a.subset))
        if d is None:
            continue
        unc = d["modes"].get(BASELINE)
        field = "first_line_exact" if a.metric == "exact match" else None
        if unc is None or (field is None and "pass@1" not in unc["pass_at_k"]):
            ours = "–"
        else:
            ours = _pct(unc[field] if field else unc["pass_at_k"]["pass@1"])
        rows.append([a.subset, a.model, a.metric, f"{a.percent:.1f}", ours, a.note])
    if not rows:
        return []
    head = ["subset", "model", "metric", "published %", "here, unconstrained %", "how measured"]
    title = "Published anchors (other models; this run's unconstrained figure of the same metric beside):"
    return [title, *_table(head, rows)]


def format_benchmark(summary: dict) -> str:
    """The section as plain text in the style of the report's tables; "" without benchmark records."""
    datasets = summary["datasets"]
    if not datasets:
        return ""
    parts = ["Benchmarks of the field (pass@k: Chen et al. 2021's unbiased estimator, averaged over tasks)"]
    for bench in sorted({d["benchmark"] for d in datasets.values()}):
        mine = {name: d for name, d in datasets.items() if d["benchmark"] == bench}
        parts.append("\n".join([BENCHMARKS.get(bench, bench), *_benchmark_table(mine), *_details(mine)]))
    if summary["paired"]:
        parts.append(
            "\n".join(
                [
                    "Paired with unconstrained, and with the field's truncation of it, over the tasks both "
                    "ran (difference of per-task pass rates, normal 95% interval; discordant tasks and "
                    "exact McNemar test on sample 0):"
                ]
                + [_paired_line(p, datasets[p["dataset"]]) for p in summary["paired"]]
            )
        )
    anchors = _anchor_table(datasets)
    if anchors:
        parts.append("\n".join(anchors))
    parts.append(COMPARABILITY)
    return "\n\n".join(parts)
