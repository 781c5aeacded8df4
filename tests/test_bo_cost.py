"""benchmarks/bo_cost.py: the states it builds, its projection arithmetic, its budget stop (a few seconds)."""
import json

import numpy as np
import pytest
from helpers import benchmark_script

pytest.importorskip("botorch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def bench():
    return benchmark_script("bo_cost")


def test_built_states_hold_the_data_of_iteration_k(bench):
    turbo = bench.at_iteration("turbo", {}, 6, 4, 3)
    assert turbo.nit == 3 and bench.model_points(turbo) == 12 and turbo.nfev == 12
    gibo = bench.at_iteration("gibo", {}, 6, 4, 3)
    assert gibo.nit == 3 and bench.model_points(gibo) == 8  # the window: n_max = 2N points
    X = gibo.state_dict()["state"]["X"]
    assert np.all(np.abs(X - gibo.mean) <= 1.34)              # inside the acquisition box theta +- delta sigma0


def test_seconds_per_run_interpolates_between_the_measured_iterations(bench):
    # k <= 10: 1 s (10 terms); 11..50: 1 -> 5 s (40 + 82); 51..100: 5 -> 10 s (250 + 127.5)
    assert bench.seconds_per_run({10: 1.0, 50: 5.0, 100: 10.0}, 100) == pytest.approx(509.5)


def test_tiny_run_writes_rows_and_projects_the_gpu_profile(bench, tmp_path, capsys):
    out = tmp_path / "cost.json"
    bench.main(["--dims", "6", "--popsize", "4", "--iterations", "2", "--param", "turbo.n_training_steps=2",
                "--param", "gibo.acq_maxiter=0", "--json", str(out)])
    report = json.loads(out.read_text())
    assert [(r["method"], r["d"], r["k"], r["n"]) for r in report["rows"]] == [("turbo", 6, 2, 8), ("gibo", 6, 2, 8)]
    assert all(r["total_s"] > 0 for r in report["rows"]) and report["stopped"] is None
    assert report["setup"]["options"]["turbo"] == {"n_training_steps": 2, "device": "cpu"}
    # 6 tasks x 3 seeds of each method at each d of the gpu profile, T = 100; none measured at d = 6
    assert {(p["method"], p["d"], p["runs"], p["T"]) for p in report["projection"]} == \
        {(m, d, 18, 100) for m in ("turbo", "gibo") for d in (200, 500, 1000)}
    assert all(p["seconds_per_run"] is None for p in report["projection"])


def test_budget_stops_cleanly_and_reports_what_it_measured(bench, tmp_path, capsys):
    out = tmp_path / "cost.json"
    report = bench.main(["--dims", "6", "--popsize", "4", "--iterations", "2", "--budget-s", "0.001",
                         "--json", str(out)])
    assert report["rows"] == [] and "budget of 0.001 s reached" in report["stopped"]
    assert json.loads(out.read_text())["stopped"] == report["stopped"]
    assert "0 of 2 rows measured" in capsys.readouterr().out


def test_bad_param_is_one_line(bench, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--param", "cmaes.x=1"])
    assert exc.value.code == 2 and "METHOD must be one of turbo, gibo" in capsys.readouterr().err
