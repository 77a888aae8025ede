"""Stack-Boundary / Stack-RandSpan builders: deterministic, reassemble to the file, cuts as §VII-A
defines them."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import sysconfig
import tokenize
from pathlib import Path

import pytest

from fimconstrain.evaluation.datasets import (
    NON_SYMBOLS,
    PRESETS,
    BuildOptions,
    build,
    heldout_stdlib_files,
    main_build,
    python_files,
    read_examples,
    sha256,
    training_exclusions,
)

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SOURCES = ["textwrap.py", "string.py", "json/decoder.py", "json/encoder.py", "shlex.py", "colorsys.py"]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A folder with six real Python files and four that must be skipped."""
    out = tmp_path_factory.mktemp("corpus")
    for name in SOURCES:
        dest = out / "pkg" / name.replace("/", "_")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(STDLIB / name, dest)
    (out / "latin1.py").write_bytes(b"# caf\xe9\n" + b"x = 1\n" * 300)  # not UTF-8
    (out / "broken.py").write_text("def f(:\n    pass\n" * 100)  # ast.parse rejects it
    (out / "tiny.py").write_text("x = 1\n")  # under the size limit
    (out / "notes.txt").write_text("y = 2\n" * 300)  # not a .py file
    return out


def make(root: Path, kind: str, n: int = 25, seed: int = 0, per_file: int = 5) -> list:
    return list(build(root, n, BuildOptions(kind=kind, seed=seed, per_file=per_file, max_chars=20000)))


@pytest.mark.parametrize("kind", ["boundary", "randspan"])
def test_deterministic_and_seeded(root, kind):
    first, again, other = make(root, kind), make(root, kind), make(root, kind, seed=1)
    assert len(first) == 25
    assert first == again
    assert [e.to_dict() for e in first] != [e.to_dict() for e in other]
    assert len({e.id for e in first}) == len(first)


@pytest.mark.parametrize("kind", ["boundary", "randspan"])
def test_examples_reassemble_to_the_parsing_file(root, kind):
    import ast

    for ex in make(root, kind):
        data = (root / ex.path).read_bytes()
        assert ex.prefix + ex.middle + ex.suffix == data.decode("utf-8")
        assert ex.sha256 == sha256(data)
        assert ex.middle and ex.kind == kind
        ast.parse(ex.prefix + ex.middle + ex.suffix)
        assert Path(ex.path).name not in {"latin1.py", "broken.py", "tiny.py"}


def _symbols(text: str) -> dict[int, tuple[int, int]]:
    """start offset -> (end offset, block) of every tokenizer symbol; a block is numbered by the
    INDENT that opened it (0: the module's top level)."""
    starts = [0]
    for line in io.StringIO(text):
        starts.append(starts[-1] + len(line))
    out, opened, blocks = {}, [0], 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.INDENT:
            blocks += 1
            opened.append(blocks)
        elif tok.type == tokenize.DEDENT:
            opened.pop()
        elif tok.type not in NON_SYMBOLS and tok.string:
            out[starts[tok.start[0] - 1] + tok.start[1]] = (starts[tok.end[0] - 1] + tok.end[1], opened[-1])
    return out


def test_boundary_cuts_run_inside_two_symbols_of_one_block(root):
    """§VII-A as the paper's code does it: two symbols of one block (INDENT/DEDENT nesting), cut at
    a random offset inside each; the middle never leaves the block."""
    ends_inside = 0
    for ex in make(root, "boundary"):
        text = ex.prefix + ex.middle + ex.suffix
        symbols = _symbols(text)
        cut, end = len(ex.prefix), len(ex.prefix) + len(ex.middle)
        (first,) = [s for s, (e, _) in symbols.items() if s <= cut < e]
        (second,) = [s for s, (e, _) in symbols.items() if s <= end < e]
        assert first < second and symbols[first][1] == symbols[second][1]
        ends_inside += end > second
    assert ends_inside > 0, "some middles end inside the second symbol, not at its start"


def test_randspan_cuts(root):
    for ex in make(root, "randspan"):
        size = ex.meta["file_chars"]
        assert len(ex.prefix) <= 0.9 * size
        assert len(ex.middle) == min(100, int(0.2 * size), size - len(ex.prefix))
        assert len(ex.middle) <= 100


