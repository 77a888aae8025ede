"""FIM decoding with a Hugging Face causal LM: unconstrained, checked, or constrained by the FIM checker.

Constrained decoding walks the model's candidates best first (greedy) or in a
seeded Gumbel order (sampling: the first candidate that passes is an exact
draw from the distribution restricted to passing tokens) and takes the first
whose text keeps ``prefix + middle + suffix`` completable; a stop token passes
only when the program is complete.  The same check drives
:class:`FimLogitsProcessor` for ``model.generate()``.  This module imports
torch; the parser core does not.
"""

from __future__ import annotations

import inspect
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import TYPE_CHECKING, Any

import torch
from transformers import LogitsProcessor

from ..engine.checker import Checker, check_characters, fim_checker
from ..engine.versions import PythonVersion, VersionLike, parse_python_version
from . import command_line
from .end_of_middle import finish_middle, single_line_end
from .fim_formats import FimFormat, TextCodec, build_prompt, resolve_format
from .healing_index import HealingIndex
from .mask_store import mask_logits
from .models import context_window
from .oracle import ast_parses

if TYPE_CHECKING:
    from .semantic import SemanticGuide, SemanticOptions

#: "prefix": constrained by the left context only, candidates pre-masked by the token-mask store
MODES = command_line.MODES
_REPLACEMENT = "\ufffd"  # what a decoder writes for bytes that are not (yet) a whole UTF-8 character
_DECODE_WINDOW = 8  # tokens of context when decoding a candidate's text


def parses(program: str, python_version: PythonVersion | None = None) -> bool:
    """Whether ``program`` is valid Python at ``python_version``: the running Python's
    ``ast.parse`` when that is the version (the ground truth), else the engine's own verdict
    at that version (the only judge of another version's syntax in this process)."""
    if python_version is not None and python_version != sys.version_info[:2]:
        checker = fim_checker("", "", python_version=python_version).feed(program)
        return checker is not None and checker.is_complete()
    return ast_parses(program)


@dataclass
class FimResult:
    """A generated middle, whether the whole file is valid with it, and where the time went."""

    middle: str
    mode: str
    valid: bool  # ast.parse(prefix + middle + suffix) succeeds
    # "eos"; "split" (the model's token ran on into the suffix: cut where the middle ends);
    # "budget"; "best-stop" (budget hit: cut at the likeliest valid end, §VII-B); "finished"
    # (budget hit: the budget hook completed it); "stuck" (no candidate passed); "cancelled"
    stopped: str
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
        out.update(model_ms_per_token=self.model_ms_per_token, checker_ms_per_token=self.checker_ms_per_token)
        return out


