"""The decode loop over a model server (:mod:`..runtimes.server_backend`): the options it can
follow, and a note of how the server made a middle where the loop did not choose its every token."""

from __future__ import annotations

from dataclasses import replace

from ..runtimes.server_backend import ServerBackend
from .generate import FimDecoder
from .options import DecodeOptions


class ServerDecoder(FimDecoder):
    """The decode loop over a :class:`ServerBackend`: every mode where the server tells
    alternatives; where it constrains (the plugin), its middle, checked here token by token
    against the same constraint, nothing healed; else the server's own middle, cut here to its
    longest valid prefix (``checked``)."""

    backend: ServerBackend

    @property
    def constrains(self) -> bool:
        """Whether the server constrains the middle itself (this package's vLLM plugin)."""
        return self.backend.constrains

    def mode_note(self, mode: str) -> str:
        """How the server makes a middle asked for in ``mode`` where the loop does not choose its
        every token ("" where it does): said in summaries."""
        if mode not in ("constrained", "prefix") or self.backend.steered:
            return ""
        if self.constrains:
            return "on the server, by its fimconstrain plugin, and checked here"
        return "the server tells no log-probabilities: its middle is cut to the longest valid prefix"

    def adjusted(self, options: DecodeOptions) -> DecodeOptions:
        """``options`` as the server can follow them: where it constrains, nothing healed (its
        plugin reads the whole prefix); where it tells no log-probabilities, ``checked``."""
        if self.backend.steered or options.mode not in ("constrained", "prefix"):
            return options
        if self.constrains:
            return replace(options, heal=False)
        return replace(options, mode="checked", heal=False)
