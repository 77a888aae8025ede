#!/usr/bin/env python3
"""Syntax test cases for the version differential, taken from each interpreter's own test suite
plus the hand-written corpus ``benchmarks/data/modern_snippets.txt``.

From the syntax-heavy files of a version's ``Lib/test`` (test_syntax, test_grammar, test_fstring,
test_type_params, test_patma, test_exceptions, ...; see ``TEST_FILES``), the extraction keeps

* every ``str`` constant (f-string pieces left out) that looks like code: it has a newline, or a
  keyword or operator character; one with leading indentation is also kept dedented, as the
  tests pass it through ``textwrap.dedent``;
* every doctest example (``>>> `` / ``... `` blocks, as ``doctest`` reads them), the way
  test_syntax writes its cases;
* the test file itself, whole (origin kind ``file``).

The test files are parsed by the version's own interpreter (``ast`` of that version), in one
subprocess; the result is cached under ``benchmarks/results/syntax_cases/``. Cases are
deduplicated. No expectations are written down anywhere: verdicts come from
``benchmarks/oracles.py``.

Python 3.14 from pyodide has no ``Lib/test``: unless ``$FIMCONSTRAIN_TESTDIR_3_14`` names a
CPython 3.14 ``Lib/test``, its cases are 3.13's test cases (judged by 3.14) plus the corpus.

    python benchmarks/syntax_cases.py              # counts per version
    python benchmarks/syntax_cases.py 3.12 --show 20
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import oracles  # noqa: E402

SNIPPETS_FILE = HERE / "data" / "modern_snippets.txt"
CACHE_DIR = HERE / "results" / "syntax_cases"

# files (or packages) under Lib/test; those a version lacks are skipped
TEST_FILES = [
    "test_syntax.py",
    "test_grammar.py",
    "test_fstring.py",
    "test_type_params.py",
    "test_patma.py",
    "test_exceptions.py",
    "test_named_expressions.py",
    "test_positional_only_arg.py",
    "test_except_star.py",
    "test_unparse.py",
    "test_type_aliases.py",
    "test_tstring.py",
    "test_string",
    "test_pep646_syntax.py",
    "test_future.py",
    "test_future_stmt",
    "test_future3.py",
    "test_future4.py",
    "test_future5.py",
    "test_genexps.py",
    "test_decorators.py",
    "test_with.py",
    "test_keywordonlyarg.py",
    "test_unpack_ex.py",
    "test_listcomps.py",
    "test_setcomps.py",
    "test_dictcomps.py",
    "test_global.py",
    "test_type_annotations.py",
    "test_string_literals.py",
    "test_ast",
    "test_ast.py",
]
MAX_CASE_CHARS = 20_000

# Runs inside the oracle interpreter (3.8+ syntax): payload {"files": {name: text}}.
EXTRACT_CODE = r"""
import ast, doctest, keyword, re, textwrap

OPS = re.compile(r"[=()\[\]{}:+\-*/%<>@&|^~!.,;]")
KW = set(keyword.kwlist) | {"match", "case", "type", "_"}
WORD = re.compile(r"[A-Za-z_]\w*")


def looks_like_code(s):
    if "\n" in s:
        return True
    if OPS.search(s):
        return True
    return any(w in KW for w in WORD.findall(s))


def doctest_sources(s):
    out = []
    try:
        for ex in doctest.DocTestParser().get_examples(s):
            out.append(ex.source)
    except ValueError:
        pass
    return out


def main(payload):
    found = []
    for name, text in sorted(payload["files"].items()):
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            found.append([name, "error", "cannot parse: %s" % e])
            continue
        found.append([name, "file", text])
        pieces = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr) or type(node).__name__ == "TemplateStr":
                for v in node.values:
                    pieces.add(id(v))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or id(node) in pieces:
                continue
            s = node.value
            if isinstance(s, bytes):
                try:
                    s = s.decode("utf-8")
                except UnicodeDecodeError:
                    continue
            if not isinstance(s, str) or not s.strip():
                continue
            if ">>> " in s:
                for src in doctest_sources(s):
                    found.append([name, "doctest", src])
                continue
            if not looks_like_code(s):
                continue
            found.append([name, "const", s])
            try:
                d = textwrap.dedent(s)
            except Exception:
                d = s
            if d != s:
                found.append([name, "dedent", d])
    return found
