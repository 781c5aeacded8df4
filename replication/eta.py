"""A study's time left, from measured run times (the progress bar's ETA).

The study's cost estimates (``Study.cost``) are relative operation counts: they order runs and
size the progress bar, but a method's seconds per unit of cost differ from another's (pycma's
Python loop, a GP fit, a batched forward are not the same operations), and a run resumed from
a checkpoint has less left than its cost says. The ETA therefore calibrates the estimates with
measured times and schedules what is left:

* **Rates.** A finished run's measured wall time (``provenance.wall_time_s``, earlier sessions'
  records included) over its cost estimate is its seconds per unit of cost. A running run that
  reports its progress (iterations, or evaluations under an evaluation budget, done / planned,
  with the seconds they took) adds what it has done so far, so a method has a rate long before
  its first run ends. A run's predicted time is
  its cost times the rate of the most specific group with a measurement: its (method,
  setting), else its method, else all runs measured. Before any measurement there is no ETA.
* **This session first.** Earlier sessions' records may have run under another load, another
  ``--workers``, or on another machine. A group measured in this session (runs finished or
  reporting) is predicted from this session's times alone; one measured only earlier, from its
  earlier rate times the load factor: the median, over the groups measured both ways, of this
  session's rate over the earlier one (1 until there is such a group). A running run's reports
  leave out its set-up and first iteration, which its record's time includes, so for runs of a
  few seconds the factor reads the session a little fast until runs finish.
* **Running and resumed runs.** A running run that reports progress is predicted from its own
  rate for what it has left; one that does not yet, from its group's rate less the time it has
  run. A run resumed from a checkpoint is predicted for the fraction of its iterations (or
  evaluations) left (:func:`replication.engine.checkpoint_progress`).
* **Schedule.** Runs start in queue order on ``slots`` workers, as the executors start them
  (longest first); each queued run goes to the worker that frees first. The ETA is when the
  last one ends, so a long run at the end counts as such, not as its share of the work.

What it cannot know: a run slower than predicted (it counts as ending now), a change of the
machine's load during the session, and, before a method has run for a while, how its rate
differs from the others'.
"""
from __future__ import annotations

import heapq
import statistics
from collections import defaultdict
from dataclasses import dataclass


@dataclass
class _Run:
    cost: float
    groups: tuple                  # most specific first
    left: float                    # fraction of the run's iterations (evaluations) still to compute
    started: float | None = None   # when it started (the clock of the caller's ``now``)
    seconds: float = 0.0           # reported: the fraction ``done`` took ``seconds``
    done: float = 0.0
    reported: float | None = None  # when the last report arrived


