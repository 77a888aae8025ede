"""When Python's cyclic garbage collector runs in the server: never a full pass while a request
works.

A full pass scans every tracked object with the interpreter lock held, and no turn-taking
(:mod:`lsp_server.turns`) can preempt it: with a large document's parse states cached that is
half a second (measured while a 5 MB file is read: 9 full passes, the longest 0.51 s). So the
automatic full passes are off; the young generations are collected as usual, and a full pass
runs when the worker goes idle, after which the survivors (the model, cached parse states,
open documents) are frozen: moved out of the collector's sight, so that the next pass looks
only at what came since. Frozen objects are still freed by reference counting; frozen cycles
are found by a sweep over everything, when a large document is closed or the frozen set has
doubled since the last sweep.
"""

from __future__ import annotations

import gc
import threading

#: a full pass when idle once the young generations were collected this often since the last
#: one (CPython's own threshold for its automatic full passes)
YOUNG_PASSES = 10
#: the automatic full passes' threshold while they are off
NEVER = 2**30


class Collector:
    """Full collections at idle moments; inactive (the interpreter's defaults) until installed."""

    def __init__(self) -> None:
        self.installed = False
        self.swept_size: int | None = None  # objects frozen after the last sweep
        self._lock = threading.Lock()

    def install(self) -> None:
        """Turn the automatic full passes off for this process (the server's own)."""
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        self.installed = True

    def when_idle(self) -> None:
        """Called when no request works or waits: a full pass over what came since the last one,
        or a sweep over everything once the frozen set has doubled."""
        if not self.installed or gc.get_count()[2] < YOUNG_PASSES:
            return
        with self._lock:
            if self.swept_size is None or gc.get_freeze_count() > 2 * self.swept_size:
                self._sweep()
            else:
                gc.collect()
                gc.freeze()

    def sweep(self) -> None:
        """A full pass over everything, frozen or not (say, after a large document was closed)."""
        with self._lock:
            self._sweep()

    def _sweep(self) -> None:
        gc.unfreeze()
        gc.collect()
        if self.installed:
            gc.freeze()
            self.swept_size = gc.get_freeze_count()
