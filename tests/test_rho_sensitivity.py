"""benchmarks/rho_sensitivity.py: the perturbation it measures, and its output on a tiny grid (a few seconds)."""
import json

import numpy as np
import pytest
from helpers import benchmark_script

import sabo
from sabo.estimators import search_gradients, utilities
from sabo.perturbation import closed_form_lambda


@pytest.fixture(scope="module")
def bench():
    return benchmark_script("rho_sensitivity")


@pytest.mark.parametrize("rho", [0.05, 0.7, 3.0])
def test_measured_perturbation_is_the_closed_form_one(bench, rho):
    """||delta_mu||_{Sigma^-1} read off the optimizer equals ||Sigma^1/2 g'|| / lambda of eq. sec31_5,
    recomputed here from the round's own draws and values, and obeys Lemma rho_gradient's sqrt(2) rho."""
    d, n = 8, 6
    opt = sabo.SABO(np.linspace(-1.0, 1.0, d), popsize=n, lr=0.2, rho=rho, seed=3)
    for _ in range(15):
        sigma2 = opt.sigma2
        X = opt.ask()
        values = bench.sphere(X)
        z = opt.state_dict()["state"]["z"]
        opt.tell(X, values)
        g, G = search_gradients(z, np.sqrt(sigma2), utilities(values, None, baseline="mean", shaping="zscore"))
        lam = closed_form_lambda(g, G, sigma2, rho)
        predicted = np.sqrt(np.sum(sigma2 * g * g)) / lam
        measured = bench.perturbation_mahalanobis(opt)
        assert measured == pytest.approx(predicted, rel=1e-12)
        assert measured <= np.sqrt(2.0) * rho * (1 + 1e-12)
        X = opt.ask()
        opt.tell(X, bench.sphere(X))
    with pytest.raises(ValueError, match="phase 1"):
        bench.perturbation_mahalanobis(opt)


def test_tiny_grid_output(bench, tmp_path):
    out = tmp_path / "r.json"
    argv = ["--dims", "6", "--rhos", "0.01", "--rho-scales", "0.5", "--lrs", "0.3", "--popsizes", "default",
            "--functions", "sphere", "--seeds", "0", "1", "--ingo-iters", "40", "--evals-per-dim", "0",
            "--checkpoints", "4", "--workers", "1", "--json", str(out), "--markdown", str(tmp_path / "r.md"),
            "--figure", str(tmp_path / "fig" / "r")]
    bench.main(argv)
    stored = json.loads(out.read_text())
    assert set(stored) == {"meta", "rules", "cells", "records"}
    n = sabo.gaussian_search.ingo_default_popsize(6)
    records = stored["records"]
    assert len(records) == 2 * 3  # seeds x (INGO + two rho values)
    for r in records:
        # both methods stop at the same evaluation count, f recorded at E k / 4
        assert r["nfev"] == r["budget_evals"] == 40 * n
        assert r["evals_at"] == [0, 10 * n, 20 * n, 30 * n, 40 * n] and len(r["f_at"]) == 5
        assert r["nit"] == (20 if r["method"] == "sabo" else 40) and r["status"] == "ok"
        if r["method"] == "sabo":
            assert 0.0 <= r["safeguard_perturbation_share"] <= 1.0
            assert 0.0 < r["maha_mean"] <= r["maha_max"] <= np.sqrt(2.0) * r["rho"] * (1 + 1e-6)
    cells = stored["cells"]
    assert [(c["rho_kind"], c["seeds"]) for c in cells] == [("absolute", 2), ("sqrt_d", 2)]
    for c in cells:
        ingo = [r for r in records if r["method"] == "ingo"]
        sab = [r for r in records if r["method"] == "sabo" and r["rho"] == c["rho"]]
        assert c["log10_f_ingo_iters"] == pytest.approx(np.median([np.log10(r["f_at"][2]) for r in ingo]), rel=1e-5)
        assert c["gap_evals"] == pytest.approx(
            np.median([np.log10(r["f_at"][-1]) for r in sab]) - np.median([np.log10(r["f_at"][-1]) for r in ingo]),
            rel=1e-4, abs=1e-4)
    assert (tmp_path / "fig" / "r.png").stat().st_size > 0 and (tmp_path / "fig" / "r.svg").stat().st_size > 0
    assert "## Rules rho = c sqrt(d)" in (tmp_path / "r.md").read_text()
    # the tables can be rebuilt from the stored (rounded) records alone, to the stored precision
    again = bench.main([*argv, "--reanalyse"])["cells"]
    assert [sorted(c) for c in again] == [sorted(c) for c in cells]
    for new, old in zip(again, cells):
        for key, value in old.items():
            assert new[key] == (pytest.approx(value, rel=1e-4, abs=1e-9) if isinstance(value, float) else value), key


@pytest.mark.parametrize("argv, message", [
    (["--checkpoints", "3"], "--checkpoints must be even"),
    (["--workers", "3"], "--workers must be 1 or 2"),
    (["--popsizes", "1"], "--popsizes"),
    (["--rhos", "--rho-scales"], "both empty"),
    (["--lrs", "0"], "numbers > 0"),
])
def test_bad_arguments_are_refused(bench, argv, message, capsys):
    with pytest.raises(SystemExit):
        bench.parse(argv)
    assert message in capsys.readouterr().err
