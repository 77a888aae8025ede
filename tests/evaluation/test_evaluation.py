"""The evaluation end to end with a tiny random model: records, resuming, and the report's tables
and plots."""

from __future__ import annotations

import json
import re
import shutil
import sysconfig
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("matplotlib")

from fimconstrain.decoding.oracle import ast_parses  # noqa: E402
from fimconstrain.evaluation import runs as evaluation  # noqa: E402
from fimconstrain.evaluation.datasets import main_build, read_examples  # noqa: E402
from fimconstrain.evaluation.runs import MODES, format_table, main_eval, main_report, read_records  # noqa: E402

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """A random 2-layer GPTBigCode and a 600-token byte-level BPE tokenizer with SantaCoder's FIM tokens."""
    from fimconstrain.evaluation.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), context=256)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> list[Path]:
    """Three Stack-Boundary and three Stack-RandSpan examples from two small standard-library files."""
    root, out = tmp_path_factory.mktemp("corpus"), tmp_path_factory.mktemp("datasets")
    for name in ("colorsys.py", "bisect.py"):
        shutil.copy(STDLIB / name, root / name)
    paths = []
    for kind in ("boundary", "randspan"):
        paths.append(out / f"{kind}.jsonl")
        assert (
            main_build(
                [
                    "--root",
                    str(root),
                    "--kind",
                    kind,
                    "-n",
                    "3",
                    "--per-file",
                    "2",
                    "--no-exclude",
                    "--max-chars",
                    "8000",
                    "--out",
                    str(paths[-1]),
                ]
            )
            == 0
        )
    return paths


@pytest.fixture(scope="module")
def results(tiny_dir, datasets, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("results") / "results.jsonl"
    assert (
        main_eval(
            [
                *map(str, datasets),
                "--model",
                str(tiny_dir),
                "--out",
                str(out),
                "--max-new-tokens",
                "12",
                "--top-k",
                "10",
            ]
        )
        == 0
    )
    return out


def test_one_record_per_experiment(results, datasets):
    records = read_records([results])
    assert len(records) == 2 * 3 * len(MODES)
    examples = {ex.id: ex for path in datasets for ex in read_examples(path)}
    for rec in records:
        ex = examples[rec["id"]]
        assert rec["truth"] == ex.middle and rec["context_chars"] == len(ex.prefix) + len(ex.suffix)
        assert rec["success"] == ast_parses(ex.prefix + rec["middle"] + ex.suffix)
        assert 0 <= rec["tokens"] <= 12 and rec["hit_budget"] == (
            rec["stopped"] in ("budget", "best-stop", "finished")
        )
        assert rec["model_seconds"] >= 0 and rec["constraint_seconds"] >= 0
        if rec["mode"] in ("constrained", "constrained-nofinish"):
            assert rec["setup_seconds"] > 0
        if rec["mode"] == "checked":
            plain = next(r for r in records if r["id"] == rec["id"] and r["mode"] == "unconstrained")
            assert rec["raw_middle"] == plain["middle"] and plain["middle"].startswith(rec["middle"])
            assert rec["success"] >= plain["success"]  # checked succeeds on a superset


def test_resume_skips_done_work(results, datasets, tiny_dir, monkeypatch):
    before = results.read_text()
    calls = []
    monkeypatch.setattr(evaluation, "run_example", lambda *a, **k: calls.append(a) or iter(()))
    assert main_eval([*map(str, datasets), "--model", str(tiny_dir), "--out", str(results)]) == 0
    assert calls == [] and results.read_text() == before


def test_resume_after_interruption(tmp_path, results, datasets, tiny_dir):
    partial = tmp_path / "partial.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    partial.write_text("".join(lines[:5]) + lines[5][:40])  # killed while writing the sixth record
    assert (
        main_eval(
            [
                str(datasets[0]),
                "-n",
                "2",
                "--model",
                str(tiny_dir),
                "--out",
                str(partial),
                "--max-new-tokens",
                "12",
                "--top-k",
                "10",
            ]
        )
        == 0
    )
    keys = [json.loads(line)["key"] for line in partial.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 2 * len(MODES)


def test_report_tables_and_plots(results, tmp_path, capsys):
    assert main_report([str(results), "--out-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    for title in ("Table I: Stack-Boundary", "Table II: Stack-RandSpan"):
        assert text.count(title) == 2  # budget-aware finish on and off
    summary = json.loads((tmp_path / "summary.json").read_text())
    records = read_records([results])
    for name, counts in summary["tables"].items():
        dataset, constrained = name.split("/")
        by_id = {r["id"]: r for r in records if r["dataset"] == dataset and r["mode"] == constrained}
        assert sum(map(sum, counts.values())) == 3
        assert sum(ok for ok, _ in counts.values()) == sum(r["success"] for r in by_id.values())
        plain_ok = sum(
            r["success"] for r in records if r["dataset"] == dataset and r["mode"] == "unconstrained"
        )
        assert sum(counts["Unconstrained ✓"]) == plain_ok
    for block in re.findall(r"^\| Total .*$", text, flags=re.M):
        ok, bad, total = map(int, block.strip("| ").split("|")[1:])
        assert ok + bad == total == 3
    assert "of the model's step time" in text
    for png in ("one_time_overhead.png", "per_token_overhead.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_format_table_layout():
    counts = {"Unconstrained ✓": [5, 1], "Unconstrained ✗": [2, 0], "Checked Unconstrained ✗": [1, 3]}
    table = format_table("T", counts)
    rows = table.splitlines()
    assert rows[1].split("|")[2:4] == [" Constrained ✓ ", " Constrained ✗ "]
    assert [r.split("|")[-2].strip() for r in rows[3:]] == ["6", "2", "4", "12"]
    assert rows[-1].split("|")[2].strip() == "8"
