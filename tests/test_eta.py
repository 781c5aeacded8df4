"""The progress bar's ETA (replication.eta): measured rates, resumed fractions, in-flight reports, the schedule."""
import pytest
from helpers import checkpoint_of, small_config

from replication.engine import checkpoint_path, checkpoint_progress
from replication.eta import Eta


def todo(*costs, groups=("m",), left=1.0):
    return [(f"r{i}", cost, groups, left) for i, cost in enumerate(costs)]


def test_no_eta_before_anything_is_measured():
    eta = Eta(todo(4, 3))
    eta.start(2, now=0.0)
    assert eta.seconds_left(0.0) is None


def test_the_runs_left_are_scheduled_on_the_workers_longest_first():
    """Rate 2 s per unit of cost. Costs 4, 3, 2, 1 on 2 workers: 8 | 6, then 4 joins the worker free at 6
    (ends 10) and 2 the one free at 8 (ends 10): the ETA is 10 s, not the 20 worker-seconds / 2 of a rate."""
    eta = Eta(todo(4, 3, 2, 1))
    eta.observe(("m",), cost=1.0, seconds=2.0)
    eta.start(2, now=0.0)
    assert eta.seconds_left(0.0) == pytest.approx(10.0)
    assert eta.seconds_left(3.0) == pytest.approx(7.0)      # the running ones have run 3 s
    eta.finished("r1", now=6.0)                              # cost 3 ended on time; cost 2 starts
    assert eta.seconds_left(6.0) == pytest.approx(4.0)      # r0: 2 s left, r2: 4 s, r3 (2 s) after r0 -> 4
    # one long run last: its own time, not its share of the work spread over the workers
    eta = Eta(todo(1, 1, 8))
    eta.observe(("m",), cost=1.0, seconds=1.0)
    eta.start(3, now=0.0)
    assert eta.seconds_left(0.0) == pytest.approx(8.0)


def test_a_method_is_predicted_from_its_own_rate_where_measured():
    eta = Eta([("a", 1.0, ("slow",), 1.0), ("b", 1.0, ("fast",), 1.0), ("c", 1.0, ("new",), 1.0)])
    eta.observe(("slow",), cost=1.0, seconds=9.0)
    eta.observe(("fast",), cost=1.0, seconds=1.0)
    eta.start(3, now=0.0)
    # "new" has no measurement: the median measured method's rate, (9 + 1) / 2 = 5 s per unit
    assert eta.seconds_left(0.0) == pytest.approx(9.0)
    eta.finished("a", now=0.0)
    assert eta.seconds_left(0.0) == pytest.approx(5.0)
    eta.finished("c", now=0.0)
    assert eta.seconds_left(0.0) == pytest.approx(1.0)


def test_an_unmeasured_method_gets_the_median_method_not_the_costliest():
    """In the synthetic study's quick profile TuRBO-1 and GIBO start first, their hints 10-100x off: pooled by cost,
    "bo"'s rate (0.01 s per unit over 1000 units) would predict "new" at 0.1 s where the other methods take 2-3 s."""
    eta = Eta([("n", 1.0, ("new",), 1.0)])
    eta.observe(("bo",), cost=1000.0, seconds=10.0)
    eta.observe(("es",), cost=1.0, seconds=2.0)
    eta.observe(("nes",), cost=1.0, seconds=3.0)
    eta.start(1, now=0.0)
    assert eta.seconds_left(0.0) == pytest.approx(2.0)  # median of 0.01, 2 and 3 s per unit


