"""A study's time left, from measured run times (the ETA of ``sabo-bench run`` and ``sabo-bench status``).

The study's cost estimates (``Study.cost``) are relative operation counts: they order runs,
but a method's seconds per unit of cost differ from another's (pycma's Python loop, a GP fit,
a batched forward are not the same operations), and a run resumed from a checkpoint has less
left than its cost says. The ETA therefore calibrates the estimates with measured times and
schedules what is left:

* **Rates.** A finished run's measured wall time (``provenance.wall_time_s``, earlier sessions'
  records included) over its cost estimate is its seconds per unit of cost. A running run that
  reports its progress (the share of its work done, with the seconds it took: the executors
  turn iterations into shares of the cost, :func:`replication.progress.work_share`) adds what it
  has done so far, once that is :data:`MIN_REPORTED` of its work, so a method has a rate long
  before its first run ends. A run's predicted time is its cost times the rate of the most
  specific group with a measurement: its (method, setting), else its method; a method not
  measured at all gets the median of the measured methods' rates (the broadest groups'). A
  median, not all runs pooled: pooled by cost, the costliest method measured decided (in the
  synthetic study's quick profile TuRBO-1 and GIBO start first; with TuRBO-1's cost 290x
  too high, their rate put the other 100 runs at a fraction of their time). Before any
  measurement there is no ETA.
* **The executor's own work.** The time a finished run held its worker beyond its record's
  time (handing it over, returning and writing its record, logging it) is measured per run and
  added to every run predicted: under load a tenth of a second, as much as a BBOB quick-profile
  run computes (:meth:`Eta.finished`).
* **This session first.** Earlier sessions' records may have run under another load, another
  ``--workers``, or on another machine. A group measured in this session (runs finished or
  reporting) is predicted from this session's times alone; one measured only earlier, from its
  earlier rate times the load factor: the median, over the groups measured both ways, of this
  session's rate over the earlier one (1 until there is such a group). A running run's reports
  leave out its set-up and first iteration, which its record's time includes, so for runs of a
  few seconds the factor reads the session a little fast until runs finish.
* **Running and resumed runs.** A running run that has reported is predicted from its own rate
  for what it has left; one that has not yet, from its group's rate less the time it has run.
  A run resumed from a checkpoint is predicted for the share of its work left.
* **Schedule.** Runs start in queue order on ``slots`` workers, as the executors start them
  (longest first); each queued run goes to the worker that frees first. The ETA is when the
  last one ends, so a long run at the end counts as such, not as its share of the work.
* **Work done.** :meth:`Eta.fraction_done` (the bar's percentage) weighs each run by its
  predicted time at the same rates, not by its cost estimate: a method whose estimate is off
  would otherwise fill the bar with its few runs.

What it cannot know: a run slower than predicted (it counts as ending now), a change of the
machine's load during the session (the rates are this session's means), and, before a method
has run for a while, how its rate differs from the others' (on the quick profiles, measured:
up to 3x between methods).
"""
from __future__ import annotations

import heapq
import statistics
from collections import defaultdict
from dataclasses import dataclass

#: The share of its work a running run must have reported before its own rate counts: the first
#: seconds of a run are a poor sample (a few cheap rounds, a worker's warm-up), and a rate from
#: them, extrapolated to the whole run and taken for its method, was off by orders of magnitude.
MIN_REPORTED = 0.05
_OVERHEAD = object()  # the key of the executor's seconds per run among the rates


@dataclass
class _Run:
    cost: float
    groups: tuple                  # most specific first
    left: float                    # fraction of the run's iterations (evaluations) still to compute
    started: float | None = None   # when it started (the clock of the caller's ``now``)
    opened: bool = False           # started by :meth:`Eta.start`: the first run of its worker
    seconds: float = 0.0           # reported: the fraction ``done`` took ``seconds``
    done: float = 0.0
    reported: float | None = None  # when the last report arrived


