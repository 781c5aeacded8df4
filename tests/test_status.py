"""`sabo-bench status` (replication.status): how far each study is and its ETA, read without changing any file."""
import json
import re

import pytest
import yaml
from filelock import FileLock
from helpers import checkpoint_of, tiny_params

from replication.cli import main
from replication.engine import lock_path, record_path
from replication.executors import run_configs
from replication.params import validate_params
from replication.status import lock_held, pipeline_status
from replication.synthetic import study as synthetic

TINY = tiny_params()


def tiny_configs():
    params = json.loads(json.dumps(TINY))
    validate_params(params, studies=["synthetic"])
    return synthetic.configs(params)  # d10_N6 x (ellipsoid, levy) x (sabo, ingo) x seeds 0, 1


def snapshot(directory):
    """Every path under ``directory`` with its size and modification time."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(directory.rglob("*"))}


def test_lock_held_tells_a_held_lock_from_a_left_one_and_writes_nothing(tmp_path):
    path = tmp_path / "run.lock"
    assert not lock_held(path) and not path.exists()    # absent: not created by the test
    held = FileLock(path)
    held.acquire()
    try:
        before = snapshot(tmp_path)
        assert lock_held(path)
        assert snapshot(tmp_path) == before
    finally:
        held.release()
    path.write_bytes(b"")                                # a killed run's leftover locks nothing
    assert not lock_held(path)
    assert FileLock(path).acquire(timeout=0)             # and the test did not keep it


def test_the_eta_schedules_each_stage_on_the_workers_from_the_measured_rates(tmp_path):
    """Seed 0's four runs recorded, SABO's at 10 s each and INGO's at 2 s (rewritten wall times; all runs of a method
    cost the same here). Seed 1's four runs are left, in two stages (setting, method) run one after the other: on
    2 workers 10 s + 2 s, on 1 worker 20 s + 4 s."""
    configs = tiny_configs()
    done = [c for c in configs if c.seed == 0]
    run_configs(done, tmp_path, progress=False)
    for config in done:
        path = record_path(tmp_path, config)
        record = json.loads(path.read_text())
        record["provenance"]["wall_time_s"] = 10.0 if config.method == "sabo" else 2.0
        path.write_text(json.dumps(record))
    [status] = pipeline_status({"synthetic": ("tiny", configs)}, tmp_path, workers=2)
    assert (status.recorded, status.total, status.pending, status.running, status.partial) == (4, 8, 4, [], 0)
    assert status.seconds_left == pytest.approx(12.0)
    [status] = pipeline_status({"synthetic": ("tiny", configs)}, tmp_path, workers=1)
    assert status.seconds_left == pytest.approx(24.0)
    # a study without a record of its own is predicted from the others' rates (the cost estimates share one unit)
    params = tiny_params()
    params["synthetic"]["settings"] = {"d10_N6": {"dim": 12, "popsize": 6}}
    validate_params(params, studies=["synthetic"])
    other = synthetic.configs(params)
    [_, borrowing] = pipeline_status({"synthetic": ("tiny", configs), "other": ("tiny", other)}, tmp_path, workers=2)
    assert borrowing.borrowed and borrowing.recorded == 0 and borrowing.seconds_left > 0
    [empty] = pipeline_status({"synthetic": ("tiny", configs)}, tmp_path / "nothing", workers=2)
    assert empty.seconds_left is None and empty.pending == 8 and not empty.borrowed


def test_a_running_runs_checkpoint_gives_an_eta_before_any_run_has_finished(tmp_path):
    """No record yet: the running run's checkpoint (its seconds over its share done) predicts its own stage and,
    through its method's rate, the other stages' runs."""
    configs = tiny_configs()
    running = configs[0]
    checkpoint_of(running, tmp_path, iters=15)
    with FileLock(lock_path(tmp_path, running)):
        [status] = pipeline_status({"synthetic": ("tiny", configs)}, tmp_path, workers=2)
    assert status.recorded == 0 and [r.config for r in status.running] == [running]
    assert status.running[0].fraction == pytest.approx(0.5) and status.seconds_left > 0


def test_status_names_the_running_and_interrupted_runs_and_changes_nothing(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(TINY))
    runs = tmp_path / "runs"
    configs = tiny_configs()
    run_configs([c for c in configs if c.seed == 0], runs, progress=False)
    interrupted, running, held_long = [c for c in configs if c.seed == 1][:3]
    checkpoint_of(interrupted, runs, iters=10)                 # partial: a checkpoint, no process
    checkpoint_of(running, runs, iters=15)                     # a checkpoint and a process holding its lock
    held = [FileLock(lock_path(runs, c)) for c in (running, held_long)]
    for lock in held:
        lock.acquire()
    try:
        before = snapshot(runs)
        assert main(["status", "--params", str(params), "--runs-dir", str(runs)]) == 0
        assert snapshot(runs) == before
    finally:
        for lock in held:
            lock.release()
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"synthetic \(profile tiny\): 4/8 runs recorded \(4 completed\), 2 running, 1 partial "
                        r"\(interrupted\), 1 pending, ETA \d\d:\d\d", out[0]), out[0]
    running_lines = sorted(line for line in out if line.startswith("  running: "))
    expected = sorted([f"  running: {running.label} [{running.hash}] (50% of its work at its last checkpoint, ",
                       f"  running: {held_long.label} [{held_long.hash}] (no checkpoint yet)"])
    assert [line[:len(e)] for line, e in zip(running_lines, expected)] == expected
    assert out[-1].startswith("all: 4/8 runs recorded; ETA ")


def test_status_refuses_an_unknown_study_and_a_profile_for_several(tmp_path, capsys):
    assert main(["status", "nosuch"]) == 2
    assert capsys.readouterr().err == ("error: study 'nosuch': no such study (studies: bbob, image, prompt, "
                                       "synthetic)\n")
    assert main(["status", "--profile", "quick"]) == 2
    assert "name one study with it" in capsys.readouterr().err


def test_the_executors_seconds_per_run_come_from_the_latest_session():
    """Two workers, four runs of 1 s measured, over 2.5 s: 1 s of the slots' 5 s went to the executor (0.25 s a run).
    An earlier session (a pause of over SESSION_GAP_S) does not count; fewer than 2 workers' runs tell nothing."""
    from replication.status import SESSION_GAP_S, executor_seconds

    session = [(1000.0, 1001.0, 1.0), (1000.0, 1001.0, 1.0), (1001.5, 1002.5, 1.0), (1001.5, 1002.5, 1.0)]
    assert executor_seconds(session, 2) == (1.0, 4)
    earlier = [(0.0, 50.0, 1.0), (0.0, 900.0 - SESSION_GAP_S, 1.0)]      # mostly idle, then a pause
    assert executor_seconds(earlier + session, 2) == (1.0, 4)
    assert executor_seconds(session[:3], 2) == (0.0, 0)
