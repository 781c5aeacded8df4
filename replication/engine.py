"""Execute one run: idempotent, checkpointed, resumable, with one atomic record at the end.

* Idempotent: a run whose record (``<runs>/<study>/<setting>/<method>/<hash>.json``) exists
  with the same config hash is not redone; its record is returned.
* Resumable: every ``checkpoint_every_s`` seconds (and on request every
  ``checkpoint_every_iters`` iterations) the optimizer's ``state_dict`` (RNG included), the
  curve so far and the problem's random state are pickled atomically next to the record. A
  run killed at any point (even by SIGKILL) restarts from its last checkpoint and, all
  computation being deterministic given the state, ends with the same ``config`` and
  ``result`` as an uninterrupted run; only ``provenance`` (timings, resume count) differs.
* A run whose objective or update overflows ends with ``status = "diverged"`` and the curve
  up to that point; it is a result, not a crash.
* A problem with a ``final_evaluation(mean)`` method is evaluated once more at the end (e.g. a
  test set too large to score at every curve point); its dict is ``result["final_evaluation"]``.
* A run with ``budget = {"max_iter": 0}`` is an evaluation without an optimizer (e.g. the
  zero-shot row of a table): its record holds ``metrics(x0)`` and ``final_evaluation(x0)``.
"""
from __future__ import annotations

import functools
import importlib.metadata
import platform
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

import baselines
from sabo.protocol import AskTellOptimizer, NonFiniteValueError

from .config import RunConfig
from .curve import Curve
from .storage import read_json, read_pickle, write_json, write_pickle
from .studies import get_study

RECORD_SCHEMA = 1


def record_path(runs_dir, config: RunConfig) -> Path:
    return Path(runs_dir) / config.study / config.setting / config.method / f"{config.hash}.json"


def checkpoint_path(runs_dir, config: RunConfig) -> Path:
    return record_path(runs_dir, config).with_suffix(".ckpt")


def load_record(runs_dir, config: RunConfig) -> dict | None:
    """The finished record of ``config``, or None."""
    path = record_path(runs_dir, config)
    if not path.exists():
        return None
    record = read_json(path)
    return record if record.get("config_hash") == config.hash else None


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


def provenance_summary(records: list[dict]) -> str:
    """One sentence for a report: the commits that produced ``records``, when, and their summed run time."""
    revisions = sorted({str(r["provenance"]["git_revision"]) for r in records})
    finished = sorted(r["provenance"]["finished_utc"] for r in records)
    minutes = sum(r["provenance"]["wall_time_s"] for r in records) / 60.0
    commits = ", ".join(f"`{r}`" for r in revisions) or "none"
    span = f"{finished[0]} to {finished[-1]}" if finished else "-"
    return f"Produced by commit(s) {commits}; runs finished {span}; summed run time {minutes:.1f} min."


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def execute(config: RunConfig, runs_dir, *, checkpoint_every_s: float = 30.0,
            checkpoint_every_iters: int | None = None, progress=None) -> dict:
    """Run ``config`` to completion (or resume it) and return its record; see the module docstring.

    ``progress``, if given, is called as ``progress(nit, max_iter)`` after every iteration.
    """
    existing = load_record(runs_dir, config)
    if existing is not None:
        return existing
    problem = get_study(config.study).make_problem(config)
    max_iter = int(config.budget["max_iter"])
    if max_iter == 0:
        return _evaluate_only(config, problem, runs_dir)
    ckpt = checkpoint_path(runs_dir, config)
    started = _now()
    if ckpt.exists():
        state = read_pickle(ckpt)
        opt = AskTellOptimizer.from_state_dict(state["optimizer"])
        curve, elapsed, resumes = state["curve"], state["elapsed"], state["resumes"] + 1
        problem.set_state(state["problem"])
        started = state["started"]
    else:
        params = dict(config.params)
        # a study may run one optimizer under several labels (e.g. a variant with another grid)
        optimizer = params.pop("optimizer", config.method)
        opt = baselines.make(optimizer, x0=problem.x0, seed=config.optimizer_seed(), **params)
        curve, elapsed, resumes = Curve(max_iter), 0.0, 0
        curve.add(0, 0, opt.f_best, problem.metrics(opt.mean))

    def save_checkpoint():
        write_pickle(ckpt, {"config_hash": config.hash, "optimizer": opt.state_dict(), "curve": curve,
                            "problem": problem.get_state(), "elapsed": elapsed + time.perf_counter() - t0,
                            "resumes": resumes, "started": started})

    status, message = "completed", "maximum number of iterations reached"
    t0 = last_save = time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        try:
            while opt.nit < max_iter:
                nit = opt.nit
                X = opt.ask()
                opt.tell(X, problem.objective(X))
                if opt.nit == nit:
                    continue  # first round of a two-round (SABO) iteration
                if curve.due(opt.nit):
                    curve.add(opt.nit, opt.nfev, opt.f_best, problem.metrics(opt.mean))
                if progress is not None:
                    progress(opt.nit, max_iter)
                now = time.perf_counter()
                if (now - last_save >= checkpoint_every_s
                        or (checkpoint_every_iters and opt.nit % checkpoint_every_iters == 0)):
                    save_checkpoint()
                    last_save = now
        except (NonFiniteValueError, FloatingPointError) as exc:
            status, message = "diverged", str(exc)
            if curve.columns["nit"][-1] != opt.nit:
                curve.add(opt.nit, opt.nfev, opt.f_best, problem.metrics(opt.mean))
    result = {
        "status": status,
        "message": message,
        "seeds": {"problem": config.problem_seed(), "optimizer": config.optimizer_seed()},
        "evals_per_iteration": int(getattr(opt, "evals_per_iteration", opt.popsize)),
        "final": curve.last(),
        "curve": curve.columns,
        "stats": jsonable(opt.stats),
        **_final_evaluation(problem, opt.mean),
    }
    record = _write_record(config, runs_dir, result, started, elapsed + time.perf_counter() - t0, resumes)
    ckpt.unlink(missing_ok=True)
    return record


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
    result = {"status": "completed", "message": "evaluation at x0 (max_iter = 0, no optimizer)",
              "seeds": {"problem": config.problem_seed()}, "evals_per_iteration": 0,
              "final": curve.last(), "curve": curve.columns, "stats": {}, **_final_evaluation(problem, problem.x0)}
    return _write_record(config, runs_dir, result, started, time.perf_counter() - t0, 0)


def _write_record(config: RunConfig, runs_dir, result: dict, started: str, wall: float, resumes: int) -> dict:
    record = {
        "schema": RECORD_SCHEMA,
        "config": config.to_dict(),
        "config_hash": config.hash,
        "group_hash": config.group_hash,
        "result": result,
        "provenance": {
            "versions": versions(),
            "git_revision": git_revision(),
            "host": platform.node(),
            "started_utc": started,
            "finished_utc": _now(),
            "wall_time_s": round(wall, 3),
            "resumed": resumes,
        },
    }
    write_json(record_path(runs_dir, config), record)
    return record
