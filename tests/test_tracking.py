"""MLflow tracking: run hierarchy, per-evaluation metrics, artifacts, idempotency, concurrent loggers.

Also: runs of different profiles never collide (names and tags), runs start and end at the
record's wall times, group aggregates that one diverged seed cannot decide (median, geometric
mean, the median curve), and the comparison page's filter (docs/mlflow.md) landing on the group runs.
The browser-level check of that page is tests/test_mlflow_ui.py.
"""
import logging
import math
import multiprocessing
import shutil
import socket
import time
import urllib.parse
from datetime import datetime

import numpy as np
import pytest
from helpers import readme_filter, small_config, tiny_params

from replication.engine import execute

mlflow = pytest.importorskip("mlflow")  # part of the replication extra, installed by .ci/run
from replication.tracking import Tracker, aggregate, decades, median_curve, variants  # noqa: E402
from sabo import SABO  # noqa: E402
from sabo.sabo import DEFAULT_RHO_SCALE  # noqa: E402


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory):
    """An MLflow database with its tables created: creating them takes 10-15 s on a busy machine."""
    path = tmp_path_factory.mktemp("mlflow") / "empty.db"
    Tracker(f"sqlite:///{path}")
    return path


@pytest.fixture
def uri(tmp_path, empty_db):
    """A fresh tracking store for one test (a copy of ``empty_db``)."""
    shutil.copyfile(empty_db, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path}/mlflow.db"


def records(tmp_path, n_seeds=2, methods=("sabo", "ingo"), T=30):
    return [execute(small_config(m, T=T, seed=s), tmp_path / "runs") for m in methods for s in range(n_seeds)]


def runs_by_level(client, exp_id):
    out = {}
    for run in client.search_runs([exp_id], max_results=1000):
        out.setdefault(run.data.tags.get("sabo_bench_level"), []).append(run)
    return out


def levels_of(tracker, study="synthetic"):
    return runs_by_level(tracker.client, tracker.client.get_experiment_by_name(study).experiment_id)


