"""benchmarks/rho_sensitivity.py: the perturbation it measures, and its output on a tiny grid (a few seconds)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import benchmark_script

import sabo
from sabo.estimators import search_gradients, utilities
from sabo.perturbation import closed_form_lambda

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "rho_sensitivity.py"


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
    (["--checkpoints", "0"], "argument --checkpoints: must be an integer >= 2"),
    (["--workers", "0"], "argument --workers: must be an integer from 1 to"),
    (["--workers", "two"], "argument --workers: must be an integer from 1 to"),
    (["--popsizes", "1"], "argument --popsizes: must be 'default' or an integer >= 2"),
    (["--rhos", "--rho-scales"], "both empty"),
    (["--lrs", "0"], "argument --lrs: must be a finite number > 0"),
    (["--lrs", "nan"], "argument --lrs: must be a finite number > 0 (got 'nan')"),
    (["--rhos", "inf"], "argument --rhos: must be a finite number > 0"),
    (["--rho-scales", "-0.1"], "argument --rho-scales: must be a finite number > 0"),
    (["--seeds", "-1"], "argument --seeds: must be an integer >= 0 (got '-1')"),
    (["--seeds", "1.5"], "argument --seeds: must be an integer >= 0"),
    (["--dims", "1"], "argument --dims: must be an integer >= 2"),
    (["--ingo-iters", "0"], "argument --ingo-iters: must be an integer >= 1"),
    (["--ingo-iters", "10"], "--ingo-iters must be >= 2 x --checkpoints"),
    (["--evals-per-dim", "nan"], "argument --evals-per-dim: must be a finite number >= 0"),
    (["--tolerance", "1.5"], "argument --tolerance: must be a number in (0, 1]"),
])
def test_bad_arguments_are_refused_in_one_line(bench, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:  # parse() writes nothing
        bench.parse(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_workers_up_to_the_cpu_count(bench, monkeypatch, capsys):
    """No cap for one machine: 1 to os.cpu_count() workers."""
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert bench.parse(["--workers", "8"]).workers == 8
    with pytest.raises(SystemExit) as exit_:
        bench.parse(["--workers", "9"])
    assert exit_.value.code == 2
    assert "argument --workers: must be an integer from 1 to 8" in capsys.readouterr().err


TINY = ["--dims", "6", "--rhos", "0.01", "--rho-scales", "--lrs", "0.3", "--popsizes", "default", "--functions",
        "sphere", "--seeds", "0", "--ingo-iters", "8", "--evals-per-dim", "0", "--checkpoints", "2", "--workers", "1"]


def in_tmp(tmp_path) -> list[str]:
    return ["--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"), "--figure", str(tmp_path / "r")]


def run_script(argv, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("argv", [["--seeds", "-1"], ["--lrs", "nan"], ["--workers", str((os.cpu_count() or 1) + 1)]])
def test_the_script_refuses_bad_numbers_in_one_line_without_a_traceback(argv, tmp_path):
    # a tiny grid in tmp_path: even a script that accepted the argument would write nothing to results/
    done = run_script([*TINY, *in_tmp(tmp_path), *argv], tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("rho_sensitivity.py: error: argument " + argv[0])
    assert list(tmp_path.iterdir()) == []


def test_default_outputs_quick_and_custom_runs_go_elsewhere(bench):
    """The full grid writes the files docs/sabo/choosing-rho.md cites; --quick and any other grid or budget do not."""
    results = bench.ROOT / "results"
    full = bench.parse([])
    assert (full.grid_name, full.json, full.markdown, full.figure) == (
        "full", results / "rho_sensitivity.json", results / "rho_sensitivity.md",
        results / "figures" / "rho_sensitivity")
    quick = bench.parse(["--quick"])
    assert (quick.grid_name, quick.json, quick.markdown, quick.figure) == (
        "quick", results / "quick" / "rho_sensitivity.json", results / "quick" / "rho_sensitivity.md",
        results / "quick" / "figures" / "rho_sensitivity")
    for argv in (["--dims", "10"], ["--ingo-iters", "500"], ["--quick", "--seeds", "0"]):
        custom = bench.parse(argv)
        assert custom.grid_name == "custom" and custom.json == results / "custom" / "rho_sensitivity.json"
    written = {p for a in (quick, custom) for p in (a.json, a.markdown, a.figure.with_suffix(".png"),
                                                     a.figure.with_suffix(".svg"))}
    assert written.isdisjoint(bench.committed_outputs()) and len(bench.committed_outputs()) == 4


def test_a_reduced_run_does_not_replace_a_full_grid_json_unless_forced(tmp_path):
    full = {"meta": {"grid_name": "full", "runs": 2508}, "rules": {}, "cells": [], "records": []}
    stored = tmp_path / "rho_sensitivity.json"
    stored.write_text(json.dumps(full))
    before = stored.read_bytes()
    paths = ["--json", str(stored), "--markdown", str(tmp_path / "r.md"), "--figure", str(tmp_path / "fig" / "r")]
    done = run_script([*TINY, *paths], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "holds the full grid (2508 runs); not replaced by this custom grid (2 runs)" in done.stderr
    assert "--force" in done.stderr and done.stdout == ""
    assert stored.read_bytes() == before and not (tmp_path / "r.md").exists() and not (tmp_path / "fig").exists()
    done = run_script([*TINY, *paths, "--force"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(stored.read_text())["meta"]["grid_name"] == "custom" and (tmp_path / "r.md").exists()


def test_a_reduced_run_does_not_write_over_the_committed_files(bench, monkeypatch, tmp_path, capsys):
    """Whichever output points at a file docs/sabo/choosing-rho.md cites (here a stand-in results/ under tmp_path)."""
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    figure = tmp_path / "results" / "figures" / "rho_sensitivity"
    figure.parent.mkdir(parents=True)
    figure.with_suffix(".svg").write_text("<svg/>")
    argv = ["--quick", "--json", str(tmp_path / "q.json"), "--markdown", str(tmp_path / "q.md"), "--figure"]
    with pytest.raises(SystemExit) as exit_:
        bench.parse([*argv, str(figure)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "rho_sensitivity.svg is the full grid's result that docs/sabo/choosing-rho.md cites" in err
    assert err.count("\n") == 1
    assert bench.parse([*argv, str(figure), "--force"]).force
    assert bench.parse([*argv, str(tmp_path / "elsewhere")]).figure == tmp_path / "elsewhere"
    with pytest.raises(SystemExit):  # and no full-grid JSON to reanalyse at the default path of --quick
        bench.parse(["--quick", "--reanalyse"])
    assert "--reanalyse: no results JSON with records at" in capsys.readouterr().err