class Eta:
    """Seconds left for runs ``todo`` (in the order they start) on ``slots`` parallel workers.

    ``todo``: ``(key, cost, groups, fraction_left)`` per run, ``groups`` the keys whose rates
    apply, most specific first. Call :meth:`observe` with every finished run's measured time
    (earlier sessions' records too, with ``earlier=True``), :meth:`start` when the executor
    begins, :meth:`progress` when a running run reports, :meth:`finished` when a run of ``todo``
    ends, :meth:`released` when one is handed back unrun (held by another process; it is queued
    again). A cost that is not a positive number counts as 0: such a run is predicted to take no
    time and measures no rate.
    """

    def __init__(self, todo, slots: int = 1):
        self.slots = slots
        self._queue = {key: _Run(_cost(cost), tuple(groups), float(left)) for key, cost, groups, left in todo}
        self._order = list(self._queue)
        self._next = 0                            # index in _order of the next run to start
        self._running: set = set()
        # group (None: all) -> [seconds, cost] of finished runs: this session's, and earlier sessions'
        self._measured = defaultdict(lambda: [0.0, 0.0])
        self._earlier = defaultdict(lambda: [0.0, 0.0])

    def observe(self, groups, cost: float, seconds: float, *, earlier: bool = False) -> None:
        """A finished run's cost estimate and measured wall time; ``earlier``: a record of an earlier session."""
        if _cost(cost) > 0 and _cost(seconds) > 0:
            _add(self._earlier if earlier else self._measured, groups, seconds, cost)

    def start(self, slots: int, now: float) -> None:
        """The executor begins with ``slots`` workers: the first runs of the queue are running."""
        if slots < 1:
            raise ValueError(f"slots must be >= 1 (got {slots})")
        self.slots = slots
        self._fill(now)

    def progress(self, key, seconds: float, done: float, left: float, now: float) -> None:
        """Running run ``key`` computed a fraction ``done`` of its iterations (evaluations) in ``seconds``;
        ``left`` remain."""
        run = self._queue.get(key)
        if run is not None and run.cost > 0 and done > 0 and _cost(seconds) > 0:
            run.seconds, run.done, run.left, run.reported = seconds, done, min(max(left, 0.0), 1.0), now

    def finished(self, key, now: float) -> None:
        """A run of ``todo`` ended (its time goes to :meth:`observe` separately); the next one starts."""
        if self._queue.pop(key, None) is not None:
            self._running.discard(key)
            self._fill(now)

    def released(self, key, now: float) -> None:
        """A run of ``todo`` was handed back unrun: its worker is free, and it goes to the end of the queue."""
        if key in self._running:
            self._running.discard(key)
            self._queue[key].started = None
            self._order.append(key)
            self._fill(now)

    def seconds_left(self, now: float) -> float | None:
        """Predicted seconds until the last run ends, or None before any measurement."""
        session = defaultdict(lambda: [0.0, 0.0], {g: list(v) for g, v in self._measured.items()})
        running = [self._queue[key] for key in self._running]
        for run in running:
            if run.reported is not None:
                _add(session, run.groups, run.seconds, run.cost * run.done)
        rates = _rates(dict(session), self._earlier)
        if None not in rates:
            return None
        free = [self._running_left(run, rates, now) for run in running]
        free += [0.0] * (self.slots - len(free))
        heapq.heapify(free)
        for key in self._order[self._next:]:
            run = self._queue.get(key)
            if run is not None:  # not ended out of order
                heapq.heappush(free, heapq.heappop(free) + _predict(run, rates))
        return max(free)

    def _running_left(self, run: _Run, rates, now: float) -> float:
        if run.reported is not None:
            own = run.left * run.seconds / run.done
            return max(own - (now - run.reported), 0.0)
        return max(_predict(run, rates) - (now - run.started), 0.0)

    def _fill(self, now: float) -> None:
        while len(self._running) < self.slots and self._next < len(self._order):
            key = self._order[self._next]
            self._next += 1
            if key in self._queue:
                self._queue[key].started = now
                self._running.add(key)


def _cost(value) -> float:
    """``value`` as a float if it is a positive finite number, else 0."""
    value = float(value)
    return value if 0 < value < float("inf") else 0.0


def _add(totals, groups, seconds: float, cost: float) -> None:
    for group in (*groups, None):
        totals[group][0] += seconds
        totals[group][1] += cost


def _rates(session: dict, earlier: dict) -> dict:
    """Seconds per unit of cost per group: this session's where measured, else the earlier one times the load
    factor (the median ratio of the two over the groups, all runs apart, measured both ways; 1 without one)."""
    now = {g: seconds / cost for g, (seconds, cost) in session.items()}
    before = {g: seconds / cost for g, (seconds, cost) in earlier.items()}
    both = [rate / before[g] for g, rate in now.items() if g is not None and g in before]
    factor = statistics.median(both) if both else 1.0
    return {**{g: rate * factor for g, rate in before.items()}, **now}


def _predict(run: _Run, rates) -> float:
    """Seconds for what is left of ``run`` at the rate of its most specific measured group."""
    return run.cost * next((rates[g] for g in run.groups if g in rates), rates[None]) * run.left
