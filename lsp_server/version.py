"""The server's version (what ``--version`` and ``initialize`` report)."""

__version__ = "0.1.0"
