"""The run engine: records, idempotency, resumption after SIGKILL, atomic writes, divergence."""
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import checkpoint_of, deterministic_part, small_config

from replication.config import RunConfig
from replication.curve import log_grid
from replication.engine import checkpoint_path, execute, files_path, record_path, record_paths
from replication.storage import read_state, write_json, write_state


def test_record_holds_config_curve_stats_and_provenance(tmp_path):
    cfg = small_config("sabo", T=150)
    rec = execute(cfg, tmp_path)
    assert rec["config"] == cfg.to_dict() and rec["config_hash"] == cfg.hash
    res = rec["result"]
    curve = res["curve"]
    assert curve["nit"][0] == 0 and curve["nfev"][0] == 0 and curve["nit"][-1] == 150
    assert curve["nit"][1:] == log_grid(150)
    assert all(nfev == nit * res["evals_per_iteration"] for nit, nfev in zip(curve["nit"], curve["nfev"]))
    assert res["evals_per_iteration"] == 20
    x0 = np.random.default_rng(cfg.problem_seed()).uniform(0, 1, 20)
    assert curve["error"][0] == pytest.approx(np.linalg.norm(x0))
    assert res["final"]["error"] == curve["error"][-1] < curve["error"][0]
    assert {"safeguard_perturbation", "safeguard_update"} <= set(res["stats"])
    prov = rec["provenance"]
    assert {"versions", "git_revision", "wall_time_s", "started_utc", "finished_utc", "resumed"} <= set(prov)
    assert prov["versions"]["numpy"] == np.__version__ and prov["resumed"] == 0
    assert json.loads(record_path(tmp_path, cfg).read_text()) == rec


def test_record_keeps_wall_times_in_milliseconds_and_the_time_of_each_curve_point(tmp_path):
    before = time.time()
    rec = execute(small_config("ingo", T=80), tmp_path)
    after = time.time()
    prov = rec["provenance"]
    started, finished = (datetime.fromisoformat(prov[k]).timestamp() for k in ("started_utc", "finished_utc"))
    assert "." in prov["started_utc"] and "." in prov["finished_utc"]  # ms, not whole seconds (MLflow's unit)
    assert before - 1e-3 <= started <= finished <= after + 1e-3
    stamps = prov["curve_time_unix_s"]
    assert len(stamps) == len(rec["result"]["curve"]["nit"])
    assert stamps == sorted(stamps) and started - 1e-3 <= stamps[0] and stamps[-1] <= finished + 1e-3


@pytest.mark.parametrize("old_checkpoint", [False, True])
def test_a_resumed_run_keeps_the_times_of_its_earlier_curve_points(tmp_path, old_checkpoint):
    cfg = small_config("ingo", T=80)
    ckpt = checkpoint_of(cfg, tmp_path, iters=40)
    state = read_state(ckpt)
    saved = state["curve_time_unix_s"]
    n = len(state["curve"]["columns"]["nit"])
    assert len(saved) == n and all(isinstance(t, float) for t in saved)
    if old_checkpoint:  # written before the engine kept the times: those points' times are unknown
        del state["curve_time_unix_s"]
        write_state(ckpt, state)
    rec = execute(cfg, tmp_path)
    assert rec["provenance"]["resumed"] == 1
    stamps = rec["provenance"]["curve_time_unix_s"]
    assert len(stamps) == len(rec["result"]["curve"]["nit"]) > n
    assert stamps[:n] == ([None] * n if old_checkpoint else saved)
    assert stamps[n:] == sorted(stamps[n:]) and stamps[n] >= saved[-1]


def test_a_checkpoint_with_malformed_point_times_is_recomputed(tmp_path, capsys):
    cfg = small_config("ingo", T=80)
    ckpt = checkpoint_of(cfg, tmp_path, iters=40)
    state = read_state(ckpt)
    state["curve_time_unix_s"] = state["curve_time_unix_s"][:-1]
    write_state(ckpt, state)
    rec = execute(cfg, tmp_path)
    assert rec["provenance"]["resumed"] == 0 and "curve_time_unix_s" in capsys.readouterr().err


