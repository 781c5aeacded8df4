"""``sabo-bench status``: how far each study of the pipeline is and how long is left, read from the runs directory.

Safe to run at any moment from another terminal, while ``dvc repro`` or ``sabo-bench run``
works: nothing is written, moved or locked for longer than a test (see :func:`lock_held`).

Per study, for its active profile (``params.yaml``): the runs recorded of the profile's total
(by status), the runs running now (their lock is held: :func:`lock_held`) with the share their
last checkpoint holds, the runs with a checkpoint and no process (``partial``: interrupted), and
the ETA. The ETA is :class:`replication.eta.Eta`'s, fed as a run's progress bar would be: the
study's finished records calibrate the cost estimates (seconds per unit per method and setting,
else per method, else the median method's), a running run is predicted from its own checkpoint
(its seconds so far over the share done) and a partial one for what it has left, and every run
takes the executor's own seconds per run measured in the study's latest session
(:func:`executor_seconds`). The runs left are scheduled on ``workers`` workers stage by stage,
one (setting, method) after another, as ``dvc repro`` runs the pipeline's stages (``dvc.yaml``:
``--workers 2``); the studies add up.
A study without a finished record yet is predicted from the other studies' rates (the cost
estimates share one unit: about 0.015 us of one core's work). Not counted: the report stages,
and a machine whose load changes.
"""
from __future__ import annotations

import fcntl
import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime

from .config import RunConfig
from .costs import cost_estimates
from .engine import checkpoint_path, checkpoint_summary, load_record, lock_path, record_status
from .eta import MIN_REPORTED, Eta
from .progress import clock, eta_groups, work_share


def lock_held(path) -> bool:
    """Whether a process holds the run lock file ``path`` (the engine's ``filelock``, an exclusive ``flock``).

    Tested by taking a shared ``flock`` without waiting, on a read-only descriptor, and releasing it at
    once: no file is created or written. A lock file left by a killed run locks nothing (False). In the
    instant the test holds it, a run starting on that file would find it busy and be retried later
    by its executor (:class:`~replication.engine.RunBusy`), never computed twice.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@dataclass
class Running:
    """A run whose lock is held: its label, the share of its work its last checkpoint holds, and how old that is."""

    config: RunConfig
    fraction: float
    checkpoint_age_s: float | None  # None: no checkpoint yet


@dataclass
class StudyStatus:
    study: str
    profile: str
    total: int
    counts: dict = field(default_factory=dict)        # record status (completed, diverged, corrupt) -> runs
    running: list = field(default_factory=list)       # Running
    partial: int = 0                                  # a checkpoint and no process
    pending: int = 0
    seconds_left: float | None = None                 # None: nothing left, or nothing measured anywhere
    borrowed: bool = False                            # predicted from other studies' rates

    @property
    def recorded(self) -> int:
        return self.counts.get("completed", 0) + self.counts.get("diverged", 0)

    def lines(self) -> list[str]:
        head = f"{self.study} (profile {self.profile}): "
        if not self.total:
            return [head + "no runs in this profile"]
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.counts.items()))
        parts = [f"{self.recorded}/{self.total} runs recorded" + (f" ({counts})" if counts else "")]
        parts += [f"{len(self.running)} running"] if self.running else []
        parts += [f"{self.partial} partial (interrupted)"] if self.partial else []
        parts += [f"{self.pending} pending"] if self.pending else []
        if self.recorded == self.total:
            parts.append("done")
        elif self.seconds_left is None:
            parts.append("ETA unknown: no run has finished or written a checkpoint yet")
        else:
            parts.append(f"ETA {clock(round(self.seconds_left))}" +
                         (" (no record of this study yet: other studies' rates)" if self.borrowed else ""))
        out = [head + ", ".join(parts)]
        for run in self.running:
            age = ("no checkpoint yet" if run.checkpoint_age_s is None else
                   f"{run.fraction:.0%} of its work at its last checkpoint, {clock(round(run.checkpoint_age_s))} ago")
            out.append(f"  running: {run.config.label} [{run.config.hash}] ({age})")
        return out


@dataclass
class _Left:
    """A run without a record: the share of its work left, and its checkpoint's (seconds, share done, mtime)."""

    config: RunConfig
    fraction_left: float
    checkpoint: tuple | None


#: a pause longer than this without a run starting or ending separates two sessions of a study
SESSION_GAP_S = 300.0


