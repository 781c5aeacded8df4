"""A real two-node Ray cluster on this machine: studies survive the loss of a node (docs/studies/cluster.md).

The head node (1 CPU, where the drivers connect) and a worker node (2 CPUs) are started with the ``ray`` CLI,
each with its own temporary directory, in a process session of its own. Two studies run through them with
``--executor ray`` on one shared runs directory: a reduced selection of the synthetic ``ci`` profile (4 runs
at d200_N100; the whole profile's 80 runs take minutes) and the whole BBOB ``ci`` profile (80 runs). With 3
CPUs and one task per CPU, runs go to both nodes. The worker node is killed (SIGKILL to its raylet, then to
every other process of it) while it is computing one run of each study: a synthetic run that has written a
checkpoint, and a BBOB run whose record does not exist yet. Each of those two processes is stopped (SIGSTOP)
once caught, so that neither finishes between the check and the kill. Both studies must then finish on the
head node (Ray re-runs the lost tasks there), with every record's ``config`` and ``result`` equal to those of a
local run, no record missing or extra, nothing left behind (locks, checkpoints, partial files), COCO's files
byte for byte the local run's, the interrupted synthetic run resumed from the worker's checkpoint (and no
other run resumed), and the interrupted BBOB run restarted after the kill.

Not ``ray stop`` to shut down: it stops every Ray process on the machine, other users' too. The processes of
each node's session get SIGTERM, then SIGKILL after a grace period, as ``ray stop`` does for its processes.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pytest
from helpers import deterministic_part

from replication.engine import record_paths
from replication.storage import quarantined_files

pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")  # the venv's first
SYNTHETIC = ["synthetic", "--profile", "ci", "--setting", "d200_N100", "--function", "levy",
             "--method", "sabo", "ingo", "bes", "mmes", "--seed", "0"]
BBOB = ["bbob", "--profile", "ci"]
START_S = 180.0  # a node's start, under load
WAIT_S = 600.0  # each wait for a study's state or end: generous, nothing here is timed
STOP_GRACE_S = 5.0  # for the processes of a node to end on SIGTERM (`ray stop` gives 16 s; the GCS takes ~10)
# the head marks a node dead after 5 failed health checks 1 s apart: ~5 s (Ray's defaults, 3 s apart: ~15 s)
HEALTH_CHECKS = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "5"}


def _env(**extra) -> dict:
    """This environment with the repository first on PYTHONPATH (Ray's workers import the executor's task from
    there: a node's workers inherit the environment of its `ray start`), without a RAY_ADDRESS of the caller."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # the same for nodes and drivers whatever ~/.ray holds: `ray start` turns token authentication on where
    # ~/.ray/auth_token exists, and a driver without the token is then refused
    env["RAY_AUTH_MODE"] = "disabled"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**env, **extra}


def _session(leader: subprocess.Popen) -> list:
    """The live processes of the session ``leader`` leads: a node's `ray start`, raylet, agents and workers (Ray
    gives each worker a process group of its own, in the session of its node's `ray start`)."""
    out = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == leader.pid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (ProcessLookupError, psutil.Error):
            pass
    return out


def _signal(procs, sig) -> None:
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass


