"""The decoding modes an evaluation compares (paper 004 §VII-B): what each passes to
``FimDecoder.generate`` and what it means in ``--help`` and in the report."""

from __future__ import annotations

#: the paper's candidate count (§VII-B: "up to the top 50 token candidates")
PAPER_TOP_K = 50
#: the modes an evaluation runs, and what each passes to ``FimDecoder.generate`` (checked is
#: derived from the unconstrained run).  The baselines take the prefix as written (no token
#: healing), as the paper's do.
GENERATE: dict[str, dict] = {
    "unconstrained": dict(mode="unconstrained", heal=False),
    "checked": dict(mode="unconstrained", heal=False),
    "constrained": dict(mode="constrained", finish_in_budget=True),
    "constrained-nofinish": dict(mode="constrained", finish_in_budget=False),
    "paper": dict(
        mode="constrained",
        finish_in_budget=False,
        vocabulary_fallback=False,
        split_ending=False,
        heal=False,
        top_k=PAPER_TOP_K,
    ),
    "prefix": dict(mode="prefix"),
}
MODES = tuple(GENERATE)
#: what ``--modes`` defaults to: all but prefix-only decoding (which needs a token-mask store)
DEFAULT_MODES = tuple(m for m in MODES if m != "prefix")
CONSTRAINED = ("constrained", "constrained-nofinish", "paper")
#: each mode in full, for ``fimconstrain eval --help``
MODE_HELP = (
    "unconstrained: the model alone (greedy, no token healing); "
    "checked: unconstrained cut to its longest token prefix that parses, timed as one ast.parse per "
    "step (§VII-B); "
    "paper: §VII-B's constrained decoder exactly (top 50 candidates and no more, stuck when none "
    "passes, best-stop cut at the budget, no token healing, no split ending, no finish search); "
    "constrained: the project's decoder (top K, then the whole vocabulary; token healing; the "
    "middle may end inside the model's token; the end-of-middle policy's finish search at the "
    "budget); constrained-nofinish: the same without the finish search; "
    "prefix: constrained by the left context only (the suffix unseen by the constraint), candidates "
    "pre-masked by the token-mask store"
)
#: each constrained mode in a few words, for the report's table titles and Fig. 11's legend
MODE_NOTES = {
    "constrained": "project decoder, finish search on",
    "constrained-nofinish": "project decoder, finish search off",
    "paper": "paper 004 §VII-B decoder",
}
