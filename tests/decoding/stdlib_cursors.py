"""Held-out cursors for tests that compare decoders: a random column of a random line of code of
standard-library files (none of which the shipped model or the tests' bigrams trained on)."""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def stdlib_cursors(names: tuple[str, ...], count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` cursors ``(prefix, suffix)`` in each of the stdlib files ``names``."""
    rng = random.Random(seed)
    out = []
    for name in names:
        text = (STDLIB / name).read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        code = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
        for _ in range(count):
            i = rng.choice(code)
            at = sum(map(len, lines[:i])) + rng.randrange(len(lines[i].rstrip("\n")) + 1)
            out.append((text[:at], text[at:]))
    return out
