"""The field's executable FIM benchmarks as datasets, and how a middle is judged on them.

* HumanEval-infilling (Bavarian et al. 2022, arXiv:2207.14255): single-line, multi-line,
  random-span and random-span-light holes in HumanEval solutions; a middle passes when
  ``prompt + middle + suffix + test + check(entry_point)`` runs without an exception within
  the time limit (the upstream harness's program, 3 s).
* SAFIM (Gong et al. 2024, arXiv:2403.04814), Python: block and control-flow holes in
  competitive-programming solutions pass when, on every unit test's input, the program's
  standard output matches an accepted output as SAFIM's judge, ExecEval, matches it (line by
  line up to surrounding whitespace, else token by token: numbers within 1e-12, yes / no /
  true / false in any case); API holes have no tests and pass when the middle equals the
  ground truth without whitespace or parses to the same AST.

Each benchmark record becomes an :class:`~.datasets.Example` (``prefix``/``middle``/``suffix``,
the tests in ``meta``), so ``fimconstrain eval`` runs the same modes, provenance, resume and
sharding on them as on Stack-Boundary; the programs run in :mod:`.execution`'s subprocesses,
never in the evaluating process.  The data is read from the files the benchmarks publish
(``--data DIR``); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ..engine.errors import InputError
from .examples import Example
from .execution import Limits, run_program

#: benchmark -> subset -> the file it is published in
FILES: dict[str, dict[str, str]] = {
    "humaneval-infilling": {
        "single-line": "HumanEval-SingleLineInfilling.jsonl.gz",
        "multi-line": "HumanEval-MultiLineInfilling.jsonl.gz",
        "random-span": "HumanEval-RandomSpanInfilling.jsonl.gz",
        "random-span-light": "HumanEval-RandomSpanInfillingLight.jsonl.gz",
    },
    "safim": {
        "block": "block_completion.python.jsonl.gz",
        "control": "control_completion.python.jsonl.gz",
        "api": "api_completion.python.jsonl.gz",
    },
}
BENCHMARKS = tuple(FILES)
#: where each benchmark's files are published (said when they are missing)
SOURCES = {
    "humaneval-infilling": "github.com/openai/human-eval-infilling, data/*.jsonl.gz",
    "safim": "github.com/gonglinyuan/safim, data/*_completion.jsonl.gz (the records whose lang is python)",
}
#: the folder name each benchmark's files are kept under inside a folder of benchmarks
FOLDERS = {"humaneval-infilling": "human-eval-infilling", "safim": "safim"}
HOLE = "{{completion}}"  # SAFIM's eval_prompt marks the hole so
#: each benchmark's wall-clock limit per program run: HumanEval's harness gives 3 s; SAFIM's judge
#: ran PyPy, several times faster than CPython on its loops (a reference middle needs 5 s here)
WALL_SECONDS = {"humaneval-infilling": 3.0, "safim": 10.0}


def limits_for(wall_seconds: float) -> Limits:
    """A program run's limits for a wall-clock timeout (its CPU time a second more)."""
    return Limits(wall_seconds=wall_seconds, cpu_seconds=int(wall_seconds) + 1)


def subsets_of(benchmark: str) -> tuple[str, ...]:
    return tuple(FILES[benchmark])


def dataset_name(benchmark: str, subset: str) -> str:
    """The dataset's name in records and reports, e.g. ``humaneval-infilling-single-line``."""
    return f"{benchmark}-{subset}"


def data_file(benchmark: str, subset: str, data: Path) -> Path:
    """The subset's file in ``data``: the benchmark's own folder, or a folder holding it under
    its usual name (``human-eval-infilling/``, ``safim/``)."""
    if benchmark not in FILES:
        raise InputError(f"unknown benchmark {benchmark!r}; known: {', '.join(BENCHMARKS)}")
    if subset not in FILES[benchmark]:
        raise InputError(f"{benchmark} has no subset {subset!r}; its subsets: {', '.join(FILES[benchmark])}")
    name = FILES[benchmark][subset]
    for folder in (data, data / FOLDERS[benchmark]):
        if (folder / name).is_file():
            return folder / name
    raise InputError(
        f"{data}: no {name} here or in {data / FOLDERS[benchmark]} (--data: the folder of the "
        f"{benchmark} files, from {SOURCES[benchmark]})"
    )


