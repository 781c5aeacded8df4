"""The run engine as an operator meets it: hostile or broken files in runs/, locks, file modes."""
import json
import os
import pickle
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
from filelock import FileLock
from helpers import checkpoint_of, deterministic_part, small_config

from replication.engine import RunBusy, checkpoint_path, execute, load_record, lock_path, record_path, record_status
from replication.storage import QUARANTINE_MARK, quarantined_files, read_state, write_json, write_state


class Payload:
    """Unpickling this creates a marker file: proof that code from the runs directory ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_crafted_pickle_checkpoint_never_executes(tmp_path, capsys):
    cfg = small_config("sabo", T=60)
    marker = tmp_path / "pwned"
    ckpt = checkpoint_path(tmp_path / "runs", cfg)
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(pickle.dumps({"optimizer": Payload(marker)}))
    record = execute(cfg, tmp_path / "runs")
    assert not marker.exists()
    assert deterministic_part(record) == deterministic_part(execute(cfg, tmp_path / "fresh"))
    assert record["provenance"]["resumed"] == 0
    [moved] = quarantined_files(tmp_path / "runs")
    assert moved.name.startswith(ckpt.name + QUARANTINE_MARK)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(ckpt) in err[0] and "recomputed" in err[0]


def test_checkpoint_is_plain_data_and_resumes_to_the_same_record(tmp_path):
    cfg = small_config("sabo", T=120)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=50)
    state = read_state(ckpt)
    assert state["config_hash"] == cfg.hash and state["config"] == cfg.to_dict()
    assert state["curve"]["columns"]["nit"][-1] <= 50
    resumed = execute(cfg, tmp_path / "runs")
    assert resumed["provenance"]["resumed"] == 1
    assert deterministic_part(resumed) == deterministic_part(execute(cfg, tmp_path / "fresh"))
    assert not ckpt.exists()


def test_another_runs_checkpoint_is_not_resumed(tmp_path):
    """An INGO checkpoint copied onto a SABO run's path: moved aside, SABO computed from scratch."""
    ingo, sabo = small_config("ingo", T=80), small_config("sabo", T=80)
    source = checkpoint_of(ingo, tmp_path / "runs", iters=40)
    target = checkpoint_path(tmp_path / "runs", sabo)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    record = execute(sabo, tmp_path / "runs")
    assert record["config"]["method"] == "sabo" and record["provenance"]["resumed"] == 0
    assert deterministic_part(record) == deterministic_part(execute(sabo, tmp_path / "fresh"))
    assert any(p.name.startswith(target.name) for p in quarantined_files(tmp_path / "runs"))


def test_a_checkpoint_with_another_config_under_the_right_name_is_not_resumed(tmp_path):
    """Same file name, but the stored config differs (e.g. edited): the hash check refuses it."""
    cfg = small_config("ingo", T=80)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=40)
    other = small_config("ingo", T=80, lr=0.2)
    os.replace(ckpt, checkpoint_path(tmp_path / "runs", other))
    record = execute(other, tmp_path / "runs")
    assert record["provenance"]["resumed"] == 0
    assert deterministic_part(record) == deterministic_part(execute(other, tmp_path / "fresh"))


def test_another_runs_record_is_not_returned(tmp_path):
    ingo, sabo = small_config("ingo", T=40), small_config("sabo", T=40)
    foreign = execute(ingo, tmp_path / "runs")
    write_json(record_path(tmp_path / "runs", sabo), foreign)
    assert record_status(tmp_path / "runs", sabo) == "corrupt"
    record = execute(sabo, tmp_path / "runs")
    assert record["config_hash"] == sabo.hash and record["config"]["method"] == "sabo"