def test_the_share_of_the_work_weighs_runs_by_their_predicted_time():
    """One "bo" run of four finished: by the cost estimates (100 units against 1 for each "es" run) it is 97% of the
    work, by predicted time (each run 1 s) a quarter. A resumed run counts what its checkpoint holds."""
    eta = Eta([("bo2", 100.0, ("bo",), 1.0), ("es1", 1.0, ("es",), 1.0), ("es2", 1.0, ("es",), 0.5)])
    finished = [(100.0, ("bo",))]
    assert eta.fraction_done(finished) == pytest.approx(100.5 / 202)  # nothing measured: the estimates
    eta.observe(("bo",), cost=100.0, seconds=1.0)
    eta.observe(("es",), cost=1.0, seconds=1.0)
    assert eta.fraction_done(finished) == pytest.approx(1.5 / 4)
    eta.start(1, now=0.0)
    eta.progress("bo2", seconds=0.5, done=0.5, left=0.5, now=0.5)  # a running run's reports count too
    assert eta.fraction_done(finished) == pytest.approx(2.0 / 4)
    assert Eta([]).fraction_done([]) == 0.0


def test_the_executors_own_seconds_per_run_are_measured_and_added():
    """Runs of 1 unit at 1 s a unit (their records' time) on 2 workers. r2 held its worker 1.5 s, 0.5 s beyond its
    time (the executor handing it over, writing its record): every run predicted takes that 0.5 s too. The
    first run of each worker measures no such time (a worker's start-up is no run's cost)."""
    def after(held):
        eta = Eta(todo(1, 1, 1, 1, 1, 1))
        eta.start(2, now=0.0)
        eta.finished("r0", now=3.0, seconds=1.0)       # r2 starts (the worker's start-up: no overhead measured)
        eta.finished("r1", now=3.0, seconds=1.0)       # r3 starts
        eta.finished("r2", now=3.0 + held, seconds=1.0)
        return eta.seconds_left(3.0 + held)
    # r3 started at 3: 1 s (+ overhead) from then; r4 from now, r5 after r3
    assert after(1.0) == pytest.approx(1.0)            # r3 ends now, r4 and r5 take 1 s each side by side
    assert after(1.5) == pytest.approx(1.5)            # 0.5 s per run: r3 ends now, r4 and r5 take 1.5 s


def test_a_resumed_run_is_predicted_for_what_it_has_left():
    eta = Eta(todo(10, left=0.25))
    eta.observe(("m",), cost=1.0, seconds=1.0)
    eta.start(1, now=0.0)
    assert eta.seconds_left(0.0) == pytest.approx(2.5)


def test_a_running_run_reports_its_own_rate_and_measures_its_method_before_it_ends():
    eta = Eta(todo(10, 10))
    eta.start(1, now=0.0)
    eta.progress("r0", seconds=4.0, done=0.2, left=0.7, now=5.0)   # 20 % in 4 s: 20 s per run, 0.7 left
    # r0: 14 s from its report; r1, queued: 20 s at the rate r0 measured (2 s per unit of cost)
    assert eta.seconds_left(5.0) == pytest.approx(34.0)
    assert eta.seconds_left(9.0) == pytest.approx(30.0)
    eta.progress("unknown", seconds=1.0, done=0.5, left=0.5, now=9.0)  # a report of no queued run is ignored
    assert eta.seconds_left(9.0) == pytest.approx(30.0)


def test_a_run_slower_than_predicted_counts_as_ending_now():
    eta = Eta(todo(1))
    eta.observe(("m",), cost=1.0, seconds=1.0)
    eta.start(1, now=0.0)
    assert eta.seconds_left(5.0) == 0.0


def test_checkpoint_progress_reads_the_fraction_done(tmp_path):
    config = small_config("ingo", dim=6, T=40)
    assert checkpoint_progress(tmp_path, config) == 0.0

    checkpoint_of(config, tmp_path, iters=10)
    assert checkpoint_progress(tmp_path, config) == pytest.approx(10 / 40)  # T = 40: a curve point every iteration
    assert checkpoint_progress(tmp_path, small_config("ingo", dim=6, T=40, seed=1)) == 0.0
    checkpoint_path(tmp_path, small_config("ingo", dim=6, T=40, seed=1)).write_bytes(
        checkpoint_path(tmp_path, config).read_bytes())
    assert checkpoint_progress(tmp_path, small_config("ingo", dim=6, T=40, seed=1)) == 0.0  # another run's
    checkpoint_path(tmp_path, config).write_bytes(b"garbled")
    assert checkpoint_progress(tmp_path, config) == 0.0
    # an evaluation budget: evaluations done of max_evals (MMES: 10 in its first iteration, N = 9 after)
    budgeted = small_config("mmes", dim=6, popsize=9, max_evals=400)
    checkpoint_of(budgeted, tmp_path, iters=10)
    assert checkpoint_progress(tmp_path, budgeted) == pytest.approx((10 + 9 * 9) / 400)


