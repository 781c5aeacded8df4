"""Executors: results independent of worker count, order and executor (local pool, Ray)."""
import pytest
from helpers import deterministic_part, small_config

from replication.executors import run_configs

CONFIGS = [small_config(m, function=f, T=60, seed=s)
           for m in ("sabo", "cmaes", "mmes") for f in ("ellipsoid", "levy") for s in (0, 1)]


def test_pool_and_order_do_not_change_results(tmp_path):
    serial = run_configs(CONFIGS, tmp_path / "a", workers=1, progress=False)
    parallel = run_configs(CONFIGS[::-1], tmp_path / "b", workers=2, progress=False)[::-1]
    assert [deterministic_part(r) for r in serial] == [deterministic_part(r) for r in parallel]


def test_finished_runs_are_reported_without_rerunning(tmp_path):
    seen = []
    run_configs(CONFIGS[:2], tmp_path, progress=False)
    stamp = [(tmp_path / "synthetic").stat().st_mtime_ns]
    records = run_configs(CONFIGS[:2], tmp_path, progress=False, on_record=seen.append)
    assert len(seen) == 2 and records == seen
    assert [(tmp_path / "synthetic").stat().st_mtime_ns] == stamp


def test_ray_executor_matches_local(tmp_path):
    local = run_configs(CONFIGS[:4], tmp_path / "local", workers=1, progress=False)
    via_ray = run_configs(CONFIGS[:4], tmp_path / "ray", workers=2, executor="ray", progress=False)
    assert [deterministic_part(r) for r in via_ray] == [deterministic_part(r) for r in local]


@pytest.mark.parametrize("executor, workers", [("local", 2), ("ray", 1)])
def test_a_refusal_in_a_worker_comes_back_as_one_usage_error(tmp_path, monkeypatch, executor, workers):
    """The executors refuse a value before any run starts (check_parameters); should a worker still meet one, the
    engine's one-line UsageError reaches the command line unwrapped from the pool's or Ray's task error."""
    from replication import executors
    from replication.errors import UsageError

    monkeypatch.setattr(executors, "check_parameters", lambda configs, **_: None)
    with pytest.raises(UsageError, match=r"refuses its parameters: lr must be > 0 \(got -1.0\)$"):
        run_configs([small_config("ingo", lr=-1.0)], tmp_path, workers=workers, executor=executor, progress=False)


def test_a_workers_missing_package_comes_back_from_ray_as_one_line():
    """A node without the `bo` extra: the worker's PackageUnavailable, not Ray's remote traceback (4 lines)."""
    import types

    ray = pytest.importorskip("ray")
    from replication import executors
    from replication.errors import PackageUnavailable

    message = "run synthetic/x: method 'turbo' (optimizer 'turbo') cannot run here: TuRBO-1 needs BoTorch"
    error = ray.exceptions.RayTaskError("_execute_ray", "Traceback (most recent call last): ...",
                                        PackageUnavailable(message))

    def get(ref):
        raise error

    with pytest.raises(PackageUnavailable) as caught:
        executors._ray_outcome(types.SimpleNamespace(get=get, exceptions=ray.exceptions), None, small_config())
    assert str(caught.value) == message


def test_every_executor_computes_a_run_with_one_blas_and_one_torch_thread(tmp_path):
    """Results must not depend on --workers: the main process (--workers 1, run-one) computes with one BLAS thread
    and one torch thread as the pool's workers do (a multi-threaded BLAS sums in another order: d = 1000 image runs
    ended 1e-15..1e-8 apart), and gives the caller its own settings back. In a fresh interpreter whose torch was set
    to 2 threads before the study."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = f"""
import json, sys, torch, threadpoolctl
sys.path.insert(0, {str(Path(__file__).parent)!r})
from helpers import small_config
from replication.executors import run_configs
from replication.synthetic.study import SyntheticProblem
torch.set_num_threads(2)
seen, objective = [], SyntheticProblem.objective
def watched(self, X):
    blas = [p["num_threads"] for p in threadpoolctl.threadpool_info()]
    seen.append((max(blas), torch.get_num_threads()))
    return objective(self, X)
SyntheticProblem.objective = watched
run_configs([small_config("ingo", dim=6, T=3)], {str(tmp_path)!r}, workers=1, progress=False)
import os
after = [max(p["num_threads"] for p in threadpoolctl.threadpool_info()), torch.get_num_threads(),
         os.environ.get("OMP_NUM_THREADS")]
print(json.dumps([sorted(set(seen)), after]))
"""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    during, after = json.loads(out.stdout.splitlines()[-1])
    assert during == [[1, 1]]
    assert after[1:] == [2, None] and after[0] > 1 or os.cpu_count() == 1  # the caller's own settings restored


def test_progress_reports_never_stall_a_worker_when_the_parent_does_not_read():
    """A worker's report to a parent that is not reading is dropped once the pipe is full, not waited on
    (a blocking queue stalled the run); what the parent then reads are whole reports, and later ones pass."""
    import multiprocessing
    import pickle
    import threading

    from replication.executors import _Reporter, _Reports

    reports = _Reports(multiprocessing.get_context("spawn"))
    sender = threading.Thread(target=lambda: [reports.offer((f"{i:016x}", 2.0, 0.25, 0.5)) for i in range(20_000)],
                              daemon=True)
    sender.start()
    sender.join(timeout=60)
    assert not sender.is_alive(), "offer() blocked on a full pipe"
    read = list(reports.drain())
    assert 0 < len(read) < 20_000
    assert read == [(f"{i:016x}", 2.0, 0.25, 0.5) for i in range(len(read))]  # whole, in order, the first ones
    reports.offer(("later", 1.0, 0.5, 0.5))
    assert list(reports.drain()) == [("later", 1.0, 0.5, 0.5)]
    # what a run sends: small enough for one atomic write (PIPE_BUF is 512 bytes on macOS)
    sent = []
    reporter = _Reporter(small_config().hash, sent.append)
    reporter(1, 3)
    reporter._last = -1e9  # due now
    reporter(2, 3)
    assert len(sent) == 1 and len(pickle.dumps(sent[0])) < 512


def test_a_run_ray_gave_up_on_is_a_failed_run_in_one_line():
    """A task whose node or worker died more often than Ray retries it (NodeDiedError, WorkerCrashedError) was a
    Ray traceback that stopped the study; it is a failed run (RunFailed: one line, --keep-going goes on)."""
    from types import SimpleNamespace

    ray_exceptions = pytest.importorskip("ray.exceptions")
    from replication.errors import RunFailed
    from replication.executors import _ray_outcome

    config = small_config()

    def get(ref):
        raise ray_exceptions.WorkerCrashedError()

    fake_ray = SimpleNamespace(get=get, exceptions=ray_exceptions)
    with pytest.raises(RunFailed) as info:
        _ray_outcome(fake_ray, object(), config)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"run {config.label} (method {config.method!r}) failed: Ray "
                                                      "gave up on it (WorkerCrashedError: The worker died")
    assert message.endswith("run the command again to resume it from its checkpoint")


def test_one_thread_gives_torch_its_threads_back():
    """The restore put torch's intra-op pool back at 1 thread: it read torch's count after threadpool_limits had
    already limited OpenMP, whose pool torch uses."""
    torch = pytest.importorskip("torch")
    from replication.executors import one_thread

    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        restore = one_thread()
        assert torch.get_num_threads() == 1
        restore()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(old)
