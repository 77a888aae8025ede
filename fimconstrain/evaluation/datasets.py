"""Stack-Boundary and Stack-RandSpan (paper 004 §VII-A) built from any folder of Python files.

Each example cuts one file into prefix, middle (the deleted ground truth) and
suffix.  Files are drawn in a seeded order and every file's cuts come from a
generator seeded by (seed, kind, path), so a dataset is a pure function of the
folder, the seed and the options.  Files the shipped model was trained on are
left out (see :func:`training_exclusions`).  ``datasets/README.md`` documents
the definitions; ``main_build`` is ``fimconstrain dataset``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import itertools
import json
import os
import random
import site
import sys
import sysconfig
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..decoding.loop.oracle import ast_parses
from .benchmarks import add_benchmark_options
from .examples import Example

KINDS = ("boundary", "randspan")
SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".tox", ".venv", "node_modules"}
#: tokenize types that are not symbols of the program (layout, comments, markers)
NON_SYMBOLS = {
    tokenize.ENCODING,
    tokenize.NEWLINE,
    tokenize.NL,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
    tokenize.COMMENT,
    tokenize.ERRORTOKEN,
}
RANDSPAN_MAX_CHARS = 100  # §VII-A: delete up to 100 characters,
RANDSPAN_MAX_FRACTION = 0.2  # 20% of the file,
RANDSPAN_START_FRACTION = 0.9  # from a random point up to 90% of the way through
#: what a dataset's sampling defaults to: "paper" as §VII-A (10 cuts per file, every file that
#: parses); "project" samples one cut per file (a few hundred experiments then span as many
#: files as a sample of the paper's 95,390 would) from files of 1,000 to 50,000 characters
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"per_file": 10, "min_chars": 1, "max_chars": None},
    "project": {"per_file": 1, "min_chars": 1000, "max_chars": 50000},
}
PER_FILE = PRESETS["project"]["per_file"]
DEFAULT_COUNT = 300  # examples a dataset has unless -n says otherwise


@dataclass
class Exclusion:
    """Files a model was trained on, by resolved path and by content hash (copies elsewhere count too)."""

    paths: set[Path] = field(default_factory=set)
    hashes: set[str] = field(default_factory=set)
    source: str = "nothing excluded"

    def excludes(self, path: Path, sha: str) -> bool:
        return sha in self.hashes or path.resolve() in self.paths


# ---------------------------------------------------------------- files


def default_root() -> Path:
    """This Python's site-packages: real code that the default model (trained on the standard
    library) never saw."""
    return Path(site.getsitepackages()[0])


def python_files(root: Path) -> list[Path]:
    """Every ``.py`` file under ``root``, sorted, without caches and VCS folders."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        found.extend(Path(dirpath) / name for name in filenames if name.endswith(".py"))
    return sorted(found)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def interpreter_version() -> tuple[int, int]:
    """This interpreter's Python version, clamped into the versions the engine supports: the
    version whose syntax :func:`ast_parses` judges, so the engine's verdict should agree with it."""
    from ..engine.versions import NEWEST, OLDEST

    return min(max((sys.version_info.major, sys.version_info.minor), OLDEST), NEWEST)


def engine_accepts(text: str, python_version=None) -> bool:
    """Whether our parser accepts ``text`` as a whole program at ``python_version`` (default: the
    newest; paper: drop files the implementation can't take)."""
    from ..engine import fim_checker
    from ..engine.errors import FimConstrainError

    try:
        checker = fim_checker("", "", python_version=python_version).feed(text)
        return checker is not None and checker.is_complete()
    except (FimConstrainError, RecursionError):
        return False


