"""GPU scheduling: one device per run, on CPU with stubbed devices (local pool) and fake GPUs (Ray)."""
import pytest
from helpers import benchmark_script, small_config

from replication import executors
from replication.devices import visible_gpus, worker_devices
from replication.errors import ResourceUnavailable
from replication.executors import default_workers, run_configs

CONFIGS = [small_config("ingo", T=400, seed=s, function=f) for s in (0, 1, 2) for f in ("ellipsoid", "levy")]


@pytest.mark.parametrize("env, ids", [("3,5", ["3", "5"]), ("", []), ("-1", []), ("0,-1,2", ["0"]),
                                      (" 1 , 2 ", ["1", "2"])])
def test_visible_gpus_follows_cuda_visible_devices(monkeypatch, env, ids):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
    assert visible_gpus() == ids


def test_each_worker_gets_its_own_device_round_robin():
    assert worker_devices(2, ["3", "5"]) == ["3", "5"]
    assert worker_devices(3, ["0", "1"]) == ["0", "1", "0"]
    assert worker_devices(4, []) == []


def test_default_workers_is_one_per_gpu_for_gpu_runs(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    assert default_workers(CONFIGS) == 1  # synthetic runs need no GPU
    monkeypatch.setattr(executors, "run_gpus", lambda config: 1)
    assert default_workers(CONFIGS) == 8
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert default_workers(CONFIGS) == 1


def test_local_workers_are_pinned_to_one_device_each(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.setattr(executors, "run_gpus", lambda config: 1)
    records = run_configs(CONFIGS, tmp_path, workers=2, progress=False)
    devices = [r["provenance"]["cuda_visible_devices"] for r in records]
    assert set(devices) <= {"3", "5"} and len(devices) == len(CONFIGS)


def test_runs_without_gpu_needs_are_not_pinned(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    records = run_configs(CONFIGS[:2], tmp_path, workers=2, progress=False)
    assert {r["provenance"]["cuda_visible_devices"] for r in records} == {"3,5"}


def test_ray_tasks_request_one_gpu_each(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.setattr(executors, "run_gpus", lambda config: 1)
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        records = run_configs(CONFIGS, tmp_path / "a", workers=2, executor="ray", progress=False)
        devices = {r["provenance"]["cuda_visible_devices"] for r in records}
        assert devices <= {"0", "1"} and devices
        monkeypatch.setattr(executors, "run_gpus", lambda config: 3)
        with pytest.raises(ResourceUnavailable, match="need 3 GPU"):
            run_configs(CONFIGS[:1], tmp_path / "b", workers=2, executor="ray", progress=False)
    finally:
        ray.shutdown()


@pytest.mark.parametrize("device, gpus", [("cuda", 1), ("cuda:1", 1), ("cpu", 0)])
def test_prompt_runs_on_cuda_need_one_gpu_each(device, gpus):
    pytest.importorskip("torch")
    from replication.config import RunConfig
    from replication.studies import run_gpus

    config = RunConfig(study="prompt", setting="d200", problem={"name": "sst2", "device": device}, method="ingo",
                       params={}, seed=0, budget={"max_iter": 1})
    assert run_gpus(config) == gpus
    assert run_gpus(small_config("ingo")) == 0


def test_study_check_counts_runs_per_device_and_overlaps_across_devices():
    """benchmarks/prompt_study_check.py's evidence on a multi-GPU machine: runs per device, overlapping pairs."""
    check = benchmark_script("prompt_study_check")

    def record(device, start, end):
        return {"provenance": {"cuda_visible_devices": device, "started_utc": f"2026-11-26T10:00:{start:02d}.000+00:00",
                               "finished_utc": f"2026-11-26T10:00:{end:02d}.000+00:00"}}

    records = [record("0", 0, 10), record("1", 5, 15), record("0", 10, 20), record("1", 16, 30), record(None, 0, 1)]
    use = check.device_use(records)
    assert use["runs_per_device"] == {"-": 1, "0": 2, "1": 2}
    # overlaps: (0:[0,10], 1:[5,15]), (1:[5,15], 0:[10,20]), (0:[10,20], 1:[16,30]), ("-":[0,1], 0:[0,10]);
    # runs on one device that touch at an instant (0: [0,10], [10,20]) do not count
    assert use["overlapping_pairs_on_distinct_devices"] == 4
