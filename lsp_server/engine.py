"""The model side of the server: loading, and constrained FIM generation that can be stopped.

Everything here runs on the server's worker threads, one at a time (whichever holds the turn,
:mod:`lsp_server.turns`: the model and the checker caches are used by one thread at a time);
the event loop only waits on them.

Stopping within one decode step: a :class:`Job` says when generation must end
(``$/cancelRequest``, a newer request for the same document, the deadline);
``FimDecoder.generate`` polls ``job.should_stop`` once per step and stops by itself at the end
of a one-line completion's line. The middle then ends by the decode loop's one policy
(:func:`fimconstrain.decoding.end_of_middle.finish_middle`, by default without the finish search:
an item only the search made valid is not shown; cut to whole lines, no repetition of the
suffix), and
shows only when the model's confidence in it passes the model's fitted threshold
(:mod:`fimconstrain.decoding.confidence`), so what comes back is valid and likely or nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .config import Settings

if TYPE_CHECKING:
    from fimconstrain.decoding.confidence import ConfidenceGate
    from fimconstrain.decoding.generate import FimDecoder
    from fimconstrain.engine.versions import PythonVersion

log = logging.getLogger(__name__)

WARMUP_PREFIX = "def add(a, b):\n    return "
WARMUP_SUFFIX = "\n\nprint(add(1, 2))\n"
#: seconds the end of a middle may search for a finish (an editor waits for it)
FINISH_SECONDS = 0.15


class Job:
    """One completion request: its stop flags and deadline, and how many tokens it generated."""

    def __init__(
        self,
        uri: str,
        deadline: float,
        single_line: bool,
        python_version=None,
        verify_text: str | None = None,
    ):
        self.uri = uri
        self.deadline = deadline  # time.monotonic() value
        self.single_line = single_line
        # the Python version asked for (None: the newest) and, when the document has not been
        # checked at it since it was opened or changed a lot, its whole text to check first
        self.python_version = python_version
        self.verify_text = verify_text
        self.used_version: PythonVersion | None = (
            None  # the version the completion was constrained by (set by Engine.complete)
        )
        self.reason: str | None = None  # "cancelled", "superseded"...: stopped from outside
        self.ended: str | None = None  # "deadline" or "end of line": the last generation stopped itself
        self._event = threading.Event()
        self.generated = 0  # tokens generated over all of this job's generations
        #: where those generations' time went: the model's forward passes for generated tokens,
        #: and the constraint (candidate checks, stop checks, the end of the middle)
        self.model_seconds = 0.0
        self.constraint_seconds = 0.0
        #: set by the server: at each safe point the job may hand the worker to a more urgent
        #: request and wait for it back (see :mod:`lsp_server.turns`)
        self.checkpoint: Callable[[], None] = lambda: None

    def cancel(self, reason: str = "cancelled") -> None:
        if self.reason is None:
            self.reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def urgent(self) -> bool:
        """Whether the job only has to wind up (cancelled, superseded or out of time)."""
        return self.cancelled or self.expired()

    def should_stop(self) -> bool:
        """True when the work must end now: polled once per decode step and every few hundred
        characters of a document being read (a safe point: the turn may be handed over here)."""
        self.checkpoint()
        if self.cancelled:
            return True
        if self.expired():
            self.ended = "deadline"
            return True
        return False

    def on_token(self, token: int) -> None:
        """Called for each token the decode loop chooses."""
        self.generated += 1


@dataclass
class Loaded:
    """A loaded model ready to complete."""

    name: str
    decoder: FimDecoder
    fim_format: str
    load_seconds: float
    gate: ConfidenceGate  # the model's fitted threshold on an item's mean token log-probability


class Engine:
    """Owns the model; every method is called on a worker thread holding the turn."""

    def __init__(self):
        self.loaded: Loaded | None = None
        self.error: str | None = None

    def load(self, settings: Settings) -> Loaded:
        """Load the configured model (and warm the checker and the model up); raises on failure."""
        start = time.perf_counter()
        self.loaded, self.error = None, None
        import torch

        from fimconstrain.decoding.confidence import ConfidenceGate
        from fimconstrain.decoding.generate import FimDecoder
        from fimconstrain.decoding.models import DEFAULT_MODEL_DIR, load_model

        if settings.model is None and not DEFAULT_MODEL_DIR.is_dir():
            raise RuntimeError(
                f"the shipped model is not installed ({DEFAULT_MODEL_DIR} is missing); "
                f"set fimconstrain.model to a model directory"
            )
        if settings.threads:
            torch.set_num_threads(settings.threads)
        model = load_model(
            settings.model,
            fim_format=settings.fim_format,
            device=settings.device,
            trust_remote_code=settings.trust_remote_code,
            progress=False,  # a bar on standard error is an error line in an editor's log
        )
        decoder = FimDecoder(model.model, model.tokenizer, model.fim_format)
        gate = ConfidenceGate.for_model(DEFAULT_MODEL_DIR if settings.model is None else settings.model)
        if settings.semantic:
            from fimconstrain.decoding import jedi_attributes

            jedi = jedi_attributes.shared()
            if jedi is not None:
                jedi.warm_up()  # in the background: jedi's first answer takes seconds
        loaded = Loaded(model.name, decoder, model.fim_format.name, 0.0, gate)
        # warm up: grammar tables, the prompt path, a few decode steps
        self._generate(
            loaded,
            Job("warmup", time.monotonic() + 60, False),
            WARMUP_PREFIX,
            WARMUP_SUFFIX,
            max_tokens=4,
            temperature=0.0,
            seed=None,
            top_k=8,
        )
        loaded.load_seconds = time.perf_counter() - start
        self.loaded = loaded
        return loaded

    def _generate(
        self,
        loaded: Loaded,
        job: Job,
        prefix: str,
        suffix: str,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        top_k: int,
        python_version=None,
        finish_search: bool = False,
        semantic: bool = False,
    ) -> tuple[str, float] | None:
        """A valid, non-blank middle the confidence gate shows, with its mean token
        log-probability, or None; raises FimConstrainError when no middle can join ``prefix``
        and ``suffix`` at ``python_version``."""
        result = loaded.decoder.generate(
            prefix,
            suffix,
            mode="constrained",
            max_new_tokens=max_tokens,
            temperature=temperature,
            top_k=top_k,
            seed=seed,
            should_stop=job.should_stop,
            on_token=job.on_token,
            single_line=job.single_line,
            drop_repeats=True,
            finish_seconds=FINISH_SECONDS,
            finish_search=finish_search,
            python_version=python_version,
            interrupt_setup=job.should_stop,
            semantic=semantic,
        )
        job.model_seconds += result.model_seconds
        job.constraint_seconds += result.checker_seconds
        if result.stopped == "line":
            job.ended = "end of line"
        score = result.mean_logprob
        if not (result.valid and result.middle.strip()) or score is None or not loaded.gate.shows(score):
            return None
        return result.middle, score

    def complete(self, job: Job, prefix: str, suffix: str, settings: Settings, items: int) -> list[str]:
        """Up to ``items`` distinct valid middles the confidence gate shows (greedy first, then
        sampled), most confident first; [] when stopped or impossible (see :meth:`scored`)."""
        return [middle for middle, _ in self.scored(job, prefix, suffix, settings, items)]

    def scored(
        self, job: Job, prefix: str, suffix: str, settings: Settings, items: int
    ) -> list[tuple[str, float]]:
        """:meth:`complete`'s middles with their mean token log-probabilities.

        The syntax is ``job.python_version``'s, or a newer version's when the document
        (``job.verify_text``) or the text around the cursor does not parse at it but does at a
        newer one (never refused for its version); ``job.used_version`` says which was used."""
        from fimconstrain import FimConstrainError, Interrupted
        from fimconstrain.engine.versions import parse_python_version

        from .pyversion import accepts, newest_accepting

        loaded = self.loaded
        if loaded is None or job.cancelled or job.expired():
            return []
        constrain_suffix = suffix if settings.mode == "fim" else ""
        version = parse_python_version(job.python_version)
        if job.verify_text is not None and not accepts(job.verify_text, "", version, job.should_stop):
            version = newest_accepting(job.verify_text, "", version) or version
        job.used_version = version
        out: dict[str, float] = {}
        for i in range(items):
            if job.cancelled or (i and job.expired()):
                break
            temperature, seed = (0.0, None) if i == 0 else (settings.temperature, i)

            def generate(at_version, temperature=temperature, seed=seed):
                return self._generate(
                    loaded,
                    job,
                    prefix,
                    constrain_suffix,
                    settings.max_tokens,
                    temperature,
                    seed,
                    settings.top_k,
                    python_version=at_version,
                    finish_search=settings.finish_search,
                    semantic=settings.semantic,
                )

            try:
                middle = generate(version)
            except Interrupted:
                raise  # cancelled or out of time while the document was read: no items
            except FimConstrainError as error:  # a syntax error before the cursor, NUL characters...
                newer = newest_accepting(prefix, constrain_suffix, version)
                if newer is None:
                    log.info(
                        "no valid middle exists here: %s (offset %s)", error, getattr(error, "offset", None)
                    )
                    return []
                version = job.used_version = newer
                middle = generate(version)
            if job.cancelled:
                break
            if middle is not None:
                out.setdefault(*middle)
        return [] if job.cancelled else sorted(out.items(), key=lambda item: -item[1])