class Eta:
    """Seconds left for runs ``todo`` (in the order they start) on ``slots`` parallel workers.

    ``todo``: ``(key, cost, groups, fraction_left)`` per run, ``groups`` the keys whose rates
    apply, most specific first. Call :meth:`observe` with the measured time of every finished run
    outside ``todo`` (earlier sessions' records with ``earlier=True``), :meth:`start` when the
    executor begins, :meth:`progress` when a running run reports, :meth:`finished` when a run of
    ``todo`` ends (with its record's time), :meth:`released` when one is handed back unrun (held
    by another process; it is queued again). A cost that is not a positive number counts as 0:
    such a run is predicted to take no time and measures no rate.
    """

    def __init__(self, todo, slots: int = 1):
        self.slots = slots
        self._queue = {key: _Run(_cost(cost), tuple(groups), float(left)) for key, cost, groups, left in todo}
        self._left = {key: run.left for key, run in self._queue.items()}  # what this session computes of each
        self._order = list(self._queue)
        self._next = 0                            # index in _order of the next run to start
        self._running: set = set()
        # group -> [seconds, cost] of finished runs: this session's, and earlier sessions'
        self._measured = defaultdict(lambda: [0.0, 0.0])
        self._earlier = defaultdict(lambda: [0.0, 0.0])
        self._broadest = {groups[-1] for _, _, groups, _ in todo if groups}  # the methods, in the executors
        self._overhead = [0.0, 0]  # the executor's seconds per run beyond the runs' own: sum, runs

    def observe(self, groups, cost: float, seconds: float, *, earlier: bool = False) -> None:
        """A finished run's cost estimate and measured wall time; ``earlier``: a record of an earlier session."""
        if _cost(cost) > 0 and _cost(seconds) > 0 and groups:
            _add(self._earlier if earlier else self._measured, groups, seconds, cost)
            self._broadest.add(groups[-1])

    def start(self, slots: int, now: float) -> None:
        """The executor begins with ``slots`` workers: the first runs of the queue are running."""
        if slots < 1:
            raise ValueError(f"slots must be >= 1 (got {slots})")
        self.slots = slots
        self._fill(now, opened=True)

    def progress(self, key, seconds: float, done: float, left: float, now: float) -> None:
        """Running run ``key`` computed a fraction ``done`` of its work in ``seconds``; ``left`` remain. Counted
        from :data:`MIN_REPORTED` of its work on (before, it is predicted by its group's rate)."""
        run = self._queue.get(key)
        if run is not None and run.cost > 0 and done >= MIN_REPORTED and _cost(seconds) > 0:
            run.seconds, run.done, run.left, run.reported = seconds, done, min(max(left, 0.0), 1.0), now

    def finished(self, key, now: float, seconds: float | None = None) -> None:
        """A run of ``todo`` ended; the next one starts. ``seconds``: its record's measured time, which measures
        its group's rate (None: a run that measures none, one that failed or diverged).

        The time its worker was taken beyond that (from when the run before it on the worker ended, the
        schedule's start, to now) measures the executor's own work per run: handing a run to a worker,
        returning and writing its record, logging it. A tenth of a second a run under load, as much as
        a BBOB quick-profile run itself, it is added to every run predicted (:func:`_predict`). The
        first run of each worker measures none (the worker's start-up is no run's cost).
        """
        run = self._queue.pop(key, None)
        if run is None:
            return
        self._running.discard(key)
        if seconds is not None:
            self.observe(run.groups, run.cost, seconds)
            if not run.opened and run.started is not None:  # this session's part of a resumed run's time
                self.observe_overhead((now - run.started) - seconds * self._left[key])
        self._fill(now)

    def observe_overhead(self, seconds: float, runs: int = 1) -> None:
        """The executor's own ``seconds`` over ``runs`` runs, beyond the runs' measured times (:meth:`finished`
        measures them as runs end; ``sabo-bench status`` reads them off the records' times)."""
        self._overhead[0] += seconds
        self._overhead[1] += runs

    def released(self, key, now: float) -> None:
        """A run of ``todo`` was handed back unrun: its worker is free, and it goes to the end of the queue."""
        if key in self._running:
            self._running.discard(key)
            self._queue[key].started = None
            self._order.append(key)
            self._fill(now)

    def seconds_left(self, now: float) -> float | None:
        """Predicted seconds until the last run ends, or None before any measurement."""
        rates = self._rates()
        if rates is None:
            return None
        running = [self._queue[key] for key in self._running]
        free = [self._running_left(run, rates, now) for run in running]
        free += [0.0] * (self.slots - len(free))
        heapq.heapify(free)
        for key in self._order[self._next:]:
            run = self._queue.get(key)
            if run is not None:  # not ended out of order
                heapq.heappush(free, heapq.heappop(free) + _predict(run, rates))
        return max(free)

    def fraction_done(self, finished) -> float:
        """The share of the work done, in [0, 1]: ``finished`` (``(cost, groups)`` of each finished run of the
        study, earlier sessions' included) and what the runs of ``todo`` have done (a resumed run's checkpoint,
        a running run's reports), over those and what is left, each weighted by its predicted time. Before any
        measurement, by the cost estimates alone; 0 when there is no work at all."""
        rates = self._rates() or {}
        done = sum(_predict(_Run(_cost(cost), tuple(groups), 1.0), rates) for cost, groups in finished)
        total = done
        for run in self._queue.values():
            whole = _predict(_Run(run.cost, run.groups, 1.0), rates)
            done, total = done + whole * (1.0 - run.left), total + whole
        return min(done / total, 1.0) if total > 0 else 0.0

    def _rates(self) -> dict | None:
        """Seconds per unit of cost by group (this session's reports included; :func:`_rates`), with the
        median of the broadest groups' under None; None before any measurement."""
        session = defaultdict(lambda: [0.0, 0.0], {g: list(v) for g, v in self._measured.items()})
        for key in self._running:
            run = self._queue[key]
            if run.reported is not None:
                _add(session, run.groups, run.seconds, run.cost * run.done)
        rates = _rates(dict(session), self._earlier)
        broadest = [rate for group, rate in rates.items() if group in self._broadest]
        if not broadest:
            return None
        rates[None] = statistics.median(broadest)
        rates[_OVERHEAD] = max(self._overhead[0] / self._overhead[1], 0.0) if self._overhead[1] else 0.0
        return rates

    def _running_left(self, run: _Run, rates, now: float) -> float:
        if run.reported is not None:
            own = run.left * run.seconds / run.done
            return max(own - (now - run.reported), 0.0)
        return max(_predict(run, rates) - (now - run.started), 0.0)

    def _fill(self, now: float, *, opened: bool = False) -> None:
        while len(self._running) < self.slots and self._next < len(self._order):
            key = self._order[self._next]
            self._next += 1
            if key in self._queue:
                self._queue[key].started, self._queue[key].opened = now, opened
                self._running.add(key)