def test_per_file_and_files_in_seeded_order(root):
    examples = make(root, "randspan", n=12, per_file=4)
    paths = [e.path for e in examples]
    assert len(set(paths)) == 3 and all(paths.count(p) == 4 for p in set(paths))


def test_training_files_are_excluded(tmp_path):
    stdlib, corpus, model = tmp_path / "stdlib", tmp_path / "corpus", tmp_path / "model"
    for folder in (stdlib / "json", corpus, model):
        folder.mkdir(parents=True)
    for name in ("textwrap.py", "string.py", "json/decoder.py"):
        shutil.copy(STDLIB / name, stdlib / name)
    (model / "training.json").write_text(json.dumps({"stdlib": str(stdlib), "heldout_paths": ["string.py"]}))
    shutil.copy(STDLIB / "textwrap.py", corpus / "vendored_textwrap.py")  # a copy of a training file
    shutil.copy(STDLIB / "string.py", corpus / "string.py")  # held out: allowed
    shutil.copy(STDLIB / "shlex.py", corpus / "shlex.py")  # never seen: allowed
    exclusion = training_exclusions(model)
    assert exclusion.excludes(stdlib / "textwrap.py", "x") and not exclusion.excludes(
        stdlib / "string.py", "x"
    )
    used = {e.path for e in build(corpus, 100, BuildOptions(kind="randspan", per_file=1), exclusion)}
    assert used == {"string.py", "shlex.py"}
    everything = training_exclusions(tmp_path / "no-model")  # no training.json: the whole running stdlib
    assert everything.excludes(STDLIB / "string.py", "x")


def test_a_model_trained_on_installed_code_excludes_its_manifest_and_holds_out_the_stdlib(tmp_path):
    """A model whose runs all read installed code (``--code``) was trained on the files of its
    manifest, by hash, and on no file of the standard library."""
    model, corpus = tmp_path / "model", tmp_path / "corpus"
    model.mkdir(), corpus.mkdir()
    trained = (STDLIB / "textwrap.py").read_bytes()
    (corpus / "copied.py").write_bytes(trained)
    shutil.copy(STDLIB / "shlex.py", corpus / "shlex.py")
    (model / "training.json").write_text(json.dumps({"runs": [{"code": {"files": 1}}]}))
    with gzip.open(model / "code.manifest.jsonl.gz", "wt") as manifest:
        row = {"path": "textwrap.py", "sha256": hashlib.sha256(trained).hexdigest()}
        manifest.write(json.dumps(row) + "\n")
    exclusion = training_exclusions(model)
    used = {e.path for e in build(corpus, 100, BuildOptions(kind="randspan", per_file=1), exclusion)}
    assert used == {"shlex.py"}
    heldout = heldout_stdlib_files(model)
    assert STDLIB / "textwrap.py" in heldout and STDLIB / "string.py" in heldout
    assert not any("site-packages" in f.parts for f in heldout)


def test_main_build_writes_jsonl(root, tmp_path, capsys):
    out = tmp_path / "b.jsonl"
    args = [
        "--root",
        str(root),
        "--kind",
        "boundary",
        "-n",
        "7",
        "--seed",
        "3",
        "--out",
        str(out),
        "--max-chars",
        "20000",
        "--per-file",
        "2",
        "--no-exclude",
    ]
    assert main_build(args + ["--manifest", str(tmp_path / "m.jsonl")]) == 0
    examples = read_examples(out)
    header, *manifest = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert header["manifest"] == 1 and header["options"]["seed"] == 3 and header["options"]["per_file"] == 2
    assert [(m["id"], m["sha256"], m["start"], m["end"]) for m in manifest] == [
        (e.id, e.sha256, len(e.prefix), len(e.prefix) + len(e.middle)) for e in examples
    ]
    assert len(examples) == 7 and examples == make(root, "boundary", n=7, seed=3, per_file=2)
    assert "7 boundary examples" in capsys.readouterr().err
    assert main_build(args[:5] + ["999"] + args[6:]) == 1  # fewer examples than asked for


def test_python_files_skips_caches(tmp_path):
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("x = 1\n")
    assert python_files(tmp_path) == [tmp_path / "b.py"]


