"""The run engine as an operator meets it: hostile or broken files in runs/, locks, file modes."""
import itertools
import json
import os
import pickle
import re
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
from filelock import FileLock
from helpers import checkpoint_of, deterministic_part, small_config

from replication.engine import (
    RunBusy,
    checkpoint_path,
    execute,
    kept_path,
    load_record,
    lock_path,
    record_path,
    record_status,
)
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


@pytest.mark.parametrize("method,dim,T", [("sabo", 20, 120), ("cmaes", 20, 120), ("cmaes", 300, 30)])  # d >= 300: TPA
def test_checkpoint_is_plain_data_and_resumes_to_the_same_record(tmp_path, method, dim, T):
    """The run resumed from a mid-run checkpoint (plain data) ends with the uninterrupted run's record; CMA-ES's
    checkpoint holds no pycma state, only the values told, which restoring replays."""
    cfg = small_config(method, dim=dim, T=T)
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=T // 2)
    state = read_state(ckpt)
    assert state["config_hash"] == cfg.hash and state["config"] == cfg.to_dict()
    assert state["curve"]["columns"]["nit"][-1] <= T // 2
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


def interrupted_ellipsoid(at_call: int, before=None):
    """The ellipsoid, raising KeyboardInterrupt (Ctrl-C) at its ``at_call``-th evaluation, after ``before()``."""
    from replication.synthetic.functions import FUNCTIONS

    ellipsoid, optimum = FUNCTIONS["ellipsoid"]
    calls = itertools.count(1)

    def objective(X):
        if next(calls) == at_call:
            if before is not None:
                before()
            raise KeyboardInterrupt
        return ellipsoid(X)

    return objective, optimum


def test_an_interrupted_run_removes_its_lock_file_and_resumes(tmp_path, monkeypatch):
    """Ctrl-C inside a run (a KeyboardInterrupt from its objective): its lock file goes with it (two empty ``.lock``
    files stayed in a runs directory after an interrupted stage), its checkpoint stays, and the run resumes to the
    record of an uninterrupted one."""
    from replication.synthetic.functions import FUNCTIONS

    cfg = small_config("ingo", dim=6, T=40)
    with monkeypatch.context() as patched:
        patched.setitem(FUNCTIONS, "ellipsoid", interrupted_ellipsoid(25))
        with pytest.raises(KeyboardInterrupt):
            execute(cfg, tmp_path / "runs", checkpoint_every_s=1e9, checkpoint_every_iters=10)
    assert checkpoint_path(tmp_path / "runs", cfg).exists() and not lock_path(tmp_path / "runs", cfg).exists()
    assert not list(tmp_path.rglob("*.lock"))
    record = execute(cfg, tmp_path / "runs")
    assert record["provenance"]["resumed"] == 1
    assert deterministic_part(record) == deterministic_part(execute(cfg, tmp_path / "fresh"))
    assert not list(tmp_path.rglob("*.lock"))


WAIT_FOR_IT = """
import sys
sys.path.insert(0, {tests!r})
from helpers import small_config
from replication.engine import execute
print("waiting", flush=True)
print(execute(small_config("ingo", dim=6, T=40), {runs!r}, wait_for_lock=True)["provenance"]["resumed"], flush=True)
"""


def test_a_process_waiting_for_an_interrupted_run_takes_it_over(tmp_path, monkeypatch):
    """The lock file is removed while held: a process waiting for it then locks the path anew (it neither waits on
    the removed file forever nor fails) and resumes the run from the interrupted one's checkpoint."""
    from replication.synthetic.functions import FUNCTIONS

    cfg = small_config("ingo", dim=6, T=40)
    waiter = []

    def start_waiter():  # while the run holds its lock
        waiter.append(subprocess.Popen([sys.executable, "-c", WAIT_FOR_IT.format(
            tests=os.path.dirname(__file__), runs=str(tmp_path))], stdout=subprocess.PIPE, text=True))
        assert waiter[0].stdout.readline().strip() == "waiting"
        time.sleep(1.0)  # most likely polling the lock by now; if not, it finds the checkpoint all the same

    try:
        with monkeypatch.context() as patched:
            patched.setitem(FUNCTIONS, "ellipsoid", interrupted_ellipsoid(25, before=start_waiter))
            with pytest.raises(KeyboardInterrupt):
                execute(cfg, tmp_path, checkpoint_every_s=1e9, checkpoint_every_iters=10)
        out, _ = waiter[0].communicate(timeout=120)
    finally:
        for proc in waiter:
            proc.kill()
    assert waiter[0].returncode == 0 and out.strip() == "1"  # resumed once, from the checkpoint
    assert deterministic_part(load_record(tmp_path, cfg)) == deterministic_part(execute(cfg, tmp_path / "fresh"))
    assert not list(tmp_path.rglob("*.lock"))


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