class ConstraintState:
    """The FIM checker after the middle's tokens so far; which next tokens keep the file completable.

    Text is the tokenizer's own decoding; the checker is fed the difference that
    a candidate token makes to it.  The difference is taken over the last few
    tokens (decoding is local for byte-level BPE and SentencePiece), with the
    whole middle as the fallback.  A token that ends inside a UTF-8 character
    has that character held back (it decodes to U+FFFD for now) until it is
    whole, and passes only if some character it could become is acceptable
    next; bytes that can never be a character stay U+FFFD and are checked as such.
    """

    def __init__(
        self,
        checker: Checker,
        codec: TextCodec,
        ids: tuple[int, ...] = (),
        held: int = 0,
        healing: str = "",
        word_suffix: bool = False,
        ends_in_word: bool = False,
    ):
        self.checker = checker
        self.codec = codec
        self.ids = ids
        self.held = held  # trailing U+FFFD characters of the decoded middle that the checker has not seen
        #: text taken off the prompt's end (token healing) that the tokens must write again first;
        #: the checker, built after the whole prefix, sees only what comes after it
        self.healing = healing
        #: token healing at the right edge: when the suffix starts with a name character, a
        #: middle may not end in one (the two would fuse into a name nobody wrote)
        self.word_suffix = word_suffix
        self.ends_in_word = ends_in_word
        self._children: dict[int, ConstraintState | None] = {}
        #: the checker after each first character a candidate's text has had (see _feed)
        self._after_first: dict[str, Checker | None] = {}
        self._can_end: bool | None = None
        self._window_text: str | None = None

    def child(self, token: int) -> ConstraintState | None:
        """The state after ``token``, or None when no continuation can make a valid file (cached)."""
        if token not in self._children:
            self._children[token] = self._advance(token)
        return self._children[token]

    def _seen(self, ids: tuple[int, ...]) -> str:
        """The decoding of ``ids`` (a tail of the middle) without the held-back characters."""
        text = self.codec.decode(list(ids))
        return text[: len(text) - self.held] if self.held else text

    def added_text(self, token: int) -> str | None:
        """The text ``token`` adds to the middle (None if the decoder rewrote earlier text)."""
        return self._difference(token)

    def _difference(self, token: int) -> str | None:
        """Text that ``token`` adds to the middle (None if the decoder rewrote earlier text)."""
        window = self.ids[-_DECODE_WINDOW:]
        if self._window_text is None:
            self._window_text = self._seen(window)
        text = self.codec.decode(list(window) + [token])
        if text.startswith(self._window_text):
            return text[len(self._window_text) :]
        base, text = self._seen(self.ids), self.codec.decode(list(self.ids) + [token])
        return text[len(base) :] if text.startswith(base) else None

    def _advance(self, token: int) -> ConstraintState | None:
        new = self._difference(token)
        if new is None:
            return None
        ids = self.ids + (token,)
        if self.healing:
            healing = rest_of_healing(self.healing, new)
            if healing is None:
                return None
            if healing:
                return ConstraintState(self.checker, self.codec, ids, 0, healing, self.word_suffix)
            new = new[len(self.healing) :]
        unfinished = self.codec.unfinished_char(list(ids[-4:]))
        held = min(len(unfinished), len(new) - len(new.rstrip(_REPLACEMENT)))
        if held:
            new = new[:-held]
        nxt = self._feed(new) if new else self.checker
        if nxt is None or (held and not any(nxt.feed(ch) for ch in _completions(unfinished))):
            return None
        ends_in_word = _is_word_char(new[-1]) if new else self.ends_in_word
        return ConstraintState(nxt, self.codec, ids, held, "", self.word_suffix, ends_in_word)

    def _feed(self, text: str) -> Checker | None:
        """The checker after ``text``.  The candidates of one step that start with the same
        character share the checker after it: that character usually ends the symbol in
        progress (``foo`` then ``(``, ``.``, `` ``), and the parser's step for the ended symbol
        is the dear part of a candidate's check, the same for all of them."""
        first = text[0]
        if first in self._after_first:
            after = self._after_first[first]
        else:
            after = self._after_first[first] = self.checker.feed(first)
        if after is None or len(text) == 1:
            return after
        return after.feed(text[1:])

    def end_inside(self, token: int, suffix: str) -> str | None:
        """The start of ``token``'s text (maybe empty) that completes the file when the rest of
        the token is the suffix's own beginning, not only blanks: the model has written past
        the end of the middle and into the suffix. None if there is no such cut."""
        new = self._difference(token)
        if not new or self.held or self.healing or not suffix:
            return None
        for cut in range(len(new) - 1, -1, -1):
            rest = new[cut:]
            if rest.strip() and suffix.startswith(rest):
                if self.word_suffix and (_is_word_char(new[cut - 1]) if cut else self.ends_in_word):
                    continue  # the middle's last name would run into the suffix's first
                end = self.checker.feed(new[:cut]) if cut else self.final_checker()
                if end is not None and end.is_complete():
                    return new[:cut]
        return None

    def final_checker(self) -> Checker | None:
        """The checker with the held-back characters fed as U+FFFD, as they stay in the final text."""
        return self.checker.feed(_REPLACEMENT * self.held) if self.held else self.checker

    def can_end(self) -> bool:
        """Whether prefix + middle + suffix is a complete program now (cached)."""
        if self._can_end is None:
            fused = self.word_suffix and self.ends_in_word
            final = None if self.healing or fused else self.final_checker()
            self._can_end = final is not None and final.is_complete()
        return self._can_end


def _is_word_char(ch: str) -> bool:
    return ("a" + ch).isidentifier()


def rest_of_healing(healing: str, new: str) -> str | None:
    """What is left to write of the healed text ``healing`` after a token that writes ``new``:
    ``""`` once it is all written (``new`` may go on past it), None when ``new`` strays from it."""
    if healing.startswith(new):
        return healing[len(new) :]
    return "" if new.startswith(healing) else None


def healed_tail(codec: TextCodec, prefix: str, limit: int = 16) -> str:
    """Token healing (the left edge): the text of the prefix's last token when the cursor may
    split a token there (``retu|``, ``self.na|``, ``x =|``): the prompt ends before it, and the
    first generated tokens must write it again, so the model continues from a boundary it was
    trained on instead of one the cursor made. Empty when nothing should be healed (no token,
    a blank one, a line break)."""
    ids = codec.encode(prefix[-4 * limit :]) if prefix else []
    if not ids:
        return ""
    tail = codec.decode(ids[-1:])
    if not tail.strip() or len(tail) > limit or _REPLACEMENT in tail or not prefix.endswith(tail):
        return ""  # blanks end a token already: healing them would let the model re-indent
    return tail if "\n" not in tail else ""


