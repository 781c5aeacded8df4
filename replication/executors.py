"""Run many configs: in this process, on local worker processes, or on a Ray cluster.

Finished runs (records present) are skipped before anything is scheduled. Remaining runs
start longest-first (by the study's cost estimate), which keeps workers busy at the end of a
study. Seeds live in the configs, so results do not depend on scheduling. Each finished
record is passed to ``on_record`` in the calling process (that is where MLflow logging
happens, so workers never contend for the tracking store).

Runs held by another process (a second study on the same runs directory, see
:class:`~replication.engine.RunBusy`) are not computed twice: they are set aside, the other
runs go first, and at the end this process waits for the other one to finish them (or
resumes them, if it died).

What the caller sees meanwhile (:mod:`replication.progress`): a bar, plain lines or nothing,
with runs done / total, the share of the work and an ETA (:mod:`replication.eta`) that
calibrates the cost estimates with the measured times of finished runs (the selection's, this
session's and the ``calibration`` records the caller passes), the progress running runs report
(local executors) and what a resumed run's checkpoint has done, and schedules the runs left on
the executor's workers.

A run that raises (:class:`~replication.errors.RunFailed`) stops the study as a stop request
does; with ``keep_going`` the other runs go on, and :class:`~replication.errors.RunsFailed`
lists the failures at the end. A local worker that dies (SIGKILL, the out-of-memory killer) is
replaced and its run queued again, to resume from its checkpoint, while the other workers go on
(:mod:`replication.pool`); a run whose worker dies twice fails as a run that raises does.

Stopping (:mod:`replication.stopping`): on Ctrl-C or SIGTERM queued runs are cancelled, running
ones write a checkpoint at their next iteration boundary, and :class:`StopRequested` reaches
the caller within seconds. Local workers end with their parent even when it is killed with
SIGKILL; a local Ray instance is shut down with the driver.

Runs that need a GPU (:func:`replication.studies.run_gpus`) get one device each: local
workers are pinned to one visible GPU apiece (round-robin if there are more workers than
GPUs; ``--workers`` defaults to the number of GPUs), Ray tasks request ``num_gpus``.

With Ray, workers write checkpoints and records under ``runs_dir``: on a multi-machine
cluster that directory must be shared storage. Optimizer plugins registered from the parameter
file (``plugins.optimizers``) are loaded by every worker: local workers inherit the parent's
``sys.path``; Ray tasks get the directories the parent imported them from prepended to
``PYTHONPATH`` (enough for a local instance or a shared file system; elsewhere the module must
be installed on every node, and a worker that cannot import it stops the study with one line).
"""
from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import signal
import sys
import threading
import time

import baselines

from . import stopping
from .config import RunConfig
from .costs import cost_estimate, cost_estimates
from .devices import pin, visible_gpus, worker_devices
from .engine import RunBusy, check_parameters, execute, keep_record, load_record, not_kept_warning
from .errors import PackageUnavailable, ResourceUnavailable, RunFailed, RunsFailed, UsageError, one_line
from .pool import DIED, ERROR, WorkerPool
from .progress import ETA_EVERY_S, Progress, progress_mode
from .studies import run_gpus

EXECUTORS = ("local", "ray")
STOP_GRACE_S = 20.0  # how long stopped workers get to write their checkpoint before they are killed
MAX_WORKER_DEATHS = 2  # a run whose worker died this often fails (it may be what kills them: memory)
BUSY = "busy"
REPORT_EVERY_S = 2.0  # how often a running run reports its progress
_reports = None  # in a local worker: the _Reports its runs report progress on


class _Reporter:
    """``execute``'s progress callback: ``send((key, seconds, fraction done, fraction left))`` at most every
    :data:`REPORT_EVERY_S` seconds, counted from the first iteration this process completed of the run."""

    def __init__(self, key: str, send):
        self.key, self.send, self._first, self._last = key, send, None, -math.inf

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self._first is None:
            self._first = (done, now)
        elif now - self._last >= REPORT_EVERY_S and total > 0:
            self._last = now
            self.send((self.key, now - self._first[1], (done - self._first[0]) / total, 1 - done / total))


