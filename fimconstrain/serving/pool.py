"""A pool of worker processes that check a batch's candidates in parallel.

The checker holds the GIL, so one process checks one row at a time: a whole mask costs about
0.15 ms per row with the compiled engine (benchmarks/batch_constraint.py, batch 32: 4.3-5.4 ms
per step); a pool spreads a batch's rows over cores. Here each request is owned by one worker
(the least loaded when it is added) and its constraint state lives there only; a step sends
each worker its rows' small deltas (new committed tokens, drafts, candidate ids), the workers
check them at the same time and the parent gathers the answers in row order. Messages to a
worker are ordered, so an ``add`` always precedes the first check of that request (its
checker is built in the worker, off the parent's step).

Workers are started with ``spawn`` (never ``fork``: the parent may hold CUDA state) and get
the tokenizer pickled. Once a worker's tables are built, its objects are frozen out of Python's
collector, and so are the survivors of each full pass after
(:func:`~fimconstrain.collector.freeze_after_full_passes`): a full pass over a worker's whole
heap took about 0.2 s, and the batch's step waits for it.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Iterable, Sequence
from multiprocessing.connection import Connection

from ..collector import freeze_after_full_passes
from .batch import InlineChecker, RowQuery
from .requests import FimArgs, TokenTable
from .support import SamplerSupport


class WorkerError(RuntimeError):
    """A worker failed; the message holds its traceback."""


def serve(conn: Connection, tokenizer) -> None:
    """A worker's loop: ``add``/``remove`` silently, ``check`` answered, ``stop`` ends it."""
    checker = InlineChecker(TokenTable.from_tokenizer(tokenizer))
    freeze_after_full_passes()
    conn.send(("ready", None))
    while True:
        message = conn.recv()
        kind = message[0]
        try:
            if kind == "add":
                checker.add(*message[1:])
            elif kind == "remove":
                checker.remove(message[1])
            elif kind == "check":
                conn.send(("ok", checker.check(message[1])))
            else:
                return
        except Exception:
            conn.send(("error", traceback.format_exc()))


class ConstraintPool:
    """A :class:`~.batch.BatchChecker` over ``workers`` processes (see the module's notes)."""

    def __init__(self, tokenizer, workers: int):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        context = multiprocessing.get_context("spawn")
        self.conns: list[Connection] = []
        self.processes = []
        for _ in range(workers):
            parent, child = context.Pipe()
            process = context.Process(target=serve, args=(child, tokenizer), daemon=True)
            process.start()
            child.close()
            self.conns.append(parent)
            self.processes.append(process)
        for conn in self.conns:
            self._answer(conn)
        self.owner: dict[int, int] = {}
        self.load = [0] * workers

    def add(
        self, key: int, args: FimArgs, extra_stops: Iterable[int] = (), sampler: SamplerSupport | None = None
    ) -> None:
        self.remove(key)
        worker = self.load.index(min(self.load))
        self.owner[key] = worker
        self.load[worker] += 1
        self.conns[worker].send(("add", key, args, tuple(extra_stops), sampler))

    def remove(self, key: int) -> None:
        worker = self.owner.pop(key, None)
        if worker is not None:
            self.load[worker] -= 1
            self.conns[worker].send(("remove", key))

    def check(self, rows: Sequence[RowQuery]) -> list[list[int]]:
        """Each worker checks its own rows; all of them at once."""
        parts: dict[int, list[int]] = {}
        for index, row in enumerate(rows):
            parts.setdefault(self.owner[row.key], []).append(index)
        for worker, indices in parts.items():
            self.conns[worker].send(("check", [rows[i] for i in indices]))
        answers = {worker: self.conns[worker].recv() for worker in parts}  # every one, even after an error
        out: list[list[int]] = [[] for _ in rows]
        for worker, indices in parts.items():
            for index, allowed in zip(indices, self._value(answers[worker])):
                out[index] = allowed
        return out

    def _answer(self, conn: Connection):
        return self._value(conn.recv())

    @staticmethod
    def _value(answer: tuple):
        kind, value = answer
        if kind == "error":
            raise WorkerError(f"a constraint worker failed:\n{value}")
        return value

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        for conn, process in zip(self.conns, self.processes):
            if process.is_alive():
                conn.send(("stop",))
                process.join(timeout=5)
            conn.close()
        self.conns, self.processes = [], []

    def __enter__(self) -> ConstraintPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
