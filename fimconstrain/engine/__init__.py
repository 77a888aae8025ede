"""The engine: grammar, lexer automaton, Earley charts, language layers, the checker and the
right quotient by the suffix. Imports the standard library only (lark reads the grammar file).

The public face is :func:`fim_checker` and :class:`Checker`; a language is a grammar plus a
:class:`Layer` (:func:`register_language`); the rest is for the layers above.
"""

from .native import EngineBuild, choose

#: the engine this process runs, compiled or the sources: settled before any other module loads
ENGINE_BUILD: EngineBuild = choose()

from .checker import Checker, Language, clear_caches, fim_checker, get_layer, prepare, register_language
from .errors import FimConstrainError, GrammarError, InputError, Interrupted, UncompletableError
from .layers.base_layer import BaseLayer, PlainLayer
from .layers.layer_protocol import Branch, FinishVocabulary, Layer, LexicalLayer
from .layers.python_layer import PythonLayer
from .rejection import first_error_offset, first_rejection
from .versions import (
    NEWEST,
    OLDEST,
    SUPPORTED,
    PythonVersion,
    VersionLike,
    format_version,
    parse_python_version,
)

__all__ = [
    "ENGINE_BUILD",
    "NEWEST",
    "OLDEST",
    "SUPPORTED",
    "BaseLayer",
    "Branch",
    "Checker",
    "EngineBuild",
    "FimConstrainError",
    "FinishVocabulary",
    "GrammarError",
    "InputError",
    "Interrupted",
    "Language",
    "Layer",
    "LexicalLayer",
    "PlainLayer",
    "PythonLayer",
    "PythonVersion",
    "UncompletableError",
    "VersionLike",
    "clear_caches",
    "fim_checker",
    "first_error_offset",
    "first_rejection",
    "format_version",
    "get_layer",
    "parse_python_version",
    "prepare",
    "register_language",
]
