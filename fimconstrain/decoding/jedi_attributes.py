"""Attributes of resolvable receivers, from jedi: the completion engine after ``.`` (paper 003
§3.1; its SQL engine's "columns behind an alias", appendix C.1, is the same question).

jedi (PyPI ``jedi``, the ``semantic`` extra) infers the receiver in the file around the cursor
(prefix, the middle so far, suffix) and lists its attributes. It takes tens of milliseconds
warm and seconds cold, so it runs on one background thread: each receiver is asked once per
file (a per-receiver cache), a query waits at most ``budget`` seconds in all, and one that is
late, fails, or finds nothing is "unknown" (fail-open: the decode loop goes on unconstrained
there, and picks the answer up on a later step if it arrives). jedi's set misses attributes
set dynamically, so it is ``confident`` only for modules without a module ``__getattr__``;
for instances (``self`` included) and classes it only reranks.
"""

from __future__ import annotations

import importlib.util
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from ..engine.completion_engine import UNKNOWN, NamePoint, NameSet

log = logging.getLogger(__name__)

#: seconds a decode loop waits for one receiver's attributes, over all its steps
BUDGET = 0.1


def available() -> bool:
    """Whether jedi is installed (it is imported on the worker thread, not here: that takes
    a few hundred milliseconds)."""
    return importlib.util.find_spec("jedi") is not None


def _line_col(text: str) -> tuple[int, int]:
    """jedi's (1-based line, 0-based column) of the end of ``text``."""
    line = text.count("\n") + 1
    return line, len(text) - (text.rfind("\n") + 1)


def attributes_at(text: str, suffix: str) -> NameSet:
    """The attributes jedi lists after ``text`` (which ends with ``receiver.``) in the file
    ``text + suffix``; unknown when it lists none or cannot infer the receiver."""
    import jedi

    script = jedi.Script(text + suffix)
    completions = script.complete(*_line_col(text))
    names = frozenset(c.name for c in completions)
    if not names:
        return UNKNOWN
    receiver_end = text.rstrip()[:-1].rstrip()  # without the dot
    kinds = {name.type for name in script.infer(*_line_col(receiver_end))}
    confident = kinds == {"module"} and "__getattr__" not in names
    return NameSet(names, confident)


class _Worker:
    """One daemon thread running jobs in turn: a process (the command line) never waits for
    jedi at exit, as it would for a ``ThreadPoolExecutor``'s threads."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[NameSet], Callable[[], NameSet]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="fimconstrain-jedi", daemon=True).start()

    def submit(self, job: Callable[[], NameSet]) -> Future[NameSet]:
        future: Future[NameSet] = Future()
        self._jobs.put((future, job))
        return future

    def _run(self) -> None:
        while True:
            future, job = self._jobs.get()
            future.set_result(job())  # jobs are _safe: they never raise


class JediAttributes:
    """The long-lived part: one worker thread and an LRU of answers by (file, receiver)."""

    def __init__(self, cache_size: int = 512):
        self._worker = _Worker()
        self._cache: OrderedDict[tuple[int, int, str], Future[NameSet]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def warm_up(self) -> Future[NameSet]:
        """Load jedi and its builtin stubs in the background (the first query takes seconds)."""
        return self._worker.submit(lambda: _safe("import os\nos.", "\n"))

    def for_file(self, prefix: str, suffix: str, budget: float = BUDGET) -> FileAttributes:
        """The engine for one generation between ``prefix`` and ``suffix``; each receiver's
        answer is waited for ``budget`` seconds at most, over all steps."""
        return FileAttributes(self, (hash(prefix), hash(suffix)), budget)

    def query(self, key: tuple[int, int, str], text: str, suffix: str) -> Future[NameSet]:
        """The (maybe running) answer for ``key``, submitted on the first ask."""
        with self._lock:
            future = self._cache.get(key)
            if future is None:
                future = self._cache[key] = self._worker.submit(lambda: _safe(text, suffix))
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(key)
            return future


def _safe(text: str, suffix: str) -> NameSet:
    try:
        return attributes_at(text, suffix)
    except Exception as error:  # jedi on odd code: fail open
        log.debug("jedi failed: %r", error)
        return UNKNOWN


class FileAttributes:
    """:class:`~fimconstrain.engine.completion_engine.CompletionEngine` for attributes in one
    generation: answers per receiver, each waited for at most the budget in all."""

    def __init__(self, shared: JediAttributes, file_key: tuple[int, int], budget: float):
        self.shared = shared
        self.keys, self.budget = file_key, budget
        self.answers: dict[str, NameSet] = {}
        self.waited: dict[str, float] = {}
        self.timeouts = 0

    def names(self, point: NamePoint) -> NameSet:
        receiver = point.receiver
        if receiver is None:
            return UNKNOWN
        answer = self.answers.get(receiver)
        if answer is not None:
            return answer
        future = self.shared.query((*self.keys, receiver), point.text, point.suffix)
        left = self.budget - self.waited.get(receiver, 0.0)
        start = time.perf_counter()
        try:
            answer = future.result(timeout=max(0.0, left))
        except FutureTimeout:
            self.waited[receiver] = self.waited.get(receiver, 0.0) + time.perf_counter() - start
            self.timeouts += 1
            return UNKNOWN
        self.answers[receiver] = answer
        return answer


_shared: JediAttributes | None = None


def shared() -> JediAttributes | None:
    """The process's jedi engine (created on first use; jedi itself loads with the first
    query, or :meth:`JediAttributes.warm_up`), or None when jedi is not installed."""
    global _shared
    if _shared is None and available():
        _shared = JediAttributes()
    return _shared
