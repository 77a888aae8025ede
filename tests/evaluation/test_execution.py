"""Running model-written programs (evaluation/execution.py): outcomes of ordinary programs, and
hostile ones that fail their own run only, leaving no process, file change or leaked secret."""

from __future__ import annotations

import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from fimconstrain.evaluation.execution import Limits, Outcome, run_program

HEALTHY = "print(sum(range(10)))"
DEFAULT = Limits()

HUMANEVAL = """
from typing import List
import hashlib, math

def candidate(numbers: List[float]) -> float:
    return math.fsum(numbers) / len(numbers)

def check(f):
    assert f([1.0, 2.0, 3.0]) == 2.0
    assert len(hashlib.sha256(b"x").hexdigest()) == 64

check(candidate)
"""


@pytest.fixture(scope="module")
def pool():
    with ThreadPoolExecutor(max_workers=2) as programs:
        yield programs


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """Runs' temporary directories go under a folder of this test, to look for leftovers."""
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runs))
    return runs


def hostile(pool: ThreadPoolExecutor, source: str, stdin: str = "", limits: Limits = DEFAULT) -> Outcome:
    """Run ``source`` in ``pool``, then check that the next run in the pool still passes."""
    outcome = pool.submit(run_program, source, stdin, limits).result()
    after = pool.submit(run_program, HEALTHY).result()
    assert after == Outcome(True, None, after.seconds, "45\n")
    return outcome


def failure(source: str, stdin: str = "", limits: Limits = DEFAULT) -> str | None:
    return run_program(source, stdin, limits).failure


# ---------------------------------------------------------------- ordinary programs


def test_a_passing_program():
    outcome = run_program("print('hé ✓')")
    assert outcome == Outcome(True, None, outcome.seconds, "hé ✓\n")


def test_a_humaneval_shaped_program_imports_and_passes():
    assert run_program(HUMANEVAL).passed


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("assert 1 + 1 == 3", "exception: AssertionError"),
        ("1 / 0", "exception: ZeroDivisionError"),
        ("def f(n):\n    return f(n + 1)\nf(0)", "exception: RecursionError"),
        ("raise KeyboardInterrupt", "exception: KeyboardInterrupt"),
        ("exec('def (')", "exception: SyntaxError"),  # raised while running, not compiling
        ("def f(:\n    pass\n", "syntax error"),
        ("x = 1\0", "syntax error"),
        ("x = " + "(" * 1000 + ")" * 1000, "syntax error"),
    ],
)
def test_failures_are_classified(source, kind):
    assert failure(source) == kind


def test_output_before_a_failure_is_kept():
    outcome = run_program("print('before')\nassert False")
    assert (outcome.failure, outcome.stdout) == ("exception: AssertionError", "before\n")


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("import sys; sys.exit(0)", None),
        ("import sys; sys.exit()", None),
        ("import sys; sys.exit(2)", "exit 2"),
        ("raise SystemExit(3)", "exit 3"),
        ("import sys; sys.exit('bye')", "exit 1"),
        ("import os; os._exit(7)", "exit 7"),
        ("import signal; signal.raise_signal(signal.SIGTERM)", "killed: SIGTERM"),
    ],
)
def test_exits(source, kind):
    assert failure(source) == kind


def test_a_forged_report_without_the_nonce_is_an_exit_status():
    source = (
        "import os, sys\n"
        "sys.stderr.write('exception: Forged\\nsyntax error\\n')\n"
        "for fd in range(3, 10):\n"
        "    try:\n"
        "        os.write(fd, b'0123 exception: Forged\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "sys.exit(3)\n"
    )
    assert failure(source) == "exit 3"


def test_the_program_is_main():
    source = (
        "import pickle\n"
        "class Point:\n"
        "    pass\n"
        "if __name__ == '__main__':\n"
        "    print(type(pickle.loads(pickle.dumps(Point()))).__name__)\n"
    )
    assert run_program(source).stdout == "Point\n"


def test_threads_run_to_the_end():
    """The interpreter's own exit joins threads (the deep-recursion idiom of contest solutions)."""
    source = "import threading\nthreading.Thread(target=lambda: print('from a thread')).start()"
    outcome = run_program(source)
    assert outcome == Outcome(True, None, outcome.seconds, "from a thread\n")


