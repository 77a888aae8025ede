"""Drafts from the prompt itself (prompt lookup decoding): code repeats itself, so the tokens
that followed the last few tokens where they occurred before, in the prefix or the suffix of the
prompt, are a likely next stretch of the middle. A runtime that scores several tokens in one call
verifies a draft at once (:class:`.llama_backend.LlamaCppSession`); the decode loop still chooses
every token from its own logits, so a draft changes how fast a middle comes, never what it is.
"""

from __future__ import annotations

from collections.abc import Sequence

#: the longest and the shortest run of last tokens looked up (longer first: a surer match)
NGRAM_SIZES = (4, 3)


def draft(ids: Sequence[int], length: int, sizes: Sequence[int] = NGRAM_SIZES) -> list[int]:
    """Up to ``length`` tokens that followed the most recent earlier occurrence of the last
    ``n`` tokens of ``ids`` (the largest ``n`` of ``sizes`` that occurs); [] when none does."""
    if length <= 0:
        return []
    total = len(ids)
    for n in sizes:
        if total <= n:
            continue
        tail = list(ids[total - n :])
        first = tail[0]
        for start in range(total - n - 1, -1, -1):
            if ids[start] == first and list(ids[start : start + n]) == tail:
                return list(ids[start + n : start + n + length])
    return []
