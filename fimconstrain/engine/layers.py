"""The language layers there are: :class:`BaseLayer` and :class:`PlainLayer` (a language
without layout, JSON) from :mod:`~.base_layer`, and Python's from :mod:`~.python_layer` with
:func:`line_indentation` (a line's indentation as CPython measures it). The checker and the
layers above import them from here."""

from .base_layer import BaseLayer, PlainLayer
from .python_layer import PythonLayer, PythonLayout, line_indentation

__all__ = ["BaseLayer", "PlainLayer", "PythonLayer", "PythonLayout", "line_indentation"]