def test_record_paths_lists_the_records_and_not_what_a_problem_wrote_beside_them(tmp_path):
    """A run's own files (:func:`files_path`, e.g. COCO's) may hold JSON; a runs directory inside a folder whose
    name ends in ``.files`` still lists its records."""
    runs = tmp_path / "old.files" / "runs"
    a, b = small_config("sabo", T=3), small_config("ingo", T=3)
    for cfg in (a, b):
        write_json(record_path(runs, cfg), {})
    files_path(runs, a).mkdir()
    write_json(files_path(runs, a) / "observer.json", {})
    assert record_paths(runs) == sorted([record_path(runs, a), record_path(runs, b)])
    assert record_paths(runs / "synthetic" / a.setting / "sabo") == [record_path(runs, a)]


def test_a_deleted_record_comes_back_from_its_second_name_without_computing(tmp_path, capsys):
    """DVC experiments delete the records dvc.lock does not list (tests/test_pipeline.py runs one); each record
    also has a name outside the stages' outputs, from which a run gets it back. A bad kept copy is deleted, and
    the run computes the record anew (and keeps that)."""
    from replication.engine import kept_path

    cfg = small_config("ingo", T=40)
    record = execute(cfg, tmp_path)
    path, kept = record_path(tmp_path, cfg), kept_path(tmp_path, cfg)
    assert kept.read_bytes() == path.read_bytes() and os.path.samefile(kept, path)  # a link: no second copy
    data = path.read_bytes()
    path.unlink()
    assert execute(cfg, tmp_path) == record and path.read_bytes() == data  # the same record, not a new run
    path.unlink()
    kept.unlink()
    kept.write_text("{garbled")
    again = execute(cfg, tmp_path)
    assert deterministic_part(again) == deterministic_part(record)
    assert again["provenance"]["started_utc"] != record["provenance"]["started_utc"]  # computed anew
    assert os.path.samefile(kept, path)


def test_records_from_before_they_were_kept_are_kept_by_the_next_study(tmp_path):
    from replication.engine import kept_path
    from replication.executors import run_configs

    cfg = small_config("ingo", T=20)
    execute(cfg, tmp_path)
    kept_path(tmp_path, cfg).unlink()  # as an older sabo-bench left it
    run_configs([cfg], tmp_path, progress=False)
    assert os.path.samefile(kept_path(tmp_path, cfg), record_path(tmp_path, cfg))


def test_finished_run_is_not_redone(tmp_path):
    cfg = small_config("ingo", T=50)
    first = execute(cfg, tmp_path)
    path = record_path(tmp_path, cfg)
    stamp = path.stat().st_mtime_ns
    assert execute(cfg, tmp_path) == first
    assert path.stat().st_mtime_ns == stamp


def test_same_problem_seed_for_every_method_and_distinct_optimizer_seeds():
    a, b = small_config("sabo"), small_config("ingo")
    assert a.problem_seed() == b.problem_seed()
    assert a.optimizer_seed() != b.optimizer_seed()
    assert small_config("sabo", seed=1).problem_seed() != a.problem_seed()
    assert RunConfig.from_dict(a.to_dict()).hash == a.hash


def test_a_method_revision_reruns_only_that_methods_runs(monkeypatch):
    """Bumping MMES's ``revision`` changes the identity of MMES runs (including runs under another label
    with ``optimizer: mmes``) and of no other method's."""
    import baselines
    from replication.image.study import configs

    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    params["image"]["methods"]["mmes_variant"] = {"optimizer": "mmes"}
    before = {c.hash: c for c in configs(params)}
    monkeypatch.setattr(baselines.REGISTRY["mmes"], "revision", baselines.REGISTRY["mmes"].revision + 1)
    changed = {c.method for c in configs(params) if c.hash not in before}
    unchanged = {c.method for c in before.values()} - changed
    assert changed == {"mmes", "mmes_variant"} and {"sabo", "ingo", "cmaes", "bes"} <= unchanged


