"""The language server: ``textDocument/inlineCompletion`` backed by the constrained FIM engine.

Threads: the asyncio event loop (pygls) reads messages and answers every request;
worker threads load the model and generate (:class:`~lsp_server.completer.Completer`), one at a
time: whichever holds the turn (:mod:`lsp_server.turns`), first come first served, except that
a request on a large document hands the worker to a small one at its next decode step or piece
of text read. A request's deadline (``deadlineMs``) counts from when its work begins, not from
when it arrives: requests that arrive together are answered one after the other, each with
what the whole deadline gives it; a newer request for the same document supersedes a queued
one, which is answered (empty) at once, and the generation running for it unless the typed
text follows what it writes: then it runs on (the client's cancel does not stop it either) and
the newer request, queued behind it, is answered from its items. The loop never waits on a
worker except through ``asyncio.wait`` with a timeout (the deadline once the work began,
:data:`QUEUE_WAIT_SECONDS` for it to begin), so a slow model, a huge file or a model that fails
to load can delay or empty a completion but never stall other requests.

Custom notification ``fimconstrain/status`` (server -> client), params
``{"state": "busy" | "idle" | "error", "message": str, "model": str | null,
"pythonVersion": str | null}``, sent when the state changes: busy while the model loads or
a completion runs; ``pythonVersion`` is the Python version the last completed document was
checked as (the message says so when that is newer than the ``pythonVersion`` setting gave).

Custom notification ``fimconstrain/cursor`` (client -> server), params ``{"textDocument":
{"uri": str}, "position": Position}``: the cursor is here (the editor opened the document or
the person moved the cursor, not by typing). The server works ahead: it completes there while
the worker is idle, giving way to every request, and the request that then comes at that
cursor takes the work over and is answered from its items (:meth:`FimServer.look_ahead`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from fimconstrain import __version__
from fimconstrain.collector import Collector
from fimconstrain.decoding.editor.policy import wants_multiline
from fimconstrain.decoding.editor.python_version import Choice, Chooser
from fimconstrain.decoding.models.known_models import AUTO, auto_note, real_model_hint
from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR
from fimconstrain.engine import clear_caches
from fimconstrain.engine.errors import Interrupted

from .completer import Completer, Job
from .config import SECTION, Settings, section, update
from .documents import Documents, encoding_name, offset_at, uri_path
from .protocol import FimProtocol
from .turns import Ticket, Turns

T = TypeVar("T")

log = logging.getLogger("lsp_server")

STATUS = "fimconstrain/status"
CURSOR = "fimconstrain/cursor"
GRACE_SECONDS = 0.5  # past the deadline, how long a request waits for the worker to hand over what it has
#: how long a request that arrives while the model loads waits for it (its own deadline then
#: starts when the model is ready)
LOAD_WAIT_SECONDS = 120.0
POLL_SECONDS = 0.05  # how often a request waiting for the model or its turn looks whether it was superseded
#: how long a request waits for its work to begin (the requests ahead of it to end) before it
#: is answered with nothing
QUEUE_WAIT_SECONDS = 300.0
#: requests on a document this large are background work: any other request goes first
BACKGROUND_DOCUMENT_CHARS = 200_000
#: closing a document this large frees the engine's caches at once (see did_close)
LARGE_DOCUMENT_CHARS = 1_000_000
#: threads that may hold requests at once (one of them works at a time; the rest wait their turn)
WORKER_THREADS = 8
CONFIG_PULL_SECONDS = 3.0
#: an edit that inserts this many characters, or spans this many lines, is a major change: the
#: document is checked again at the version its pythonVersion setting gives
MAJOR_CHANGE_CHARS = 200
MAJOR_CHANGE_LINES = 5


@dataclass
class DocVersion:
    """The Python version an open document is checked as."""

    choice: Choice  # what the pythonVersion setting gives it
    version: tuple[int, int]  # what it is checked as: the choice's, or a newer one it parses at
    verified: bool = False  # whether the whole document has been checked since it was opened or changed a lot


def _name(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def _major_change(change) -> bool:
    rng, text = getattr(change, "range", None), getattr(change, "text", "")
    if rng is None:
        return True  # the whole document
    return (
        len(text) >= MAJOR_CHANGE_CHARS
        or text.count("\n") >= MAJOR_CHANGE_LINES
        or abs(rng.end.line - rng.start.line) >= MAJOR_CHANGE_LINES
    )


class _ClientLog(logging.Handler):
    """Forwards the server's log records to the client as window/logMessage (from any thread)."""

    LEVELS = (
        (logging.ERROR, types.MessageType.Error),
        (logging.WARNING, types.MessageType.Warning),
        (logging.INFO, types.MessageType.Info),
        (0, types.MessageType.Log),
    )

    def __init__(self, server: FimServer):
        super().__init__(logging.DEBUG)
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = next(t for level, t in self.LEVELS if record.levelno >= level)
            params = types.LogMessageParams(type=kind, message=self.format(record))
            self.server.in_loop(self.server.window_log_message, params)
        except Exception:  # logging must never raise into the code that logs
            self.handleError(record)