def test_paper_preset(tmp_path):
    """10 cuts per file, from every file that parses, whatever its size."""
    (tmp_path / "small.py").write_text("def f(a, b):\n    return a + b\n")
    examples = list(build(tmp_path, 100, BuildOptions(kind="boundary", **PRESETS["paper"])))
    assert examples and {e.path for e in examples} == {"small.py"}
    big = [e for e in make_paper(tmp_path, "randspan") if e.meta["file_chars"] > 1000]
    assert not big
    assert PRESETS["paper"]["per_file"] == 10


def make_paper(root: Path, kind: str) -> list:
    return list(build(root, 100, BuildOptions(kind=kind, **PRESETS["paper"])))


@pytest.mark.parametrize("kind", ["boundary", "randspan"])
def test_rebuild_and_verify_from_the_manifest(root, tmp_path, kind, capsys):
    out, manifest = tmp_path / "d.jsonl", tmp_path / "m.jsonl"
    common = ["--root", str(root), "--no-exclude", "--max-chars", "20000"]
    assert (
        main_build(
            [
                *common,
                "--kind",
                kind,
                "-n",
                "9",
                "--per-file",
                "3",
                "--out",
                str(out),
                "--manifest",
                str(manifest),
            ]
        )
        == 0
    )
    again = tmp_path / "again.jsonl"
    assert main_build([*common, "--rebuild", str(manifest), "--out", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()
    assert main_build([*common, "--verify", str(manifest)]) == 0
    header, *rows = manifest.read_text().splitlines()
    moved = json.loads(rows[0])
    moved["end"] += 1
    (tmp_path / "tampered.jsonl").write_text("\n".join([header, json.dumps(moved), *rows[1:]]) + "\n")
    capsys.readouterr()
    assert main_build([*common, "--verify", str(tmp_path / "tampered.jsonl")]) == 1
    assert "cuts it differently" in capsys.readouterr().err


def test_rebuild_refuses_changed_or_missing_files(root, tmp_path, capsys):
    manifest = tmp_path / "m.jsonl"
    changed = tmp_path / "corpus"
    shutil.copytree(root, changed)
    args = ["--root", str(changed), "--no-exclude", "--max-chars", "20000", "--kind", "randspan", "-n", "3"]
    assert main_build([*args, "--out", str(tmp_path / "d.jsonl"), "--manifest", str(manifest)]) == 0
    path = changed / json.loads(manifest.read_text().splitlines()[1])["path"]
    path.write_text(path.read_text() + "\n# edited\n")
    capsys.readouterr()
    for action in ("--rebuild", "--verify"):
        assert (
            main_build(["--root", str(changed), action, str(manifest), "--out", str(tmp_path / "x.jsonl")])
            == 2
        )
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "differs from the manifest" in err
    path.unlink()
    assert (
        main_build(["--root", str(changed), "--rebuild", str(manifest), "--out", str(tmp_path / "x.jsonl")])
        == 2
    )
    assert "missing" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, says",
    [
        (["--kind", "boundary", "--root", "/nonexistent"], "is not a folder"),
        (["--root", "."], "--kind is required"),
        (["--kind", "boundary", "--root", "."], "--out is required"),
        (["--rebuild", "DATASET", "--root", ".", "--out", "x.jsonl"], "not a manifest row"),
        (["--verify", "NOPE", "--root", "."], "No such file"),
    ],
)
def test_build_errors_exit_2(root, tmp_path, capsys, args, says):
    dataset = tmp_path / "d.jsonl"
    main_build(["--root", str(root), "--kind", "randspan", "-n", "1", "--no-exclude", "--out", str(dataset)])
    capsys.readouterr()
    args = [str(dataset) if a == "DATASET" else str(tmp_path / "nope") if a == "NOPE" else a for a in args]
    try:
        code = main_build(args)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    assert code == 2 and says in capsys.readouterr().err


@pytest.mark.parametrize("option", [["-n", "0"], ["--per-file", "0"], ["--min-chars", "-1"]])
def test_build_numbers_out_of_range_exit_2(option, capsys):
    with pytest.raises(SystemExit) as exit_:
        main_build(["--kind", "boundary", "--out", "x.jsonl", *option])
    assert exit_.value.code == 2 and "error: argument" in capsys.readouterr().err
