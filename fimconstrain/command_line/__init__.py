"""The command lines' parts: argument types and the model options, and the ``complete`` and
``model`` commands (``fimconstrain.cli`` dispatches to them)."""