@pytest.mark.parametrize("kind", ["record", "checkpoint"])
@pytest.mark.parametrize("damage", ["truncated", "empty", "garbled"])
def test_a_damaged_file_is_moved_aside_and_the_run_recomputed(tmp_path, capsys, kind, damage):
    cfg = small_config("ingo", T=60)
    runs = tmp_path / "runs"
    if kind == "record":
        execute(cfg, runs)
        path = record_path(runs, cfg)
    else:
        path = checkpoint_of(cfg, runs, iters=30)
    data = path.read_bytes()
    path.write_bytes({"truncated": data[: len(data) // 2], "empty": b"",
                      "garbled": bytes(b ^ 0x5A for b in data)}[damage])
    capsys.readouterr()
    record = execute(cfg, runs)
    assert deterministic_part(record) == deterministic_part(execute(cfg, tmp_path / "fresh"))
    [moved] = quarantined_files(runs)
    assert moved.name.startswith(path.name + QUARANTINE_MARK)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]
    assert load_record(runs, cfg) == record


def test_stale_temporary_files_are_removed(tmp_path):
    cfg = small_config("ingo", T=30)
    rec = record_path(tmp_path, cfg)
    rec.parent.mkdir(parents=True)
    stale = [rec.parent / f".{rec.name}.abc123.tmp", rec.parent / f".{checkpoint_path(tmp_path, cfg).name}.x.tmp"]
    for path in stale:
        path.write_bytes(b"half a file")
    unrelated = rec.parent / ".0123456789abcdef.json.zzz.tmp"
    unrelated.write_bytes(b"another run's, possibly being written")
    execute(cfg, tmp_path)
    assert not any(p.exists() for p in stale) and unrelated.exists()


def test_a_run_held_by_another_process_is_not_computed(tmp_path):
    cfg = small_config("ingo", T=30)
    lock = lock_path(tmp_path, cfg)
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from filelock import FileLock\n"
        f"with FileLock({str(lock)!r}):\n    print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunBusy):
            execute(cfg, tmp_path, wait_for_lock=False)
        assert not record_path(tmp_path, cfg).exists()
    finally:
        holder.kill()
        holder.wait()
    assert execute(cfg, tmp_path, wait_for_lock=False)["config_hash"] == cfg.hash  # released with the process


WAITER = """
import sys
sys.path.insert(0, {tests!r})
from helpers import small_config
from replication.executors import run_configs
configs = [small_config("ingo", T=30), small_config("ingo", T=30, seed=1)]
run_configs(configs, {runs!r}, progress=False)
print("done", flush=True)
"""


def test_a_second_study_skips_held_runs_then_waits_for_them(tmp_path):
    held, free = small_config("ingo", T=30), small_config("ingo", T=30, seed=1)
    lock = FileLock(lock_path(tmp_path, held))
    lock_path(tmp_path, held).parent.mkdir(parents=True)
    with lock:
        proc = subprocess.Popen([sys.executable, "-c", WAITER.format(tests=os.path.dirname(__file__),
                                                                     runs=str(tmp_path))],
                                stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while load_record(tmp_path, free) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert load_record(tmp_path, free) is not None  # the free run went ahead
        time.sleep(0.5)
        assert proc.poll() is None and load_record(tmp_path, held) is None  # the held one waits
    assert proc.communicate(timeout=60)[0].strip() == "done" and proc.returncode == 0
    assert load_record(tmp_path, held)["config_hash"] == held.hash


def test_files_get_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    os.umask(old)
    cfg = small_config("ingo", T=20)
    checkpoint_of(cfg, tmp_path, iters=10)
    ckpt_mode = stat.S_IMODE(checkpoint_path(tmp_path, cfg).stat().st_mode)
    execute(cfg, tmp_path)
    mode = stat.S_IMODE(record_path(tmp_path, cfg).stat().st_mode)
    assert mode == ckpt_mode == 0o666 & ~old
    assert mode & stat.S_IRGRP  # with the usual umask 022, the group can read a shared runs/


def test_record_json_is_plain_data(tmp_path):
    cfg = small_config("sabo", T=20)
    execute(cfg, tmp_path)
    record = json.loads(record_path(tmp_path, cfg).read_text())
    assert record["config_hash"] == cfg.hash and np.isfinite(record["result"]["final"]["error"])


def test_problem_state_names_no_arbitrary_generator():
    """A checkpoint's problem state may only name one of NumPy's bit generators."""
    from replication.image.objective import MiniBatchObjective

    rng = np.random.default_rng(0)
    obj = MiniBatchObjective(rng.normal(size=(40, 3)), rng.integers(0, 10, 40), batch_size=8, seed=1)
    state = obj.get_state()
    for name in ("seed", "RandomState", "__import__"):
        with pytest.raises(ValueError, match="bit_generator"):
            obj.set_state({**state, "bit_generator": name})
    with pytest.raises(ValueError, match="n_calls"):
        obj.set_state({**state, "n_calls": -1})
    obj.set_state(state)


def test_the_problem_is_built_once_unless_a_restore_failed(tmp_path, monkeypatch):
    import replication.synthetic.study as study

    build, calls = study.make_problem, []
    monkeypatch.setattr(study, "make_problem", lambda config: calls.append(1) or build(config))
    cfg = small_config("ingo", T=30)
    execute(cfg, tmp_path / "a")
    assert len(calls) == 1
    ckpt = checkpoint_path(tmp_path / "b", cfg)
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"garbage")
    calls.clear()
    execute(cfg, tmp_path / "b")
    assert len(calls) == 2  # rebuilt after the failed restore


