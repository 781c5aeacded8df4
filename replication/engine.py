"""Execute one run: idempotent, checkpointed, resumable, locked, with one atomic record at the end.

* Idempotent: a run whose record (``<runs>/<study>/<setting>/<method>/<hash>.json``) exists
  with the same config is not redone; its record is returned.
* Resumable: every ``checkpoint_every_s`` seconds (and on request every
  ``checkpoint_every_iters`` iterations) the optimizer's ``state_dict`` (RNG included), the
  curve so far and the problem's random state are written atomically next to the record, as
  a data-only state file (:mod:`sabo.serialization`: nothing is unpickled or imported on
  resume; the optimizer class is found by its registry name). A run killed at any point
  (even by SIGKILL) restarts from its last checkpoint and, all computation being
  deterministic given the state, ends with the same ``config`` and ``result`` as an
  uninterrupted run; only ``provenance`` (timings, resume count) differs.
* Own files only: a checkpoint or record is used only if it holds this run's config (hash
  and content), and a checkpoint only if its optimizer state was saved by the optimizer this run's
  config builds (registry name and constructor arguments: seed, x0, parameters, budget) and its curve
  is that state's (:func:`optimizer_state_problem`; checkpoints of any version are checked so, no new
  field); one that does not, that cannot be read (truncated, empty, garbled, nested too
  deep), that is not a regular file inside the runs directory (a FIFO, a directory, a link to
  ``/dev/zero`` or out of the runs directory: :func:`replication.storage.read_bytes`), or a record
  of the wrong shape (:func:`replication.records.schema_problem`), is moved aside
  (:func:`replication.storage.quarantine`), reported in one line, and the run is recomputed.
  Temporary files left by an interrupted write are deleted.
* One process per run: a lock file ``<hash>.lock`` next to the record is held while the run
  executes, so two studies sharing a runs directory never compute the same run; with
  ``wait_for_lock=False`` a run held elsewhere raises :class:`RunBusy` at once. Anything but a
  regular file at the lock's path (a directory, a FIFO, a link) is moved aside first. The run removes
  it however it ends (a run killed outright leaves it: an empty file that locks nothing, removed
  when the run next ends).
* Stoppable: a stop request (:mod:`replication.stopping`: Ctrl-C, SIGTERM) ends the run at the
  next iteration boundary, after writing a checkpoint, with :class:`~replication.stopping.StopRequested`.
* A run whose objective or update overflows ends with ``status = "diverged"`` and the curve
  up to that point; it is a result, not a crash. A parameter value its optimizer's constructor
  refuses (``lr: -0.1``) is the user's mistake, not a result: a one-line
  :class:`~replication.errors.UsageError` before the run writes anything (its lock removed);
  the executors find it before a study's first run starts (:func:`check_parameters`).
* A run that raises anything else (a bug in a plug-in optimizer, an objective that fails) stops
  with :class:`~replication.errors.RunFailed`: one line naming the run, its method, the
  exception and the line that raised it; the traceback is written to ``<hash>.error.txt`` next
  to the record (deleted when the run later finishes), its checkpoint is kept, and nothing else
  is written. Running it again retries it.
* A problem with a ``final_evaluation(mean)`` method is evaluated once more at the end (e.g. a
  test set too large to score at every curve point); its dict is ``result["final_evaluation"]``.
* Budget: ``{"max_iter": T}`` (T iterations) or ``{"max_evals": E}`` (whole iterations while the
  next one, of the optimizer's ``evals_per_iteration``, fits in E function evaluations: a budget
  stated in evaluations, e.g. COCO's multiple of the dimension; the curve's log grid is laid out
  for E over the first iteration's size, and the last iteration is always a curve point).
* A run with ``budget = {"max_iter": 0}`` is an evaluation without an optimizer (e.g. the
  zero-shot row of a table): its record holds ``metrics(x0)`` and ``final_evaluation(x0)``.
* A problem that writes its own files as it evaluates (``attach_output(directory)``, e.g. COCO's
  observer) gets a fresh directory ``<hash>.files.partial`` before the first evaluation; at the
  end the engine calls its ``close()`` and renames the directory to ``<hash>.files`` before
  writing the record (the record is the commit: a ``.files`` directory without a record is a
  leftover, deleted with any ``.partial`` one when the run starts again). Such a run is not
  checkpointed: its files cannot be rewound to a checkpoint, so an interrupted one restarts from
  its first iteration (meant for runs of seconds to minutes).
* Kept: each record also gets a second name (a hard link, no second copy of its data),
  ``<runs>/.kept/<study>/<setting>/<method>/<hash>.record``, outside the directories DVC's stages
  declare as outputs, and a run whose record is gone but kept gets it back instead of computing
  it (:func:`keep_record`). ``dvc exp run`` first restores every stage's outputs as ``dvc.lock``
  lists them, deleting the records it does not list (written by ``sabo-bench run`` outside DVC, or
  under another profile): they were computed again, silently (hours for a full stage). Refusing
  to run inside an experiment (DVC sets ``DVC_EXP_NAME`` for its commands) could only report the
  loss, since DVC deletes before the command starts, and would refuse experiments that lose
  nothing; kept records make the deletion harmless. Not kept: runs with files of their own
  (their record is nothing without them) and checkpoints (a partial run an experiment deletes
  starts again).
* Timed: ``provenance`` holds ``started_utc`` and ``finished_utc`` (UTC, milliseconds) and
  ``curve_time_unix_s``, the wall time at which each curve point was computed (kept in the
  checkpoint; None for points of a checkpoint written before it was kept); MLflow shows them as
  the runs' start, duration and metric times. The ``result`` never depends on them.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
import warnings
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from filelock import FileLock, Timeout

import baselines
from sabo import SettingsWarning
from sabo.protocol import NonFiniteValueError, check_iteration_advanced, checked_mean
from sabo.state import tree_equal
from sabo.validation import check_int, check_x0, shown

from . import stopping
from .config import RunConfig, content_hash, iterations
from .costs import evaluations_per_iteration
from .curve import Curve
from .errors import PackageUnavailable, ResourceUnavailable, RunFailed, UsageError, one_line
from .records import RECORD_SCHEMA, schema_problem
from .storage import (
    UnusableFile,
    atomic_link,
    atomic_write_bytes,
    quarantine,
    quarantine_unless_regular,
    read_json,
    read_state,
    remove_stale_temporaries,
    write_json,
    write_state,
)
from .studies import get_study

CHECKPOINT_SCHEMA = 2  # 1 was a pickle
KEPT_DIR = ".kept"  # under the runs directory: the records' second names (module docstring, "Kept")


class RunBusy(Exception):
    """Another process holds the run's lock (raised only with ``wait_for_lock=False``)."""


