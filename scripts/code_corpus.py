"""Remake a training code corpus from pinned wheels: the data step of the default model, reproducibly.

    pins (``name==version``) -> wheels (``pip download --no-deps --only-binary=:all:``, for the
    Python and platforms below) -> one site-packages folder (each wheel unzipped into it: a valid
    install for reading; nothing is installed, built or imported) -> ``permissive_code.py``'s
    collection -> a manifest (``permissive_code.py``'s format).

Downloads and unpacking resume: a pin whose wheel is in ``--wheels`` is not downloaded again, a
wheel whose ``RECORD`` is in ``--site-packages`` is not unpacked again. A pin that cannot be
downloaded is reported in one line and left out. The wheels are those of CPython 3.11 on x86-64
glibc Linux, as fim-22m-v2's were (the one file that tells them apart, ``scipy/__config__.py``,
written when a wheel is built, is the cp311 wheel's); where a pin has no such wheel, those of the
next ``--python-version`` are taken (the same release's ``.py`` files).

``--select`` applies ``train_default_model.py``'s selection (``select_code``: 5% held out by
content hash, files in hash order up to ``--code-chars``, at most ``--code-per-distribution``
characters of one distribution; files equal to a ``--stdlib`` file skipped), so that the
manifest compares with a model's ``code.manifest.jsonl.gz``; ``--compare`` says how much of
such a manifest the step reproduces. ``ast.parse`` is the running interpreter's (fim-22m-v2's
was 3.12's; 3.11 accepts every one of its files).

    python scripts/code_corpus.py --pins scripts/code_corpus.pins.txt --wheels corpus/wheels \\
        --site-packages corpus/site-packages --manifest corpus/code.manifest.jsonl.gz \\
        --select --stdlib /usr/lib/python3.12 --compare models/fim-22m-v2/code.manifest.jsonl.gz
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections import Counter
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from permissive_code import CodeFile, collect, write_manifest

#: the Pythons whose wheels are taken, first choice first
PYTHON_VERSIONS = ("3.11", "3.12", "3.10", "3.9", "3.8")
#: x86-64 glibc Linux up to glibc 2.39, most specific first, as pip orders them
PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(39, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)
#: the shipped fim-22m-v2 run's selection (``training.json``'s ``runs[-1].command``)
CODE_CHARS = 400e6
CODE_PER_DISTRIBUTION = 6e6

Pin = tuple[str, Version]  #: (normalized name, version)


def read_pins(path: Path) -> list[str]:
    """The ``name==version`` lines of a pins file (``#`` comments and blank lines skipped)."""
    pins = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise SystemExit(f"{path}:{number}: not name==version: {line!r}")
        pins.append(f"{name.strip()}=={version.strip()}")
    return pins


def pin_key(pin: str) -> Pin:
    name, _, version = pin.partition("==")
    return canonicalize_name(name), Version(version)


def wheels_in(folder: Path) -> dict[Pin, Path]:
    """The wheels in ``folder`` by (normalized name, version); the first by file name wins."""
    found: dict[Pin, Path] = {}
    for path in sorted(folder.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(path.name)
        found.setdefault((name, version), path)
    return found


def pip_download(pin: str, dest: Path, python: str, platforms: list[str]) -> str | None:
    """Download the wheel of ``pin`` for ``python`` into ``dest``: None, or why pip failed."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", python, "--dest", str(dest), "--progress-bar", "off"]
    for platform in platforms:
        command += ["--platform", platform]
    done = subprocess.run([*command, pin], capture_output=True, text=True)
    if done.returncode == 0:
        return None
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    return (errors[-1] if errors else f"pip exited with {done.returncode}").removeprefix("ERROR: ")


def download(
    pins: list[str], dest: Path, pythons: list[str], platforms: list[str]
) -> tuple[dict[str, Path], dict[str, str]]:
    """Each pin's wheel, downloaded unless already in ``dest``: ({pin: wheel}, {pin: why not})."""
    dest.mkdir(parents=True, exist_ok=True)
    have = wheels_in(dest)
    wheels: dict[str, Path] = {}
    failed: dict[str, str] = {}
    todo = [pin for pin in pins if pin_key(pin) not in have]
    for pin in tqdm(todo, desc="downloading wheels", unit=" pins"):
        reasons = []
        for python in pythons:
            reason = pip_download(pin, dest, python, platforms)
            if reason is None:
                if python != pythons[0]:
                    tqdm.write(f"{pin}: no wheel for Python {pythons[0]}; took Python {python}'s")
                break
            reasons.append(f"Python {python}: {reason}")
        else:
            failed[pin] = reasons[0]
            tqdm.write(f"{pin}: not downloaded ({reasons[0]})")
    have = wheels_in(dest)
    for pin in pins:
        if pin_key(pin) in have:
            wheels[pin] = have[pin_key(pin)]
        elif pin not in failed:
            failed[pin] = f"pip succeeded but no wheel of it is in {dest}"
    print(
        f"{len(pins)} pins: {len(wheels)} wheels ({len(pins) - len(todo)} already there), "
        f"{len(failed)} not downloaded"
    )
    return wheels, failed


def installed_path(member: str) -> str | None:
    """Where pip installs a wheel's file, relative to site-packages: the ``*.data`` folder's
    ``purelib`` and ``platlib`` files at the top, its scripts, headers and data outside (None)."""
    top, _, rest = member.partition("/")
    if not top.endswith(".data"):
        return member
    scheme, _, path = rest.partition("/")
    return path if scheme in ("purelib", "platlib") and path else None


def unpack(wheels: list[Path], site: Path) -> int:
    """Unzip each wheel into ``site`` as pip would install it (see :func:`installed_path`; its
    ``RECORD``, written last, lists where the files went) unless its ``RECORD`` is there already;
    how many were unpacked."""
    site.mkdir(parents=True, exist_ok=True)
    unpacked = 0
    for wheel in tqdm(wheels, desc="unpacking wheels", unit=" wheels"):
        with zipfile.ZipFile(wheel) as archive:
            members = archive.infolist()
            record = next(m for m in members if re.fullmatch(r"[^/]+\.dist-info/RECORD", m.filename))
            if (site / record.filename).is_file():
                continue
            for member in members:
                path = installed_path(member.filename)
                if member is not record and path is not None:
                    member.filename = path  # (zipfile reads the data by its original name)
                    archive.extract(member, site)
            rows = list(csv.reader(io.TextIOWrapper(archive.open(record), "utf-8", newline="")))
        moved = [[installed_path(row[0]), *row[1:]] for row in rows if row]
        with open(site / record.filename, "w", encoding="utf-8", newline="") as stream:
            csv.writer(stream, lineterminator="\n").writerows(row for row in moved if row[0] is not None)
        unpacked += 1
    return unpacked


def stdlib_hashes(stdlib: Path) -> set[str]:
    """The content hashes that ``train_default_model.py`` skips: its corpus of ``stdlib``."""
    import train_default_model  # torch and transformers: only for --select

    corpus = train_default_model.load_corpus(stdlib)
    texts = (*corpus.train.values(), *corpus.heldout.values())
    return {hashlib.sha256(t.encode()).hexdigest() for t in texts}


def select(files: list[CodeFile], code_chars: float, per_distribution: float) -> list[CodeFile]:
    """The training files ``train_default_model.py`` takes of ``files`` (its held-out ones dropped)."""
    import train_default_model

    return train_default_model.select_code(files, code_chars, per_distribution)[0]


def read_manifest(path: Path) -> list[dict[str, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


#: how a shipped row fares (:func:`compare`), in the report's order
OUTCOMES = (
    "reproduced",
    "same bytes, made under another distribution or path",
    "same bytes, not made",
    "other bytes",
    "missing, pin not downloaded",
    "missing from its wheel",
)


def compare(
    shipped: list[dict[str, str]], made: list[CodeFile], site: Path, failed: dict[str, str]
) -> Counter[str]:
    """How each shipped row fares against the made manifest and the unpacked files (one of
    :data:`OUTCOMES`: reproduced is the same distribution, version, path and sha256; a file on
    disk with the shipped bytes that is not made was left out by the collection or the
    selection), and how many made rows are not shipped (``extra``)."""
    key = ("distribution", "version", "path", "sha256")
    made_rows = {tuple(f.manifest_row()[k] for k in key) for f in made}
    made_hashes = {f.sha256 for f in made}
    shipped_rows = {tuple(row[k] for k in key) for row in shipped}
    failed_pins = {pin_key(pin) for pin in failed}
    reproduced, elsewhere, left_out, other_bytes, not_downloaded, not_in_wheel = OUTCOMES
    counts: Counter[str] = Counter(extra=len(made_rows - shipped_rows))
    for row in shipped:
        path = site / row["path"]
        if tuple(row[k] for k in key) in made_rows:
            counts[reproduced] += 1
        elif row["sha256"] in made_hashes:
            counts[elsewhere] += 1
        elif path.is_file():
            same = hashlib.sha256(path.read_bytes()).hexdigest() == row["sha256"]
            counts[left_out if same else other_bytes] += 1
        elif (canonicalize_name(row["distribution"]), Version(row["version"])) in failed_pins:
            counts[not_downloaded] += 1
        else:
            counts[not_in_wheel] += 1
    return counts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pins", type=Path, required=True, help="name==version lines (# comments)")
    ap.add_argument("--wheels", type=Path, required=True, help="where the wheels are downloaded")
    ap.add_argument("--site-packages", type=Path, required=True, help="where the wheels are unpacked")
    ap.add_argument("--manifest", type=Path, required=True, help="where to write the manifest")
    ap.add_argument(
        "--python-version",
        action="append",
        help=f"whose wheels to take, first choice first (repeatable; default {' '.join(PYTHON_VERSIONS)})",
    )
    ap.add_argument(
        "--platform",
        action="append",
        help="pip's --platform tags (repeatable; default manylinux x86-64 up to glibc 2.39)",
    )
    ap.add_argument("--select", action="store_true", help="write train_default_model.py's selection")
    ap.add_argument("--code-chars", type=float, default=CODE_CHARS, help="with --select (its --code-chars)")
    ap.add_argument(
        "--code-per-distribution",
        type=float,
        default=CODE_PER_DISTRIBUTION,
        help="with --select (its --code-per-distribution)",
    )
    ap.add_argument(
        "--stdlib",
        type=Path,
        default=Path(sysconfig.get_paths()["stdlib"]),
        help="with --select: skip files equal to one of this standard library, as the training "
        "script does with its interpreter's (default: this interpreter's)",
    )
    ap.add_argument("--compare", type=Path, help="a shipped manifest to compare the made one with")
    args = ap.parse_args(argv)
    start = time.monotonic()

    pins = read_pins(args.pins)
    pythons = args.python_version or list(PYTHON_VERSIONS)
    wheels, failed = download(pins, args.wheels, pythons, args.platform or list(PLATFORMS))
    unpacked = unpack(sorted(wheels.values()), args.site_packages)
    print(f"{unpacked} wheels unpacked into {args.site_packages} ({len(wheels) - unpacked} already there)")

    skip = stdlib_hashes(args.stdlib) if args.select else set()
    files = list(
        tqdm(collect([args.site_packages], skip_hashes=skip), desc="collecting", unit=" files", mininterval=5)
    )
    print(
        f"collected {len(files)} files of {len({f.distribution for f in files})} distributions, "
        f"{sum(len(f.text) for f in files) / 1e6:.1f} M characters"
    )
    if args.select:
        files = select(files, args.code_chars, args.code_per_distribution)
        print(
            f"selected {len(files)} files of {len({f.distribution for f in files})} distributions, "
            f"{sum(len(f.text) for f in files) / 1e6:.1f} M characters"
        )
    write_manifest(files, args.manifest)
    print(f"{len(files)} rows -> {args.manifest}")

    if args.compare:
        shipped = read_manifest(args.compare)
        counts = compare(shipped, files, args.site_packages, failed)
        print(f"{args.compare}: {len(shipped)} rows")
        for outcome in OUTCOMES:
            print(f"  {outcome}: {counts[outcome]}")
        print(f"extra (made, not shipped): {counts['extra']}")
        for pin, reason in sorted(failed.items()):
            print(f"  not downloaded: {pin} ({reason})")
    print(f"{time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
