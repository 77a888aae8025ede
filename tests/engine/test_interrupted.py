"""Reading a long prefix can be put aside (``should_stop``) and resumed: the work is kept, and
the checker that comes out at the end is the one an uninterrupted call gives."""

from __future__ import annotations

import pytest
from conftest import fc


def _program(lines: int) -> str:
    return "".join(f"value_{i} = {i} * 2\n" for i in range(lines))


def test_an_interrupted_build_resumes_where_it_stopped():
    fc().clear_caches()
    prefix = _program(3000) + "total = ("
    asked = []

    def stop_after_a_few() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(fc().Interrupted):
        fc().fim_checker(prefix, ")\n", should_stop=stop_after_a_few)
    first_round = len(asked)
    calls = []
    checker = fc().fim_checker(prefix, ")\n", should_stop=lambda: calls.append(1) or False)
    assert checker.feed("1 + 2").is_complete() and not checker.feed("1 +").is_complete()
    whole = len(prefix) // 256  # about one question per checkpoint
    assert first_round + len(calls) <= whole + 8  # the second call did not start over


def test_a_short_prefix_never_asks():
    asked = []
    fc().fim_checker("x = (", ")\n", should_stop=lambda: asked.append(1) or True)
    assert not asked


def test_interrupted_is_a_fimconstrain_error():
    assert issubclass(fc().Interrupted, fc().FimConstrainError)


def test_reading_a_long_suffix_tail_is_interrupted_and_resumed():
    """The cursor near the top of a large file: the suffix's tail (its top-level statements)
    is read like a prefix, so it can be put aside and resumed, and the verdict is the same."""
    fc().clear_caches()
    suffix = ")\n" + _program(3000)
    asked = []

    def stop_after_a_few() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(fc().Interrupted):
        fc().fim_checker("total = (", suffix, should_stop=stop_after_a_few)
    first_round = len(asked)
    calls = []
    checker = fc().fim_checker("total = (", suffix, should_stop=lambda: calls.append(1) or False)
    assert checker.feed("1 + 2").is_complete() and not checker.feed("1 +").is_complete()
    assert first_round + len(calls) <= len(suffix) // 256 + 8  # the second call did not start over


def test_an_edit_near_the_end_of_the_suffix_rereads_only_from_there():
    fc().clear_caches()
    suffix = ")\n" + _program(3000)
    fc().fim_checker("total = (", suffix)
    always = lambda: True  # any question at all interrupts
    checker = fc().fim_checker("total = (", suffix + "extra = 1\n", should_stop=always)
    assert checker.feed("1").is_complete()  # read from the last checkpoint: nothing to ask
    with pytest.raises(fc().Interrupted):  # an edit at the top: the whole tail is read again
        fc().fim_checker("total = (", ")\nextra = 1\n" + _program(3000), should_stop=always)
    with pytest.raises(fc().UncompletableError):  # a tail no middle can mend is still found
        fc().fim_checker("total = (", suffix + "extra = (\n")
