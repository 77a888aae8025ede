"""The compiled engine (mypyc, ``setup.py``): CI runs it, it answers exactly as the sources do,
and the choice between them behaves (``fimconstrain/engine/native.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fimconstrain
from fimconstrain.engine import native

REPO = Path(__file__).resolve().parents[2]
COMPILED = fimconstrain.ENGINE_BUILD.kind == "compiled"
needs_compiled = pytest.mark.skipif(
    not COMPILED and not os.environ.get("CI"),
    reason=f"no compiled engine here: {fimconstrain.ENGINE_BUILD.detail}",
)


def _python(code: str, env: dict[str, str] | None = None, path: Path | None = None):
    environ = {k: v for k, v in os.environ.items() if k != native.ENV_VAR}
    environ.update(env or {})
    if path is not None:
        environ["PYTHONPATH"] = str(path)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=environ,
        capture_output=True,
        text=True,
        cwd=path or REPO,
        check=False,
    )


@needs_compiled
def test_the_compiled_engine_runs():
    """Under CI (and wherever it is built) every engine module is the compiled one."""
    assert COMPILED, fimconstrain.ENGINE_BUILD.detail
    for source in native.compiled_sources():
        name = ".".join(
            ("fimconstrain", "engine", *source.relative_to(native.ENGINE_DIR).with_suffix("").parts)
        )
        module = sys.modules.get(name)
        if module is not None:
            assert not module.__file__.endswith(".py"), module.__file__


@needs_compiled
@pytest.mark.slow
@pytest.mark.time_limit(600)
def test_compiled_and_python_engines_answer_alike(tmp_path):
    """Identical verdicts on every cut-fuzzer category and identical masks over the shipped
    vocabulary on held-out cursors (benchmarks/engine_differential.py)."""
    out = tmp_path / "differential.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "engine_differential.py"), "--cases", "8"]
        + ["--mask-files", "3", "--cursors-per-file", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())["report"]
    assert report["verdicts"] >= 8 * 10 and report["characters"] > 1000
    assert report["mask_positions"] >= 6
    assert report["verdicts_differing"] == [] and report["masks_differing"] == []


def test_the_sources_run_when_asked_and_say_nothing():
    done = _python(
        "import fimconstrain, fimconstrain.engine.automata.earley as e; "
        "print(fimconstrain.ENGINE_BUILD.kind, e.__file__)",
        {native.ENV_VAR: "python"},
    )
    assert done.returncode == 0, done.stderr
    kind, file = done.stdout.split()
    assert kind == "python" and file.endswith("earley.py")
    assert done.stderr == ""


def _copy_with_edited_source(tmp_path: Path) -> Path:
    """A copy of the package (with whatever build it has) whose engine sources changed since."""
    shutil.copytree(
        REPO / "fimconstrain", tmp_path / "fimconstrain", ignore=shutil.ignore_patterns("default_model")
    )
    (tmp_path / "fimconstrain" / "grammars").unlink(missing_ok=True)
    shutil.copytree(REPO / "grammars", tmp_path / "fimconstrain" / "grammars", dirs_exist_ok=True)
    earley = tmp_path / "fimconstrain" / "engine" / "automata" / "earley.py"
    earley.write_text(earley.read_text() + "\n# edited after the build\n")
    return tmp_path


def test_a_stale_or_missing_build_falls_back_with_one_line(tmp_path):
    """Sources edited after the build (or no build at all): the sources run, and one line says why."""
    root = _copy_with_edited_source(tmp_path)
    done = _python(
        "import fimconstrain, fimconstrain.engine.automata.earley as e; "
        "print(fimconstrain.ENGINE_BUILD.kind, e.__file__); "
        "print(fimconstrain.fim_checker('x = (', '').feed('1)\\n') is not None)",
        path=root,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "python",
        str(root / "fimconstrain" / "engine" / "automata" / "earley.py"),
        "True",
    ]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "running the pure-Python engine" in lines[0], done.stderr
    assert ("older than the engine's sources" in lines[0]) == COMPILED


def test_asking_for_the_compiled_engine_when_it_cannot_run_is_an_error(tmp_path):
    root = _copy_with_edited_source(tmp_path)
    done = _python("import fimconstrain", {native.ENV_VAR: "compiled"}, path=root)
    assert done.returncode != 0
    assert "ImportError: FIMCONSTRAIN_ENGINE=compiled, but the compiled engine" in done.stderr


def test_an_unknown_engine_choice_is_refused():
    done = _python("import fimconstrain", {native.ENV_VAR: "fast"})
    assert done.returncode != 0 and "FIMCONSTRAIN_ENGINE must be auto, python or compiled" in done.stderr
