"""``fimconstrain eval --ray``: a run's examples spread over Ray actors, each with its own model.

Each actor loads the model once (one per GPU with ``--device cuda``, else one per CPU slot) and
runs whole examples, every missing mode of one example together (checked comes from the
unconstrained run, :func:`.experiments.run_example`).  Ray's :class:`~ray.util.ActorPool` hands the
examples out as actors come free and gives the results back in submission order, so the
driver appends records in the single-process order and the rows are those of a single-process
run (greedy or seeded decoding: no record depends on the process); the progress bar counts
experiments over all actors.  Benchmark programs run in the driver (:mod:`.judging`).  ``ray``
is imported only here.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..engine.errors import InputError
from .benchmarks import limits_of
from .examples import Example
from .experiments import missing_experiments, nothing_to_do, open_decoder, run_example, warm_up, write_records
from .judging import Judge


class EvalWorker:
    """What one actor holds: the model and decoder, loaded once; it runs one example at a time."""

    def __init__(self, args: argparse.Namespace):
        import torch

        torch.set_num_threads(args.threads)
        self.args = args
        self.provenance, self.decoder = open_decoder(args)
        warm_up(self.decoder)

    def settings(self) -> dict:
        return self.provenance.to_dict()

    def run(self, dataset: dict, example: Example, modes: list[str], sample: int = 0) -> list[dict]:
        records = run_example(
            self.decoder, dataset, example, modes, self.provenance, self.args.with_context, sample
        )
        return list(records)


def actor_count(args: argparse.Namespace, resources: dict) -> int:
    """``--actors``, or one per GPU (``--device cuda``) or per CPU of the cluster."""
    if args.actors:
        return args.actors
    gpu = args.device.startswith("cuda")
    found = int(resources.get("GPU" if gpu else "CPU", 0))
    if found < 1:
        raise InputError(f"--ray: the cluster has no {'GPU' if gpu else 'CPU'} for an actor")
    return found


def run_on_ray(args: argparse.Namespace, datasets: list, done: set[str]) -> int:
    """Run the missing experiments on Ray actors and append them to ``--out`` in run order."""
    import ray
    from ray.util import ActorPool

    if not ray.is_initialized():
        ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False)
    gpu = args.device.startswith("cuda")
    # (ray's stubs type the decorated class as a union that has no ``remote``)
    remote: Any = ray.remote(num_gpus=1 if gpu else 0, num_cpus=0 if gpu else 1)(EvalWorker)
    actors = [remote.remote(args) for _ in range(actor_count(args, ray.cluster_resources()))]
    try:
        provenances = ray.get([actor.settings.remote() for actor in actors])
        if any(p != provenances[0] for p in provenances):
            raise InputError("--ray: the actors loaded different models or settings (a shared model folder?)")
        from .provenance import settings_id

        sid = settings_id(provenances[0])
        jobs = missing_experiments(datasets, args.modes, done, sid, args.samples)
        total = sum(len(todo) for _, _, todo, _ in jobs)
        if total == 0:
            return nothing_to_do(args, datasets, sid)
        pool = ActorPool(actors)
        batches = pool.map(lambda actor, job: actor.run.remote(*job), jobs)
        with Judge(datasets, limits_of(args), args.exec_workers) as judge:
            write_records(args.out, judge.judged(batches), total, args.threads)
    finally:
        for actor in actors:
            ray.kill(actor)
    print(
        f"{total} experiments run on {len(actors)} Ray actors (settings {sid}), "
        f"{len(done)} records were already in {args.out}",
        file=sys.stderr,
    )
    return 0