class _Reports:
    """Progress reports from local workers to the parent, through a pipe that workers never wait on.

    A report only feeds the ETA, so one that finds the pipe full (the parent not reading: suspended,
    or busy for minutes) is dropped rather than stalling the run that sends it. A report (a config
    hash and three floats) pickles to under 100 bytes, below the pipe's atomic-write size
    (PIPE_BUF: 4096 bytes on Linux, 512 on macOS), and ``Connection.send`` writes it in one
    ``write``: it arrives whole or not at all, never interleaved with another worker's. So no lock,
    which a worker killed while holding it would leave held for the others.
    """

    def __init__(self, ctx):
        self._reader, self._writer = ctx.Pipe(duplex=False)
        os.set_blocking(self._writer.fileno(), False)  # shared by every worker's copy of this end

    def offer(self, report) -> None:
        try:
            self._writer.send(report)
        except BlockingIOError:
            pass

    def drain(self):
        while self._reader.poll():
            yield self._reader.recv()


def one_thread():
    """One BLAS thread and one torch thread in this process from now on; returns what restores the previous ones.

    Every run computes so, whatever the executor (workers call it once for good; the main process
    around the runs it executes), and results then do not depend on ``--workers``: a multi-threaded
    BLAS sums in another order, and image-study runs at d = 1000 computed in the main process
    (``--workers 1``, ``run-one``) ended 1e-15 to 1e-8 (relative) away from the same runs in a
    worker. And with a pool per worker on every core, TuRBO-1's GP fits ran 3x, GIBO's
    acquisitions 11x slower on 2 cores. A torch first loaded while the limit holds keeps one
    thread after the restore.
    """
    from threadpoolctl import threadpool_limits

    torch = sys.modules.get("torch")
    torch_threads = torch.get_num_threads() if torch is not None else None  # before the limit (OpenMP's) is set
    limits = threadpool_limits(1)
    # threadpool_limits reaches only the libraries loaded now; torch, if it loads later (the BO
    # baselines, the prompt study), sizes its intra-op pool from this variable
    omp, os.environ["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS"), "1"
    if torch is not None:
        torch.set_num_threads(1)

    def restore() -> None:
        limits.restore_original_limits()
        if omp is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp
        if torch_threads is not None:
            torch.set_num_threads(torch_threads)

    return restore


def _init_worker(parent: int, device: str | None, reports) -> None:
    """One GPU (if runs need one), one BLAS thread and one torch thread per worker; stop and parent handling."""
    global _reports
    _reports = reports
    if device is not None:
        pin(device)
    stopping.worker_init(parent)
    one_thread()  # for the worker's lifetime


def _execute(config_dict: dict, runs_dir: str, checkpoint_every_s: float, wait_for_lock: bool, plugins=()):
    """Worker entry point: the record, :data:`BUSY`, or None when the worker was asked to stop.

    ``plugins``: the ``module:Class`` optimizers the parent registered from its parameter file
    (:func:`baselines.imported_plugins`), registered here too (once per process; installed
    plugins need nothing: their names load them)."""
    for spec in plugins:
        baselines.load_class(spec, allow=[spec.partition(":")[0]])  # allowed by the parent's params.yaml
    config = RunConfig.from_dict(config_dict)
    progress = None if _reports is None else _Reporter(config.hash, _reports.offer)
    try:
        with stopping.task():
            return execute(config, runs_dir, checkpoint_every_s=checkpoint_every_s, wait_for_lock=wait_for_lock,
                           progress=progress)
    except RunBusy:
        return BUSY
    except stopping.StopRequested:
        return None


