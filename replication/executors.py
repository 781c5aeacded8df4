"""Run many configs: in this process, on local worker processes, or on a Ray cluster.

Finished runs (records present) are skipped before anything is scheduled. Remaining runs
start longest-first (by the study's cost estimate), which keeps workers busy at the end of a
study. Seeds live in the configs, so results do not depend on scheduling. Each finished
record is passed to ``on_record`` in the calling process (that is where MLflow logging
happens, so workers never contend for the tracking store).

With Ray, workers write checkpoints and records under ``runs_dir``: on a multi-machine
cluster that directory must be shared storage.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from tqdm.auto import tqdm

from .config import RunConfig
from .engine import execute, load_record
from .studies import get_study

EXECUTORS = ("local", "ray")


def _limit_threads() -> None:
    """One BLAS thread per worker: the workers already use every core."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def _execute(config_dict: dict, runs_dir: str, checkpoint_every_s: float) -> dict:
    return execute(RunConfig.from_dict(config_dict), runs_dir, checkpoint_every_s=checkpoint_every_s)


def run_configs(configs: list[RunConfig], runs_dir, *, workers: int = 1, executor: str = "local",
                on_record=None, progress: bool = True, checkpoint_every_s: float = 30.0) -> list[dict]:
    """Execute every config (skipping finished ones) and return their records in input order."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS} (got {executor!r})")
    if workers < 1:
        raise ValueError(f"workers must be >= 1 (got {workers})")
    records: dict[str, dict] = {}
    todo = []
    for config in configs:
        record = load_record(runs_dir, config)
        if record is None:
            todo.append(config)
        else:
            records[config.hash] = record
            if on_record is not None:
                on_record(record)
    todo.sort(key=lambda c: -get_study(c.study).cost(c))
    bar = tqdm(total=len(configs), initial=len(configs) - len(todo), desc="runs", unit="run",
               disable=not progress, dynamic_ncols=True)

    def finished(record):
        records[record["config_hash"]] = record
        if on_record is not None:
            on_record(record)
        bar.set_postfix_str(RunConfig.from_dict(record["config"]).label, refresh=False)
        bar.update(1)

    try:
        if not todo:
            pass
        elif executor == "ray":
            _run_ray(todo, runs_dir, workers, finished, checkpoint_every_s)
        elif workers == 1:
            for config in todo:
                finished(execute(config, runs_dir, checkpoint_every_s=checkpoint_every_s))
        else:
            _run_pool(todo, runs_dir, workers, finished, checkpoint_every_s)
    finally:
        bar.close()
    return [records[c.hash] for c in configs]


def _run_pool(todo, runs_dir, workers, finished, checkpoint_every_s):
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_limit_threads) as pool:
        pending = {pool.submit(_execute, c.to_dict(), str(runs_dir), checkpoint_every_s) for c in todo}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                finished(future.result())


def _run_ray(todo, runs_dir, workers, finished, checkpoint_every_s):
    """Ray: connects to ``RAY_ADDRESS`` if set, else starts a local instance with ``workers`` CPUs."""
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        address = os.environ.get("RAY_ADDRESS")
        ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)
    remote = ray.remote(num_cpus=1)(_execute)
    try:
        pending = [remote.remote(c.to_dict(), str(os.path.abspath(runs_dir)), checkpoint_every_s) for c in todo]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                finished(ray.get(ref))
    finally:
        if started_here:
            ray.shutdown()
