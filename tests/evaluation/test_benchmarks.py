"""HumanEval-infilling and SAFIM as datasets: the published files read as the benchmarks define
them, the harness checked against its reference middles and empty-middle floors, and the
benchmarks run end to end through ``fimconstrain eval`` (tiny random model) and ``report``.

The data is read from ``../shared/benchmarks/`` beside the checkout (never copied into the
repository); the tests that need it skip, saying so, where it is absent."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fimconstrain.evaluation import benchmarks
from fimconstrain.evaluation.benchmarks import FILES, judge, load

DATA = Path(__file__).resolve().parents[3] / "shared" / "benchmarks"
needs_data = pytest.mark.skipif(
    not (DATA / "human-eval-infilling").is_dir() or not (DATA / "safim").is_dir(),
    reason=f"the benchmarks' published files are not in {DATA} (pass --data DIR to use them)",
)
#: the record counts of the published files (their READMEs)
COUNTS = {
    "single-line": 1033,
    "multi-line": 5815,
    "random-span": 1640,
    "random-span-light": 164,
    "block": 805,
    "control": 750,
    "api": 181,
}


@needs_data
@pytest.mark.parametrize("benchmark,subset", [(b, s) for b, subsets in FILES.items() for s in subsets])
def test_subsets_load_as_published(benchmark, subset):
    examples = load(benchmark, subset, DATA)
    assert len(examples) == COUNTS[subset] == len({e.id for e in examples})
    for example in examples[:20]:
        assert example.meta["benchmark"] == benchmark and example.meta["subset"] == subset
        assert benchmarks.HOLE not in example.prefix + example.suffix
    if benchmark == "safim" and subset != "api":
        assert all(example.meta["unit_tests"] for example in examples)


@needs_data
@pytest.mark.parametrize("benchmark,subset", [(b, s) for b, subsets in FILES.items() for s in subsets])
def test_reference_middles_pass_and_wrong_ones_fail(benchmark, subset):
    """The first tasks of every subset: the reference passes; a middle that breaks the program
    (or, for API holes, another call) does not."""
    for example in load(benchmark, subset, DATA)[:4]:
        assert judge(example, example.middle).passed, example.id
        wrong = "foo_bar(1, 2)" if subset == "api" else example.middle + "\nraise SystemExit(7)\n"
        verdict = judge(example, wrong)
        assert not verdict.passed and verdict.failure is not None


@needs_data
def test_api_holes_compare_without_whitespace_or_by_ast():
    example = load("safim", "api", DATA)[0]
    spaced = " ".join(example.middle.replace(",", " , ").split(" "))
    assert judge(example, spaced).passed
    assert judge(example, "(" + example.middle + ")").passed  # same AST
    assert judge(example, example.middle + " + 1").failure == "differs"


@pytest.mark.parametrize(
    "actual,expected,same",
    [
        ("3\n4\n", "3\n4", True),  # trailing newline
        (" Division 4 \n", "Division 4", True),  # surrounding whitespace of a line
        ("29 23 35\n", "29\n23\n35", True),  # token by token
        ("NO\nYES\n", "No\nYes", True),  # yes / no in any case
        ("Alice", "alice", False),  # other words keep their case
        ("0.3333333333333", "0.333333333333333", True),  # within 1e-12
        ("0.3334", "0.3333", False),
        ("3", "3\n4", False),
        ("1 2", "1 3", False),
    ],
)
def test_outputs_are_compared_as_safims_judge_does(actual, expected, same):
    assert benchmarks.same_output(actual, expected) is same


@needs_data
@pytest.mark.slow
def test_single_line_floor_and_oracle_as_published(capsys):
    """Every single-line task: the reference passes all 1033, the empty middle 27 (2.61%, the
    README's floor): programs run here as the benchmark runs them."""
    from fimconstrain.evaluation.datasets import main_build

    args = ["--benchmark", "humaneval-infilling", "--subset", "single-line", "--data", str(DATA)]
    assert main_build([*args, "--check-harness"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("single-line"))
    assert "1033/1033" in line and "27/1033" in line


def test_missing_data_is_one_line_naming_the_source(tmp_path, capsys):
    from fimconstrain.evaluation.datasets import main_build

    args = ["--benchmark", "safim", "--subset", "block", "--data", str(tmp_path), "--out", "x.jsonl"]
    assert main_build(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "block_completion.python.jsonl.gz" in err and "gonglinyuan/safim" in err


def test_unknown_subset_is_refused(tmp_path, capsys):
    from fimconstrain.evaluation.datasets import main_build

    args = ["--benchmark", "safim", "--subset", "loops", "--data", str(tmp_path), "--check-harness"]
    assert main_build(args) == 2
    assert "has no subset loops" in capsys.readouterr().err


# ---------------------------------------------------------------- end to end


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
BUDGET = ["--max-new-tokens", "8", "--top-k", "10"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), context=512)


@pytest.fixture(scope="module")
def results(tiny_dir, tmp_path_factory) -> Path:
    from fimconstrain.evaluation.runs import main_eval

    if not (DATA / "human-eval-infilling").is_dir():
        pytest.skip(f"no HumanEval-infilling files in {DATA}")
    out = tmp_path_factory.mktemp("bench") / "results.jsonl"
    args = ["--benchmark", "humaneval-infilling", "--subset", "single-line", "random-span-light"]
    args += ["--data", str(DATA), "-n", "3", "--model", str(tiny_dir), "--out", str(out), *BUDGET]
    assert main_eval([*args, "--modes", "unconstrained", "checked", "constrained"]) == 0
    return out


def test_eval_judges_every_record_by_running_its_program(results):
    from fimconstrain.evaluation.inputs import read_results

    records = read_results(results)
    assert len(records) == 2 * 3 * 3
    subsets = ("single-line", "random-span-light")
    examples = {e.id: e for s in subsets for e in load("humaneval-infilling", s, DATA)}
    for rec in records:
        example = examples[rec["id"]]
        assert rec["benchmark"] == "humaneval-infilling" and rec["dataset"].endswith(rec["subset"])
        verdict = judge(example, rec["middle"])
        assert rec["passed"] == verdict.passed and rec["failure"] == verdict.failure
        assert rec["empty_passes"] == judge(example, "").passed
        assert rec["sample"] == 0 and rec["exec_seconds"] >= 0


def test_dataset_file_and_benchmark_option_are_the_same_dataset(results, tmp_path, tiny_dir, capsys):
    """`dataset --benchmark --out` writes the bytes `eval --benchmark` hashes: running the file
    resumes the same experiments."""
    from fimconstrain.evaluation.datasets import main_build
    from fimconstrain.evaluation.inputs import read_results
    from fimconstrain.evaluation.runs import main_eval

    path = tmp_path / "humaneval-infilling-single-line.jsonl"
    args = ["--benchmark", "humaneval-infilling", "--subset", "single-line", "--data", str(DATA)]
    assert main_build([*args, "--out", str(path)]) == 0
    first = next(r for r in read_results(results) if r["subset"] == "single-line")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == first["dataset_sha256"]
    out = tmp_path / "again.jsonl"
    out.write_bytes(results.read_bytes())
    modes = ["--modes", "unconstrained", "checked", "constrained"]
    model = ["--model", str(tiny_dir)]
    assert main_eval([str(path), "-n", "3", *model, "--out", str(out), *BUDGET, *modes]) == 0
    assert "nothing to do" in capsys.readouterr().err


def test_samples_resume_and_report_pass_at_k(tiny_dir, tmp_path, capsys):
    """--samples N: N records per task and mode with seeds seed..seed+N-1; raising N runs only
    the new samples; the report gives pass@k beside the published numbers."""
    from fimconstrain.evaluation.inputs import read_results
    from fimconstrain.evaluation.report import main_report
    from fimconstrain.evaluation.runs import main_eval

    if not (DATA / "safim").is_dir():
        pytest.skip(f"no SAFIM files in {DATA}")
    out = tmp_path / "sampled.jsonl"
    args = ["--benchmark", "safim", "--subset", "control", "--data", str(DATA), "-n", "2"]
    args += ["--model", str(tiny_dir), "--out", str(out), *BUDGET, "--temperature", "0.8"]
    args += ["--modes", "unconstrained", "constrained"]
    assert main_eval([*args, "--samples", "2"]) == 0
    assert main_eval([*args, "--samples", "3"]) == 0
    records = read_results(out)
    assert len(records) == 2 * 3 * 2 == len({r["key"] for r in records})
    assert sorted({r["sample"] for r in records}) == [0, 1, 2]
    assert main_report([str(out), "--out-dir", str(tmp_path / "rep"), "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "SAFIM" in text and "DeepSeekCoder-1.3B" in text and "constrained − unconstrained" in text
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    (bench,) = summary["benchmarks"].values()
    assert bench["datasets"]["safim-control"]["modes"]["constrained"]["samples_min"] == 3


def test_samples_need_a_temperature(tiny_dir, tmp_path, capsys):
    from fimconstrain.evaluation.runs import main_eval

    args = ["--benchmark", "safim", "--data", str(DATA), "--model", str(tiny_dir)]
    args += ["--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit):
        main_eval([*args, "--samples", "4"])
    assert "--temperature" in capsys.readouterr().err


@pytest.fixture(scope="module")
def starcoder2_dir(tmp_path_factory) -> Path:
    """A random 2-layer Starcoder2 with StarCoder's FIM tokens: another architecture and format."""
    from tokenizer_training import SPECIAL_TOKENS, train_byte_level_bpe
    from transformers import PreTrainedTokenizerFast, Starcoder2Config, Starcoder2ForCausalLM

    texts = [
        Path(torch.__file__).read_text(encoding="utf-8"),
        Path(json.__file__).read_text(encoding="utf-8"),
    ]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_byte_level_bpe(texts, 400, min_frequency=0), eos_token=SPECIAL_TOKENS[0]
    )
    eos = tokenizer.convert_tokens_to_ids(SPECIAL_TOKENS[0])
    torch.manual_seed(0)
    config = Starcoder2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    out = tmp_path_factory.mktemp("starcoder2")
    Starcoder2ForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def test_the_same_command_runs_another_fim_model(starcoder2_dir, tmp_path):
    from fimconstrain.evaluation.inputs import read_results
    from fimconstrain.evaluation.runs import main_eval

    if not (DATA / "human-eval-infilling").is_dir():
        pytest.skip(f"no HumanEval-infilling files in {DATA}")
    out = tmp_path / "starcoder2.jsonl"
    args = ["--benchmark", "humaneval-infilling", "--subset", "single-line", "--data", str(DATA), "-n", "2"]
    args += ["--model", str(starcoder2_dir), "--out", str(out), *BUDGET, "--modes", "unconstrained", "prefix"]
    assert main_eval(args) == 0
    records = read_results(out)
    assert {r["provenance"]["fim_format"] for r in records} == {"starcoder"}
    assert {r["mode"] for r in records} == {"unconstrained", "prefix"} and len(records) == 4
    assert all(isinstance(r["passed"], bool) and "empty_passes" in r for r in records)