def test_progress_under_an_evaluation_budget_counts_evaluations(tmp_path):
    """MMES's first iteration evaluates x0 too (N + 1 rows), so max_evals // (N + 1) underestimates its
    iterations: counted in iterations, a finished run reported 11 of 10 done. In evaluations it ends in (0, 1]."""
    from replication.engine import execute

    reports = []
    config = small_config("mmes", dim=6, popsize=9, max_evals=100)
    execute(config, tmp_path, progress=lambda done, total: reports.append(done / total))
    assert all(0 < r <= 1 for r in reports) and reports == sorted(reports)
    assert reports[-1] > 1 - 9 / 100  # no room for another iteration of N = 9


def test_a_cost_that_is_not_a_positive_number_measures_nothing_and_takes_no_time():
    """A plug-in whose cost estimate is 0 (or NaN): its reports must not make a rate of x seconds per 0 cost."""
    eta = Eta([("zero", 0.0, ("g",), 1.0), ("nan", float("nan"), ("g",), 1.0), ("b", 1.0, ("g",), 1.0)])
    eta.start(1, now=0.0)
    eta.progress("zero", seconds=1.0, done=0.5, left=0.5, now=1.0)
    assert eta.seconds_left(1.0) is None               # nothing measured
    eta.observe(("g",), cost=float("nan"), seconds=3.0)
    eta.observe(("g",), cost=1.0, seconds=float("inf"))
    assert eta.seconds_left(1.0) is None
    eta.observe(("g",), cost=1.0, seconds=3.0)
    assert eta.seconds_left(1.0) == pytest.approx(3.0)  # "zero" and "nan" take no time, "b" 3 s


def test_a_run_held_by_another_process_frees_its_worker_and_is_queued_again():
    eta = Eta(todo(4, 3, 2))
    eta.observe(("m",), cost=1.0, seconds=1.0)
    eta.start(2, now=0.0)                                # r0 and r1 start; r0 turns out to be held elsewhere
    eta.released("r0", now=0.0)                          # r2 takes its worker; r0 is queued after it
    assert eta.seconds_left(0.0) == pytest.approx(6.0)   # r1: 3 | r2: 2, then r0 (4) on the worker free at 2
    eta.progress("r2", seconds=1.0, done=0.5, left=0.5, now=1.0)  # r2 reports: it is running
    assert eta.seconds_left(1.0) == pytest.approx(5.0)


def test_this_sessions_times_come_first_and_scale_the_earlier_ones():
    """Earlier records ran "fast_now" at 4 s per unit and "earlier_only" at 8; this session runs "fast_now" 4x
    faster. A group measured now is predicted from now alone, one measured only earlier at its earlier rate
    times the factor the shared groups show (1/4)."""
    eta = Eta([("a", 1.0, ("fast_now",), 1.0), ("b", 1.0, ("earlier_only",), 1.0)])
    eta.observe(("fast_now",), cost=1.0, seconds=4.0, earlier=True)
    eta.observe(("earlier_only",), cost=1.0, seconds=8.0, earlier=True)
    eta.start(1, now=0.0)
    assert eta.seconds_left(0.0) == pytest.approx(4.0 + 8.0)  # nothing measured now: the earlier rates as they are
    eta.observe(("fast_now",), cost=1.0, seconds=1.0)          # a run of this session (not in todo), 1 s per unit
    assert eta.seconds_left(0.0) == pytest.approx(1.0 + 8.0 / 4)
    eta.finished("a", now=0.0)
    assert eta.seconds_left(0.0) == pytest.approx(8.0 / 4)
