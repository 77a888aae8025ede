"""The evaluation end to end with a tiny random model: records with their provenance and per-step
timings, resuming that never mixes settings, the report's tables, failure analysis and Fig. 11,
and a one-line error with exit code 2 for every bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("matplotlib")

from fimconstrain.cli import main as cli  # noqa: E402
from fimconstrain.decoding.loop.oracle import ast_parses  # noqa: E402
from fimconstrain.evaluation import runs  # noqa: E402
from fimconstrain.evaluation.datasets import main_build, read_examples  # noqa: E402
from fimconstrain.evaluation.inputs import read_results  # noqa: E402
from fimconstrain.evaluation.modes import CONSTRAINED, DEFAULT_MODES, PAPER_TOP_K  # noqa: E402
from fimconstrain.evaluation.plots import break_even  # noqa: E402
from fimconstrain.evaluation.provenance import weights_sha256  # noqa: E402
from fimconstrain.evaluation.report import failure_breakdown, format_table, main_report  # noqa: E402
from fimconstrain.evaluation.runs import main_eval  # noqa: E402

STDLIB = Path(sysconfig.get_paths()["stdlib"])
BUDGET = ["--max-new-tokens", "12", "--top-k", "10"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """A random 2-layer GPTBigCode and a 600-token byte-level BPE tokenizer with SantaCoder's FIM tokens."""
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), context=256)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for name in ("colorsys.py", "bisect.py"):
        shutil.copy(STDLIB / name, root / name)
    return root


@pytest.fixture(scope="module")
def datasets(corpus, tmp_path_factory) -> list[Path]:
    """Three Stack-Boundary and three Stack-RandSpan examples (paper preset) of two small files."""
    out = tmp_path_factory.mktemp("datasets")
    paths = []
    for kind in ("boundary", "randspan"):
        paths.append(out / f"{kind}.jsonl")
        args = ["--root", str(corpus), "--kind", kind, "--preset", "paper", "-n", "3", "--no-exclude"]
        assert main_build([*args, "--out", str(paths[-1])]) == 0
    return paths