def test_a_new_store_is_not_announced_inside_the_progress_bar(tmp_path, capfd):
    """MLflow printed "INFO ... Creating initial MLflow database tables" (and alembic its migrations) on stderr."""
    Tracker(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert "INFO" not in capfd.readouterr().err


def test_a_new_store_is_not_announced_by_a_process_that_had_not_imported_mlflow(tmp_path):
    """Importing MLflow sets its loggers' levels: the first Tracker of a command must still be quiet."""
    import subprocess
    import sys

    code = f"from replication.tracking import Tracker; Tracker('sqlite:///{tmp_path / 'first.db'}')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and (tmp_path / "first.db").exists(), done.stderr
    assert "INFO" not in done.stderr and "database tables" not in done.stderr, done.stderr


def test_records_are_logged_as_group_runs_with_their_seed_runs(tmp_path, uri):
    tracker = Tracker(uri)
    recs = records(tmp_path)
    assert all(tracker.log_record(r, profile="quick") for r in recs)
    assert not any(tracker.log_record(r, profile="quick") for r in recs)  # idempotent
    assert all(tracker.is_logged(r, profile="quick") for r in recs) and not tracker.is_logged(recs[0], profile="ci")
    client = tracker.client
    levels = levels_of(tracker)
    assert set(levels) == {"group", "seed"} and len(levels["group"]) == 2 and len(levels["seed"]) == 4
    # group runs are top-level: MLflow's table shows a filter's hits on children under a collapsed parent
    assert all("mlflow.parentRunId" not in g.data.tags for g in levels["group"])
    group_ids = {g.info.run_id for g in levels["group"]}
    rec = recs[0]
    seed_run = next(r for r in levels["seed"] if r.data.tags["sabo_bench_config_hash"] == rec["config_hash"])
    assert seed_run.data.tags["mlflow.parentRunId"] in group_ids
    assert seed_run.data.tags["git_revision"] == str(rec["provenance"]["git_revision"])
    assert seed_run.data.params["method"] == "sabo" and seed_run.data.params["params.lr"] == "0.1"
    assert seed_run.data.params["problem.name"] == "ellipsoid"
    history = client.get_metric_history(seed_run.info.run_id, "error")
    curve = rec["result"]["curve"]
    assert [m.step for m in history] == curve["nfev"]
    assert [m.value for m in history] == pytest.approx(curve["error"])
    assert [a.path for a in client.list_artifacts(seed_run.info.run_id)] == ["curve.csv"]
    group = client.get_run(seed_run.data.tags["mlflow.parentRunId"])
    assert group.data.metrics["n_seeds"] == 2 and "final_error_median" in group.data.metrics
    # every seed run of a group sits under the one active group run, which was rewritten per seed
    for g in levels["group"]:
        children = [r for r in levels["seed"] if r.data.tags["mlflow.parentRunId"] == g.info.run_id]
        assert len(children) == 2 and {c.data.tags["sabo_bench_group_hash"] for c in children} == \
            {g.data.tags["sabo_bench_group_hash"]}
    deleted = client.search_runs([group.info.experiment_id], run_view_type=mlflow.entities.ViewType.DELETED_ONLY)
    assert len(deleted) == 2 and {r.data.tags["sabo_bench_level"] for r in deleted} == {"group"}


def _group_state(tracker):
    """Per group hash: (n_seeds of its one active group run, the seed runs under it, their grouped tags)."""
    levels = levels_of(tracker)
    out = {}
    for g in levels["group"]:
        children = [r for r in levels["seed"] if r.data.tags.get("mlflow.parentRunId") == g.info.run_id]
        out[g.data.tags["sabo_bench_group_hash"]] = (g.data.metrics["n_seeds"], len(children),
                                                     {c.data.tags["sabo_bench_grouped"] for c in children})
    return out, len(levels["seed"])


def test_the_safe_logger_writes_each_group_run_once_when_its_last_seed_is_logged(tmp_path, uri, monkeypatch):
    """Writing the group anew at every seed read every seed back each time; the logger of a study writes it once,
    when the last seed of the group among its configs arrives, and the group is the same as log_record's."""
    from helpers import small_config

    from replication.cli import SafeLogger

    recs = records(tmp_path, n_seeds=3)
    configs = [small_config(m, T=30, seed=s) for m in ("sabo", "ingo") for s in range(3)]
    tracker = Tracker(uri)
    written = []
    regroup = Tracker.regroup
    monkeypatch.setattr(Tracker, "regroup", lambda self, record, **kw: (written.append(record["group_hash"]),
                                                                        regroup(self, record, **kw)))
    logger = SafeLogger(tracker, "later", profile="quick", configs=configs)
    assert [logger(r) for r in recs] == [True] * 6
    assert written == [recs[2]["group_hash"], recs[5]["group_hash"]]  # once each, at its third seed
    state, n_seed_runs = _group_state(tracker)
    assert n_seed_runs == 6 and state == {r["group_hash"]: (3.0, 3, {"true"}) for r in recs}

    reference = Tracker(f"sqlite:///{tmp_path / 'reference.db'}")  # a seed at a time: the same group runs
    for r in recs:
        assert reference.log_record(r, profile="quick")
    ours = {g.data.tags["sabo_bench_group_hash"]: g.data.metrics for g in levels_of(tracker)["group"]}
    assert ours == {g.data.tags["sabo_bench_group_hash"]: g.data.metrics for g in levels_of(reference)["group"]}


def test_a_group_left_unwritten_by_a_stopped_logger_is_written_when_its_records_come_again(tmp_path, uri):
    """A logger stopped (Ctrl-C, killed) after logging seeds but before their group run: the seed runs stay
    tagged grouped = false, and the next logger that sees their records (a resumed run, `track`) writes the
    group, although the seeds are logged already; flush() writes a group whose last seed never came."""
    from helpers import small_config

    from replication.cli import SafeLogger

    recs = records(tmp_path, n_seeds=3, methods=("sabo",))
    configs = [small_config("sabo", T=30, seed=s) for s in range(3)]
    tracker = Tracker(uri)
    stopped = SafeLogger(tracker, "later", profile="quick", configs=configs)
    assert stopped(recs[0]) and stopped(recs[1])  # then the process ends: no flush
    assert "group" not in levels_of(tracker)
    resumed = SafeLogger(tracker, "later", profile="quick", configs=configs)
    assert [resumed(r) for r in recs] == [False, False, True]
    assert _group_state(tracker) == ({recs[0]["group_hash"]: (3.0, 3, {"true"})}, 3)

    partial = SafeLogger(Tracker(f"sqlite:///{tmp_path / 'partial.db'}"), "later", profile="quick", configs=configs)
    assert partial(recs[0]) and partial(recs[1])
    assert "group" not in levels_of(partial.tracker)
    partial.flush()
    assert _group_state(partial.tracker) == ({recs[0]["group_hash"]: (2.0, 2, {"true"})}, 2)


def test_the_tracking_cost_benchmark_logs_both_ways(tmp_path, capsys):
    """benchmarks/tracking_cost.py: per-seed and per-group logging of the same records, timed, with their ratio."""
    from helpers import benchmark_script

    from replication.config import RunConfig
    from replication.engine import record_path

    recs = records(tmp_path, n_seeds=2, methods=("sabo",))
    folder = record_path(tmp_path / "runs", RunConfig.from_dict(recs[0]["config"])).parent
    benchmark_script("tracking_cost").main([str(folder), "--rounds", "1"])
    out = capsys.readouterr().out
    assert "2 records in 1 groups" in out and "per seed" in out and "per group / per seed: " in out


# ---------------------------------------------------------------------- item 1: profiles and names
def test_profiles_with_different_budgets_never_collide(tmp_path, uri):
    """quick (T = 30) and ci (T = 60) runs of one setting: separate group runs, unique names, profile tags."""
    tracker = Tracker(uri)
    budgets = {"quick": 30, "ci": 60}
    for profile, T in budgets.items():
        for r in records(tmp_path, n_seeds=2, T=T):
            assert tracker.log_record(r, profile=profile)
    levels = levels_of(tracker)
    groups, seeds = levels["group"], levels["seed"]
    assert len(groups) == 4 and len(seeds) == 8
    names = [r.info.run_name for r in groups + seeds]
    assert len(set(names)) == len(names)
    assert {g.info.run_name for g in groups} == {f"{m} · d20_N10/ellipsoid [{p}]" for m in ("sabo", "ingo")
                                                 for p in budgets}
    assert "sabo seed1 · d20_N10/ellipsoid [ci]" in names
    for run in groups + seeds:
        tags, params = run.data.tags, run.data.params
        assert (tags["sabo_bench_setting"], tags["sabo_bench_function"]) == ("d20_N10", "ellipsoid")
        assert tags["sabo_bench_method"] == params["method"]
        assert params["budget.max_iter"] == str(budgets[tags["sabo_bench_profile"]])  # a profile is one budget
    exp_id = groups[0].info.experiment_id
    ci = tracker.client.search_runs([exp_id], "tags.sabo_bench_level = 'group' and tags.sabo_bench_profile = 'ci'",
                                    order_by=["metrics.final_error_median ASC"])
    assert len(ci) == 2 and {r.data.params["budget.max_iter"] for r in ci} == {"60"}


def test_a_record_shared_by_two_profiles_is_logged_under_each(tmp_path, uri):
    tracker = Tracker(uri)
    [rec] = records(tmp_path, n_seeds=1, methods=("ingo",))
    assert tracker.log_record(rec, profile="quick") and tracker.log_record(rec, profile="ci")
    assert not tracker.log_record(rec, profile="ci")
    levels = levels_of(tracker)
    assert sorted(r.data.tags["sabo_bench_profile"] for r in levels["seed"]) == ["ci", "quick"]
    assert sorted(r.data.tags["sabo_bench_profile"] for r in levels["group"]) == ["ci", "quick"]


def test_method_grids_name_their_grid_points():
    configs = [small_config("sabo", seed=s, lr=lr) for lr in (0.1, 0.5) for s in (0, 1)]
    configs += [small_config("ingo", seed=s) for s in (0, 1)] + [small_config("sabo", function="levy")]
    names = variants(configs)
    assert len(names) == 4  # one per group
    assert {names[c.group_hash] for c in configs if c.method == "sabo" and c.problem["name"] == "ellipsoid"} == \
        {"lr=0.1", "lr=0.5"}
    assert names[configs[4].group_hash] == "" and names[configs[-1].group_hash] == ""  # alone in its cell


def test_grid_points_get_distinct_group_runs_through_the_command_line(tmp_path, uri):
    from replication.cli import SafeLogger

    tracker = Tracker(uri)
    configs = [small_config("ingo", T=20, seed=0, lr=lr) for lr in (0.1, 0.5)]
    logger = SafeLogger(tracker, profile="grid", configs=configs)
    for c in configs:
        assert logger(execute(c, tmp_path / "runs")) is True
    levels = levels_of(tracker)
    assert sorted(g.info.run_name for g in levels["group"]) == ["ingo (lr=0.1) · d20_N10/ellipsoid [grid]",
                                                                "ingo (lr=0.5) · d20_N10/ellipsoid [grid]"]
    assert sorted(s.info.run_name for s in levels["seed"]) == ["ingo (lr=0.1) seed0 · d20_N10/ellipsoid [grid]",
                                                               "ingo (lr=0.5) seed0 · d20_N10/ellipsoid [grid]"]


# ---------------------------------------------------------------------- item 2: wall times
def test_runs_start_and_end_at_the_records_wall_times(tmp_path, uri):
    tracker = Tracker(uri)
    recs = records(tmp_path, n_seeds=2, methods=("sabo",), T=60)
    for r in recs:
        tracker.log_record(r, profile="ci")
    client = tracker.client
    levels = levels_of(tracker)

    def ms(iso):  # independent of the tracker's parser: the record's ISO text, millisecond precision
        return round(datetime.fromisoformat(iso).timestamp() * 1000)

    for run in levels["seed"]:
        rec = next(r for r in recs if r["config_hash"] == run.data.tags["sabo_bench_config_hash"])
        prov = rec["provenance"]
        assert run.info.start_time == ms(prov["started_utc"]) and run.info.end_time == ms(prov["finished_utc"])
        # the record's span (ms precision) brackets its measured compute time
        assert run.info.end_time - run.info.start_time >= 1000 * prov["wall_time_s"] - 2
        history = client.get_metric_history(run.info.run_id, "error")
        stamps = [m.timestamp for m in history]
        assert stamps == [round(t * 1000) for t in prov["curve_time_unix_s"]]
        assert stamps == sorted(stamps) and stamps[0] >= run.info.start_time and stamps[-1] <= run.info.end_time
        assert stamps[-1] > stamps[0]  # not one timestamp for all (60 iterations of d = 20 take > 1 ms)
        final = client.get_metric_history(run.info.run_id, "final_error")
        assert [m.timestamp for m in final] == [run.info.end_time]
    [group] = levels["group"]
    walls = [r["provenance"]["wall_time_s"] for r in recs]
    # a group's Duration is its seeds' summed compute, not the span they happened to run in
    assert group.info.start_time == min(s.info.start_time for s in levels["seed"])
    assert group.info.end_time - group.info.start_time == round(1000 * sum(walls))
    assert group.data.metrics["wall_time_s_sum"] == pytest.approx(sum(walls))
    assert group.data.metrics["wall_time_s_median"] == pytest.approx(np.median(walls))


def test_records_without_point_times_stamp_their_curve_at_the_end(tmp_path, uri):
    tracker = Tracker(uri)
    [rec] = records(tmp_path, n_seeds=1, methods=("ingo",))
    del rec["provenance"]["curve_time_unix_s"]  # a record written before the engine kept them
    rec["provenance"]["started_utc"] = "2024-05-01T10:00:00+00:00"  # and with second precision
    rec["provenance"]["finished_utc"] = "2024-05-01T10:00:07+00:00"
    tracker.log_record(rec, profile="ci")
    [seed] = levels_of(tracker)["seed"]
    assert (seed.info.start_time, seed.info.end_time) == (1714557600000, 1714557607000)
    assert {m.timestamp for m in tracker.client.get_metric_history(seed.info.run_id, "error")} == {1714557607000}


# ---------------------------------------------------------------------- item 3: aggregates a comparison can trust
def test_aggregates_resist_one_diverged_seed():
    values = [1e-3, 2e-3, 1e24]  # two converged seeds, one BES-like divergence
    agg = aggregate(values)
    assert agg["median"] == 2e-3
    assert agg["geomean"] == pytest.approx(math.exp((math.log(1e-3) + math.log(2e-3) + math.log(1e24)) / 3))
    assert agg["mean"] == pytest.approx(1e24 / 3)  # what the mean alone says: the divergence
    assert aggregate([0.0, 1.0])["geomean"] == 0.0 and "geomean" not in aggregate([-1.0, 1.0])
    assert aggregate([1e300, 1e300, 1e-300]).keys() == {"mean", "median", "geomean"}  # std overflows: left out
    # one finite value: no std (a 0 would read as seeds that agree)
    assert aggregate([float("nan"), float("inf"), 3.0]) == pytest.approx({"mean": 3.0, "median": 3.0, "geomean": 3.0})
    assert aggregate([2.0, 4.0])["std"] == pytest.approx(math.sqrt(2.0))


def test_median_curve_carries_a_stopped_seed_and_skips_unknown_points():
    full = [0, 10, 20, 30]
    seeds = [(full, {0: (4.0, 100), 10: (3.0, 110), 20: (2.0, 120), 30: (1.0, 130)}),
             (full, {0: (5.0, 100), 10: (1.0, 111), 20: (0.5, 125), 30: (0.1, 131)}),
             ([0, 10], {0: (6.0, 100), 10: (1e24, 112)})]          # diverged after 10 evaluations
    assert median_curve(seeds) == {0: (5.0, 100), 10: (3.0, 112), 20: (2.0, 125), 30: (1.0, 131)}
    holed = [(full, {0: (1.0, 1), 20: (1.0, 3), 30: (1.0, 4)}), (full, {s: (2.0, 5) for s in full})]
    assert sorted(median_curve(holed)) == [0, 20, 30]  # a non-finite point (not logged) hides its step


def test_group_runs_log_median_geomean_and_the_median_error_curve(tmp_path, uri):
    tracker = Tracker(uri)
    recs = records(tmp_path, n_seeds=3, methods=("ingo",), T=40)
    blown = recs[2]  # as BES diverges: status, a huge final error, the curve cut short
    cut = 10
    blown["result"]["status"] = "diverged"
    blown["result"]["curve"] = {k: v[:cut] for k, v in blown["result"]["curve"].items()}
    blown["result"]["curve"]["error"][-1] = 1e24
    blown["result"]["final"] = {k: v[-1] for k, v in blown["result"]["curve"].items()}
    blown["provenance"]["curve_time_unix_s"] = blown["provenance"]["curve_time_unix_s"][:cut]
    for r in recs:
        tracker.log_record(r, profile="ci")
    client = tracker.client
    [group] = levels_of(tracker)["group"]
    m = group.data.metrics
    finals = [r["result"]["final"]["error"] for r in recs]
    assert m["n_seeds"] == 3 and m["n_diverged"] == 1
    assert m["final_error_median"] == pytest.approx(sorted(finals)[1])
    assert m["final_error_geomean"] == pytest.approx(math.prod(finals) ** (1 / 3), rel=1e-9)
    assert m["final_error_mean"] == pytest.approx(sum(finals) / 3) and m["final_error_mean"] > 1e23
    assert m["final_error_median"] < 1e3  # the median is a converged seed's
    history = client.get_metric_history(group.info.run_id, "error_median")
    nfev = recs[0]["result"]["curve"]["nfev"]
    assert [h.step for h in history] == nfev  # one point per evaluation count, though the group was rewritten
    for h, i in zip(history, range(len(nfev))):
        per_seed = [r["result"]["curve"]["error"][min(i, len(r["result"]["curve"]["error"]) - 1)] for r in recs]
        assert h.value == pytest.approx(sorted(per_seed)[1])
    assert {"f_best_median", "f_mean_median"} <= set(group.data.metrics) and "nit_median" not in group.data.metrics


def test_decades_are_clipped_three_above_the_start_and_flag_the_run():
    start = 10.0 ** 1.5
    logs, clipped = decades([start, 1.0, 1e-3, 0.0, float("nan")])
    assert not clipped and logs[:3] == pytest.approx([1.5, 0.0, -3.0]) and all(math.isnan(x) for x in logs[3:])
    logs, clipped = decades([start, 1e4, 1e132, float("inf")])  # BES climbing, then overflowing
    assert clipped and logs == pytest.approx([1.5, 4.0, 4.5, 4.5])
    assert decades([0.0, float("nan")])[1] is False


def test_a_blown_up_run_is_finished_flagged_and_drawn_at_the_ceiling(tmp_path, uri):
    """Diverged and blown-up runs are results: FINISHED in MLflow, tagged, their decades clipped (not FAILED)."""
    tracker = Tracker(uri)
    recs = records(tmp_path, n_seeds=3, methods=("ingo",), T=40)
    first = recs[1]["result"]["curve"]["error"][0]  # where the blown-up run started: its ceiling is 3 decades up
    recs[1]["result"]["curve"]["error"][-5:] = [1e132] * 5  # climbs far above its start, as BES does
    recs[1]["result"]["final"]["error"] = 1e132
    recs[2]["result"]["status"] = "diverged"
    for r in recs:
        assert tracker.log_record(r, profile="ci")
    levels = levels_of(tracker)
    seeds = {s.data.tags["sabo_bench_config_hash"]: s for s in levels["seed"]}
    assert {s.info.status for s in seeds.values()} == {"FINISHED"}
    flags = [seeds[r["config_hash"]].data.tags["sabo_bench_diverged"] for r in recs]
    assert flags == ["false", "true", "true"]
    assert [seeds[r["config_hash"]].data.tags["sabo_bench_status"] for r in recs] == ["completed", "completed",
                                                                                      "diverged"]
    blown = seeds[recs[1]["config_hash"]]
    history = tracker.client.get_metric_history(blown.info.run_id, "error_log10")
    assert history[-1].value == pytest.approx(np.log10(first) + 3) and blown.data.metrics["error"] == 1e132
    assert blown.data.metrics["final_error_log10"] == pytest.approx(np.log10(first) + 3)
    [group] = levels["group"]
    assert (group.data.metrics["n_diverged"], group.data.metrics["n_clipped"]) == (1, 2)
    assert group.data.metrics["final_error_log10_median"] == pytest.approx(
        np.median([np.log10(recs[0]["result"]["final"]["error"]), np.log10(first) + 3,
                   np.log10(recs[2]["result"]["final"]["error"])]))


def test_effective_popsize_and_rho_are_logged_and_counters_not_aggregated(tmp_path, uri):
    """The values a config leaves to defaults or schedules are logged as the run used them."""
    tracker = Tracker(uri)
    T = 30
    default_rho = execute(small_config("sabo", T=T, seed=0, popsize=None, rho=None), tmp_path / "runs")
    scheduled = execute(small_config("sabo", T=T, seed=0, rho={"kind": "inv_sqrt", "scale": 4.0}), tmp_path / "runs")
    for r in (default_rho, scheduled):
        assert tracker.log_record(r, profile="ci")
    seeds = {s.data.tags["sabo_bench_config_hash"]: s for s in levels_of(tracker)["seed"]}
    run = seeds[default_rho["config_hash"]]
    assert run.data.metrics["popsize"] == SABO.default_popsize(20)  # popsize=None: the class default at d = 20
    rho = tracker.client.get_metric_history(run.info.run_id, "rho")
    assert [h.value for h in rho] == pytest.approx([DEFAULT_RHO_SCALE * np.sqrt(20)] * len(rho)) and rho
    run = seeds[scheduled["config_hash"]]
    rho = tracker.client.get_metric_history(run.info.run_id, "rho")
    nit = scheduled["result"]["curve"]["nit"]
    assert [h.value for h in rho] == pytest.approx([4.0 / np.sqrt(t + 1.0) for t in nit])  # rho_t, not rho_0
    assert run.data.metrics["popsize"] == 10
    for group in levels_of(tracker)["group"]:
        assert not any(k.startswith(("final_nfev", "final_nit")) for k in group.data.metrics)
        assert "popsize" in group.data.metrics and "rho_median" in group.data.metrics


def test_records_logged_by_an_earlier_sabo_bench_are_logged_again_in_the_new_form(tmp_path, uri, monkeypatch):
    import replication.tracking as tracking

    tracker = Tracker(uri)
    recs = records(tmp_path, n_seeds=2, methods=("ingo",))
    monkeypatch.setattr(tracking, "FORMAT", "1")
    assert tracker.log_record(recs[0], profile="ci")
    monkeypatch.undo()
    assert not tracker.is_logged(recs[0], profile="ci")
    assert all(tracker.log_record(r, profile="ci") for r in recs)
    levels = levels_of(tracker)
    assert len(levels["seed"]) == 2 and {s.data.tags["sabo_bench_format"] for s in levels["seed"]} == {tracking.FORMAT}
    [group] = levels["group"]
    assert group.data.metrics["n_seeds"] == 2


def test_diverged_runs_with_huge_errors_are_logged(tmp_path, uri):
    """BES reaches errors near 1e300; aggregating them over seeds must not overflow."""
    tracker = Tracker(uri)
    recs = records(tmp_path, n_seeds=2, methods=("ingo",))
    for r in recs:
        r["result"]["final"]["error"] = 1e300
    assert all(tracker.log_record(r, profile="ci") for r in recs)
    group = levels_of(tracker)["group"][0]
    assert group.data.metrics["final_error_mean"] == 1e300 and group.data.metrics["final_error_median"] == 1e300


# ---------------------------------------------------------------------- item 4: the comparison docs/mlflow.md documents
def test_the_comparison_filter_lands_on_the_group_runs_and_names_the_step_axis(tmp_path, uri):
    tracker = Tracker(uri)
    for r in records(tmp_path, n_seeds=2, methods=("sabo", "ingo", "bes")):
        tracker.log_record(r, profile="ci")
    for r in records(tmp_path, n_seeds=1, methods=("sabo",), T=20):
        tracker.log_record(r, profile="quick")
    # SABO against INGO: BES is in the store, CMA-ES and MMES only in the profile (not logged yet)
    url = tracker.comparison_url("synthetic", "ci", setting="d20_N10", function="ellipsoid", methods=["sabo", "ingo"],
                                 others=["cmaes", "mmes"], ui="http://h:1")
    exp = tracker.client.get_experiment_by_name("synthetic")
    assert url.startswith(f"http://h:1/#/experiments/{exp.experiment_id}/runs?")
    state = urllib.parse.parse_qs(url.split("?", 1)[1])
    assert state["compareRunsMode"] == ["CHART"] and state["workflowType"] == ["machine_learning"]
    assert state["orderByKey"] == ["metrics.`final_error_median`"] and state["orderByAsc"] == ["true"]
    [query] = state["searchFilter"]
    assert query == readme_filter("ci", "d20_N10", "ellipsoid")  # the filter docs/mlflow.md documents
    hits = tracker.client.search_runs([exp.experiment_id], query)
    assert sorted(r.info.run_name for r in hits) == ["ingo · d20_N10/ellipsoid [ci]", "sabo · d20_N10/ellipsoid [ci]"]
    assert all("mlflow.parentRunId" not in r.data.tags for r in hits)  # top-level: the table lists them as rows
    for run in hits + levels_of(tracker)["seed"]:
        assert run.data.tags["sabo_bench_step"] == "function evaluations"
        assert "Step = function evaluations" in run.data.tags["mlflow.note.content"]
    assert exp.tags["mlflow.note.content"].startswith("Step = number of function evaluations")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # MLflow 3's training layout, not GenAI
    every = urllib.parse.parse_qs(tracker.comparison_url("synthetic", "ci", setting="d20_N10").split("?", 1)[1])
    assert len(tracker.client.search_runs([exp.experiment_id], every["searchFilter"][0])) == 3  # no --method: all
    assert tracker.comparison_url("image", "ci") is None


def _log_all(uri, recs):
    tracker = Tracker(uri, timeout=120)  # on 2 busy cores a latecomer may queue > 15 s for the lock
    for r in recs:
        tracker.log_record(r, profile="ci")


def test_concurrent_loggers_lose_nothing(tmp_path, uri):
    recs = records(tmp_path, n_seeds=3, methods=("sabo", "ingo", "mmes", "cmaes"))
    ctx = multiprocessing.get_context("spawn")
    # four processes, each logging every record: the same groups and the same seeds race
    procs = [ctx.Process(target=_log_all, args=(uri, recs[i:] + recs[:i])) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
        assert p.exitcode == 0
    tracker = Tracker(uri)
    client = tracker.client
    levels = levels_of(tracker)
    assert len(levels["group"]) == 4 and all(g.data.metrics["n_seeds"] == 3 for g in levels["group"])
    hashes = sorted(r.data.tags["sabo_bench_config_hash"] for r in levels["seed"])
    assert hashes == sorted(r["config_hash"] for r in recs)
    group_ids = {g.info.run_id for g in levels["group"]}
    for run in levels["seed"]:
        assert run.data.tags["mlflow.parentRunId"] in group_ids
        assert len(client.get_metric_history(run.info.run_id, "error")) == len(recs[0]["result"]["curve"]["nit"])


# ---------------------------------------------------------------------- tracking never stops a study
TINY = tiny_params(functions=["ellipsoid"], methods=["ingo"])


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """main() on a two-run parameter file; returns (exit status, stdout, stderr)."""
    import yaml

    from replication.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TINY))

    def call(*argv, capsys=None):
        rc = main([argv[0], "synthetic", *argv[1:]])
        out, err = capsys.readouterr() if capsys else ("", "")
        return rc, out, err
    return call


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(("warning:", "error:"))]


