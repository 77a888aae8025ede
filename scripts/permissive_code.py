"""Permissively licensed Python source of an environment's installed distributions, for training.

A distribution counts when its metadata says MIT, BSD, Apache-2.0, PSF or ISC: its SPDX
``License-Expression`` if it has one (some ``OR`` branch whose every term is allowed), else its
license classifiers (all of them allowed), else a short ``License`` field read the same way.
Unknown means out. Files are the distribution's own ``.py`` files (its ``RECORD``) that are
UTF-8, at most 1 MB and accepted by ``ast.parse``; vendored copies are dropped and files are
de-duplicated by content hash. Distributions that benchmarks evaluate on are left out entirely.

    python scripts/permissive_code.py SITE_PACKAGES... --manifest datasets/code.manifest.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata as metadata
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fimconstrain.decoding.loop.oracle import ast_parses

#: SPDX identifiers of the licenses taken (variants of MIT and BSD included)
ALLOWED_SPDX = frozenset(
    {"MIT", "MIT-0", "BSD-2-Clause", "BSD-3-Clause", "0BSD", "Apache-2.0", "PSF-2.0", "Python-2.0", "ISC"}
)
#: the last part of a ``License ::`` classifier, for the same licenses
ALLOWED_CLASSIFIERS = frozenset(
    {
        "MIT License",
        "BSD License",
        "Apache Software License",
        "Python Software Foundation License",
        "ISC License (ISCL)",
    }
)
#: free-text ``License`` fields that name one of them (lower case, spaces collapsed)
LICENSE_ALIASES = {
    "mit": "MIT",
    "mit license": "MIT",
    "apache 2.0": "Apache-2.0",
    "apache 2.0 license": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "apache license, version 2.0": "Apache-2.0",
    "apache software license": "Apache-2.0",
    "bsd": "BSD-3-Clause",
    "bsd license": "BSD-3-Clause",
    "bsd 3-clause license": "BSD-3-Clause",
    "3-clause bsd license": "BSD-3-Clause",
    "new bsd license": "BSD-3-Clause",
    "bsd 2-clause license": "BSD-2-Clause",
    "isc license": "ISC",
    "psf": "PSF-2.0",
    "psf license": "PSF-2.0",
}
#: never collected: reserved for evaluation (the issue's django, black and homeassistant, and
#: benchmarks/editor_quality.py's held-out packages and the h11 datasets), and this project
RESERVED = frozenset(
    {
        "django",
        "black",
        "homeassistant",
        "click",
        "jinja2",
        "attrs",
        "anyio",
        "h11",
        "idna",
        "packaging",
        "pygls",
        "markdown-it-py",
        "fimconstrain",
    }
)
#: directory names that hold copies of other projects
VENDORED_DIRS = frozenset(
    {"_vendor", "vendor", "vendored", "_vendored", "third_party", "_third_party", "extern"}
)
MAX_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class CodeFile:
    """One collected source file and where it came from."""

    distribution: str
    version: str
    license: str
    path: str  #: relative to the site-packages directory
    sha256: str
    text: str

    def manifest_row(self) -> dict[str, str]:
        return {
            "distribution": self.distribution,
            "version": self.version,
            "license": self.license,
            "path": self.path,
            "sha256": self.sha256,
        }


def normalized_name(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def spdx_allowed(expression: str) -> bool:
    """Whether an SPDX license expression can be met with allowed licenses only: ``OR`` needs
    one side allowed, ``AND`` both, a license ``WITH`` an exception is read as the license;
    anything that does not parse is not allowed."""
    tokens: list[str] = re.findall(r"\(|\)|[^\s()]+", expression)
    at = 0

    def peek() -> str | None:
        return tokens[at] if at < len(tokens) else None

    def take() -> str:
        nonlocal at
        at += 1
        return tokens[at - 1]

    def either() -> bool:  # a OR b OR ...
        allowed = both()
        while peek() == "OR":
            take()
            allowed = both() or allowed  # (both sides are read either way)
        return allowed

    def both() -> bool:  # a AND b AND ...
        allowed = license_()
        while peek() == "AND":
            take()
            allowed = license_() and allowed
        return allowed

    def license_() -> bool:
        token = peek()
        if token is None or token in ("AND", "OR", "WITH", ")"):
            raise ValueError(expression)
        take()
        if token == "(":
            allowed = either()
            if peek() != ")":
                raise ValueError(expression)
            take()
            return allowed
        if peek() == "WITH":
            take()
            license_()  # the exception
        return token in ALLOWED_SPDX

    try:
        allowed = either()
    except ValueError:
        return False
    return allowed and at == len(tokens)


def _field(meta: metadata.PackageMetadata, name: str) -> str | None:
    """A metadata field's first value, None when absent."""
    values = meta.get_all(name)
    return values[0] if values else None


