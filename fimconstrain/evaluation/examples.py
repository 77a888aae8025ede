"""One FIM task of an evaluation: a file cut into prefix, middle and suffix (Stack-Boundary,
Stack-RandSpan, or a benchmark of the field with its tests in ``meta``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Example:
    """One FIM task: ``prefix + middle + suffix`` is the original file; ``middle`` is the ground truth."""

    id: str
    kind: str
    path: str  # relative to the dataset's root
    sha256: str  # of the file's bytes (a benchmark task's: of its published record)
    prefix: str
    middle: str
    suffix: str
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)