@lru_cache(maxsize=4096)
def _completions(unfinished: bytes) -> tuple[str, ...]:
    """Characters whose UTF-8 starts with ``unfinished``: the first that can start a name,
    continue one, or be any.

    Python accepts a non-ASCII character only in a name (identifier characters) or
    in a string or comment (any character), so these three stand for all of them.
    """
    size = 2 if unfinished[0] < 0xE0 else 3 if unfinished[0] < 0xF0 else 4
    found: dict[str, str] = {}
    for rest in product(range(0x80, 0xC0), repeat=size - len(unfinished)):
        try:
            ch = (unfinished + bytes(rest)).decode("utf-8")
        except UnicodeDecodeError:
            continue
        found.setdefault("any", ch)
        if ch.isidentifier():
            found.setdefault("start", ch)
        if ("a" + ch).isidentifier():
            found.setdefault("continue", ch)
        if len(found) == 3:
            break
    return tuple(dict.fromkeys(found.values()))


def passing_candidates(
    state: ConstraintState, ranked: Iterable[int], stop_ids: set[int], banned_ids: set[int]
) -> Iterator[tuple[int, ConstraintState]]:
    """The tokens of ``ranked``, in order, that pass.

    A stop token passes when the file is complete; any other when it keeps the file completable.
    """
    for token in ranked:
        if token in stop_ids:
            if state.can_end():
                yield token, state
        elif token not in banned_ids:
            nxt = state.child(token)
            if nxt is not None:
                yield token, nxt


def ranked_tokens(keys: torch.Tensor, first: int, rest: bool = True) -> Iterator[int]:
    """Token ids by descending key: the top ``first`` from a partial sort, then (with ``rest``)
    the others from a full one; tokens whose key is -inf (masked out) never come."""
    finite = int(torch.isfinite(keys).sum())
    first = min(first, finite)
    yield from torch.topk(keys, first).indices.tolist()
    if rest and first < finite:
        yield from torch.argsort(keys, descending=True)[first:finite].tolist()


