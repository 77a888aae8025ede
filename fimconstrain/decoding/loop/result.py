"""What one generation gives back: the middle, why it stopped, and where its time went."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class StopReason(str, Enum):
    """Why the decode loop stopped (a ``str``: records and JSON keep the plain value)."""

    #: the model chose a stop token (the constrained modes allow one only when the file is valid)
    EOS = "eos"
    #: the model's token ran on into the suffix: the middle ends inside it
    SPLIT = "split"
    #: one line was asked for, and it ended
    LINE = "line"
    #: a block was asked for, and a line left it
    BLOCK = "block"
    #: the token budget ran out
    BUDGET = "budget"
    #: budget hit: cut at the likeliest valid stop (paper 004 §VII-B)
    BEST_STOP = "best-stop"
    #: budget hit: the end-of-middle policy ended it (a cut, closed by the finish search)
    FINISHED = "finished"
    #: no candidate passed the constraint
    STUCK = "stuck"
    #: stopped from outside (a newer request, a deadline)
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    @property
    def explanation(self) -> str:
        """One sentence for a person (the CLI prints it under the middle)."""
        return _EXPLANATIONS[self]

    @property
    def cut_short(self) -> bool:
        """Whether the middle ended before the model chose to end it (the end-of-middle policy
        then gets to end it)."""
        return self in (
            StopReason.BUDGET,
            StopReason.STUCK,
            StopReason.CANCELLED,
            StopReason.LINE,
            StopReason.BLOCK,
        )


_EXPLANATIONS = {
    StopReason.EOS: "the model ended the middle (constrained modes allow that only when the file is valid)",
    StopReason.SPLIT: "the model's last token ran on into the text after the cursor; the middle ends "
    "inside it",
    StopReason.LINE: "one line was asked for, and it ended",
    StopReason.BLOCK: "a block was asked for, and the model's next line left it (indented less than its "
    "first line); the middle ends before that line",
    StopReason.BUDGET: "--max-new-tokens ran out; the middle is as generated, or cut back to its longest "
    "valid prefix when nothing ended it validly: try a larger --max-new-tokens",
    StopReason.BEST_STOP: "--max-new-tokens ran out; the middle is cut where the file was last valid and "
    "the model likeliest to stop",
    StopReason.FINISHED: "--max-new-tokens ran out; the middle was ended by the end-of-middle policy (a cut "
    "of it, closed with brackets and the like)",
    StopReason.STUCK: "no token the model offered kept the file valid; the middle ends there, as for budget",
    StopReason.CANCELLED: "stopped from outside (the language server: a newer request, or the deadline)",
}


@dataclass
class FimResult:
    """A generated middle, whether the whole file is valid with it, and where the time went."""

    middle: str
    mode: str
    valid: bool  # prefix + middle + suffix parses at the run's Python version
    stopped: StopReason
    tokens: int  # tokens of the middle (after any cut)
    prompt_tokens: int
    generated: int = 0  # tokens the model generated (before any cut): the steps the timings are per
    model_seconds: float = 0.0  # forward passes for generated tokens (prompt prefill excluded)
    prefill_seconds: float = 0.0  # forward pass over the prompt
    checker_seconds: float = 0.0  # constraint work per token (candidate checks, EOS checks, decoding)
    setup_seconds: float = 0.0  # building the FIM checker for the file (one-time)
    token_ids: list[int] = field(default_factory=list)  # the generated tokens (stop token excluded)
    raw_middle: str | None = None  # checked mode: the model's output before cutting to a valid prefix
    healed: str = ""  # the prefix's end the first tokens wrote again (token healing; not in ``middle``)
    #: the model's log-probability of each token of ``token_ids`` (its own distribution, before
    #: any constraint or sampling temperature): the item's confidence
    logprobs: list[float] = field(default_factory=list)
    candidates_checked: int = 0
    #: with ``semantic``: what the names guide did (:class:`.semantic.SemanticGuide` ``stats``)
    semantic: dict[str, int] = field(default_factory=dict)
    #: decoding steps: choices of the next token, the stop token included (what per-token
    #: timings are per; paper 004 Fig. 11)
    steps: int = 0
    #: the once-per-generation ending (best-stop cut, end-of-middle policy, cut to a valid
    #: prefix), included in ``checker_seconds``: not a per-token cost
    ending_seconds: float = 0.0
    #: the constraint's time in each decoding step (pre-filter, candidate walk, stop checks):
    #: its tail is what a fast model waits on (docs/optimizations.md)
    step_checker_seconds: list[float] = field(default_factory=list)
    #: the middle is valid only as text nobody would accept (an editor does not show it): made
    #: valid by the finish search, the last resort of a run that asked for none, or cut back to a
    #: prefix that comments out the code after the cursor
    unshowable: bool = False
    #: times a whole-line middle went back to an earlier token because its line ended where the
    #: file does not parse (:attr:`.options.DecodeOptions.line_retries`)
    rewinds: int = 0

    @property
    def mean_logprob(self) -> float | None:
        """The mean log-probability of the middle's tokens (None without tokens)."""
        return sum(self.logprobs) / len(self.logprobs) if self.logprobs else None

    @property
    def model_ms_per_token(self) -> float:
        return 1000 * self.model_seconds / max(1, self.generated)

    @property
    def checker_ms_per_token(self) -> float:
        return 1000 * self.checker_seconds / max(1, self.generated)

    def to_dict(self) -> dict:
        """Plain fields plus the per-token timings, for JSON output."""
        out = dict(self.__dict__)
        out.update(
            stopped=self.stopped.value,
            model_ms_per_token=self.model_ms_per_token,
            checker_ms_per_token=self.checker_ms_per_token,
        )
        return out