def _records(path: Path) -> list[dict]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            return [json.loads(line) for line in lines if line.strip()]
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: not a gzipped JSONL file of benchmark records ({error})") from None


def _digest(record: dict) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _humaneval_example(record: dict, subset: str, path: str) -> Example:
    return Example(
        id=record["task_id"],
        kind=dataset_name("humaneval-infilling", subset),
        path=path,
        sha256=_digest(record),
        prefix=record["prompt"],
        middle=record["canonical_solution"],
        suffix=record["suffix"],
        meta={
            "benchmark": "humaneval-infilling",
            "subset": subset,
            "test": record["test"],
            "entry_point": record["entry_point"],
        },
    )


def _safim_example(record: dict, subset: str, path: str) -> Example:
    prompt = record["eval_prompt"]
    if prompt.count(HOLE) != 1:
        raise InputError(f"{path}: {record['task_id']}: eval_prompt has {prompt.count(HOLE)} holes, not one")
    prefix, suffix = prompt.split(HOLE)
    return Example(
        id=record["task_id"],
        kind=dataset_name("safim", subset),
        path=path,
        sha256=_digest(record),
        prefix=prefix,
        middle=record["ground_truth"],
        suffix=suffix,
        meta={"benchmark": "safim", "subset": subset, "unit_tests": record["unit_tests"]},
    )


def load(benchmark: str, subset: str, data: Path) -> list[Example]:
    """The subset's tasks as examples, in the published order."""
    path = data_file(benchmark, subset, data)
    make = _humaneval_example if benchmark == "humaneval-infilling" else _safim_example
    try:
        examples = [make(record, subset, path.name) for record in _records(path)]
    except KeyError as error:
        raise InputError(f"{path}: a record without the field {error} (not {benchmark} data?)") from None
    if not examples:
        raise InputError(f"{path}: no records")
    return examples


def dataset_lines(examples: Iterable[Example]) -> bytes:
    """The examples as ``fimconstrain dataset --out`` writes them: the same bytes, so the same
    content hash, whether the subset is run from that file or straight from ``--data``."""
    return b"".join((json.dumps(e.to_dict(), ensure_ascii=False) + "\n").encode() for e in examples)


# ---------------------------------------------------------------- judging a middle


@dataclass(frozen=True)
class ExecutionVerdict:
    """Whether a middle passes the task's tests, and if not why (:mod:`.execution`'s failure
    kinds, ``"wrong output"`` or ``"differs"`` for SAFIM API holes); seconds spent running it."""

    passed: bool
    failure: str | None
    seconds: float


def is_benchmark(example: Example) -> bool:
    return "benchmark" in example.meta


def judge(example: Example, middle: str, limits: Limits | None = None) -> ExecutionVerdict:
    """Run (or, for SAFIM API holes, compare) ``middle`` in ``example``'s program, within
    ``limits`` (default: the benchmark's own time limit, :data:`WALL_SECONDS`)."""
    meta = example.meta
    limits = limits or limits_for(WALL_SECONDS[meta["benchmark"]])
    program = example.prefix + middle + example.suffix
    if meta["benchmark"] == "humaneval-infilling":
        source = f"{program}\n{meta['test']}\ncheck({meta['entry_point']})\n"
        outcome = run_program(source, limits=limits)
        return ExecutionVerdict(outcome.passed, outcome.failure, outcome.seconds)
    if meta["subset"] == "api":
        same = _same_api_call(example, middle)
        return ExecutionVerdict(same, None if same else "differs", 0.0)
    return _judge_io(program, meta["unit_tests"], limits)


