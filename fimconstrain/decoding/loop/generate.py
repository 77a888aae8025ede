"""The decode loop: fill a middle with any model backend, unconstrained, checked, or constrained.

Constrained decoding walks the model's candidates best first (greedy) or in a seeded Gumbel
order (sampling: the first candidate that passes is an exact draw from the distribution
restricted to passing tokens) and takes the first whose text keeps ``prefix + middle + suffix``
completable; a stop token passes only when the program is complete (paper 004 §VII). The model
is reached only through :mod:`..runtimes.backend` (prefill, step, logits as numpy arrays), so transformers,
a bigram model or a model server run the same loop.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

import numpy as np

from ...engine.checker import check_characters, prepare
from ...engine.versions import PythonVersion, VersionLike, format_version, parse_python_version
from ..masks.cache import SavedStore
from ..masks.store import MaskStore
from ..runtimes.backend import GenerationRequest, ModelBackend
from ..tokens.fim_formats import FimFormat, PromptCut, TextCodec, build_prompt
from .constraint import healed_tail
from .decode_vocabulary import DecodeVocabulary
from .options import Controls, DecodeOptions
from .ranking import log_normaliser, ranking_keys
from .result import FimResult, StopReason
from .run import Run

log = logging.getLogger(__name__)


class FimDecoder:
    """Fills the middle between a prefix and a suffix with a model backend, in any mode.

    ``order``: the prompt's order, ``"psm"`` or ``"spm"`` (default: the format's,
    :attr:`..tokens.fim_formats.FimFormat.order`); ``window``: tokens of prompt and
    middle together (at most, and by default, the model's); ``cut``: how a prompt longer than that is cut (an
    editor's: a short suffix and a prefix cut that typing keeps, :class:`..tokens.fim_formats.PromptCut`;
    default: halves); ``python_version`` (``"3.12"`` or ``(3, 12)``;
    default: the newest): the syntax the constraint accepts unless a call's options say.
    With ``prepare`` (default), a background thread loads (or builds) the vocabulary's tables
    from the moment the decoder exists, so that a first request finds them ready.
    """

    def __init__(
        self,
        backend: ModelBackend,
        order: str | None = None,
        window: int | None = None,
        python_version: VersionLike | None = None,
        prepare: bool = True,
        cut: PromptCut | None = None,
    ):
        self.backend = backend
        self.order = order or backend.fim_format.order
        self.window = min(window, backend.context_window) if window else backend.context_window
        self.cut = cut
        self.python_version: PythonVersion = parse_python_version(python_version)
        self.vocabulary = DecodeVocabulary(backend)
        self._mask_stores: dict[PythonVersion, MaskStore] = {}
        self._store_lock = threading.Lock()
        self._saved_stores: dict[PythonVersion, SavedStore] = {}
        #: set when the background has read the mask store it reads (see :meth:`_prepare`)
        self._stores_read = threading.Event()
        #: the thread that prepares the vocabulary's tables at load (:meth:`_prepare`), or None
        self.preparing: threading.Thread | None = None
        if prepare:
            self.preparing = threading.Thread(
                target=self._prepare, name="fimconstrain-vocabulary", daemon=True
            )
            self.preparing.start()
        else:
            self._stores_read.set()

    @classmethod
    def from_model(cls, model, tokenizer, fim_format: FimFormat | None = None, **options) -> FimDecoder:
        """A decoder for a transformers causal LM (anything with its call and ``config``)."""
        from ..runtimes.transformers_backend import TransformersBackend

        return cls(TransformersBackend(model, tokenizer, fim_format), **options)

    @property
    def fim_format(self) -> FimFormat:
        return self.backend.fim_format

    @property
    def tokenizer(self):
        return self.backend.tokenizer

    @property
    def codec(self) -> TextCodec:
        return self.vocabulary.codec

    def mask_store(self, python_version: VersionLike | None = None) -> MaskStore:
        """The token-mask store for this tokenizer and a Python version (default: the decoder's),
        built once per version and cached on disk."""
        version = self.version_for(python_version)
        store = self._mask_stores.get(version)
        if store is None:
            with self._store_lock:
                store = self._mask_stores.get(version)
                if store is None:
                    self._stores_read.wait()  # (the background reads one store file: milliseconds)
                    saved = self._saved_stores.pop(version, None)
                    try:
                        store = MaskStore.attach(saved) if saved is not None else None
                    except ValueError as error:  # (made for another grammar: built again)
                        log.info("%s", error)
                    if store is None:
                        store = MaskStore.load_or_build(
                            self.vocabulary.token_bytes(), progress=False, python_version=version
                        )
                    self._mask_stores[version] = store
        return store

    def _prepare(self) -> None:
        """At load, in the background, what a first request needs: the arrays of the mask store
        of the Python version last used with this vocabulary (read from the cache; a store not
        on disk is built when a request needs it: its version is not known before, and it is
        seconds of the same cores), then the healing index and the codec's tables (loaded, or
        built and cached), then the engine's finish-search tables for the decoder's Python
        version (:func:`fimconstrain.engine.prepare`). A failure here is left for the request to meet."""
        try:
            saved = MaskStore.last_used(self.vocabulary.token_bytes())
            if saved is not None:
                self._saved_stores[parse_python_version(saved.meta["python_version"])] = saved
        except Exception as error:
            log.debug("no mask store read at load: %s", error)
        finally:
            self._stores_read.set()
        try:
            self.vocabulary.prepare()
        except Exception as error:
            log.debug("vocabulary tables not prepared at load: %s", error)
        try:
            prepare("python", self.python_version)
        except Exception as error:
            log.debug("finish search not prepared at load: %s", error)

    def adjusted(self, options: DecodeOptions) -> DecodeOptions:
        """The options a generation runs under: ``options`` (a decoder whose model cannot follow
        some of them, a server's, says what it does instead)."""
        return options

    def mode_note(self, mode: str) -> str:
        """How the model makes a middle asked for in ``mode`` where this loop does not choose its
        every token (a model server's); "" where it does."""
        return ""

    def version_for(self, python_version: VersionLike | None = None) -> PythonVersion:
        """``python_version`` checked, or the decoder's own when None."""
        return self.python_version if python_version is None else parse_python_version(python_version)

    def generate(
        self,
        prefix: str,
        suffix: str,
        options: DecodeOptions | None = None,
        controls: Controls | None = None,
        **changes,
    ) -> FimResult:
        """The middle for ``prefix``/``suffix`` under ``options`` (default: :class:`DecodeOptions`'s
        defaults) with ``changes`` made to them (field names of :class:`DecodeOptions`).

        ``top_k`` candidates are checked before a full scan. In constrained mode, when the budget
        runs out (or no candidate passes) on an incomplete middle, it is cut at the point where
        the file was complete with the highest stop probability weighted by length
        (``best_stop``, paper 004 §VII-B). Then, with ``finish_in_budget``, the middle ends by
        the one end-of-middle policy, :func:`.end_of_middle.finish_middle`; when it finds
        nothing, the middle is cut back to its longest valid prefix. In the constrained modes
        the token-mask store (loaded with the checker) screens every candidate after a step's
        first and every scan past the top ``top_k`` (:mod:`.constraint`); ``prefilter`` masks
        every step's logits with it first (always in prefix mode). The mask is sound, so the
        exact check confirms fewer candidates and the same tokens are chosen.
        With ``heal`` the prompt ends before the prefix's last token and the first tokens must
        write it again (:func:`.constraint.healed_tail`); the middle returned is what comes
        after it. With ``semantic`` the constrained modes also ask name providers which
        names exist (paper 003, :mod:`.semantic`). ``controls``: stop the run, watch its tokens.
        """
        options = replace(options or DecodeOptions(), **changes) if changes else options or DecodeOptions()
        options = self.adjusted(options)
        controls = controls or Controls()
        check_characters(prefix, suffix)  # in every mode, before a tokenizer sees them
        version = options.python_version or self.python_version
        vocabulary = self.vocabulary
        budget = max(1, min(options.max_new_tokens, self.window // 2))
        healing = healed_tail(vocabulary.codec, prefix) if options.heal else ""
        prompt = build_prompt(
            self.fim_format,
            vocabulary.codec,
            prefix[: len(prefix) - len(healing)],
            suffix,
            self.window - budget,
            self.order,
            self.cut,
        )
        rng = np.random.default_rng(options.seed)  # (seed None: fresh entropy)
        constrained = options.mode in ("constrained", "prefix")
        # the token-mask store screens every check past a step's first candidate and every scan
        # (loaded when the constraint starts, as setup); ``masking``: every step's keys too
        masking = options.mode == "prefix" or (options.prefilter and options.mode == "constrained")
        run = Run(
            vocabulary,
            prefix,
            suffix,
            options,
            len(prompt),
            version,
            healing,
        )
        if constrained:
            started = time.perf_counter()
            store = self.mask_store(version)  # (loaded once per decoder: setup time)
            text = suffix if options.mode == "constrained" else ""
            run.start_constraint(text, controls.interrupt_setup, store, since=started)
            if options.semantic:
                run.start_semantic(options.semantic)
        sampling = options.temperature > 0
        request = GenerationRequest(
            budget, prefix, suffix, format_version(version), options.top_k, options.mode, sampling
        )
        self._steps(request, prompt, run, options, controls, rng, masking)
        return run.close()

    def _steps(
        self,
        request: GenerationRequest,
        prompt: list[int],
        run: Run,
        options: DecodeOptions,
        controls: Controls,
        rng: np.random.Generator,
        masking: bool,
    ) -> None:
        """Step a session of the model through the middle of ``run`` (see :meth:`generate`)."""
        vocabulary, budget = self.vocabulary, request.budget
        should_stop = controls.should_stop
        session = self.backend.start(request)
        try:
            logits = session.prefill(prompt, should_stop)
            run.result.prefill_seconds, session.seconds = session.seconds, 0.0
            model_seconds = 0.0  # (of the sessions left when the middle went back: run.rewound)
            bar = _progress(budget, controls.progress)
            for step in range(budget):
                if logits is None or (should_stop is not None and should_stop()):
                    run.result.stopped = StopReason.CANCELLED
                    break
                run.result.steps = step + 1
                checked_before, stopped = run.result.checker_seconds, run.result.stopped
                partial = session.partial
                whole = not partial
                token, normaliser = self._choose(run, logits, options, rng, masking, partial, whole)
                while token is None and not run.rewound and not whole:  # only the likeliest were told
                    wider = session.reveal(run.allowed(logits.shape[-1]))
                    run.result.stopped, whole = stopped, wider is None  # (nothing more: the last word)
                    logits = logits if wider is None else wider
                    token, normaliser = self._choose(run, logits, options, rng, masking, partial, whole)
                run.result.step_checker_seconds.append(run.result.checker_seconds - checked_before)
                if run.rewound:  # the middle went back to an earlier token: the model reads from there
                    run.rewound = False
                    model_seconds += session.seconds
                    session.close()
                    session = self.backend.start(request)  # (llama.cpp keeps the shared prompt's cache)
                    logits = session.prefill([*prompt, *run.ids], should_stop)
                    continue
                if token is None or vocabulary.ends(token):
                    break
                run.logprobs.append(float(logits[token]) - normaliser)
                if controls.on_token is not None:
                    controls.on_token(token)
                if controls.on_middle is not None:
                    controls.on_middle(run.middle_text(run.ids))
                bar.update(1)
                if run.line_ended():
                    run.result.stopped = StopReason.LINE if options.single_line else StopReason.BLOCK
                    break
                if step + 1 < budget:
                    logits = session.step(token)
            else:
                run.result.stopped = StopReason.BUDGET
            bar.close()
            run.result.model_seconds = model_seconds + session.seconds
            invented = session.invented_end
        finally:
            session.close()
        run.result.generated = len(run.ids)
        if run.state is not None:
            ran_out = run.result.stopped in (StopReason.BUDGET, StopReason.STUCK)
            if ran_out and options.best_stop and not run.state.can_end():
                run.cut_at_best_stop()  # (stopped becomes "best-stop" when it finds a cut)
            if options.finish_in_budget and (run.result.stopped.cut_short or options.drop_repeats):
                run.finish()
        if invented:  # (a server's finish: valid, and what nobody typed)
            run.result.unshowable = True

    def _choose(
        self,
        run: Run,
        logits: np.ndarray,
        options: DecodeOptions,
        rng: np.random.Generator,
        masking: bool,
        partial: bool,
        whole: bool,
    ) -> tuple[int | None, float]:
        """The token ``run`` takes after ``logits`` (None: none passes; ``whole``: no more will be
        told, see :meth:`.run.Run.choose`), and their log-normaliser: 0 for a ``partial`` row
        (log-probabilities already, :attr:`..runtimes.backend.ModelSession.partial`)."""
        keys = ranking_keys(logits, options.temperature, options.top_p, rng)
        normaliser = 0.0 if partial else log_normaliser(logits)
        started = time.perf_counter()
        if options.best_stop and run.state is not None:
            run.note_stop_point(logits, normaliser)
        if masking and run.state is not None:
            # (while healing the tokens write prefix text again: the store knows no such state)
            keys = run.state.narrow(keys, self.vocabulary.stop_ids)
        top = run.note_alternatives(logits, normaliser)
        run.result.checker_seconds += time.perf_counter() - started
        return run.choose(keys, whole, top if keys is logits else None), normaliser


def _progress(total: int, enabled: bool):
    """A tqdm bar over generated tokens on a terminal (a no-op when disabled or not a terminal)."""
    from tqdm import tqdm

    return tqdm(total=total, unit="tok", desc="generating", disable=None if enabled else True, leave=False)
