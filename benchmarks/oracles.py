#!/usr/bin/env python3
"""Real interpreters as syntax oracles, one per Python version 3.8 to 3.14.

``verdicts("3.12", sources)`` runs CPython 3.12's own ``ast.parse(src)`` (default
``feature_version``, warnings silenced) on every source in one subprocess per batch (JSON over
stdin/stdout) and returns a list of booleans; ``details`` also gives ast.parse's message.
Verdicts are cached on disk under ``benchmarks/results/oracle_cache/`` keyed by the version and
the SHA-256 of the source (a cache file is dropped when the interpreter's patch level changes).

Where the interpreters come from:

* 3.8 to 3.13: ``$FIMCONSTRAIN_PYTHON_3_12`` (any version, dots as underscores) if set, else
  pyenv's newest ``$PYENV_ROOT/versions/3.12.*/bin/python`` (``~/.pyenv`` by default), else the
  running interpreter when it is that version, else ``python3.12`` on ``PATH``.
* 3.14: the same variable or ``python3.14`` on ``PATH`` if there is one (a native CPython 3.14),
  else CPython 3.14 compiled to WebAssembly, the npm package ``pyodide@314.0.7`` run by Node.js
  (>= 18): looked up in ``<repo>/.oracle/node_modules/pyodide`` first (``npm install --prefix
  .oracle pyodide@314.0.7``, what ``.ci/run`` does), then in ``$PYODIDE_DIR`` (the package
  folder or a ``node_modules`` folder holding it). Its ``python_stdlib.zip`` is 3.14's standard
  library (without ``Lib/test``).

A missing interpreter raises :class:`OracleMissing` with what was tried; ``available(v)`` returns
None instead.

    python benchmarks/oracles.py --list                  # which interpreters were found
    python benchmarks/oracles.py 3.12 -c 'type X = int'  # one verdict per source
    python benchmarks/oracles.py 3.14 FILE...
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE_DIR = HERE / "results" / "oracle_cache"
NODE_SCRIPT = HERE / "oracle_pyodide.js"
PYODIDE_PACKAGE = "pyodide@314.0.7"

VERSIONS = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")


class OracleMissing(RuntimeError):
    """No interpreter for the version was found (the message says where it looked)."""


class OracleError(RuntimeError):
    """The interpreter ran but did not answer."""


def norm_version(v) -> str:
    if isinstance(v, (tuple, list)):
        v = f"{v[0]}.{v[1]}"
    v = str(v).strip()
    parts = v.split(".")
    if len(parts) >= 2:
        v = f"{int(parts[0])}.{int(parts[1])}"
    if v not in VERSIONS:
        raise ValueError(f"unknown Python version {v!r} (one of {', '.join(VERSIONS)})")
    return v


# ---------------------------------------------------------------- running a program in an oracle

# Runs inside the oracle interpreter (3.8+ syntax only): reads {"code", "payload"} as JSON on
# stdin, exec()s code, which defines main(payload), and writes the JSON of its result on stdout.
_RUNNER = r"""
import json, sys
req = json.loads(sys.stdin.buffer.read().decode("ascii"))
ns = {"__name__": "__oracle__"}
exec(compile(req["code"], "<oracle>", "exec"), ns)
out = json.dumps(ns["main"](req["payload"]))
sys.stdout.write(out)
"""

# main(sources) -> [[accepted, message], ...] with the interpreter's own ast.parse, each source
# read as a file's contents: a leading byte order mark dropped, as CPython drops it from a file
VERDICT_CODE = r"""
import ast, sys, warnings

def main(sources):
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    out = []
    for src in sources:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(src[1:] if src.startswith("\ufeff") else src)
            out.append([True, None])
        except SyntaxError as e:
            out.append([False, "%s: %s (line %s)" % (type(e).__name__, e.msg, e.lineno)])
        except (ValueError, UnicodeError, TypeError) as e:
            out.append([False, "%s: %s" % (type(e).__name__, e)])
        except (RecursionError, MemoryError) as e:
            out.append([False, "%s in ast.parse" % type(e).__name__])
    return out