def failing_optimizer(after: int):
    """INGO whose update raises at iteration ``after``: a bug in someone's optimizer."""
    import baselines

    class Failing(baselines.get("ingo")):
        name = "failing_ingo"

        def _tell(self, values):
            if self.nit == after:
                raise RuntimeError("my optimizer failed on purpose")
            return super()._tell(values)

    return Failing


@pytest.fixture
def failing(registries):
    import baselines

    return baselines.register(failing_optimizer(after=12))


def test_a_run_that_raises_stops_in_one_line_with_its_traceback_on_disk(tmp_path, failing):
    from replication.engine import error_path
    from replication.errors import RunFailed
    from replication.executors import run_configs

    bad, good = small_config("failing_ingo", dim=6, T=40), small_config("ingo", dim=6, T=40)
    with pytest.raises(RunFailed) as caught:
        execute(bad, tmp_path, checkpoint_every_s=1e9, checkpoint_every_iters=5)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(
        f"run {bad.label} (method 'failing_ingo') failed: RuntimeError: my optimizer failed on purpose (at ")
    assert "test_run_safety.py:" in message and "in _tell)" in message  # where it was raised
    trace = error_path(tmp_path, bad)
    assert message.endswith(f"the traceback is in {trace}")
    assert trace.read_text().startswith("Traceback") and "my optimizer failed on purpose" in trace.read_text()
    assert not lock_path(tmp_path, bad).exists() and load_record(tmp_path, bad) is None
    assert checkpoint_path(tmp_path, bad).exists()  # iteration 10's: a retry resumes from it
    # through the executor, serial: the study stops at the failure (the good run, queued after it, does not start)
    with pytest.raises(RunFailed):
        run_configs([bad, good], tmp_path, progress=False)
    assert load_record(tmp_path, good) is None
    # fixed (here: the failure moved past the run's end), the retry resumes and its error file goes
    import baselines
    baselines.REGISTRY["failing_ingo"]._tell = baselines.get("ingo")._tell
    record = execute(bad, tmp_path)
    assert record["provenance"]["resumed"] == 1 and not trace.exists()


def test_a_run_that_raises_in_a_worker_comes_back_as_the_same_line(tmp_path):
    """A local worker's RunFailed crosses the process boundary unchanged (a problem that cannot be built)."""
    from replication.config import RunConfig
    from replication.errors import RunFailed
    from replication.executors import run_configs

    good = small_config("ingo", dim=6, T=20)
    bad = RunConfig.from_dict({**good.to_dict(), "problem": {**good.problem, "name": "no_such_function"}})
    with pytest.raises(RunFailed, match=rf"^run {bad.label} \(method 'ingo'\) failed: .*no_such_function"):
        run_configs([bad, good], tmp_path, workers=2, progress=False)


FLAKY = """
import os
import signal

import baselines


class FlakyIngo(baselines.get("ingo")):
    \"\"\"INGO that raises at iteration ``fail_at`` (never with the default -1): a plug-in's bug on some configs;
    or whose process is killed at iteration ``kill_at``, as the out-of-memory killer would.\"\"\"

    name = "flaky_ingo"

    def __init__(self, x0, sigma0=1.0, popsize=None, lr=0.1, seed=None, *, fail_at=-1, kill_at=-1,
                 baseline="mean", shaping="zscore", precision_floor=0.05, nonfinite="raise"):
        super().__init__(x0, sigma0=sigma0, popsize=popsize, lr=lr, seed=seed, baseline=baseline, shaping=shaping,
                         precision_floor=precision_floor, nonfinite=nonfinite)
        self.fail_at, self.kill_at = fail_at, kill_at

    def _tell(self, values):
        if self.nit == self.fail_at:
            raise RuntimeError(f"flaky_ingo fails at iteration {self.fail_at} on purpose")
        if self.nit == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return super()._tell(values)
"""