class _ProgressRaised(Exception):
    """Carries an exception of ``execute``'s ``progress`` callback past the :class:`RunFailed` wrapping."""


def record_path(runs_dir, config: RunConfig) -> Path:
    return Path(runs_dir) / config.study / config.setting / config.method / f"{config.hash}.json"


def checkpoint_path(runs_dir, config: RunConfig) -> Path:
    return record_path(runs_dir, config).with_suffix(".ckpt")


def error_path(runs_dir, config: RunConfig) -> Path:
    """Where a failed run's traceback goes (:class:`~replication.errors.RunFailed`)."""
    return record_path(runs_dir, config).with_suffix(".error.txt")


def lock_path(runs_dir, config: RunConfig) -> Path:
    return record_path(runs_dir, config).with_suffix(".lock")


def kept_path(runs_dir, config: RunConfig) -> Path:
    """The record's second name, outside every stage's outputs (module docstring, "Kept")."""
    return Path(runs_dir, KEPT_DIR, config.study, config.setting, config.method, f"{config.hash}.record")


def keep_record(runs_dir, config: RunConfig, *, replace: bool = True) -> None:
    """Give ``config``'s record its second name :func:`kept_path` (``replace=False``: unless it has one; call
    with ``replace=True`` only holding the run's lock, as the engine does when it writes a record).

    Raises :class:`~replication.errors.WriteFailed` where it cannot (a read-only runs directory):
    callers warn, since the record itself is there, only not safe from a DVC experiment.
    """
    record, kept = record_path(runs_dir, config), kept_path(runs_dir, config)
    if files_path(runs_dir, config).exists() or (not replace and kept.exists()):
        return
    if replace:  # the run's writer, holding its lock: what a killed one left goes
        remove_stale_temporaries(kept)
    atomic_link(record, kept)


def not_kept_warning(count: int, runs_dir, exc: OSError) -> str:
    """The warning for ``count`` records :func:`keep_record` could not keep."""
    return (f"warning: {count} record(s) have no second name under {Path(runs_dir, KEPT_DIR)} ({exc.strerror or exc}):"
            " a DVC experiment that deletes them would compute them again")


def _restore_kept(runs_dir, config: RunConfig) -> dict | None:
    """``config``'s kept record put back in its place and returned, or None: none kept, or an unusable one,
    deleted (a second name of a damaged record, the first of which was reported and moved aside when it
    was found; the run computes the record anew and keeps that)."""
    kept = kept_path(runs_dir, config)
    record, problem = _read_record(kept, config, runs_dir)
    if problem is not None:
        kept.unlink(missing_ok=True)
    if record is not None:
        atomic_link(kept, record_path(runs_dir, config))
    return record


def files_path(runs_dir, config: RunConfig) -> Path:
    """The directory of the files a run's problem wrote itself (``attach_output``), next to its record."""
    return record_path(runs_dir, config).with_suffix(".files")


def record_paths(directory) -> list[Path]:
    """Every run record under ``directory`` (a runs directory or part of it), sorted: the files of
    :func:`record_path`, not the JSON a run's problem wrote into its :func:`files_path` directory."""
    directory = Path(directory)
    return sorted(path for path in directory.rglob("*.json")
                  if not any(part.endswith(".files") for part in path.relative_to(directory).parts))