def _judge_io(program: str, tests: list[dict], limits: Limits) -> ExecutionVerdict:
    """SAFIM block/control: every test's input on standard input, the output one of those accepted;
    stops at the first test that fails."""
    seconds = 0.0
    for test in tests:
        outcome = run_program(program, stdin=test["input"], limits=limits)
        seconds += outcome.seconds
        if not outcome.passed:
            return ExecutionVerdict(False, outcome.failure, seconds)
        if not any(same_output(outcome.stdout, expected) for expected in test["output"]):
            return ExecutionVerdict(False, "wrong output", seconds)
    return ExecutionVerdict(True, None, seconds)


#: tokens ExecEval compares in any case
_ANY_CASE = frozenset({"yes", "no", "true", "false"})
_PRECISION = Fraction(1, 10**12)


def same_output(actual: str, expected: str) -> bool:
    """Whether a program's output is an accepted one, as ExecEval (SAFIM's judge) decides: the same
    lines up to each line's surrounding whitespace; else the same tokens, numbers within 1e-12
    and yes / no / true / false in any case (problems that accept any case or float error)."""
    lines, wanted = actual.strip().split("\n"), expected.strip().split("\n")
    if len(lines) == len(wanted) and all(a.strip() == b.strip() for a, b in zip(lines, wanted)):
        return True
    tokens, wanted = actual.split(), expected.split()
    return len(tokens) == len(wanted) and all(_same_token(a, b) for a, b in zip(tokens, wanted))


def _same_token(token: str, wanted: str) -> bool:
    try:
        return abs(Fraction(token) - Fraction(wanted)) <= _PRECISION
    except (ValueError, ZeroDivisionError):
        fold = lambda t: t.lower() if t.lower() in _ANY_CASE else t
        return fold(token) == fold(wanted)


def _same_api_call(example: Example, middle: str) -> bool:
    """SAFIM's API-hole check: equal without whitespace, or the files parse to the same AST."""
    if "".join(middle.split()) == "".join(example.middle.split()):
        return True
    try:
        mine = ast.parse(example.prefix + middle + example.suffix)
        truth = ast.parse(example.prefix + example.middle + example.suffix)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return ast.dump(mine) == ast.dump(truth)


def first_line_exact(middle: str, truth: str) -> bool:
    """Single-line exact match as bigcode's and Qwen's harnesses count it: the first line of each,
    stripped, are equal."""
    return middle.split("\n", 1)[0].strip() == truth.split("\n", 1)[0].strip()


# ---------------------------------------------------------------- command line


def add_benchmark_options(ap: argparse.ArgumentParser) -> None:
    """``--benchmark``, ``--subset``, ``--data`` and the execution limits, for ``fimconstrain eval``
    and ``fimconstrain dataset``."""
    from ..command_line.arguments import positive_float, positive_int

    group = ap.add_argument_group("benchmarks of the field (run with their tests)")
    group.add_argument(
        "--benchmark", choices=BENCHMARKS, default=None, help="run a benchmark's subsets as datasets"
    )
    group.add_argument(
        "--subset",
        nargs="+",
        default=None,
        metavar="SUBSET",
        help="which subsets (default: all): "
        + "; ".join(f"{name}: {', '.join(subsets)}" for name, subsets in FILES.items()),
    )
    group.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help="the folder of the benchmark's published files (or a folder holding human-eval-infilling/ "
        "and safim/)",
    )
    group.add_argument(
        "--exec-timeout",
        type=positive_float,
        default=None,
        metavar="S",
        help="wall-clock limit of one program run (default: HumanEval-infilling 3 s, its harness's; "
        "SAFIM 10 s, as its judge ran the faster PyPy)",
    )
    group.add_argument(
        "--exec-workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="programs run at once (default: one per core)",
    )


