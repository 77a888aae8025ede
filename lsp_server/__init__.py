"""fimconstrain-lsp: a language server that offers inline completions (LSP 3.18
``textDocument/inlineCompletion``) from a FIM code model, constrained so that the
file stays valid Python.  Run it with ``python -m lsp_server`` (stdio) or the
``fimconstrain-lsp`` console script; see docs/lsp.md.
"""

from fimconstrain import __version__

__all__ = ["__version__", "create_server"]


def create_server():
    """The server with all handlers registered (imports pygls lazily)."""
    from .server import create_server as _create

    return _create()