def record_problem(record, config: RunConfig) -> str | None:
    """Why ``record`` is not a usable record of ``config`` (:func:`replication.records.schema_problem`, or
    another run's), or None if it is."""
    problem = schema_problem(record)
    if problem is not None:
        return problem
    if record["config_hash"] != config.hash or record["config"] != config.to_dict():
        return f"it holds the record of another run (config hash {record['config_hash']!r})"
    return None


def load_record(runs_dir, config: RunConfig, *, quarantine_bad: bool = False) -> dict | None:
    """The finished record of ``config``, or None.

    A record file that is unreadable, not a regular file inside ``runs_dir``, of the wrong shape
    or another run's counts as absent; with ``quarantine_bad`` it is also moved aside (the run
    then recomputes it).
    """
    path = record_path(runs_dir, config)
    record, problem = _read_record(path, config, runs_dir)
    if problem is not None and quarantine_bad:
        quarantine(path, problem)
    return record


def _read_record(path: Path, config: RunConfig, runs_dir) -> tuple[dict | None, str | None]:
    """``(record, None)`` if ``path`` holds ``config``'s record, ``(None, why not)`` if it holds something
    else (or is not a regular file inside ``runs_dir``), ``(None, None)`` if there is no such file."""
    try:
        record = read_json(path, within=runs_dir)
    except FileNotFoundError:
        return None, None
    except UnusableFile as exc:  # not a regular file in runs_dir, or too large
        return None, str(exc)
    except (OSError, ValueError) as exc:  # ValueError: bad JSON, bad UTF-8, nested too deep
        return None, f"unreadable JSON: {exc}"
    problem = record_problem(record, config)
    return (record, None) if problem is None else (None, problem)


RUN_STATUSES = ("completed", "diverged", "corrupt", "partial", "pending")
"""Every word :func:`record_status` returns (``sabo-bench list`` names them in its help)."""


def record_status(runs_dir, config: RunConfig) -> str:
    """``completed``/``diverged`` (record), ``corrupt`` (a record file that is unusable),
    ``partial`` (checkpoint only) or ``pending``, without changing any file."""
    record = load_record(runs_dir, config)
    if record is not None:
        return record["result"]["status"]
    if record_path(runs_dir, config).exists():
        return "corrupt"
    return "partial" if checkpoint_path(runs_dir, config).exists() else "pending"


def jsonable(obj):
    """NumPy scalars/arrays and nested containers -> plain Python for JSON."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


@functools.lru_cache(maxsize=1)
def git_revision() -> str | None:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in ("sabo-bench", "numpy", "scipy", "cma"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


@functools.lru_cache(maxsize=1)
def numerics() -> dict:
    """What decides the last bits of this process's floating-point results, besides the versions: the
    CPU architecture, each BLAS library with the kernels it chose for this CPU (threadpoolctl's
    ``architecture``, which ``OPENBLAS_CORETYPE`` overrides) and the SIMD extensions NumPy dispatches
    to (``NPY_DISABLE_CPU_FEATURES`` removes some). Runs are bit-reproducible where these and the
    versions are equal; elsewhere the last bits differ and a run's trajectory can diverge
    (docs/studies/reproducibility.md)."""
    from threadpoolctl import threadpool_info

    blas = sorted({f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
                   for i in threadpool_info() if i.get("user_api") == "blas"})
    try:  # NumPy's own record of the CPU features it found (numpy.show_runtime prints the same)
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
        simd = [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]
    except ImportError:
        simd = None
    return {"machine": platform.machine(), "blas": blas, "numpy_simd": simd}


def provenance_summary(records: list[dict]) -> str:
    """One sentence for a report: the commits that produced ``records``, when, and their summed run time."""
    revisions = sorted({str(r["provenance"]["git_revision"]) for r in records})
    finished = sorted(r["provenance"]["finished_utc"] for r in records)
    minutes = sum(r["provenance"]["wall_time_s"] for r in records) / 60.0
    commits = ", ".join(f"`{r}`" for r in revisions) or "none"
    span = f"{finished[0]} to {finished[-1]}" if finished else "-"
    return f"Produced by commit(s) {commits}; runs finished {span}; summed run time {minutes:.1f} min."


def wall_minutes(records: list[dict], key) -> defaultdict:
    """Summed wall time of ``records`` in minutes per ``key(config dict)`` (a report's "Where the time goes")."""
    out = defaultdict(float)
    for r in records:
        out[key(r["config"])] += r["provenance"]["wall_time_s"] / 60.0
    return out


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")  # MLflow's runs start and end in ms


def execute(config: RunConfig, runs_dir, *, checkpoint_every_s: float = 30.0,
            checkpoint_every_iters: int | None = None, progress=None, wait_for_lock: bool = True) -> dict:
    """Run ``config`` to completion (or resume it) and return its record; see the module docstring.

    ``progress``, if given, is called as ``progress(done, total)`` after every iteration: iterations
    ``(nit, max_iter)``, or under an evaluation budget evaluations ``(nfev, max_evals)`` (there the
    iterations can differ in size, e.g. MMES's first evaluates x0 too, and ``max_iter`` is an
    estimate); what it raises reaches the caller as raised (anything else a run raises becomes :class:`RunFailed`).
    ``wait_for_lock=False`` raises :class:`RunBusy` instead of waiting while another process
    executes the same run.
    """
    stopping.check()
    existing = load_record(runs_dir, config)
    if existing is not None:
        return existing
    lock = lock_path(runs_dir, config)
    lock.parent.mkdir(parents=True, exist_ok=True)
    quarantine_unless_regular(lock, "the run takes a lock file of its own")
    try:
        held = FileLock(lock).acquire(timeout=-1 if wait_for_lock else 0, poll_interval=0.2)
    except Timeout:
        raise RunBusy(f"{config.label} is being executed by another process") from None
    with held:
        try:
            record = _execute_locked(config, runs_dir, checkpoint_every_s, checkpoint_every_iters, progress)
        except (UsageError, ResourceUnavailable):
            raise  # refused (its parameters) or unable to start here (its model or data missing): not a RunFailed
        except _ProgressRaised as wrapped:  # the caller's own exception, as raised
            raise wrapped.__cause__ from None
        except Exception as exc:
            raise _failed(config, runs_dir, exc) from None
        else:
            error_path(runs_dir, config).unlink(missing_ok=True)
            return record
        finally:
            # However the run ends (recorded, failed, stopped, interrupted), its lock file goes, removed while
            # held: a process that opened it before and takes the lock after finds it unlinked and locks the path
            # anew (filelock >= 3.29.5 checks st_nlink after flock, and leaves the file to us on release).
            lock.unlink(missing_ok=True)


@contextlib.contextmanager
def repeats_counted(label: str):
    """Within a run, each place that warns shows its first warning; its repeats are counted and told in
    one line when the run ends. Python's own rule shows each distinct text once, and pycma's step-size
    adaptation puts the time and iteration in its text: one CMA-ES run at d = 1000 whose sigma had
    vanished printed a warning in each of its ~1,300 last iterations (8,178 lines in one main job)."""
    show, counts = warnings.showwarning, {}

    def first_only(message, category, filename, lineno, file=None, line=None):
        key = (category.__name__, filename, lineno)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] == 1:
            show(message, category, filename, lineno, file, line)

    warnings.showwarning = first_only
    try:
        yield
    finally:
        warnings.showwarning = show
        for (name, filename, lineno), n in counts.items():
            if n > 1:
                print(f"{label}: {n - 1} more {name} like the one above from {filename}:{lineno}", file=sys.stderr)