@pytest.fixture
def flaky(registries, monkeypatch, tmp_path):
    """FlakyIngo as the ``module:Class`` plug-in ``flaky_plugin:FlakyIngo``: local workers import it too."""
    import baselines

    site = tmp_path / "site"
    site.mkdir()
    (site / "flaky_plugin.py").write_text(FLAKY)
    monkeypatch.syspath_prepend(str(site))  # spawned workers start with this sys.path
    monkeypatch.setattr(baselines, "_IMPORTED", {})
    yield baselines.load_class("flaky_plugin:FlakyIngo", allow=["flaky_plugin"])
    sys.modules.pop("flaky_plugin", None)


@pytest.mark.parametrize("executor, workers", [("local", 1), ("local", 2), ("ray", 2)])
def test_keep_going_runs_every_other_run_then_lists_the_failure(tmp_path, flaky, executor, workers):
    """By default the first run that raises stops the study; with keep_going the others all run, and the failure
    comes at the end with its traceback file: in the serial executor, the pool and Ray alike."""
    from replication.engine import error_path
    from replication.errors import RunFailed, RunsFailed
    from replication.executors import run_configs

    if executor == "ray":
        pytest.importorskip("ray")
    bad = small_config("flaky_ingo", dim=6, T=30, seed=2, fail_at=5)
    good = [small_config("flaky_ingo", dim=6, T=30, seed=s) for s in (0, 1)] + [small_config("ingo", dim=6, T=30)]
    with pytest.raises(RunFailed, match=rf"^run {bad.label} \(method 'flaky_ingo'\) failed"):
        run_configs([bad, *good], tmp_path / "default", workers=workers, executor=executor, progress=False)
    if workers == 1:  # the failing run went first (equal costs keep the given order): nothing after it ran
        assert not list((tmp_path / "default").rglob("*.json"))

    runs = tmp_path / "runs"
    with pytest.raises(RunsFailed) as caught:
        run_configs([bad, *good], runs, workers=workers, executor=executor, progress=False, keep_going=True)
    [line] = caught.value.failures
    trace = error_path(runs, bad)
    assert line.startswith(f"run {bad.label} (method 'flaky_ingo') failed: RuntimeError: flaky_ingo fails at "
                           "iteration 5 on purpose (at ") and line.endswith(f"the traceback is in {trace}")
    assert "flaky_ingo fails at iteration 5" in trace.read_text()
    assert [r["config_hash"] for r in caught.value.records] == [c.hash for c in good]
    assert all(load_record(runs, c)["result"]["status"] == "completed" for c in good)
    assert load_record(runs, bad) is None and not list(runs.rglob("*.lock"))


def test_a_run_whose_worker_dies_each_time_fails_alone_after_two_tries(tmp_path, flaky, capsys):
    """A run that gets its worker killed every time (say it needs more memory than there is) is tried again once
    by a new worker, then fails as a run that raises does; the other runs, and the other worker, go on."""
    from replication.errors import RunsFailed
    from replication.executors import MAX_WORKER_DEATHS, run_configs

    doomed = small_config("flaky_ingo", dim=6, T=30, seed=2, kill_at=5)
    good = [small_config("flaky_ingo", dim=6, T=30, seed=s) for s in (0, 1)] + [small_config("ingo", dim=6, T=30)]
    runs = tmp_path / "runs"
    with pytest.raises(RunsFailed) as caught:
        run_configs([doomed, *good], runs, workers=2, progress=False, keep_going=True)
    [line] = caught.value.failures
    assert line == (f"run {doomed.label} (method 'flaky_ingo') failed: its worker process died {MAX_WORKER_DEATHS} "
                    "times (killed by SIGKILL), e.g. killed, or out of memory")
    assert [r["config_hash"] for r in caught.value.records] == [c.hash for c in good]
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == [f"warning: the worker running {doomed.label} died (killed by SIGKILL); a new worker resumes "
                        "the run from its checkpoint"] * (MAX_WORKER_DEATHS - 1)


