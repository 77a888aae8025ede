"""The field's own post-processing of an unconstrained middle: what a harness keeps of a model
that does not stop by itself, so that the constrained path is compared with it, not only with
the raw middle (DESIGN.md, "Benchmarks of the field").

- HumanEval-infilling single-line: the first line, with its line break (the hole is one whole
  line; bigcode's and Qwen's harnesses keep the first line).
- SAFIM (Gong et al. 2024, §3.3 "syntax-aware truncation", as the paper describes it): a block
  ends where a line is indented less than the block's first line; a control-flow header ends
  with its line; an API call ends where its brackets close (else with its line).
- Every other subset: the middle as generated (its harness keeps it).
"""

from __future__ import annotations

from ..engine.positions import NEWLINE
from .examples import Example

_OPENING, _CLOSING = "([{", ")]}"


def field_truncation(example: Example, middle: str) -> str:
    """``middle`` as the harness of ``example``'s benchmark post-processes it (unchanged for
    datasets and subsets whose harness keeps the middle as generated)."""
    benchmark, subset = example.meta.get("benchmark"), example.meta.get("subset")
    if benchmark == "humaneval-infilling" and subset == "single-line":
        return first_line(middle, keep_break=True)
    if benchmark == "safim" and subset == "block":
        return block_end(middle, _indent(example.prefix[example.prefix.rfind("\n") + 1 :]))
    if benchmark == "safim" and subset == "control":
        return first_line(middle, keep_break=False)
    if benchmark == "safim" and subset == "api":
        return call_end(middle)
    return middle


def first_line(middle: str, keep_break: bool) -> str:
    """The middle's first line, its line break kept (a break added where it has none) or dropped."""
    m = NEWLINE.search(middle)
    line = middle if m is None else middle[: m.start()]
    return line + "\n" if keep_break else line


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def block_end(middle: str, column: int) -> str:
    """The lines of ``middle`` before the first non-blank one indented less than ``column`` (the
    cursor's, where the block's first line starts): the block's end, without its last line break."""
    lines = middle.splitlines(keepends=True)
    for i, line in enumerate(lines[1:], 1):
        if line.strip() and _indent(line) < column:
            return "".join(lines[:i]).rstrip("\r\n")
    return middle


def call_end(middle: str) -> str:
    """``middle`` up to where its first bracket closes again (the call's end), else its first line."""
    depth = 0
    quote = ""
    for i, ch in enumerate(middle):
        if quote:
            if ch == quote and middle[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPENING:
            depth += 1
        elif ch in _CLOSING:
            depth -= 1
            if depth <= 0:
                return middle[: i + 1]
        elif ch in "\r\n" and depth == 0:
            return middle[:i]
    return middle