def _failed(config: RunConfig, runs_dir, exc: Exception) -> RunFailed:
    """``exc`` as :class:`RunFailed`, its traceback written to :func:`error_path`."""
    path = error_path(runs_dir, config)
    try:
        atomic_write_bytes(path, "".join(traceback.format_exception(exc)).encode())
        where = f"the traceback is in {path}"
    except OSError as write_error:  # a full disk must not hide the run's own error
        where = f"its traceback could not be written to {path} ({write_error.strerror or write_error})"
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return RunFailed(f"run {config.label} (method {config.method!r}) failed: {type(exc).__name__}: "
                     f"{one_line(exc, 300)} (at {frame.filename}:{frame.lineno} in {frame.name}); {where}")


def _execute_locked(config: RunConfig, runs_dir, checkpoint_every_s, checkpoint_every_iters, progress) -> dict:
    # finished by the process that held the lock before us, or deleted by a DVC experiment but kept
    existing = load_record(runs_dir, config, quarantine_bad=True) or _restore_kept(runs_dir, config)
    if existing is not None:
        return existing
    ckpt = checkpoint_path(runs_dir, config)
    for path in (record_path(runs_dir, config), ckpt):
        remove_stale_temporaries(path)
    study = get_study(config.study)
    problem = study.make_problem(config)
    if config.budget.get("max_iter") == 0:
        return _evaluate_only(config, problem, runs_dir)
    optimizer, params = _optimizer_and_params(config)
    files = files_path(runs_dir, config) if hasattr(problem, "attach_output") else None
    # Built before any checkpoint is read: its parameters refused are the user's mistake (UsageError) whether or
    # not a checkpoint exists, and a checkpoint's optimizer state must have been saved by this very optimizer
    # (_resume compares their constructor arguments).
    opt = _new_optimizer(config, optimizer, params, problem)
    resumed = None
    if files is None and ckpt.exists():  # a run with files of its own is not resumable (module docstring)
        resumed = _resume(ckpt, runs_dir, config, optimizer, problem, opt)
        if resumed is None:
            problem = study.make_problem(config)  # the failed restore may have set part of its state
    if resumed is not None:
        opt, max_iter, curve, stamps, elapsed, resumes, started, tally = resumed
    else:
        max_iter = iterations(config.budget, opt.evals_per_iteration)
        curve, stamps, elapsed, resumes, started = Curve(max_iter), [], 0.0, 0, _now()
        tally = _new_tally(opt)
    if files is not None:  # start afresh, leftovers removed
        ckpt.unlink(missing_ok=True)
        partial = files.with_name(files.name + ".partial")
        for leftover in (files, partial):
            shutil.rmtree(leftover, ignore_errors=True)
        partial.mkdir(parents=True)
        problem.attach_output(partial)

    def add_point():
        curve.add(opt.nit, opt.nfev, opt.f_best, problem.metrics(_checked_mean(opt)))
        stamps.append(round(time.time(), 3))  # the wall time of each curve point, for MLflow

    if resumed is None:
        add_point()

    def save_checkpoint():
        if files is not None:
            return
        write_state(ckpt, {"schema": CHECKPOINT_SCHEMA, "config_hash": config.hash, "config": config.to_dict(),
                           "optimizer": opt.state_dict(), "max_iter": max_iter, "curve": curve.state(),
                           "curve_time_unix_s": stamps,
                           "problem": problem.get_state(),
                           "elapsed": elapsed + time.perf_counter() - t0, "resumes": resumes, "started": started,
                           "iteration": dict(tally)})

    max_evals = config.budget.get("max_evals")

    def within_budget() -> bool:
        """Another iteration fits: checked at iteration boundaries, so an evaluation budget is never
        exceeded even where the iterations differ in size (MMES evaluates x0 in its first one)."""
        return opt.nit < max_iter if max_evals is None else opt.nfev + opt.evals_per_iteration <= max_evals

    status, message = "completed", ("maximum number of iterations reached" if max_evals is None else
                                     "evaluation budget reached")
    t0 = last_save = time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"), stopping.iterations(), \
            warnings.catch_warnings(), repeats_counted(config.label):
        # studies run the paper's settings on purpose; the record's stats carry what the warning
        # would say (KL radius, safeguard counts, perturbation size)
        warnings.simplefilter("ignore", SettingsWarning)
        try:
            mid_iteration = tally["rounds"] > 0  # resumed between the rounds of an iteration
            while mid_iteration or within_budget():
                if stopping.requested() is not None:
                    save_checkpoint()
                    stopping.check()
                nit = opt.nit
                X = opt.ask()
                opt.tell(X, problem.objective(X))
                tally["rounds"] += 1
                if tally["rows"] is not None:
                    tally["rows"] += len(X)
                mid_iteration = opt.nit == nit
                if mid_iteration:  # first round of a two-round (SABO) iteration
                    check_iteration_advanced(opt, tally["rounds"])
                    continue
                _check_rows(opt, tally)  # the budget and the record's evaluation counts rely on it
                tally = _new_tally(opt)
                if curve.due(opt.nit):
                    add_point()
                if progress is not None:
                    try:
                        progress(*((opt.nit, max_iter) if max_evals is None else (opt.nfev, max_evals)))
                    except Exception as exc:
                        raise _ProgressRaised from exc
                now = time.perf_counter()
                if (now - last_save >= checkpoint_every_s
                        or (checkpoint_every_iters and opt.nit % checkpoint_every_iters == 0)):
                    save_checkpoint()
                    last_save = now
        except (NonFiniteValueError, FloatingPointError) as exc:
            status, message = "diverged", str(exc)
        if curve.columns["nit"][-1] != opt.nit:  # past the grid's end (an evaluation budget) or diverged
            add_point()
    result = {
        "status": status,
        "message": message,
        "seeds": {"problem": config.problem_seed(), "optimizer": config.optimizer_seed()},
        "evals_per_iteration": int(opt.evals_per_iteration),
        "final": curve.last(),
        "curve": curve.columns,
        "stats": jsonable(opt.stats),
        **_final_evaluation(problem, _checked_mean(opt)),
    }
    if files is not None:
        problem.close()  # flushes the problem's files
        partial.rename(files)
    record = _write_record(config, runs_dir, result, started, elapsed + time.perf_counter() - t0, resumes, stamps)
    ckpt.unlink(missing_ok=True)
    return record