def _execute_ray(*args):
    """Ray's entry point (:func:`_execute`'s arguments): ``ray.cancel`` interrupts a running task as SIGINT
    would (Ray calls ``_thread.interrupt_main``), so with the stop handler installed for the task that is a
    stop request, as SIGTERM is for a local worker: the run checkpoints at its next iteration boundary and
    the task returns None. The handler and any request are reset when the task ends (Ray reuses workers)."""
    restore = one_thread()  # Ray sets OMP_NUM_THREADS to a task's CPUs; explicit here, torch included
    try:
        with stopping.handle_signals():
            return _execute(*args)
    finally:
        restore()  # Ray reuses its workers


def run_configs(configs: list[RunConfig], runs_dir, *, workers: int = 1, executor: str = "local",
                on_record=None, progress="bar", checkpoint_every_s: float = 30.0, keep_going: bool = False,
                label: str = "runs", calibration=()) -> list[dict]:
    """Execute every config (skipping finished ones) and return their records in input order.

    A run that raises stops the study with its :class:`~replication.errors.RunFailed`; with
    ``keep_going`` every other run is executed first, then :class:`~replication.errors.RunsFailed`
    is raised with the failures and the finished runs' records. ``progress``: ``"bar"``, ``"lines"``
    or ``"none"`` (True / False: bar / none; :mod:`replication.progress`), its lines starting with
    ``label``; ``calibration``: finished records of other runs of the study, whose measured times
    calibrate the ETA before the selection's own runs have any.
    """
    mode = progress_mode(progress)
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS} (got {executor!r})")
    if workers < 1:
        raise ValueError(f"workers must be >= 1 (got {workers})")
    if executor == "ray":
        _import_ray()  # before anything runs
    records: dict[str, dict] = {}
    todo, not_kept = [], []
    for config in configs:
        record = load_record(runs_dir, config, quarantine_bad=True)
        if record is None:
            todo.append(config)  # executing it restores a kept record, if there is one
            continue
        try:
            keep_record(runs_dir, config, replace=False)  # a record from before records were kept
        except OSError as exc:
            not_kept.append(exc)
        records[config.hash] = record
        if on_record is not None:
            on_record(record)
    if not_kept:
        print(not_kept_warning(len(not_kept), runs_dir, not_kept[0]), file=sys.stderr)
    # a refused value stops the study now, not when its method's first run starts; Ray's nodes may have
    # packages this process lacks, unless it starts the Ray instance itself
    check_parameters(todo, packages_here=executor == "local" or not os.environ.get("RAY_ADDRESS"))
    calibration = [r for r in calibration if r["config_hash"] not in records]
    costs = cost_estimates(configs)
    costs.update((r["config_hash"], cost_estimate(RunConfig.from_dict(r["config"]))) for r in calibration)
    todo.sort(key=lambda c: -costs[c.hash])
    tracker = Progress(configs, records, todo, costs, runs_dir, on_record, mode=mode, label=label,
                       keep_going=keep_going, calibration=calibration)
    run = {"ray": _run_ray, "local": _run_serial if workers == 1 else _run_pool}[executor]
    try:
        busy = run(todo, runs_dir, workers, tracker, checkpoint_every_s, wait_for_lock=False) if todo else []
        if busy:  # held by another process: wait for it (or resume what it left)
            tracker.waiting()
            run(busy, runs_dir, workers, tracker, checkpoint_every_s, wait_for_lock=True)
    finally:
        tracker.close()
    if tracker.failures:
        raise RunsFailed(tracker.failures, [records[c.hash] for c in configs if c.hash in records])
    return [records[c.hash] for c in configs]


def _run_serial(todo, runs_dir, workers, tracker, checkpoint_every_s, *, wait_for_lock):
    busy = []
    restore = one_thread()
    try:
        tracker.begin(1)
        for config in todo:
            try:
                record = execute(config, runs_dir, checkpoint_every_s=checkpoint_every_s, wait_for_lock=wait_for_lock,
                                 progress=_Reporter(config.hash, tracker.progress))
                tracker.finished(record)
            except RunBusy:
                busy.append(config)
                tracker.released(config)
            except RunFailed as exc:
                tracker.failed(config, exc)
    finally:
        restore()
    return busy


