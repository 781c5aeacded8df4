"""What ``sabo-bench run`` shows while its runs execute: a bar redrawn in place, plain lines, or nothing.

Every mode but ``none`` shows the same numbers: runs recorded / total, the share of the work done
and the time left, from :class:`replication.eta.Eta`. Its rates come from this session's runs,
the selection's finished records and any other finished records of the study the caller passes
(``calibration``: ``sabo-bench run`` passes the rest of the profile's), so a pipeline stage has
an ETA before its own first run ends. The share of the work weighs each run by its predicted
time (:meth:`~replication.eta.Eta.fraction_done`), so it may go back when a method turns out
slower than predicted: it is a prediction, as the ETA is.

* ``bar``: tqdm's bar on stderr, redrawn at most every :data:`ETA_EVERY_S` (a terminal).
* ``lines``: plain lines on stderr, never redrawn, so that they read the same in a terminal, a
  log file and ``dvc repro``'s output: one when the runs start (how many to compute, on how many
  workers, the first ETA), one at least every :data:`LINE_EVERY_S` while they run (runs done /
  total, share of the work, time elapsed, ETA and the clock time it points to), one at the end
  (runs computed and the time they took, beside the first prediction).
* ``none``: nothing, and no ETA is computed.

A heartbeat thread refreshes the display every :data:`ETA_EVERY_S`, so lines keep coming while
the main process computes a run itself (``--workers 1``) or a run's iterations take long; one
lock serialises it with the executor's calls.
"""
from __future__ import annotations

import math
import sys
import threading
import time
from dataclasses import replace

from tqdm.auto import tqdm

from .config import RunConfig
from .engine import checkpoint_progress
from .eta import Eta
from .studies import get_study

PROGRESS_MODES = ("bar", "lines", "none")
BAR_FORMAT = "{desc}: {percentage:3.0f}% of the estimated work |{bar}| [{elapsed}{postfix}]"
ETA_EVERY_S = 1.0  # the ETA schedules every run left: recomputed at most this often
LINE_EVERY_S = 30.0  # a progress line at least this often in ``lines`` mode
clock = tqdm.format_interval  # [H:]MM:SS, as the bar shows its elapsed time


def eta_groups(config: RunConfig) -> tuple:
    """The groups whose measured rates predict ``config``'s time, most specific first (the last: its method)."""
    return (config.study, config.method, config.setting), (config.study, config.method)


def work_share(config: RunConfig, fraction: float) -> float:
    """The share of ``config``'s cost estimate (``Study.cost``) that the first ``fraction`` of its budget
    (iterations, or evaluations under ``max_evals``) holds, in [0, 1].

    ``fraction`` itself where every iteration costs the same; less early in a run whose later
    iterations cost more (TuRBO-1: a few cheap design rounds, then GP fits on growing data;
    :meth:`~sabo.protocol.AskTellOptimizer.cost_of_iterations`). Counted in iterations, TuRBO-1's
    design made a third of a quick-profile run look done in its first seconds.
    """
    fraction = min(max(float(fraction), 0.0), 1.0)
    study = get_study(config.study)
    whole = float(study.cost(config))
    if not 0 < whole < math.inf or fraction in (0.0, 1.0):
        return fraction
    key = "max_iter" if "max_iter" in config.budget else "max_evals"
    part = float(study.cost(replace(config, budget={**config.budget, key: round(fraction * config.budget[key])})))
    return min(max(part / whole, 0.0), 1.0)


def _seconds(record: dict) -> float | None:
    """A finished run's measured wall time, or None for a run that measures no rate (diverged: it stopped early)."""
    return (record["provenance"].get("wall_time_s") or 0.0) if record["result"]["status"] == "completed" else None


def progress_mode(progress) -> str:
    """``progress`` as one of :data:`PROGRESS_MODES`; True and False stand for ``bar`` and ``none``."""
    if progress is True or progress is False:
        return "bar" if progress else "none"
    if progress not in PROGRESS_MODES:
        raise ValueError(f"progress must be one of {PROGRESS_MODES} or a bool (got {progress!r})")
    return progress