"""


@dataclass(frozen=True)
class Case:
    src: str
    origin: str  # "3.12:test_syntax.py:doctest", "snippet:fstring-nested-4"


def _test_files(test_dir: Path) -> dict[str, str]:
    files = {}
    for name in TEST_FILES:
        p = test_dir / name
        paths = sorted(p.rglob("*.py")) if p.is_dir() else ([p] if p.is_file() else [])
        for f in paths:
            try:
                files[str(f.relative_to(test_dir))] = f.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                pass
    return files


def _dedupe(cases: list[Case]) -> list[Case]:
    seen, out = set(), []
    for c in cases:
        if c.src in seen or (len(c.src) > MAX_CASE_CHARS and not c.origin.endswith(":file")):
            continue
        seen.add(c.src)
        out.append(c)
    return out


def test_cases(version, *, refresh: bool = False) -> list[Case]:
    """The cases extracted from ``version``'s own Lib/test (3.13's for 3.14 from pyodide)."""
    v = oracles.norm_version(version)
    source_version = v
    tdir = oracles.test_dir(v)
    if tdir is None and v == "3.14":
        source_version = "3.13"
        tdir = oracles.test_dir("3.13")
    if tdir is None:
        raise oracles.OracleMissing(f"no Lib/test for Python {v}")
    files = _test_files(tdir)
    digest = hashlib.sha256(
        json.dumps(sorted((k, len(t)) for k, t in files.items())).encode()
        + EXTRACT_CODE.encode()
        + str(tdir).encode()
    ).hexdigest()[:16]
    cache = CACHE_DIR / f"python{v}.json"
    if not refresh:
        try:
            doc = json.loads(cache.read_text("utf-8"))
            if doc["digest"] == digest:
                return [Case(s, o) for s, o in doc["cases"]]
        except (OSError, ValueError, KeyError):
            pass
    found = oracles.find(source_version).run(EXTRACT_CODE, {"files": files}, timeout=600)
    errors = [f"{n}: {s}" for n, kind, s in found if kind == "error"]
    if errors:
        print(f"syntax_cases: {v}: " + "; ".join(errors), file=sys.stderr)
    cases = _dedupe([Case(s, f"{source_version}:{n}:{kind}") for n, kind, s in found if kind != "error"])
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(
        json.dumps({"digest": digest, "test_dir": str(tdir), "cases": [[c.src, c.origin] for c in cases]}),
        "utf-8",
    )
    return cases


def snippets(path: Path = SNIPPETS_FILE) -> list[Case]:
    """The hand-written corpus: blocks headed ``=== name`` (``=== name !nonl``: no final newline).

    A block's text is its lines up to the next header, trailing blank lines dropped, ending in one
    newline. Lines of the file before the first header (its description) are ignored.
    """
    cases, name, lines, nonl = [], None, [], False

    def flush():
        if name is None:
            return
        body = list(lines)
        while body and not body[-1].strip():
            body.pop()
        src = "\n".join(body) + ("" if nonl else "\n")
        cases.append(Case(src, f"snippet:{name}"))

    for line in path.read_bytes().decode("utf-8").split("\n"):  # \r and \f kept as written
        if line.startswith("=== "):
            flush()
            head = line[4:].strip()
            nonl = head.endswith("!nonl")
            name = head[: -len("!nonl")].strip() if nonl else head
            lines = []
        elif name is not None:
            lines.append(line)
    flush()
    return cases


def all_cases(version, *, with_tests: bool = True) -> list[Case]:
    """``version``'s own test cases (when its Lib/test can be found) and the snippets, deduplicated."""
    own = []
    if with_tests:
        try:
            own = test_cases(version)
        except oracles.OracleMissing:
            own = []
    return _dedupe(own + snippets())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("versions", nargs="*", default=list(oracles.VERSIONS))
    p.add_argument("--show", type=int, default=0, help="print the first N cases of each version")
    p.add_argument("--refresh", action="store_true", help="extract again (ignore the cache)")
    args = p.parse_args(argv)
    print(f"snippets: {len(snippets())} ({SNIPPETS_FILE})")
    for v in args.versions:
        try:
            cases = test_cases(v, refresh=args.refresh)
        except oracles.OracleMissing as e:
            print(f"{v}: skipped: {e}")
            continue
        by_file: dict[str, int] = {}
        for c in cases:
            f = c.origin.split(":")[1]
            by_file[f] = by_file.get(f, 0) + 1
        print(
            f"{v}: {len(cases)} test cases ("
            + ", ".join(f"{k} {n}" for k, n in sorted(by_file.items()))
            + ")"
        )
        for c in cases[: args.show]:
            print(f"  [{c.origin}] {c.src!r:.200}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