def _new_optimizer(config: RunConfig, optimizer: str, params: dict, problem):
    """The run's optimizer, built from its parameters at the problem's x0 (:func:`_build_optimizer`)."""
    x0 = check_x0(problem.x0)
    if not np.array_equal(x0, get_study(config.study).x0(config)):  # where check_parameters built the optimizers
        raise RuntimeError(f"study {config.study!r} breaks its contract: its x0(config) is not its problem's x0 "
                           f"({config.label})")
    return _build_optimizer(config, optimizer, params, x0)


def _build_optimizer(config: RunConfig, optimizer: str, params: dict, x0: np.ndarray):
    """``optimizer`` built from ``params``; one it refuses is the user's mistake, not the run's
    (:class:`~replication.errors.UsageError`: one line, exit status 2, nothing of the run written), as is
    one whose optional package is not installed (:class:`~replication.errors.PackageUnavailable`).

    Only the constructor's ``ValueError`` (how every optimizer here refuses a value) is such a refusal: the
    optimizer's name is looked up (a plugin that cannot be loaded stays a :class:`~baselines.PluginError`)
    and the study's x0 checked before."""
    budget = _budget_argument(optimizer, params, x0.size, config.budget)
    try:
        return baselines.make(optimizer, x0=x0, seed=config.optimizer_seed(), **params, **budget)
    except baselines.PluginError:
        raise
    except ValueError as exc:
        raise UsageError(f"run {config.study}/{config.label}: method {config.method!r} (optimizer {optimizer!r}) "
                         f"refuses its parameters: {one_line(exc) or type(exc).__name__}") from exc
    except ImportError as exc:  # an optional extra not installed; the optimizers' messages name it
        raise PackageUnavailable(f"run {config.study}/{config.label}: method {config.method!r} (optimizer "
                                 f"{optimizer!r}) cannot run here: {one_line(exc) or type(exc).__name__} (or leave "
                                 "the method out: --method names the ones to run)") from exc


