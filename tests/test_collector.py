"""Full garbage collections only when the worker is idle (fimconstrain/collector.py): cycles
made while requests work are found at the next idle moment, frozen ones by a sweep."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import weakref

import pytest

from fimconstrain.collector import NEVER, YOUNG_PASSES, Collector


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def collector():
    threshold = gc.get_threshold()
    collector = Collector()
    collector.install()
    yield collector
    gc.unfreeze()
    gc.set_threshold(*threshold)
    gc.collect()


def _young_passes(n: int) -> None:
    for _ in range(n):
        gc.collect(1)


def test_automatic_full_passes_are_off_once_installed(collector):
    assert gc.get_threshold()[2] == NEVER


def test_a_cycle_is_collected_at_the_next_idle_moment(collector):
    collector.sweep()  # a fresh start: everything alive now is frozen
    cycle = Node()
    dead = weakref.ref(cycle)
    _young_passes(1)  # it survives into the oldest generation, which young passes never scan
    del cycle
    _young_passes(YOUNG_PASSES - 2)
    collector.when_idle()  # too few young passes since the last full one: nothing yet
    assert dead() is not None
    _young_passes(1)
    collector.when_idle()
    assert dead() is None


def test_a_frozen_cycle_is_found_by_a_sweep(collector):
    collector.sweep()
    cycle = Node()
    dead = weakref.ref(cycle)
    _young_passes(YOUNG_PASSES)
    collector.when_idle()  # it is alive: frozen with the rest
    del cycle
    _young_passes(YOUNG_PASSES)
    gc.collect(1)
    assert dead() is not None  # out of the collector's sight
    collector.sweep()
    assert dead() is None


def test_nothing_changes_until_installed():
    collector, threshold = Collector(), gc.get_threshold()
    _young_passes(YOUNG_PASSES)
    collector.when_idle()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold


_KEPT = """
import ctypes
from fimconstrain.collector import Collector

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
Collector().install()
rows = [bytearray(600_000) for _ in range(3)]  # a step's arrays: a 151,936-token row is 0.6 MB
del rows
print(libc.mallinfo2().keepcost)
"""


def test_a_steps_arrays_stay_in_the_heap_once_freed():
    """Freed blocks under the mapping threshold stay at the heap's top for the next step,
    rather than going back to the system and being faulted in again (glibc only)."""
    try:
        ctypes.CDLL("libc.so.6").mallinfo2  # noqa: B018  (glibc 2.33 and later)
    except (OSError, AttributeError):
        pytest.skip("glibc's mallinfo2 is needed to read the heap's top")
    kept = subprocess.run([sys.executable, "-c", _KEPT], capture_output=True, text=True, check=True)
    assert int(kept.stdout) >= 3 * 600_000
