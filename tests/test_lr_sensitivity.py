"""benchmarks/lr_sensitivity.py: its runs, the analysis that proposes a default beta, and resuming (a few seconds)."""
import json

import numpy as np
import pytest
from helpers import benchmark_script

import sabo


@pytest.fixture(scope="module")
def bench():
    return benchmark_script("lr_sensitivity")


def test_a_run_records_f_and_the_distance_at_every_budget(bench):
    record = bench.run_one({"function": "rosenbrock", "d": 3, "lr": 0.3, "seed": 1, "budgets_per_d": [25, 50]})
    n = sabo.ingo_default_popsize(3)
    assert record["budgets"] == [75, 150] and record["status"] == "ok" and len(record["f_at"]) == 2
    # read off after the first iteration (2 N evaluations) reaching each budget: the same optimizer driven by hand
    opt = sabo.SABO(bench.rho_study.x0_for(1, 3), sigma0=1.0, lr=0.3, seed=1)
    while not (opt.phase == 0 and opt.nfev >= 150):
        X = opt.ask()
        opt.tell(X, bench.rosenbrock(X))
        if opt.phase == 0 and opt.nfev - 2 * n < 75 <= opt.nfev:
            assert record["f_at"][0] == bench.rosenbrock(opt.mean)[0]
    assert record["f_at"][1] == bench.rosenbrock(opt.mean)[0] and record["nfev"] == opt.nfev
    assert record["dist_at"][1] == pytest.approx(np.linalg.norm(opt.mean - 1.0))


def fake(function, d, lr, f_at, f0=10.0):
    return {"function": function, "d": d, "lr": lr, "seed": 0, "budgets": [10 * d, 100 * d], "status": "ok",
            "f0": f0, "f_at": f_at, "dist_at": [1.0] * len(f_at), "safeguard_update_share": 0.0,
            "safeguard_perturbation_share": 0.0}


def test_the_analysis_floors_at_the_target_and_refuses_a_beta_that_diverges(bench):
    """Progress counts down to f = 1e-8 (below it every beta has solved the cell); a beta whose median f at the
    largest budget ends above f0 is unsafe, however many cells it keeps pace in."""
    records = [fake("sphere", 2, 0.1, [1.0, 1e-9]), fake("sphere", 2, 0.3, [1e-2, 1e-20]),
               fake("sphere", 2, 1.0, [1e-3, 1e-30]),
               fake("sphere", 50, 0.1, [1.0, 1e-1]), fake("sphere", 50, 0.3, [1e-1, 1e-3]),
               fake("sphere", 50, 1.0, [1e-2, 1e3])]  # fast at first, then diverged
    cells = {(c["d"], c["budget_per_d"], c["lr"]): c for c in bench.cells_of(records)}
    assert cells[(2, 100, 0.1)]["decades"] == cells[(2, 100, 1.0)]["decades"] == 9.0  # log10 10 - (-8)
    assert cells[(2, 100, 0.1)]["share"] == 1.0 and cells[(2, 10, 0.1)]["share"] == pytest.approx(1 / 4)
    assert cells[(50, 100, 1.0)]["decades"] == -2.0 and cells[(50, 10, 1.0)]["share"] == 1.0
    result = bench.choice(list(cells.values()))
    assert result["per_lr"][1.0]["diverged"] == ["sphere d = 50"] and result["per_lr"][1.0]["pace"] == 3
    assert result["safe"] == [0.1, 0.3] and result["chosen"] == 0.3  # 0.3 keeps pace in 2 cells, 0.1 in 1


def test_a_tiny_grid_writes_its_files_and_resumes(bench, tmp_path, capsys):
    argv = ["--dims", "2", "--lrs", "0.3", "--functions", "sphere", "--seeds", "0", "--workers", "1", "--out",
            str(tmp_path)]
    first = bench.main(argv)
    assert first["meta"]["grid_name"] == "custom" and len(first["records"]) == 1
    assert (tmp_path / "figures" / "lr_sensitivity.png").stat().st_size > 0
    assert "## Per beta" in (tmp_path / "lr_sensitivity.md").read_text()
    more = bench.main(["--dims", "2", "--lrs", "0.3", "1.0", "--functions", "sphere", "--seeds", "0", "--workers",
                       "1", "--out", str(tmp_path), "--resume"])
    assert "1 runs (1 kept)" in capsys.readouterr().out and len(more["meta"]["commands"]) == 2
    kept = [r for r in more["records"] if r["lr"] == 0.3]
    assert kept == [json.loads((tmp_path / "lr_sensitivity.json").read_text())["records"][0]]  # not run again
    stored = json.loads((tmp_path / "lr_sensitivity.json").read_text())
    stored["meta"]["grid_name"] = "full"
    (tmp_path / "lr_sensitivity.json").write_text(json.dumps(stored))
    with pytest.raises(SystemExit) as refused:
        bench.main(argv)
    assert refused.value.code == 2 and "holds the full grid; not replaced by this custom grid" in \
        capsys.readouterr().err