class FimServer(LanguageServer):
    """State of one editor session: settings, documents, the engine and the requests in flight."""

    def __init__(self):
        super().__init__(
            "fimconstrain-lsp",
            __version__,
            protocol_cls=FimProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.settings = Settings()
        self.documents = Documents()
        self.completer = Completer()
        self.worker = ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="fimconstrain-worker")
        self.collector = Collector()  # full garbage collections only when the worker is idle
        self.turns = Turns(self.collector.when_idle)
        self.jobs: dict[str, Job] = {}  # the newest request of each document
        #: the request whose generation runs on the worker, by document (it may outlive its own
        #: request: a client's cancel lets it run on while the typed text follows it)
        self.generating: dict[str, Job] = {}
        #: the newest work ahead of a request (:meth:`look_ahead`; one at a time)
        self.ahead: Job | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread: int | None = None
        self.model_ready: asyncio.Event | None = None
        self.loading = 0  # load generation; the newest one decides the engine's state
        self.load_task: asyncio.Task | None = None
        self.running = 0
        self.state: tuple | None = None
        self.versions = Chooser()
        self.doc_versions: dict[str, DocVersion] = {}
        self.status_python: str | None = None  # the version the last completed document was checked as
        self.version_note: str | None = None  # set when that version is newer than its setting gave
        self.warned: set[str] = set()
        self.client_log = _ClientLog(self)
        self.client_log.setFormatter(logging.Formatter("%(message)s"))
        self.client_log.setLevel(logging.INFO)
        log.addHandler(self.client_log)
        log.setLevel(logging.DEBUG)

    # ------------------------------------------------------------ plumbing

    @property
    def shut_down(self) -> bool:
        """Whether the client has asked this server to shut down (its exit code is then 0)."""
        assert isinstance(self.protocol, FimProtocol)  # made with protocol_cls=FimProtocol
        return self.protocol.shut_down

    def attach_loop(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
            self.loop_thread = threading.get_ident()
            self.model_ready = asyncio.Event()

    def in_loop(self, fn, *args) -> None:
        """Call ``fn(*args)`` on the event loop thread (now if already there)."""
        if self.loop is None or self.protocol.writer is None:
            return
        if threading.get_ident() == self.loop_thread:
            fn(*args)
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn, *args)

    def report_server_error(self, error: Exception, source) -> None:
        """Out-of-band errors go to the log, not to pop-ups; a body that is not JSON (pygls'
        reader hands its decoding error here) is answered with a parse error."""
        if source is JsonRpcException and isinstance(error, ValueError):  # JSONDecodeError, UnicodeError
            assert isinstance(self.protocol, FimProtocol)  # made with protocol_cls=FimProtocol
            self.protocol.reply_parse_error(error)
            return
        log.warning("%s: %s", getattr(source, "__name__", source), error)

    def set_status(self, state: str, message: str) -> None:
        if self.state == (state, message, self.status_python):
            return
        self.state = (state, message, self.status_python)
        loaded = self.completer.loaded
        self.in_loop(
            self.protocol.notify,
            STATUS,
            {
                "state": state,
                "message": message,
                "model": loaded.name if loaded else None,
                "pythonVersion": self.status_python,
            },
        )

    def idle_status(self) -> None:
        if self.running or (self.load_task is not None and not self.load_task.done()):
            return
        if self.completer.error:
            self.set_status("error", self.completer.error)
        elif self.completer.server_error:
            self.set_status("error", self.completer.server_error)
        elif self.settings.mode == "off":
            self.set_status("idle", "completions are off (mode: off)")
        elif self.completer.loaded:
            note = f"; {self.version_note}" if self.version_note else ""
            loaded = self.completer.loaded
            if Path(loaded.name) == DEFAULT_MODEL_DIR:
                note += f"; the shipped demo model: {real_model_hint()}"
            self.set_status("idle", f"ready: {loaded.name} ({loaded.fim_format}){note}")
        else:
            self.set_status("idle", "no model loaded")

    def warn_once(self, uri: str, message: str, level: int = logging.WARNING) -> None:
        """Log why a document gets no completions, once until it gets one again (not on every keystroke)."""
        if uri not in self.warned:
            self.warned.add(uri)
            log.log(level, "%s", message)

    @property
    def encoding(self) -> str:
        return self.documents.encoding

    # ------------------------------------------------------------ settings and the model

    def apply_settings(self, raw: Any, origin: str) -> bool:
        """Merge client settings; returns whether the model must be (re)loaded."""
        before = self.settings
        self.settings, problems = update(before, raw)
        for problem in problems:
            log.warning("%s: %s", origin, problem)
        if self.settings.python_version != before.python_version:
            self.doc_versions.clear()  # every document is checked again at the new setting
        if self.settings != before:
            old, new = before.to_dict(), self.settings.to_dict()
            log.info("settings from %s: %s", origin, {k: v for k, v in new.items() if old[k] != v})
        return self.settings.model_choice() != before.model_choice()

    def want_model(self, key_changed: bool) -> bool:
        if self.settings.mode == "off":
            return False
        return key_changed or (
            self.completer.loaded is None
            and self.completer.error is None
            and (self.load_task is None or self.load_task.done())
        )

    def start_load(self) -> None:
        self.loading += 1
        assert self.model_ready is not None  # made by attach_loop
        self.model_ready.clear()
        self.load_task = asyncio.ensure_future(self._load(self.loading, self.settings))

    async def _load(self, generation: int, settings: Settings) -> None:
        name = model_label(settings)
        if settings.model == AUTO and settings.server is None:
            log.info("%s", auto_note(settings.model_choice().model))
        token = f"fimconstrain-load-{generation}"
        progress = await self._progress_begin(token, "fimconstrain", f"loading {name}")
        self.set_status("busy", f"loading {name}")
        start = time.perf_counter()
        try:
            loaded = await asyncio.wrap_future(self.on_worker(self.completer.load, settings))
        except Exception as error:  # a missing or broken model must not take the server down
            message = f"model {name} failed to load: {error}"
            if generation == self.loading:
                self.completer.error = message
                log.error("%s", message)
                self.in_loop(
                    self.window_show_message,
                    types.ShowMessageParams(type=types.MessageType.Error, message=f"fimconstrain: {message}"),
                )
        else:
            if generation == self.loading:
                log.info(
                    "model %s loaded (format %s) in %.1f s; it reads %s prompt tokens a second, "
                    "prompt window %s tokens",
                    loaded.name,
                    loaded.fim_format,
                    time.perf_counter() - start,
                    "?" if loaded.read_rate is None else f"{loaded.read_rate:.0f}",
                    getattr(loaded.decoder, "window", "the server's"),
                )
                assert self.model_ready is not None  # made by attach_loop
                self.model_ready.set()
        finally:
            if progress:
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message="done"))
            if generation == self.loading:
                self.load_task = None
                self.idle_status()

    async def _progress_begin(self, token: str, title: str, message: str) -> bool:
        caps = self.protocol.client_capabilities
        if not (caps and caps.window and caps.window.work_done_progress):
            return False
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), CONFIG_PULL_SECONDS)
        except Exception as error:
            log.debug("no work-done progress: %r", error)
            return False
        self.work_done_progress.begin(
            token, types.WorkDoneProgressBegin(title=title, message=message, cancellable=False)
        )
        return True

    async def pull_settings(self) -> bool:
        """Ask the client for the ``fimconstrain`` section (when it supports workspace/configuration)."""
        caps = self.protocol.client_capabilities
        if not (caps and caps.workspace and caps.workspace.configuration):
            return False
        try:
            values = await asyncio.wait_for(
                self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
                ),
                CONFIG_PULL_SECONDS,
            )
        except Exception as error:
            log.debug("workspace/configuration failed: %r", error)
            return False
        value = values[0] if values else None
        return self.apply_settings(value, "workspace/configuration") if isinstance(value, dict) else False

    # ------------------------------------------------------------ Python versions

    def document_version(self, uri: str) -> DocVersion:
        """The version ``uri`` is checked as: from the pythonVersion setting (pyproject.toml's
        requires-python for "auto", read again when it changes), or the newer version it was
        found to parse at since."""
        choice = self.versions.choose(
            self.settings.python_version, uri_path(uri), named="setting pythonVersion"
        )
        entry = self.doc_versions.get(uri)
        if entry is None or entry.choice != choice:
            entry = self.doc_versions[uri] = DocVersion(choice, choice.version)
            log.info("%s: Python %s (%s)", _name(uri), choice.label, choice.source)
        return entry

    def note_version(self, uri: str, entry: DocVersion, used: tuple[int, int] | None) -> None:
        """After a completion: remember the version it was checked as; say so when the document
        parses only at a newer version than its setting gives (never refuse it)."""
        from fimconstrain.engine.versions import format_version

        if used is None:  # the engine did not get to it (no model, cancelled early)
            return
        if self.doc_versions.get(uri) is entry:
            entry.verified = True
            if used != entry.version:
                entry.version = used
                log.warning(
                    "%s does not parse as Python %s (%s) but does as %s: completing it as Python %s",
                    _name(uri),
                    entry.choice.label,
                    entry.choice.source,
                    format_version(used),
                    format_version(used),
                )
        self.status_python = format_version(used)
        self.version_note = (
            (f"{_name(uri)}: Python {format_version(used)} (it does not parse as {entry.choice.label})")
            if used != entry.choice.version
            else None
        )

    def supersede(self, uri: str, text: str) -> None:
        """A newer request for ``uri`` (whose document is now ``text``) arrived: the requests for it
        that have not begun end now, as does the generation running for it unless characters were
        typed at its cursor that follow what it writes (:meth:`Job.typed_since`; a request at the
        same text, as after a change of settings, is a new question, unless it is work ahead):
        then it runs on, and the newer request, queued behind it, is answered from its items (at
        most one generation per document). Work ahead elsewhere, or not yet begun, stops."""
        for older in {self.jobs.get(uri), self.generating.get(uri)}:
            if older is None:
                continue
            typed = older.typed_since(text) if older.started is not None else None
            if typed or (typed == "" and older.ahead):  # (work ahead at this very text: it is this request's)
                older.take_over()
            else:
                older.cancel("superseded")
        ahead = self.ahead
        if ahead is not None and ahead.ahead and (ahead.uri != uri or ahead.started is None):
            ahead.cancel("superseded")  # the person is in another document, or it had not begun

    def document_changed(self, uri: str, changes: list) -> None:
        """After ``changes`` to ``uri``: a generation the typed text left behind stops; the
        document is checked again after a major change; and the server works ahead at the
        cursor a single edit leaves (the end of its text: typing, or an item accepted), so
        that the request an editor sends after its debounce finds the work begun."""
        running = self.generating.get(uri)
        doc = self.documents.get(uri)
        if running is not None and doc is not None and running.typed_since(doc.text) is None:
            running.cancel("superseded")  # the typed text left it behind: it stops at once
        entry = self.doc_versions.get(uri)
        if entry is not None and entry.verified and any(map(_major_change, changes)):
            entry.verified = False  # check the whole document again at the next completion
            entry.version = entry.choice.version
        edit = changes[0] if len(changes) == 1 else None
        if doc is not None and isinstance(edit, types.TextDocumentContentChangePartial):
            at = edit.range.start
            start = offset_at(doc.text, at.line, at.character, self.encoding, doc.starts)
            self.look_ahead(uri, start + len(edit.text))

    # ------------------------------------------------------------ completions

    async def inline_completion(self, params: types.InlineCompletionParams) -> types.InlineCompletionList:
        empty = types.InlineCompletionList(items=[])
        settings = self.settings
        if settings.mode == "off":
            return empty
        uri = params.text_document.uri
        doc = self.documents.get(uri)
        if doc is None:
            self.warn_once(uri, f"inlineCompletion for a document that is not open: {uri}")
            return empty
        refusal = self.refusal(doc, settings)
        if refusal is not None:
            self.warn_once(uri, f"not completing {uri}: {refusal[0]}", refusal[1])
            return empty
        self.warned.discard(uri)
        text, enc = doc.text, self.encoding
        cursor = offset_at(text, params.position.line, params.position.character, enc, doc.starts)
        context = params.context
        kind = context.trigger_kind if context else types.InlineCompletionTriggerKind.Automatic
        selected = context.selected_completion_info if context else None
        lead, replace = "", types.Range(start=params.position, end=params.position)
        if selected is not None:
            # the item must extend the selected completion and replace the same range:
            # complete the document as it will be once that completion is accepted
            a, b = sorted(
                offset_at(text, p.line, p.character, enc, doc.starts)
                for p in (selected.range.start, selected.range.end)
            )
            lead, replace = selected.text, selected.range
            prefix, suffix = text[:a] + lead, text[b:]
        else:
            prefix, suffix = text[:cursor], text[cursor:]
        single = not wants_multiline(prefix, suffix, settings.multiline)
        items = settings.invoked_items if kind == types.InlineCompletionTriggerKind.Invoked else 1

        version = self.document_version(uri)
        job, ticket = self._new_job(uri, text, single, version)
        job.around = (prefix, suffix) if selected is None else None
        job.invoked = kind == types.InlineCompletionTriggerKind.Invoked
        self.supersede(uri, text)
        self.jobs[uri] = job
        self.running += 1
        if self.completer.loaded is not None:  # while the model loads, the status keeps saying so
            self.set_status("busy", f"completing {uri.rsplit('/', 1)[-1]}")
        try:
            middles = await self._run(job, ticket, prefix, suffix, settings, items)
            self.note_version(uri, version, job.used_version)
        except asyncio.CancelledError:  # the client's: a generation the typed text follows runs on
            now = self.documents.get(uri)
            for work in {job, self.generating.get(uri)}:  # (its own, or the one it waits behind)
                followed = work is not None and work.started is not None and now is not None
                if work is not None and not (followed and work.typed_since(now.text)):
                    work.cancel("cancelled")
            raise
        finally:
            self.running -= 1
            if self.jobs.get(uri) is job:
                del self.jobs[uri]
            self.idle_status()
        return types.InlineCompletionList(
            items=[types.InlineCompletionItem(insert_text=lead + middle, range=replace) for middle in middles]
        )

    def _new_job(self, uri: str, text: str, single: bool, version: DocVersion) -> tuple[Job, Ticket]:
        """A job for ``uri`` (whose document is ``text``) at its version, and its place in line:
        background work on a large document, ranked as work ahead while the job is
        (:attr:`Job.ahead`); at each safe point it may hand the worker over. Its deadline is set
        when its work begins (:meth:`_complete`)."""
        job = Job(
            uri,
            math.inf,
            single,
            python_version=version.version,
            verify_text=None if version.verified else text,
        )
        ticket = Ticket(
            background=len(text) >= BACKGROUND_DOCUMENT_CHARS, urgent=job.urgent, ahead=lambda: job.ahead
        )
        job.checkpoint = lambda: self._checkpoint(job, ticket)
        return job, ticket

    def _checkpoint(self, job: Job, ticket: Ticket) -> None:
        """A safe point of ``job``'s work: it may hand the worker over (and wait for it back)."""
        if self.turns.checkpoint(ticket):
            job.paused += 1

    @staticmethod
    def refusal(doc, settings: Settings) -> tuple[str, int] | None:
        """Why ``doc`` is not completed (and how loudly to say it), or None when it is."""
        if doc.language_id not in settings.languages:
            languages = ", ".join(settings.languages)
            return f"languageId {doc.language_id!r} is not one of {languages}", logging.INFO
        if len(doc.text) > settings.max_file_chars:
            return (
                f"{len(doc.text)} characters is over maxFileChars ({settings.max_file_chars})",
                logging.WARNING,
            )
        return None

    def look_ahead(self, uri: str, cursor: int) -> None:
        """The cursor of ``uri`` is at offset ``cursor`` (the client said so with
        ``fimconstrain/cursor``, or an edit left it there): complete there now, as work ahead of
        the request that will come (it gives way to every request; one at a time, the newest
        cursor's), unless the model is not loaded, a request is already there (a generation
        the typing follows), or the answer there is known. Its items are kept with the others
        (:class:`~fimconstrain.decoding.editor.policy.ShownItems`): a request at that cursor that
        comes while it runs takes it over (:meth:`supersede`), one that comes after it is
        answered from them at once, as is typing through them."""
        settings, completer = self.settings, self.completer
        doc = self.documents.get(uri)
        if settings.mode == "off" or completer.loaded is None or doc is None or self.refusal(doc, settings):
            return
        if uri in self.jobs or uri in self.generating:
            return  # a request is there (the cursor moved as it typed): it does the work
        text = doc.text
        prefix, suffix = text[:cursor], text[cursor:]
        if completer.shown.knows(prefix, suffix):
            return
        if self.ahead is not None:
            self.ahead.cancel("superseded")
        single, version = not wants_multiline(prefix, suffix, settings.multiline), self.document_version(uri)
        job, ticket = self._new_job(uri, text, single, version)
        job.ahead, job.around = True, (prefix, suffix)
        self.ahead = job
        queued = time.monotonic()
        future = self.on_worker(self._complete, job, prefix, suffix, settings, 1, ticket=ticket)
        future.add_done_callback(lambda done: _summary(job, done, queued, "work ahead"))
        future.add_done_callback(lambda done: self.in_loop(self._ahead_done, job, version))

    def _ahead_done(self, job: Job, version: DocVersion) -> None:
        """(On the loop.) Work ahead ended: the version it checked the document as is kept."""
        if self.ahead is job:
            self.ahead = None
        self.note_version(job.uri, version, job.used_version)

    async def _wait_for_model(self, job: Job) -> bool:
        """Wait while the model loads (up to :data:`LOAD_WAIT_SECONDS`); False when it failed,
        did not come in time, or the request was superseded or cancelled meanwhile."""
        give_up = time.monotonic() + LOAD_WAIT_SECONDS
        while self.completer.loaded is None:
            if self.completer.error or self.model_ready is None or job.cancelled:
                return False
            if time.monotonic() > give_up:
                log.info("model not ready after %.0f s; no completion", LOAD_WAIT_SECONDS)
                return False
            try:
                await asyncio.wait_for(self.model_ready.wait(), POLL_SECONDS)
            except asyncio.TimeoutError:
                continue
        return not job.cancelled

    async def _run(
        self, job: Job, ticket: Ticket, prefix: str, suffix: str, settings: Settings, items: int
    ) -> list[str]:
        if self.completer.loaded is None and not await self._wait_for_model(job):
            return []
        if job.cancelled:
            return []
        queued = time.monotonic()
        future = self.on_worker(self._complete, job, prefix, suffix, settings, items, ticket=ticket)
        future.add_done_callback(lambda done: _summary(job, done, queued))
        if not await self._wait_for_work(job, asyncio.wrap_future(future)):
            job.cancel("deadline")  # (a job cancelled before it began keeps its reason)
            future.add_done_callback(_consume)
            return []
        try:
            middles = future.result()
        except Interrupted:  # cancelled or out of time while the document was read
            return []
        except Exception:
            log.exception("completion failed")
            return []
        if job.reason == "superseded":
            return []
        return middles

    def _complete(self, job: Job, prefix: str, suffix: str, settings: Settings, items: int) -> list[str]:
        """On the worker, holding the turn: the job's deadline starts now."""
        job.begin(settings.deadline_ms / 1000)
        if job.cancelled:  # superseded or cancelled while it waited: nothing to do
            return []
        self.generating[job.uri] = job
        try:
            return self.completer.complete(job, prefix, suffix, settings, items)
        finally:
            if self.generating.get(job.uri) is job:
                del self.generating[job.uri]

    async def _wait_for_work(self, job: Job, work: asyncio.Future) -> bool:
        """Wait for the job's work: for it to begin (up to :data:`QUEUE_WAIT_SECONDS`), then up
        to its deadline and :data:`GRACE_SECONDS`; True when it ended, False when the wait gave
        up or the job was cancelled before it began (answered at once: the queued work then
        does nothing)."""
        give_up = time.monotonic() + QUEUE_WAIT_SECONDS
        while True:
            now = time.monotonic()
            if job.started is None:
                if job.cancelled:
                    return False
                if now >= give_up:
                    log.info("no turn for %s after %.0f s; no completion", _name(job.uri), QUEUE_WAIT_SECONDS)
                    return False
                timeout = POLL_SECONDS
            else:
                timeout = job.deadline + GRACE_SECONDS - now
                if timeout <= 0:
                    log.info("deadline passed with the worker still busy; no completion")
                    return False
            done, _ = await asyncio.wait({work}, timeout=timeout)
            if done:
                return True

    def on_worker(self, work: Callable[..., T], *args, ticket: Ticket | None = None) -> Future[T]:
        """Run ``work(*args)`` on a worker thread once it has the turn (an ordinary ticket
        unless one is given)."""
        return self.worker.submit(self.turns.run, ticket or Ticket(), partial(work, *args))

    def cancel_all(self, reason: str) -> None:
        for job in [*self.jobs.values(), *self.generating.values()]:
            job.cancel(reason)