def chosen_subsets(args: argparse.Namespace) -> list[str]:
    """``--subset``, checked against ``--benchmark`` (default: all its subsets); ``--data`` required."""
    if args.benchmark is None:
        if args.subset or args.data:
            raise InputError("--subset and --data go with --benchmark NAME")
        return []
    if args.data is None:
        raise InputError(
            f"--benchmark {args.benchmark} needs --data DIR: its files, from {SOURCES[args.benchmark]}"
        )
    subsets = args.subset or list(subsets_of(args.benchmark))
    unknown = [s for s in subsets if s not in FILES[args.benchmark]]
    if unknown:
        known = ", ".join(FILES[args.benchmark])
        raise InputError(f"{args.benchmark} has no subset {', '.join(unknown)}; its subsets: {known}")
    return subsets


def benchmark_datasets(args: argparse.Namespace) -> list[tuple[dict, list[Example]]]:
    """The subsets ``--benchmark``/``--subset`` name, as ``fimconstrain eval``'s datasets: named
    ``BENCHMARK-SUBSET``, hashed as the file ``fimconstrain dataset --benchmark`` writes, the first
    ``-n`` tasks of each."""
    datasets = []
    for subset in chosen_subsets(args):
        examples = load(args.benchmark, subset, args.data)
        about = {
            "name": dataset_name(args.benchmark, subset),
            "path": str(data_file(args.benchmark, subset, args.data)),
            "sha256": hashlib.sha256(dataset_lines(examples)).hexdigest(),
        }
        datasets.append((about, examples[: args.n]))
    return datasets


def limits_of(args: argparse.Namespace) -> Limits | None:
    """``--exec-timeout``'s limits, or None: each benchmark's own."""
    return limits_for(args.exec_timeout) if args.exec_timeout else None


def check_harness(args: argparse.Namespace) -> int:
    """``fimconstrain dataset --benchmark NAME --check-harness``: the reference middle must pass
    every task and the empty middle gives the floor the benchmark publishes, a check that programs
    run here as the benchmark runs them.  Exit 1 when the reference fails anywhere."""
    from concurrent.futures import ThreadPoolExecutor

    from tqdm import tqdm

    limits, failed = limits_of(args), 0
    print(f"{'subset':<20} {'tasks':>6}  {'reference passes':>18}  {'empty middle passes':>20}")
    for subset in chosen_subsets(args):
        examples = load(args.benchmark, subset, args.data)[: args.n]
        with ThreadPoolExecutor(args.exec_workers) as pool:
            truths = pool.map(lambda e: judge(e, e.middle, limits), examples)
            empties = pool.map(lambda e: judge(e, "", limits), examples)
            verdicts = list(tqdm(zip(truths, empties), total=len(examples), unit="task", desc=subset))
        wrong = [(e.id, truth.failure) for e, (truth, _) in zip(examples, verdicts) if not truth.passed]
        floor = sum(empty.passed for _, empty in verdicts)
        n = len(examples)
        print(
            f"{subset:<20} {n:>6}  {n - len(wrong):>7}/{n:<5} {100 * (n - len(wrong)) / n:5.1f}%"
            f"  {floor:>8}/{n:<5} {100 * floor / n:5.2f}%"
        )
        for task, why in wrong:
            print(f"  reference fails: {task}: {why}")
        failed += len(wrong)
    return 1 if failed else 0


def write_dataset(args: argparse.Namespace) -> int:
    """``fimconstrain dataset --benchmark NAME --subset S --out FILE``: one subset as a dataset
    file (the tests in each example's ``meta``), the bytes ``eval --benchmark`` hashes."""
    subsets = chosen_subsets(args)
    if len(subsets) != 1:
        raise InputError(f"--out writes one subset: name it with --subset ({', '.join(subsets)})")
    examples = load(args.benchmark, subsets[0], args.data)[: args.n]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(dataset_lines(examples))
    print(f"{len(examples)} {dataset_name(args.benchmark, subsets[0])} tasks -> {args.out}", file=sys.stderr)
    return 0