def _optimizer_and_params(config: RunConfig) -> tuple[str, dict]:
    """The registry name of the run's optimizer and its constructor arguments: a study may run one optimizer
    under several labels (``sabo_small_rho: {optimizer: sabo, ...}``)."""
    params = dict(config.params)
    return params.pop("optimizer", config.method), params


def check_parameters(configs, *, packages_here: bool = True) -> None:
    """Build the optimizer of every distinct (optimizer, parameters, x0, budget) of ``configs`` once,
    so that a value a constructor refuses stops a study before its first run
    (:class:`~replication.errors.UsageError`, the message :func:`execute` would give) instead of when
    the first run of that method starts, possibly hours in (executors start the longest runs first).

    Built at the run's x0 (``Study.x0``, from the config alone): no problem is built (the prompt
    study's would load a model). A ``device`` argument is replaced by ``"cpu"``: a CUDA context in the calling
    process would hold memory on a GPU its workers use, so a device the machine lacks is still found
    when the run starts (:class:`~replication.errors.ResourceUnavailable`). Runs without an optimizer
    (``max_iter = 0``) are skipped. ``packages_here=False`` (runs executed in other environments: a
    Ray cluster): a method whose optional package this process lacks is left to the workers."""
    seen = set()
    for config in configs:
        if config.budget.get("max_iter") == 0:
            continue
        optimizer, params = _optimizer_and_params(config)
        if "device" in params:
            params["device"] = "cpu"
        x0 = get_study(config.study).x0(config)
        key = content_hash({"optimizer": optimizer, "params": params, "x0": x0.tolist(), "budget": config.budget})
        if key not in seen:
            seen.add(key)
            try:
                _build_optimizer(config, optimizer, params, check_x0(x0))
            except PackageUnavailable:
                if packages_here:
                    raise


def _budget_argument(optimizer: str, params: dict, dim: int, budget: dict) -> dict:
    """``{"budget": evaluations}`` for an optimizer whose constructor takes the run's budget (Nevergrad's
    algorithms plan by it), else nothing: ``max_evals``, or ``max_iter`` iterations of
    :func:`~replication.costs.evaluations_per_iteration` evaluations."""
    if "budget" not in baselines.parameters(optimizer):
        return {}
    if "max_evals" in budget:
        return {"budget": int(budget["max_evals"])}
    return {"budget": int(budget["max_iter"]) * evaluations_per_iteration(baselines.get(optimizer), dim,
                                                                          params.get("popsize"), params)}


def _resume(ckpt: Path, runs_dir, config: RunConfig, optimizer: str, problem, fresh):
    """(optimizer, max_iter, curve, stamps, elapsed, resumes, started) from ``config``'s checkpoint, or None.

    ``max_iter`` (the curve's grid): the budget's ``max_iter``, or under ``max_evals`` the one the
    run started with, read from the checkpoint: it comes from the optimizer's
    ``evals_per_iteration``, which may change after the first iteration (MMES evaluates x0 in it),
    so recomputing it from the restored optimizer would put the rest of the curve on another grid
    than an uninterrupted run's. A checkpoint written before it was kept recomputes it so; where
    that is another grid (MMES), :meth:`Curve.from_state` finds the points off it and the run is
    recomputed.
    ``stamps`` are the wall times of the curve points (None for points of a checkpoint written
    before they were kept).

    A checkpoint that cannot be read (not a regular file inside ``runs_dir`` included), or that holds
    another run, is quarantined (None). The optimizer is rebuilt by its registry name from the config,
    never from the file.

    Another run's checkpoint includes one whose config and hash are this run's but whose optimizer state is not
    (spliced from two checkpoints, or edited): the state's registry name and constructor arguments (seed, x0 and
    so the dimension, every parameter, Nevergrad's budget) must equal those of ``fresh``, the optimizer this run
    builds from its config, before anything is restored (restoring CMA-ES or Nevergrad replays every value told
    so far: a foreign state of d = 1500 took 40 s to refuse), and the curve must be the one of the optimizer's
    progress (:func:`_curve_problem`).
    """
    try:
        state = read_state(ckpt, within=runs_dir)
        if not isinstance(state, dict) or state.get("schema") != CHECKPOINT_SCHEMA:
            raise ValueError(f"not a checkpoint of schema {CHECKPOINT_SCHEMA}")
        if state.get("config_hash") != config.hash or state.get("config") != config.to_dict():
            raise ValueError(f"it holds the checkpoint of another run (config hash {state.get('config_hash')!r})")
        foreign = optimizer_state_problem(state["optimizer"], fresh.state_dict())
        if foreign is not None:
            raise ValueError(f"its optimizer state is not this run's: {foreign} (spliced from another run's "
                             "checkpoint, or edited)")
        opt = baselines.restore(optimizer, state["optimizer"])  # the class from the config's name, not the file
        if opt.dim != problem.x0.size:
            raise ValueError(f"its optimizer has dimension {opt.dim}, the problem {problem.x0.size}")
        max_iter = iterations(config.budget, opt.evals_per_iteration)
        if "max_evals" in config.budget:  # only the curve's grid reads it; the loop counts evaluations
            max_iter = check_int("max_iter", state.get("max_iter", max_iter), minimum=0,
                                 maximum=int(config.budget["max_evals"]))
        curve = Curve.from_state(max_iter, state["curve"])
        mismatch = _curve_problem(curve, opt)
        if mismatch is not None:
            raise ValueError(mismatch)
        stamps = state.get("curve_time_unix_s", [None] * len(curve.columns["nit"]))
        if not (isinstance(stamps, list) and len(stamps) == len(curve.columns["nit"])
                and all(t is None or isinstance(t, float) for t in stamps)):
            raise ValueError("curve_time_unix_s must be a list of times, one per curve point")
        elapsed, resumes, started = float(state["elapsed"]), int(state["resumes"]) + 1, str(state["started"])
        tally = _checked_tally(state.get("iteration"))
        problem.set_state(state["problem"])
    except Exception as exc:  # any defect of the file: recompute rather than stop the study
        quarantine(ckpt, str(exc) if isinstance(exc, UnusableFile) else f"{type(exc).__name__}: {exc}")
        return None
    return opt, max_iter, curve, stamps, elapsed, resumes, started, tally