def test_run_keep_going_on_the_command_line(tmp_path, flaky, capsys, monkeypatch):
    """`sabo-bench run --keep-going`: the summary of the runs that finished, one line per failed run, one line of
    totals, exit status 1; without it the failed runs are retried and stop the study at once."""
    import yaml
    from helpers import tiny_params

    from replication.cli import main

    params = tiny_params(functions=["ellipsoid"], methods=["ingo"])
    params["synthetic"]["methods"]["flaky"] = {"optimizer": "flaky_ingo", "fail_at": 3}
    params["plugins"] = {"allow": ["flaky_plugin"], "optimizers": ["flaky_plugin:FlakyIngo"]}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    argv = ["run", "synthetic", "--workers", "2", "--no-track", "--quiet"]
    assert main([*argv, "--keep-going"]) == 1
    out, err = capsys.readouterr()
    assert out.strip() == "2 runs finished (0 diverged) under runs/synthetic"
    lines = err.splitlines()
    assert len(lines) == 3 and lines[2] == ("error: 2 of 4 runs failed (above, each with its traceback file); the "
                                            "others are recorded: run the same command again to retry the failed ones")
    for line, seed in zip(sorted(lines[:2]), (0, 1)):
        assert line.startswith(f"error: run d10_N6/ellipsoid/flaky/seed{seed} (method 'flaky') failed: RuntimeError: "
                               "flaky_ingo fails at iteration 3 on purpose (at ")
        assert re.search(r"the traceback is in runs/synthetic/d10_N6/flaky/\w+\.error\.txt$", line)
    assert main(argv) == 1  # the default: the first failure stops the study
    assert len(capsys.readouterr().err.splitlines()) == 1


@pytest.mark.parametrize("flaw, message", [
    ("stalls", r"failed: RuntimeError: Flawed\.nit did not advance in 1 ask/tell round\(s\) in a row \(it stayed "
               r"at 0\), though one iteration takes Flawed\.rounds_per_iteration = 1"),
    ("extra_row", r"failed: RuntimeError: Flawed's asks returned 7 rows in iteration 1, but it declared "
                  r"evals_per_iteration = 6"),
    ("nan_mean", r"failed: ValueError: Flawed\.mean is not finite at iteration 3: an update that makes the state "
                 r"non-finite must be refused"),
    ("short_mean", r"failed: TypeError: Flawed\.mean must be a numpy float64 array of shape \(4,\), one entry per "
                   r"coordinate of x0; it is an array of dtype float64 and shape \(3,\)"),
])
def test_an_optimizer_that_breaks_the_protocol_is_stopped_naming_it(tmp_path, registries, flaw, message):
    """A _tell that never advances nit looped forever; asks with more rows than declared overran evaluation budgets
    and recorded the wrong evaluation counts; a NaN mean was recorded "completed" with error NaN, a short one failed
    inside the problem's metrics: each stops the run (RunFailed) naming the optimizer."""
    import baselines
    from replication.errors import RunFailed

    class Flawed(baselines.get("ingo")):
        name = "flawed"

        def _ask(self):
            X = super()._ask()
            return np.vstack([X, X[:1]]) if flaw == "extra_row" else X

        @property
        def mean(self):
            mean = super().mean
            if flaw == "nan_mean" and self.nit >= 3:
                return np.full_like(mean, np.nan)
            return mean[:-1] if flaw == "short_mean" else mean

        def _tell(self, values):
            if flaw == "extra_row":
                super()._tell(values[:-1])
            elif flaw != "stalls":  # "stalls": takes the values, never completes an iteration
                super()._tell(values)

    baselines.register(Flawed)
    with pytest.raises(RunFailed, match=message):
        execute(small_config("flawed", dim=4, popsize=6, T=5), tmp_path)


@pytest.mark.parametrize("tally_kept", [True, False])
def test_a_run_stopped_between_sabos_two_rounds_resumes_to_the_same_record(tmp_path, monkeypatch, tally_kept):
    """A stop request between the perturbation and the update round checkpoints mid-iteration; the resumed run
    finishes that iteration (its rows counted from the checkpoint, or unchecked for a checkpoint written before
    the count was kept) and ends with the uninterrupted run's record."""
    import signal

    from replication import stopping
    from replication.synthetic.study import SyntheticProblem

    cfg = small_config("sabo", dim=6, popsize=4, T=30)
    straight = execute(cfg, tmp_path / "straight")
    calls = {"n": 0}
    objective = SyntheticProblem.objective

    def stop_after_a_perturbation_round(self, X):
        calls["n"] += 1
        if calls["n"] == 21:  # the first round of iteration 11
            monkeypatch.setattr(stopping, "_requested", signal.SIGINT)
        return objective(self, X)

    monkeypatch.setattr(SyntheticProblem, "objective", stop_after_a_perturbation_round)
    with pytest.raises(stopping.StopRequested):
        execute(cfg, tmp_path / "resumed")
    monkeypatch.setattr(stopping, "_requested", None)
    monkeypatch.setattr(SyntheticProblem, "objective", objective)
    ckpt = checkpoint_path(tmp_path / "resumed", cfg)
    state = read_state(ckpt)
    assert state["iteration"] == {"rounds": 1, "rows": 4, "declared": 8}
    if not tally_kept:
        del state["iteration"]
        write_state(ckpt, state)
    resumed = execute(cfg, tmp_path / "resumed")
    assert resumed["provenance"]["resumed"] == 1 and deterministic_part(resumed) == deterministic_part(straight)


