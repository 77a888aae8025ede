"""Builds the engine's modules with mypyc beside their sources (docs/optimizations.md, "The
compiled engine"); everything else is in pyproject.toml.

Which modules, and the digest that marks a build as current, come from
``fimconstrain/engine/native.py`` (read by path: the package cannot be imported while it
builds). A build that fails (no C compiler, a mypyc error) warns and installs the package
without it: the pure-Python engine then runs and says so once. ``FIMCONSTRAIN_PURE_PYTHON=1``
skips the build.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ENGINE_DIR = HERE / "fimconstrain" / "engine"


def _native():
    spec = importlib.util.spec_from_file_location("_fimconstrain_native_build", ENGINE_DIR / "native.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks the module up while it defines a class
    spec.loader.exec_module(module)
    return module


#: fimconstrain/engine/native.py: the modules to compile, their digest, the stamp's name
NATIVE = _native()


def _warn(message: str) -> None:
    print(f"fimconstrain: {message}; the pure-Python engine will run", file=sys.stderr)


class BuildEngine(build_ext):
    """Compiles the engine and writes the stamp beside it; a failure leaves the sources to run."""

    def run(self) -> None:
        if not self.extensions:
            return
        start = time.monotonic()
        try:
            super().run()
        except Exception as error:  # a compiler error or a missing compiler: never fail the install
            _warn(f"could not compile the engine ({type(error).__name__}: {error})")
            return
        sources = NATIVE.compiled_sources(ENGINE_DIR)
        # the engine's folder in the build's output (in place for an editable install)
        out_dir = Path(self.get_ext_fullpath("fimconstrain.engine.native")).parent
        stamp = {
            "sources": NATIVE.source_digest(sources, ENGINE_DIR),
            "cache_tag": sys.implementation.cache_tag,
            "mypy": _mypy_version(),
            "seconds": round(time.monotonic() - start, 1),
        }
        (out_dir / NATIVE.STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
        print(f"fimconstrain: compiled engine built in {stamp['seconds']} s", file=sys.stderr)


def _mypy_version() -> str:
    from mypy.version import __version__

    return __version__


def engine_extensions() -> list:
    """mypyc's extension modules for the engine, or none (the sources run)."""
    if os.environ.get("FIMCONSTRAIN_PURE_PYTHON", "").strip() not in ("", "0"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as error:
        _warn(f"mypyc is not installed ({error})")
        return []
    sources = [str(p.relative_to(HERE)) for p in NATIVE.compiled_sources(ENGINE_DIR)]
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        # the running interpreter's version: mypyc compiles one branch of a version test
        return mypycify(["--python-version", version, *sources], opt_level="3", group_name=NATIVE.GROUP)
    except (Exception, SystemExit) as error:  # mypyc reports type errors by exiting
        _warn(f"mypyc could not translate the engine ({type(error).__name__}: {error})")
        return []


setup(ext_modules=engine_extensions(), cmdclass={"build_ext": BuildEngine})
