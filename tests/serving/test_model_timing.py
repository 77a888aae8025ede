"""benchmarks/model_timing.py, the GPU timing of issue 18, runs end to end on the CPU with two
small layers of each architecture: a session that gets a GPU only has to run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "model_timing.py"


def test_both_architectures_are_timed_at_batch_1_and_in_a_batch(tmp_path):
    out = tmp_path / "timing.json"
    command = [sys.executable, str(SCRIPT), "--tiny", "--cuts", "2", "--tokens", "4", "--batches", "2"]
    done = subprocess.run(
        [*command, "--device", "cpu", "--out", str(out), "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"santacoder", "starcoder2-3b"}
    for name, part in results.items():
        paths = [(row[0], row[1]) for row in part["rows"]]
        assert paths == [
            (1, "unconstrained"),
            (1, "constrained"),
            (1, "prefix"),
            (2, "whole top-64 mask"),
            (2, "greedy, settled"),
        ], name
        for row in part["rows"][1:]:  # the constrained paths generate and are timed
            assert float(row[2]) > 0 and float(row[3]) > 0, (name, row)
