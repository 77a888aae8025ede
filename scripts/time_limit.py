"""A hard time limit for a block of code (SIGALRM), shared by the tests and the benchmarks.

::

    from time_limit import TimeLimitExceeded, time_limit

    try:
        with time_limit(30, "case 17"):
            run_case(17)
    except TimeLimitExceeded:
        record_timeout(17)

How it behaves:

* **It raises** :class:`TimeLimitExceeded` in the main thread, from whatever Python code is
  running when the time is up. It is a ``BaseException``, not an ``Exception``, so that crash
  handlers (``except Exception``, in the engine or in a fuzzer's harness) let it through to
  the ``except TimeLimitExceeded`` that asked for the limit. The signal is handled between
  bytecodes: one long call into C (a big regex match, a C extension's loop) delays it until
  that call returns.
* **No limit**: ``seconds`` of ``None``, ``0`` or infinity makes the block a no-op, so a caller
  can pass an optional setting straight through; a negative or NaN ``seconds`` is a
  ``ValueError``.
* **Where**: on POSIX, in the main thread only (``signal.signal`` works nowhere else).
  Entered in another thread it raises ``RuntimeError`` rather than run without the limit
  the caller asked for. Where there is no ``SIGALRM``/``setitimer`` (Windows) every limit is
  a no-op; :data:`SUPPORTED` says which.
* **Nesting**: limits nest. The alarm is set for the earliest deadline of the limits in
  force; when it fires, the outermost limit whose deadline has passed raises (its block is
  the one that must end). An enclosing limit that expires inside an inner block raises
  there, with the same class, so an ``except TimeLimitExceeded`` around the inner block
  catches it too: it is not lost, since leaving the inner block re-arms the alarm and an
  enclosing limit past its deadline fires again at once (within a millisecond). Code that
  catches timeouts case after case and must not count an enclosing limit's as its own
  compares ``error.limit is limit``. Limits are left in the reverse order of entering, as
  ``with`` blocks are; leaving one also ends any limit entered inside it and not left (one
  whose ``__enter__`` was interrupted). One limit object cannot be entered twice at once
  (``RuntimeError``); it can be entered again after it is left.
* **Restoring**: entering the outermost limit saves the ``SIGALRM`` handler and the
  ``ITIMER_REAL`` timer in place before (someone else's alarm); leaving it puts both back, the
  timer less the time spent inside (at once, within a millisecond, if it fell due
  meanwhile). That alarm is held back while a limit is in force. Code inside a limit must not
  set ``SIGALRM`` or ``ITIMER_REAL`` itself (this module cannot see it; it would break the
  limit).

The standard library only: the tests (``tests/conftest.py``: every test's limit) and the
benchmarks (``benchmarks/_common.py``, ``benchmarks/cut_fuzz.py``) import it, the engine does not.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from types import FrameType, TracebackType
from typing import Any

__all__ = ["SUPPORTED", "TimeLimitExceeded", "time_limit"]

#: whether limits are enforced here (POSIX ``SIGALRM`` and ``setitimer``); elsewhere a no-op
SUPPORTED = hasattr(signal, "SIGALRM") and hasattr(signal, "setitimer")

# An alarm due now (a deadline already past) is set this far ahead: setitimer(0) disarms.
_SOON = 0.001


class TimeLimitExceeded(BaseException):
    """A :func:`time_limit` ran out. A ``BaseException``: ``except Exception`` lets it pass.

    ``limit`` is the limit that ran out (compare it with ``is`` to tell your own from an
    enclosing one), ``seconds`` its length.
    """

    def __init__(self, message: str, limit: time_limit | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.seconds = limit.seconds if limit is not None else None

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (a worker process's result); the limit stays behind
        return (type(self), (str(self),))


class time_limit:  # lower case: it reads as a function, ``with time_limit(5): ...``
    """A context manager: raise :class:`TimeLimitExceeded` if the block runs past ``seconds``.

    ``what`` names the block in the message (``"<what> ran past its 5 s time limit"``).
    ``expired`` is True once this limit has raised. See the module's docstring for nesting,
    threads and what is restored.
    """

    def __init__(self, seconds: float | None, what: str = "the block") -> None:
        if seconds is not None and (math.isnan(seconds) or seconds < 0):
            raise ValueError(f"a time limit must be positive, None or 0 (no limit), not {seconds!r}")
        self.seconds = seconds
        self.what = what
        self.expired = False
        self._deadline: float | None = None  # monotonic, while in force

    @property
    def enforced(self) -> bool:
        """Whether entering this limit sets an alarm (False: no limit, or not SUPPORTED)."""
        return SUPPORTED and bool(self.seconds) and not math.isinf(self.seconds or 0)

    def __enter__(self) -> time_limit:
        if not self.enforced:
            return self
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(
                f"time_limit: {self.what} is not in the main thread (SIGALRM reaches the main thread only)"
            )
        if self.in_force:
            raise RuntimeError(f"time_limit: the limit of {self.what} is already in force")
        assert self.seconds is not None
        if not _active:
            _save_outer()
        self.expired = False
        deadline = time.monotonic() + self.seconds
        _active.append(self)
        self._deadline = deadline  # after the append: an interrupted enter leaves an entry without one
        _arm()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        index = next((k for k, limit in enumerate(_active) if limit is self), None)
        if index is None:  # no limit, or already ended by an enclosing limit's exit
            return
        # Leave _active first: from here on the alarm handler does not raise for this limit
        # (nor for those inside it), only for an enclosing one that has run out.
        ended = _active[index:]
        del _active[index:]
        for limit in ended:
            limit._deadline = None
        if _active:
            _arm()
        else:
            _restore_outer()

    @property
    def in_force(self) -> bool:
        """Whether the block is running under this limit (entered, enforced, not left)."""
        return any(limit is self for limit in _active)

    def __repr__(self) -> str:
        state = "in force" if self.in_force else ("expired" if self.expired else "idle")
        return f"time_limit({self.seconds!r}, {self.what!r}) <{state}>"


# The limits in force, outermost first (the main thread's only), and what the outermost replaced:
# (SIGALRM handler, (delay, interval) of ITIMER_REAL, monotonic time it was saved).
_active: list[time_limit] = []
_outer: tuple[Any, tuple[float, float], float] | None = None


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    now = time.monotonic()
    for limit in _active:  # outermost first: its block is the one that must end
        if limit._deadline is not None and limit._deadline <= now + _SOON:
            limit.expired = True
            raise TimeLimitExceeded(f"{limit.what} ran past its {limit.seconds:g} s time limit", limit)
    _arm()  # early, or a limit was left meanwhile: wait for the earliest deadline again


def _arm() -> None:
    """Set the alarm for the earliest deadline in force (none in force: leave it off)."""
    deadlines = [limit._deadline for limit in _active if limit._deadline is not None]
    if deadlines:
        signal.setitimer(signal.ITIMER_REAL, max(min(deadlines) - time.monotonic(), _SOON))


def _save_outer() -> None:
    global _outer
    timer = signal.setitimer(signal.ITIMER_REAL, 0)  # stop someone else's alarm first, then take over
    handler = signal.signal(signal.SIGALRM, _on_alarm)
    _outer = (handler, timer, time.monotonic())


def _restore_outer() -> None:
    global _outer
    signal.setitimer(signal.ITIMER_REAL, 0)
    if _outer is None:
        return
    handler, (delay, interval), saved_at = _outer
    _outer = None
    # None: a handler not set from Python; SIG_DFL is what that was unless C code set one.
    # signal.signal runs a pending alarm first (ours, with nothing in force: it does nothing).
    signal.signal(signal.SIGALRM, signal.SIG_DFL if handler is None else handler)
    if delay:  # it was armed (a zero delay is off, whatever the interval)
        remaining = delay - (time.monotonic() - saved_at)
        signal.setitimer(signal.ITIMER_REAL, max(remaining, _SOON), interval)
