"""Whether an item is worth showing: the model's own confidence in it.

A valid middle can still be junk. The mean log-probability the model gave the middle's tokens
(:attr:`..loop.generate.FimResult.mean_logprob`) separates the two well enough to gate an editor's
items: below a threshold fitted on held-out cuts (``scripts/fit_confidence.py``, never the
editor-quality benchmark's own files) the server shows nothing. The threshold belongs to a
model, so it is stored beside it (``confidence.json`` in the model's directory) or, for a known
model fetched by name, in its registry entry (:attr:`.known_models.KnownModel.min_mean_logprob`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .known_models import find_known

FILE_NAME = "confidence.json"


@dataclass(frozen=True)
class ConfidenceGate:
    """Shows an item when its mean token log-probability reaches ``min_mean_logprob``
    (None: every item shows)."""

    min_mean_logprob: float | None = None

    def shows(self, mean_logprob: float | None) -> bool:
        if self.min_mean_logprob is None:
            return True
        return mean_logprob is not None and mean_logprob >= self.min_mean_logprob

    @classmethod
    def for_model(cls, model_dir: str | Path | None) -> ConfidenceGate:
        """The gate fitted for the model in ``model_dir`` (its ``confidence.json``; for a model
        file such as a GGUF, the one beside it); else, for a known model's name or cached file,
        its registry threshold; else one that shows everything."""
        folder = Path(model_dir) if model_dir is not None else None
        if folder is not None and folder.is_file():
            folder = folder.parent
        path = folder / FILE_NAME if folder is not None else None
        if path is not None and path.is_file():
            return cls(json.loads(path.read_text("utf-8"))["min_mean_logprob"])
        known = find_known(model_dir)
        return cls(known.min_mean_logprob if known is not None else None)


def fit_threshold(scored: Iterable[tuple[float, bool]], junk_cost: float = 1.0) -> float:
    """The threshold that maximises good items shown minus ``junk_cost`` times junk items
    shown, over ``(mean log-probability, good)`` pairs; ties go to the higher threshold (show
    less). With no threshold worth it, 0.0: only certain items (log-probability 0) show."""
    ranked = sorted(scored, key=lambda pair: -pair[0])
    best, best_gain, gain = 0.0, 0.0, 0.0
    for i, (score, good) in enumerate(ranked):
        gain += 1.0 if good else -junk_cost
        if i + 1 < len(ranked) and ranked[i + 1][0] == score:
            continue  # a threshold shows every item of its score
        if gain > best_gain:
            best, best_gain = score, gain
    return best
