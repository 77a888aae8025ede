"""The decoding modes an evaluation compares (paper 004 §VII-B) and what each means in ``--help``
and in the report; what each decodes with is the library's preset
(:data:`fimconstrain.decoding.loop.options.EVALUATION_PRESETS`)."""

from __future__ import annotations

from ..decoding.loop.options import EVALUATION_PRESETS, PAPER_TOP_K

__all__ = ["CONSTRAINED", "DEFAULT_MODES", "MODES", "MODE_HELP", "MODE_NOTES", "PAPER_TOP_K"]

MODES = tuple(EVALUATION_PRESETS)
#: what ``--modes`` defaults to: all but prefix-only decoding (which needs a token-mask store)
DEFAULT_MODES = tuple(m for m in MODES if m != "prefix")
CONSTRAINED = ("constrained", "constrained-nofinish", "paper")
#: each mode in full, for ``fimconstrain eval --help``
MODE_HELP = (
    "unconstrained: the model alone (greedy, no token healing); "
    "checked: unconstrained cut to its longest token prefix that parses, timed as one ast.parse per "
    "step (§VII-B); "
    "truncated: unconstrained as the benchmark's own harness post-processes it (HumanEval-infilling "
    "single-line: the first line; SAFIM: its syntax-aware truncation; elsewhere the middle as generated); "
    "paper: §VII-B's constrained decoder exactly (top 50 candidates and no more, stuck when none "
    "passes, best-stop cut at the budget, no token healing, no split ending, no finish search); "
    "constrained: the project's decoder (top K, then the whole vocabulary; token healing; the "
    "middle may end inside the model's token; one line or a block as the cursor asks, as the editor "
    "decides (--shape); the end-of-middle policy's finish search at the budget); "
    "constrained-nofinish: the same without the finish search; "
    "prefix: constrained by the left context only (the suffix unseen by the constraint), candidates "
    "pre-masked by the token-mask store"
)
#: each constrained mode in a few words, for the report's table titles and Fig. 11's legend
MODE_NOTES = {
    "constrained": "project decoder, finish search on",
    "constrained-nofinish": "project decoder, finish search off",
    "paper": "paper 004 §VII-B decoder",
}
