"""The server process's memory: when Python's cyclic garbage collector runs (never a full pass
while a request works), and how freed memory goes back to the system.

A full pass scans every tracked object with the interpreter lock held, and no turn-taking
(:mod:`lsp_server.turns`) can preempt it: with a large document's parse states cached that is
half a second (measured while a 5 MB file is read: 9 full passes, the longest 0.51 s). So the
automatic full passes are off; the young generations are collected as usual, and a full pass
runs when the worker goes idle, after which the survivors (the model, cached parse states,
open documents) are frozen: moved out of the collector's sight, so that the next pass looks
only at what came since. Frozen objects are still freed by reference counting; frozen cycles
are found by a sweep over everything, when a large document is closed or the frozen set has
doubled since the last sweep.

With glibc, blocks of :data:`MMAP_BYTES` or more (a large document's text, its line starts) are
always mapped on their own, so that freeing one hands it back at once; glibc's default raises
that threshold after the first such block is freed, and later ones then stay in the heap for
good (measured: 1.16x the memory after a 5 MB file was edited 40 times and closed). Setting
that threshold also stops glibc's raising of the heap's trim threshold, which would stay at
128 KiB: a decoding step's arrays (a 151,936-token row of logits is 0.6 MB, its exponentials as
much) would then be handed back when freed and faulted in anew at the next step (0.57 ms for a
step's log-normaliser against 0.16 ms), so it is set to :data:`TRIM_BYTES`, as glibc keeps it
(twice the mapping threshold) or more.
"""

from __future__ import annotations

import ctypes
import gc
import threading

#: a full pass when idle once the young generations were collected this often since the last
#: one (CPython's own threshold for its automatic full passes)
YOUNG_PASSES = 10
#: the automatic full passes' threshold while they are off
NEVER = 2**30
#: allocations this large get their own memory mapping (glibc ``M_MMAP_THRESHOLD``)
MMAP_BYTES = 1 << 20
#: free memory at the heap's top beyond this goes back to the system (glibc ``M_TRIM_THRESHOLD``)
TRIM_BYTES = 4 * MMAP_BYTES
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers, from glibc's malloc.h


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # noqa: B018  (present only in glibc)
    except (OSError, AttributeError):  # not glibc: memory stays with the process for reuse
        return None
    return libc


class Collector:
    """Full collections at idle moments; inactive (the interpreter's defaults) until installed."""

    def __init__(self) -> None:
        self.installed = False
        self.swept_size: int | None = None  # objects frozen after the last sweep
        self._lock = threading.Lock()

    def install(self) -> None:
        """Turn the automatic full passes off for this process (the server's own), and map
        large blocks on their own."""
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        self.installed = True
        libc = _glibc()
        if libc is not None:
            libc.mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES)
            libc.mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES)

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
        """A full pass over everything, frozen or not (say, after a large document was closed),
        and the heap's free memory handed back to the system where glibc can."""
        with self._lock:
            self._sweep()
        libc = _glibc()
        if libc is not None:
            libc.malloc_trim(0)

    def _sweep(self) -> None:
        gc.unfreeze()
        gc.collect()
        if self.installed:
            gc.freeze()
            self.swept_size = gc.get_freeze_count()