# ---------------------------------------------------------------------------- records of the wrong shape, and entries
# of the runs directory that are no regular files: `list` and `report` read past them, `run` moves them aside
@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """The tiny synthetic study (8 runs) run once: (params path, runs dir, its configs); tests copy the runs."""
    import yaml
    from helpers import tiny_params

    from replication.cli import main
    from replication.studies import get_study

    root = tmp_path_factory.mktemp("tiny_runs")
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params()))
    assert main(["run", "synthetic", "--params", str(root / "params.yaml"), "--runs-dir", str(root / "runs"),
                 "--no-track", "--quiet"]) == 0
    return root / "params.yaml", root / "runs", get_study("synthetic").configs(tiny_params())


def runs_copy(tiny_runs, tmp_path):
    import shutil

    params, runs, configs = tiny_runs
    shutil.copytree(runs, tmp_path / "runs")
    return ["--params", str(params), "--runs-dir", str(tmp_path / "runs")], tmp_path / "runs", configs


def _edit(change):
    def damage(path):
        record = json.loads(path.read_text())
        change(record)
        path.write_text(json.dumps(record))
    return damage


WRONG_SHAPES = {  # name -> what is done to a record file
    "curve a string": _edit(lambda r: r["result"].update(curve="abc")),
    "final empty": _edit(lambda r: r["result"].update(final={})),
    "final.error a string": _edit(lambda r: r["result"]["final"].update(error="0.5")),
    "provenance empty": _edit(lambda r: r.update(provenance={})),
    "curve columns of unequal length": _edit(lambda r: r["result"]["curve"]["error"].pop(0)),
    "nested 100,000 deep": lambda path: path.write_text('{"schema": ' + "[" * 100_000 + "]" * 100_000 + "}"),
}


@pytest.mark.parametrize("damage", WRONG_SHAPES.values(), ids=WRONG_SHAPES)
def test_a_record_of_the_wrong_shape_is_corrupt_to_list_and_report_and_recomputed_by_run(tiny_runs, tmp_path, capsys,
                                                                                         damage):
    """Valid JSON of the wrong shape (or nested past the recursion limit) ended `list` and `report` in a KeyError,
    TypeError, IndexError or RecursionError traceback; now it is an unusable file like a garbled one."""
    from replication.cli import main

    common, runs, configs = runs_copy(tiny_runs, tmp_path)
    victim = configs[3]
    path = record_path(runs, victim)
    original = json.loads(path.read_text())
    damage(path)
    capsys.readouterr()
    assert main(["list", "synthetic", *common]) == 0
    out, err = capsys.readouterr()
    assert err == "" and f"{victim.hash}  corrupt" in out and out.splitlines()[-1] == "7 completed, 1 corrupt"

    assert main(["report", "synthetic", *common, "--out", str(tmp_path / "out"), "--no-track"]) == 0
    out, err = capsys.readouterr()
    assert "7 of 8 runs of profile 'tiny' have records" in out
    assert err.splitlines() == [f"warning: 1 record file(s) under {runs}/synthetic are unusable and left out of this "
                                "report (`sabo-bench list synthetic` marks them corrupt; `sabo-bench run synthetic` "
                                "moves them aside and recomputes them)"]

    assert main(["run", "synthetic", *common, "--no-track", "--quiet"]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: {path} is unusable (") and line.endswith("the run will be recomputed")
    assert deterministic_part(load_record(runs, victim)) == deterministic_part(original)
    [moved] = quarantined_files(runs)
    assert moved.name.startswith(path.name + QUARANTINE_MARK)


def _limited_memory():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))  # a read of /dev/zero ends here, not in swap