class Progress:
    """The display of a study's runs: work done, runs done, the ETA of :class:`~replication.eta.Eta`.

    ``records``: the finished runs of the selection so far (updated here as runs end); ``costs``:
    every run's cost estimate by config hash, those of ``calibration`` (finished records of other
    runs of the study) included; ``todo``: the runs to compute, in the order they start.
    ``failures``: the lines of the runs that raised, with ``keep_going`` (:meth:`failed`).
    """

    def __init__(self, configs, records, todo, costs, runs_dir, on_record, *, mode="bar", label: str = "runs",
                 keep_going: bool = False, calibration=()):
        self.mode = progress_mode(mode)
        self.configs, self.records, self.costs, self.on_record = configs, records, costs, on_record
        self.enabled, self.label, self.keep_going, self.failures = self.mode != "none", label, keep_going, []
        self._groups = {c.hash: eta_groups(c) for c in configs}
        self._configs = {c.hash: c for c in todo}
        self.eta = Eta([(c.hash, costs[c.hash], self._groups[c.hash],
                         1.0 - work_share(c, checkpoint_progress(runs_dir, c)) if self.enabled else 1.0) for c in todo])
        for record in [*records.values(), *calibration]:  # earlier sessions' and other stages' times
            if _seconds(record) is not None and record["config_hash"] in costs:
                self.eta.observe(eta_groups(RunConfig.from_dict(record["config"])), costs[record["config_hash"]],
                                 _seconds(record), earlier=True)
        self._todo, self._computed, self._slots = len(todo), 0, 1
        self._lock = threading.RLock()
        self._began = self._first = None  # when the runs started; (elapsed, predicted total) first shown
        self._last_label, self._held, self._waiting = None, set(), False
        self._left, self._percent, self._eta_at, self._line_at = None, 0.0, -math.inf, -math.inf
        self._stop = threading.Event()
        self._heartbeat = None
        self.bar = tqdm(total=100.0, initial=0.0, desc=label, bar_format=BAR_FORMAT, disable=self.mode != "bar",
                        dynamic_ncols=True)
        with self._lock:
            self._show()

    # ---------------------------------------------------------------- what the executors call
    def begin(self, slots: int) -> None:
        """The executor starts runs, ``slots`` at a time (again for the runs another process held)."""
        with self._lock:
            self._slots = max(int(slots), 1)
            self.eta.start(self._slots, time.monotonic())
            self._eta_at = -math.inf  # the ETA for these slots now, not the one for a slot computed before
            if self._began is not None or not self.enabled:
                self._show()
                return
            self._began = time.monotonic()
            if self.mode == "lines":
                self._estimate()
                recorded = len(self.configs) - self._todo
                self._line(f"{self._todo} of {len(self.configs)} runs to compute on {self._slots} worker"
                           f"{'s' if self._slots > 1 else ''} ({recorded} recorded before); {self._eta_words()}")
                self._line_at = time.monotonic()
            else:
                self._show()
            self._heartbeat = threading.Thread(target=self._beat, name="progress", daemon=True)
            self._heartbeat.start()

    def finished(self, record: dict) -> None:
        if self.on_record is not None:  # outside the lock: logging to MLflow may take seconds
            self.on_record(record)
        with self._lock:
            key = record["config_hash"]
            self.records[key] = record
            self._held.discard(key)
            self._computed += 1
            self.eta.finished(key, time.monotonic(), seconds=_seconds(record))
            self._last_label = RunConfig.from_dict(record["config"]).label
            self._show()

    def failed(self, config: RunConfig, error) -> None:
        """A run raised: ``error`` is raised again (the study stops), unless ``keep_going``: then it is
        kept for the end, counted beside the bar, and the next run starts."""
        if not self.keep_going:
            raise error
        with self._lock:
            self.failures.append(str(error))
            self.eta.finished(config.hash, time.monotonic())
            self._show()

    def progress(self, report) -> None:
        """A running run's report: ``(key, seconds, fraction done, fraction left)`` (``executors._Reporter``), the
        fractions of its budget (:func:`work_share` turns them into shares of its cost)."""
        key, seconds, done, left = report
        config = self._configs.get(key)
        if config is None:
            return
        now, before = work_share(config, 1.0 - left), work_share(config, 1.0 - left - done)
        with self._lock:
            self.eta.progress(key, seconds, now - before, 1.0 - now, time.monotonic())
            self._show()

    def tick(self) -> None:
        """Refresh the elapsed time and the ETA (at most every :data:`ETA_EVERY_S`)."""
        with self._lock:
            self._show()

    def released(self, config: RunConfig) -> None:
        """A run held by another process, handed back unrun (done in the second pass)."""
        with self._lock:
            self._held.add(config.hash)
            self.eta.released(config.hash, time.monotonic())

    def note(self, line: str) -> None:
        """``line`` on stderr (a warning), above the bar where one is drawn (which is drawn again below it)."""
        with self._lock:
            if self.mode == "bar":
                tqdm.write(line, file=sys.stderr)
            else:
                print(line, file=sys.stderr, flush=True)

    def waiting(self) -> None:
        """The second pass: this process waits for the runs another one holds."""
        with self._lock:
            self._waiting = True
            self._show()

    def close(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        with self._lock:
            self.bar.close()
            if self.mode != "lines":
                return
            if self._began is None:
                self._line(f"all {len(self.configs)} runs recorded: nothing to compute")
                return
            elapsed = time.monotonic() - self._began
            first = (f"; first prediction {clock(round(self._first[1]))} in all, at {clock(round(self._first[0]))}"
                     if self._first is not None else "")
            failed = f", {len(self.failures)} failed" if self.failures else ""
            self._line(f"{self._computed} runs computed in {clock(round(elapsed))}, {len(self.records)}/"
                       f"{len(self.configs)} recorded{failed}{first}")

    # ---------------------------------------------------------------- internals
    def _beat(self) -> None:
        while not self._stop.wait(ETA_EVERY_S):
            with self._lock:
                self._show()

    def _estimate(self) -> None:
        """The ETA and the share of the work done, recomputed (at most every :data:`ETA_EVERY_S` but at the end)."""
        now = time.monotonic()
        done = len(self.records) == len(self.configs)
        if now - self._eta_at < ETA_EVERY_S and not done:
            return
        self._left = 0.0 if done else self.eta.seconds_left(now)
        finished = [(self.costs[key], self._groups[key]) for key in self.records]
        self._percent = 100.0 if done else 100.0 * self.eta.fraction_done(finished)
        self._eta_at = now
        if self._first is None and self._left is not None and self._began is not None and not done:
            self._first = (now - self._began, now - self._began + self._left)

    def _show(self) -> None:
        if not self.enabled:
            return
        self._estimate()
        now = time.monotonic()
        if self.mode == "bar":
            parts = ["ETA: measuring" if self._left is None else f"ETA {clock(round(self._left))}", self._runs(),
                     self._notes()]
            self.bar.set_postfix_str(", ".join(p for p in parts if p), refresh=False)
            self.bar.n = self._percent  # set, not advanced: it may go back (the shares are predictions)
            self.bar.refresh()
        elif self._began is not None and now - self._line_at >= LINE_EVERY_S:
            self._line_at = now
            parts = [self._runs(), f"{self._percent:.0f}% of the estimated work",
                     f"{clock(round(now - self._began))} elapsed", self._eta_words(), self._notes()]
            self._line(", ".join(p for p in parts if p))

    def _runs(self) -> str:
        failed = f" ({len(self.failures)} failed)" if self.failures else ""
        return f"{len(self.records)}/{len(self.configs)} runs{failed}"

    def _notes(self) -> str | None:
        if self._waiting and self._held:
            return f"waiting for {len(self._held)} held by another process"
        return f"last {self._last_label}" if self._last_label and self.mode == "bar" else None

    def _eta_words(self) -> str:
        if self._left is None:
            return "ETA once a run has reported (no finished run of the study to calibrate it yet)"
        ends = time.strftime("%H:%M", time.localtime(time.time() + self._left))
        return f"ETA {clock(round(self._left))} (about {ends})"

    def _line(self, text: str) -> None:
        print(f"{self.label}: {text}", file=sys.stderr, flush=True)