def executor_seconds(spans, workers: int) -> tuple[float, int]:
    """(the executor's own seconds, runs) of the latest session of runs ``spans`` (``(started, finished, wall
    seconds)`` of their records: unix times and ``wall_time_s``): its ``workers`` slots over its span less the
    runs' measured times. What a run costs beyond its record's time: handing it to a worker, building its
    problem, writing its record (on the image study's quick profile about 1 s a run under load, a fifth of
    the slots' time). Nothing from fewer than 2 ``workers`` runs. The runs still running count as idle
    slots: an overestimate early in a session."""
    block, first, reach = [], 0.0, -math.inf
    for started, finished, wall in sorted(spans):
        if started - reach > SESSION_GAP_S:
            block, first = [], started
        block.append(wall)
        reach = max(reach, finished)
    if len(block) < 2 * workers:
        return 0.0, 0
    return max(workers * (reach - first) - sum(block), 0.0), len(block)


def read_study(study: str, profile: str, configs: list[RunConfig], runs_dir, *, now: float):
    """(:class:`StudyStatus` without its ETA, the runs left (:class:`_Left`), the observations ``(groups, cost,
    seconds)`` of its completed records (a diverged run stopped early, its time is no rate), the ``(started,
    finished, wall seconds)`` of its records)."""
    status = StudyStatus(study, profile, len(configs))
    costs = cost_estimates(configs)
    left, observations, spans = [], [], []
    for config in configs:
        record = load_record(runs_dir, config)
        if record is not None:
            state = record["result"]["status"]
            status.counts[state] = status.counts.get(state, 0) + 1
            provenance = record["provenance"]
            spans.append((datetime.fromisoformat(provenance["started_utc"]).timestamp(),
                          datetime.fromisoformat(provenance["finished_utc"]).timestamp(),
                          provenance.get("wall_time_s") or 0.0))
            if state == "completed":
                observations.append((eta_groups(config), costs[config.hash],
                                     record["provenance"].get("wall_time_s") or 0.0))
            continue
        kind = record_status(runs_dir, config)
        if kind == "corrupt":
            status.counts["corrupt"] = status.counts.get("corrupt", 0) + 1
        fraction, seconds = checkpoint_summary(runs_dir, config)
        share = work_share(config, fraction)
        written = checkpoint_path(runs_dir, config).stat().st_mtime if share > 0 else None
        if lock_held(lock_path(runs_dir, config)):
            status.running.append(Running(config, share, None if written is None else max(now - written, 0.0)))
        elif kind == "partial":
            status.partial += 1
        elif kind == "pending":
            status.pending += 1
        left.append(_Left(config, 1.0 - share, None if written is None else (seconds, share, written)))
    return status, left, observations, spans


def seconds_left(left: list, observations: list, running: set, *, workers: int, now: float,
                 overhead: tuple = (0.0, 0)) -> float | None:
    """The runs ``left`` scheduled stage by stage (one (setting, method) after another) on ``workers`` workers,
    the ``running`` ones (config hashes) first; None if nothing is measured. A running run's checkpoint (its
    seconds so far over its share done) predicts its own time left and, as a measurement of this session, its
    groups' rates in every stage. ``overhead``: the executor's (seconds, runs) (:func:`executor_seconds`)."""
    costs = cost_estimates([item.config for item in left])
    current = [item for item in left if item.config.hash in running and item.checkpoint is not None]
    stages: dict = {}
    for item in left:
        stages.setdefault((item.config.setting, item.config.method), []).append(item)
    total = 0.0
    for items in stages.values():
        keys = {item.config.hash for item in items}
        items.sort(key=lambda item: (item.config.hash not in running, -costs[item.config.hash]))
        eta = Eta([(i.config.hash, costs[i.config.hash], eta_groups(i.config), i.fraction_left) for i in items])
        for groups, cost, seconds in observations:
            eta.observe(groups, cost, seconds, earlier=True)
        eta.observe_overhead(*overhead)
        eta.start(max(workers, sum(i.config.hash in running for i in items)), now)
        for item in current:
            seconds, done, written = item.checkpoint
            if item.config.hash in keys:
                eta.progress(item.config.hash, seconds, done, item.fraction_left, written)
            elif done >= MIN_REPORTED:
                eta.observe(eta_groups(item.config), costs[item.config.hash] * done, seconds)
        stage = eta.seconds_left(now)
        if stage is None:
            return None
        total += stage
    return total


def pipeline_status(studies: dict, runs_dir, *, workers: int, now: float | None = None) -> list[StudyStatus]:
    """The :class:`StudyStatus` of each study, ``studies``: name -> (profile, its configs), at wall-clock time
    ``now``. A study without a completed record is predicted from the other studies' rates."""
    now = time.time() if now is None else now
    read = {name: read_study(name, profile, configs, runs_dir, now=now)
            for name, (profile, configs) in studies.items()}
    everyone = [obs for _, _, observations, _ in read.values() for obs in observations]
    for status, left, observations, spans in read.values():
        if left:
            status.borrowed = not observations and bool(everyone)
            status.seconds_left = seconds_left(left, observations or everyone, {r.config.hash for r in status.running},
                                               workers=workers, now=now, overhead=executor_seconds(spans, workers))
    return [status for status, _, _, _ in read.values()]