def test_overflowing_objective_ends_the_run_as_diverged(tmp_path, monkeypatch):
    """An objective that returns inf (here from its 30th call on) is a result, not a crash."""
    import replication.synthetic.study as study

    build = study.make_problem

    def overflowing(config):
        problem = build(config)
        f, calls = problem.objective, []

        def objective(X):
            calls.append(1)
            return f(X) if len(calls) < 30 else np.full(X.shape[0], np.inf)

        problem.objective = objective
        return problem

    monkeypatch.setattr(study, "make_problem", overflowing)
    rec = execute(small_config("ingo", T=400), tmp_path)
    assert rec["result"]["status"] == "diverged"
    assert "non-finite values" in rec["result"]["message"]
    assert rec["result"]["curve"]["nit"][-1] == 29 == rec["result"]["final"]["nit"]


KILLABLE = """
import sys
sys.path.insert(0, {tests!r})
from helpers import small_config
from replication.engine import execute
execute(small_config("sabo", dim=30, T=20000), {runs!r}, checkpoint_every_iters=200)
"""


def test_run_killed_with_sigkill_resumes_to_the_same_record(tmp_path):
    cfg = small_config("sabo", dim=30, T=20000)
    killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
    script = KILLABLE.format(tests=os.path.dirname(__file__), runs=str(killed_dir))
    proc = subprocess.Popen([sys.executable, "-c", script])
    ckpt = checkpoint_path(killed_dir, cfg)
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    time.sleep(0.3)  # let it get past the first checkpoint
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert ckpt.exists() and not record_path(killed_dir, cfg).exists()
    resumed = execute(cfg, killed_dir)
    assert resumed["provenance"]["resumed"] == 1
    assert not ckpt.exists()
    uninterrupted = execute(cfg, clean_dir)
    assert deterministic_part(resumed) == deterministic_part(uninterrupted)


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    write_json(target, {"v": 1})

    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        write_json(target, {"v": 2})
    assert json.loads(target.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_only_the_constructors_refusal_of_a_value_is_a_usage_error(tmp_path, monkeypatch):
    """A value the optimizer refuses is the user's mistake (UsageError, one line); a plugin that cannot be loaded is
    not a parameter problem: the run failed (RunFailed, one line with the plugin's message)."""
    import baselines
    from replication.errors import RunFailed, UsageError

    with pytest.raises(UsageError, match=r"^run synthetic/d20_N10/ellipsoid/ingo/seed0: method 'ingo' \(optimizer "
                                          r"'ingo'\) refuses its parameters: lr must be > 0 \(got -1.0\)$"):
        execute(small_config("ingo", lr=-1.0), tmp_path)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))

    def unloadable(name):
        raise baselines.PluginError(f"optimizer plugin {name!r} cannot be loaded")

    monkeypatch.setattr(baselines, "resolve", unloadable)
    with pytest.raises(RunFailed, match="failed: PluginError: optimizer plugin 'ingo' cannot be loaded") as caught:
        execute(small_config("ingo", seed=1), tmp_path)
    assert not isinstance(caught.value, UsageError)


def test_check_parameters_refuses_a_value_before_any_problem_is_built(monkeypatch):
    """The executors' pre-check: the run's own message, one optimizer built per distinct parameters, no problem
    built (the prompt study's would load a model), a ``device`` built on the CPU (no CUDA context in the parent)."""
    import baselines
    from replication.engine import check_parameters
    from replication.errors import UsageError
    from replication.studies import get_study

    def no_problem(config):
        raise AssertionError("check_parameters built a problem")

    monkeypatch.setattr(get_study("synthetic"), "make_problem", no_problem)
    with pytest.raises(UsageError, match=r"^run synthetic/d20_N10/ellipsoid/ingo/seed1: method 'ingo' \(optimizer "
                                          r"'ingo'\) refuses its parameters: lr must be > 0 \(got -1.0\)$"):
        check_parameters([small_config("sabo"), small_config("ingo", seed=1, lr=-1.0)])
    built = []
    make = baselines.make
    monkeypatch.setattr(baselines, "make", lambda name, **kw: built.append((name, kw["x0"].size, kw.get("device")))
                        or make(name, **kw))
    check_parameters([small_config("sabo"), small_config("sabo"), small_config("ingo", dim=7, popsize=4),
                      small_config("gibo", popsize=4, device="cuda:7")])
    assert built == [("sabo", 20, None), ("ingo", 7, None), ("gibo", 20, "cpu")]


