"""Executors: results independent of worker count, order and executor (local pool, Ray)."""
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