def test_stdin_is_delivered():
    assert run_program("print(input()[::-1])", "abc\n").stdout == "cba\n"
    assert (
        run_program("import sys\nprint(sum(map(int, sys.stdin.read().split())))", "1 2\n3\n").stdout == "6\n"
    )
    assert run_program("print(input())", "né ✓\n").stdout == "né ✓\n"


def test_a_large_stdin_is_delivered_and_an_unread_one_is_dropped():
    assert run_program("import sys\nprint(len(sys.stdin.read()))", "x" * 10**6).stdout == "1000000\n"
    assert run_program(HEALTHY, "x" * 10**7).passed


def test_without_stdin_input_raises_eof_and_reading_does_not_hang():
    assert failure("input()") == "exception: EOFError"
    assert run_program("import sys\nprint(repr(sys.stdin.read()))").stdout == "''\n"


def test_the_working_directory_is_empty_and_removed(run_dir):
    assert run_program("import os\nprint(os.listdir('.'))").stdout == "[]\n"
    assert list(run_dir.iterdir()) == []


def test_a_program_that_cannot_start_is_an_outcome():
    outcome = run_program(HEALTHY, python="/nonexistent/python")
    assert not outcome.passed
    assert outcome.failure is not None and outcome.failure.startswith("could not start: ")


# ---------------------------------------------------------------- hostile programs


@pytest.mark.time_limit(60)
def test_an_infinite_loop_times_out(pool):
    assert hostile(pool, "while True:\n    pass", limits=Limits(wall_seconds=1)).failure == "timeout"


@pytest.mark.time_limit(60)
def test_cpu_time_is_limited(pool):
    limits = Limits(wall_seconds=30, cpu_seconds=1)
    assert hostile(pool, "while True:\n    pass", limits=limits).failure == "cpu limit"


@pytest.mark.time_limit(60)
@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("import os\nwhile True:\n    os.fork()", "exception: PermissionError"),
        ("import posix\nposix.fork()", "exception: PermissionError"),
        ("import pty\npty.fork()", "exception: PermissionError"),
        ("import os\nos.system('sleep 100 &')", "exception: PermissionError"),
        ("import os\nos.posix_spawn('/bin/sleep', ['sleep', '100'], {})", "exception: PermissionError"),
        ("import os\nos.execv('/bin/true', ['true'])", "exception: PermissionError"),
        ("import subprocess\nsubprocess.run(['true'])", "exception: ModuleNotFoundError"),
        ("import multiprocessing", "exception: ModuleNotFoundError"),
        ("import ctypes", "exception: ModuleNotFoundError"),
        ("import os\nos.kill(1, 0)", "exception: PermissionError"),
        ("import os\nos.setsid()", "exception: PermissionError"),
    ],
)
def test_no_process_is_started_and_none_survives(pool, no_survivors, source, kind):
    assert hostile(pool, source).failure == kind
    no_survivors()


# CPython builds a deleted built-in module afresh on the next import: an os.fork the guard has
# not replaced, to test what is left after a process that got past the guard
ESCAPE = """
import sys
del sys.modules["posix"]
import posix
if posix.fork() == 0:
    import time
    CHILD
    time.sleep(100)
print("leader done")
"""


@pytest.mark.time_limit(60)
@pytest.mark.parametrize(
    ("child", "kind"),
    [
        ("pass", "timeout"),  # it holds stdout and stderr open: the run is not over until the timeout
        ("posix.close(1); posix.close(2)", None),  # the leader's exit ends the run
    ],
)
def test_a_process_past_the_guard_is_killed_with_its_group(pool, no_survivors, child, kind):
    outcome = hostile(pool, ESCAPE.replace("CHILD", child), limits=Limits(wall_seconds=1))
    assert (outcome.failure, outcome.stdout) == (kind, "leader done\n")
    no_survivors()


@pytest.fixture
def no_survivors(run_dir):
    """A check that no process of the test's runs is left: none is a new child of this process
    (other tests' helpers started before are not), and none runs the runner with a program file
    under ``run_dir`` (orphans are adopted by init, not by this process).  A process killed a
    moment ago may take a moment to go: the check waits up to 10 s for that."""
    before = child_pids()

    def check() -> None:
        assert child_pids() - before == set()
        give_up = time.monotonic() + 10
        while (survivors := runners_under(run_dir)) and time.monotonic() < give_up:
            time.sleep(0.05)
        assert survivors == []

    return check