def ranking_keys(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> torch.Tensor:
    """Keys whose descending order is the walk order: logits (greedy) or perturbed by Gumbel noise (sampling).

    With ``top_p < 1`` the nucleus comes first, then the other tokens in their own Gumbel order.
    """
    logits = logits.double()
    if temperature <= 0:
        return logits
    scaled = torch.log_softmax(logits / temperature, dim=-1)
    uniform = torch.rand(scaled.shape, generator=generator, dtype=torch.float64).clamp_(1e-12, 1 - 1e-12)
    keys = scaled - torch.log(-torch.log(uniform))
    if top_p < 1.0:
        probs, order = torch.sort(scaled.exp(), descending=True)
        outside = torch.cumsum(probs, dim=-1) - probs >= top_p
        spread = float(keys[torch.isfinite(keys)].max() - keys[torch.isfinite(keys)].min()) + 1.0
        keys[order[outside]] -= spread
    return keys


def _cache_argument(model) -> str:
    """The name ``model.forward`` takes its key/value cache by: ``cache`` in transformers 5
    (where ``past_key_values`` warns, and goes in 5.40), ``past_key_values`` before.  A wrapper
    whose forward passes ``**kwargs`` on is taken to wrap a model of the installed transformers."""
    parameters = inspect.signature(model.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in parameters:
            return name
    import transformers

    return "cache" if int(transformers.__version__.split(".")[0]) >= 5 else "past_key_values"


class _CachedStepper:
    """One forward pass per generated token, reusing the key/value cache of everything before it."""

    def __init__(self, model):
        self.model = model
        self.past = None
        self.seconds = 0.0
        self._cache_name = _cache_argument(model)

    @torch.inference_mode()
    def logits(self, ids: list[int]) -> torch.Tensor:
        """Next-token logits after feeding ``ids`` (the prompt first, then one token at a time)."""
        start = time.perf_counter()
        inputs = torch.tensor([ids], dtype=torch.long, device=self.model.device)
        out = self.model(input_ids=inputs, use_cache=True, **{self._cache_name: self.past})
        self.past = getattr(out, self._cache_name)
        logits = out.logits[0, -1].float().cpu()
        self.seconds += time.perf_counter() - start
        return logits

    def prefill(self, ids: list[int], should_stop: Callable[[], bool] | None = None) -> torch.Tensor | None:
        """The prompt's next-token logits. With ``should_stop`` the prompt is fed
        :data:`PREFILL_CHUNK` tokens at a time (the key/value cache joins the pieces into one
        pass) and asked between them, so that a server can hand its worker over mid-prompt;
        None when it said stop."""
        if should_stop is None:
            return self.logits(ids)
        logits = None
        for start in range(0, len(ids), PREFILL_CHUNK):
            if start and should_stop():
                return None
            logits = self.logits(ids[start : start + PREFILL_CHUNK])
        return logits


#: prompt tokens per forward pass when the prompt is read in pieces (:meth:`_CachedStepper.prefill`)
PREFILL_CHUNK = 128
#: seconds the finish (:func:`.end_of_middle.finish_middle`) may search in all, over its cuts
FINISH_SECONDS = 5.0


@dataclass
class FimDecoder:
    """Fills the middle between a prefix and a suffix with ``model``, in any of :data:`MODES`.

    ``python_version`` (``"3.12"`` or ``(3, 12)``; default: the newest) is the Python whose
    syntax the constraint accepts; :meth:`generate` can override it per call.
    """

    #: a causal LM: a transformers ``PreTrainedModel`` or anything with its call and ``config``
    model: Any
    tokenizer: object
    fim_format: FimFormat | None = None
    order: str = "psm"
    window: int | None = None
    python_version: VersionLike | None = None
    codec: TextCodec = field(init=False)
    stop_ids: set[int] = field(init=False)
    banned_ids: set[int] = field(init=False)
    _mask_stores: dict = field(init=False, default_factory=dict, repr=False)
    _healing_indexes: dict[int, HealingIndex] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self):
        self.python_version = parse_python_version(self.python_version)
        self.fim_format = self.fim_format or resolve_format(self.tokenizer)
        self.codec = TextCodec(self.tokenizer)
        self.window = self.window or context_window(self.model, self.tokenizer)
        self.stop_ids = self.fim_format.stop_ids(self.tokenizer)
        self.banned_ids = special_token_ids(self.tokenizer) - self.stop_ids

    def mask_store(self, python_version: VersionLike | None = None):
        """The token-mask store for this tokenizer and a Python version (default: the decoder's),
        built once per version and cached on disk."""
        version = self.version_for(python_version)
        store = self._mask_stores.get(version)
        if store is None:
            from .mask_store import MaskStore

            store = self._mask_stores[version] = MaskStore.load_or_build(
                self.tokenizer,
                progress=False,
                vocab_size=self.model.config.vocab_size,
                python_version=version,
            )
        return store

    def healing_index(self, vocab_size: int) -> HealingIndex:
        """The tokens that may write a healed text, over ``vocab_size`` logits (built once)."""
        index = self._healing_indexes.get(vocab_size)
        if index is None:
            index = self._healing_indexes[vocab_size] = HealingIndex(self.codec, vocab_size)
        return index

    def version_for(self, python_version: VersionLike | None = None) -> PythonVersion:
        """``python_version`` checked, or the decoder's own when None."""
        if python_version is None:
            assert isinstance(self.python_version, tuple)  # parsed in __post_init__
            return self.python_version
        return parse_python_version(python_version)

    def ends(self, token: int) -> bool:
        """Whether ``token`` ends the middle: a stop token, or (unconstrained) any other FIM marker."""
        return token in self.stop_ids or token in self.banned_ids

    def generate(
        self,
        prefix: str,
        suffix: str,
        mode: str = "constrained",
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 64,
        seed: int | None = None,
        finish_in_budget: bool = True,
        best_stop: bool = True,
        prefilter: bool = False,
        should_stop: Callable[[], bool] | None = None,
        progress: bool = False,
        python_version: VersionLike | None = None,
        single_line: bool = False,
        drop_repeats: bool = False,
        finish_seconds: float = FINISH_SECONDS,
        on_token: Callable[[int], None] | None = None,
        heal: bool = True,
        finish_search: bool = True,
        interrupt_setup: Callable[[], bool] | None = None,
        vocabulary_fallback: bool = True,
        split_ending: bool = True,
        semantic: bool | SemanticOptions = command_line.SEMANTIC_DEFAULT,
    ) -> FimResult:
        """The middle for ``prefix``/``suffix``; ``top_k`` candidates are checked before a full scan.

        In constrained mode, when the budget runs out (or no candidate passes) on an incomplete
        middle, it is cut at the point where the file was complete with the highest EOS
        probability weighted by length (``best_stop``, paper 004 §VII-B). Then, with
        ``finish_in_budget``, the middle ends by the one end-of-middle policy,
        :func:`.end_of_middle.finish_middle` (cut to one line with ``single_line``, completed
        by the checker's shortest finish, a tail repeating the suffix dropped with
        ``drop_repeats``, within ``finish_seconds``); when it finds nothing, the middle is cut
        back to its longest valid prefix. With ``single_line`` decoding stops once a line of
        code has ended. ``should_stop`` is polled once per step, and between pieces of the
        prompt (:meth:`_CachedStepper.prefill`); when it returns True generation stops at once;
        ``on_token`` sees each token chosen.
        ``prefilter`` masks every step's logits with the token-mask store first (always in
        prefix mode): the mask is sound, so the exact check then confirms fewer candidates and
        the same tokens are chosen. ``python_version``: the syntax the constraint accepts, for
        this call (default: the decoder's ``python_version``). With ``heal`` the prompt ends
        before the prefix's last token and the first tokens must write it again
        (:func:`healed_tail`); the middle returned is what comes after it. Without
        ``finish_search`` the end-of-middle policy only cuts (the editor: an item only the
        finish search made valid is not shown). ``interrupt_setup`` is passed to
        :func:`~fimconstrain.engine.checker.fim_checker` as ``should_stop`` (reading a long
        prefix can be put aside: :class:`~fimconstrain.engine.errors.Interrupted`).
        Without ``vocabulary_fallback`` only the top ``top_k`` candidates are checked and the
        middle stops ("stuck") when none passes; without ``split_ending`` the model's token never
        ends the middle inside itself ("split"). Both off, with ``top_k=50``, no healing and no
        finish, is paper 004 §VII-B's decoder. With ``semantic`` (True or
        :class:`.semantic.SemanticOptions`) the constrained modes also ask completion engines
        which names exist (paper 003): a candidate naming nothing known is excluded where they
        are sure and demoted elsewhere, never blocking (:mod:`.semantic`).
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        check_characters(prefix, suffix)  # in every mode, before a tokenizer sees them
        version = self.version_for(python_version)
        assert self.window is not None and self.fim_format is not None  # set in __post_init__
        max_new_tokens = max(1, min(max_new_tokens, self.window // 2))
        healing = healed_tail(self.codec, prefix) if heal else ""
        prompt = build_prompt(
            self.fim_format,
            self.codec,
            prefix[: len(prefix) - len(healing)],
            suffix,
            self.window - max_new_tokens,
            self.order,
        )
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        run = _Run(self, prefix, suffix, mode, len(prompt), version, healing)
        run.vocabulary_fallback, run.split_ending = vocabulary_fallback, split_ending
        if mode in ("constrained", "prefix"):
            run.start_constraint(suffix if mode == "constrained" else "", version, interrupt_setup)
            if semantic:
                run.start_semantic(semantic)
        store = (
            self.mask_store(version) if mode == "prefix" or (prefilter and mode == "constrained") else None
        )
        stepper = _CachedStepper(self.model)
        logits = stepper.prefill(prompt, should_stop)
        run.result.prefill_seconds, stepper.seconds = stepper.seconds, 0.0
        bar = _progress(max_new_tokens, progress)
        for step in range(max_new_tokens):
            if logits is None or (should_stop is not None and should_stop()):
                run.result.stopped = "cancelled"
                break
            run.result.steps = step + 1
            keys = ranking_keys(logits, temperature, top_p, generator)
            started = time.perf_counter()
            if best_stop and run.state is not None:
                run.note_stop_point(logits)
            if store is not None and run.state is not None and not run.state.healing:
                # (while healing the tokens write prefix text again: the store knows no such state)
                keys = mask_logits(keys, store.allowed(run.state.checker, run.state.held), self.stop_ids)
            run.result.checker_seconds += time.perf_counter() - started
            token = run.choose(keys, top_k)
            if token is None or self.ends(token):
                break
            run.logprobs.append(float(torch.log_softmax(logits.float(), dim=-1)[token]))
            if on_token is not None:
                on_token(token)
            bar.update(1)
            if single_line and single_line_end(self.codec.decode(run.ids[-48:])) is not None:
                run.result.stopped = "line"
                break
            if step + 1 < max_new_tokens:
                logits = stepper.logits([token])
        else:
            run.result.stopped = "budget"
        run.result.generated = len(run.ids)
        if run.state is not None:
            if run.result.stopped in ("budget", "stuck") and best_stop and not run.state.can_end():
                run.cut_at_best_stop()
            cut_short = run.result.stopped in ("budget", "stuck", "cancelled", "line")
            if finish_in_budget and (cut_short or drop_repeats):
                run.finish(single_line, drop_repeats, finish_seconds, finish_search)
        bar.close()
        run.result.model_seconds = stepper.seconds
        return run.close()


class _Run:
    """The mutable state of one generation: tokens chosen, constraint state, timings."""

    def __init__(
        self,
        decoder: FimDecoder,
        prefix: str,
        suffix: str,
        mode: str,
        prompt_tokens: int,
        version: PythonVersion,
        healing: str = "",
    ):
        self.decoder = decoder
        self.healing = healing  # the prefix's end, taken off the prompt, that the tokens write again
        self.version = version
        self.prefix, self.suffix, self.mode = prefix, suffix, mode
        self.ids: list[int] = []
        self.state: ConstraintState | None = None
        self.extra = ""  # the end of a token that runs into the suffix (see split_end)
        self.ended_as: str | None = None  # the middle as the end-of-middle policy ended it
        self.cut_to_valid = False  # no finish found: fall back to the longest valid prefix
        self.states: list[ConstraintState] = []
        self.logprobs: list[float] = []  # the model's log-probability of each token in ``ids``
        self.stop_points: list[
            tuple[float, int, ConstraintState]
        ] = []  # (weighted EOS probability, tokens, state)
        self.result = FimResult("", mode, False, "eos", 0, prompt_tokens)
        self.semantic: SemanticGuide | None = None
        self.vocabulary_fallback = True  # scan past the top k when none of them passes
        self.split_ending = True  # the middle may end inside the model's token (see split_end)

    def start_semantic(self, options: bool | SemanticOptions) -> None:
        """Start the names guide (:mod:`.semantic`) for this middle (its setup is setup time)."""
        from .semantic import SemanticGuide, SemanticOptions

        start = time.perf_counter()
        dec = self.decoder
        chosen = options if isinstance(options, SemanticOptions) else SemanticOptions()
        self.semantic = SemanticGuide.start(self.prefix, self.suffix, dec.stop_ids, dec.banned_ids, chosen)
        self.result.semantic = self.semantic.stats
        self.result.setup_seconds += time.perf_counter() - start

    def start_constraint(
        self,
        suffix: str,
        python_version: PythonVersion | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """Build the checker (the one-time cost): for the whole file, or the prefix only."""
        start = time.perf_counter()
        version = self.decoder.version_for(python_version)
        checker = fim_checker(self.prefix, suffix, python_version=version, should_stop=should_stop)
        word_suffix = bool(suffix) and _is_word_char(suffix[0])
        self.state = ConstraintState(
            checker, self.decoder.codec, healing=self.healing, word_suffix=word_suffix
        )
        self.states = [self.state]  # the state after each token of the middle
        self.result.setup_seconds = time.perf_counter() - start

    def note_stop_point(self, logits: torch.Tensor) -> None:
        """Remember this point as a place to stop, scored by the probability of a stop token
        here times the middle's length in tokens (checked only if it is needed, at the end)."""
        assert self.state is not None  # called only under a constraint
        if self.ids:
            stop = list(self.decoder.stop_ids)
            p_stop = float(torch.softmax(logits.float(), dim=-1)[stop].sum())
            self.stop_points.append((p_stop * len(self.ids), len(self.ids), self.state))

    def cut_at_best_stop(self, seconds: float = 1.0) -> bool:
        """Cut the middle at the best-scored stop point where the file is complete (§VII-B)."""
        start = time.perf_counter()
        found = False
        for _, n, state in sorted(self.stop_points, key=lambda point: -point[0]):
            if time.perf_counter() - start > seconds:
                break
            if state.can_end():
                del self.ids[n:], self.logprobs[n:]
                self.state, self.result.stopped, found = state, "best-stop", True
                break
        self._ending(start)
        return found

    def choose(self, keys: torch.Tensor, top_k: int) -> int | None:
        """The next token (recorded unless it ends the middle; a stop token when the middle
        ends inside the model's favourite token), or None when no candidate passes."""
        dec = self.decoder
        if self.state is None:
            token = self.unconstrained_choice(keys, top_k)
            if token is not None and not dec.ends(token):
                self.ids.append(token)
            return token
        start = time.perf_counter()
        choice = None
        if (
            self.mode == "constrained"
            and self.split_ending
            and (split := self.split_end(int(torch.argmax(keys)))) is not None
        ):
            self.extra, self.result.stopped = split, "split"
            self.result.checker_seconds += time.perf_counter() - start
            return next(iter(dec.stop_ids))
        if self.state.healing and self.vocabulary_fallback:
            # only tokens that can write the healed text come into the walk: the same first
            # passing token as the walk over the whole vocabulary, without checking the others
            # (the names guide's look-ahead, 64 ranked tokens, now counts only such tokens)
            healable = dec.healing_index(keys.shape[-1]).mask(self.state.healing)
            keys = keys.masked_fill(~healable, float("-inf"))
        ranked = _counting(ranked_tokens(keys, top_k, self.vocabulary_fallback), self)
        for token, nxt in (
            passing_candidates(self.state, ranked, dec.stop_ids, dec.banned_ids)
            if self.semantic is None
            else self.semantic.choose(self.state, ranked, keys)
        ):
            choice = token
            if token not in dec.stop_ids:
                self.ids.append(token)
                self.state = nxt
                self.states.append(nxt)
            break
        self.result.checker_seconds += time.perf_counter() - start
        if choice is None:
            self.result.stopped = "stuck"
        return choice

    def unconstrained_choice(self, keys: torch.Tensor, top_k: int) -> int | None:
        """The model's favourite token; while the healed text is not yet written again, the
        favourite of those that write it (the only constraint in the unconstrained modes)."""
        written = self.decoder.codec.decode(self.ids)
        if len(written) >= len(self.healing):
            return int(torch.argmax(keys))
        pending = self.healing[len(written) :]
        for token in ranked_tokens(keys, top_k):
            if self.decoder.ends(token):
                continue
            text = self.decoder.codec.decode([*self.ids, token])[len(written) :]
            if rest_of_healing(pending, text) is not None:
                return token
        return None

    def middle_text(self, ids: list[int]) -> str:
        """The middle the tokens ``ids`` write (after the healed text)."""
        return middle_of(self.decoder.codec, ids, self.healing)

    def split_end(self, token: int) -> str | None:
        """When the model's favourite token writes on into the suffix (``'a')`` before a
        suffix that begins with ``)``), the part of it that ends the middle, if that is valid."""
        dec = self.decoder
        if token in dec.stop_ids or token in dec.banned_ids:
            return None
        assert self.state is not None  # called only under a constraint
        return self.state.end_inside(token, self.suffix)

    def finish(self, single_line: bool, drop_repeats: bool, seconds: float, search: bool = True) -> None:
        """End the middle by the one end-of-middle policy (:mod:`.end_of_middle`): kept when the
        file is complete with it, else cut and completed; with nothing found, the middle is cut
        back to its longest valid prefix (in :meth:`close`)."""
        start = time.perf_counter()
        middle = self.middle_text(self.ids) + self.extra
        ended = finish_middle(
            self.states[0].checker,
            middle,
            single_line,
            self.suffix if self.mode == "constrained" else "",
            seconds=seconds,
            drop_repeats=drop_repeats,
            finish=search,
        )
        if ended is None:
            self.cut_to_valid = True
        elif ended != middle:
            self.ended_as = ended
            if self.result.stopped not in ("line", "cancelled"):
                self.result.stopped = "finished"
        self._ending(start)

    def _ending(self, start: float) -> None:
        """Count the time since ``start`` as constraint work done once, at the end."""
        elapsed = time.perf_counter() - start
        self.result.checker_seconds += elapsed
        self.result.ending_seconds += elapsed

    def close(self) -> FimResult:
        """Fill in the middle text and its validity (checked mode: cut to the longest valid prefix)."""
        res = self.result
        res.tokens = len(self.ids)
        res.healed = self.healing
        res.logprobs = self.logprobs[: len(self.ids)]
        res.token_ids = list(self.ids)
        res.middle = self.middle_text(self.ids) + self.extra if self.ended_as is None else self.ended_as
        if self.mode == "checked" or self.cut_to_valid:
            start = time.perf_counter()
            res.raw_middle = res.middle
            valid = self.valid if self.mode == "constrained" else None
            res.middle = longest_valid_prefix(
                self.prefix, self.decoder.codec, self.ids, self.suffix, self.version, self.healing, valid
            )
            self._ending(start)
        res.valid = (
            self.valid(res.middle)
            if self.mode == "constrained" and self.version != sys.version_info[:2]
            else parses(self.prefix + res.middle + self.suffix, self.version)
        )
        return res

    def valid(self, middle: str) -> bool:
        """Whether ``prefix + middle + suffix`` is valid at this run's version, read on from the
        checker after the prefix (constrained mode: built with the whole suffix): the engine's
        verdict, as :func:`parses` gives it for another version than the running one, without
        reading the prefix and the suffix again for each middle."""
        after = self.states[0].checker.feed(middle)
        return after is not None and after.is_complete()


def _counting(tokens: Iterator[int], run: _Run) -> Iterator[int]:
    """Pass ``tokens`` through, counting them as checked candidates."""
    for token in tokens:
        run.result.candidates_checked += 1
        yield token


def longest_valid_prefix(
    prefix: str,
    codec: TextCodec,
    ids: list[int],
    suffix: str,
    python_version: PythonVersion | None = None,
    healed: str = "",
    valid: Callable[[str], bool] | None = None,
) -> str:
    """The longest token-boundary prefix of the middle that makes the file parse (paper 004
    §VII-B), else all of it; ``healed``: the prefix's end the tokens write first (not middle).
    A middle ending in a name character never counts before a suffix that starts with one.
    ``valid`` judges a middle in place of :func:`parses` over the whole file (a checker that
    has read the prefix answers without reading it again)."""
    fuses = bool(suffix) and _is_word_char(suffix[0])
    for n in range(len(ids), -1, -1):
        middle = middle_of(codec, ids[:n], healed)
        if fuses and middle and _is_word_char(middle[-1]):
            continue
        if valid(middle) if valid is not None else parses(prefix + middle + suffix, python_version):
            return middle
    return middle_of(codec, ids, healed)


def middle_of(codec: TextCodec, ids: list[int], healed: str = "") -> str:
    """The middle that tokens ``ids`` write: their text after the ``healed`` end of the prefix
    they write again first ("" until they have written all of it)."""
    text = codec.decode(ids)
    return text[len(healed) :] if text.startswith(healed) else ""


def special_token_ids(tokenizer) -> set[int]:
    """Ids of every special or added token (FIM markers, padding...): never part of a middle's text."""
    ids = set(tokenizer.all_special_ids)
    ids.update(getattr(tokenizer, "added_tokens_decoder", {}).keys())
    return ids


def _progress(total: int, enabled: bool):
    """A tqdm bar over generated tokens on a terminal (a no-op when disabled or not a terminal)."""
    from tqdm import tqdm

    return tqdm(total=total, unit="tok", desc="generating", disable=None if enabled else True, leave=False)


class FimLogitsProcessor(LogitsProcessor):
    """For ``model.generate()``: keep only the first ``k`` tokens (by score) that pass the FIM constraint.

    Every row of the batch fills the same prefix/suffix; ``prompt_length`` is the
    (padded) prompt width, so the row's middle is ``input_ids[row, prompt_length:]``.
    When no token passes, only the stop tokens stay allowed so generation ends. No token
    healing here: the caller's prompt is taken as it is.
    ``python_version``: the syntax the constraint accepts (default: the newest).
    """

    def __init__(
        self,
        tokenizer,
        prefix: str,
        suffix: str,
        prompt_length: int,
        k: int = 1,
        fim_format: FimFormat | None = None,
        python_version: VersionLike | None = None,
    ):
        fmt = fim_format or resolve_format(tokenizer)
        self.codec = TextCodec(tokenizer)
        self.stop_ids = fmt.stop_ids(tokenizer)
        self.banned_ids = special_token_ids(tokenizer) - self.stop_ids
        self.prompt_length = prompt_length
        self.k = k
        self.root = ConstraintState(fim_checker(prefix, suffix, python_version=python_version), self.codec)
        self.seconds = 0.0

    def state_for(self, middle: list[int]) -> ConstraintState | None:
        """The constraint state after ``middle`` (children are cached, so each step costs one
        feed per row)."""
        state = self.root
        for token in middle:
            if token in self.stop_ids:
                return state
            child = state.child(token)
            if child is None:
                return None
            state = child
        return state

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        start = time.perf_counter()
        masked = torch.full_like(scores, float("-inf"))
        for row in range(scores.shape[0]):
            state = self.state_for(input_ids[row, self.prompt_length :].tolist())
            allowed = (
                []
                if state is None
                else [
                    token
                    for token, _ in _take(
                        passing_candidates(
                            state, ranked_tokens(scores[row], self.k), self.stop_ids, self.banned_ids
                        ),
                        self.k,
                    )
                ]
            )
            allowed = allowed or sorted(self.stop_ids)
            masked[row, allowed] = scores[row, allowed]
        self.seconds += time.perf_counter() - start
        # torch's stubs type full_like as Tensor; transformers' LogitsProcessor says FloatTensor
        return masked  # type: ignore[return-value]


def _take(items: Iterator, n: int) -> list:
    """The first ``n`` items of an iterator."""
    out = []
    for item in items:
        out.append(item)
        if len(out) == n:
            break
    return out