def read_source(
    data: bytes, min_chars: int, max_chars: int | None, python_version=None
) -> tuple[str | None, str]:
    """(text, "ok") if the file is UTF-8, within the size limits (``max_chars`` None: no upper
    limit), and ``ast.parse`` and our parser (at
    ``python_version``, default: the newest) accept it, else (None, why not)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    if text.startswith("\ufeff") or "\0" in text:
        return None, "BOM or NUL"
    if len(text) < min_chars or (max_chars is not None and len(text) > max_chars):
        return None, "size"
    if not ast_parses(text):
        return None, "ast.parse rejects"
    if not engine_accepts(text, python_version):
        return None, "our parser rejects"
    return text, "ok"


# ---------------------------------------------------------------- training files


def stdlib_sources(root: Path) -> list[Path]:
    """The standard library's own ``.py`` files under ``root``, sorted: installed packages
    (``site-packages``, ``dist-packages``) left out."""
    installed = {"site-packages", "dist-packages"}
    return [f for f in python_files(root) if not installed & set(f.relative_to(root).parts)]


def _training_facts(model_dir: Path | None) -> tuple[Path | None, dict]:
    """The model's ``training.json`` path and facts ({} when it has none)."""
    card = Path(model_dir) / "training.json" if model_dir else None
    if card is None or not card.is_file():
        return card, {}
    return card, json.loads(card.read_text(encoding="utf-8"))


def trained_on_code(facts: dict) -> bool:
    """Whether every run of ``scripts/train_default_model.py`` read installed code (``--code``):
    then no file of the standard library was trained on (they are skipped by hash)."""
    runs = facts.get("runs") or ()
    return bool(runs) and all(run.get("code") for run in runs)


def training_exclusions(model_dir: Path | None) -> Exclusion:
    """The files the model in ``model_dir`` was trained on (``training.json``), by path and hash.

    ``scripts/train_default_model.py`` trains on the standard library minus a held-out list that
    ``training.json`` records (every other ``.py`` file under that root, site-packages aside, is
    excluded), or on installed code whose manifest (``code.manifest.jsonl.gz``, sha256 per file)
    lies beside it. Without a ``training.json``: the whole running standard library.
    """
    card, facts = _training_facts(model_dir)
    if trained_on_code(facts):
        assert model_dir is not None  # (there are facts)
        manifest = Path(model_dir) / "code.manifest.jsonl.gz"
        with gzip.open(manifest, "rt", encoding="utf-8") as rows:
            hashes = {json.loads(row)["sha256"] for row in rows}
        return Exclusion(hashes=hashes, source=f"{manifest} ({len(hashes)} training files, by content hash)")
    stdlib = Path(facts.get("stdlib") or sysconfig.get_paths()["stdlib"])
    heldout = set(facts.get("heldout_paths", ()))
    excl = Exclusion(
        source=f"{card} (standard library at {stdlib}, {len(heldout)} held-out files allowed)"
        if facts
        else f"no training.json: the whole standard library at {stdlib}"
    )
    for path in stdlib_sources(stdlib) if stdlib.is_dir() else []:
        if path.relative_to(stdlib).as_posix() in heldout:
            continue
        excl.paths.add(path.resolve())
        excl.hashes.add(sha256(path.read_bytes()))
    for name in facts.get("train_paths", ()):  # an explicit training list, if a later script writes one
        excl.paths.add((stdlib / name).resolve())
    return excl


def heldout_stdlib_files(model_dir: Path) -> list[Path]:
    """The standard-library files the model in ``model_dir`` never trained on, sorted: its
    ``training.json``'s held-out list, or the whole running standard library (site-packages
    aside) for a model trained on installed code only."""
    _, facts = _training_facts(model_dir)
    if trained_on_code(facts):
        return stdlib_sources(Path(sysconfig.get_paths()["stdlib"]))
    root = Path(facts["stdlib"])
    return sorted(root / p for p in facts["heldout_paths"] if (root / p).is_file())


# ---------------------------------------------------------------- cuts


def line_offsets(text: str) -> list[int]:
    """Offset of each line's start as ``tokenize`` numbers lines (split at ``\\n`` only,
    like ``StringIO``)."""
    starts, pos = [], 0
    for line in io.StringIO(text):
        starts.append(pos)
        pos += len(line)
    starts.append(pos)
    return starts


