"""Which engine runs: the engine's modules compiled by mypyc (``setup.py``) when they are built
for this interpreter from these very sources, else the sources themselves, the reference, with
one log line saying why (docs/optimizations.md, "The compiled engine").

Run first by ``fimconstrain.engine`` (:func:`choose`) and never compiled itself: when the compiled modules
cannot serve, it puts a finder ahead of the standard ones that loads each engine module from
its ``.py`` file. ``FIMCONSTRAIN_ENGINE=python`` asks for the sources; ``=compiled`` makes an
unusable build an error instead of a fallback. ``setup.py`` reads this file by path (the package
is not importable while it builds) for the list of modules and their digest.

The same build compiles three C extensions, each on its own (:data:`C_EXTENSIONS`): the exact
whole-vocabulary walk (``_walk.c``, see ``fimconstrain/decoding/masks/vocab_walk.py``), the
Earley closure (``_earley.c``, see ``automata/earley.py``) and the branching lexer (``_lexer.c``,
see ``lexer.py``). :func:`c_extension` says whether one serves (built from this very C file, for
this interpreter), and says once why not, its Python twin then running.
``FIMCONSTRAIN_ENGINE=python`` leaves them out too.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

#: the environment variable that chooses: ``auto`` (the default), ``python`` or ``compiled``
ENV_VAR = "FIMCONSTRAIN_ENGINE"
#: what the build writes beside the compiled modules: the digest of the sources it compiled
STAMP = "native_build.json"
#: mypyc's name for the shared library that holds every compiled module (``<group>__mypyc``)
GROUP = "fimconstrain.engine.compiled"
#: engine modules that stay Python: the packages (the engine's runs this choice) and this module
NOT_COMPILED = ("__init__.py", "native.py")

ENGINE_DIR = Path(__file__).resolve().parent
_log = logging.getLogger("fimconstrain")


@dataclass(frozen=True)
class CExtension:
    """One C extension beside the engine's sources: ``source`` is its C file, ``module`` its
    import name, ``abi`` the interface version (``ABI`` in the module) its Python caller speaks;
    ``what`` names it and ``instead`` says what runs without it, for the one log line."""

    key: str
    source: str
    module: str
    abi: int
    what: str
    instead: str


#: the exact whole-vocabulary walk (``fimconstrain/decoding/masks/vocab_walk.py`` calls it)
WALK = CExtension(
    key="walk",
    source="_walk.c",
    module="fimconstrain.engine._walk",
    abi=7,
    what="the native vocabulary walk",
    instead="whole masks are computed in Python",
)
#: the Earley closure (``automata/earley.py``'s ``Recognizer`` calls it)
CLOSURE = CExtension(
    key="closure",
    source="_earley.c",
    module="fimconstrain.engine._earley",
    abi=4,
    what="the native Earley closure",
    instead="sets are closed in Python",
)
#: the branching lexer (``lexer.py``'s ``advance`` calls it)
LEXER = CExtension(
    key="lexer",
    source="_lexer.c",
    module="fimconstrain.engine._lexer",
    abi=4,
    what="the native branching lexer",
    instead="text is lexed in Python",
)
#: every C extension the build compiles, each on its own
C_EXTENSIONS = (WALK, CLOSURE, LEXER)


def compiled_sources(engine_dir: Path = ENGINE_DIR) -> list[Path]:
    """The engine's source files that the build compiles, its rooms' included, in a fixed order."""
    return sorted(p for p in engine_dir.rglob("*.py") if p.name not in NOT_COMPILED)


def source_digest(sources: Sequence[Path], engine_dir: Path = ENGINE_DIR) -> str:
    """SHA-256 over the paths and bytes of ``sources``: a build is current only for these."""
    digest = hashlib.sha256()
    for path in sources:
        name = path.relative_to(engine_dir).as_posix()
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class EngineBuild:
    """The engine this process runs: ``kind`` is ``"compiled"`` or ``"python"``; ``detail`` says
    which build, or why the sources run."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} engine ({self.detail})"


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Loads ``fimconstrain.engine.<room>.<name>`` from ``<room>/<name>.py``, ahead of a compiled
    module (the rooms' packages themselves are never compiled)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(f"{__package__}."):
            return None
        source = ENGINE_DIR.joinpath(*fullname.split(".")[2:]).with_suffix(".py")
        if not source.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def extension_digest(extension: CExtension, engine_dir: Path = ENGINE_DIR) -> str:
    """SHA-256 of a C extension's source: its build is current only for it."""
    return hashlib.sha256((engine_dir / extension.source).read_bytes()).hexdigest()


def _read_stamp() -> dict[str, object]:
    stamp_path = ENGINE_DIR / STAMP
    return json.loads(stamp_path.read_text()) if stamp_path.is_file() else {}


def _load_extension(extension: CExtension) -> ModuleType | str:
    """The C extension's module when it can serve, else why not."""
    if os.environ.get(ENV_VAR, "").strip().lower() == "python":
        return f"is left out ({ENV_VAR}=python)"
    stamp = _read_stamp()
    if extension.key not in stamp:
        return "is not built (pip install with a C compiler builds it)"
    if stamp.get("cache_tag") != sys.implementation.cache_tag:
        return f"was built for {stamp.get('cache_tag')}, not {sys.implementation.cache_tag}"
    if not (ENGINE_DIR / extension.source).is_file():
        return f"has no {extension.source} beside it to tell whether it is current"
    if stamp[extension.key] != extension_digest(extension):
        return f"is older than {extension.source} (pip install -e . rebuilds it)"
    try:
        module = importlib.import_module(extension.module)
    except ImportError as error:
        return f"cannot be loaded: {error}"
    if getattr(module, "ABI", None) != extension.abi:
        return f"speaks interface {getattr(module, 'ABI', None)}, not {extension.abi}"
    return module


#: :func:`c_extension`'s answers, once per process and extension
_LOADED: dict[str, ModuleType | None] = {}


def c_extension(extension: CExtension) -> ModuleType | None:
    """The C extension's module, or None (then one log line, once, says why, unless
    ``FIMCONSTRAIN_ENGINE=python`` asked for it)."""
    if extension.key not in _LOADED:
        found = _load_extension(extension)
        if isinstance(found, str):
            # (left out by FIMCONSTRAIN_ENGINE=python: asked for, nothing to say)
            log = _log.debug if found.startswith("is left out") else _log.warning
            log("fimconstrain: %s %s; %s", extension.what, found, extension.instead)
            _LOADED[extension.key] = None
        else:
            _LOADED[extension.key] = found
    return _LOADED[extension.key]


def walk_extension() -> ModuleType | None:
    """The C vocabulary walk's module, or None (:func:`c_extension`)."""
    return c_extension(WALK)


def closure_extension() -> ModuleType | None:
    """The C Earley closure's module, or None (:func:`c_extension`)."""
    return c_extension(CLOSURE)


def lexer_extension() -> ModuleType | None:
    """The C branching lexer's module, or None (:func:`c_extension`)."""
    return c_extension(LEXER)


def _compiled_engine() -> EngineBuild | str:
    """The compiled engine when its modules can serve (the shared library then loaded), else
    why they cannot."""
    stamp = _read_stamp()
    if "sources" not in stamp:
        return "the compiled engine is not built (pip install with a C compiler builds it)"
    if stamp.get("cache_tag") != sys.implementation.cache_tag:
        return (
            f"the compiled engine was built for {stamp.get('cache_tag')}, not {sys.implementation.cache_tag}"
        )
    if stamp.get("sources") != source_digest(compiled_sources()):
        return "the compiled engine is older than the engine's sources (pip install -e . rebuilds it)"
    try:
        importlib.import_module(f"{GROUP}__mypyc")
    except ImportError as error:
        return f"the compiled engine cannot be loaded: {error}"
    return EngineBuild("compiled", f"mypyc {stamp.get('mypy', '?')}")


def choose() -> EngineBuild:
    """Decide, once per process, before any other engine module is imported."""
    requested = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if requested not in ("auto", "python", "compiled"):
        raise ValueError(f"{ENV_VAR} must be auto, python or compiled, not {requested!r}")
    if requested == "python":
        sys.meta_path.insert(0, _SourceFinder())
        return EngineBuild("python", f"{ENV_VAR}=python")
    compiled = _compiled_engine()
    if isinstance(compiled, EngineBuild):
        return compiled
    if requested == "compiled":
        raise ImportError(f"{ENV_VAR}=compiled, but {compiled}")
    sys.meta_path.insert(0, _SourceFinder())
    _log.warning("fimconstrain: %s; running the pure-Python engine (1.2-1.5x slower)", compiled)
    return EngineBuild("python", compiled)
