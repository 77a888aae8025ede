"""Applying the token-mask store in a decode step, as tests and the docs' examples do
(docs/mask-store.md): the library's decode loop masks with :meth:`MaskStore.allowed` and
:meth:`MaskStore.prefilter` itself."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from fimconstrain.decoding.masks.store import MaskStore, mask_logits


def pack(bits: np.ndarray) -> np.ndarray:
    """A bool vector as ``uint64`` words (the store's layout)."""
    padded = np.zeros(-(-len(bits) // 64) * 64, dtype=bool)
    padded[: len(bits)] = bits
    return np.packbits(padded, bitorder="little").view("<u8").astype(np.uint64)


def prefix_logits(store: MaskStore, checker, logits, stop_ids: Iterable[int] = (), held: int = 0):
    """Prefix-only decoding (``mode=prefix``): the logits with the store's mask applied; stop
    tokens stay only when the program is complete now. The drawn token still goes through
    ``checker.feed`` (the mask is a superset), which also gives the next step's checker."""
    ends = list(stop_ids) if checker.is_complete() else []
    return mask_logits(logits, store.allowed(checker, held), ends)


def prefiltered(
    store: MaskStore, checker, ranked: Iterable[int], passthrough: Iterable[int] = (), held: int = 0
) -> Iterator[int]:
    """``ranked`` token ids (best first) without those the store rules out; ids in
    ``passthrough`` (stop tokens) are always kept. Feed the result to the exact check (FIM)."""
    words = store.mask(checker, held)
    keep = set(passthrough)
    size = store.vocab_size
    for token in ranked:
        if token in keep or (0 <= token < size and int(words[token >> 6]) >> (token & 63) & 1):
            yield token
