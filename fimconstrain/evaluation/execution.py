"""Run a model-written Python program to judge it (HumanEval-infilling unit tests, SAFIM
stdin/stdout tests), each in its own subprocess, never in the evaluating process.

A run gets ``python -I -B``, an empty temporary working directory (removed afterwards), a minimal
environment (nothing inherited: no secrets), the test's input or a closed standard input,
rlimits on CPU time, address space, file size and processes, a wall-clock timeout and caps on
its output; a guard in the child refuses process creation, signals to others, file writes and
removals (as OpenAI's human-eval ``reliability_guard`` does).  A program that hangs, forks,
fills memory or writes files fails that run only, as an :class:`Outcome`.  This is isolation
against a model's accidents, not a security boundary against a malicious model: as human-eval's
README says, run untrusted models' code in a container or a VM.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one run of a program may use."""

    wall_seconds: float = 3.0  # wall-clock timeout (HumanEval's upstream default is 3 s)
    cpu_seconds: int = 10  # RLIMIT_CPU
    memory_bytes: int = 2 * 1024**3  # RLIMIT_AS
    output_bytes: int = 1024**2  # cap on captured stdout and on stderr each


@dataclass(frozen=True)
class Outcome:
    """How one run ended.  ``failure`` is None when passed, else one of: ``"syntax error"``,
    ``"exception: <TypeName>"``, ``"exit <status>"``, ``"timeout"``, ``"cpu limit"``,
    ``"memory"``, ``"output limit"``, ``"killed: <SIGNAME>"``, ``"could not start: <error>"``."""

    passed: bool  # the program ran to the end with exit status 0 and within every limit
    failure: str | None
    seconds: float  # wall seconds of the run
    stdout: str  # captured standard output (UTF-8, errors replaced), at most output_bytes


#: the runner's exit status when it reports a failure (syntax error, uncaught exception) through
#: its report pipe; the status alone is no proof (a program may exit 3), the pipe's nonce line is
_REPORTED = 3
#: RLIMIT_NPROC counts every process and thread of the user, not only the program's, so this is
#: a bound on a runaway that got past the guard (which refuses fork), not a quota: a program may
#: still start threads.  The kernel does not enforce it for root (nor with CAP_SYS_RESOURCE).
_NPROC = 1024
#: nothing inherited; OMP_NUM_THREADS keeps numeric libraries to one thread (and within RLIMIT_AS).
#: ``-I`` ignores PYTHON* variables, so ``-X utf8`` rather than PYTHONIOENCODING makes stdio UTF-8.
_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1"}

# The child's code: read the program (and the run's nonce, report fd and rlimits) from the file
# named by argv[1], remove it (the working directory is then empty), set the rlimits, install the
# guard, compile and exec the program as __main__.  A syntax error or an uncaught exception is
# reported as "<nonce> <kind>" on the report pipe with exit status _REPORTED; SystemExit and a
# normal end go through the interpreter's own exit (threads joined, atexit run, stdio flushed).
_RUNNER = """
import _io, builtins, io, json, os, posix, resource, shutil, sys, types

REFUSED_OS = (
    "fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp",
    "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
    "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
    "kill", "killpg", "setsid", "setpgid", "setpgrp",
    "setuid", "seteuid", "setreuid", "setresuid", "setgid", "setegid", "setregid", "setresgid",
    "remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace", "truncate", "ftruncate",
    "chmod", "fchmod", "lchmod", "chown", "fchown", "lchown", "chroot",
    "mkdir", "makedirs", "mkfifo", "mknod", "link", "symlink", "utime",
)
REFUSED_MODULES = (
    "subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing", "ctypes", "_ctypes",
)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def refusal(what):
    def refused(*args, **kwargs):
        raise PermissionError(what + " is disabled while a program is judged")
    return refused


def guard():
    for name in REFUSED_OS:
        for module in (os, posix):
            if hasattr(module, name):
                setattr(module, name, refusal("os." + name))
    shutil.rmtree, shutil.move = refusal("shutil.rmtree"), refusal("shutil.move")
    sys.modules.update(dict.fromkeys(REFUSED_MODULES))
    open_file, open_fd = builtins.open, os.open

    def guarded_open(file, mode="r", *args, **kwargs):
        # an int is a descriptor already open (stdout): writing there is output, not a file
        if not isinstance(file, int) and set(mode) & set("wax+"):
            raise PermissionError("opening a file for writing is disabled while a program is judged")
        return open_file(file, mode, *args, **kwargs)

    def guarded_os_open(path, flags, *args, **kwargs):
        if flags & WRITE_FLAGS:
            raise PermissionError("opening a file for writing is disabled while a program is judged")
        return open_fd(path, flags, *args, **kwargs)

    builtins.open = io.open = _io.open = guarded_open
    os.open = posix.open = guarded_os_open


def main():
    write, leave = os.write, os._exit
    with open(sys.argv[1], "rb") as file:
        header, _, source = file.read().partition(b"\\n")
    os.remove(sys.argv[1])
    header = json.loads(header)
    for name, soft, hard in header["limits"]:
        ceiling = resource.getrlimit(getattr(resource, name))[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        resource.setrlimit(getattr(resource, name), (soft, hard))

    def fail(kind):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        write(header["report"], (header["nonce"] + " " + kind + "\\n").encode())
        leave(header["status"])

    guard()
    sys.argv = [""]
    program = sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        code = compile(source.decode("utf-8"), "<program>", "exec")
    except Exception:  # SyntaxError; ValueError (NUL bytes), RecursionError or MemoryError (nesting)
        fail("syntax error")
    try:
        exec(code, vars(program))
    except SystemExit:
        raise
    except BaseException as error:
        fail("exception: " + type(error).__name__)


main()
"""