def _summary(job: Job, done, queued: float, what: str = "completion") -> None:
    """Log what a completion (``what``) did (from the worker thread, when it ends), and how long
    it waited for its turn when that was long enough to matter."""
    if done.cancelled():
        return
    begun = job.started if job.started is not None else queued
    seconds = time.monotonic() - begun
    error = done.exception()
    if isinstance(error, Interrupted):
        count = "stopped while reading the document"
    else:
        count = "failed" if error else f"{len(done.result())} item(s)"
    stop = f", stopped early: {job.reason or job.ended}" if job.reason or job.ended else ""
    if "checked" in job.modes:
        stop += ", checked (the model server tells no log-probabilities: its middle cut to a valid prefix)"
    if begun - queued >= 0.1:
        stop += f", after {begun - queued:.2f} s waiting for its turn"
    if job.paused:
        stop += f", paused {job.paused} time(s) for other requests"
    per_token = 1000 / max(1, job.generated)
    log.info(
        "%s %s: %s, %d tokens, %.2f s (model %.1f ms/token, constraint %.1f ms/token)%s",
        what,
        job.uri.rsplit("/", 1)[-1],
        count,
        job.generated,
        seconds,
        job.model_seconds * per_token,
        job.constraint_seconds * per_token,
        stop,
    )