def _cost(value) -> float:
    """``value`` as a float if it is a positive finite number, else 0."""
    value = float(value)
    return value if 0 < value < float("inf") else 0.0


def _add(totals, groups, seconds: float, cost: float) -> None:
    for group in groups:
        totals[group][0] += seconds
        totals[group][1] += cost


def _rates(session: dict, earlier: dict) -> dict:
    """Seconds per unit of cost per group: this session's where measured, else the earlier one times the load
    factor (the median ratio of the two over the groups measured both ways; 1 without one)."""
    now = {g: seconds / cost for g, (seconds, cost) in session.items()}
    before = {g: seconds / cost for g, (seconds, cost) in earlier.items()}
    both = [rate / before[g] for g, rate in now.items() if g in before]
    factor = statistics.median(both) if both else 1.0
    return {**{g: rate * factor for g, rate in before.items()}, **now}


def _predict(run: _Run, rates: dict) -> float:
    """Seconds for what is left of ``run`` at the rate of its most specific measured group (the median method's
    without one; 1 s per unit of cost before any measurement, for :meth:`Eta.fraction_done`), and the executor's
    measured seconds per run."""
    rate = next((rates[g] for g in run.groups if g in rates), rates.get(None, 1.0))
    return run.cost * rate * run.left + rates.get(_OVERHEAD, 0.0)