def default_workers(configs: list[RunConfig]) -> int:
    """Workers when the user gives none: one per visible GPU if the runs need GPUs, else 1."""
    if any(run_gpus(c) for c in configs):
        return max(1, len(visible_gpus()))
    return 1


def _run_pool(todo, runs_dir, workers, tracker, checkpoint_every_s, *, wait_for_lock):
    """Local worker processes (:class:`~replication.pool.WorkerPool`). A worker that dies (killed, out of
    memory) is replaced and its run queued again first, to resume from its checkpoint; a run whose worker
    dies :data:`MAX_WORKER_DEATHS` times fails as a run that raised does (:class:`RunFailed`)."""
    ctx = multiprocessing.get_context("spawn")
    gpus = visible_gpus() if any(run_gpus(c) for c in todo) else []
    devices = worker_devices(workers, gpus) if gpus else None  # a replacement worker takes its slot's device
    reports = _Reports(ctx)
    pool = WorkerPool(ctx, workers, _init_worker,
                      lambda slot: (os.getpid(), devices[slot] if devices else None, reports))
    plugins = baselines.imported_plugins()
    configs = {c.hash: c for c in todo}
    busy, deaths = [], dict.fromkeys(configs, 0)

    def submit(config: RunConfig, first: bool = False) -> None:
        pool.submit(config.hash, _execute, (config.to_dict(), str(runs_dir), checkpoint_every_s, wait_for_lock,
                                            plugins), first=first)

    tracker.begin(workers)
    try:
        for config in todo:
            submit(config)
        while pool.pending:
            events = pool.wait(ETA_EVERY_S)
            for report in reports.drain():
                tracker.progress(report)
            if not events:
                tracker.tick()
            for key, kind, outcome in events:
                config = configs[key]
                if kind == DIED:
                    deaths[key] += 1
                    how = _death(outcome)
                    if deaths[key] >= MAX_WORKER_DEATHS:
                        tracker.failed(config, RunFailed(
                            f"run {config.label} (method {config.method!r}) failed: its worker process died "
                            f"{deaths[key]} times ({how}), e.g. killed, or out of memory"))
                    else:
                        tracker.note(f"warning: the worker running {config.label} died ({how}); a new worker "
                                     "resumes the run from its checkpoint")
                        submit(config, first=True)
                elif kind == ERROR:
                    if not isinstance(outcome, RunFailed):
                        raise outcome
                    tracker.failed(config, outcome)
                elif outcome == BUSY:
                    busy.append(config)
                    tracker.released(config)
                elif outcome is None:  # a worker stopped on its own (SIGTERM sent to it directly)
                    raise stopping.StopRequested(signal.SIGTERM)
                else:
                    tracker.finished(outcome)
    except BaseException:
        # queued runs are dropped; running ones checkpoint at their next iteration boundary
        pool.stop(STOP_GRACE_S)
        raise
    pool.close()
    return busy


def _death(exitcode: int) -> str:
    """How a worker process ended, from its exit code (negative: the signal that killed it)."""
    if exitcode is not None and exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-exitcode).name}"
    return f"exit status {exitcode}"


