"""Which tokens may come while token healing is pending: a prefix index over the vocabulary.

While the first tokens must write the healed end of the prefix again (``self.na|`` healed
to ``self.`` + "na..."), a token passes only if its text is a start of what is left to write
or writes all of it and goes on (:func:`.constraint.rest_of_healing`).  The model, prompted
before the healed text, often ranks such tokens far down: walking the ranking checked hundreds
of candidates per healing step (2,396 in one step of a held-out mid-line request).  This index
gives the tokens that can pass directly, so that the walk sees only them, in the model's order.

The index reads each token's text on its own.  For a token whose text is not whole on its own
(a byte of a multi-byte character: U+FFFD), that text says nothing of what it writes after
the tokens before it, so such tokens are always candidates, as are tokens that write nothing
and ids the tokenizer does not know; the exact check still judges them all, so the first
passing token is the one the whole walk would find.  (The names guide, which looks a fixed
number of ranked tokens past the first valid one, now looks only at tokens that could heal,
so on a healing step it may judge more valid candidates than before.)
"""

from __future__ import annotations

from bisect import bisect_left
from functools import lru_cache

import numpy as np

from .constraint import REPLACEMENT
from .fim_formats import TextCodec


class HealingIndex:
    """The vocabulary's token texts, sorted, for the tokens that may write a healed text."""

    def __init__(self, codec: TextCodec, vocab_size: int):
        self.vocab_size = vocab_size
        known = min(vocab_size, len(codec.tokenizer))
        texts = [codec.decode([token]) for token in range(known)]
        #: tokens whose text cannot be judged alone (not whole UTF-8), that write nothing, or
        #: that the tokenizer does not know
        self.always = [t for t, text in enumerate(texts) if not text or REPLACEMENT in text]
        self.always += range(known, vocab_size)
        ranked = sorted((text, t) for t, text in enumerate(texts) if text and REPLACEMENT not in text)
        self.texts = [text for text, _ in ranked]
        self.ids = [t for _, t in ranked]
        self.mask = lru_cache(maxsize=256)(self._mask)

    def tokens(self, healing: str) -> list[int]:
        """The tokens whose text starts ``healing`` or starts with it, and those always kept."""
        out = list(self.always)
        for end in range(1, len(healing)):  # texts that are a proper start of ``healing``
            at = bisect_left(self.texts, healing[:end])
            while at < len(self.texts) and self.texts[at] == healing[:end]:
                out.append(self.ids[at])
                at += 1
        at = bisect_left(self.texts, healing)  # texts that start with ``healing`` (itself included)
        while at < len(self.texts) and self.texts[at].startswith(healing):
            out.append(self.ids[at])
            at += 1
        return out

    def _mask(self, healing: str) -> np.ndarray:
        """Booleans over the vocabulary: True where a token may write ``healing`` (cached)."""
        mask = np.zeros(self.vocab_size, dtype=bool)
        mask[self.tokens(healing)] = True
        return mask
