"""Attributes of resolvable receivers, from jedi: the name provider after ``.`` (paper 003
§3.1; its SQL engine's "columns behind an alias", appendix C.1, is the same question).

jedi (PyPI ``jedi``, the ``semantic`` extra) infers the receiver in the file around the cursor
(prefix, the middle so far, suffix) and lists its attributes. It takes tens of milliseconds
warm and seconds cold, so it runs in a worker process of its own (``python -m`` this module:
it never holds the decode loop's interpreter lock, and dies with its parent): each receiver is
asked once per file (a per-receiver cache), a query waits at most ``budget`` seconds in all,
and one that is late, fails, or finds nothing is "unknown" (fail-open: the decode loop goes on
unconstrained there, and picks the answer up on a later step if it arrives). A generation
asks ahead for the receivers written near its cursor (:func:`nearby_receivers`), so the
answer is usually in when the model types the dot. jedi's set misses attributes set
dynamically, so it is ``confident`` only for modules without a module ``__getattr__``; for
instances (``self`` included) and classes it only reranks.
"""

from __future__ import annotations

import heapq
import importlib.util
import itertools
import logging
import os
import pickle
import re
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import BinaryIO

from ...engine.names.provider import UNKNOWN, NamePoint, NameSet

log = logging.getLogger(__name__)

#: seconds a decode loop waits for one receiver's attributes, over all its steps: jedi answers
#: most receivers in a few milliseconds and the rest in 0.09-0.4 s, which a longer wait seldom
#: catches (docs/optimizations.md, "jedi's budget")
BUDGET = 0.03
#: receivers near the cursor asked for ahead, and how far from it they are looked for (each is
#: a parse of the file: more would take the processor from the model on a small machine)
AHEAD, AHEAD_CHARS = 2, 1500
#: a dotted name followed by a dot and a name (``self.x``, ``os.path.join``), not itself after a dot
_RECEIVER = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.(?=[A-Za-z_])")


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


def nearby_receivers(prefix: str, suffix: str, limit: int = AHEAD) -> list[str]:
    """The receivers written nearest the cursor (``self``, ``os.path``), up to ``limit``: the
    ones a model most likely writes next, nearest first."""
    near: dict[str, int] = {}
    start = max(0, len(prefix) - AHEAD_CHARS)
    for m in _RECEIVER.finditer(prefix, start):
        near[m.group(1)] = min(near.get(m.group(1), AHEAD_CHARS), len(prefix) - m.end())
    for m in _RECEIVER.finditer(suffix, 0, AHEAD_CHARS):
        near[m.group(1)] = min(near.get(m.group(1), AHEAD_CHARS), m.start())
    return sorted(near, key=near.__getitem__)[:limit]


def ahead_text(prefix: str, receiver: str) -> str:
    """The file up to a fresh statement ``receiver.`` on the cursor's line, in place of what the
    line holds before the cursor, indented as that line is (the same scope). A cursor at the
    start of a line has no indentation to go by (the middle writes it): the statement goes
    where the last line that holds code leaves off, one level deeper after a block's ``:``, so
    that a function's locals are in scope rather than only the module's."""
    line_start = prefix.rfind("\n") + 1
    line = prefix[line_start:]
    indent = line[: len(line) - len(line.lstrip())]
    if not line:
        indent = _indentation_after(prefix[:line_start])
    return prefix[:line_start] + indent + receiver + "."


def _indentation_after(lines: str) -> str:
    """The indentation a statement after ``lines`` would have in their last block: the last
    line with code's, one level deeper when that line opens a block."""
    for line in reversed(lines.splitlines()):
        code = line.split("#", 1)[0].rstrip()
        if code:
            indent = line[: len(line) - len(line.lstrip())]
            return indent + ("\t" if indent.startswith("\t") else "    ") if code.endswith(":") else indent
    return ""