def symbols_by_block(text: str) -> list[list[tuple[int, int]]]:
    """(start, end) offsets of the tokenizer's symbols, one list per block: the module's top level
    and each body from an ``INDENT`` to its ``DEDENT``; a nested body's symbols are its own, not
    its parent's (the statement that opens it is the parent's)."""
    starts = line_offsets(text)
    blocks: list[list[tuple[int, int]]] = [[]]
    open_blocks = [blocks[0]]
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.INDENT:
            blocks.append([])
            open_blocks.append(blocks[-1])
        elif tok.type == tokenize.DEDENT:
            open_blocks.pop()
        elif tok.type not in NON_SYMBOLS and tok.string:
            start = starts[tok.start[0] - 1] + tok.start[1]
            end = starts[tok.end[0] - 1] + tok.end[1]
            open_blocks[-1].append((start, end))
    return [block for block in blocks if len(block) > 1]


def boundary_cut(blocks: list[list[tuple[int, int]]], rng: random.Random) -> tuple[int, int]:
    """A uniformly random pair of symbols of one block; the middle runs from a random offset
    inside the first to a random offset inside the second (so a non-empty tail of the first is
    deleted, and the middle never leaves the block)."""
    block = rng.choices(blocks, weights=[len(b) * (len(b) - 1) // 2 for b in blocks])[0]
    i, j = sorted(rng.sample(range(len(block)), 2))
    (first_start, first_end), (second_start, second_end) = block[i], block[j]
    return first_start + rng.randrange(first_end - first_start), second_start + rng.randrange(
        second_end - second_start
    )


def randspan_cut(size: int, rng: random.Random) -> tuple[int, int]:
    """From a point up to 90% through, delete 100 characters, 20% of the file or to its end,
    whichever comes first."""
    start = rng.randint(0, int(RANDSPAN_START_FRACTION * size))
    length = min(RANDSPAN_MAX_CHARS, int(RANDSPAN_MAX_FRACTION * size), size - start)
    return start, start + length


def file_cuts(text: str, kind: str, rng: random.Random, count: int) -> list[tuple[int, int]]:
    """Up to ``count`` distinct non-empty (start, end) cuts of ``text``, in the order drawn."""
    if kind == "boundary":
        try:
            blocks = symbols_by_block(text)
        except (tokenize.TokenError, SyntaxError):
            return []
        if not blocks:
            return []
        draw = lambda: boundary_cut(blocks, rng)
    elif kind == "randspan":
        draw = lambda: randspan_cut(len(text), rng)
    else:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    cuts: list[tuple[int, int]] = []
    for _ in range(count * 5):
        cut = draw()
        if cut[1] > cut[0] and cut not in cuts:
            cuts.append(cut)
        if len(cuts) == count:
            break
    return cuts


# ---------------------------------------------------------------- building


@dataclass
class BuildOptions:
    """What a dataset depends on besides the folder."""

    kind: str = "boundary"
    seed: int = 0
    per_file: int = PER_FILE
    min_chars: int = 1000
    max_chars: int | None = 50000
    #: the Python version our parser checks the files as (default: this interpreter's, whose
    #: ast.parse checks them too)
    python_version: tuple[int, int] = field(default_factory=interpreter_version)


def examples_of_file(text: str, data: bytes, rel: str, opts: BuildOptions) -> list[Example]:
    """The cuts of one file as examples; the file's generator is seeded by (seed, kind, path)."""
    rng = random.Random(f"{opts.seed}:{opts.kind}:{rel}")
    sha = sha256(data)
    out = []
    for index, (start, end) in enumerate(file_cuts(text, opts.kind, rng, opts.per_file)):
        out.append(
            Example(
                id=f"{opts.kind}:{rel}:{index}",
                kind=opts.kind,
                path=rel,
                sha256=sha,
                prefix=text[:start],
                middle=text[start:end],
                suffix=text[end:],
                meta={"start": start, "end": end, "file_chars": len(text)},
            )
        )
    return out


def file_rank(seed: int, rel: str) -> str:
    """A file's place in the seeded order: a hash of its path, so adding or removing files leaves
    the others' order."""
    return sha256(f"{seed}:{rel}".encode())


def build(
    root: Path, n: int, opts: BuildOptions, exclusion: Exclusion | None = None, stats: dict | None = None
) -> Iterator[Example]:
    """The first ``n`` examples from the files of ``root`` in seeded order (:func:`file_rank`),
    ``per_file`` each."""
    root = Path(root)
    files = sorted(
        python_files(root), key=lambda path: file_rank(opts.seed, path.relative_to(root).as_posix())
    )
    stats = {} if stats is None else stats
    made = 0
    for path in files:
        if made >= n:
            return
        data = path.read_bytes()
        if len(data) < opts.min_chars:  # fewer bytes than characters wanted: too small, whatever it holds
            stats["size"] = stats.get("size", 0) + 1
            continue
        if exclusion is not None and exclusion.excludes(path, sha256(data)):
            stats["training data"] = stats.get("training data", 0) + 1
            continue
        text, verdict = read_source(data, opts.min_chars, opts.max_chars, opts.python_version)
        stats[verdict] = stats.get(verdict, 0) + 1
        if text is None:
            continue
        for example in examples_of_file(text, data, path.relative_to(root).as_posix(), opts)[: n - made]:
            made += 1
            yield example


def write_jsonl(path: Path, records: Iterable[dict]) -> int:
    """Write one JSON object per line; returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def read_examples(path: Path) -> list[Example]:
    """The examples of a dataset JSONL file, in file order (checked: :func:`.inputs.read_dataset`)."""
    from .inputs import read_dataset

    return [Example(**example) for example in read_dataset(path)]


# ---------------------------------------------------------------- manifests


def manifest_row(example: dict) -> dict:
    """An example without its texts: enough to cut the same file at the same places again."""
    return {
        "id": example["id"],
        "kind": example["kind"],
        "path": example["path"],
        "sha256": example["sha256"],
        **example["meta"],
    }


def manifest_header(opts: BuildOptions, preset: str, root: Path, exclusion: Exclusion) -> dict:
    """The manifest's first line: how the dataset was built (``--verify`` draws the cuts again)."""
    from ..engine.versions import format_version

    options = asdict(opts)
    options["python_version"] = format_version(opts.python_version)
    return {
        "manifest": 1,
        "preset": preset,
        "options": options,
        "root": str(root),
        "excluded": exclusion.source,
        "python": sys.version.split()[0],
    }


def read_manifest(path: Path) -> tuple[dict | None, list[dict]]:
    """(header or None for a manifest written without one, rows) of a manifest file."""
    from ..engine.errors import InputError
    from .inputs import json_lines, kind_of

    header, rows = None, []
    for number, value in json_lines(path, "a manifest (fimconstrain dataset --manifest)"):
        if kind_of(value) != "manifest":
            raise InputError(f"{path}:{number}: not a manifest row (no start/end offsets, or texts included)")
        if "manifest" in value:
            header = value
        else:
            rows.append(value)
    if not rows:
        raise InputError(f"{path}: a manifest without rows")
    return header, rows


def cut_again(root: Path, rows: list[dict]) -> Iterator[tuple[dict, str, bytes]]:
    """(row, text, bytes) of each row's file under ``root``, checked against the recorded sha256."""
    from ..engine.errors import InputError

    for row in rows:
        path = root / row["path"]
        if not path.is_file():
            raise InputError(f"{path}: missing (manifest row {row['id']})")
        data = path.read_bytes()
        if sha256(data) != row["sha256"]:
            raise InputError(
                f"{path}: its content differs from the manifest's (sha256 {row['sha256'][:16]}...)"
            )
        yield row, data.decode("utf-8"), data


def rebuild(root: Path, rows: list[dict]) -> Iterator[Example]:
    """The examples of a manifest, cut from the files under ``root`` at the recorded offsets."""
    for row, text, _ in cut_again(root, rows):
        start, end = row["start"], row["end"]
        yield Example(
            id=row["id"],
            kind=row["kind"],
            path=row["path"],
            sha256=row["sha256"],
            prefix=text[:start],
            middle=text[start:end],
            suffix=text[end:],
            meta={"start": start, "end": end, "file_chars": len(text)},
        )


def verify(root: Path, header: dict, rows: list[dict]) -> list[str]:
    """What differs between the manifest and a fresh draw: every file must be there unchanged,
    and the builder, with the header's options, must cut it at the recorded places."""
    from ..engine.versions import parse_python_version

    options = dict(
        header["options"], python_version=parse_python_version(header["options"]["python_version"])
    )
    opts = BuildOptions(**options)
    by_file: dict[str, list[dict]] = {}
    for row in rows:
        by_file.setdefault(row["path"], []).append(row)
    problems = []
    for path, file_rows in by_file.items():
        _, text, data = next(cut_again(root, file_rows[:1]))
        fresh = [manifest_row(e.to_dict()) for e in examples_of_file(text, data, path, opts)]
        if fresh[: len(file_rows)] != file_rows:
            problems.append(f"{path}: the builder cuts it differently")
    return problems


# ---------------------------------------------------------------- command line


def _benchmark_command(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--benchmark``: check the harness, or write a subset as a dataset file."""
    from .benchmarks import check_harness, write_dataset

    if args.check_harness:
        return check_harness(args)
    if args.out is None:
        ap.error("--benchmark needs --out FILE (a dataset of one --subset) or --check-harness")
    return write_dataset(args)


def build_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain dataset``."""
    from ..command_line.arguments import (
        HelpFormatter,
        add_python_version_option,
        non_negative_int,
        positive_int,
    )
    from ..decoding.models.loading import DEFAULT_MODEL_DIR
    from ..engine.versions import format_version

    ap = argparse.ArgumentParser(
        prog="fimconstrain dataset",
        formatter_class=HelpFormatter,
        description="Build Stack-Boundary or Stack-RandSpan (paper 004 §VII-A) as JSONL; or rebuild "
        "one from its manifest, or verify a manifest against the files and the builder.",
        epilog="Presets: paper = 10 cuts per file from every file that parses (§VII-A); project = one "
        "cut per file from files of 1,000-50,000 characters. --per-file/--min-chars/--max-chars "
        "override the preset. --benchmark writes a subset of HumanEval-infilling or SAFIM as a dataset "
        "(-n: its first N tasks), or checks the harness on it. Exit codes: 0 done (verify: it matches), "
        "1 fewer examples than -n (verify: differences; --check-harness: a reference middle failed), "
        "2 usage or input error.",
    )
    ap.add_argument("--root", type=Path, default=None, help="folder of Python files (default: site-packages)")
    ap.add_argument("--kind", choices=KINDS, help="which dataset to build (required to build)")
    ap.add_argument("--preset", choices=PRESETS, default="project", help="sampling defaults (see below)")
    ap.add_argument(
        "-n",
        type=positive_int,
        default=None,
        help=f"number of examples (default {DEFAULT_COUNT}; with --benchmark: every task)",
    )
    ap.add_argument("--seed", type=non_negative_int, default=0)
    ap.add_argument(
        "--per-file", type=positive_int, default=None, help="cuts per file (default: the preset's)"
    )
    ap.add_argument(
        "--min-chars", type=positive_int, default=None, help="smallest file (default: the preset's)"
    )
    ap.add_argument(
        "--max-chars",
        type=positive_int,
        default=None,
        help="largest file (default: the preset's; paper: none)",
    )
    ap.add_argument(
        "--model",
        type=Path,
        default=DEFAULT_MODEL_DIR,
        help="model folder whose training.json says which standard-library files to exclude",
    )
    ap.add_argument(
        "--no-exclude",
        action="store_true",
        help="keep standard-library files (for models not trained on them)",
    )
    add_python_version_option(
        ap,
        format_version(interpreter_version()),
        "this interpreter's, whose ast.parse also checks every file",
    )
    ap.add_argument("--out", type=Path, default=None, help="output JSONL file (required to build or rebuild)")
    ap.add_argument(
        "--manifest",
        type=Path,
        default=None,
        help="also write the build options and each example's id, path, sha256 and offsets (no texts)",
    )
    again = ap.add_mutually_exclusive_group()
    again.add_argument(
        "--rebuild", type=Path, metavar="MANIFEST", help="cut the files under --root at a manifest's offsets"
    )
    again.add_argument(
        "--verify",
        type=Path,
        metavar="MANIFEST",
        help="check that the files under --root are the manifest's and that the builder cuts them so",
    )
    add_benchmark_options(ap)
    ap.add_argument(
        "--check-harness",
        action="store_true",
        help="with --benchmark: run every task with its reference middle (all must pass) and with an "
        "empty one (the floor), to check that programs run here as the benchmark runs them",
    )
    return ap


def main_build(argv: list[str] | None = None) -> int:
    """``fimconstrain dataset``: build, rebuild or verify (bad input: one line, exit 2)."""
    from .inputs import one_line_errors

    return one_line_errors("fimconstrain dataset")(_main_build)(argv)


def _main_build(argv: list[str] | None) -> int:
    from tqdm import tqdm

    from ..engine.errors import InputError
    from ..engine.versions import format_version

    ap = build_parser()
    args = ap.parse_args(argv)
    if args.benchmark:
        return _benchmark_command(ap, args)
    args.n = args.n or DEFAULT_COUNT
    root = args.root or default_root()
    if not root.is_dir():
        raise InputError(f"{root} is not a folder (--root)")
    if args.verify:
        header, rows = read_manifest(args.verify)
        if header is None:
            raise InputError(f"{args.verify}: a manifest without its header line (options): --rebuild only")
        problems = verify(root, header, rows)
        for problem in problems:
            print(problem, file=sys.stderr)
        print(
            f"{args.verify}: {len(rows)} examples: " + (f"{len(problems)} files differ" if problems else "ok")
        )
        return 1 if problems else 0
    if args.rebuild is None and args.kind is None:
        ap.error("--kind is required to build")
    if args.out is None:
        ap.error("--out is required to build or rebuild")
    if args.rebuild:
        _, rows = read_manifest(args.rebuild)
        count = write_jsonl(args.out, (e.to_dict() for e in rebuild(root, rows)))
        print(f"{count} examples rebuilt from {args.rebuild} and {root} -> {args.out}", file=sys.stderr)
        return 0
    preset = PRESETS[args.preset]
    pick = lambda name: preset[name] if getattr(args, name) is None else getattr(args, name)
    opts = BuildOptions(
        args.kind, args.seed, pick("per_file"), pick("min_chars"), pick("max_chars"), args.python_version
    )
    exclusion = (
        Exclusion(source="none (--no-exclude)") if args.no_exclude else training_exclusions(args.model)
    )
    stats: dict = {}
    with tqdm(total=args.n, unit="ex", desc=f"stack-{args.kind}") as bar:

        def advance(examples):
            for example in examples:
                bar.update(1)
                yield example.to_dict()

        count = write_jsonl(args.out, advance(build(root, args.n, opts, exclusion, stats)))
    if args.manifest:
        made = (manifest_row(json.loads(line)) for line in args.out.open(encoding="utf-8"))
        write_jsonl(
            args.manifest, itertools.chain([manifest_header(opts, args.preset, root, exclusion)], made)
        )
    skipped = ", ".join(f"{why}: {n}" for why, n in sorted(stats.items()) if why != "ok") or "none"
    print(
        f"{count} {args.kind} examples ({args.preset} preset, {opts.per_file} per file) from "
        f"{stats.get('ok', 0)} files of {root} -> {args.out}\n"
        f"  files skipped: {skipped}\n  training files excluded per {exclusion.source}\n"
        f"  files checked as Python {format_version(opts.python_version)}",
        file=sys.stderr,
    )
    if count < args.n:
        print(f"fimconstrain dataset: only {count} of the {args.n} examples asked for (-n)", file=sys.stderr)
    return 0 if count == args.n else 1