def child_pids() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def runners_under(run_dir) -> list[str]:
    """The command lines of the live processes that name ``run_dir`` (a zombie has none)."""
    commands = (" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
    return [command for command in commands if str(run_dir) in command]


def test_filling_memory_raises_memory_error(pool):
    assert hostile(pool, "x = bytearray(10 * 1024**3)").failure == "exception: MemoryError"


def test_printing_past_the_cap_is_an_output_limit(pool):
    outcome = hostile(pool, "print('x' * 10**7)")
    assert outcome.failure == "output limit"
    assert len(outcome.stdout) <= Limits().output_bytes
    assert hostile(pool, "import sys\nsys.stderr.write('x' * 10**7)").failure == "output limit"
    assert hostile(pool, "print('x' * 100)", limits=Limits(output_bytes=10)).failure == "output limit"


def test_writing_a_new_file_fails(pool, run_dir):
    assert hostile(pool, "open('out.txt', 'w').write('x')").failure == "exception: PermissionError"
    assert list(run_dir.iterdir()) == []


@pytest.mark.parametrize(
    "attempt",
    [
        "open(PATH, 'w')",
        "open(PATH, 'a').write('x')",
        "open(PATH, 'r+').write('x')",
        "open(file=PATH, mode='wb')",
        "import io\nio.open(PATH, 'w')",
        "import pathlib\npathlib.Path(PATH).write_text('x')",
        "import os\nos.open(PATH, os.O_WRONLY | os.O_TRUNC)",
        "import os\nos.truncate(PATH, 0)",
        "import os\nos.remove(PATH)",
        "import os\nos.unlink(PATH)",
        "import os\nos.rename(PATH, PATH + '.moved')",
        "import os\nos.replace(PATH, PATH + '.moved')",
        "import os\nos.chmod(PATH, 0)",
        "import shutil\nshutil.rmtree(os.path.dirname(PATH))",
        "import shutil\nshutil.move(PATH, PATH + '.moved')",
    ],
)
def test_an_existing_file_is_neither_changed_nor_removed(pool, tmp_path, attempt):
    kept = tmp_path / "kept" / "kept.txt"
    kept.parent.mkdir()
    kept.write_text("keep")
    mode = kept.stat().st_mode
    source = f"import os\nPATH = {str(kept)!r}\n{attempt}"
    assert hostile(pool, source).failure == "exception: PermissionError"
    assert (kept.read_text(), kept.stat().st_mode) == ("keep", mode)
    assert [p.name for p in kept.parent.iterdir()] == ["kept.txt"]


def test_reading_a_file_works(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("read me")
    assert run_program(f"print(open({str(path)!r}).read())").stdout == "read me\n"


def test_an_environment_secret_is_not_visible(pool, monkeypatch):
    monkeypatch.setenv("FIMCONSTRAIN_TEST_SECRET", "s3cret")
    source = "import os\nprint('FIMCONSTRAIN_TEST_SECRET' in os.environ, open('/proc/self/environ').read())"
    outcome = hostile(pool, source)
    assert outcome.passed
    assert outcome.stdout.startswith("False ")
    assert "s3cret" not in outcome.stdout


# ---------------------------------------------------------------- the pool


@pytest.mark.time_limit(60)
def test_runs_on_threads_run_in_parallel_with_matching_outcomes():
    """Each job waits at a barrier for the others of its round, so the jobs finish only if four
    runs go on at once (as the evaluation's thread pools run them); job i fails exactly when i is
    odd, and prints i."""
    barrier = threading.Barrier(4, timeout=30)

    def run_together(source: str) -> Outcome:
        barrier.wait()
        return run_program(source)

    with ThreadPoolExecutor(max_workers=4) as programs:
        futures = [programs.submit(run_together, f"print({i})\nassert {i} % 2 == 0") for i in range(8)]
        outcomes = [future.result() for future in futures]
    assert [o.passed for o in outcomes] == [i % 2 == 0 for i in range(8)]
    assert [o.stdout for o in outcomes] == [f"{i}\n" for i in range(8)]
    assert [o.failure for o in outcomes[1::2]] == ["exception: AssertionError"] * 4
