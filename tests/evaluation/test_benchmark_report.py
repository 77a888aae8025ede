"""The benchmarks-of-the-field section on synthetic records: pass@k against hand-computed values,
pass@1 averaged over tasks, the paired comparison with unconstrained (difference, interval,
McNemar), the empty-middle floors and the text."""

from __future__ import annotations

import math

import pytest

from fimconstrain.evaluation.benchmark_report import (
    ANCHORS,
    COMPARABILITY,
    benchmark_summary,
    format_benchmark,
    mcnemar_p,
    pass_at_k,
)


def rec(
    task: int, mode: str, passed: bool, sample: int = 0, subset: str = "single-line", **kw: object
) -> dict:
    """One benchmark record; fields not given are those of a failed, syntax-valid, inexact middle."""
    benchmark = "safim" if subset in ("block", "control", "api") else "humaneval-infilling"
    return {
        "dataset": f"{benchmark}-{subset}",
        "benchmark": benchmark,
        "subset": subset,
        "id": f"task/{task}",
        "mode": mode,
        "sample": sample,
        "settings_id": "s1",
        "passed": passed,
        "failure": None if passed else "exception: AssertionError",
        "exec_seconds": 0.01,
        "success": True,
        "exact": False,
        "first_line_exact": False,
        "empty_passes": False,
        "wall_seconds": 0.5,
        "steps": 7,
        **kw,
    }


# ---------------------------------------------------------------- pass@k


def test_pass_at_k_hand_computed() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 0, 10) == 0.0
    assert pass_at_k(7, 7, 3) == 1.0
    assert pass_at_k(5, 4, 2) == 1.0  # n - c < k: every draw of 2 holds a pass
    assert pass_at_k(1, 1, 1) == 1.0
    brute = 1 - math.comb(180, 10) / math.comb(200, 10)
    assert pass_at_k(200, 20, 10) == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize("n, c, k", [(5, 2, 6), (5, 2, 0), (5, 6, 1), (5, -1, 1), (0, 0, 1)])
def test_pass_at_k_refuses_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_mcnemar_exact() -> None:
    assert mcnemar_p(5, 0) == pytest.approx(0.0625)
    assert mcnemar_p(0, 5) == pytest.approx(0.0625)
    assert mcnemar_p(3, 1) == pytest.approx(2 * (1 + 4) / 16)
    assert mcnemar_p(2, 2) == 1.0
    assert mcnemar_p(0, 0) == 1.0


# ---------------------------------------------------------------- summary


def test_greedy_pass_at_1_over_tasks() -> None:
    records = [rec(t, "unconstrained", t < 3) for t in range(4)]
    m = benchmark_summary(records)["datasets"]["humaneval-infilling-single-line"]["modes"]["unconstrained"]
    assert m["pass_at_k"] == {"pass@1": pytest.approx(0.75)}
    assert (m["tasks"], m["samples_min"], m["samples_max"]) == (4, 1, 1)
    assert m["failures"] == {"exception: AssertionError": 1}
    assert m["wall_seconds_total"] == pytest.approx(2.0)
    assert m["wall_seconds_mean"] == pytest.approx(0.5)


def test_sampled_pass_at_k_tasks_weigh_equally() -> None:
    # task 0: 3 of 10 samples pass; task 1: none of 12 (more samples must not weigh more)
    records = [rec(0, "unconstrained", s < 3, sample=s) for s in range(10)]
    records += [rec(1, "unconstrained", False, sample=s) for s in range(12)]
    m = benchmark_summary(records)["datasets"]["humaneval-infilling-single-line"]["modes"]["unconstrained"]
    assert (m["samples_min"], m["samples_max"], m["records"]) == (10, 12, 22)
    assert m["pass_at_k"]["pass@1"] == pytest.approx((0.3 + 0.0) / 2)
    assert m["pass_at_k"]["pass@10"] == pytest.approx((1.0 + 0.0) / 2)  # 7 failures < 10 draws
    assert "pass@100" not in m["pass_at_k"]


def test_rates_and_duplicates_keep_the_last() -> None:
    records = [
        rec(0, "unconstrained", False),
        rec(0, "unconstrained", True, exact=True, first_line_exact=True),  # the same (id, sample) again
        rec(1, "unconstrained", False, success=False, first_line_exact=True, failure="syntax error"),
    ]
    m = benchmark_summary(records)["datasets"]["humaneval-infilling-single-line"]["modes"]["unconstrained"]
    assert m["tasks"] == 2 and m["records"] == 2
    assert m["pass_at_k"]["pass@1"] == pytest.approx(0.5)
    assert (m["syntax_valid"], m["exact"], m["first_line_exact"]) == (0.5, 0.5, 1.0)
    assert m["failures"] == {"syntax error": 1}


