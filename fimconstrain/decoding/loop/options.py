"""Every knob of one generation as one frozen value, with the presets its callers use.

:class:`DecodeOptions` is what :meth:`.generate.FimDecoder.generate` takes: the editor, the
command line and the evaluation each start from a named preset and change what their user
set, instead of copying two dozen keyword arguments. :class:`Controls` are not options but
the caller's hands on a run in progress (stop it, watch its tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ...engine.versions import PythonVersion, VersionLike, parse_python_version

if TYPE_CHECKING:
    from .semantic import SemanticOptions

#: the decoding modes; "prefix": constrained by the left context only, candidates pre-masked by
#: the token-mask store
MODES = ("unconstrained", "checked", "constrained", "prefix")
#: whether names guide decoding unless told (:mod:`.semantic`; the API, ``complete`` and the
#: server's ``semantic`` setting): on, from ``benchmarks/semantic_quality.py`` (docs/semantic.md,
#: "Measured": more middles that parse and resolve, no true middle excluded, ~1% latency)
SEMANTIC_DEFAULT = True
#: seconds the finish (:func:`.end_of_middle.finish_middle`) may search in all, over its cuts
FINISH_SECONDS = 5.0
#: seconds an editor's middle may search for a finish (a person waits for it)
EDITOR_FINISH_SECONDS = 0.15
#: tokens of prompt and middle an editor's request reads (a longer file is cut around the cursor;
#: the constraint still sees all of it): on a 2-core CPU each prompt token costs milliseconds
#: (docs/lsp.md, "Prompt window and typing")
EDITOR_WINDOW = 1024
#: the suffix's share of that window at most (PSM order: a keystroke reads the suffix again; on 2
#: cores with Qwen2.5-Coder-0.5B 24 tokens against 64 halved a keystroke's time, docs/lsp.md)
EDITOR_SUFFIX_TOKENS = 32
#: the paper's candidate count (paper 004 §VII-B: "up to the top 50 token candidates")
PAPER_TOP_K = 50


@dataclass(frozen=True)
class DecodeOptions:
    """How to fill one middle (see :meth:`.generate.FimDecoder.generate` for what each does).

    ``python_version`` is parsed here, once, and trusted afterwards (None: the decoder's own).
    """

    mode: str = "constrained"
    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 64
    seed: int | None = None
    python_version: PythonVersion | None = None
    #: budget hit or stuck: end the middle by the end-of-middle policy (:mod:`.end_of_middle`)
    finish_in_budget: bool = True
    #: budget hit or stuck: cut at the likeliest point where the file was valid (§VII-B)
    best_stop: bool = True
    #: mask each step with the token-mask store before the exact check (always in prefix mode)
    prefilter: bool = False
    #: stop once a line of code has ended, and end the middle there
    single_line: bool = False
    #: constrained: stop once a line leaves the block the middle began (indented less than its
    #: first line) where the file is complete, and end the middle before that line
    end_of_block: bool = False
    #: constrained one-line middles that are a whole line: times the middle may go back to an
    #: earlier token when its line ends where the file does not parse (:mod:`.run`, best first)
    line_retries: int = 4
    #: the end-of-middle policy drops a tail that repeats the suffix
    drop_repeats: bool = False
    finish_seconds: float = FINISH_SECONDS
    #: token healing: the prompt ends before the prefix's last token, which the middle writes again
    heal: bool = True
    #: the end-of-middle policy may complete a cut middle (off: it only cuts)
    finish_search: bool = True
    #: scan past the top ``top_k`` when none of them passes (off: stop "stuck")
    vocabulary_fallback: bool = True
    #: the middle may end inside the model's token when that token runs on into the suffix
    split_ending: bool = True
    #: names guide the choice among valid tokens (True, or :class:`.semantic.SemanticOptions`)
    semantic: bool | SemanticOptions = SEMANTIC_DEFAULT

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.python_version is not None:
            version: VersionLike = self.python_version
            object.__setattr__(self, "python_version", parse_python_version(version))

    @classmethod
    def editor(
        cls,
        single_line: bool,
        max_new_tokens: int = 64,
        top_k: int = 64,
        finish_search: bool = False,
        semantic: bool = SEMANTIC_DEFAULT,
        python_version: VersionLike | None = None,
    ) -> DecodeOptions:
        """What an editor shows: constrained, stopped at the end of the line a one-line cursor
        asks for or of the block another asks for, no tail that repeats the suffix, a short
        finish search (off by default: an item only the search made valid is not shown)."""
        return cls(
            mode="constrained",
            max_new_tokens=max_new_tokens,
            top_k=top_k,
            single_line=single_line,
            end_of_block=not single_line,
            drop_repeats=True,
            finish_seconds=EDITOR_FINISH_SECONDS,
            finish_search=finish_search,
            semantic=semantic,
            python_version=parse_python_version(python_version) if python_version is not None else None,
        )

    @classmethod
    def evaluation(cls, name: str, **changes) -> DecodeOptions:
        """The preset of an evaluation mode (:data:`EVALUATION_PRESETS`) with the run's common
        ``changes`` (budget, sampling, seed); a field the mode fixes (the paper's top 50) stays."""
        try:
            preset = EVALUATION_PRESETS[name]
        except KeyError:
            raise ValueError(
                f"evaluation mode must be one of {', '.join(EVALUATION_PRESETS)}, not {name!r}"
            ) from None
        fixed = _FIXED_BY_MODE.get(name, ())
        return replace(preset, **{key: value for key, value in changes.items() if key not in fixed})


#: the evaluation's modes and what each decodes with (checked and truncated are derived from the
#: unconstrained run). The baselines take the prefix as written (no token healing), as the paper's do;
#: "paper" is paper 004 §VII-B's decoder: the top 50 only, no split ending, no healing, no finish.
EVALUATION_PRESETS: dict[str, DecodeOptions] = {
    "unconstrained": DecodeOptions(mode="unconstrained", heal=False),
    "checked": DecodeOptions(mode="unconstrained", heal=False),
    "truncated": DecodeOptions(mode="unconstrained", heal=False),
    "constrained": DecodeOptions(mode="constrained", finish_in_budget=True),
    "constrained-nofinish": DecodeOptions(mode="constrained", finish_in_budget=False),
    "paper": DecodeOptions(
        mode="constrained",
        finish_in_budget=False,
        vocabulary_fallback=False,
        split_ending=False,
        heal=False,
        top_k=PAPER_TOP_K,
    ),
    "prefix": DecodeOptions(mode="prefix"),
}
#: fields an evaluation mode fixes whatever the run's common settings say
_FIXED_BY_MODE = {"paper": ("top_k",)}


@dataclass(frozen=True)
class Controls:
    """The caller's hands on a generation in progress.

    ``should_stop`` is polled once per step and between pieces of the prompt; True stops at
    once ("cancelled"). ``interrupt_setup`` is :func:`~fimconstrain.engine.checker.fim_checker`'s
    ``should_stop`` while the file is read (:class:`~fimconstrain.engine.errors.Interrupted`).
    ``on_token`` sees each token chosen, and ``on_middle`` the middle written so far after it (the
    language server's: a newer request whose typed text the middle spells lets it run on);
    ``progress`` shows a bar on a terminal.
    """

    should_stop: Callable[[], bool] | None = None
    on_token: Callable[[int], None] | None = None
    on_middle: Callable[[str], None] | None = None
    interrupt_setup: Callable[[], bool] | None = None
    progress: bool = False
