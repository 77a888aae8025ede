"""fimconstrain: constrained fill-in-the-middle decoding for code models.

The public contract::

    c = fimconstrain.fim_checker(prefix, suffix, language="python")
    c2 = c.feed(text)   # Checker, or None if no continuation can make a valid program
    c.is_complete()     # prefix + fed text + suffix is a complete, valid program
"""

from .checker import Checker, clear_caches, fim_checker
from .errors import FimConstrainError, GrammarError, InputError, UncompletableError

__all__ = ["Checker", "clear_caches", "fim_checker", "FimConstrainError", "GrammarError", "InputError",
           "UncompletableError"]
__version__ = "0.1.0"
