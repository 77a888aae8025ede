"""The C Earley closure (``engine/_earley.c``) against the Python loops it twins
(``Recognizer._close``, and ``ForgetfulRecognizer._close_forgetting`` for the suffix's
refutation), set for set, on the real Python grammars.

Two recognizers over one grammar, one closing sets in C and one in Python, read the same random
walks: from the start, a few terminals at a time (one, or several at once as a lexeme that may be
either), mostly ones the set expects, sometimes any, and now and then from an earlier set (the
lexer forks parses that way). Every set the C closure builds must be the Python loop's: the same
symbols waited for in the same order, the same items in each bucket in the same order, their
origins the twin sets, the same acceptance and the same predicted terminals. Where the C closure
is not built, or ``FIMCONSTRAIN_ENGINE=python`` leaves it out, the C recognizer would run the
Python loop too, and the tests say so by skipping (CI builds it, and runs them where it serves).
"""

from __future__ import annotations

import os
import random

import pytest

import fimconstrain
from fimconstrain.engine import native
from fimconstrain.engine.automata.earley import EarleySet, Recognizer
from fimconstrain.engine.quotients.refutation import ForgetfulRecognizer, infix_recognizer

#: the sources asked for (CI's second run of the engine's tests): the C closure is left out
SOURCES_ASKED = os.environ.get(native.ENV_VAR, "").strip().lower() == "python"
pytestmark = pytest.mark.skipif(
    native.closure_extension() is None and (SOURCES_ASKED or not os.environ.get("CI")),
    reason="the C Earley closure is not built here, or FIMCONSTRAIN_ENGINE=python leaves it out",
)


def _same(c_set: EarleySet, py_set: EarleySet, twins: dict[int, EarleySet]) -> None:
    """``c_set`` is ``py_set`` item for item, its origins the twins of ``py_set``'s."""
    assert c_set.accepting == py_set.accepting
    assert list(c_set.waiting) == list(py_set.waiting)
    for symbol, c_items in c_set.waiting.items():
        py_items = py_set.waiting[symbol]
        assert [dot for dot, _ in c_items] == [dot for dot, _ in py_items]
        for (_, c_origin), (_, py_origin) in zip(c_items, py_items):
            assert (py_origin is None) if c_origin is None else twins[id(c_origin)] is py_origin
    assert c_set.prediction.terminals == py_set.prediction.terminals
    twins[id(c_set)] = py_set


@pytest.mark.parametrize("version", ["3.8", "3.12", "3.14"])
def test_the_c_closure_builds_the_python_loops_sets(version: str) -> None:
    grammar = fimconstrain.fim_checker("", "", python_version=version).layer.recognizer.grammar
    in_c, in_python = Recognizer(grammar), Recognizer(grammar, c_closure=False)
    terminals = list(range(grammar.n_terminals))
    rng = random.Random(int(version[2:]))
    twins: dict[int, EarleySet] = {}
    _same(in_c.initial, in_python.initial, twins)
    met: list[tuple[EarleySet, EarleySet]] = [(in_c.initial, in_python.initial)]
    built = rejected = accepting = 0
    for _ in range(60):
        c_set, py_set = met[0] if rng.random() < 0.5 else rng.choice(met)
        for _ in range(rng.randrange(1, 60)):
            expected = in_c.expected_terminals(c_set)
            assert expected == in_python.expected_terminals(py_set)
            allowed = [t for t in terminals if expected >> t & 1]
            pool = terminals if rng.random() < 0.1 or not allowed else allowed
            read = tuple(sorted(set(rng.choices(pool, k=rng.choice((1, 1, 1, 2, 3))))))
            c_after, py_after = in_c.scan(c_set, read), in_python.scan(py_set, read)
            if c_after is None or py_after is None:
                assert c_after is py_after is None, read
                rejected += 1
                continue
            _same(c_after, py_after, twins)
            built += 1
            accepting += c_after.accepting
            c_set, py_set = c_after, py_after
            met.append((c_set, py_set))
    # both verdicts were met many times (the comparison was not vacuous)
    assert built > 500 and rejected > 20 and accepting > 0


def test_the_recognizers_of_a_build_close_in_c() -> None:
    """Where the C closure is built, a checker's recognizer uses it (the differential above
    would otherwise compare the Python loop with itself)."""
    checker = fimconstrain.fim_checker("x = [1,", "")
    grammar = checker.layer.recognizer.grammar
    assert Recognizer(grammar).uses_c_closure
    assert checker.layer.recognizer.uses_c_closure
    assert not Recognizer(grammar, c_closure=False).uses_c_closure


def _forgotten(state: EarleySet) -> dict[int, list[tuple[int, bool]]]:
    """A forgetful set's items by symbol, as (dot, whether it has an origin), sorted: the set is
    the first one met with those items, so their order is the history's, in either recognizer."""
    return {
        sym: sorted((dot, origin is not None) for dot, origin in items)
        for sym, items in state.waiting.items()
    }


@pytest.mark.parametrize("version", ["3.8", "3.14"])
def test_the_c_closure_forgets_origins_as_the_python_loop_does(version: str) -> None:
    """The suffix's refutation reads from the universal set with recognizers that forget origins
    (``ForgetfulRecognizer``); its C twin (``scan_forgetting``) must build the sets its Python loop
    builds, over the layout-erased grammar and the full one: the same items (origins: the
    universal set or none), acceptance and predicted terminals."""
    infix = infix_recognizer(fimconstrain.fim_checker("", "", python_version=version).layer)
    rng = random.Random(int(version[2:]))
    for universal, in_c in (
        (infix.universal, infix.recognizer),
        (infix.full_universal, infix.layout_layer.recognizer),
    ):
        assert isinstance(in_c, ForgetfulRecognizer) and in_c.uses_c_closure
        in_python = ForgetfulRecognizer(Recognizer(in_c.grammar), universal, c_closure=False)
        terminals = list(range(in_c.grammar.n_terminals))
        built = rejected = 0
        for _ in range(40):
            c_set = py_set = universal
            for _ in range(rng.randrange(1, 40)):
                expected = in_c.expected_terminals(c_set)
                assert expected == in_python.expected_terminals(py_set)
                allowed = [t for t in terminals if expected >> t & 1]
                pool = terminals if rng.random() < 0.1 or not allowed else allowed
                read = tuple(sorted(set(rng.choices(pool, k=rng.choice((1, 1, 2))))))
                c_after, py_after = in_c.scan(c_set, read), in_python.scan(py_set, read)
                if c_after is None or py_after is None:
                    assert c_after is py_after is None, read
                    rejected += 1
                    continue
                assert _forgotten(c_after) == _forgotten(py_after)
                assert c_after.accepting == py_after.accepting
                assert c_after.prediction.terminals == py_after.prediction.terminals
                built += 1
                c_set, py_set = c_after, py_after
        assert built > 300 and rejected > 5