def permissive_license(meta: metadata.PackageMetadata) -> str | None:
    """The license a distribution's metadata gives, if it is one of the allowed ones, else None."""
    expression = _field(meta, "License-Expression")
    if expression:
        return expression if spdx_allowed(expression) else None
    classifiers = [
        c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")
    ]
    classifiers = [c for c in classifiers if c != "OSI Approved"]
    if classifiers:
        return " AND ".join(sorted(set(classifiers))) if set(classifiers) <= ALLOWED_CLASSIFIERS else None
    field = (_field(meta, "License") or "").strip()
    if not field or "\n" in field or len(field) > 60:
        return None
    alias = LICENSE_ALIASES.get(" ".join(field.lower().split()))
    if alias:
        return alias
    return field if spdx_allowed(field) else None


def is_vendored(relpath: str) -> bool:
    return bool(VENDORED_DIRS.intersection(relpath.split("/")[:-1]))


def collect(
    site_packages: Iterable[Path], skip_hashes: Iterable[str] = (), reserved: frozenset[str] = RESERVED
) -> Iterator[CodeFile]:
    """The permissively licensed, parseable, distinct ``.py`` files of the distributions
    installed in each of ``site_packages`` (first directory first, distributions by name);
    a file whose hash is in ``skip_hashes`` or was already yielded is skipped."""
    seen = set(skip_hashes)
    for root in site_packages:
        root = root.resolve()
        dists = sorted(metadata.distributions(path=[str(root)]), key=lambda d: normalized_name(d.name or ""))
        for dist in dists:
            name = normalized_name(dist.name or "")
            license_ = permissive_license(dist.metadata) if name and name not in reserved else None
            if license_ is None:
                continue
            for file in sorted(dist.files or [], key=str):
                relpath = file.as_posix()
                if not relpath.endswith(".py") or relpath.startswith("..") or is_vendored(relpath):
                    continue
                path = root / relpath
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                if len(data) > MAX_FILE_BYTES:
                    continue
                digest = hashlib.sha256(data).hexdigest()
                if digest in seen:
                    continue
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if not ast_parses(text):
                    continue
                seen.add(digest)
                yield CodeFile(dist.name, dist.version, license_, relpath, digest, text)


def write_manifest(files: Iterable[CodeFile], out: Path) -> int:
    """Write one JSON line per file (gzip when ``out`` ends in ``.gz``); the number written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if out.suffix == ".gz" else open
    count = 0
    with opener(out, "wt", encoding="utf-8") as stream:
        for file in files:
            stream.write(json.dumps(file.manifest_row(), sort_keys=True) + "\n")
            count += 1
    return count


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("site_packages", type=Path, nargs="+", help="site-packages directories to read")
    ap.add_argument("--manifest", type=Path, required=True, help="where to write the manifest")
    args = ap.parse_args(argv)
    files = list(collect(args.site_packages))
    write_manifest(files, args.manifest)
    dists = {(f.distribution, f.version) for f in files}
    chars = sum(len(f.text) for f in files)
    print(
        f"{len(files)} files of {len(dists)} distributions, {chars / 1e6:.1f} M characters -> {args.manifest}"
    )


if __name__ == "__main__":
    main()