def test_entries_that_are_no_regular_files_are_skipped_by_list_and_moved_aside_by_run(tiny_runs, tmp_path):
    """A FIFO as a record hung `list` and `run`; a record linked to /dev/zero took all memory (MemoryError); a
    directory as a lock file ended `run` in IsADirectoryError. Now each is one line, and nothing outside the runs
    directory is read through a link; a link inside it is followed. In subprocesses: a regression hangs or fills
    memory there, under a timeout and a 3 GB address-space limit."""
    common, runs, configs = runs_copy(tiny_runs, tmp_path)
    fifo, zero, outside, lock_dir, fifo_ckpt, inside = configs[:6]
    originals = {c.hash: json.loads(record_path(runs, c).read_text()) for c in configs}
    record_path(runs, fifo).unlink()
    os.mkfifo(record_path(runs, fifo))
    record_path(runs, zero).unlink()
    record_path(runs, zero).symlink_to("/dev/zero")
    (tmp_path / "elsewhere").mkdir()
    os.replace(record_path(runs, outside), tmp_path / "elsewhere" / "record.json")  # a valid record, but not here
    record_path(runs, outside).symlink_to(tmp_path / "elsewhere" / "record.json")
    record_path(runs, lock_dir).unlink()
    lock_path(runs, lock_dir).mkdir()
    record_path(runs, fifo_ckpt).unlink()
    kept_path(runs, fifo_ckpt).unlink()  # not put back from runs/.kept: the run must read its checkpoint
    os.mkfifo(checkpoint_path(runs, fifo_ckpt))
    kept = runs / "synthetic" / "kept.json"
    os.replace(record_path(runs, inside), kept)
    record_path(runs, inside).symlink_to(os.path.relpath(kept, record_path(runs, inside).parent))

    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "replication.cli", *argv, "synthetic", *common], timeout=120,
                              capture_output=True, text=True, preexec_fn=_limited_memory)

    listed = cli("list")
    assert listed.returncode == 0 and listed.stderr == ""
    statuses = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines()[:8]}
    assert statuses == {**{c.hash: "completed" for c in configs}, fifo.hash: "corrupt", zero.hash: "corrupt",
                        outside.hash: "corrupt", lock_dir.hash: "pending", fifo_ckpt.hash: "partial"}

    ran = cli("run", "--no-track", "--quiet")
    assert ran.returncode == 0 and ran.stdout.strip() == f"8 runs finished (0 diverged) under {runs}/synthetic"
    lines = sorted(ran.stderr.splitlines())
    expected = sorted([
        (record_path(runs, fifo), "not a regular file but a FIFO", "the run will be recomputed"),
        (record_path(runs, zero), "a symbolic link to /dev/zero, outside ", "the run will be recomputed"),
        (record_path(runs, outside), f"a symbolic link to {tmp_path / 'elsewhere' / 'record.json'}, outside ",
         "the run will be recomputed"),
        (lock_path(runs, lock_dir), "not a regular file but a directory", "the run takes a lock file of its own"),
        (checkpoint_path(runs, fifo_ckpt), "not a regular file but a FIFO", "the run will be recomputed")])
    assert len(lines) == len(expected)
    for line, (path, reason, then) in zip(lines, expected):
        assert line.startswith(f"warning: {path} is unusable ({reason}") and line.endswith(f", {then}"), line
    for c in configs:
        assert deterministic_part(load_record(runs, c)) == deterministic_part(originals[c.hash])
    assert record_path(runs, inside).is_symlink() and len(quarantined_files(runs)) == 5


def test_read_bytes_reads_regular_files_within_its_limit_only(tmp_path):
    from replication.storage import UnusableFile, read_bytes

    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert read_bytes(path, limit=10) == b"0123456789"
    with pytest.raises(UnusableFile, match=r"^larger than 9 bytes, the most read from such a file$"):
        read_bytes(path, limit=9)
    with pytest.raises(UnusableFile, match=r"^not a regular file but a character device$"):
        read_bytes("/dev/zero", limit=10)
    with pytest.raises(UnusableFile, match=r"^not a regular file but a directory$"):
        read_bytes(tmp_path, limit=10)
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "missing", limit=10)
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "link").symlink_to(path)
    with pytest.raises(UnusableFile, match=rf"^a symbolic link to {path}, outside {tmp_path / 'inner'}$"):
        read_bytes(tmp_path / "inner" / "link", limit=10, within=tmp_path / "inner")
    assert read_bytes(tmp_path / "inner" / "link", limit=10, within=tmp_path) == b"0123456789"


