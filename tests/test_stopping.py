"""Stopping a study: Ctrl-C and SIGTERM end it within seconds, cleanly; workers never outlive it."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import deterministic_part

from replication.cli import load_params
from replication.engine import execute
from replication.studies import get_study

ROOT = Path(__file__).resolve().parents[1]
STOP_WITHIN_S = 10.0


@pytest.fixture
def study(tmp_path):
    """A params file whose profile 'stoptest' has four SABO runs of a few seconds each."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["synthetic"]["profiles"]["stoptest"] = {"seeds": [0, 1], "iterations": {"d200_N50": 3000}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "replication.cli", "run", "synthetic", "--params", str(path), "--profile", "stoptest",
           "--method", "sabo", "--function", "levy", "ellipsoid", "--runs-dir", str(runs), "--no-track", "--quiet",
           "--checkpoint-every", "0.2"]
    return cmd, runs, path


def children(pid: int) -> set[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def start_and_wait_for_checkpoints(cmd, runs, n=2, *, timeout=90):
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    while len(list(runs.rglob("*.ckpt"))) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.1)
    return proc


def wait_gone(pids, timeout):
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_study_within_seconds_and_a_rerun_resumes(study, sig, status):
    cmd, runs, params_path = study
    proc = start_and_wait_for_checkpoints(cmd + ["--workers", "2"], runs)
    workers = children(proc.pid)
    assert len(workers) >= 2
    t0 = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # what a terminal's Ctrl-C does: the whole foreground group
    else:
        proc.send_signal(sig)  # `kill PID` reaches the main process only
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < STOP_WITHIN_S
    assert proc.returncode == status
    assert "Traceback" not in err and f"stopped by {signal.Signals(sig).name}" in err
    assert not wait_gone(workers, 5.0)
    assert list(runs.rglob("*.ckpt"))  # interrupted runs kept their checkpoints
    assert not list(runs.rglob("*.lock"))  # and removed their lock files

    rerun = subprocess.run(cmd + ["--workers", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    params = load_params(str(params_path), "synthetic", "stoptest")
    configs = [c for c in get_study("synthetic").configs(params) if c.method == "sabo"
               and c.problem["name"] in ("levy", "ellipsoid")]
    assert len(configs) == 4
    resumed = 0
    for config in configs:
        record = execute(config, runs)
        resumed += record["provenance"]["resumed"]
        if record["provenance"]["resumed"]:
            reference = execute(config, runs.parent / "reference")
            assert deterministic_part(record) == deterministic_part(reference)
    assert resumed >= 1


def test_workers_do_not_outlive_a_killed_main_process(study):
    cmd, runs, _ = study
    proc = start_and_wait_for_checkpoints(cmd + ["--workers", "2"], runs)
    workers = children(proc.pid)
    assert len(workers) >= 2
    proc.kill()
    proc.communicate()
    assert not wait_gone(workers, 5.0), "workers kept running after their parent was killed"


def test_run_one_stops_with_its_message_on_a_line_of_its_own(study):
    """The progress bar is closed before the stop is reported (it was left open: the message ran on after it)."""
    cmd, runs, _ = study
    cmd = [a for a in cmd if a != "--quiet"]
    cmd[cmd.index("run")] = "run-one"
    cmd[cmd.index("ellipsoid")] = "--seed"
    cmd.insert(cmd.index("--seed") + 1, "0")
    proc = start_and_wait_for_checkpoints(cmd, runs, n=1)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err
    lines = err.splitlines()  # tqdm redraws with \r: each redraw is a line here
    assert lines[-1].startswith("stopped by SIGINT: finished runs are recorded"), lines[-3:]


def test_ray_tasks_stopped_by_ctrl_c_write_their_checkpoint_first(study):
    """``ray.cancel`` interrupts a running task; the executor turns that into a stop request, so each running run
    rewrites its checkpoint at the stop (they were cancelled mid-iteration and kept only their last periodic one)."""
    pytest.importorskip("ray")
    cmd, runs, params_path = study
    params = yaml.safe_load(params_path.read_text())
    params["synthetic"]["profiles"]["stoptest"]["iterations"]["d200_N50"] = 60000  # runs of a minute or more
    params_path.write_text(yaml.safe_dump(params))
    cmd = cmd[:cmd.index("--checkpoint-every")] + ["--checkpoint-every", "3", "--executor", "ray", "--workers", "2"]
    proc = start_and_wait_for_checkpoints(cmd, runs, timeout=120)
    stamp = time.time()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    checkpoints = list(runs.rglob("*.ckpt"))
    assert len(checkpoints) == 2 and all(p.stat().st_mtime > stamp for p in checkpoints), \
        [(p.name, p.stat().st_mtime - stamp) for p in checkpoints]
    assert not list(runs.rglob("*.json"))


def worker_pids(pid: int) -> list[int]:
    """The study's worker processes (multiprocessing also starts a resource tracker)."""
    return [p for p in children(pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]


def test_a_killed_worker_is_replaced_and_its_run_resumes_from_its_checkpoint(study):
    """SIGKILL of one worker (the out-of-memory killer, a user's kill -9) broke the whole process pool: a
    BrokenProcessPool traceback, exit status 1, and the other worker's run stopped too."""
    cmd, runs, params_path = study
    proc = start_and_wait_for_checkpoints(cmd + ["--workers", "2"], runs)
    killed = worker_pids(proc.pid)[0]
    os.kill(killed, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "Traceback" not in err, err
    [line] = err.splitlines()
    assert line.startswith("warning: the worker running d200_N50/") and "died (killed by SIGKILL)" in line, line
    assert "resumes the run from its checkpoint" in line and "4 runs finished" in out
    params = load_params(str(params_path), "synthetic", "stoptest")
    configs = [c for c in get_study("synthetic").configs(params) if c.method == "sabo"
               and c.problem["name"] in ("levy", "ellipsoid")]
    records = {c.label: execute(c, runs) for c in configs}
    [label] = [lab for lab, r in records.items() if r["provenance"]["resumed"]]  # the killed worker's run
    assert label in line
    config = next(c for c in configs if c.label == label)
    assert deterministic_part(records[label]) == deterministic_part(execute(config, runs.parent / "reference"))
    assert not list(runs.rglob("*.lock"))


def sigint_as_in_a_terminal():
    """A command started from a terminal gets SIGINT's default action; a background job of a non-interactive shell
    (e.g. CI started with `&`) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: installed as ``sitecustomize`` in a command's Python: at the first import of ``module`` in the process chosen,
#: it sends SIGINT to the command's process group, as a terminal's Ctrl-C does
CTRL_C_DURING_IMPORT = """
import os, signal, sys

_where = os.environ["CTRL_C_IN"]
_worker = "--multiprocessing-fork" in sys.orig_argv


def _hook(event, args):
    if (event == "import" and args[0] == os.environ["CTRL_C_AT_IMPORT_OF"] and (_where == "worker") == _worker
            and not os.environ.get("CTRL_C_SENT")):
        os.environ["CTRL_C_SENT"] = "1"
        os.killpg(os.getpgrp(), signal.SIGINT)


sys.addaudithook(_hook)
"""


#: installed as ``sitecustomize``: when the interpreter shuts down (an exit handler, after ``main`` has returned),
#: the process sends itself SIGINT, as a Ctrl-C in the ~0.3 s between a finished study's last line and its exit
CTRL_C_AT_EXIT = """
import atexit, os, signal


def _ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)
    sum(range(10**5))  # Python code after the signal: its handler runs here


atexit.register(_ctrl_c)
"""


def test_ctrl_c_while_the_command_exits_is_one_line(study, tmp_path):
    """A finished study interrupted while the interpreter shuts down: exit status -2 (killed by SIGINT), without a
    word, or a KeyboardInterrupt traceback from an exit handler, before; one line saying the work was over now."""
    cmd, runs, _ = study
    cmd = [*(c for c in cmd if c != "ellipsoid"), "--seed", "0"]  # one run
    site = tmp_path / "interrupt"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CTRL_C_AT_EXIT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
                          start_new_session=True, preexec_fn=sigint_as_in_a_terminal)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.splitlines()
    assert line == ("stopped by SIGINT while exiting: the command's work was over (what it printed above says how it "
                    "ended)")
    assert len(list(runs.rglob("*.json"))) == 1 and not list(runs.rglob("*.ckpt"))  # the run was recorded


@pytest.mark.parametrize("command, where, expected", [
    ("run", "main", "stopped by SIGINT while starting: nothing was done"),
    ("run-one", "main", "stopped by SIGINT while starting: nothing was done"),
    ("run", "worker", "stopped by SIGINT: finished runs are recorded"),
])
def test_ctrl_c_while_the_command_or_a_worker_imports_is_one_line(study, tmp_path, command, where, expected):
    """Importing takes seconds (numpy, matplotlib, ...) before the stop handling is installed, in the command
    and in each worker it starts: a Ctrl-C then was a KeyboardInterrupt traceback from the import (exit
    status -2), or one from every worker that was starting. The Ctrl-C arrives at a fixed point: when the
    process imports the executors (an audit hook sends it)."""
    cmd, runs, _ = study
    cmd = cmd + ["--workers", "2"] if command == "run" else \
        [*cmd[:cmd.index("run")], "run-one", *cmd[cmd.index("run") + 1:cmd.index("ellipsoid")], "--seed", "0",
         *cmd[cmd.index("ellipsoid") + 1:]]
    site = tmp_path / "interrupt"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CTRL_C_DURING_IMPORT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "CTRL_C_IN": where, "CTRL_C_AT_IMPORT_OF": "replication.executors"}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
                          start_new_session=True, preexec_fn=sigint_as_in_a_terminal)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith(expected), line
    if where == "main":
        assert not runs.exists()
