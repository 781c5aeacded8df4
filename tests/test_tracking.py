"""MLflow tracking: run hierarchy, per-evaluation metrics, artifacts, idempotency, concurrent loggers."""
import multiprocessing

import pytest

from helpers import small_config
from replication.engine import execute

mlflow = pytest.importorskip("mlflow")  # part of the replication extra, installed by .ci/run
from replication.tracking import Tracker  # noqa: E402


def records(tmp_path, n_seeds=2, methods=("sabo", "ingo")):
    return [execute(small_config(m, T=30, seed=s), tmp_path / "runs") for m in methods for s in range(n_seeds)]


def runs_by_level(client, exp_id):
    out = {}
    for run in client.search_runs([exp_id], max_results=1000):
        out.setdefault(run.data.tags.get("sabo_bench_level"), []).append(run)
    return out


def test_records_are_logged_as_setting_group_seed_hierarchy(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    tracker = Tracker(uri)
    recs = records(tmp_path)
    assert all(tracker.log_record(r) for r in recs)
    assert not any(tracker.log_record(r) for r in recs)  # idempotent
    client = tracker.client
    exp = client.get_experiment_by_name("synthetic")
    levels = runs_by_level(client, exp.experiment_id)
    assert len(levels["setting"]) == 1 and len(levels["group"]) == 2 and len(levels["seed"]) == 4
    setting_id = levels["setting"][0].info.run_id
    assert all(g.data.tags["mlflow.parentRunId"] == setting_id for g in levels["group"])
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
    assert group.data.metrics["n_seeds"] == 2 and "final_error_mean" in group.data.metrics


def _log_all(uri, recs):
    tracker = Tracker(uri)
    for r in recs:
        tracker.log_record(r)


def test_concurrent_loggers_lose_nothing(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    recs = records(tmp_path, n_seeds=3, methods=("sabo", "ingo", "mmes", "cmaes"))
    ctx = multiprocessing.get_context("spawn")
    # four processes, each logging every record: the same parents and the same seeds race
    procs = [ctx.Process(target=_log_all, args=(uri, recs[i:] + recs[:i])) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
        assert p.exitcode == 0
    client = Tracker(uri).client
    levels = runs_by_level(client, client.get_experiment_by_name("synthetic").experiment_id)
    assert len(levels["setting"]) == 1 and len(levels["group"]) == 4
    hashes = sorted(r.data.tags["sabo_bench_config_hash"] for r in levels["seed"])
    assert hashes == sorted(r["config_hash"] for r in recs)
    for run in levels["seed"]:
        assert len(client.get_metric_history(run.info.run_id, "error")) == len(recs[0]["result"]["curve"]["nit"])


def test_diverged_runs_with_huge_errors_are_logged(tmp_path):
    """BES reaches errors near 1e300; aggregating them over seeds must not overflow."""
    tracker = Tracker(f"sqlite:///{tmp_path}/mlflow.db")
    recs = records(tmp_path, n_seeds=2, methods=("ingo",))
    for r in recs:
        r["result"]["final"]["error"] = 1e300
    assert all(tracker.log_record(r) for r in recs)
    client = tracker.client
    group = runs_by_level(client, client.get_experiment_by_name("synthetic").experiment_id)["group"][0]
    assert group.data.metrics["final_error_mean"] == 1e300 and "final_error_std" in group.data.metrics
