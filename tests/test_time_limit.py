"""scripts/time_limit.py: it fires, lets ``except Exception`` pass it through, nests, and
puts back the handler and timer it found.

Every test runs inside conftest's own per-test limit (an enclosing limit: the nesting case);
the tests marked ``time_limit(0)`` have none, to see what the outermost limit restores."""

from __future__ import annotations

import math
import pickle
import signal
import threading
import time

import pytest
import time_limit as tl
from time_limit import TimeLimitExceeded, time_limit

pytestmark = pytest.mark.skipif(not tl.SUPPORTED, reason="no SIGALRM here: every limit is a no-op")


def timer() -> float:
    return signal.getitimer(signal.ITIMER_REAL)[0]


def test_it_fires_with_its_message_and_limit():
    limit = time_limit(0.05, "the sleep")
    t0 = time.monotonic()
    message = r"^the sleep ran past its 0.05 s time limit$"
    with pytest.raises(TimeLimitExceeded, match=message) as info, limit:
        time.sleep(5)
    assert 0.04 < time.monotonic() - t0 < 2
    assert info.value.limit is limit and info.value.seconds == 0.05 and limit.expired


def test_it_fires_in_a_busy_loop():
    with pytest.raises(TimeLimitExceeded), time_limit(0.05):
        while True:
            pass


def test_except_exception_lets_it_through():
    assert not issubclass(TimeLimitExceeded, Exception)
    swallowed = []
    with pytest.raises(TimeLimitExceeded), time_limit(0.05):
        try:
            time.sleep(5)
        except Exception as e:  # a crash handler
            swallowed.append(e)
    assert swallowed == []


def test_a_block_within_its_limit_runs_and_the_enclosing_alarm_is_back():
    enclosing = timer()  # conftest's limit
    assert enclosing > 0
    with time_limit(5) as limit:
        assert 0 < timer() <= 5 and limit.in_force
    assert not limit.expired and not limit.in_force
    assert 0 < timer() <= enclosing  # re-armed for conftest's limit


def test_no_limit_is_a_no_op():
    before = timer()
    for seconds in (None, 0, math.inf):
        with time_limit(seconds) as limit:
            assert not limit.enforced
            assert timer() <= before  # untouched: still conftest's alarm
    for bad in (-1, math.nan):
        with pytest.raises(ValueError):
            time_limit(bad)


def test_the_inner_limit_fires_and_the_outer_stays():
    outer, inner = time_limit(5, "outer"), time_limit(0.05, "inner")
    with outer:
        with pytest.raises(TimeLimitExceeded) as info, inner:
            time.sleep(5)
        assert info.value.limit is inner and not outer.expired
        assert 0 < timer() <= 5
    assert not outer.expired


def test_an_outer_limit_that_runs_out_inside_an_inner_one_raises_for_the_outer():
    outer, inner = time_limit(0.05, "outer"), time_limit(5, "inner")
    with pytest.raises(TimeLimitExceeded) as info, outer, inner:
        time.sleep(5)
    assert info.value.limit is outer and outer.expired and not inner.expired


def test_an_outer_limit_caught_inside_fires_again_once_the_inner_block_is_left():
    outer, inner = time_limit(0.05, "outer"), time_limit(5, "inner")
    caught = []
    with pytest.raises(TimeLimitExceeded) as info, outer:
        try:
            with inner:
                time.sleep(5)
        except TimeLimitExceeded as e:  # meant for the inner one
            caught.append(e.limit)
        t0 = time.monotonic()
        time.sleep(5)
    assert caught == [outer] and info.value.limit is outer
    assert time.monotonic() - t0 < 1


def test_one_limit_cannot_be_entered_twice_at_once_but_again_after():
    limit = time_limit(5, "twice")
    with limit, pytest.raises(RuntimeError, match="already in force"), limit:
        pass
    assert not limit.in_force
    with limit:
        assert limit.in_force


def test_another_thread_is_refused():
    errors = []

    def run():
        try:
            with time_limit(5, "threaded"):
                pass
        except RuntimeError as e:
            errors.append(str(e))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert errors and "main thread" in errors[0]


def test_unsupported_platform_is_a_no_op(monkeypatch):
    monkeypatch.setattr(tl, "SUPPORTED", False)
    before = signal.getsignal(signal.SIGALRM)
    with time_limit(0.01) as limit:
        time.sleep(0.05)
        assert signal.getsignal(signal.SIGALRM) is before
    assert not limit.expired


def test_the_exception_pickles():
    with pytest.raises(TimeLimitExceeded) as info, time_limit(0.01, "pickled"):
        time.sleep(5)
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is TimeLimitExceeded and str(copy) == str(info.value)


# ---------------------------------------------------------------- the outermost limit (no conftest limit)


@pytest.fixture
def alarms():
    """A handler of the test's own on SIGALRM recording what it gets; put back as found."""
    got: list[int] = []
    before = signal.signal(signal.SIGALRM, lambda signum, frame: got.append(signum))
    yield got
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, before)


@pytest.mark.time_limit(0)
def test_it_restores_the_handler_and_no_timer(alarms):
    handler = signal.getsignal(signal.SIGALRM)
    assert timer() == 0
    with time_limit(5):
        assert signal.getsignal(signal.SIGALRM) is not handler and timer() > 0
    assert signal.getsignal(signal.SIGALRM) is handler and timer() == 0
    with pytest.raises(TimeLimitExceeded), time_limit(0.02):
        time.sleep(5)
    assert signal.getsignal(signal.SIGALRM) is handler and timer() == 0
    assert alarms == []


@pytest.mark.time_limit(0)
def test_it_restores_a_pending_alarm_less_the_time_inside(alarms):
    signal.setitimer(signal.ITIMER_REAL, 30)
    with time_limit(5):
        time.sleep(0.2)
    assert 25 < timer() < 29.9
    assert alarms == []


@pytest.mark.time_limit(0)
def test_an_alarm_that_fell_due_inside_fires_once_the_limit_is_left(alarms):
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    with time_limit(5):
        time.sleep(0.1)
        assert alarms == []  # held back while the limit is in force
    time.sleep(0.2)
    assert alarms == [signal.SIGALRM]