def _forget_closed_document(collector: Collector) -> None:
    """On the worker: drop the engine's cached parse states, collect them and hand the freed
    memory back (:meth:`Collector.sweep`), so that the server's memory goes back down after a
    large document is closed."""
    clear_caches()
    collector.sweep()


def model_label(settings: Settings) -> str:
    """The model ``settings`` name, for a person: what ``auto`` chose, or the shipped one."""
    if settings.model == AUTO and settings.server is None:
        chosen = settings.model_choice().model
        return f"{chosen} (auto)" if chosen is not None else "the shipped demo model (auto)"
    return settings.model if settings.model not in (None, AUTO) else "the shipped model"


def _cursor_place(params: Any) -> tuple[str, int, int] | None:
    """The document, line and character of a ``fimconstrain/cursor`` notification's params
    (None when they are not ``{"textDocument": {"uri": ...}, "position": {"line": ...,
    "character": ...}}``)."""

    def field(value: Any, name: str) -> Any:
        return value.get(name) if isinstance(value, dict) else getattr(value, name, None)

    uri = field(field(params, "textDocument"), "uri")
    position = field(params, "position")
    line, character = field(position, "line"), field(position, "character")
    if not isinstance(uri, str) or not all(isinstance(n, int) and n >= 0 for n in (line, character)):
        return None
    return uri, line, character