def optimizer_state_problem(saved, expected: dict) -> str | None:
    """How the optimizer state ``saved`` (a checkpoint's) differs from ``expected`` (``state_dict()`` of the optimizer
    the run builds from its config) in the registry name or the constructor arguments, or None where it does not.

    What it names: ``optimizer 'ingo', this run's 'sabo'``; ``seed 5, this run's 7``; ``x0 of shape (40,), this
    run's (20,)``; up to three arguments. The evolving state is the restorer's to check
    (:meth:`sabo.protocol.AskTellOptimizer.from_state_dict`); these arguments decide how it continues."""
    if not isinstance(saved, dict) or not isinstance(saved.get("config"), dict):
        return "it has no constructor arguments (a dict 'config')"
    if saved.get("optimizer") != expected["optimizer"]:
        return f"saved by optimizer {shown(saved.get('optimizer'))}, this run's {expected['optimizer']!r}"
    got, want = saved["config"], expected["config"]
    if set(got) != set(want):
        return f"constructor arguments {sorted(map(str, got))}, this run's {sorted(want)}"
    differences = [_difference(key, got[key], want[key]) for key in want if not tree_equal(got[key], want[key])]
    if not differences:
        return None
    more = f" and {len(differences) - 3} more" if len(differences) > 3 else ""
    return "saved with " + "; ".join(differences[:3]) + more


def _difference(key: str, got, want) -> str:
    """``key``'s saved value ``got`` against the run's ``want``, for :func:`optimizer_state_problem`'s message."""
    if isinstance(got, np.ndarray) and isinstance(want, np.ndarray):  # x0, sigma0: their numbers would fill the line
        if got.shape != want.shape:
            return f"{key} of shape {got.shape}, this run's {want.shape}"
        if got.dtype.kind == want.dtype.kind:
            return f"{key} other than this run's in {int(np.sum(got != want))} of {got.size} entries"
    return f"{key} {one_line(shown(got), 80)}, this run's {one_line(shown(want), 80)}"


def _curve_problem(curve: Curve, opt) -> str | None:
    """Why a checkpoint's ``curve`` cannot be the curve of the restored ``opt``'s run so far, or None.

    The engine adds a point at every grid iteration the optimizer passes and checkpoints only after it: the curve
    ends at or before the optimizer's iteration and evaluation counts, and its next grid iteration is still ahead
    (a curve spliced from another point of the run, or cut, would leave points missing or in the future)."""
    nit, nfev = curve.columns["nit"][-1], curve.columns["nfev"][-1]
    ahead = curve.grid[curve._next] if curve._next < len(curve.grid) else None
    if nit > opt.nit or nfev > opt.nfev or (ahead is not None and ahead <= opt.nit):
        return (f"its curve (last point at iteration {nit}, {nfev} evaluations) is not the curve of its optimizer "
                f"state (iteration {opt.nit}, {opt.nfev} evaluations)")
    return None


def checkpoint_progress(runs_dir, config: RunConfig) -> float:
    """The fraction of ``config``'s iterations (under ``max_evals``: evaluations) its checkpoint holds, at its
    last curve point; 0.0 without one (:func:`checkpoint_summary`)."""
    return checkpoint_summary(runs_dir, config)[0]