@pytest.fixture(scope="module")
def results(tiny_dir, datasets, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("results") / "results.jsonl"
    assert main_eval([*map(str, datasets), "--model", str(tiny_dir), "--out", str(out), *BUDGET]) == 0
    return out


def eval_args(datasets, tiny_dir, out, *extra) -> list[str]:
    return ["eval", *map(str, datasets), "--model", str(tiny_dir), "--out", str(out), *BUDGET, *extra]


# ---------------------------------------------------------------- records


def test_one_record_per_experiment_with_provenance(results, datasets, tiny_dir):
    records = read_results(results)
    assert len(records) == 2 * 3 * len(DEFAULT_MODES)
    examples = {ex.id: ex for path in datasets for ex in read_examples(path)}
    (provenance,) = {json.dumps(r["provenance"], sort_keys=True) for r in records}
    p = json.loads(provenance)
    assert p["model"] == str(tiny_dir.resolve()) and p["weights_sha256"] == weights_sha256(tiny_dir)
    assert p["fim_format"] == "santacoder" and p["settings"]["max_new_tokens"] == 12
    assert p["settings"]["top_k"] == 10 and p["settings"]["device"] == "cpu"
    for rec in records:
        ex = examples[rec["id"]]
        assert rec["truth"] == ex.middle and rec["context_chars"] == len(ex.prefix) + len(ex.suffix)
        assert rec["success"] == ast_parses(ex.prefix + rec["middle"] + ex.suffix)
        assert rec["exact"] == (rec["middle"] == ex.middle)
        assert rec["empty_parses"] == ast_parses(ex.prefix + ex.suffix)
        assert rec["key"].startswith(rec["dataset_sha256"]) and rec["key"].endswith(rec["settings_id"])
        assert 1 <= rec["steps"] <= 12 and rec["tokens"] <= rec["generated"] <= rec["steps"]
        if rec["mode"] == "checked":
            plain = next(r for r in records if r["id"] == rec["id"] and r["mode"] == "unconstrained")
            assert rec["raw_middle"] == plain["middle"] and plain["middle"].startswith(rec["middle"])
            assert rec["success"] >= plain["success"]  # checked succeeds on a superset


def test_timings_are_per_decoding_step_with_the_ending_apart(results):
    for rec in read_results(results):
        steps = rec["steps"]
        assert rec["model_ms_per_step"] == pytest.approx(1000 * rec["model_seconds"] / steps)
        assert rec["constraint_ms_per_step"] == pytest.approx(1000 * rec["constraint_seconds"] / steps)
        if rec["mode"] in CONSTRAINED:
            assert rec["setup_seconds"] > 0
            assert rec["constraint_seconds"] + rec["ending_seconds"] == pytest.approx(rec["checker_seconds"])
        if rec["mode"] == "checked":  # one ast.parse per step, averaged
            assert rec["parse_ms_per_step"] == rec["constraint_ms_per_step"] > 0


def test_paper_mode_is_the_papers_decoder(results):
    """Top 50 and no more, no split ending, no finish search, no token healing (§VII-B)."""
    paper = [r for r in read_results(results) if r["mode"] == "paper"]
    assert paper and all(r["top_k"] == PAPER_TOP_K and r["healed"] == "" for r in paper)
    assert all(r["stopped"] in ("eos", "budget", "best-stop", "stuck") for r in paper)
    assert all(r["candidates_checked"] <= PAPER_TOP_K * r["steps"] for r in paper)


# ---------------------------------------------------------------- resume


def test_resume_skips_done_work(results, datasets, tiny_dir, monkeypatch, capsys):
    before = results.read_text()
    monkeypatch.setattr(runs, "run_example", lambda *a, **k: pytest.fail("nothing should run"))
    assert cli(eval_args(datasets, tiny_dir, results)) == 0
    assert results.read_text() == before and "nothing to do" in capsys.readouterr().err


def test_resume_after_interruption(tmp_path, results, datasets, tiny_dir):
    partial = tmp_path / "partial.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    partial.write_text("".join(lines[:5]) + lines[5][:40])  # killed while writing the sixth record
    assert cli(eval_args(datasets[:1], tiny_dir, partial, "-n", "2")) == 0
    keys = [json.loads(line)["key"] for line in partial.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 2 * len(DEFAULT_MODES)


@pytest.mark.parametrize(
    "change", [["--max-new-tokens", "8"], ["--top-k", "5"], ["--python-version", "3.10"], ["--order", "spm"]]
)
def test_resume_runs_again_under_other_settings(tmp_path, results, datasets, tiny_dir, change):
    out = tmp_path / "r.jsonl"
    shutil.copy(results, out)
    assert cli([*eval_args(datasets[:1], tiny_dir, out, "-n", "1"), *change]) == 0
    new = read_results(out)[len(read_results(results)) :]
    assert len(new) == len(DEFAULT_MODES) and len({r["settings_id"] for r in read_results(out)}) == 2


def test_resume_runs_again_on_another_dataset_content_or_model(tmp_path, results, datasets, tiny_dir, corpus):
    out = tmp_path / "r.jsonl"
    shutil.copy(results, out)
    other = tmp_path / datasets[0].name  # the same name, another seed
    args = ["--root", str(corpus), "--kind", "boundary", "--preset", "paper", "-n", "3", "--seed", "7"]
    assert main_build([*args, "--no-exclude", "--out", str(other)]) == 0
    assert cli(eval_args([other], tiny_dir, out, "-n", "1")) == 0
    assert len(read_results(out)) == len(read_results(results)) + len(DEFAULT_MODES)
    retrained = tmp_path / "retrained"
    shutil.copytree(tiny_dir, retrained)
    from safetensors.torch import load_file, save_file

    weights = load_file(retrained / "model.safetensors")
    save_file({k: v + 0.01 for k, v in weights.items()}, retrained / "model.safetensors", {"format": "pt"})
    assert weights_sha256(retrained) != weights_sha256(tiny_dir)
    assert cli(eval_args(datasets[:1], retrained, out, "-n", "1")) == 0
    assert len(read_results(out)) == len(read_results(results)) + 2 * len(DEFAULT_MODES)


def test_a_missing_model_is_an_error_even_with_nothing_left_to_run(results, datasets, tmp_path, capsys):
    assert cli(eval_args(datasets, tmp_path / "nonexistent", results)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("fimconstrain eval: model directory") and "Traceback" not in "\n".join(err)


# ---------------------------------------------------------------- report


def test_report_tables_failures_and_figure(results, tmp_path, capsys):
    assert main_report([str(results), "--out-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    for title in ("Table I: Stack-Boundary", "Table II: Stack-RandSpan"):
        assert text.count(title) == 3  # one per constrained mode, never pooled
    assert text.count("Exact match") == text.count("Empty-middle floor") == 6
    assert text.count("Failure analysis (§VII-C1)") == 6
    summary = json.loads((tmp_path / "summary.json").read_text())
    records = read_results(results)
    for name, table in summary["tables"].items():
        _, dataset, constrained = name.split("/")
        mine = [r for r in records if r["dataset"] == dataset]
        assert table["n"] == 3 and sum(map(sum, table["rows"].values())) == 3
        assert sum(ok for ok, _ in table["rows"].values()) == sum(
            r["success"] for r in mine if r["mode"] == constrained
        )
        assert sum(table["rows"]["Unconstrained ✓"]) == sum(
            r["success"] for r in mine if r["mode"] == "unconstrained"
        )
        assert table["empty_parses"] == sum(r["empty_parses"] for r in mine if r["mode"] == constrained)
    for block in re.findall(r"^\| Total .*$", text, flags=re.M):
        ok, bad, total = map(int, block.strip("| ").split("|")[1:])
        assert ok + bad == total == 3
    for mode in CONSTRAINED:
        assert re.search(rf"^  {mode} +model .* ms/step, constraint", text, flags=re.M)
    from PIL import Image

    with Image.open(tmp_path / "fig11.png") as png:
        assert round(png.info["dpi"][0]) == 300
    assert (tmp_path / "fig11.svg").read_text().lstrip().startswith("<?xml")
    assert (tmp_path / "fig11.pdf").read_bytes()[:5] == b"%PDF-"


def test_report_refuses_to_pool_settings_unless_labelled(results, datasets, tiny_dir, tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    shutil.copy(results, out)
    assert cli([*eval_args(datasets, tiny_dir, out), "--max-new-tokens", "8"]) == 0
    ids = sorted({r["settings_id"] for r in read_results(out)})
    capsys.readouterr()
    assert cli(["report", str(out), "--out-dir", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert "not pooled" in err and all(f"{i}: max_new_tokens=" in err for i in ids)
    assert not (tmp_path / "rep" / "summary.json").exists()
    assert cli(["report", str(out), "--out-dir", str(tmp_path / "rep"), "--label", f"{ids[0]}=a"]) == 2
    assert "have no --label" in capsys.readouterr().err
    labels = [arg for i, name in zip(ids, ("first", "second")) for arg in ("--label", f"{i}={name}")]
    assert cli(["report", str(out), "--out-dir", str(tmp_path / "rep"), "--no-plots", *labels]) == 0
    text = capsys.readouterr().out
    assert "## first" in text and "## second" in text and text.count("Table I: Stack-Boundary") == 6


def test_no_figure_without_timed_steps(results, tmp_path, capsys):
    only = tmp_path / "unconstrained.jsonl"
    only.write_text("".join(line for line in results.open() if '"mode": "unconstrained"' in line))
    assert main_report([str(only), "--out-dir", str(tmp_path / "rep")]) == 0
    assert "no figure" in capsys.readouterr().err and not list((tmp_path / "rep").glob("fig11.*"))


def test_format_table_layout():
    rows = {"Unconstrained ✓": [5, 1], "Unconstrained ✗": [2, 0], "Checked Unconstrained ✗": [1, 3]}
    table = format_table("T", {"rows": rows, "n": 12, "exact": {"paper": 2}, "empty_parses": 1}).splitlines()
    assert table[1].split("|")[2:4] == [" Constrained ✓ ", " Constrained ✗ "]
    assert [r.split("|")[-2].strip() for r in table[3:7]] == ["6", "2", "4", "12"]
    assert table[6].split("|")[2].strip() == "8"
    assert table[7].endswith("paper 2/12") and table[8].endswith("1/12")


def test_failure_breakdown_by_cause():
    def rec(i, mode, success, stopped="eos"):
        return {"id": i, "mode": mode, "success": success, "stopped": stopped}

    by_mode = {
        "paper": {"a": rec("a", "paper", False, "eos"), "b": rec("b", "paper", False, "budget"),
                  "c": rec("c", "paper", False, "stuck"), "d": rec("d", "paper", True)},
        "unconstrained": {i: rec(i, "unconstrained", i == "a") for i in "abcd"},
        "checked": {i: rec(i, "checked", i in "ab") for i in "abcd"},
    }  # fmt: skip
    causes = failure_breakdown(by_mode, "paper")["causes"]
    assert causes["parser said complete, ast.parse rejected"] == {
        "cases": 1, "unconstrained ✓": 1, "checked ✓ (unconstrained ✗)": 0
    }  # fmt: skip
    assert causes["never connected: budget ran out"]["checked ✓ (unconstrained ✗)"] == 1
    assert causes["never connected: no candidate passed (stuck)"]["cases"] == 1


def test_break_even_where_the_fits_cross():
    facts = break_even(parse=(0.0, 0.001), step=(0.5, 0.0), build=(10.0, 0.01), at=1000.0)
    assert facts["break_even_chars"] == pytest.approx(500.0)
    assert facts["tokens_to_repay_build"] == pytest.approx(20.0 / 0.5)
    assert break_even((1.0, 0.0), (0.5, 0.0), None, 10.0)["break_even_chars"] == 0.0
    assert break_even((0.1, 0.0), (0.5, 0.0), None, 10.0)["break_even_chars"] is None


# ---------------------------------------------------------------- bad input


@pytest.fixture
def bad_inputs(tmp_path, results, datasets) -> dict[str, Path]:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    py = tmp_path / "code.py"
    py.write_text("x = 1\n")
    return {
        "missing": tmp_path / "nope.jsonl",
        "folder": tmp_path,
        "python": py,
        "results": results,
        "empty": empty,
    }


@pytest.mark.parametrize(
    "which, says",
    [
        ("missing", "No such file or directory"),
        ("folder", "is a folder"),
        ("python", "not JSON (a Python file?)"),
        ("results", "a results file"),
        ("empty", "holds no examples"),
    ],
)
def test_eval_bad_dataset_is_one_line_exit_2(bad_inputs, tiny_dir, tmp_path, capsys, which, says):
    assert cli(eval_args([bad_inputs[which]], tiny_dir, tmp_path / "out.jsonl")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("fimconstrain eval: ") and says in err


@pytest.mark.parametrize(
    "option", [["-n", "0"], ["--max-new-tokens", "0"], ["--top-k", "0"], ["--threads", "0"]]
)
def test_eval_numbers_out_of_range_exit_2(datasets, tiny_dir, tmp_path, capsys, option):
    with pytest.raises(SystemExit) as exit_:
        main_eval(
            [*map(str, datasets), "--model", str(tiny_dir), "--out", str(tmp_path / "o.jsonl"), *option]
        )
    assert exit_.value.code == 2 and "error: argument" in capsys.readouterr().err


def test_eval_out_must_be_results(datasets, tiny_dir, capsys):
    assert cli(eval_args(datasets[:1], tiny_dir, datasets[1])) == 2
    assert "--out: " in capsys.readouterr().err
    assert cli(eval_args(datasets[:1], tiny_dir, datasets[0])) == 2
    assert "as --out" in capsys.readouterr().err


def test_eval_mismatched_weights_exit_2(datasets, tiny_dir, tmp_path, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(tiny_dir, bad)
    config = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**config, "n_embd": 2 * config["n_embd"]}))
    assert cli(eval_args(datasets, bad, tmp_path / "out.jsonl")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "weights do not fit its config.json" in err[-1] and "MISMATCH" not in "\n".join(err)


@pytest.mark.parametrize("which, says", [("missing", "No such file or directory"), ("python", "not JSON")])
def test_report_bad_input_exit_2(bad_inputs, datasets, tmp_path, capsys, which, says):
    for path, message in ((bad_inputs[which], says), (datasets[0], "a dataset (fimconstrain dataset)")):
        assert cli(["report", str(path), "--out-dir", str(tmp_path / "rep")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err
    assert cli(["report", str(bad_inputs["empty"]), "--out-dir", str(tmp_path / "rep")]) == 2
    assert cli(["report", str(bad_inputs["results"]), "--out-dir", str(tmp_path), "--label", "nolabel"]) == 2


def test_module_help_exits_0_and_shows_defaults():
    for args in ([], ["eval"], ["report"], ["dataset"]):
        out = subprocess.run(
            [sys.executable, "-m", "fimconstrain.evaluation", *args, "--help"], capture_output=True, text=True
        )
        assert out.returncode == 0 and "usage:" in out.stdout
        if args == ["eval"]:
            assert "(default: 64)" in out.stdout and "paper:" in out.stdout and "--device" in out.stdout


def test_the_warm_up_waits_for_jedi_too(monkeypatch):
    """An eval's warm-up loads jedi before the first experiment (its first answer takes a second
    or more, which the first experiments' steps would otherwise count as the constraint's)."""
    import threading
    from concurrent.futures import Future

    from fimconstrain.decoding.loop import jedi_attributes
    from fimconstrain.evaluation import experiments

    asked: list[Future] = []

    class Jedi:
        def warm_up(self) -> Future:
            future: Future = Future()
            asked.append(future)
            threading.Timer(0.2, future.set_result, (jedi_attributes.UNKNOWN,)).start()
            return future

    class Decoder:
        def generate(self, *args, **kwargs) -> None:
            assert not asked  # the model first, then jedi

    monkeypatch.setattr(jedi_attributes, "shared", lambda: Jedi())
    experiments.warm_up(Decoder())
    assert len(asked) == 1 and asked[0].done()  # waited for: answered 0.2 s after it was asked
