"""Helpers shared by the benchmark scripts (not part of the package).

Every script takes files from the running Python's standard library by
default (``sysconfig.get_paths()['stdlib']``, site-packages skipped) or from
``--root DIR``, samples them deterministically with ``--seed`` / ``--limit``,
shows tqdm progress bars, prints a plain-text table and writes JSON under
``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import sys
import sysconfig
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent / "scripts"))  # helpers kept out of the library
RESULTS_DIR = HERE / "results"
SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__", ".git", ".venv", "node_modules"}

# ``with time_limit(seconds, what): ...`` raises Timeout (a BaseException: ``except Exception``
# lets it through) in the main thread; None or 0 is no limit. See scripts/time_limit.py.
from time_limit import TimeLimitExceeded as Timeout  # noqa: E402, F401  (scripts/, on the path above)
from time_limit import time_limit  # noqa: E402, F401


def cut_fuzz_module():
    """``tests/engine/cut_fuzz.py``, the cut fuzzer's generators, loaded by path (once): ``tests/``
    and the checkout are appended to ``sys.path`` for its ``conftest`` import, so a PYTHONPATH
    checkout of the engine still wins."""
    name = "tests_cut_fuzz"
    if name not in sys.modules:
        repo = HERE.parent
        sys.path.append(str(repo / "tests"))
        sys.path.append(str(repo))
        spec = importlib.util.spec_from_file_location(name, repo / "tests" / "engine" / "cut_fuzz.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# ---------------------------------------------------------------- files


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def list_py_files(root: Path) -> list[Path]:
    """Every ``.py`` file under ``root`` (sorted), skipping site-packages and caches."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for f in filenames:
            if f.endswith(".py"):
                out.append(Path(dirpath) / f)
    out.sort()
    return out