def test_check_parameters_builds_at_the_runs_x0_and_leaves_missing_packages_to_remote_workers(monkeypatch):
    """At the run's own x0 (a bound that holds there but not at 0 is no refusal); on a Ray cluster whose nodes may
    have a package this process lacks, a missing package is not a refusal."""
    import baselines
    from replication.engine import check_parameters
    from replication.errors import PackageUnavailable
    from replication.studies import get_study

    config = small_config("sabo")
    seen = []
    make = baselines.make
    monkeypatch.setattr(baselines, "make", lambda name, **kw: seen.append(kw["x0"]) or make(name, **kw))
    check_parameters([config])
    np.testing.assert_array_equal(seen[0], get_study("synthetic").make_problem(config).x0)
    assert seen[0].min() > 0  # mu0 ~ U[0, 1]^d, not 0

    def missing(name, **kw):
        raise ImportError("TuRBO-1 needs PyTorch, GPyTorch and BoTorch (No module named 'botorch')")

    monkeypatch.setattr(baselines, "make", missing)
    check_parameters([config], packages_here=False)
    with pytest.raises(PackageUnavailable, match=r"method 'sabo' \(optimizer 'sabo'\) cannot run here: TuRBO-1 needs"):
        check_parameters([config])


def test_a_study_whose_x0_disagrees_with_its_problem_is_stopped(tmp_path, monkeypatch):
    """check_parameters builds the optimizers at ``Study.x0``: a study whose problem starts elsewhere would have had
    its values checked at the wrong point."""
    from replication.errors import RunFailed
    from replication.studies import get_study

    monkeypatch.setattr(get_study("synthetic"), "x0", lambda config: np.zeros(20))
    with pytest.raises(RunFailed, match=r"failed: RuntimeError: study 'synthetic' breaks its contract: its "
                                        r"x0\(config\) is not its problem's x0"):
        execute(small_config("sabo"), tmp_path)


def test_a_run_whose_resources_are_missing_leaves_no_lock_file(tmp_path, monkeypatch):
    """The image study without Fashion-MNIST, the prompt study without its model: the run cannot start here, and
    `sabo-bench list` must not find a lock file of a run that never ran."""
    from replication.errors import ResourceUnavailable
    from replication.studies import get_study

    def missing(config):
        raise ResourceUnavailable("the data set is not here")

    monkeypatch.setattr(get_study("synthetic"), "make_problem", missing)
    with pytest.raises(ResourceUnavailable, match="not here"):
        execute(small_config("sabo"), tmp_path)
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_a_place_that_warns_every_iteration_shows_once_then_a_count(tmp_path, monkeypatch, recwarn, capsys):
    """pycma's step-size adaptation warns once an iteration, each text new (its time and iteration): a run
    shows the first and one line counting the rest, not one line per iteration; other places still show."""
    import warnings

    from baselines.ingo import INGO

    tell = INGO.tell

    def noisy_tell(self, X, values):
        warnings.warn(f"sigma vanished at iteration {self.nit}", UserWarning, stacklevel=1)  # a new text each time
        return tell(self, X, values)

    monkeypatch.setattr(INGO, "tell", noisy_tell)
    cfg = small_config("ingo", T=12)
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        execute(cfg, tmp_path)
        warnings.warn("after the run", UserWarning, stacklevel=1)
    shown = [str(w.message) for w in recwarn.list]
    assert shown == ["sigma vanished at iteration 0", "after the run"]
    assert f"{cfg.label}: 11 more UserWarning like the one above from {__file__}:" in capsys.readouterr().err