def _popen(args, log: Path, env: dict) -> subprocess.Popen:
    """``args`` run in the repository, in a new session, its output in ``log``."""
    with log.open("w") as out:
        return subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _end_session(leader: subprocess.Popen) -> None:
    """SIGTERM to every process of the session (as `ray stop` sends them), SIGKILL to those left after
    :data:`STOP_GRACE_S` and to the leader (`ray start --block` only watches the others, and outlives
    SIGTERM); reaps the leader."""
    _signal(_session(leader), signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while any(p.pid != leader.pid for p in _session(leader)) and time.monotonic() < deadline:
        time.sleep(0.2)
    _signal(_session(leader), signal.SIGKILL)
    leader.wait(timeout=WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while _session(leader) and time.monotonic() < deadline:
        time.sleep(0.2)


class Cluster:
    """Nodes started with ``ray start --block``, and the `sabo-bench run` commands that use them, each the leader of
    a session of its own."""

    def __init__(self, temp: Path):
        self.temp, self.nodes, self.drivers = temp, {}, []

    def start(self, name: str, *args: str) -> subprocess.Popen:
        """A node, once it is up. Its tasks run in the directory `ray start` ran in: the repository's."""
        log = self.temp / f"{name}.log"
        node = self.nodes[name] = _popen([RAY, "start", "--block", f"--temp-dir={self.temp / name}",
                                          "--object-store-memory=100000000", "--disable-usage-stats", *args],
                                         log, env=_env(**HEALTH_CHECKS))
        deadline = time.monotonic() + START_S
        while "Ray runtime started" not in log.read_text():
            assert node.poll() is None and time.monotonic() < deadline, f"node {name} did not start:\n" + \
                log.read_text()[-3000:]
            time.sleep(0.5)
        return node

    def address(self) -> str:
        return (self.temp / "head" / "ray_current_cluster").read_text().strip()

    def sabo_bench(self, args, runs_dir: Path, log: Path, *, ray: bool) -> subprocess.Popen:
        """``sabo-bench run ARGS``: through this cluster, or here with ``ray=False``."""
        executor = ["--executor", "ray"] if ray else []
        proc = _popen([sys.executable, "-m", "replication.cli", "run", *args, "--runs-dir", str(runs_dir), "--no-track",
                       "--quiet", *executor], log, env=_env(**({"RAY_ADDRESS": self.address()} if ray else {})))
        self.drivers.append(proc)
        return proc

    def stop(self) -> None:
        """The drivers (killed if still running: the test failed), then the nodes."""
        for proc in [*self.drivers, *self.nodes.values()]:
            _end_session(proc)


@pytest.fixture
def cluster():
    # short: a node's socket paths (<temp>/<node>/session_<date>_<pid>/sockets/plasma_store) must fit
    # the 107 characters of a Unix socket's name
    temp = Path(tempfile.mkdtemp(prefix="sabo-ray-"))
    nodes = Cluster(temp)
    try:
        yield nodes
    finally:
        nodes.stop()
        left = [p for leader in [*nodes.drivers, *nodes.nodes.values()] for p in _session(leader)]
        shutil.rmtree(temp, ignore_errors=True)
        assert not left, f"processes left behind: {left}"


def _finish(proc: subprocess.Popen, log: Path) -> str:
    try:
        proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        _end_session(proc)
    text = log.read_text()
    assert proc.returncode == 0, f"{proc.args} exited with {proc.returncode}:\n{text[-3000:]}"
    return text


def _catch_run(node, driver, study_dir: Path, *, needs_checkpoint: bool) -> Path:
    """Stop (SIGSTOP) a process of ``node`` that holds the lock of a run under ``study_dir`` whose record does
    not exist (and whose checkpoint does, with ``needs_checkpoint``), while ``driver`` runs the study; returns
    the path of that run's record."""
    deadline = time.monotonic() + WAIT_S
    while driver.poll() is None and time.monotonic() < deadline:
        for proc in _session(node):
            try:
                locks = [Path(f.path) for f in proc.open_files() if f.path.endswith(".lock")]
            except psutil.Error:
                continue
            for lock in locks:
                record = lock.with_suffix(".json")
                if study_dir not in lock.parents or (needs_checkpoint and not lock.with_suffix(".ckpt").exists()):
                    continue
                proc.suspend()
                try:  # still computing it now that it cannot go on: it was caught mid-run
                    if str(lock) in [f.path for f in proc.open_files()] and not record.exists():
                        return record
                except psutil.Error:
                    pass
                proc.resume()
        time.sleep(0.02)
    pytest.fail(f"no run under {study_dir} was caught on the worker node (driver's exit status {driver.poll()})")


def _records(study_dir: Path) -> dict:
    return {str(p.relative_to(study_dir)): json.loads(p.read_text()) for p in record_paths(study_dir)}


def _files(study_dir: Path) -> dict:
    """Every file under ``study_dir`` but the records: their relative paths and contents."""
    return {str(p.relative_to(study_dir)): p.read_bytes() for p in sorted(study_dir.rglob("*"))
            if p.is_file() and not (p.suffix == ".json" and ".files" not in str(p.relative_to(study_dir)))}


def test_studies_survive_the_loss_of_a_worker_node(cluster, tmp_path):
    shared, local = tmp_path / "shared", tmp_path / "local"
    # the reference: the same runs computed here, one at a time, while the cluster works
    reference = [cluster.sabo_bench(args, local, tmp_path / f"local-{args[0]}.log", ray=False)
                 for args in (SYNTHETIC, BBOB)]
    cluster.start("head", "--head", "--port=0", "--num-cpus=1", "--include-dashboard=false")
    worker = cluster.start("worker", f"--address={cluster.address()}", "--num-cpus=2")

    synthetic = cluster.sabo_bench([*SYNTHETIC, "--checkpoint-every", "0.2"], shared, tmp_path / "synthetic.log",
                                   ray=True)
    resumed_run = _catch_run(worker, synthetic, shared / "synthetic", needs_checkpoint=True)
    bbob = cluster.sabo_bench(BBOB, shared, tmp_path / "bbob.log", ray=True)
    restarted_run = _catch_run(worker, bbob, shared / "bbob", needs_checkpoint=False)
    raylet = [p for p in _session(worker) if p.name() == "raylet"]
    assert len(raylet) == 1, raylet
    killed_at = datetime.now().astimezone()
    raylet[0].kill()
    _signal(_session(worker), signal.SIGKILL)  # the rest of the node: a dead machine's processes do not linger
    worker.wait(timeout=STOP_GRACE_S)

    outputs = [_finish(synthetic, tmp_path / "synthetic.log"), _finish(bbob, tmp_path / "bbob.log")]
    for proc, args in zip(reference, (SYNTHETIC, BBOB)):
        _finish(proc, tmp_path / f"local-{args[0]}.log")
    assert "4 runs finished" in outputs[0] and "80 runs finished" in outputs[1], outputs

    for study in ("synthetic", "bbob"):
        on_cluster, here = _records(shared / study), _records(local / study)
        assert len(here) == {"synthetic": 4, "bbob": 80}[study]
        assert sorted(on_cluster) == sorted(here)  # none lost, none extra (a record's name is its config hash)
        for name, record in on_cluster.items():
            assert deterministic_part(record) == deterministic_part(here[name]), name
        # nothing left behind: no lock, checkpoint, partial COCO directory, temporary or quarantined file;
        # COCO's own files (the BBOB runs' .files directories) byte for byte the local run's
        assert _files(shared / study) == _files(local / study)
        assert not quarantined_files(shared / study)

    # the run the worker node was computing (the only synthetic one there: the other CPU ran the BBOB run)
    # resumed from the checkpoint it had written; every other run ran once, from its start
    resumes = {name: r["provenance"]["resumed"] for name, r in _records(shared / "synthetic").items()}
    assert resumes == {name: int(name == str(resumed_run.relative_to(shared / "synthetic"))) for name in resumes}
    restarted = _records(shared / "bbob")[str(restarted_run.relative_to(shared / "bbob"))]
    assert datetime.fromisoformat(restarted["provenance"]["started_utc"]) > killed_at  # afresh, on the head

