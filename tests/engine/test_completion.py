"""shortest_finish: the text it returns always completes the program, and it finds one often."""

import random
import sysconfig
from pathlib import Path

from conftest import ast_ok as parses
from conftest import fc  # fim_checker at the running version: the oracle here is its ast.parse

FILES = ["textwrap.py", "shlex.py", "fnmatch.py", "bisect.py", "colorsys.py", "heapq.py"]


def _sources():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return [(stdlib / name).read_text("utf-8") for name in FILES if (stdlib / name).exists()]


def test_small_cases():
    cases = [
        ("def f(a, b):\n    return (a + ", ""),
        ("x = [1, {'a': (2", ""),
        ("@dec", ""),
        ("try:\n    pass\n", ""),
        ("match x:\n    case ", ""),
        ("s = '''abc", ""),
        ("x = 1  # comm", ""),
        ("if x:\n", ""),
        ("def f():\n    x = ", "\n    return x\n"),
        ("foo(a,", ")\n"),
        ("x = 1 +", " 2\ny = 3\n"),
        ('x = f"a {b', ""),
        ('s = "\\u12', ""),
        ("s = b'\\x4", "\nt = 1\n"),
    ]
    for prefix, suffix in cases:
        checker = fc().fim_checker(prefix, suffix)
        text = checker.shortest_finish()
        assert text is not None, (prefix, suffix)
        assert checker.feed(text).is_complete()
        assert parses(prefix + text + suffix), (prefix, text, suffix)


def test_random_states_of_real_files():
    rng = random.Random(7)
    found = {"prefix": [0, 0], "fim": [0, 0]}
    for source in _sources():
        for _ in range(8):
            a = rng.randrange(len(source))
            b = min(len(source), a + rng.randint(1, 150))
            middle = source[a : rng.randint(a, b)]
            for mode, suffix in (("prefix", ""), ("fim", source[b:])):
                checker = fc().fim_checker(source[:a], suffix).feed(middle)
                if checker is None:
                    continue
                found[mode][1] += 1
                text = checker.shortest_finish()
                if text is not None:
                    found[mode][0] += 1
                    assert parses(source[:a] + middle + text + suffix)
    # a search under a time limit: it must succeed nearly always (measured: 48/48 prefix, 46/48 FIM)
    assert found["prefix"][0] >= 0.85 * found["prefix"][1], found
    assert found["fim"][0] >= 0.85 * found["fim"][1], found


def test_bridges_start_the_construct_the_suffix_goes_on_with():
    # (prefix, a middle gone astray, suffix): the finish must open what the suffix continues
    cases = [
        ("x = 1\n", "y = 2", ":\n    return 1\nz = 3\n"),  # a block header
        ("x = 1\n", "y", "in range(3):\n    pass\n"),  # for ... in
        ("x = 1\n", "z = (1,", ") -> int:\n    return 1\n"),  # def f(...)
        ("import os\n", "os.sep", "orted(x):\n    pass\n"),  # a name cut by the cursor
        ("x = 1\n", "y = x", 'world", 1)\nz = 2\n'),  # a string and a call
        (
            "class A:\n    def f(self):\n        pass\n",
            "t = 1\n",  # the levels it dedents to
            "        x = 1\n    def g(self):\n        pass\n",
        ),
        (
            "def f():\n    if a:\n        pass\n",
            "        q",  # a try its except needs
            "            g()\n        except E:\n            pass\n",
        ),
        # brackets the suffix closes, nested, then what follows them
        ("x = 1\n", "", ", int],\n    port: int,\n) -> str:\n    return 1\n"),  # def f(a: B[[
        ("def f(n):\n", "    if n", ", ValueError):\n        pass\n    return 1\n"),  # try/except (A
        ("x = 1\n", "y = f(", "1]\n):\n    pass\n"),  # if (A[
        ("import os\n", "", "e_event)):\n    g()\n"),  # for A in A(A(
    ]
    for prefix, middle, suffix in cases:
        checker = fc().fim_checker(prefix, suffix).feed(middle)
        assert checker is not None, (prefix, middle, suffix)
        text = checker.shortest_finish(seconds=10)
        assert text is not None, (prefix, middle, suffix)
        assert checker.feed(text).is_complete()
        assert parses(prefix + middle + text + suffix), (prefix, middle, text, suffix)


def test_the_bridge_tables_are_worked_out_once_and_prepared_at_load():
    """engine.prepare builds the finish search's grammar-wide tables; later searches reuse them
    (compiled by mypyc, a functools.cached_property cached nothing: every new opener worked
    them out again, about 0.1 s each)."""
    from fimconstrain.engine import get_layer, prepare
    from fimconstrain.engine.finishing.bridging import bridge_planner

    prepare("python", "3.12")
    planner = bridge_planner(get_layer("python", "3.12"))
    first_after, left_contexts = planner.prepare()
    again = planner.prepare()  # (a new tuple under mypyc: its parts are what stays)
    assert again[0] is first_after and again[1] is left_contexts
    assert left_contexts and len(first_after) > max(left_contexts)


def test_threads_that_ask_for_a_layer_first_share_one():
    """A decoder's thread prepares the layer at load while a first request asks for it: both get
    the same layer (a mask store serves one layer object)."""
    import threading

    from fimconstrain.engine import get_layer, register_language

    name = f"json-{random.random()}"  # a language never built before in this process
    register_language(name, "json", "value")
    start = threading.Barrier(4)
    layers = []

    def ask() -> None:
        start.wait()
        layers.append(get_layer(name))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(layers) == 4 and all(layer is layers[0] for layer in layers)
