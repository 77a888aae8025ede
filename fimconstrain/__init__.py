"""fimconstrain: constrained fill-in-the-middle decoding for code models.

The public contract::

    c = fimconstrain.fim_checker(prefix, suffix, language="python", python_version="3.14")
    c2 = c.feed(text)   # Checker, or None if no continuation can make a valid program
    c.is_complete()     # prefix + fed text + suffix is a complete, valid program

``fimconstrain.ENGINE_BUILD`` says which build of the engine runs: compiled by mypyc, or the sources.
"""

from .engine import ENGINE_BUILD
from .engine.checker import Checker, clear_caches, fim_checker
from .engine.errors import FimConstrainError, GrammarError, InputError, Interrupted, UncompletableError
from .engine.versions import NEWEST as NEWEST_PYTHON
from .engine.versions import SUPPORTED as SUPPORTED_PYTHONS
from .engine.versions import parse_python_version

__all__ = [
    "ENGINE_BUILD",
    "NEWEST_PYTHON",
    "SUPPORTED_PYTHONS",
    "Checker",
    "FimConstrainError",
    "GrammarError",
    "InputError",
    "Interrupted",
    "UncompletableError",
    "clear_caches",
    "fim_checker",
    "parse_python_version",
]
__version__ = "0.1.0"
