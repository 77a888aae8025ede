"""A model's vocabulary as the decode loop sees it: its text codec, the tokens that end a middle,
the tokens that never write one, and the token-healing index (built once per logits width)."""

from __future__ import annotations

from .backend import ModelBackend
from .fim_formats import TextCodec
from .healing_index import HealingIndex


class Vocabulary:
    """Read from a model backend once; shared by every generation of a decoder."""

    def __init__(self, backend: ModelBackend):
        self.codec = TextCodec(backend.tokenizer)
        #: tokens that end the middle: the format's stop tokens and end of text
        self.stop_ids: set[int] = backend.fim_format.stop_ids(backend.tokenizer)
        #: the other special tokens: never part of a middle
        self.banned_ids: set[int] = set(backend.special_ids) - self.stop_ids
        self._healing_indexes: dict[int, HealingIndex] = {}

    def ends(self, token: int) -> bool:
        """Whether ``token`` ends the middle: a stop token, or (unconstrained) any other FIM marker."""
        return token in self.stop_ids or token in self.banned_ids

    def healing_index(self, width: int) -> HealingIndex:
        """The tokens that may write a healed text, over ``width`` logits (built once)."""
        index = self._healing_indexes.get(width)
        if index is None:
            index = self._healing_indexes[width] = HealingIndex(self.codec, width)
        return index
