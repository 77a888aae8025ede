"""Builds the engine's modules with mypyc beside their sources (docs/optimizations.md, "The
compiled engine"); everything else is in pyproject.toml.

Which modules, and the digest that marks a build as current, come from
``fimconstrain/engine/native.py`` (read by path: the package cannot be imported while it
builds). A build that fails (no C compiler, a mypyc error) warns and installs the package
without it: the pure-Python engine then runs and says so once. The C extensions (the vocabulary
walk ``fimconstrain/engine/_walk.c``, the Earley closure ``_earley.c``, the branching lexer
``_lexer.c``) are each built on their own, with or without mypyc: any build may fail without the
others, and the stamp records the digest of each that was built.
``FIMCONSTRAIN_PURE_PYTHON=1`` skips them all.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from setuptools import Extension, setup
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
    """Compiles the engine and the C extensions, each on its own, and writes the stamp beside
    them; a failure leaves the sources (or the C extension's Python twin) to run."""

    def run(self) -> None:
        if not self.extensions:
            return
        start = time.monotonic()
        self._failed: set[str] = set()
        asked = {ext.name for ext in self.extensions}
        try:
            super().run()
        except Exception as error:  # a compiler error or a missing compiler: never fail the install
            _warn(f"could not compile the engine ({type(error).__name__}: {error})")
            return
        c_modules = {ext.module: ext for ext in NATIVE.C_EXTENSIONS}
        engine = asked - set(c_modules)
        c_built = [c_modules[name] for name in sorted(asked - self._failed) if name in c_modules]
        # the engine's folder in the build's output (in place for an editable install)
        out_dir = Path(self.get_ext_fullpath("fimconstrain.engine.native")).parent
        stamp: dict = {"cache_tag": sys.implementation.cache_tag}
        if engine and not engine & self._failed:
            stamp["sources"] = NATIVE.source_digest(NATIVE.compiled_sources(ENGINE_DIR), ENGINE_DIR)
            stamp["mypy"] = _mypy_version()
        for ext in c_built:
            stamp[ext.key] = NATIVE.extension_digest(ext, ENGINE_DIR)
        stamp["seconds"] = round(time.monotonic() - start, 1)
        (out_dir / NATIVE.STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
        built = ["compiled engine"] * ("sources" in stamp) + [ext.what for ext in c_built]
        print(f"fimconstrain: {', '.join(built) or 'nothing'} built in {stamp['seconds']} s", file=sys.stderr)

    def build_extensions(self) -> None:
        """Every extension, each on its own (:meth:`build_extension`); those that failed are then
        left out of what is copied in place and installed."""
        super().build_extensions()
        self.extensions = [ext for ext in self.extensions if ext.name not in self._failed]

    def build_extension(self, ext) -> None:
        """One extension; a failure is recorded and warned about, never raised: a C extension's
        failure keeps the compiled engine, and the engine's keeps the C extensions."""
        try:
            super().build_extension(ext)
        except Exception as error:
            self._failed.add(ext.name)
            c_ext = next((c for c in NATIVE.C_EXTENSIONS if c.module == ext.name), None)
            what = c_ext.what if c_ext else f"the engine ({ext.name})"
            print(
                f"fimconstrain: could not compile {what} ({type(error).__name__}: {error}); "
                "its Python twin will run",
                file=sys.stderr,
            )


def _mypy_version() -> str:
    from mypy.version import __version__

    return __version__


def c_extensions() -> list:
    """The C extensions (plain C99 on the CPython API: no build requirement of their own)."""
    flags = [] if sys.platform == "win32" else ["-O2", "-std=c99"]
    return [
        Extension(ext.module, [str((ENGINE_DIR / ext.source).relative_to(HERE))], extra_compile_args=flags)
        for ext in NATIVE.C_EXTENSIONS
    ]


def engine_extensions() -> list:
    """mypyc's extension modules for the engine, or none (the sources run)."""
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


def extensions() -> list:
    """The engine's and the C extensions (none with ``FIMCONSTRAIN_PURE_PYTHON=1``)."""
    if os.environ.get("FIMCONSTRAIN_PURE_PYTHON", "").strip() not in ("", "0"):
        return []
    return engine_extensions() + c_extensions()


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildEngine})
