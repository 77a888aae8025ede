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
import hashlib
import io
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

from ..decoding.oracle import ast_parses

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
PER_FILE = 1  # §VII-A cuts each of 9,539 files 10 times; a sample of N of its experiments spans about N files


@dataclass(frozen=True)
class Example:
    """One FIM task: ``prefix + middle + suffix`` is the original file; ``middle`` is the ground truth."""

    id: str
    kind: str
    path: str  # relative to the dataset's root
    sha256: str  # of the file's bytes
    prefix: str
    middle: str
    suffix: str
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


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


def read_source(data: bytes, min_chars: int, max_chars: int, python_version=None) -> tuple[str | None, str]:
    """(text, "ok") if the file is UTF-8, within the size limits, and ``ast.parse`` and our parser (at
    ``python_version``, default: the newest) accept it, else (None, why not)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    if text.startswith("\ufeff") or "\0" in text:
        return None, "BOM or NUL"
    if not min_chars <= len(text) <= max_chars:
        return None, "size"
    if not ast_parses(text):
        return None, "ast.parse rejects"
    if not engine_accepts(text, python_version):
        return None, "our parser rejects"
    return text, "ok"


# ---------------------------------------------------------------- training files


def training_exclusions(model_dir: Path | None) -> Exclusion:
    """The standard-library files the model in ``model_dir`` was trained on (``training.json``),
    else all of them.

    ``scripts/train_default_model.py`` trains on the standard library minus a held-out
    list that ``training.json`` records; every other ``.py`` file under that root
    (site-packages aside) is excluded, by path and by content hash.
    """
    facts = {}
    card = Path(model_dir) / "training.json" if model_dir else None
    if card is not None and card.is_file():
        facts = json.loads(card.read_text(encoding="utf-8"))
    stdlib = Path(facts.get("stdlib") or sysconfig.get_paths()["stdlib"])
    heldout = set(facts.get("heldout_paths", ()))
    excl = Exclusion(
        source=f"{card} (standard library at {stdlib}, {len(heldout)} held-out files allowed)"
        if facts
        else f"no training.json: the whole standard library at {stdlib}"
    )
    for path in python_files(stdlib) if stdlib.is_dir() else []:
        rel = path.relative_to(stdlib)
        if {"site-packages", "dist-packages"} & set(rel.parts) or rel.as_posix() in heldout:
            continue
        excl.paths.add(path.resolve())
        excl.hashes.add(sha256(path.read_bytes()))
    for name in facts.get("train_paths", ()):  # an explicit training list, if a later script writes one
        excl.paths.add((stdlib / name).resolve())
    return excl


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


def symbols_by_level(text: str) -> dict[int, list[tuple[int, int]]]:
    """(start, end) offsets of the tokenizer's symbols, grouped by indentation level (INDENT depth)."""
    starts = line_offsets(text)
    levels: dict[int, list[tuple[int, int]]] = {}
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        elif tok.type not in NON_SYMBOLS and tok.string:
            start = starts[tok.start[0] - 1] + tok.start[1]
            end = starts[tok.end[0] - 1] + tok.end[1]
            levels.setdefault(depth, []).append((start, end))
    return levels


def boundary_cut(levels: dict[int, list[tuple[int, int]]], rng: random.Random) -> tuple[int, int]:
    """A uniformly random pair of symbols at one level: delete a non-empty tail of the first,
    all up to the second."""
    pairs = {level: len(s) * (len(s) - 1) // 2 for level, s in levels.items() if len(s) > 1}
    level = rng.choices(sorted(pairs), weights=[pairs[k] for k in sorted(pairs)])[0]
    i, j = sorted(rng.sample(range(len(levels[level])), 2))
    (first_start, first_end), (second_start, _) = levels[level][i], levels[level][j]
    keep = rng.randrange(first_end - first_start)  # characters of the first symbol left in the prefix
    return first_start + keep, second_start


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
            levels = symbols_by_level(text)
        except (tokenize.TokenError, SyntaxError):
            return []
        if not any(len(s) > 1 for s in levels.values()):
            return []
        draw = lambda: boundary_cut(levels, rng)
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
    max_chars: int = 50000
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
    """The examples of a dataset JSONL file, in file order."""
    with Path(path).open(encoding="utf-8") as lines:
        return [Example(**json.loads(line)) for line in lines if line.strip()]


# ---------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    """Options of ``fimconstrain dataset``."""
    from ..decoding.models import DEFAULT_MODEL_DIR
    from ..engine.versions import add_python_version_option, format_version

    ap = argparse.ArgumentParser(
        prog="fimconstrain dataset",
        description="Build Stack-Boundary or Stack-RandSpan (paper 004 §VII-A) as JSONL.",
    )
    ap.add_argument("--root", type=Path, default=None, help="folder of Python files (default: site-packages)")
    ap.add_argument("--kind", choices=KINDS, required=True)
    ap.add_argument("-n", type=int, default=300, help="number of examples")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--per-file",
        type=int,
        default=PER_FILE,
        help="cuts per file (paper: 10; a small sample of its set spans about one cut per file)",
    )
    ap.add_argument("--min-chars", type=int, default=1000)
    ap.add_argument("--max-chars", type=int, default=50000)
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
    ap.add_argument("--out", type=Path, required=True, help="output JSONL file")
    ap.add_argument(
        "--manifest",
        type=Path,
        default=None,
        help="also write id, path, sha256 and offsets (no texts) here, to record which files were used",
    )
    return ap


def manifest_row(example: dict) -> dict:
    """An example without its texts: enough to check that another build cut the same files at the
    same places."""
    return {
        "id": example["id"],
        "kind": example["kind"],
        "path": example["path"],
        "sha256": example["sha256"],
        **example["meta"],
    }


def main_build(argv: list[str] | None = None) -> int:
    """Build a dataset and write it as JSONL; exit 1 when fewer than ``-n`` examples could be made."""
    from tqdm import tqdm

    from ..engine.versions import format_version

    args = build_parser().parse_args(argv)
    root = args.root or default_root()
    if not root.is_dir():
        print(f"fimconstrain dataset: {root} is not a folder", file=sys.stderr)
        return 2
    opts = BuildOptions(
        args.kind, args.seed, args.per_file, args.min_chars, args.max_chars, args.python_version
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
        write_jsonl(
            args.manifest, (manifest_row(json.loads(line)) for line in args.out.open(encoding="utf-8"))
        )
    skipped = ", ".join(f"{why}: {n}" for why, n in sorted(stats.items()) if why != "ok") or "none"
    print(
        f"{count} {args.kind} examples from {stats.get('ok', 0)} files of {root} -> {args.out}\n"
        f"  files skipped: {skipped}\n  training files excluded per {exclusion.source}\n"
        f"  files checked as Python {format_version(opts.python_version)}",
        file=sys.stderr,
    )
    return 0 if count == args.n else 1
