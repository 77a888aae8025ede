"""The default model's extra training code (scripts/permissive_code.py): only permissively
licensed distributions, never those reserved for evaluation, their own parseable files, once."""

import gzip
import hashlib
import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def code(load_script):
    return load_script("permissive_code")


@pytest.mark.parametrize(
    ("expression", "allowed"),
    [
        ("MIT", True),
        ("Apache-2.0 WITH LLVM-exception", True),
        ("MIT OR GPL-3.0-only", True),
        ("GPL-3.0-only OR MIT", True),
        ("MIT AND GPL-3.0-only", False),
        ("BSD-3-Clause AND 0BSD AND MIT AND Zlib", False),  # Zlib is not on the list
        ("(MIT OR GPL-3.0-only) AND LGPL-2.1-only", False),  # grouping is not dropped
        ("(MIT OR Apache-2.0) AND BSD-3-Clause", True),
        ("MIT AND", False),
        ("(MIT", False),
        ("", False),
    ],
)
def test_spdx_expressions(code, expression, allowed):
    assert code.spdx_allowed(expression) is allowed


def _distribution(site: Path, name: str, metadata: str, files: dict[str, bytes]) -> None:
    """An installed distribution: its files and a dist-info whose RECORD lists them."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.4\nName: {name}\nVersion: 1.0\n{metadata}\n")
    for relpath, data in files.items():
        (site / relpath).parent.mkdir(parents=True, exist_ok=True)
        (site / relpath).write_bytes(data)
    (info / "RECORD").write_text("".join(f"{p},," + "\n" for p in files))


def test_collects_allowed_distributions_own_distinct_files(code, tmp_path):
    site = tmp_path / "site-packages"
    good = b"def f(x):\n    return x + 1\n"
    _distribution(
        site,
        "goodpkg",
        "License-Expression: MIT",
        {
            "goodpkg/__init__.py": good,
            "goodpkg/again.py": good,  # the same content: taken once
            "goodpkg/other.py": b"X = 2\n",
            "goodpkg/_vendor/six.py": b"Y = 3\n",  # a vendored copy
            "goodpkg/broken.py": b"def f(:\n",  # ast.parse rejects it
            "goodpkg/latin.py": "S = 'caf\xe9'\n".encode("latin-1"),  # not UTF-8
            "goodpkg/data.txt": b"not code",
            "../../bin/tool.py": b"Z = 4\n",  # outside site-packages
        },
    )
    _distribution(
        site, "classic", "Classifier: License :: OSI Approved :: BSD License", {"classic.py": b"A = 1\n"}
    )
    _distribution(site, "freetext", "License: Apache 2.0", {"freetext.py": b"B = 1\n"})
    _distribution(site, "copyleft", "License-Expression: GPL-3.0-only", {"copyleft.py": b"C = 1\n"})
    _distribution(
        site,
        "mixed",
        "Classifier: License :: OSI Approved :: BSD License\n"
        "Classifier: License :: OSI Approved :: GNU General Public License v3 (GPLv3)",
        {"mixed.py": b"D = 1\n"},
    )
    _distribution(site, "unknown", "", {"unknown.py": b"E = 1\n"})
    _distribution(
        site, "click", "License-Expression: BSD-3-Clause", {"click/core.py": b"F = 1\n"}
    )  # reserved
    known = hashlib.sha256(b"X = 2\n").hexdigest()  # e.g. a standard library file

    files = list(code.collect([site], skip_hashes=[known]))

    assert sorted((f.distribution, f.path) for f in files) == [
        ("classic", "classic.py"),
        ("freetext", "freetext.py"),
        ("goodpkg", "goodpkg/__init__.py"),
    ]
    by_path = {f.path: f for f in files}
    assert by_path["goodpkg/__init__.py"].text == good.decode()
    assert by_path["goodpkg/__init__.py"].sha256 == hashlib.sha256(good).hexdigest()
    assert by_path["freetext.py"].license == "Apache-2.0"
    assert by_path["classic.py"].license == "BSD License"

    manifest = tmp_path / "code.manifest.jsonl.gz"
    assert code.write_manifest(files, manifest) == 3
    with gzip.open(manifest, "rt", encoding="utf-8") as stream:
        rows = [json.loads(line) for line in stream]
    assert rows[0] == files[0].manifest_row()
    assert set(rows[0]) == {"distribution", "version", "license", "path", "sha256"}