"""


@dataclass
class Oracle:
    version: str  # "3.12"
    kind: str  # "cpython" or "pyodide"
    path: Path  # the python executable, or pyodide's package folder
    node: str | None = None  # node executable (pyodide)
    _full: str | None = field(default=None, repr=False)

    def describe(self) -> str:
        if self.kind == "pyodide":
            return f"CPython {self.full_version()} (pyodide, {self.path}, node {self.node})"
        return f"CPython {self.full_version()} ({self.path})"

    def _command(self) -> list[str]:
        if self.kind == "pyodide":
            return [self.node, str(NODE_SCRIPT), str(self.path)]
        return [str(self.path), "-I", "-S", "-c", _RUNNER]

    def run(self, code: str, payload, timeout: float | None = 600.0):
        """The result of ``main(payload)`` of the Python program ``code`` run in this interpreter."""
        request = json.dumps({"code": code, "payload": payload}, ensure_ascii=True).encode("ascii")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONHOME", None)
        try:
            proc = subprocess.run(
                self._command(), input=request, capture_output=True, timeout=timeout, env=env
            )
        except subprocess.TimeoutExpired as e:
            raise OracleError(f"{self.describe()}: no answer within {timeout:g} s") from e
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace")[-2000:]
            raise OracleError(f"{self.describe()} exited with {proc.returncode}: {tail}")
        return json.loads(proc.stdout.decode("ascii"))

    def full_version(self) -> str:
        if self._full is None:
            self._full = self.run(
                "import sys\ndef main(p):\n    return '%d.%d.%d' % sys.version_info[:3]\n", None, 120
            )
        return self._full

    def max_batch_chars(self) -> int:
        return 16_000_000 if self.kind == "pyodide" else 4_000_000


# ---------------------------------------------------------------- finding interpreters


def _env_name(version: str) -> str:
    return "FIMCONSTRAIN_PYTHON_" + version.replace(".", "_")


def _patch_key(path: str):
    name = Path(path).parts[-3]  # .../versions/3.12.1/bin/python
    try:
        return tuple(int(x) for x in name.split("."))
    except ValueError:
        return (0,)


def _pyodide_dir() -> tuple[Path | None, list[str]]:
    tried = []
    candidates = [REPO / ".oracle" / "node_modules" / "pyodide"]
    env = os.environ.get("PYODIDE_DIR")
    if env:
        candidates += [Path(env), Path(env) / "pyodide", Path(env) / "node_modules" / "pyodide"]
    for c in candidates:
        tried.append(str(c))
        if (c / "package.json").is_file() and (c / "python_stdlib.zip").is_file():
            return c.resolve(), tried
    return None, tried


def available(version) -> Oracle | None:
    try:
        return find(version)
    except OracleMissing:
        return None


_FOUND: dict[str, Oracle] = {}


def find(version) -> Oracle:
    """The oracle for ``version`` (raises OracleMissing, saying what was tried)."""
    v = norm_version(version)
    if v in _FOUND:
        return _FOUND[v]
    tried = []
    exe = os.environ.get(_env_name(v))
    if exe:
        tried.append(f"${_env_name(v)}={exe}")
        if not Path(exe).exists() and not shutil.which(exe):
            raise OracleMissing(f"Python {v}: ${_env_name(v)} names {exe!r}, which does not exist")
        _FOUND[v] = Oracle(v, "cpython", Path(shutil.which(exe) or exe))
        return _FOUND[v]
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    pattern = os.path.join(root, "versions", f"{v}.*", "bin", "python")
    hits = sorted((p for p in glob.glob(pattern) if os.access(p, os.X_OK)), key=_patch_key)
    tried.append(pattern)
    if hits:
        _FOUND[v] = Oracle(v, "cpython", Path(hits[-1]))
        return _FOUND[v]
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == v:
        _FOUND[v] = Oracle(v, "cpython", Path(sys.executable))
        return _FOUND[v]
    tried.append("the running interpreter")
    which = shutil.which(f"python{v}")
    tried.append(f"python{v} on PATH")
    if which:
        _FOUND[v] = Oracle(v, "cpython", Path(which))
        return _FOUND[v]
    if v == "3.14":
        pdir, ptried = _pyodide_dir()
        tried += ptried
        node = shutil.which("node")
        if pdir is not None and node:
            _FOUND[v] = Oracle(v, "pyodide", pdir, node=node)
            return _FOUND[v]
        if pdir is not None:
            tried.append("node on PATH (pyodide needs Node.js)")
        hint = f" (install it with `npm install --prefix {REPO / '.oracle'} {PYODIDE_PACKAGE}`)"
    else:
        hint = f" (install it with `pyenv install {v}` or set ${_env_name(v)})"
    raise OracleMissing(f"no Python {v} interpreter found{hint}; tried: " + "; ".join(tried))


# ---------------------------------------------------------------- verdicts with a disk cache


def source_key(src: str) -> str:
    return hashlib.sha256(src.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class _Cache:
    def __init__(self, oracle: Oracle):
        self.path = CACHE_DIR / f"python{oracle.version}.json"
        self.interpreter = oracle.full_version() + "/" + oracle.kind
        self.data: dict[str, list] = {}
        self.dirty = False
        try:
            doc = json.loads(self.path.read_text("utf-8"))
            if doc.get("interpreter") == self.interpreter:
                self.data = doc["verdicts"]
        except (OSError, ValueError, KeyError):
            pass

    def save(self):
        if not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # merge with what another process may have written meanwhile
        try:
            doc = json.loads(self.path.read_text("utf-8"))
            if doc.get("interpreter") == self.interpreter:
                merged = doc["verdicts"]
                merged.update(self.data)
                self.data = merged
        except (OSError, ValueError, KeyError):
            pass
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"interpreter": self.interpreter, "verdicts": self.data}), "utf-8")
        os.replace(tmp, self.path)
        self.dirty = False


def _batches(items: list[tuple[int, str]], max_chars: int):
    batch, size = [], 0
    for item in items:
        if batch and size + len(item[1]) > max_chars:
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += len(item[1])
    if batch:
        yield batch


def _ask(oracle: Oracle, sources: list[str], timeout: float) -> list[list]:
    """Verdicts of one batch; a batch that crashes or times out is split until the culprit is alone."""
    try:
        out = oracle.run(VERDICT_CODE, sources, timeout)
        if len(out) != len(sources):
            raise OracleError(f"{oracle.describe()}: {len(out)} answers for {len(sources)} sources")
        return out
    except OracleError as e:
        if len(sources) == 1:
            return [[False, f"oracle failure: {str(e)[:200]}"]]
        mid = len(sources) // 2
        return _ask(oracle, sources[:mid], timeout) + _ask(oracle, sources[mid:], timeout)


def details(
    version, sources: list[str], *, cache: bool = True, timeout: float = 600.0
) -> list[tuple[bool, str | None]]:
    """``(accepted, ast.parse's message or None)`` for every source, from ``version``'s interpreter."""
    oracle = find(version)
    store = _Cache(oracle) if cache else None
    keys = [source_key(s) for s in sources]
    answers: dict[str, list] = {}
    todo: dict[str, str] = {}
    for k, s in zip(keys, sources):
        if store is not None and k in store.data:
            answers[k] = store.data[k]
        else:
            todo.setdefault(k, s)
    if todo:
        items = list(todo.items())
        for batch in _batches([(i, s) for i, (_, s) in enumerate(items)], oracle.max_batch_chars()):
            out = _ask(oracle, [s for _, s in batch], timeout)
            for (i, _), verdict in zip(batch, out):
                answers[items[i][0]] = verdict
                if store is not None and not str(verdict[1] or "").startswith("oracle failure"):
                    store.data[items[i][0]] = verdict
                    store.dirty = True
        if store is not None:
            store.save()
    return [(bool(answers[k][0]), answers[k][1]) for k in keys]


def verdicts(version, sources: list[str], **kw) -> list[bool]:
    """Whether ``version``'s ``ast.parse`` accepts each source (one subprocess per batch, cached)."""
    return [ok for ok, _ in details(version, sources, **kw)]


def verdict(version, source: str) -> bool:
    return verdicts(version, [source])[0]


# ---------------------------------------------------------------- each version's own files


def stdlib_location(version) -> Path:
    """``version``'s standard library: a folder (``lib/python3.X``) or pyodide's python_stdlib.zip."""
    o = find(version)
    if o.kind == "pyodide":
        return o.path / "python_stdlib.zip"
    where = o.run("import sysconfig\ndef main(p):\n    return sysconfig.get_paths()['stdlib']\n", None, 120)
    return Path(where)


def stdlib_sources(version, *, tests: bool = True) -> list[tuple[str, bytes]]:
    """``(relative path, bytes)`` of every ``.py`` file of ``version``'s standard library, sorted
    (site-packages skipped; ``tests=False`` also skips ``test/``)."""
    loc = stdlib_location(version)
    skip = {"site-packages", "dist-packages", "__pycache__"}
    out = []
    if loc.suffix == ".zip":
        with zipfile.ZipFile(loc) as z:
            for name in z.namelist():
                parts = name.split("/")
                if not name.endswith(".py") or skip & set(parts) or (not tests and parts[0] == "test"):
                    continue
                out.append((name, z.read(name)))
    else:
        for dirpath, dirnames, filenames in os.walk(loc):
            dirnames[:] = sorted(
                d for d in dirnames if d not in skip and (tests or Path(dirpath) != loc or d != "test")
            )
            for f in filenames:
                if f.endswith(".py"):
                    p = Path(dirpath) / f
                    out.append((str(p.relative_to(loc)), p.read_bytes()))
    out.sort()
    return out


def test_dir(version) -> Path | None:
    """``version``'s own ``Lib/test`` folder, or None (pyodide ships none: set
    ``$FIMCONSTRAIN_TESTDIR_3_14`` to a CPython 3.14 checkout's Lib/test to use one)."""
    v = norm_version(version)
    env = os.environ.get("FIMCONSTRAIN_TESTDIR_" + v.replace(".", "_"))
    if env:
        return Path(env) if Path(env).is_dir() else None
    loc = stdlib_location(v)
    if loc.suffix == ".zip":
        return None
    t = loc / "test"
    return t if t.is_dir() else None


# ---------------------------------------------------------------- cli


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("version", nargs="?", help="3.8 .. 3.14")
    p.add_argument("files", nargs="*", type=Path, help="source files to judge")
    p.add_argument(
        "-c", dest="sources", action="append", default=[], help="a source text to judge (repeatable)"
    )
    p.add_argument("--list", action="store_true", help="list the interpreters found")
    p.add_argument("--no-cache", action="store_true")
    args = p.parse_args(argv)
    if args.list or not args.version:
        for v in VERSIONS:
            try:
                print(f"{v:5} {find(v).describe()}")
            except OracleMissing as e:
                print(f"{v:5} MISSING: {e}")
        return 0
    items = [(f"-c #{i + 1}", s) for i, s in enumerate(args.sources)]
    for f in args.files:
        items.append((str(f), f.read_bytes().decode("utf-8", "surrogateescape")))
    try:
        out = details(args.version, [s for _, s in items], cache=not args.no_cache)
    except OracleMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for (name, _), (ok, msg) in zip(items, out):
        print(f"{name}: {'accepted' if ok else 'rejected'}" + (f" ({msg})" if msg else ""))
    return 0 if all(ok for ok, _ in out) else 1


if __name__ == "__main__":
    sys.exit(main())
