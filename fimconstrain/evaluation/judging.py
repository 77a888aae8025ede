"""Benchmark records judged by running their programs while the model decodes the next task.

``fimconstrain eval`` streams each example's records through :meth:`Judge.judged` before writing
them: a record of a benchmark task (:mod:`.benchmarks`) gets ``passed``, the ``failure`` kind and
``exec_seconds`` from its middle's program, ``first_line_exact``, and ``empty_passes`` (the task's
tests pass with an empty middle: the floor, run once per task).  The programs run on a thread
pool of subprocesses (:mod:`.execution`), one per core by default, so execution overlaps
decoding; records come out in the order they went in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from .benchmarks import ExecutionVerdict, first_line_exact, is_benchmark, judge
from .examples import Example
from .execution import Limits

#: a record's two runs under way (its middle's, the task's empty middle's), or None: not a benchmark's
Pending = tuple[Future[ExecutionVerdict], Future[ExecutionVerdict]] | None
#: batches of records judged ahead of the one being written (a bound on memory and on what an
#: interrupted run loses)
WINDOW = 8


class Judge:
    """Judges the records of the benchmark examples among ``datasets``; others pass unchanged."""

    def __init__(
        self, datasets: list[tuple[dict, list[Example]]], limits: Limits | None, workers: int | None
    ):
        self.examples = {(ds["sha256"], ex.id): ex for ds, examples in datasets for ex in examples}
        self.limits = limits
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="judge")
        self.floors: dict[tuple[str, str], Future[ExecutionVerdict]] = {}

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _submit(self, record: dict) -> Pending:
        where = (record["dataset_sha256"], record["id"])
        example = self.examples.get(where)
        if example is None or not is_benchmark(example):
            return None
        if where not in self.floors:
            self.floors[where] = self.pool.submit(judge, example, "", self.limits)
        return self.pool.submit(judge, example, record["middle"], self.limits), self.floors[where]

    def _complete(self, record: dict, pending: Pending) -> dict:
        if pending is None:
            return record
        verdict, floor = (future.result() for future in pending)
        meta = self.examples[record["dataset_sha256"], record["id"]].meta
        record.update(
            benchmark=meta["benchmark"],
            subset=meta["subset"],
            passed=verdict.passed,
            failure=verdict.failure,
            exec_seconds=verdict.seconds,
            first_line_exact=first_line_exact(record["middle"], record["truth"]),
            empty_passes=floor.passed,
        )
        return record

    def judged(self, batches: Iterable[list[dict]]) -> Iterator[list[dict]]:
        """Each batch with its benchmark records judged, in order; up to :data:`WINDOW` batches
        are judged while the next are decoded."""
        waiting: deque[list[tuple[dict, Pending]]] = deque()
        for batch in batches:
            waiting.append([(record, self._submit(record)) for record in batch])
            while waiting and (len(waiting) > WINDOW or _done(waiting[0])):
                yield [self._complete(*item) for item in waiting.popleft()]
        while waiting:
            yield [self._complete(*item) for item in waiting.popleft()]


def _done(batch: list[tuple[dict, Pending]]) -> bool:
    return all(pending is None or all(f.done() for f in pending) for _, pending in batch)