def assert_two_records_on_disk(cli, capsys):
    rc, out, _ = cli("list", "--summary", capsys=capsys)
    assert rc == 0 and "2 completed" in out


def test_corrupt_database_is_one_warning_and_track_logs_later(cli, tmp_path, monkeypatch, capsys):
    db = tmp_path / "mlflow.db"
    db.write_bytes(np.random.default_rng(0).bytes(8192))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    rc, out, err = cli("run", "--quiet", capsys=capsys)
    assert rc == 0 and "2 runs finished" in out, err
    [line] = warnings(err)
    assert "tracking is off for this command" in line and "file is not a database" in line
    assert "sabo-bench track synthetic" in line
    assert_two_records_on_disk(cli, capsys)
    rc, _, err = cli("track", capsys=capsys)  # still corrupt: logging is track's whole purpose
    assert rc == 2 and len(warnings(err)) == 1 and warnings(err)[0].startswith("error: MLflow is unavailable")
    db.unlink()  # repaired
    rc, out, err = cli("track", capsys=capsys)
    assert rc == 0 and "2 records logged" in out and "0 already there" in out, err
    rc, out, _ = cli("track", capsys=capsys)
    assert rc == 0 and "0 records logged" in out and "2 already there" in out
    client = Tracker(f"sqlite:///{db}").client
    seeds = runs_by_level(client, client.get_experiment_by_name("synthetic").experiment_id)["seed"]
    assert len(seeds) == 2


