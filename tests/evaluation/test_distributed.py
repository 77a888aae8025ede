"""An evaluation spread out gives the rows of a single-process run: ``--shard I/N`` runs joined
by ``merge``, and ``--ray`` on two local Ray actors (timings aside, which differ between any two
runs: :data:`~fimconstrain.evaluation.sharding.TIMING_FIELDS`)."""

from __future__ import annotations

import importlib
import os
import shutil
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from fimconstrain.evaluation.datasets import main_build
from fimconstrain.evaluation.inputs import read_results
from fimconstrain.evaluation.runs import main_eval
from fimconstrain.evaluation.sharding import main_merge, without_timings

STDLIB = Path(sysconfig.get_paths()["stdlib"])
BUDGET = ["--max-new-tokens", "8", "--top-k", "10"]


def require(name: str):
    """The module; in CI (``CI`` set) its absence fails the test, elsewhere it skips."""
    if os.environ.get("CI"):
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=f"{name} is not installed (CI installs it: see .ci/run)")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"), context=256)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> list[Path]:
    """Three Stack-Boundary and two Stack-RandSpan examples of two small standard-library files."""
    root, out = tmp_path_factory.mktemp("corpus"), tmp_path_factory.mktemp("datasets")
    for name in ("colorsys.py", "bisect.py"):
        shutil.copy(STDLIB / name, root / name)
    paths = []
    for kind, n in (("boundary", "3"), ("randspan", "2")):
        paths.append(out / f"{kind}.jsonl")
        args = ["--root", str(root), "--kind", kind, "--preset", "paper", "-n", n, "--no-exclude"]
        assert main_build([*args, "--out", str(paths[-1])]) == 0
    return paths


def eval_args(datasets, tiny_dir, out) -> list[str]:
    return [*map(str, datasets), "--model", str(tiny_dir), "--out", str(out), *BUDGET]


@pytest.fixture(scope="module")
def single(datasets, tiny_dir, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("single") / "all.jsonl"
    assert main_eval(eval_args(datasets, tiny_dir, out)) == 0
    return [without_timings(r) for r in read_results(out)]


def test_shards_merged_are_the_single_run(single, datasets, tiny_dir, tmp_path, capsys):
    shards = [tmp_path / f"shard{i}.jsonl" for i in (1, 2, 3)]
    for i, path in enumerate(shards, 1):
        assert main_eval([*eval_args(datasets, tiny_dir, path), "--shard", f"{i}/3"]) == 0
    sizes = [len(read_results(p)) for p in shards]
    assert all(sizes) and sum(sizes) == len(single)
    merged = tmp_path / "merged.jsonl"
    merge_args = ["--datasets", *map(str, datasets), "--out", str(merged)]
    assert main_merge([*map(str, shards[:2]), *merge_args]) == 1  # a shard missing: said, exit 1
    assert "have no records yet" in capsys.readouterr().err
    assert main_merge([*map(str, reversed(shards)), *merge_args]) == 0
    assert [without_timings(r) for r in read_results(merged)] == single


def test_merge_refuses_a_record_of_another_dataset(datasets, tiny_dir, tmp_path, capsys):
    part = tmp_path / "part.jsonl"
    assert main_eval([*eval_args(datasets[:1], tiny_dir, part), "-n", "1", "--modes", "unconstrained"]) == 0
    assert main_merge([str(part), "--datasets", str(datasets[1]), "--out", str(tmp_path / "m.jsonl")]) == 2
    assert "of none of the datasets given" in capsys.readouterr().err


def test_bad_shard_is_a_usage_error(datasets, tiny_dir, tmp_path):
    for bad in ("0/2", "3/2", "1-2"):
        with pytest.raises(SystemExit) as exit_:
            main_eval([*eval_args(datasets, tiny_dir, tmp_path / "x.jsonl"), "--shard", bad])
        assert exit_.value.code == 2


@pytest.mark.time_limit(300)
def test_two_ray_actors_give_the_single_run(single, datasets, tiny_dir, tmp_path):
    ray = require("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        out = tmp_path / "ray.jsonl"
        assert main_eval([*eval_args(datasets, tiny_dir, out), "--ray"]) == 0
        assert [without_timings(r) for r in read_results(out)] == single
    finally:
        ray.shutdown()
