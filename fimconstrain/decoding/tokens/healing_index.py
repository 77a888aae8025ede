"""Which tokens may come while token healing is pending: a prefix index over the vocabulary.

While the first tokens must write the healed end of the prefix again (``self.na|`` healed
to ``self.`` + "na..."), a token passes only if its text is a start of what is left to write
or writes all of it and goes on (:func:`..loop.constraint.rest_of_healing`).  The model, prompted
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

import sys
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .fim_formats import REPLACEMENT, TextCodec


@dataclass(frozen=True)
class HealingTable:
    """What a :class:`HealingIndex` is made of, for the ``known`` ids the tokenizer has: the
    judgeable token texts sorted (``texts``, with their ids ``ids``) and the tokens always kept
    (``always``). Built from a codec, or read back from a vocabulary's cache on disk."""

    known: int
    texts: list[str]
    ids: list[int]
    always: list[int]

    @classmethod
    def build(cls, codec: TextCodec) -> HealingTable:
        """Every token's text as the tokenizer decodes it alone, sorted (0.5 s at 152k tokens)."""
        known = len(codec.tokenizer)
        texts = [codec.decode([token]) for token in range(known)]
        always = [t for t, text in enumerate(texts) if not text or REPLACEMENT in text]
        ranked = sorted((text, t) for t, text in enumerate(texts) if text and REPLACEMENT not in text)
        return cls(known, [text for text, _ in ranked], [t for _, t in ranked], always)

    def arrays(self) -> dict[str, np.ndarray]:
        """The table as numpy arrays (the texts as their UTF-8 bytes end to end, and where each ends)."""
        encoded = [text.encode("utf-8", "surrogatepass") for text in self.texts]
        return {
            "heal_ids": np.array(self.ids, dtype=np.int32),
            "heal_ends": np.cumsum([len(b) for b in encoded], dtype=np.int64),
            "heal_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8),
            "heal_always": np.array(self.always, dtype=np.int32),
        }

    @classmethod
    def from_arrays(cls, known: int, arrays) -> HealingTable:
        """The table :meth:`arrays` wrote; ValueError when they do not make one for ``known`` ids."""
        ids, ends, always = arrays["heal_ids"], arrays["heal_ends"], arrays["heal_always"]
        data = arrays["heal_bytes"].tobytes()
        if (
            len(ids) != len(ends)
            or len(ids) + len(always) != known
            or (len(ends) and (int(ends[-1]) != len(data) or (np.diff(ends) < 0).any() or ends[0] < 0))
            or (len(ids) and (ids.min() < 0 or ids.max() >= known))
            or (len(always) and (always.min() < 0 or always.max() >= known))
        ):
            raise ValueError("a healing table that does not fit the vocabulary")
        bounds = ends.tolist()
        texts = [data[start:end].decode("utf-8", "surrogatepass") for start, end in zip([0, *bounds], bounds)]
        return cls(known, texts, ids.tolist(), always.tolist())


class HealingIndex:
    """The vocabulary's token texts, sorted, for the tokens that may write a healed text."""

    def __init__(self, codec: TextCodec, vocab_size: int, table: HealingTable | None = None):
        """Over ``vocab_size`` logits; ``table``: the codec's :class:`HealingTable` when it is
        at hand (read from the cache), else built here."""
        table = table or HealingTable.build(codec)
        self.vocab_size = vocab_size
        known = min(vocab_size, table.known)
        #: tokens whose text cannot be judged alone (not whole UTF-8), that write nothing, or
        #: that the tokenizer does not know
        self.always = [t for t in table.always if t < known]
        self.always += range(known, vocab_size)
        if known < table.known:  # (logits narrower than the tokenizer: its last ids never come)
            kept = [(text, t) for text, t in zip(table.texts, table.ids) if t < known]
            self.texts, self.ids = [text for text, _ in kept], [t for _, t in kept]
        else:
            self.texts, self.ids = table.texts, table.ids
        self.id_array = np.array(self.ids, dtype=np.int64)
        #: the tokens always kept, as booleans over the vocabulary (a mask starts as a copy)
        self.always_mask = np.zeros(vocab_size, dtype=bool)
        self.always_mask[self.always] = True
        self.mask = lru_cache(maxsize=256)(self._mask)

    def writers(self, healing: str) -> np.ndarray:
        """The ids of the tokens whose (judgeable) text starts ``healing`` or starts with it. The
        texts that start with it are one run of the sorted texts, up to the first text at or
        past ``healing`` with its last character's successor (52,820 tokens start with a blank
        at Qwen's vocabulary: read one by one, that step's first mask took 12 ms)."""
        texts, ids = self.texts, self.id_array
        starts = []
        for end in range(1, len(healing)):  # texts that are a proper start of ``healing``
            at = bisect_left(texts, healing[:end])
            while at < len(texts) and texts[at] == healing[:end]:
                starts.append(int(ids[at]))
                at += 1
        at = bisect_left(texts, healing)  # texts that start with ``healing`` (itself included)
        if healing and ord(healing[-1]) < sys.maxunicode:
            stop = bisect_left(texts, healing[:-1] + chr(ord(healing[-1]) + 1), at)
        else:
            stop = at
            while stop < len(texts) and texts[stop].startswith(healing):
                stop += 1
        return np.concatenate([np.array(starts, dtype=ids.dtype), ids[at:stop]])

    def _mask(self, healing: str) -> np.ndarray:
        """Booleans over the vocabulary: True where a token may write ``healing`` (cached): the
        tokens always kept are copied in as a block (1,457 of them at Qwen's vocabulary)."""
        mask = self.always_mask.copy()
        mask[self.writers(healing)] = True
        return mask