def checkpoint_summary(runs_dir, config: RunConfig) -> tuple[float, float]:
    """(the fraction of ``config``'s iterations, or under ``max_evals`` evaluations, its checkpoint holds at its
    last curve point; the run's seconds until that checkpoint, its earlier sessions' included); (0.0, 0.0)
    without one.

    For the ETA only: nothing is changed, and a checkpoint that is unreadable or holds another run
    counts as no progress (the run itself decides what to do with it).
    """
    ckpt = checkpoint_path(runs_dir, config)
    if not ckpt.exists():
        return 0.0, 0.0
    try:
        state = read_state(ckpt, within=runs_dir)
        if state.get("config_hash") != config.hash:
            return 0.0, 0.0
        column, total = (("nit", state["max_iter"]) if "max_evals" not in config.budget else
                         ("nfev", config.budget["max_evals"]))
        done = state["curve"]["columns"][column][-1]
        fraction = min(max(float(done) / float(total), 0.0), 1.0) if total > 0 else 0.0
        return fraction, max(float(state["elapsed"]), 0.0)
    except Exception:  # any defect: no progress known
        return 0.0, 0.0


def _checked_mean(opt) -> np.ndarray:
    """``opt.mean`` (:func:`sabo.protocol.checked_mean`), which every metric is computed at, and finite.

    The suite's optimizers never hold a non-finite state (``_require_finite`` refuses the update, and the run
    ends "diverged"); an optimizer that does breaks the protocol, and its run fails naming it."""
    mean = checked_mean(opt)
    if not np.all(np.isfinite(mean)):
        raise ValueError(f"{type(opt).__name__}.mean is not finite at iteration {opt.nit}: an update that makes the "
                         "state non-finite must be refused (AskTellOptimizer._require_finite; the run then ends "
                         "\"diverged\")")
    return mean


def _new_tally(opt) -> dict:
    """The next iteration's count of ask/tell rounds and rows, and the rows its optimizer declares for it.

    Kept in checkpoints: a run stopped between SABO's two rounds resumes mid-iteration."""
    return {"rounds": 0, "rows": 0, "declared": int(opt.evals_per_iteration)}


def _checked_tally(tally) -> dict:
    """A checkpoint's :func:`_new_tally` count. A checkpoint written before it was kept resumes with the rows
    unknown (None) until the iteration ends: that iteration's rows are not checked."""
    if tally is None:
        return {"rounds": 0, "rows": None, "declared": None}

    def count(key):
        return (type(tally[key]) is int and tally[key] >= 0) or (key != "rounds" and tally[key] is None)

    if not (isinstance(tally, dict) and set(tally) == {"rounds", "rows", "declared"} and all(map(count, tally))):
        raise ValueError(f"iteration must hold counts rounds, rows and declared (got {tally!r})")
    return dict(tally)


def _check_rows(opt, tally: dict) -> None:
    """The rows an iteration evaluated are the ``evals_per_iteration`` its optimizer declared before it."""
    if tally["rows"] is not None and tally["rows"] != tally["declared"]:
        name = type(opt).__name__
        raise RuntimeError(f"{name}'s asks returned {tally['rows']} rows in iteration {opt.nit}, but it declared "
                           f"evals_per_iteration = {tally['declared']} (rounds_per_iteration x rows_per_ask): "
                           "evaluation budgets and the record's evaluation counts rely on it")


def _final_evaluation(problem, mean) -> dict:
    """``{"final_evaluation": ...}`` for a problem that has the optional hook, else nothing."""
    if not hasattr(problem, "final_evaluation"):
        return {}
    return {"final_evaluation": jsonable(problem.final_evaluation(mean))}


def _evaluate_only(config: RunConfig, problem, runs_dir) -> dict:
    """The record of a ``max_iter = 0`` run: the problem evaluated at ``x0``, no optimizer."""
    started, t0 = _now(), time.perf_counter()
    curve = Curve(0)
    curve.add(0, 0, float("nan"), problem.metrics(problem.x0))
    stamps = [round(time.time(), 3)]
    result = {"status": "completed", "message": "evaluation at x0 (max_iter = 0, no optimizer)",
              "seeds": {"problem": config.problem_seed()}, "evals_per_iteration": 0,
              "final": curve.last(), "curve": curve.columns, "stats": {}, **_final_evaluation(problem, problem.x0)}
    return _write_record(config, runs_dir, result, started, time.perf_counter() - t0, 0, stamps)


def _write_record(config: RunConfig, runs_dir, result: dict, started: str, wall: float, resumes: int,
                  stamps: list) -> dict:
    record = {
        "schema": RECORD_SCHEMA,
        "config": config.to_dict(),
        "config_hash": config.hash,
        "group_hash": config.group_hash,
        "result": result,
        "provenance": {
            "versions": versions(),
            "numerics": numerics(),
            "git_revision": git_revision(),
            "host": platform.node(),
            "started_utc": started,
            "finished_utc": _now(),
            "wall_time_s": round(wall, 3),
            "curve_time_unix_s": stamps,
            "resumed": resumes,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        },
    }
    write_json(record_path(runs_dir, config), record)
    try:
        keep_record(runs_dir, config)
    except OSError as exc:
        print(not_kept_warning(1, runs_dir, exc), file=sys.stderr)
    return record