class _Worker:
    """jedi in a process of its own, one job at a time, and a daemon thread here handing each
    answer to its future and sending the next job: a query the decode loop waits on goes before
    the ones asked ahead. The process reads its jobs from a pipe and ends when the pipe closes,
    so it never outlives its parent; if it dies, every query is unknown at once."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        #: jobs not sent yet: (ahead?, order, text, suffix, future), the first sent first
        self._waiting: list[tuple[bool, int, str, str, Future[NameSet]]] = []
        self._running: Future[NameSet] | None = None
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._collect, name="fimconstrain-jedi", daemon=True).start()

    def submit(self, text: str, suffix: str, ahead: bool = False) -> Future[NameSet]:
        """The answer for the file ``text + suffix`` (``text`` ends with ``receiver.``); a job
        ``ahead`` of the model waits behind every other."""
        future: Future[NameSet] = Future()
        with self._lock:
            heapq.heappush(self._waiting, (ahead, next(self._order), text, suffix, future))
            if self._running is None:
                self._send_next()
        return future

    def _send_next(self) -> None:
        """Send the first waiting job (the lock held; none running)."""
        while self._waiting:
            _, _, text, suffix, future = heapq.heappop(self._waiting)
            try:
                assert self._process.stdin is not None
                pickle.dump((text, suffix), self._process.stdin)
                self._process.stdin.flush()
            except (OSError, ValueError):  # the worker is gone: unknown from now on
                future.set_result(UNKNOWN)
                continue
            self._running = future
            return

    def close(self) -> None:
        """End the worker process (it ends when its pipe closes); queries are unknown from now on."""
        with self._lock:
            self._closed = True
            if self._process.stdin is not None:
                self._process.stdin.close()

    def _collect(self) -> None:
        assert self._process.stdout is not None
        while True:
            try:
                names, confident = pickle.load(self._process.stdout)
            except (EOFError, OSError, pickle.UnpicklingError):
                break
            with self._lock:
                done, self._running = self._running, None
                self._send_next()
            if done is not None:
                done.set_result(UNKNOWN if names is None else NameSet(names, confident))
        with self._lock:
            if not self._closed:
                log.warning("fimconstrain: the jedi worker stopped; attributes are unknown from now on")
            for future in [self._running, *(job[-1] for job in self._waiting)]:
                if future is not None:
                    future.set_result(UNKNOWN)
            self._running, self._waiting = None, []


class JediAttributes:
    """The long-lived part: one worker thread and an LRU of answers by (file, receiver)."""

    def __init__(self, cache_size: int = 512):
        self._worker = _Worker()
        #: (prefix hash, suffix hash, receiver, asked ahead) -> answer
        self._cache: OrderedDict[tuple[int, int, str, bool], Future[NameSet]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def warm_up(self) -> Future[NameSet]:
        """Load jedi and its builtin stubs in the background (the first query takes seconds)."""
        return self._worker.submit("import os\nos.", "\n")

    def close(self) -> None:
        """Stop jedi's worker process; every later query is unknown."""
        self._worker.close()

    def for_file(self, prefix: str, suffix: str, budget: float = BUDGET) -> FileAttributes:
        """The provider for one generation between ``prefix`` and ``suffix``; each receiver's
        answer is waited for ``budget`` seconds at most, over all steps. The receivers nearest
        the cursor are asked for now, ahead of the model."""
        attributes = FileAttributes(self, (hash(prefix), hash(suffix)), budget)
        for receiver in nearby_receivers(prefix, suffix):
            key = (*attributes.keys, receiver, True)
            future = self.query(key, ahead_text(prefix, receiver), suffix, ahead=True)
            attributes.ahead[receiver] = future
            future.add_done_callback(attributes.note_ahead_answer)
        return attributes

    def query(
        self, key: tuple[int, int, str, bool], text: str, suffix: str, ahead: bool = False
    ) -> Future[NameSet]:
        """The (maybe running) answer for ``key``, submitted on the first ask (``ahead``: behind
        every query the decode loop waits on)."""
        with self._lock:
            future = self._cache.get(key)
            if future is None:
                future = self._cache[key] = self._worker.submit(text, suffix, ahead)
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
    """:class:`~fimconstrain.engine.names.provider.NameProvider` for attributes in one
    generation: answers per receiver, each waited for at most the budget in all. Nothing is
    waited for once jedi has shown itself slow on this file (an answer asked ahead came, or is
    still to come, later than the budget after it was asked): a question asked now queues
    behind that work and parses the same file, so it would not come within the budget either
    (docs/optimizations.md, "jedi's budget"); its answer is still taken at a later step."""

    def __init__(self, shared: JediAttributes, file_key: tuple[int, int], budget: float):
        self.shared = shared
        self.keys, self.budget = file_key, budget
        self.answers: dict[str, NameSet] = {}
        #: receivers asked for ahead, at a statement of their own on the cursor's line: their
        #: answer stands when it knows the receiver, else the receiver is asked where it is written
        self.ahead: dict[str, Future[NameSet]] = {}
        self.waited: dict[str, float] = {}
        #: when the questions ahead were asked, and whether one was answered later than the budget
        self.asked_at = time.perf_counter()
        self.slow_ahead = False
        self.timeouts = 0
        #: questions not waited for, jedi being slow on this file
        self.not_waited = 0
        #: seconds the decode loop waited for answers in all (answered or not)
        self.waited_total = 0.0

    def names(self, point: NamePoint) -> NameSet:
        receiver = point.receiver
        if receiver is None:
            return UNKNOWN
        answer = self.answers.get(receiver)
        if answer is not None:
            return answer
        ahead = self.ahead.get(receiver)
        if ahead is not None:
            answer = self._wait(receiver, ahead)
            if answer is None:
                return UNKNOWN
            if answer.names is not None:
                return answer
        future = self.shared.query((*self.keys, receiver, False), point.text, point.suffix)
        answer = self._wait(receiver, future)
        return UNKNOWN if answer is None else answer

    def note_ahead_answer(self, future: Future[NameSet]) -> None:
        """A question asked ahead is answered (called on the worker's thread, or at once)."""
        if time.perf_counter() - self.asked_at > self.budget:
            self.slow_ahead = True

    def jedi_is_slow(self) -> bool:
        """Whether a question asked ahead took, or is taking, longer than the budget."""
        if self.slow_ahead:
            return True
        late = time.perf_counter() - self.asked_at > self.budget
        return late and not all(future.done() for future in self.ahead.values())

    def _wait(self, receiver: str, future: Future[NameSet]) -> NameSet | None:
        """``future``'s answer, kept, or None (counted as a timeout) when the receiver's budget
        runs out first; not waited for (counted in ``not_waited``) while jedi is slow here."""
        if not future.done() and self.jedi_is_slow():
            self.not_waited += 1
            return None
        left = self.budget - self.waited.get(receiver, 0.0)
        start = time.perf_counter()
        try:
            answer = future.result(timeout=max(0.0, left))
        except FutureTimeout:
            waited = time.perf_counter() - start
            self.waited[receiver] = self.waited.get(receiver, 0.0) + waited
            self.waited_total += waited
            self.timeouts += 1
            return None
        self.waited_total += time.perf_counter() - start
        if answer.names is not None or future is not self.ahead.get(receiver):
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


def _serve(jobs: BinaryIO, answers: BinaryIO) -> None:
    """The worker process's loop: ``(text, suffix)`` in, ``(names or None, confident)`` out
    (plain values: the parent builds the :class:`NameSet`), until either pipe closes."""
    while True:
        try:
            text, suffix = pickle.load(jobs)
        except EOFError:
            return
        answer = _safe(text, suffix)
        try:
            pickle.dump((answer.names, answer.confident), answers)
            answers.flush()
        except BrokenPipeError:  # the parent exited while jedi worked: end without a traceback,
            # and let the flush at exit write to nothing (the pipe is gone)
            os.dup2(os.open(os.devnull, os.O_WRONLY), answers.fileno())
            return


if __name__ == "__main__":
    # the protocol owns stdout; anything jedi prints goes to stderr
    _protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr
    _serve(sys.stdin.buffer, _protocol)
