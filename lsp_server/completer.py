"""The model side of the server: loading a model, and running the library's editor policy on it.

Everything here runs on the server's worker threads, one at a time (whichever holds the turn,
:mod:`lsp_server.turns`: the model and the checker caches are used by one thread at a time);
the event loop only waits on them. What a completion is (the cursor's context, the Python
version, the end of the middle, the confidence gate) is the library's
(:mod:`fimconstrain.decoding.editor.policy`); a :class:`Job` is this server's side of one request:
``$/cancelRequest``, a newer request for the same document and the deadline stop it within one
decode step (``job.should_stop`` is polled once per step). The server gives a job its deadline
when its work begins (:meth:`Job.begin`: when it first holds the turn), not when it arrives:
requests queued behind others are each given the whole deadline once their turn comes.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fimconstrain.decoding.editor.policy import (
    ENDING_RESERVE_SECONDS,
    Completion,
    ShownItems,
    complete_at_cursor,
)
from fimconstrain.decoding.loop.options import DecodeOptions
from fimconstrain.decoding.loop.result import StopReason
from fimconstrain.decoding.runtimes.server_api import ModelServerError
from fimconstrain.engine.errors import FimConstrainError, Interrupted

from .config import Settings

if TYPE_CHECKING:
    from fimconstrain.decoding.editor.policy import Decoder
    from fimconstrain.decoding.models.confidence import ConfidenceGate
    from fimconstrain.decoding.runtimes.backend import ModelBackend
    from fimconstrain.engine.versions import PythonVersion

log = logging.getLogger(__name__)

WARMUP_PREFIX = "def add(a, b):\n    return "
WARMUP_SUFFIX = "\n\nprint(add(1, 2))\n"
#: about 100 tokens of code whose reading is timed after the warm-up (:func:`reading_rate`)
RATE_TEXT = "".join(f"def area_{n}(width, height):\n    return width * height + {n}\n\n" for n in range(6))
#: the file under the cache folder that keeps each model's reading rate (:func:`remembered_rate`)
RATES_FILE = "reading-rates.json"
#: the share of the deadline a document's first request may spend reading its prompt
FIRST_READ_SHARE = 0.6
#: the smallest prompt window the server fits to a slow model (:func:`fitted_window`)
MIN_FITTED_WINDOW = 256


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
        self.deadline = deadline  # time.monotonic() value (until begin() sets it)
        self.started: float | None = None  # when its work began (see begin)
        self.single_line = single_line
        # the Python version asked for (None: the newest) and, when the document has not been
        # checked at it since it was opened or changed a lot, its whole text to check first
        self.python_version = python_version
        self.verify_text = verify_text
        self.used_version: PythonVersion | None = (
            None  # the version the completion was constrained by (set by Completer.complete)
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
        self.paused = 0  # times it handed the worker to another request and waited for it back
        #: the modes the middles were made in ("checked": a model server without the plugin)
        self.modes: set[str] = set()
        #: the text around the cursor it completes (None: not the document's own, as when it
        #: extends a completion the editor selected), and the middle written so far
        self.around: tuple[str, str] | None = None
        self.middle = ""
        #: an explicit (Invoked) request: at a cursor already completed it wants the model again
        self.invoked = False
        #: work ahead of any request (at a cursor the client reported), until a request takes it
        #: over (:meth:`take_over`)
        self.ahead = False

    def begin(self, seconds: float) -> None:
        """Its work begins now (it holds the turn for the first time): the deadline is
        ``seconds`` from now. Later calls change nothing."""
        if self.started is None:
            self.started = time.monotonic()
            self.deadline = self.started + seconds

    def take_over(self) -> None:
        """A request at this job's cursor came: the work is that request's now (it ranks so)."""
        self.ahead = False

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
        """True when the work must end now (cancelled, or the deadline less the time to end the
        middle is reached): polled once per decode step and every few hundred characters of a
        document being read (a safe point: the turn may be handed over here)."""
        self.checkpoint()
        if self.cancelled:
            return True
        if time.monotonic() >= self.deadline - ENDING_RESERVE_SECONDS:
            self.ended = "deadline"
            return True
        return False

    def on_token(self, token: int) -> None:
        """Called for each token the decode loop chooses."""
        self.generated += 1

    def on_middle(self, middle: str) -> None:
        """Called after each token with the middle written so far (read by the event loop)."""
        self.middle = middle

    def typed_since(self, text: str) -> str | None:
        """What was typed at this job's cursor when the document is now ``text``, where the middle
        written so far spells it or may still write it (what it has written is where the typed
        text goes): a request there is answered from this job's items once it ends
        (:class:`~fimconstrain.decoding.editor.policy.ShownItems`), so it may run on. None: the
        text went elsewhere (or the job is stopped, or is not at a cursor of the document)."""
        if self.around is None or self.cancelled:
            return None
        prefix, suffix = self.around
        if len(text) < len(prefix) + len(suffix) or not (text.startswith(prefix) and text.endswith(suffix)):
            return None
        typed = text[len(prefix) : len(text) - len(suffix)]
        middle = self.middle
        return typed if middle.startswith(typed) or typed.startswith(middle) else None

    def note(self, done: Completion) -> None:
        """Take in what the completion's generations did: the version, where the time went,
        whether a one-line middle ended at its line."""
        self.used_version = done.version
        for result in done.results:
            self.modes.add(result.mode)
            self.model_seconds += result.model_seconds
            self.constraint_seconds += result.checker_seconds
            if result.stopped == StopReason.LINE:
                self.ended = "end of line"


@dataclass
class Loaded:
    """A loaded model ready to complete."""

    name: str
    decoder: Decoder
    fim_format: str
    load_seconds: float
    gate: ConfidenceGate  # the model's fitted threshold on an item's mean token log-probability
    #: prompt tokens the model reads per second, timed at load (None: a model server's)
    read_rate: float | None = None


class Completer:
    """Owns the model; every method is called on a worker thread holding the turn."""

    def __init__(self):
        self.loaded: Loaded | None = None
        self.error: str | None = None
        #: why the model server failed the last completion (None: it answered)
        self.server_error: str | None = None
        #: the items made at the last cursors: typing the start of one is answered with its rest
        #: at once, as is a cursor already completed; under the settings they were made with
        self.shown = ShownItems()
        self.shown_settings: Settings | None = None

    def load(self, settings: Settings, backend: ModelBackend | None = None) -> Loaded:
        """Load the configured model, or take ``backend`` (any model backend, already loaded),
        and warm the checker and the model up; raises on failure."""
        start = time.perf_counter()
        self.loaded, self.error, self.server_error = None, None, None
        self.shown = ShownItems()  # (another model's items are not this one's)
        from fimconstrain.decoding.loop.generate import FimDecoder
        from fimconstrain.decoding.model_choice import ModelChoice
        from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR

        # a backend given is run here; else the settings' model, here or on its server, offline
        choice = settings.model_choice() if backend is None else ModelChoice()
        if backend is None and choice.model is None and not DEFAULT_MODEL_DIR.is_dir():
            raise RuntimeError(
                f"the shipped model is not installed ({DEFAULT_MODEL_DIR} is missing); "
                f"set fimconstrain.model to a model directory"
            )
        # (no progress bar: a bar on standard error is an error line in an editor's log)
        decoder, gate = choice.open(backend, progress=False)
        name, fim_format = decoder.backend.name, decoder.backend.fim_format.name
        apply_window(decoder, settings)
        if settings.semantic:
            from fimconstrain.decoding.loop import jedi_attributes

            jedi = jedi_attributes.shared()
            if jedi is not None:
                jedi.warm_up()  # in the background: jedi's first answer takes seconds
        loaded = Loaded(name, decoder, fim_format, 0.0, gate)
        # warm up: grammar tables, the prompt path, a few decode steps; then time the reading
        warm = DecodeOptions.editor(False, max_new_tokens=4, top_k=8, semantic=False)
        complete_at_cursor(
            decoder, WARMUP_PREFIX, WARMUP_SUFFIX, warm, request=Job("warmup", time.monotonic() + 60, False)
        )
        if isinstance(decoder, FimDecoder) and settings.server is None:
            loaded.read_rate = remembered_rate(decoder.backend, settings)
            apply_window(decoder, settings, loaded.read_rate)
        loaded.load_seconds = time.perf_counter() - start
        self.loaded = loaded
        return loaded

    def complete(self, job: Job, prefix: str, suffix: str, settings: Settings, items: int) -> list[str]:
        """Up to ``items`` distinct valid middles the confidence gate shows (greedy first, then
        sampled), most confident first; [] when stopped or impossible (see :meth:`scored`)."""
        return [middle for middle, _ in self.scored(job, prefix, suffix, settings, items)]

    def scored(
        self, job: Job, prefix: str, suffix: str, settings: Settings, items: int
    ) -> list[tuple[str, float]]:
        """:meth:`complete`'s middles with their mean token log-probabilities, by the library's
        editor policy (:func:`fimconstrain.decoding.editor.policy.complete_at_cursor`) at
        ``job.python_version`` (or a newer version the document parses at: ``job.used_version``)."""
        loaded = self.loaded
        if loaded is None:
            return []
        options = editor_options(settings, job.single_line, job.python_version)
        apply_window(loaded.decoder, settings, loaded.read_rate)
        if settings != self.shown_settings:  # (other settings make other items: a new question)
            self.shown, self.shown_settings = ShownItems(), settings
        try:
            done = complete_at_cursor(
                loaded.decoder,
                prefix,
                suffix if settings.mode == "fim" else "",
                options,
                items=items,
                gate=loaded.gate,
                request=job,
                verify_text=job.verify_text,
                more_temperature=settings.temperature,
                shown=self.shown,
                asked_again=job.invoked,
            )
        except Interrupted:
            raise  # cancelled or out of time while the document was read: no items
        except ModelServerError as error:  # said once, in the status, until the server answers again
            if self.server_error != str(error):
                log.warning("%s", error)
            self.server_error = str(error)
            return []
        except FimConstrainError as error:  # a syntax error before the cursor at every version
            log.info("no valid middle exists here: %s (offset %s)", error, getattr(error, "offset", None))
            job.used_version = options.python_version
            return []
        self.server_error = None
        job.note(done)
        return [(item.middle, item.mean_logprob) for item in done.items]


def remembered_rate(backend: ModelBackend, settings: Settings) -> float:
    """The model's reading rate (:func:`reading_rate`) as measured at an earlier load of the same
    model file with the same settings on this machine (kept in :data:`RATES_FILE` under the cache
    folder: a restart skips the ~100-token prefill); measured, and kept, when there is none."""
    from fimconstrain.cache_folder import cache_root

    path = cache_root() / RATES_FILE
    model = Path(backend.name)
    stat = model.stat() if model.exists() else None
    identity = stat and (stat.st_size, stat.st_mtime_ns)
    key = repr((backend.name, identity, settings.model_choice(), os.cpu_count()))
    try:
        rates = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        rates = {}
    if not isinstance(rates, dict):
        rates = {}
    rate = rates.get(key)
    if isinstance(rate, (int, float)) and rate > 0:
        return float(rate)
    rate = reading_rate(backend)
    rates[key] = rate
    try:  # written whole, then moved into place: a reader sees the old file or the new one
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(rates, indent=1), "utf-8")
        os.replace(tmp, path)
    except OSError as error:
        log.info("reading rate not kept in %s (%s)", path, error)
    return rate


def reading_rate(backend: ModelBackend) -> float:
    """Prompt tokens per second the model reads (:data:`RATE_TEXT`, none of it in the cache;
    timed after a first call, which also pays for paging the weights in)."""
    ids = backend.tokenizer.encode(RATE_TEXT)[: backend.context_window]
    session = backend.start()
    start = time.perf_counter()
    session.prefill(ids)
    return len(ids) / max(time.perf_counter() - start, 1e-6)


def fitted_window(settings: Settings, whole: int, rate: float | None) -> int:
    """The prompt window a local model gets: ``promptWindow`` tokens of prompt and middle (at
    most the model's ``whole`` window), fewer where the model reads too slowly (``rate`` tokens
    per second) to read the prompt in :data:`FIRST_READ_SHARE` of ``deadlineMs``, as a document's
    first request must; never fewer than :data:`MIN_FITTED_WINDOW`."""
    window = min(settings.prompt_window or whole, whole)
    if rate is None:
        return window
    readable = int(rate * FIRST_READ_SHARE * settings.deadline_ms / 1000) + settings.max_tokens
    return min(window, max(readable, MIN_FITTED_WINDOW))


def apply_window(decoder: Decoder, settings: Settings, rate: float | None = None) -> None:
    """Give a decoder the prompt window of ``settings``: :func:`fitted_window` tokens of prompt
    and middle, the suffix at most ``suffixTokens`` of them, the prefix cut in whole strides so
    that typing keeps the cache (a server's prompt cache too)."""
    from fimconstrain.decoding.loop.generate import FimDecoder
    from fimconstrain.decoding.tokens.fim_formats import PromptCut

    if isinstance(decoder, FimDecoder):
        decoder.window = fitted_window(settings, decoder.backend.context_window, rate)
        decoder.cut = PromptCut(settings.suffix_tokens)


def editor_options(settings: Settings, single_line: bool, python_version=None) -> DecodeOptions:
    """The library's editor preset with the user's settings."""
    return DecodeOptions.editor(
        single_line,
        max_new_tokens=settings.max_tokens,
        top_k=settings.top_k,
        finish_search=settings.finish_search,
        semantic=settings.semantic,
        python_version=python_version,
    )