def test_empty_middle_floor() -> None:
    records = [
        rec(t, mode, False, empty_passes=t == 0) for t in range(4) for mode in ("unconstrained", "paper")
    ]
    records.append(rec(4, "unconstrained", False))  # a task only unconstrained ran
    d = benchmark_summary(records)["datasets"]["humaneval-infilling-single-line"]
    assert (d["tasks"], d["empty_passes"], d["empty_floor"]) == (5, 1, pytest.approx(0.2))
    assert d["modes"]["paper"]["empty_floor"] == pytest.approx(0.25)


def test_paired_difference_interval_and_mcnemar() -> None:
    # 4 tasks: constrained passes 0, 1, 2; unconstrained passes 0 -> differences 0, 1, 1, 0
    records = [rec(t, "constrained", t < 3) for t in range(4)] + [
        rec(t, "unconstrained", t < 1) for t in range(4)
    ]
    (p,) = benchmark_summary(records)["paired"]
    half = 1.96 * math.sqrt(1 / 3) / math.sqrt(4)  # sd of (0, 1, 1, 0) is sqrt(1/3)
    assert (p["mode"], p["baseline"], p["tasks"]) == ("constrained", "unconstrained", 4)
    assert p["difference"] == pytest.approx(0.5)
    assert p["ci95"] == [pytest.approx(0.5 - half), pytest.approx(0.5 + half)]
    assert (p["only_mode"], p["only_baseline"]) == (2, 0)
    assert p["mcnemar_p"] == pytest.approx(0.5)


def test_paired_all_differences_equal_and_sampled() -> None:
    records = [rec(t, "paper", True) for t in range(5)] + [rec(t, "unconstrained", False) for t in range(6)]
    (p,) = benchmark_summary(records)["paired"]
    assert p["tasks"] == 5 and p["difference"] == 1.0 and p["ci95"] == [1.0, 1.0]
    assert (p["only_mode"], p["only_baseline"], p["mcnemar_p"]) == (5, 0, pytest.approx(0.0625))
    # sampled: per-task rates c/n; the discordant counts read sample 0
    sampled = [rec(0, "checked", s < 2, sample=s) for s in range(4)]
    sampled += [rec(0, "unconstrained", s == 3, sample=s) for s in range(4)]
    (q,) = benchmark_summary(sampled)["paired"]
    assert q["difference"] == pytest.approx(0.5 - 0.25)
    assert (q["only_mode"], q["only_baseline"]) == (1, 0)


def test_non_benchmark_records_and_settings() -> None:
    plain = {"dataset": "boundary", "mode": "unconstrained", "id": "x", "settings_id": "s2", "success": True}
    summary = benchmark_summary([plain])
    assert summary == {"settings_id": None, "datasets": {}, "paired": []}
    assert format_benchmark(summary) == ""
    assert list(benchmark_summary([plain, rec(0, "unconstrained", True)])["datasets"]) == [
        "humaneval-infilling-single-line"
    ]
    with pytest.raises(ValueError, match="not pooled"):
        benchmark_summary(
            [rec(0, "unconstrained", True), {**rec(1, "unconstrained", True), "settings_id": "s2"}]
        )


# ---------------------------------------------------------------- text


def test_format_mentions_every_subset_mode_and_anchor() -> None:
    modes = ("unconstrained", "constrained", "prefix")
    subsets = ("single-line", "multi-line", "block", "api")
    records = [rec(t, m, t % 2 == 0, subset=s) for s in subsets for m in modes for t in range(4)]
    text = format_benchmark(benchmark_summary(records))
    for s in subsets:
        assert f"| {s} " in text
    for m in modes:
        assert f" {m} " in text
    for a in ANCHORS:
        if a.subset in subsets:
            assert a.note in text and a.model in text
    assert "random-span" not in text.split(COMPARABILITY)[0].split("Published anchors")[1]
    assert COMPARABILITY in text
    assert "constrained − unconstrained on humaneval-infilling-single-line: +0.0 points pass@1" in text
    assert "prefix − unconstrained on safim-api" in text
    assert "First-line exact match on single-line" in text


def test_format_reproduces_the_published_single_line_floor() -> None:
    records = [rec(t, "unconstrained", t < 700, empty_passes=t < 27) for t in range(1033)]
    text = format_benchmark(benchmark_summary(records))
    assert "Empty-middle floor, single-line: 27/1033 = 2.61% (expected 2.61% with CPython 3.11" in text
    assert "reproduced" in text