def test_track_without_records_says_which_run_makes_them(cli, uri, monkeypatch, capsys):
    """A fresh clone's first `track` (docs/mlflow.md's steps out of order): one line naming the `run` to start."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    rc, out, err = cli("track", "--method", "ingo", "--function", "ellipsoid", capsys=capsys)
    assert rc == 2 and out == ""
    assert err.strip() == ("error: no finished run of the 2 selected has a record under runs: make them first with "
                           "`sabo-bench run synthetic --function ellipsoid --method ingo`")
    rc, _, err = cli("run", "--method", "ingo", "--function", "ellipsoid", "--quiet", capsys=capsys)  # as it says
    assert rc == 0, err
    rc, out, _ = cli("track", "--method", "ingo", "--function", "ellipsoid", capsys=capsys)
    assert rc == 0 and "0 records logged" in out and "2 already there" in out


def test_track_waits_for_the_ui_and_says_how_to_start_it(cli, uri, monkeypatch, capsys):
    from replication.cli import wait_for_ui

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert cli("run", "--method", "ingo", "--quiet", capsys=capsys)[0] == 0
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        nothing = f"http://127.0.0.1:{s.getsockname()[1]}"
    started = time.monotonic()
    rc, out, _ = cli("track", "--ui", nothing, "--wait-ui", "1.5", capsys=capsys)
    assert rc == 0 and time.monotonic() - started >= 1.5
    assert f"no MLflow UI answers at {nothing}: start it with `mlflow ui --backend-store-uri {uri}`" in out
    assert f"compare the methods (group runs of profile 'tiny') in `mlflow ui`: {nothing}/#/experiments/" in out
    assert not wait_for_ui("not a url", 0.0)


def test_the_command_line_logs_runs_and_report_figures_under_the_profile(cli, uri, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    rc, _, err = cli("run", "--quiet", capsys=capsys)
    assert rc == 0 and not warnings(err)
    rc, _, err = cli("report", "--out", str(tmp_path / "results"), capsys=capsys)
    assert rc == 0 and not warnings(err)
    tracker = Tracker(uri)
    levels = levels_of(tracker)
    assert [g.info.run_name for g in levels["group"]] == ["ingo · d10_N6/ellipsoid [tiny]"]
    assert sorted(s.info.run_name for s in levels["seed"]) == [f"ingo seed{k} · d10_N6/ellipsoid [tiny]"
                                                               for k in (0, 1)]
    [setting] = levels["setting"]
    assert setting.info.run_name == "d10_N6 [tiny]" and setting.data.tags["sabo_bench_profile"] == "tiny"
    figures = [a.path for a in tracker.client.list_artifacts(setting.info.run_id, "report")]
    written = sorted(f"report/{f.name}" for f in (tmp_path / "results" / "figures").glob("synthetic_d10_N6*"))
    assert "report/synthetic_d10_N6_evals.png" in written and figures == written  # every figure of the setting


@pytest.mark.parametrize("uri", ["foo://bar", "sqlite:////proc/nope/mlflow.db"])
def test_unusable_uri_is_one_warning_for_run_one_and_report(cli, tmp_path, monkeypatch, capsys, uri):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    rc, out, err = cli("run-one", "--seed", "0", "--quiet", capsys=capsys)
    assert rc == 0 and "completed" in out
    [line] = warnings(err)
    assert "tracking is off for this command" in line and uri in line
    rc, out, err = cli("run", "--quiet", capsys=capsys)
    assert rc == 0 and len(warnings(err)) == 1
    rc, out, err = cli("report", "--out", str(tmp_path / "results"), capsys=capsys)
    assert rc == 0 and len(warnings(err)) == 1 and "sabo-bench report synthetic" in warnings(err)[0]
    assert (tmp_path / "results" / "synthetic.md").exists()
    assert (tmp_path / "results" / "figures" / "synthetic_d10_N6.png").exists()


def test_locked_database_gives_up_within_the_timeout(cli, tmp_path, monkeypatch, capsys):
    import sqlite3
    import time

    db = tmp_path / "mlflow.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")  # another process writing, forever
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    monkeypatch.setenv("SABO_BENCH_TRACKING_TIMEOUT", "2")
    try:
        start = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            Tracker()
        assert time.monotonic() - start < 2 + 5  # waiting takes no CPU: a loaded machine adds little
        rc, out, err = cli("run-one", "--seed", "1", "--quiet", capsys=capsys)
        assert rc == 0 and "completed" in out
        [line] = warnings(err)
        assert "tracking is off for this command" in line and "database is locked" in line
    finally:
        holder.rollback()
        holder.close()


def test_a_broken_store_is_our_one_warning_not_mlflows_traceback(cli, uri, tmp_path, monkeypatch, capfd):
    """A store MLflow cannot query (here its experiments table is gone; a locked one fails the same way after
    MLflow's own wait) made MLflow log SQLAlchemy's error, its SQL and a traceback: 28 to 222 lines around our
    warning. The library's loggers are kept quiet while we call MLflow, for opening the store and for logging
    to it once open."""
    import sqlite3
    from contextlib import closing

    from replication.cli import SafeLogger

    tracker = Tracker(uri)  # opened while it worked
    with closing(sqlite3.connect(uri[len("sqlite:///"):])) as db:
        db.execute("DROP TABLE experiments")
    logger = SafeLogger(tracker, "later", profile="ci")
    capfd.readouterr()
    assert logger(records(tmp_path, n_seeds=1, methods=("ingo",), T=10)[0]) is None
    logger.summarize()
    err = capfd.readouterr().err.splitlines()
    assert len(err) == 2 and "no such table: experiments" in err[0] and err[1].startswith("warning: 1 records"), err
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # broken before the command opens it
    rc, out, _ = cli("run", "--quiet")
    err = capfd.readouterr().err.splitlines()
    assert rc == 0 and len(err) == 1 and "tracking is off for this command" in err[0], err
    assert logging.getLogger("sqlalchemy.engine").level == logging.WARNING  # MLflow's own setting, put back


def test_lock_file_held_elsewhere_bounds_the_connection(tmp_path):
    import fcntl
    import time

    with open(tmp_path / "mlflow.db.lock", "a") as fh:  # a hung logger holding the lock
        fcntl.flock(fh, fcntl.LOCK_EX)
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            Tracker(f"sqlite:///{tmp_path}/mlflow.db", timeout=1)
        assert time.monotonic() - start < 5


def test_creating_or_opening_a_store_is_not_cut_short_by_the_timeout(tmp_path):
    """The timeout bounds waiting for other processes, not this one's work: MLflow's tables take 15 s and more to
    create on a loaded machine (a timeout of 0 cut every creation short when it bounded the whole connection)."""
    db = tmp_path / "store" / "mlflow.db"
    Tracker(f"sqlite:///{db}", timeout=0)  # created
    tracker = Tracker(f"sqlite:///{db}", timeout=0)  # opened
    assert tracker.client.get_experiment_by_name("Default") is not None
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db", "mlflow.db.lock"]


def test_an_interrupted_creation_leaves_no_store(tmp_path, monkeypatch):
    """A store whose migrations stopped halfway would be refused from then on (out-of-date schema): a creation
    interrupted by Ctrl-C leaves nothing, and the next command creates the store."""
    import mlflow.store.db.utils

    def interrupted(engine):
        raise KeyboardInterrupt

    db = tmp_path / "mlflow.db"
    with monkeypatch.context() as patched:
        patched.setattr(mlflow.store.db.utils, "_upgrade_db", interrupted)
        with pytest.raises(KeyboardInterrupt):
            Tracker(f"sqlite:///{db}")
    assert [p.name for p in tmp_path.iterdir()] == ["mlflow.db.lock"]
    assert Tracker(f"sqlite:///{db}").client.get_experiment_by_name("Default") is not None


def test_a_server_that_does_not_answer_is_given_up_within_the_timeout(tmp_path):
    """A tracking server is bounded as a whole: one that accepts the connection and never answers."""
    import socket
    import time

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"no answer from http://127\.0\.0\.1:\d+ within 1 s"):
            Tracker(f"http://127.0.0.1:{server.getsockname()[1]}", timeout=1)
        assert time.monotonic() - start < 1 + 5


def test_tracker_dying_mid_study_is_a_warning(cli, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")

    def dead(self, record, **kwargs):
        raise ConnectionError("tracking server went away")

    monkeypatch.setattr(Tracker, "log_seed", dead)
    rc, out, err = cli("run", "--quiet", capsys=capsys)
    assert rc == 0 and "2 runs finished" in out  # exit status 0: tracking never fails a study
    assert sum("tracking server went away" in w for w in warnings(err)) == 2
    assert "warning: 2 records could not be logged to MLflow" in err and "sabo-bench track synthetic" in err
    rc, out, err = cli("run-one", "--seed", "0", "--quiet", capsys=capsys)
    assert rc == 0 and "1 records could not be logged" in err
    rc, out, err = cli("track", capsys=capsys)
    assert rc == 1 and "2 records could not be logged" in err
    monkeypatch.undo()  # the tracker works again
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    rc, out, _ = cli("track", capsys=capsys)
    assert rc == 0 and "2 records logged" in out


def test_safe_logger_stops_trying_a_dead_tracker(capsys):
    from replication.cli import SafeLogger

    class Dead:
        calls = 0

        def log_seed(self, record, **kwargs):
            Dead.calls += 1
            raise OSError("gone")

    logger = SafeLogger(Dead(), "later", profile="ci")
    for i in range(10):
        assert logger({"config_hash": str(i)}) is None
    logger.summarize()
    err = capsys.readouterr().err
    assert Dead.calls == SafeLogger.MAX_FAILURES_IN_A_ROW and logger.failures == 10
    assert len(warnings(err)) == SafeLogger.MAX_FAILURES_IN_A_ROW + 1 and "10 records" in err


def test_names_with_quotes_are_found_exactly(tmp_path, uri):
    tracker = Tracker(uri)
    exp = tracker._experiment_id("synthetic")
    names = ["plain", "o'brien", 'say "hi"', "back\\slash", "ends\\", "all'\"\\", "a%b", "a_b", "A'B", "a'b"]
    for n in names:
        tracker.log_setting_artifacts("synthetic", n, [], profile=n)
    ids = {}
    for n in names:
        [run] = tracker._find(exp, level="setting", setting=n, profile=n)  # no name matched another (LIKE, case)
        ids[n] = run.info.run_id
        tracker.log_setting_artifacts("synthetic", n, [], profile=n)  # found again, not created anew
        assert [r.info.run_id for r in tracker._find(exp, level="setting", setting=n, profile=n)] == [ids[n]]
    assert len(set(ids.values())) == len(names)

    # RunConfig refuses quotes in names now; a record's hash is read as it is, so it may hold them
    recs = records(tmp_path, n_seeds=2, methods=("ingo",))
    for i, r in enumerate(recs):
        r["config_hash"] = f"{r['config_hash']}'\"{i}\\"
    assert all(tracker.log_record(r, profile="o'q") for r in recs)
    assert not any(tracker.log_record(r, profile="o'q") for r in recs)  # idempotent: the quoted hashes are found
    assert all(tracker.is_logged(r, profile="o'q") for r in recs)
    group = runs_by_level(tracker.client, exp)["group"]
    assert len(group) == 1 and group[0].data.metrics["n_seeds"] == 2