def plugin_pythonpath(plugins: list[str]) -> str:
    """A worker's ``PYTHONPATH``: the directories the ``module:Class`` plugins came from, then this process's."""
    roots = []
    for spec in plugins:
        module = spec.partition(":")[0]
        path = os.path.abspath(sys.modules[module].__file__)
        depth = module.count(".") + (os.path.basename(path) == "__init__.py")
        for _ in range(depth + 1):
            path = os.path.dirname(path)
        if path not in roots:
            roots.append(path)
    return os.pathsep.join(roots + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def _ray_outcome(ray, ref, config: RunConfig):
    """``ray.get(ref)``; a plugin the worker could not load becomes one line (ResourceUnavailable), and a run
    Ray gave up on (its node or worker died more often than Ray retries a task) a failed run (RunFailed)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, baselines.PluginError):
            raise ResourceUnavailable(f"a Ray worker cannot load an optimizer plugin: {exc.cause}; the module must be "
                                      "importable on every node (installed there, or on their PYTHONPATH)") from None
        if isinstance(exc.cause, (UsageError, ResourceUnavailable, RunFailed)):  # one line each (replication.engine)
            raise exc.cause.with_traceback(None) from None
        raise
    except ray.exceptions.RayError as exc:  # NodeDiedError, WorkerCrashedError, ... after Ray's retries
        raise RunFailed(f"run {config.label} (method {config.method!r}) failed: Ray gave up on it "
                        f"({type(exc).__name__}: {one_line(exc, 200)}); run the command again to resume it from its "
                        "checkpoint") from None


def _import_ray():
    try:
        import ray
    except ImportError:
        raise PackageUnavailable('--executor ray needs Ray: pip install -e ".[distributed]" (or use --executor '
                                 'local)') from None
    return ray


def _run_ray(todo, runs_dir, workers, tracker, checkpoint_every_s, *, wait_for_lock):
    """Ray: connects to ``RAY_ADDRESS`` if set, else starts a local instance with ``workers`` CPUs."""
    ray = _import_ray()

    started_here = not ray.is_initialized()
    if started_here:
        address = os.environ.get("RAY_ADDRESS")
        handlers = {s: signal.getsignal(s) for s in stopping.STOP_SIGNALS}
        ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)
        if threading.current_thread() is threading.main_thread():
            for s, h in handlers.items():  # ray.init installs its own; keep the clean-stop handlers
                signal.signal(s, h)
    remote = ray.remote(num_cpus=1)(_execute_ray)
    busy = []
    try:
        needed = max(run_gpus(c) for c in todo)
        available = ray.cluster_resources().get("GPU", 0)
        if needed > available:
            raise ResourceUnavailable(f"runs of study {todo[0].study!r} need {needed} GPU(s) each, but the Ray "
                                      f"cluster has {available:g}; start Ray on GPU nodes (or set RAY_ADDRESS)")
        cpus = int(ray.cluster_resources().get("CPU", 1))
        tracker.begin(min(cpus, int(available // needed)) if needed else cpus)  # a task takes 1 CPU (+ its GPUs)
        plugins = baselines.imported_plugins()
        env = {"runtime_env": {"env_vars": {"PYTHONPATH": plugin_pythonpath(plugins)}}} if plugins else {}
        refs = {remote.options(num_gpus=run_gpus(c), **env).remote(c.to_dict(), str(os.path.abspath(runs_dir)),
                                                                    checkpoint_every_s, wait_for_lock, plugins): c
                for c in todo}
        try:
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1, timeout=ETA_EVERY_S)
                if not done:
                    tracker.tick()
                for ref in done:
                    config = refs.pop(ref)
                    try:
                        outcome = _ray_outcome(ray, ref, config)
                    except RunFailed as exc:
                        tracker.failed(config, exc)
                        continue
                    if outcome == BUSY:
                        busy.append(config)
                        tracker.released(config)
                    elif outcome is not None:
                        tracker.finished(outcome)
        except BaseException:
            for ref in refs:  # queued tasks are dropped; running ones are asked to stop (_execute_ray)
                ray.cancel(ref)
            # running ones write their checkpoint first: the time local workers get (a second Ctrl-C cuts it short)
            ray.wait(list(refs), num_returns=len(refs), timeout=STOP_GRACE_S)
            raise
    finally:
        if started_here:
            ray.shutdown()
    return busy