# ---------------------------------------------------------------------------- checkpoints bound to their run
def spliced(runs, cfg, donor, edit=None):
    """``cfg``'s checkpoint (its config and hash intact) holding ``donor``'s optimizer state, or its own optimizer state
    passed through ``edit``: what the issue's probe resumed without a word."""
    ckpt = checkpoint_of(cfg, runs, iters=30)
    state = read_state(ckpt)
    if donor is not None:
        state["optimizer"] = read_state(checkpoint_of(donor, runs.parent / "donor", iters=30))["optimizer"]
    if edit is not None:
        edit(state["optimizer"])
    write_state(ckpt, state)
    return ckpt


def set_config(key, value):
    def edit(optimizer_state):
        optimizer_state["config"][key] = value
    return edit


@pytest.mark.parametrize("case, donor, edit, why", [
    ("another seed", small_config("sabo", T=60, seed=1), None, r"seed \d+, this run's \d+"),
    ("another setting", small_config("sabo", T=60, popsize=12), None,
     "saved with x0 other than this run's in 20 of 20 entries; .*popsize 12, this run's 10"),
    ("another dimension", small_config("sabo", T=60, dim=40), None, r"x0 of shape \(40,\), this run's \(20,\)"),
    ("another method", small_config("ingo", T=60), None, "optimizer 'ingo', this run's 'sabo'"),
    ("an edited lr", None, set_config("lr", {"kind": "constant", "value": 5.0}),
     r"lr \{'kind': 'constant', 'value': 5.0\}, this run's \{'kind': 'constant', 'value': 0.1\}"),
])
def test_a_checkpoint_holding_another_runs_optimizer_state_is_not_resumed(tmp_path, capsys, case, donor, edit, why):
    """Run A's checkpoint (A's config and hash) with run B's optimizer state, or with A's constructor arguments
    edited: moved aside in one line naming what differs, and A computed afresh (the same record as an uninterrupted
    run's; resumed, it differed)."""
    cfg = small_config("sabo", T=60)
    runs = tmp_path / "runs"
    ckpt = spliced(runs, cfg, donor, edit)
    capsys.readouterr()
    record = execute(cfg, runs)
    assert record["provenance"]["resumed"] == 0
    assert deterministic_part(record) == deterministic_part(execute(cfg, tmp_path / "fresh"))
    [moved] = quarantined_files(runs)
    assert moved.name.startswith(ckpt.name + QUARANTINE_MARK)
    [line] = capsys.readouterr().err.strip().splitlines()
    assert str(ckpt) in line and "recomputed" in line
    assert re.search(f"its optimizer state is not this run's: .*{why}", line), line


def test_a_spliced_cmaes_checkpoint_is_refused_before_it_is_replayed(tmp_path, capsys, monkeypatch):
    """Restoring CMA-ES replays every told value (a d = 1500 splice replayed for 40 s and 687 MB before it was
    refused): a state saved with other constructor arguments is refused before anything is rebuilt."""
    import baselines

    cfg = small_config("cmaes", T=60, dim=4)
    ckpt = spliced(tmp_path / "runs", cfg, small_config("cmaes", T=60, dim=30))
    monkeypatch.setattr(baselines, "restore", lambda *a, **k: pytest.fail("a foreign state was replayed"))
    capsys.readouterr()
    assert execute(cfg, tmp_path / "runs")["provenance"]["resumed"] == 0
    assert "x0 of shape (30,), this run's (4,)" in capsys.readouterr().err
    assert not ckpt.exists()


def test_a_checkpoint_whose_curve_is_not_its_optimizers_is_not_resumed(tmp_path, capsys):
    """The curve of an earlier checkpoint of the same run spliced into a later one: resumed, the record would lack
    the grid points in between and gain one off the grid."""
    cfg = small_config("ingo", T=80)
    early = read_state(checkpoint_of(cfg, tmp_path / "early", iters=10))
    ckpt = checkpoint_of(cfg, tmp_path / "runs", iters=40)
    write_state(ckpt, {**read_state(ckpt), "curve": early["curve"], "curve_time_unix_s": early["curve_time_unix_s"]})
    capsys.readouterr()
    record = execute(cfg, tmp_path / "runs")
    assert record["provenance"]["resumed"] == 0
    assert deterministic_part(record) == deterministic_part(execute(cfg, tmp_path / "fresh"))
    assert ("its curve (last point at iteration 10, 100 evaluations) is not the curve of its optimizer state "
            "(iteration 40, 400 evaluations)") in capsys.readouterr().err