def rel(path: Path | str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def read_utf8(path: Path) -> str | None:
    """The file decoded as UTF-8 (no BOM stripping: the text Python's ast.parse(str) sees), or None."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def timed(func, *args):
    """(wall us, thread CPU us, result) of one call, with the garbage collector paused as
    ``timeit`` does; CPU time leaves out the time other processes on a shared machine take."""
    import gc

    gc.disable()
    wall, cpu = time.perf_counter(), time.thread_time()
    result = func(*args)
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    gc.enable()
    return wall * 1e6, cpu * 1e6, result


def valid_source(path: Path, record: dict) -> str | None:
    """The file's text if it decodes and ``ast.parse`` accepts it, else None; sets
    ``record["status"]`` (and ``record["chars"]``) either way."""
    src = read_utf8(path)
    if src is None:
        record["status"] = "undecodable"
        return None
    if not ast_verdict(src)[0]:
        record["status"] = "ast-rejects"
        return None
    record["status"], record["chars"] = "ok", len(src)
    return src


def ast_verdict(src: str) -> tuple[bool, str | None, int | None]:
    """(accepted, message, 1-based line) from ``ast.parse`` of the running interpreter."""
    from fimconstrain.decoding.loop.oracle import ast_error

    e = ast_error(src)
    if e is None:
        return True, None, None
    if isinstance(e, SyntaxError):
        return False, e.msg, e.lineno
    if isinstance(e, ValueError):  # NUL bytes, lone surrogates
        return False, f"{type(e).__name__}: {e}", None
    return False, f"{type(e).__name__} in ast.parse", None  # RecursionError, MemoryError


def sample(items: list, limit: int | None, seed: int) -> list:
    """A deterministic sample of ``limit`` items (all of them when limit is None), kept in order."""
    if limit is None or limit >= len(items):
        return list(items)
    rng = random.Random(seed)
    idx = sorted(rng.sample(range(len(items)), limit))
    return [items[i] for i in idx]


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, col) of ``offset`` in ``text``; lines end at \\n (\\r\\n counts as one)."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


def context_line(text: str, offset: int, width: int = 100) -> str:
    """The source line around ``offset`` with a ``⟦⟧`` marker at the offset (one line, trimmed)."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    end = len(text) if end < 0 else end
    before, after = text[start:offset], text[offset:end]
    if len(before) > width // 2:
        before = "…" + before[-width // 2 :]
    if len(after) > width // 2:
        after = after[: width // 2] + "…"
    return repr(before + "⟦⟧" + after)[1:-1]


# ---------------------------------------------------------------- engine


def first_dead_offset(checker, text: str, start: int = 0, chunk: int = 256):
    """``(offset of the first rejected character or None, last good checker)``."""
    from fimconstrain.engine.rejection import first_rejection

    return first_rejection(checker, text, start, chunk)


def where_rejected(text: str, dead: int | None) -> dict:
    """Where the engine first goes wrong on a text it should accept: ``dead_at`` (the first rejected
    character, or None when all of it was fed but it was not complete at the end), its ``line``,
    ``col`` and ``context``, and ``why``."""
    offset = len(text) if dead is None else dead
    line, col = line_col(text, offset)
    why = "rejected while feeding" if dead is not None else "fed fully but not complete at EOF"
    return {"dead_at": dead, "line": line, "col": col, "context": context_line(text, offset), "why": why}


def describe_exc(e: BaseException) -> str:
    import traceback

    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    msg = str(e)
    if len(msg) > 300:
        msg = msg[:300] + "…"
    return f"{type(e).__name__}: {msg}{where}"


def engine_setup():
    """Import the engine once per worker process (raises if it is missing)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    import fimconstrain

    return fimconstrain


def engine_line() -> str:
    """Which engine runs, and the C extensions that serve it, in a line for a benchmark's record."""
    import fimconstrain
    from fimconstrain.engine import native

    served = [ext.what for ext in native.C_EXTENSIONS if native.c_extension(ext) is not None]
    return ", ".join([str(fimconstrain.ENGINE_BUILD), *served])


def uncompletable_error():
    """What ``fim_checker`` raises when no middle can make the file valid: a file that is wrong
    before the cursor or after it, or one with a character no file may contain."""
    from fimconstrain.engine.errors import InputError, UncompletableError

    return (UncompletableError, InputError)


# ---------------------------------------------------------------- cli / output


def base_parser(
    description: str, *, limit_default: int | None, workers: bool = True
) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument(
        "--root",
        type=Path,
        default=None,
        help="folder of .py files (default: the running Python's standard library)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (sampling, cuts, mutations)")
    p.add_argument(
        "--limit", type=int, default=limit_default, help="sample N files (default: all when not given)"
    )
    p.add_argument(
        "--max-size",
        type=int,
        default=None,
        metavar="CHARS",
        help="skip files longer than this many characters",
    )
    if workers:
        p.add_argument("--workers", type=int, default=2, help="worker processes")
        p.add_argument("--timeout", type=float, default=120.0, help="per-file time limit in seconds")
    p.add_argument(
        "--out", type=Path, default=None, help="JSON result file (default: benchmarks/results/NAME.json)"
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    return p


def select_files(args) -> tuple[Path, list[Path]]:
    root = (args.root or stdlib_root()).resolve()
    files = list_py_files(root)
    if args.max_size is not None:
        files = [f for f in files if f.stat().st_size <= args.max_size * 4 and _chars(f) <= args.max_size]
    return root, sample(files, args.limit, args.seed)


def _chars(path: Path) -> int:
    text = read_utf8(path)
    return len(text) if text is not None else path.stat().st_size


def environment() -> dict:
    try:
        from importlib.metadata import version

        fc_version = version("fimconstrain")
    except Exception:
        fc_version = "unknown"
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "fimconstrain": fc_version,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_results(name: str, args, payload: dict) -> Path:
    out = args.out or (RESULTS_DIR / f"{name}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": name,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "environment": environment(),
    }
    doc.update(payload)
    out.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def table(rows: list[list], headers: list[str], align: str | None = None) -> str:
    """A plain-text table; ``align`` is a string of 'l'/'r' per column (numbers right by default)."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    if align is None:
        align = "".join(
            "r" if rows and isinstance(rows[0][i], (int, float)) else "l" for i in range(len(headers))
        )
    lines = []
    for k, r in enumerate(cells):
        parts = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(r, widths, align)]
        lines.append("  ".join(parts).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(c) -> str:
    if isinstance(c, float):
        if c != c:  # NaN
            return "-"
        if abs(c) >= 100:
            return f"{c:,.0f}"
        if abs(c) >= 10:
            return f"{c:.1f}"
        return f"{c:.2f}" if abs(c) >= 0.1 else f"{c:.3f}"
    if isinstance(c, int):
        return f"{c:,}"
    return str(c)


def pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.2f}%" if b else "-"


def progress(iterable, *, total=None, desc="", disable=False, unit="file"):
    from tqdm import tqdm

    return tqdm(
        iterable, total=total, desc=desc, disable=disable, unit=unit, dynamic_ncols=True, file=sys.stderr
    )


def run_pool(func, tasks: list, *, workers: int, desc: str, disable: bool, unit: str = "file", init=None):
    """Run ``func(task)`` over ``tasks`` in ``workers`` processes (in-process when workers <= 1).

    Yields results as they come. Workers are replaced every few tasks so that a
    leak or a huge file cannot pile up memory.
    """
    if workers <= 1:
        if init:
            init()
        for t in progress(tasks, total=len(tasks), desc=desc, disable=disable, unit=unit):
            yield func(t)
        return
    import multiprocessing as mp

    ctx = mp.get_context("fork" if sys.platform != "win32" else "spawn")
    with ctx.Pool(workers, initializer=init, maxtasksperchild=25) as pool:
        it = pool.imap_unordered(func, tasks, chunksize=1)
        yield from progress(it, total=len(tasks), desc=desc, disable=disable, unit=unit)


# What a run_file_pool task reads besides its (path, seed): the script's options for the run
# (``OPTS["timeout"]``, ...) and the files' root (for ``rel``), set once in each worker process.
OPTS: dict = {}
ROOT = Path(".")


def _init_worker(opts: dict, root: Path) -> None:
    global OPTS, ROOT
    OPTS, ROOT = opts, root
    engine_setup()


def run_file_pool(func, files: list[Path], args, opts: dict, root: Path, desc: str) -> tuple[list, float]:
    """(results sorted by ``"file"``, wall seconds) of ``func((path, seed))`` over ``files`` in
    ``args.workers`` processes, with ``OPTS``/``ROOT`` set to ``opts``/``root``; each file's seed
    comes from ``args.seed`` and its place, so a run repeats whatever the worker count."""
    tasks = [(f, args.seed * 1_000_003 + i) for i, f in enumerate(files)]
    t0 = time.perf_counter()
    results = list(
        run_pool(
            func,
            tasks,
            workers=args.workers,
            desc=desc,
            disable=args.no_progress,
            init=lambda: _init_worker(opts, root),
        )
    )
    wall = time.perf_counter() - t0
    results.sort(key=lambda r: r["file"])
    return results, wall
