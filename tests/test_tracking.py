"""MLflow tracking: run hierarchy, per-evaluation metrics, artifacts, idempotency, concurrent loggers."""
import multiprocessing

import numpy as np
import pytest
from helpers import small_config, tiny_params

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
    tracker = Tracker(uri, timeout=120)  # on 2 busy cores a latecomer may queue > 15 s for the lock
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
        rc, out, err = cli("run-one", "--seed", "1", "--quiet", capsys=capsys)
        assert time.monotonic() - start < 10
        assert rc == 0 and "completed" in out
        [line] = warnings(err)
        assert "tracking is off for this command" in line
    finally:
        holder.rollback()
        holder.close()


def test_lock_file_held_elsewhere_bounds_the_connection(tmp_path):
    import fcntl
    import time

    with open(tmp_path / "mlflow.db.lock", "a") as fh:  # a hung logger holding the lock
        fcntl.flock(fh, fcntl.LOCK_EX)
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            Tracker(f"sqlite:///{tmp_path}/mlflow.db", timeout=1)
        assert time.monotonic() - start < 5


def test_tracker_dying_mid_study_is_a_warning(cli, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")

    def dead(self, record):
        raise ConnectionError("tracking server went away")

    monkeypatch.setattr(Tracker, "log_record", dead)
    rc, out, err = cli("run", "--quiet", capsys=capsys)
    assert rc == 0 and "2 runs finished" in out  # exit status 0: tracking never fails a study
    assert sum("tracking server went away" in w for w in warnings(err)) == 2
    assert "warning: 2 records could not be logged to MLflow" in err and "sabo-bench track synthetic" in err
    rc, out, err = cli("run-one", "--seed", "0", "--quiet", capsys=capsys)
    assert rc == 0 and "1 records could not be logged" in err
    rc, out, err = cli("track", capsys=capsys)
    assert rc == 1 and "2 records could not be logged" in err
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    rc, out, _ = cli("track", capsys=capsys)
    assert rc == 0 and "2 records logged" in out


def test_safe_logger_stops_trying_a_dead_tracker(capsys):
    from replication.cli import SafeLogger

    class Dead:
        calls = 0

        def log_record(self, record):
            Dead.calls += 1
            raise OSError("gone")

    logger = SafeLogger(Dead(), "later")
    for i in range(10):
        assert logger({"config_hash": str(i)}) is None
    logger.summarize()
    err = capsys.readouterr().err
    assert Dead.calls == SafeLogger.MAX_FAILURES_IN_A_ROW and logger.failures == 10
    assert len(warnings(err)) == SafeLogger.MAX_FAILURES_IN_A_ROW + 1 and "10 records" in err


def test_names_with_quotes_are_found_exactly(tmp_path):
    tracker = Tracker(f"sqlite:///{tmp_path}/mlflow.db")
    exp = tracker._experiment_id("synthetic")
    names = ["plain", "o'brien", 'say "hi"', "back\\slash", "ends\\", "all'\"\\", "a%b", "a_b", "A'B", "a'b"]
    ids = {n: tracker._find_or_create(exp, n, None, level="setting", setting=n) for n in names}
    assert len(set(ids.values())) == len(names)  # no name matched another (LIKE wildcards, case)
    for n in names:
        assert [r.info.run_id for r in tracker._find(exp, level="setting", setting=n)] == [ids[n]]
        assert tracker._find_or_create(exp, n, None, level="setting", setting=n) == ids[n]

    # RunConfig refuses quotes in names now; a record's hash is read as it is, so it may hold them
    recs = records(tmp_path, n_seeds=2, methods=("ingo",))
    for i, r in enumerate(recs):
        r["config_hash"] = f"{r['config_hash']}'\"{i}\\"
    assert all(tracker.log_record(r) for r in recs)
    assert not any(tracker.log_record(r) for r in recs)  # idempotent: the quoted hashes are found
    assert all(tracker.is_logged(r) for r in recs)
    group = runs_by_level(tracker.client, exp)["group"]
    assert len(group) == 1 and group[0].data.metrics["n_seeds"] == 2