def _rlimits(limits: Limits) -> list[tuple[str, int, int]]:
    """The child's rlimits as (resource name, soft, hard)."""
    return [
        # SIGXCPU at the soft limit ("cpu limit"); the kernel's SIGKILL a second later, at the hard
        # limit, reaches only a program that handles SIGXCPU (and then reads as "memory")
        ("RLIMIT_CPU", limits.cpu_seconds, limits.cpu_seconds + 1),
        ("RLIMIT_AS", limits.memory_bytes, limits.memory_bytes),
        # writing to any file fails (CPython ignores SIGXFSZ: the write raises OSError); the guard
        # also refuses opening for writing, which would truncate before writing anything
        ("RLIMIT_FSIZE", 0, 0),
        ("RLIMIT_CORE", 0, 0),
        ("RLIMIT_NPROC", _NPROC, _NPROC),
    ]


def run_program(
    source: str, stdin: str = "", limits: Limits = Limits(), python: str = sys.executable
) -> Outcome:
    """Run ``source`` as ``__main__`` with ``stdin`` as its input, isolated and limited (see the
    module's docstring); every failure, even failing to start, is an :class:`Outcome`."""
    began = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="fimconstrain-run-", ignore_cleanup_errors=True) as directory:
            return _run(source, stdin, limits, python, directory)
    except Exception as error:  # one run's trouble is that run's failure, never the caller's exception
        return Outcome(False, f"could not start: {error}", time.monotonic() - began, "")


def _run(source: str, stdin: str, limits: Limits, python: str, directory: str) -> Outcome:
    """One run in ``directory``: start the runner, watch it, kill its process group, classify."""
    nonce = secrets.token_hex(16)
    report_read, report_write = os.pipe()
    with open(report_read, "rb", buffering=0):  # closes report_read
        try:
            header = {"nonce": nonce, "report": report_write, "status": _REPORTED, "limits": _rlimits(limits)}
            program = os.path.join(directory, "program")
            with open(program, "wb") as file:
                file.write(json.dumps(header).encode() + b"\n" + source.encode("utf-8"))
            began = time.monotonic()
            process = subprocess.Popen(
                [python, "-I", "-B", "-X", "utf8", "-c", _RUNNER, program],
                cwd=directory,
                env=_ENV,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, to kill with everything it started
                pass_fds=(report_write,),
            )
        finally:
            os.close(report_write)
        with process:
            try:
                stdout, failure = _communicate(process, stdin.encode("utf-8"), limits, began)
            finally:
                _kill_group(process.pid)  # no stragglers, however the program ended
                process.wait()
        seconds = time.monotonic() - began
        if failure is None:
            failure = _failure(process.returncode, _reported(report_read, nonce))
    return Outcome(failure is None, failure, seconds, stdout.decode("utf-8", errors="replace"))


def _communicate(
    process: subprocess.Popen[bytes], stdin: bytes, limits: Limits, began: float
) -> tuple[bytes, str | None]:
    """Feed ``stdin``, capture stdout and stderr until the program exits; return stdout (at most
    ``output_bytes``) and ``"timeout"`` or ``"output limit"`` when one cut the run short, else None."""
    assert process.stdin and process.stdout and process.stderr  # Popen was given three pipes
    deadline = began + limits.wall_seconds
    captured = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    stdout = captured[process.stdout.fileno()]
    pending = memoryview(stdin)
    with selectors.DefaultSelector() as selector:
        for fd in captured:
            selector.register(fd, selectors.EVENT_READ)
        if pending:
            selector.register(process.stdin, selectors.EVENT_WRITE)
        else:
            process.stdin.close()
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return bytes(stdout[: limits.output_bytes]), "timeout"
            for key, _ in selector.select(remaining):
                if key.fileobj is process.stdin:
                    try:
                        pending = pending[os.write(key.fd, pending[: select.PIPE_BUF]) :]
                    except BrokenPipeError:  # it exited or closed its input: the rest is moot
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(process.stdin)
                        process.stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                captured[key.fd] += chunk
                if len(captured[key.fd]) > limits.output_bytes:
                    return bytes(stdout[: limits.output_bytes]), "output limit"
    try:  # it closed stdout and stderr: now it may exit
        process.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return bytes(stdout), "timeout"
    return bytes(stdout), None


def _kill_group(pgid: int) -> None:
    """SIGKILL every process in the program's process group (its id is the program's pid)."""
    with contextlib.suppress(ProcessLookupError):  # none left
        os.killpg(pgid, signal.SIGKILL)


def _reported(fd: int, nonce: str) -> str | None:
    """The failure kind the runner wrote to its report pipe with this run's nonce, if any."""
    os.set_blocking(fd, False)  # every writer is dead, unless the program got one past the group
    try:
        data = os.read(fd, 4096)
    except BlockingIOError:
        return None
    for line in data.decode("utf-8", errors="replace").splitlines():
        mark, _, kind = line.partition(" ")
        if mark == nonce:
            return kind
    return None


def _failure(status: int, reported: str | None) -> str | None:
    """The failure kind of a run that ended by itself with exit status ``status`` (negative: the
    signal that killed it), given what the runner reported."""
    if status == 0:
        return None
    if status == _REPORTED and reported:
        return reported
    if status == -signal.SIGXCPU:
        return "cpu limit"
    if status == -signal.SIGKILL:  # not sent by this module (timeout, output limit): the OOM killer
        return "memory"
    if status < 0:
        try:
            return f"killed: {signal.Signals(-status).name}"
        except ValueError:  # a real-time signal, which has no name of its own
            return f"killed: signal {-status}"
    return f"exit {status}"
