"""The corpus step (scripts/code_corpus.py) on wheels built here: pins -> wheels -> unpacked
site-packages -> permissive_code.py's collection -> manifest -> comparison, with no network."""

import gzip
import hashlib
import json
import zipfile
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def corpus(load_script):
    return load_script("code_corpus")


def _wheel(folder: Path, name: str, version: str, license_: str, files: dict[str, bytes]) -> Path:
    """A wheel of ``files`` whose metadata gives ``license_`` and whose RECORD lists them."""
    info = f"{name}-{version}.dist-info"
    members = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\n{license_}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    members[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*members, f"{info}/RECORD"]).encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def _row(distribution: str, version: str, path: str, data: bytes, license_: str = "MIT") -> dict:
    return {
        "distribution": distribution,
        "version": version,
        "license": license_,
        "path": path,
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _manifest(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as stream:
        return [json.loads(line) for line in stream]


def test_pins_unpack_collect_manifest_compare(corpus, tmp_path, monkeypatch, capsys):
    wheels, site = tmp_path / "wheels", tmp_path / "site-packages"
    init, core, extra = b"from .core import f\n", b"def f(x):\n    return x\n", b"G = 1\n"
    top = b"T = 1\n"
    _wheel(
        wheels,
        "goodpkg",
        "1.0",
        "License-Expression: MIT",
        {
            "goodpkg/__init__.py": init,
            "goodpkg/core.py": core,
            "goodpkg/extra.py": extra,
            "goodpkg-1.0.data/purelib/goodtop.py": top,  # pip installs it at the top
            "goodpkg-1.0.data/scripts/tool.py": b"S = 1\n",  # and this in bin/: not collected
        },
    )
    _wheel(wheels, "copyleft", "2.0", "License-Expression: GPL-3.0-only", {"copyleft.py": b"C = 1\n"})
    _wheel(wheels, "goodpkg", "0.9", "License-Expression: MIT", {"goodpkg/old.py": b"O = 1\n"})  # not pinned
    pins = tmp_path / "pins.txt"
    pins.write_text("# a comment\n\nGoodPkg==1.0\ncopyleft==2.0  # not permissive\ngone==3.0\n")
    shipped = tmp_path / "shipped.jsonl.gz"
    with gzip.open(shipped, "wt", encoding="utf-8") as stream:
        for row in (
            _row("goodpkg", "1.0", "goodpkg/__init__.py", init),  # reproduced
            _row("goodpkg", "1.0", "goodpkg/core.py", core),  # reproduced
            _row("goodpkg", "1.0", "goodpkg/again.py", core),  # made as core.py
            _row("copyleft", "2.0", "copyleft.py", b"C = 1\n"),  # unpacked, not collected
            _row("goodpkg", "1.0", "goodpkg/core.py", b"def f(x):\n    return -x\n"),  # other bytes
            _row("goodpkg", "1.0", "goodpkg/removed.py", b"R = 1\n"),  # not in the wheel
            _row("gone", "3.0", "gone/__init__.py", b"Z = 1\n"),  # its pin is not downloaded
        ):
            stream.write(json.dumps(row) + "\n")
    calls = []

    def pip_download(pin, dest, python, platforms):
        calls.append((pin, python))
        return "No matching distribution found for " + pin

    monkeypatch.setattr(corpus, "pip_download", pip_download)
    out = tmp_path / "made.jsonl.gz"
    argv = ["--pins", str(pins), "--wheels", str(wheels), "--site-packages", str(site)]
    corpus.main([*argv, "--manifest", str(out), "--compare", str(shipped), "--python-version", "3.12"])

    # only the pin without a wheel goes to pip; the unpinned wheel is not unpacked
    assert calls == [("gone==3.0", "3.12")]
    assert not (site / "goodpkg" / "old.py").exists()
    assert (site / "copyleft.py").read_bytes() == b"C = 1\n"  # unpacked, but not collected
    assert not any(site.rglob("tool.py"))
    assert _manifest(out) == [
        _row("goodpkg", "1.0", "goodpkg/__init__.py", init),
        _row("goodpkg", "1.0", "goodpkg/core.py", core),
        _row("goodpkg", "1.0", "goodpkg/extra.py", extra),
        _row("goodpkg", "1.0", "goodtop.py", top),
    ]
    report = capsys.readouterr().out
    for line in (
        "3 pins: 2 wheels (2 already there), 1 not downloaded",
        "reproduced: 2\n",
        "same bytes, made under another distribution or path: 1\n",
        "same bytes, not made: 1\n",
        "other bytes: 1\n",
        "missing, pin not downloaded: 1\n",
        "missing from its wheel: 1\n",
        "extra (made, not shipped): 2\n",
        "not downloaded: gone==3.0 (Python 3.12: No matching distribution found for gone==3.0)",
    ):
        assert line in report

    # a second run downloads nothing it has and unpacks nothing again
    calls.clear()
    pinned = [wheels / "goodpkg-1.0-py3-none-any.whl", wheels / "copyleft-2.0-py3-none-any.whl"]
    assert corpus.unpack(pinned, site) == 0
    corpus.main([*argv, "--manifest", str(out), "--python-version", "3.12", "--python-version", "3.11"])
    assert calls == [("gone==3.0", "3.12"), ("gone==3.0", "3.11")]
    assert "0 wheels unpacked" in capsys.readouterr().out


def test_bad_pin_lines_are_refused(corpus, tmp_path):
    pins = tmp_path / "pins.txt"
    pins.write_text("requests>=2\n")
    with pytest.raises(SystemExit, match="not name==version"):
        corpus.read_pins(pins)


def test_select_is_the_training_selection(corpus, tmp_path, monkeypatch):
    """--select drops held-out files (sha256 0 mod 20), files equal to a --stdlib file and what
    passes --code-per-distribution, as train_default_model.py does."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    texts = [f"X = {i}\n".encode() for i in range(200)]
    heldout = next(t for t in texts if int(hashlib.sha256(t).hexdigest(), 16) % 20 == 0)
    train = [t for t in texts if t != heldout][:8]
    stdlib = tmp_path / "stdlib"
    stdlib.mkdir()
    (stdlib / "copied.py").write_bytes(train[0])
    files = {f"pkg/m{i}.py": t for i, t in enumerate([heldout, *train])}
    wheels = tmp_path / "wheels"
    _wheel(wheels, "pkg", "1.0", "License-Expression: MIT", files)
    pins = tmp_path / "pins.txt"
    pins.write_text("pkg==1.0\n")
    monkeypatch.setattr(corpus, "pip_download", lambda *a: pytest.fail("no download expected"))
    out = tmp_path / "made.jsonl"
    per_distribution = sum(len(t) for t in train[1:]) - 1  # room for all but one of the others
    corpus.main(
        ["--pins", str(pins), "--wheels", str(wheels), "--site-packages", str(tmp_path / "site")]
        + ["--manifest", str(out), "--select", "--stdlib", str(stdlib)]
        + ["--code-per-distribution", str(per_distribution)]
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    hashes = [row["sha256"] for row in rows]
    assert hashes == sorted(hashes)  # hash order, as training takes them
    assert len(rows) == len(train) - 2  # not the held-out file, the stdlib copy, or the one over the cap
    made = set(hashes)
    assert hashlib.sha256(heldout).hexdigest() not in made
    assert hashlib.sha256(train[0]).hexdigest() not in made