def _consume(future) -> None:
    if not future.cancelled():
        future.exception()


def create_server() -> FimServer:
    """A server with every handler registered (one per process)."""
    server = FimServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: FimServer, params: types.InitializeParams):
        ls.attach_loop()
        ls.documents.encoding = encoding_name(ls.workspace.position_encoding)
        ls.apply_settings(params.initialization_options, "initializationOptions")
        log.info("fimconstrain-lsp %s: positions in %s", __version__, ls.documents.encoding)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: FimServer, params: types.InitializedParams):
        ls.attach_loop()
        await ls.pull_settings()
        if ls.want_model(True):
            ls.start_load()
        else:
            ls.idle_status()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: FimServer, params: types.DidChangeConfigurationParams):
        ls.attach_loop()
        raw = params.settings
        if raw is None or section(raw) == {}:  # "settings changed, ask me": pull them
            changed = await ls.pull_settings()
        else:
            changed = ls.apply_settings(raw, "didChangeConfiguration")
        if changed:
            ls.completer.error = None
        if ls.want_model(changed):
            ls.start_load()
        else:
            ls.idle_status()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: FimServer, params: types.DidOpenTextDocumentParams):
        doc = params.text_document
        ls.documents.open(doc.uri, doc.text, doc.version, doc.language_id)
        ls.doc_versions.pop(doc.uri, None)  # its version is chosen (and checked) again

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FimServer, params: types.DidChangeTextDocumentParams):
        if not ls.documents.change(
            params.text_document.uri, params.text_document.version, list(params.content_changes)
        ):
            log.warning("didChange for a document that is not open: %s", params.text_document.uri)
        else:
            ls.document_changed(params.text_document.uri, list(params.content_changes))

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FimServer, params: types.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        closed = ls.documents.get(uri)
        ls.documents.close(uri)
        ls.doc_versions.pop(uri, None)
        ls.warned.discard(uri)
        for job in (ls.jobs.get(uri), ls.generating.get(uri)):
            if job is not None:
                job.cancel("superseded")
        if closed is not None and len(closed.text) >= LARGE_DOCUMENT_CHARS:
            # the engine keeps checkers of recent prefixes: drop them (on the worker, which owns
            # them), so that a large document's text and parse states are freed; a small one's
            # age out of the cache, which is cheaper than collecting on every close
            ls.on_worker(_forget_closed_document, ls.collector)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(ls: FimServer, params: types.InlineCompletionParams):
        ls.attach_loop()
        return await ls.inline_completion(params)

    @server.feature(CURSOR)
    def cursor(ls: FimServer, params: Any):
        place = _cursor_place(params)
        doc = ls.documents.get(place[0]) if place is not None else None
        if place is None:
            log.warning("ignored a %s notification with unexpected params: %r", CURSOR, params)
        elif doc is not None:
            uri, line, character = place
            ls.look_ahead(uri, offset_at(doc.text, line, character, ls.encoding, doc.starts))

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: FimServer, params):
        ls.cancel_all("shutdown")

    return server