def test_an_evaluation_budget_run_of_mmes_resumes_to_the_same_curve(tmp_path):
    """MMES's first iteration evaluates x0 too (N + 1 rows, N afterwards): the curve's grid, which a
    ``max_evals`` budget derives from the evaluations per iteration, must be the one the run started with."""
    cfg = small_config("mmes", max_evals=10 * 91)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=40)
    assert read_state(ckpt)["max_iter"] == 10 * 91 // 11
    resumed = execute(cfg, tmp_path / "runs")
    assert resumed["provenance"]["resumed"] == 1
    fresh = execute(cfg, tmp_path / "fresh")
    assert resumed["result"]["curve"]["nit"] == fresh["result"]["curve"]["nit"]
    assert deterministic_part(resumed) == deterministic_part(fresh)


def test_a_checkpoints_max_iter_cannot_stretch_a_run(tmp_path, capsys):
    """An iteration budget comes from the config alone; an evaluation budget's grid length is bounded by it."""
    cfg = small_config("sabo", T=60)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=20)
    write_state(ckpt, {**read_state(ckpt), "max_iter": 10**6})
    record = execute(cfg, tmp_path / "runs")
    assert record["provenance"]["resumed"] == 1 and record["result"]["curve"]["nit"][-1] == 60
    assert deterministic_part(record) == deterministic_part(execute(cfg, tmp_path / "fresh"))

    cfg = small_config("mmes", max_evals=500)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=20)
    write_state(ckpt, {**read_state(ckpt), "max_iter": 501})
    record = execute(cfg, tmp_path / "runs")
    assert record["provenance"]["resumed"] == 0
    assert "max_iter must be an integer in [0, 500]" in capsys.readouterr().err


@pytest.mark.parametrize("method, resumed", [("sabo", 1), ("mmes", 0)])
def test_an_evaluation_budget_checkpoint_from_before_max_iter_was_kept(tmp_path, method, resumed):
    """Without the key the grid is recomputed from the restored optimizer: right where every iteration has the
    same size (resumed), a curve on another grid for MMES (quarantined and recomputed, never mixed)."""
    cfg = small_config(method, max_evals=10 * 91)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=40)
    write_state(ckpt, {k: v for k, v in read_state(ckpt).items() if k != "max_iter"})
    record = execute(cfg, tmp_path / "runs")
    assert record["provenance"]["resumed"] == resumed
    assert deterministic_part(record) == deterministic_part(execute(cfg, tmp_path / "fresh"))


def test_a_checkpoint_whose_curve_is_not_on_its_grid_is_recomputed(tmp_path, capsys):
    cfg = small_config("mmes", max_evals=10 * 91)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=40)
    write_state(ckpt, {**read_state(ckpt), "max_iter": 300})
    record = execute(cfg, tmp_path / "runs")
    assert record["provenance"]["resumed"] == 0
    assert "are not those of the grid for 300 iterations" in capsys.readouterr().err
    assert deterministic_part(record) == deterministic_part(execute(cfg, tmp_path / "fresh"))
