"""A long-running process's memory: when Python's cyclic garbage collector runs, and how freed
memory goes back to the system.

A full pass scans every tracked object with the interpreter lock held, and nothing can preempt
it: with torch imported and a vocabulary's tables built that is 0.13-0.24 s, and with a large
document's parse states cached in the language server half a second (measured while a 5 MB
file is read: 9 full passes, the longest 0.51 s). A pass that lands in a request stalls it; in a
serving worker the whole batch's step waits for it. Two policies keep such passes short:

* :class:`Collector` (the language server's): the automatic full passes are off; the young
  generations are collected as usual, and a full pass runs when the process goes idle, after
  which the survivors (the model, cached parse states, open documents) are frozen: moved out of
  the collector's sight, so that the next pass looks only at what came since. Frozen objects
  are still freed by reference counting; frozen cycles are found by a sweep over everything,
  when a large document is closed or the frozen set has doubled since the last sweep.
* :func:`freeze_after_full_passes` (a serving pool worker's, which is never idle for long):
  the automatic passes stay, and what survives each is frozen.

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
        """Turn the automatic full passes off for this process (the language server's own), and
        map large blocks on their own."""
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


def freeze_after_full_passes() -> None:
    """For a process whose idle moments are too short to hold a full pass (a serving pool
    worker, asked again a few milliseconds after it answers): the automatic full passes stay on,
    but what is alive now, and from now on what survives each full pass, is frozen, so that a
    pass scans only what came since the last one. Cycles are never looked for among frozen
    objects: the engine makes none, and the passes measured in a worker collected none.
    Idempotent."""
    gc.collect()
    gc.freeze()
    if _freeze_survivors not in gc.callbacks:
        gc.callbacks.append(_freeze_survivors)


def _freeze_survivors(phase: str, info: dict[str, int]) -> None:
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()
